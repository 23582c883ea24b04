#!/usr/bin/env bash
# bench-nodes.sh N [DURATION [BENCH FLAGS...]]: `voiceroom bench` over HTTP
# against rooms on N nodes on this machine. Process a runs every role with
# JetStream embedded (and its router routes to the others); N-1 more
# processes run only the rooms role on a's JetStream. The Tencent IM
# emulator stands in for IM. Flags after DURATION go to the bench (the last
# of a flag given twice wins), e.g. --mix joinleave. With N=1 it measures
# voiceroom's own process, without the load generator's CPU. BENCH_ROLES
# sets process a's VOICEROOM_ROLES (default: every role): without the
# sinks (api,rooms,relay) it measures what the command path costs before
# any durable reads the events; the events stay in the stream.
# BENCH_ACTIVITIES=K defines K activities (the bench's apps in turn, and in
# turn a gift_value_sent, gift_value_received and room_gift_value
# leaderboard, a daily gift_count task and a mic_seconds leaderboard) as the
# load starts, each starting a second later, and prints the activity role's
# scoring over the rest of the load window next to what the activity and
# list projector durables acked in it. It prints the gifts the PK scorer
# (durable pk) acked in the load window too: with --mix gifts-pk every
# load room is at battle, with --mix gifts none is (alternate them for a
# gift's cost at battle; BENCH_DRAIN_PK=1 counts the CPU until the PK
# scorer is done, below).
# BENCH_HEAP=DIR measures node a's whole process per loaded room against
# the same process at 0 rooms: each time after a GC (the operators'
# /debug/pprof/heap?gc=1), its heap in use and RSS before the bench's setup
# and after its load, and the heap profiles 0.heap and loaded.heap in DIR
# (compare: go tool pprof -base DIR/0.heap DIR/loaded.heap). Give the load
# a fixed --rate for figures that compare across runs, and thousands of
# rooms: what the process holds whatever the rooms (JetStream's block
# cache, connection buffers) counts per room too. GODEBUG=memprofilerate=8192
# in the environment makes the profiles exact to a few KiB, e.g.
#   BENCH_HEAP=/tmp/heap bash deploy/bench-nodes.sh 1 20s --rooms 3000 --mix joinleave --rate 150
#
#   go build -o bin/voiceroom ./cmd/voiceroom
#   bash deploy/bench-nodes.sh 3 30s
#   bash deploy/bench-nodes.sh 1 30s --mix joinleave
#   BENCH_ROLES=api,rooms,relay bash deploy/bench-nodes.sh 1 60s --list-clients 0
#   BENCH_ACTIVITIES=10 bash deploy/bench-nodes.sh 1 60s --mix mixed
#   BENCH_DRAIN_PK=1 bash deploy/bench-nodes.sh 1 30s --mix gifts-pk --rooms 200 --users 200 --rate 40
#
# BENCH_MYSQL_PORT (default 3306) names the MariaDB to use: a server of
# the bench's own (e.g. one started on 3317 with mariadb-install-db and
# mariadbd --port 3317) keeps other clients' work out of its CPU, which
# is then read from the process listening on that port alone.
#
# It needs MySQL (root, no password, on 127.0.0.1:3306: a database
# vr_nodes_bench is created and dropped) and Redis, as deploy/services.sh
# starts them, and the ports 24222, 28080-28084 and 29091-29094. It prints
# the bench's table, the CPU seconds of every voiceroom process and of
# MariaDB during the load window, and each node's partitions and requests.
set -uo pipefail
N=${1:-1}
DUR=${2:-30s}
shift $(($# < 2 ? $# : 2))
cd "$(dirname "$0")/.."
BIN=./bin/voiceroom
DB=vr_nodes_bench
MYSQL_PORT=${BENCH_MYSQL_PORT:-3306}
my() { mysql -uroot -h127.0.0.1 -P"$MYSQL_PORT" "$@"; }
my -e "DROP DATABASE IF EXISTS $DB; CREATE DATABASE $DB" || exit 1
export VOICEROOM_MYSQL_DSN="root@tcp(127.0.0.1:$MYSQL_PORT)/$DB"
export VOICEROOM_JWT_SECRET=bench-nodes-secret-0123456789abcdef
# The bench registers its apps with keys of their own, sealed with this key,
# which serve, the bench and token share; the single secret is allowed, as
# in development (serve refuses to start on it alone otherwise).
export VOICEROOM_APPS_SECRET_KEY=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n') VOICEROOM_DEV_SINGLE_SECRET=true
export VOICEROOM_LOG_LEVEL=warn
# What `voiceroom bench --inprocess` sets too.
export VOICEROOM_HTTP_RATE_PER_USER=1000 VOICEROOM_HTTP_RATE_BURST=1000 VOICEROOM_PPROF=true
export VOICEROOM_TIM_DOMAIN=http://127.0.0.1:28080 VOICEROOM_TIM_SDKAPPID=1400000001 VOICEROOM_TIM_ADMIN=administrator VOICEROOM_TIM_SECRET_KEY=voiceroom-dev-im-secret
T=$(mktemp -d)
pids=()
cleanup() {
  kill -TERM "${pids[@]}" 2>/dev/null
  wait
  my -e "DROP DATABASE IF EXISTS $DB"
  echo "logs in $T"
}
trap cleanup EXIT
# The nodes sign their IM calls: they start only once the emulator proved it
# is the one started here (not something else holding port 28080).
key=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
VOICEROOM_IMEMU_PROOF_KEY=$key $BIN imemu --listen 127.0.0.1:28080 --sdkappid 1400000001 --admin administrator --secret-key voiceroom-dev-im-secret >"$T/imemu.log" 2>&1 &
pids+=($!)
if ! VOICEROOM_IMEMU_PROOF_KEY=$key $BIN imemu verify --url http://127.0.0.1:28080 --wait 30s; then
  cat "$T/imemu.log" >&2
  exit 1
fi
# MariaDB's default 151 connections are shared by every process and the bench.
VOICEROOM_MYSQL_MAX_OPEN_CONNS=32 VOICEROOM_NATS_LISTEN=127.0.0.1:24222 VOICEROOM_HTTP_ADDR=127.0.0.1:28081 \
  VOICEROOM_OPS_ADDR=127.0.0.1:29091 VOICEROOM_DATA_DIR="$T/a" VOICEROOM_NODE_ID=a \
  env ${BENCH_ROLES:+VOICEROOM_ROLES=$BENCH_ROLES} $BIN serve >"$T/a.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:28081/readyz >/dev/null && break; sleep 0.5; done
for i in $(seq 2 "$N"); do
  VOICEROOM_MYSQL_MAX_OPEN_CONNS=16 VOICEROOM_ROLES=rooms VOICEROOM_NATS_URL=nats://127.0.0.1:24222 \
    VOICEROOM_HTTP_ADDR=127.0.0.1:2808$((i + 1)) VOICEROOM_OPS_ADDR=127.0.0.1:2909$((i + 1)) \
    VOICEROOM_DATA_DIR="$T/n$i" VOICEROOM_NODE_ID=n$i VOICEROOM_MIGRATE_ON_START=false $BIN serve >"$T/n$i.log" 2>&1 &
  pids+=($!)
done
sleep 4 # the nodes take their shares
cpu() {
  local s=0 p f
  for p in "$@"; do
    read -r -a f <"/proc/$p/stat"
    s=$((s + f[13] + f[14]))
  done
  echo $s
}
vpids=("${pids[@]:1}")
# heapnow NAME: node a after a GC: its heap profile in $BENCH_HEAP/NAME.heap,
# and "heap_in_use_bytes rss_bytes".
heapnow() {
  curl -sf -o "$BENCH_HEAP/$1.heap" "http://127.0.0.1:29091/debug/pprof/heap?gc=1" || echo "no heap profile of node a" >&2
  echo "$(curl -sf http://127.0.0.1:29091/metrics | awk '$1 == "go_memstats_heap_inuse_bytes" { printf "%.0f", $2 }') $(awk '/^VmRSS/ { print $2 * 1024 }' "/proc/${pids[1]}/status")"
}
if [ -n "${BENCH_HEAP:-}" ]; then
  mkdir -p "$BENCH_HEAP"
  read -r heap0 rss0 <<<"$(heapnow 0)"
fi
if [ "$MYSQL_PORT" = 3306 ]; then
  maria=$(pgrep -x mariadbd || pgrep -x mysqld)
else
  maria=$(ss -ltnp "sport = :$MYSQL_PORT" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
fi
$BIN bench --url http://127.0.0.1:28081 --ops-url http://127.0.0.1:29091 --nats nats://127.0.0.1:24222 \
  --im-emulator http://127.0.0.1:28080 --rooms 1000 --clients 64 --duration "$DUR" --drain-rows 0 --quiet \
  --json "$T/bench.json" "$@" >"$T/bench.out" 2>&1 &
bp=$!
until grep -q 'bench: load' "$T/bench.out" 2>/dev/null; do
  sleep 0.2
  kill -0 $bp 2>/dev/null || break
done
# metric SERIES: the sum of node a's series starting with SERIES.
metric() { curl -sf http://127.0.0.1:29091/metrics | awk -v s="$1" 'index($0, s) == 1 { v += $NF } END { printf "%.0f", v }'; }
ACKED_PK='voiceroom_bus_messages_acked_total{consumer="pk"'
k0=$(metric "$ACKED_PK")
c0=$(cpu "${vpids[@]}")
m0=$(cpu $maria)
t0=$(date +%s%N)
nap() { [ "$1" -gt 0 ] && sleep "$1"; }
# seen: the distinct events the activities counted, and the (event,
# activity) rows.
seen() { my -N -e "SELECT COUNT(DISTINCT event_id), COUNT(*) FROM $DB.activity_seen" | tr '\t' ' '; }
LAG=voiceroom_activity_score_lag_seconds
ACKED_ACT='voiceroom_bus_messages_acked_total{consumer="activity"'
ACKED_PROJ='voiceroom_bus_messages_acked_total{consumer="listprojector"'
if [ "${BENCH_ACTIVITIES:-0}" -gt 0 ]; then
  now=$(($(date +%s%N) / 1000000))
  metrics=(gift_value_sent gift_value_received room_gift_value gift_count mic_seconds)
  for i in $(seq 0 $((BENCH_ACTIVITIES - 1))); do
    app=bench$([ $((i % 2)) -eq 0 ] && echo a || echo b)
    m=${metrics[$(((i / 2) % 5))]}
    if [ "$m" = gift_count ]; then
      kind='"kind":"task","target":10,"period":"day","reward_coins":1'
    else
      kind='"kind":"leaderboard","rewards":[{"from_rank":1,"to_rank":10,"coins":100}]'
    fi
    tok=$($BIN token --app "$app" --role admin 2>>"$T/token.err")
    curl -sf -o /dev/null -X POST -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
      http://127.0.0.1:28081/admin/v1/activities -d '{"name":"bench '"$i $m"'",'"$kind"',"metric":"'"$m"'","starts_at_ms":'$((now + 1000))',"ends_at_ms":'$((now + 3600000))'}' ||
      echo "activity $i ($app, $m) not defined" >&2
  done
  nap $(((now + 1000) / 1000 - $(date +%s) + 1))
  ta=$(date +%s%N)
  read -r e0 r0 <<<"$(seen)"
  a0=$(metric "$ACKED_ACT") p0=$(metric "$ACKED_PROJ") ls0=$(metric ${LAG}_sum) lc0=$(metric ${LAG}_count)
  nap $(((t0 / 1000000000) + ${DUR%s} - $(date +%s)))
else
  sleep "${DUR%s}"
fi
c1=$(cpu "${vpids[@]}")
m1=$(cpu $maria)
k1=$(metric "$ACKED_PK")
# BENCH_DRAIN_PK=1 reads the CPU again once the PK scorer is done (its
# acked count still for 3 s, at most 10 min after the window): the
# scoring of the load's gifts that lags the window counts too.
drained=""
if [ "${BENCH_DRAIN_PK:-0}" = 1 ]; then
  prev=$k1 still=0 td=$(date +%s)
  while [ $still -lt 3 ] && [ $(($(date +%s) - td)) -lt 600 ]; do
    sleep 1
    k2=$(metric "$ACKED_PK")
    if [ "$k2" = "$prev" ]; then still=$((still + 1)); else still=0 prev=$k2; fi
  done
  c2=$(cpu "${vpids[@]}")
  m2=$(cpu $maria)
  drained="from the load's start until the PK scorer was done ($(($(date +%s) - td - 3)) s after the window): voiceroom $(awk "BEGIN{print ($c2-$c0)/100}") CPU-s, MariaDB $(awk "BEGIN{print ($m2-$m0)/100}") CPU-s; the PK scorer acked $((prev - k0)) gifts"
fi
if [ "${BENCH_ACTIVITIES:-0}" -gt 0 ]; then
  tb=$(date +%s%N)
  read -r e1 r1 <<<"$(seen)"
  a1=$(metric "$ACKED_ACT") p1=$(metric "$ACKED_PROJ") ls1=$(metric ${LAG}_sum) lc1=$(metric ${LAG}_count)
  secs=$(awk "BEGIN{print ($tb-$ta)/1e9}")
  # What the load offered the activities in the window: the events of the
  # types they score, committed.
  offered=$(my -N -e "SELECT COUNT(*) FROM $DB.room_outbox WHERE created_at_ms >= $((ta / 1000000)) AND created_at_ms < $((tb / 1000000))
    AND event_type IN ('RoomGiftSent', 'RoomMicUp', 'RoomMicDown', 'RoomMicChanged', 'RoomUserLeft', 'RoomUserKicked')")
  rate() { awk "BEGIN{printf \"%.0f\", ($2-$1)/$secs}"; }
  echo "activities: $BENCH_ACTIVITIES defined; over ${secs}s of the load: $(rate 0 "$offered") events/s of the types they score committed; $(rate "$e0" "$e1") events scored/s ($(rate "$r0" "$r1") (event, activity) counts/s), mean lag commit -> scored $(awk "BEGIN{printf \"%.1f\", ($ls1-$ls0)/($lc1-$lc0+1e-9)}") s; durables acked: activity $(rate "$a0" "$a1") events/s, list projector $(rate "$p0" "$p1") events/s"
fi
wait $bp
bx=$?
if [ -n "${BENCH_HEAP:-}" ]; then
  read -r heap1 rss1 <<<"$(heapnow loaded)"
  loaded=$(grep -o '"voiceroom_rooms_loaded": *[0-9]*' "$T/bench.json" | grep -o '[0-9]*$')
  [ -n "$loaded" ] && [ "$loaded" -gt 0 ] && echo "node a against 0 rooms, after a GC: heap in use $(awk "BEGIN{printf \"%.1f\", ($heap1-$heap0)/$loaded/1024}") KiB, RSS $(awk "BEGIN{printf \"%.1f\", ($rss1-$rss0)/$loaded/1024}") KiB per loaded room ($loaded rooms; heap $((heap0 >> 20)) -> $((heap1 >> 20)) MiB, RSS $((rss0 >> 20)) -> $((rss1 >> 20)) MiB; profiles 0.heap, loaded.heap in $BENCH_HEAP)"
fi
echo "bench exit $bx; during the load window: voiceroom (all $N nodes) $(awk "BEGIN{print ($c1-$c0)/100}") CPU-s, MariaDB $(awk "BEGIN{print ($m1-$m0)/100}") CPU-s; the PK scorer acked $((k1 - k0)) gifts"
[ -n "$drained" ] && echo "$drained"
if [ "${BENCH_ACTIVITIES:-0}" -gt 0 ]; then
  curl -sf http://127.0.0.1:29091/metrics | grep -E '^voiceroom_activity_(events_total|events_skipped_total)'
fi
cat "$T/bench.out"
echo "node a:"
curl -sf http://127.0.0.1:29091/metrics | grep -E '^voiceroom_cluster_(leases_held|routed_requests_total)'
for i in $(seq 2 "$N"); do
  echo "node n$i:"
  curl -sf http://127.0.0.1:2909$((i + 1))/metrics | grep -E '^voiceroom_cluster_(leases_held|served_requests_total)'
done
