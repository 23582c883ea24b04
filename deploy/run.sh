#!/usr/bin/env bash
# Runs `voiceroom serve` for development (task run). Unless real Tencent IM
# credentials are configured (VOICEROOM_TIM_SDKAPPID or VOICEROOM_TIM_APPS),
# it first starts the local IM emulator (`voiceroom imemu`, on
# VOICEROOM_IMEMU_LISTEN, default 127.0.0.1:18080) and points the bridge and
# the callback guard at it. It lets webhooks go to http:// and loopback URLs
# (the demo's receiver) and turns on development's single-secret mode
# unless those variables are set.
#
# The bridge signs every call, so it is pointed at the emulator only once
# the emulator has proved it is the one this script started: the script
# generates a random key, hands it to the emulator and to `voiceroom imemu
# verify` (in the environment, never on a command line), and the emulator
# must answer a fresh nonce with its HMAC. When the emulator cannot listen
# (the port is taken) or does not prove itself, the script stops with an
# error before serve starts; when the emulator ends while serve runs, it
# stops serve too, so that nothing goes on calling whatever takes the port
# next.
#
# Usage: deploy/run.sh [--under-task] [BIN]   (BIN default ./bin/voiceroom)
#
# Stopping: SIGINT, SIGTERM or SIGHUP to this script or to its process group
# stops serve and the emulator, waits for both, and exits with serve's
# status (0 on a clean stop). With --under-task (the Taskfile's run passes
# it) the same happens when the task process is signalled alone, as a
# script or a supervisor does: go-task keeps SIGINT, SIGTERM and SIGHUP to
# itself, prints `task: Signal received` and goes on waiting for its
# command (go-task/task#1408; `go tool` passes the signal to go-task and no
# further). While it waits, go-task writes nothing else, so this script
# watches the task process's written-bytes count (/proc/PID/io) and stops
# when it grows, or when the task process is gone (killed).
set -euo pipefail

under_task=
if [ "${1:-}" = --under-task ]; then
  under_task=1
  shift
fi
bin=${1:-./bin/voiceroom}

stopping= # set once a signal asked everything to stop
pids=()   # what this script started and must stop
stop() {
  stopping=1
  if [ ${#pids[@]} -gt 0 ]; then kill -TERM "${pids[@]}" 2>/dev/null || true; fi
}
trap stop INT TERM HUP

# waitfor PID waits until PID has exited, also when a signal interrupts the
# wait (bash's wait returns at once then), and returns PID's status.
waitfor() {
  local st=0
  while :; do
    st=0
    wait "$1" || st=$?
    kill -0 "$1" 2>/dev/null || return "$st"
  done
}

# wchar PID prints how many bytes PID has written so far.
wchar() {
  local key val
  while read -r key val; do
    if [ "$key" = wchar: ]; then echo "$val"; return; fi
  done <"/proc/$1/io"
}

# watchtask signals this script when the task process (its parent) was
# told to stop (it printed a line) or is gone. It gives up, saying so, where
# it cannot tell: without /proc, or when go-task relays the commands' output
# itself (an --output mode other than interleaved), so that it writes all along.
watchtask() {
  local task=$PPID before ppid rest
  if ! before=$(wchar "$task" 2>/dev/null) || [ -z "$before" ] ||
    [ "$(readlink "/proc/$task/fd/1")" != "$(readlink /proc/$$/fd/1)" ] ||
    [ "$(readlink "/proc/$task/fd/2")" != "$(readlink /proc/$$/fd/2)" ]; then
    echo "run: cannot watch the task process; stop it with a signal to its process group" >&2
    return 0
  fi
  while sleep 0.25; do
    read -r _ _ _ ppid rest </proc/$$/stat
    if [ "$ppid" != "$task" ] || [ "$(wchar "$task" 2>/dev/null)" != "$before" ]; then
      kill -TERM $$
      return 0
    fi
  done
}

# waitall waits for everything this script started.
waitall() {
  local pid
  for pid in "${pids[@]}"; do waitfor "$pid" || true; done
}

# fail stops what this script started, says why and exits 1.
fail() {
  echo "run: error: $*" >&2
  stop
  waitall
  exit 1
}

emu= # the emulator's pid, when this script started one
if [ -z "${VOICEROOM_TIM_SDKAPPID:-}${VOICEROOM_TIM_APPS:-}" ]; then
  listen=${VOICEROOM_IMEMU_LISTEN:-127.0.0.1:18080}
  rundir=$(mktemp -d "${TMPDIR:-/tmp}/voiceroom-run.XXXXXX")
  trap 'rm -rf "$rundir"' EXIT
  proof_key=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  VOICEROOM_IMEMU_PROOF_KEY=$proof_key "$bin" imemu --listen "$listen" --addr-file "$rundir/imemu.addr" \
    --sdkappid 1400000001 --admin administrator --secret-key voiceroom-dev-im-secret &
  emu=$!
  pids+=("$emu")
  # It writes the address it listens on once it does; it ends at once when
  # it cannot (the port is taken).
  while [ ! -s "$rundir/imemu.addr" ] && [ -z "$stopping" ] && kill -0 "$emu" 2>/dev/null; do
    sleep 0.05
  done
  if [ -z "$stopping" ]; then
    if [ ! -s "$rundir/imemu.addr" ]; then
      fail "the Tencent IM emulator could not listen on $listen (its error is above): stop what holds that port, or move the emulator with VOICEROOM_IMEMU_LISTEN=127.0.0.1:PORT"
    fi
    addr=$(<"$rundir/imemu.addr")
    if ! VOICEROOM_IMEMU_PROOF_KEY=$proof_key "$bin" imemu verify --url "http://$addr"; then
      fail "what answers on $addr is not the emulator this run started; the IM bridge is not pointed at it"
    fi
    export VOICEROOM_TIM_DOMAIN="http://$addr"
    export VOICEROOM_TIM_SDKAPPID=1400000001
    export VOICEROOM_TIM_ADMIN=administrator
    export VOICEROOM_TIM_SECRET_KEY=voiceroom-dev-im-secret
    echo "run: Tencent IM emulator on http://$addr, proved with this run's key (inspect: curl http://$addr/_emu/stats)" >&2
  fi
fi

# Development: the demo's webhook receiver listens on http://127.0.0.1, and
# an identity provider's key set may be served over http (the variables,
# when set, win).
export VOICEROOM_WEBHOOKS_ALLOW_HTTP=${VOICEROOM_WEBHOOKS_ALLOW_HTTP:-true}
export VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=${VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES:-true}
export VOICEROOM_AUTH_JWKS_ALLOW_HTTP=${VOICEROOM_AUTH_JWKS_ALLOW_HTTP:-true}
# Development: the seed gave app demo a key of its own, which `voiceroom
# token --app demo` signs with; for any other app code the walk-throughs
# try, token signs with the single development secret, which serve accepts
# for every app in this mode only (docs/auth.md).
export VOICEROOM_DEV_SINGLE_SECRET=${VOICEROOM_DEV_SINGLE_SECRET:-true}
# Development: an activity settles 2 s after its end (production's grace is
# 30 s, for a relay backlog at the deadline), so the README's campaign
# walk-through pays its winners at once.
export VOICEROOM_ACTIVITY_SETTLE_GRACE=${VOICEROOM_ACTIVITY_SETTLE_GRACE:-2s}

status=0
if [ -z "$stopping" ]; then
  "$bin" serve &
  srv=$!
  pids+=("$srv")
  if [ -n "$under_task" ]; then
    watchtask &
    pids+=("$!")
  fi
  # Until serve or the emulator ends (a signal interrupts the wait: wait
  # again, serve ends once stop has signalled it).
  watched=("$srv")
  if [ -n "$emu" ]; then watched+=("$emu"); fi
  ended=
  while [ -z "${ended:-}" ]; do
    rc=0
    wait -n -p ended "${watched[@]}" || rc=$?
    if [ "$rc" = 127 ]; then break; fi # none of them left to wait for
  done
  if [ "${ended:-}" = "$emu" ] && [ -z "$stopping" ]; then
    echo "run: error: the Tencent IM emulator ended; stopping serve, so that the IM bridge does not call whatever takes its port next" >&2
    status=1
  fi
  stop
  st=0
  waitfor "$srv" || st=$?
  if [ "$status" = 0 ]; then status=$st; fi
fi
# serve has ended (asked to, or by itself): stop the rest and wait for it.
stop
waitall
exit "$status"
