#!/usr/bin/env bash
# Runs `voiceroom serve` for development (task run). Unless real Tencent IM
# credentials are configured (VOICEROOM_TIM_SDKAPPID or VOICEROOM_TIM_APPS),
# it first starts the local IM emulator (`voiceroom imemu`) and points the
# bridge and the callback guard at it. It lets webhooks go to http:// and
# loopback URLs (the demo's receiver) and turns on development's
# single-secret mode unless those variables are set.
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

if [ -z "${VOICEROOM_TIM_SDKAPPID:-}${VOICEROOM_TIM_APPS:-}" ]; then
  listen=${VOICEROOM_IMEMU_LISTEN:-127.0.0.1:18080}
  "$bin" imemu --listen "$listen" --sdkappid 1400000001 --admin administrator \
    --secret-key voiceroom-dev-im-secret &
  pids+=("$!")
  export VOICEROOM_TIM_DOMAIN="http://$listen"
  export VOICEROOM_TIM_SDKAPPID=1400000001
  export VOICEROOM_TIM_ADMIN=administrator
  export VOICEROOM_TIM_SECRET_KEY=voiceroom-dev-im-secret
  echo "run: Tencent IM emulator on http://$listen (inspect: curl http://$listen/_emu/stats)" >&2
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

status=0
if [ -z "$stopping" ]; then
  "$bin" serve &
  srv=$!
  pids+=("$srv")
  if [ -n "$under_task" ]; then
    watchtask &
    pids+=("$!")
  fi
  waitfor "$srv" || status=$?
fi
# serve has ended (asked to, or by itself): stop the rest and wait for it.
stop
for pid in "${pids[@]}"; do waitfor "$pid" || true; done
exit "$status"
