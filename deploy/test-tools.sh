#!/usr/bin/env bash
# Installs the programs some tests need and `task run` does not, from
# Debian's packages, when they are missing: chromium (the operators'
# console's browser test, TestConsoleInABrowser) and nginx (the reverse
# proxy test, TestNginxInFrontOfTwoAPIs). The tests run it themselves when
# they find the program missing, and skip, saying why, when it fails; CI
# (.ci/run) runs it before the suite.
#
# Usage: deploy/test-tools.sh [chromium] [nginx]   (default: both)
#
# Needs root and apt-get to install; a package's service is never started
# (nginx is run by its test, on ports of its own). Exits 1, naming what is
# missing, when something could not be installed; idempotent.
set -euo pipefail

log() { printf 'test-tools: %s\n' "$*" >&2; }

want=("$@")
if [ ${#want[@]} -eq 0 ]; then want=(chromium nginx); fi

# has NAME: the program is installed.
has() {
  case $1 in
  chromium) command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
    command -v google-chrome >/dev/null || command -v google-chrome-stable >/dev/null ;;
  nginx) command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] ;;
  *)
    log "unknown tool $1 (chromium, nginx)"
    exit 2
    ;;
  esac
}

missing=()
for t in "${want[@]}"; do
  if has "$t"; then log "$t: installed"; else missing+=("$t"); fi
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  log "missing: ${missing[*]}; install Debian's ${missing[*]} as root (apt-get install ${missing[*]}); the tests that need them skip"
  exit 1
fi

# No service starts from a package's install script (a system nginx on
# port 80 is not what the test wants): policy-rc.d answers "forbidden".
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
apt_get() { apt-get -o DPkg::Lock::Timeout=600 -qq "$@"; }
log "installing ${missing[*]} from Debian's packages"
apt_get update >/dev/null || log "apt-get update failed; trying the install anyway"
failed=()
for t in "${missing[@]}"; do
  if ! apt_get install -y --no-install-recommends "$t" >/dev/null || ! has "$t"; then
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  log "could not install: ${failed[*]}; the tests that need them skip"
  exit 1
fi
log "installed: ${missing[*]}"
