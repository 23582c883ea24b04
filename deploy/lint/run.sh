#!/usr/bin/env bash
# Lints the API documents with standard checkers, installed here from
# package-lock.json (npm ci, again only when the lock file changed):
#   docs/openapi.yaml  with Redocly CLI, its recommended rules made strict
#                      (docs/redocly.yaml; the exceptions, each justified,
#                      in docs/.redocly.lint-ignore.yaml)
#   docs/asyncapi.yaml with @asyncapi/parser (asyncapi.mjs)
# Exits non-zero on any error or warning. Needs Node.js 20.19+ and npm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
if ! cmp -s package-lock.json node_modules/.voiceroom-lock 2>/dev/null; then
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
  cp package-lock.json node_modules/.voiceroom-lock
fi
cd "$root"
# No usage data sent to Redocly, no check for a newer version.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
status=0
"$here/node_modules/.bin/redocly" lint --config docs/redocly.yaml --format=stylish docs/openapi.yaml || status=1
node "$here/asyncapi.mjs" docs/asyncapi.yaml || status=1
exit "$status"
