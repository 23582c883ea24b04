#!/usr/bin/env bash
# Makes MariaDB (or MySQL) and Redis reachable on loopback for voiceroom and
# its tests. For each service, in this order: use a running one; else start an
# installed one; else install it from Debian's packages and start it. Then it
# makes sure the DSN's user can log in over TCP (a fresh Debian MariaDB lets
# root in only through the Unix socket). Nothing else: what only some tests
# need (Chromium, nginx) is deploy/test-tools.sh's, which those tests run
# themselves.
#
# Then, for the tests that run against Redis's distributed modes, on
# loopback only and without persistence: a Redis Cluster of three masters
# (ports VOICEROOM_TEST_REDIS_CLUSTER_PORTS, default 7001 7002 7003; each
# with cluster-node-timeout 2s) and a Sentinel setup (a master on 6380, its
# replica on 6381, one sentinel on 26379 watching it as "voiceroom";
# VOICEROOM_TEST_REDIS_SENTINEL_PORTS overrides the three ports). Their
# files live under ${TMPDIR:-/tmp}/voiceroom-redis-*. A node already
# listening is used as it is, a cluster already formed is kept; so a second
# run takes a moment. VOICEROOM_TEST_REDIS_EXTRA=0 skips both.
#
# `services.sh redis-addrs cluster|sentinel` prints the addresses a test
# run passes in VOICEROOM_TEST_REDIS_ADDRS (Taskfile's test:redis).
#
# And, for the MySQL read-replica tests and benchmark, a MariaDB pair of the
# suite's own: a source with binary logging on 127.0.0.1:3307 and a replica
# of it on 127.0.0.1:3308 (VOICEROOM_TEST_MYSQL_PAIR_PORTS overrides the
# two ports), GTID replication, root without a password on loopback, data
# under ${TMPDIR:-/tmp}/voiceroom-mysql-pair/PORT. The system server on
# 3306 is left as it is: turning its binary log on would need a restart.
# A running pair is kept; a stopped one is started again (the replica
# resumes from where it was). VOICEROOM_TEST_MYSQL_EXTRA=0 skips it.
# `services.sh mysql-addrs pair` prints the source's and the replica's
# addresses.
#
# `services.sh promtool` does only one thing instead: makes sure Prometheus's
# promtool is installed (Debian's prometheus package), for the rule checks
# of `task lint:rules` (CI runs them; `task run` and `task test` never
# install it). The package's own Prometheus server is stopped and disabled
# where systemd started it: it would take port 9090, voiceroom's operators'
# listener.
#
# Reads VOICEROOM_MYSQL_DSN (default root:@tcp(127.0.0.1:3306)/voiceroom) and
# VOICEROOM_REDIS_ADDR (default 127.0.0.1:6379). Only loopback addresses are
# managed; a remote service is left alone and only checked.
# Idempotent; safe to run before every test run. Needs root to install.
set -euo pipefail

dsn=${VOICEROOM_MYSQL_DSN:-root:@tcp(127.0.0.1:3306)/voiceroom}
redis_addr=${VOICEROOM_REDIS_ADDR:-127.0.0.1:6379}
wait_secs=${SERVICES_WAIT_SECONDS:-60}

log() { printf 'services: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

apt_install() {
  [[ $(id -u) == 0 ]] || die "$* missing and not root: install $* yourself"
  command -v apt-get >/dev/null || die "$* missing and no apt-get on this machine"
  log "installing $* from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || log "apt-get update failed; trying the install anyway"
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- promtool, alone (see above)
if [[ ${1:-} == promtool ]]; then
  if ! command -v promtool >/dev/null; then
    apt_install prometheus
    if [[ -d /run/systemd/system ]] && command -v systemctl >/dev/null; then
      log "stopping the prometheus service the package started (only promtool is wanted; it would take port 9090)"
      systemctl disable --now prometheus >/dev/null 2>&1 || log "warning: could not stop the prometheus service"
    fi
  fi
  command -v promtool >/dev/null || die "no promtool after installing prometheus"
  log "ready: $(promtool --version 2>&1 | head -n 1)"
  exit 0
fi

cluster_ports=(${VOICEROOM_TEST_REDIS_CLUSTER_PORTS:-7001 7002 7003})
sentinel_ports=(${VOICEROOM_TEST_REDIS_SENTINEL_PORTS:-6380 6381 26379})
if [[ ${1:-} == redis-addrs ]]; then
  case ${2:-} in
  cluster) printf '127.0.0.1:%s\n' "${cluster_ports[@]}" | paste -sd, - ;;
  sentinel) echo "127.0.0.1:${sentinel_ports[2]}" ;;
  *) die "redis-addrs: want cluster or sentinel" ;;
  esac
  exit 0
fi
pair_ports=(${VOICEROOM_TEST_MYSQL_PAIR_PORTS:-3307 3308})
if [[ ${1:-} == mysql-addrs ]]; then
  [[ ${2:-} == pair ]] || die "mysql-addrs: want pair"
  printf '127.0.0.1:%s\n' "${pair_ports[@]}" | paste -sd, -
  exit 0
elif [[ $# -gt 0 ]]; then
  die "unknown argument $1 (want none, promtool, redis-addrs or mysql-addrs)"
fi

# user:password@tcp(host:port)/db
if [[ $dsn =~ ^([^:@]*)(:([^@]*))?@tcp\(([^:\)]+):([0-9]+)\) ]]; then
  my_user=${BASH_REMATCH[1]}; my_pass=${BASH_REMATCH[3]}
  my_host=${BASH_REMATCH[4]}; my_port=${BASH_REMATCH[5]}
else
  die "cannot read user and tcp(host:port) from VOICEROOM_MYSQL_DSN"
fi
redis_host=${redis_addr%:*}; redis_port=${redis_addr##*:}

is_loopback() { [[ $1 == 127.* || $1 == localhost || $1 == ::1 ]]; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() { # host port name
  local i
  for ((i = 0; i < wait_secs * 5; i++)); do
    port_open "$1" "$2" && return 0
    sleep 0.2
  done
  die "$3 did not come up on $1:$2 within ${wait_secs}s"
}

mysql_client() {
  if command -v mariadb >/dev/null; then echo mariadb; elif command -v mysql >/dev/null; then echo mysql; fi
}

tcp_login_ok() {
  local client; client=$(mysql_client)
  [[ -n $client ]] || return 0 # no client to check with; the app reports a bad login clearly
  MYSQL_PWD=$my_pass "$client" --protocol=TCP -h "$my_host" -P "$my_port" -u "$my_user" -e 'SELECT 1' >/dev/null 2>&1
}

start_mariadb() {
  local daemon
  daemon=$(command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd /usr/sbin/mysqld 2>/dev/null | head -1 || true)
  if [[ -z $daemon ]]; then
    apt_install mariadb-server mariadb-client
    daemon=$(command -v mariadbd || ls /usr/sbin/mariadbd 2>/dev/null | head -1)
  fi
  [[ -n $daemon ]] || die "no mariadbd after installing mariadb-server"
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
  if [[ ! -d /var/lib/mysql/mysql ]]; then
    log "initialising the MariaDB data directory"
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null 2>&1 || mysql_install_db --user=mysql >/dev/null
  fi
  log "starting $daemon"
  if command -v start-stop-daemon >/dev/null; then
    start-stop-daemon --start --oknodo --background --exec "$daemon" -- --user=mysql --bind-address=127.0.0.1 --port="$my_port"
  else
    nohup "$daemon" --user=mysql --bind-address=127.0.0.1 --port="$my_port" >/dev/null 2>&1 &
  fi
  wait_port "$my_host" "$my_port" MariaDB
}

ensure_tcp_login() {
  tcp_login_ok && return 0
  [[ $my_user == root && -z $my_pass ]] || die "cannot log in to MySQL as $my_user over TCP; fix the credentials in VOICEROOM_MYSQL_DSN"
  local client; client=$(mysql_client)
  log "allowing root to log in over TCP without a password (local development database)"
  # Over the Unix socket, root is let in by unix_socket auth.
  "$client" -u root <<'SQL' || die "could not change root's authentication; see the MariaDB log"
ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
  tcp_login_ok || die "root still cannot log in over TCP"
}

# --- MySQL / MariaDB
if port_open "$my_host" "$my_port"; then
  log "mysql: using the server running on $my_host:$my_port"
elif is_loopback "$my_host"; then
  start_mariadb
else
  die "mysql at $my_host:$my_port is not reachable (remote servers are not managed here)"
fi
if is_loopback "$my_host"; then ensure_tcp_login; fi

# --- Redis
if [[ -z $redis_addr ]]; then
  log "redis: VOICEROOM_REDIS_ADDR is empty; the cache is off"
elif port_open "$redis_host" "$redis_port"; then
  log "redis: using the server running on $redis_addr"
elif is_loopback "$redis_host"; then
  command -v redis-server >/dev/null || apt_install redis-server
  log "starting redis-server on $redis_addr"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --dir /tmp --logfile /tmp/voiceroom-redis.log
  wait_port "$redis_host" "$redis_port" Redis
else
  die "redis at $redis_addr is not reachable (remote servers are not managed here)"
fi
# --- Redis Cluster and Sentinel, for the tests (see the top)
run_dir=${TMPDIR:-/tmp}
redis_node() { # port dir args...: start a redis-server on 127.0.0.1:port unless one listens
  local port=$1 dir=$2; shift 2
  port_open 127.0.0.1 "$port" && return 0
  mkdir -p "$dir"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" "$@"
}
start_redis_cluster() {
  local dir=$run_dir/voiceroom-redis-cluster p addrs=()
  for p in "${cluster_ports[@]}"; do
    # A node's cluster state is its nodes.conf: a stale one (a node that
    # was stopped while its peers lived on) is dropped so it starts blank.
    port_open 127.0.0.1 "$p" || rm -f "$dir/$p/nodes.conf"
    redis_node "$p" "$dir/$p" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000
    addrs+=("127.0.0.1:$p")
  done
  for p in "${cluster_ports[@]}"; do wait_port 127.0.0.1 "$p" "Redis Cluster node"; done
  if [[ $(redis-cli -p "${cluster_ports[0]}" cluster info | tr -d '\r' | grep '^cluster_state:') == cluster_state:ok ]]; then
    log "redis cluster: using the one on ${addrs[*]}"
    return 0
  fi
  if [[ $(redis-cli -p "${cluster_ports[0]}" cluster info | tr -d '\r' | grep '^cluster_known_nodes:') != cluster_known_nodes:1 ]]; then
    die "redis cluster on ${addrs[*]}: formed but not ok; stop its nodes (redis-cli -p PORT shutdown) and run again"
  fi
  log "redis cluster: creating it on ${addrs[*]}"
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  local i
  for ((i = 0; i < wait_secs * 5; i++)); do
    local ok=1
    for p in "${cluster_ports[@]}"; do
      [[ $(redis-cli -p "$p" cluster info | tr -d '\r' | grep '^cluster_state:') == cluster_state:ok ]] || ok=0
    done
    ((ok)) && return 0
    sleep 0.2
  done
  die "redis cluster on ${addrs[*]} not ok within ${wait_secs}s"
}
start_redis_sentinel() {
  local dir=$run_dir/voiceroom-redis-sentinel m=${sentinel_ports[0]} r=${sentinel_ports[1]} s=${sentinel_ports[2]}
  redis_node "$m" "$dir/$m"
  # A replica of whichever node is the master now (a test's failover may
  # have swapped them).
  if ! port_open 127.0.0.1 "$r"; then
    local master=$m
    if port_open 127.0.0.1 "$s"; then
      master=$(redis-cli -p "$s" sentinel get-master-addr-by-name voiceroom 2>/dev/null | sed -n 2p)
      master=${master:-$m}
    fi
    redis_node "$r" "$dir/$r" --replicaof 127.0.0.1 "$master"
  fi
  if ! port_open 127.0.0.1 "$s"; then
    mkdir -p "$dir/$s"
    cat >"$dir/$s/sentinel.conf" <<CONF
port $s
bind 127.0.0.1
daemonize yes
dir $dir/$s
logfile $dir/$s/sentinel.log
pidfile $dir/$s/sentinel.pid
sentinel monitor voiceroom 127.0.0.1 $m 1
sentinel down-after-milliseconds voiceroom 1000
sentinel failover-timeout voiceroom 5000
CONF
    redis-server "$dir/$s/sentinel.conf" --sentinel
  fi
  for p in "$m" "$r" "$s"; do wait_port 127.0.0.1 "$p" "Redis (sentinel setup)"; done
  log "redis sentinel: master voiceroom watched on 127.0.0.1:$s (nodes $m, $r)"
}
if [[ ${VOICEROOM_TEST_REDIS_EXTRA:-1} != 0 ]]; then
  { command -v redis-server && command -v redis-cli; } >/dev/null || apt_install redis-server
  start_redis_cluster
  start_redis_sentinel
fi

# --- A MariaDB source and replica, for the replica tests (see the top)
pair_sql() { # port sql...: run statements as root over TCP
  local port=$1; shift
  "$(mysql_client)" --protocol=TCP -h 127.0.0.1 -P "$port" -u root -N -e "$*"
}
pair_node() { # port server-id extra-args...: a mariadbd on 127.0.0.1:port unless one listens
  local port=$1 id=$2 dir=$run_dir/voiceroom-mysql-pair/$1 daemon as=()
  shift 2
  port_open 127.0.0.1 "$port" && return 0
  daemon=$(command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd /usr/sbin/mysqld 2>/dev/null | head -1)
  [[ -n $daemon ]] || die "no mariadbd for the test pair"
  [[ $(id -u) == 0 ]] && as=(--user=mysql)
  if [[ ! -d $dir/data/mysql ]]; then
    rm -rf "$dir" && mkdir -p "$dir/data" "$dir/tmp"
    [[ $(id -u) == 0 ]] && chown -R mysql "$dir"
    TMPDIR=$dir/tmp mariadb-install-db --no-defaults "${as[@]}" --datadir="$dir/data" --auth-root-authentication-method=normal \
      --skip-test-db >"$dir/install.log" 2>&1 || die "mariadb-install-db for port $port failed; see $dir/install.log"
  fi
  # Its own temporary directory (made above, or here for a pair made by an
  # older version): a MariaDB server deletes every "#sql" file in it when
  # it starts, in /tmp those of the shared server's running statements.
  mkdir -p "$dir/tmp" && { [[ $(id -u) != 0 ]] || chown mysql "$dir/tmp"; }
  # Small: a test pair, not a production server.
  nohup "$daemon" --no-defaults "${as[@]}" --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
    --socket="$dir/mysqld.sock" --tmpdir="$dir/tmp" --pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" \
    --server-id="$id" --innodb-buffer-pool-size=128M --max-connections=500 "$@" >/dev/null 2>&1 &
  wait_port 127.0.0.1 "$port" "MariaDB (test pair)"
}
start_mysql_pair() {
  local src=${pair_ports[0]} rep=${pair_ports[1]} base=$run_dir/voiceroom-mysql-pair
  # A replica without its source's history (either was removed) starts
  # over: both are made afresh.
  if ! port_open 127.0.0.1 "$src" && ! port_open 127.0.0.1 "$rep" &&
    { [[ ! -d $base/$src/data/mysql ]] || [[ ! -d $base/$rep/data/mysql ]]; }; then
    rm -rf "$base/$src" "$base/$rep"
  fi
  # The binary log of a day is kept: the tests make and drop databases all
  # day, and a replica of a test starts from the position of its start.
  pair_node "$src" 3307 --log-bin="$base/$src/data/binlog" --binlog-format=ROW --binlog-expire-logs-seconds=86400
  pair_node "$rep" 3308 --skip-log-bin
  if [[ -z $(pair_sql "$rep" "SHOW SLAVE STATUS") ]]; then
    log "mysql pair: $rep replicating from $src (GTID, from the source's first binlog)"
    pair_sql "$rep" "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=$src, MASTER_USER='root', MASTER_PASSWORD='',
      MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; START SLAVE;" || die "mysql pair: could not start replication"
  else
    pair_sql "$rep" "START SLAVE" >/dev/null 2>&1 || true # a test may have stopped a thread
  fi
  log "mysql pair: source 127.0.0.1:$src, replica 127.0.0.1:$rep"
}
if [[ ${VOICEROOM_TEST_MYSQL_EXTRA:-1} != 0 ]]; then
  start_mysql_pair
fi

log "ready: mysql $my_host:$my_port, redis ${redis_addr:-off}"
