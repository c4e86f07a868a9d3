#!/usr/bin/env bash
# System packages some integration tests use: Debian's docker-compose (validates
# docker-compose.yml with `docker-compose config -q`; no Docker engine is needed) and iproute2
# (`ip netns` for the separate-hosts test), chromium and chromium-driver (the service's status page
# is checked in headless Chromium with selenium). Idempotent and quiet: installs only what is missing,
# and does nothing (with a note) where apt-get can't be used, so the tests that need a package
# skip with their own message instead.
set -euo pipefail

missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: no apt-get; not installing ${missing[*]} (the tests that need them skip)" >&2
    exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=(sudo -n)
    else
        echo "install-system-deps: not root; not installing ${missing[*]} (the tests that need them skip)" >&2
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { "${sudo[@]}" apt-get update -qq && \
       "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "install-system-deps: apt-get failed installing ${missing[*]}" >&2
    exit 1
fi
echo "install-system-deps: installed ${missing[*]}" >&2
