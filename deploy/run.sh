#!/usr/bin/env bash
# Runs `voiceroom serve` for development (task run). Unless real Tencent IM
# credentials are configured (VOICEROOM_TIM_SDKAPPID or VOICEROOM_TIM_APPS),
# it first starts the local IM emulator (`voiceroom imemu`) and points the
# bridge and the callback guard at it.
set -euo pipefail
bin=${1:-./bin/voiceroom}

if [ -z "${VOICEROOM_TIM_SDKAPPID:-}${VOICEROOM_TIM_APPS:-}" ]; then
  listen=${VOICEROOM_IMEMU_LISTEN:-127.0.0.1:18080}
  "$bin" imemu --listen "$listen" --sdkappid 1400000001 --admin administrator \
    --secret-key voiceroom-dev-im-secret &
  emu=$!
  trap 'kill "$emu" 2>/dev/null || true; wait "$emu" 2>/dev/null || true' EXIT
  export VOICEROOM_TIM_DOMAIN="http://$listen"
  export VOICEROOM_TIM_SDKAPPID=1400000001
  export VOICEROOM_TIM_ADMIN=administrator
  export VOICEROOM_TIM_SECRET_KEY=voiceroom-dev-im-secret
  echo "run: Tencent IM emulator on http://$listen (inspect: curl http://$listen/_emu/stats)" >&2
fi

"$bin" serve &
srv=$!
trap 'kill -TERM "$srv" 2>/dev/null || true' INT TERM
wait "$srv" || status=$?
wait "$srv" 2>/dev/null || true
exit "${status:-0}"
