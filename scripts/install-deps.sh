#!/usr/bin/env bash
# Installs what presence needs on Debian 12 when it is missing: the C libraries the Swift
# package links (libwebsockets with its libuv event-loop plugin, OpenSSL, SQLite) and the
# Python packages the live tests use. Safe to run repeatedly; does nothing when all is there.
set -euo pipefail

# libcurl4: FoundationNetworking (URLSession) loads it; presence-client watch polls REST with it.
packages=(pkg-config libwebsockets-dev libwebsockets-evlib-uv libssl-dev libsqlite3-dev libcurl4 python3-pip chromium chromium-driver)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--test" ]; then
    python3 - <<'PY' 2>/dev/null || python3 -m pip install -q -r Tests/live/requirements.txt
import websocket, pytest, cryptography, requests, firebase_admin, selenium, yaml
PY
fi
