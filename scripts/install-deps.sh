#!/usr/bin/env bash
# Installs what presence needs on Debian 12 when it is missing: the C libraries the Swift
# package links (libwebsockets with its libuv event-loop plugin, OpenSSL, SQLite, hiredis and
# libuv), the Redis server the scale-out tests start on their own ports, and the Python packages
# the live tests use. Safe to run repeatedly; does nothing when all is there.
set -euo pipefail

# libcurl4: FoundationNetworking (URLSession) loads it; presence-client watch polls REST with it.
# libhiredis-dev, libuv1-dev, redis-server: the Redis client (PresenceRedis, on the lws libuv loop)
# and the server its tests start (docs/scaling.md). nginx: the cluster's load balancer, which a
# live test runs with deploy/nginx-cluster.conf in front of three nodes.
packages=(pkg-config libwebsockets-dev libwebsockets-evlib-uv libssl-dev libsqlite3-dev libcurl4 python3-pip chromium chromium-driver
          libhiredis-dev libuv1-dev redis-server nginx)
services=(redis-server nginx)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # Debian's redis-server and nginx packages start a system service (Redis on 6379, nginx on 80)
    # and enable it at boot. Nothing here uses them (tests start their own on free ports), so keep
    # the install from starting them: a policy-rc.d that forbids service starts during this
    # install, when the host has none.
    policy=/usr/sbin/policy-rc.d
    installs_service=false
    for service in "${services[@]}"; do [[ " ${missing[*]} " == *" $service "* ]] && installs_service=true; done
    if $installs_service && [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# presence install-deps: no service starts during this install\nexit 101\n' | $sudo tee "$policy" >/dev/null
        $sudo chmod 755 "$policy"
        trap '$sudo rm -f "$policy"' EXIT
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    # ...and not at boot either (systemd hosts); `systemctl enable --now redis-server` undoes it.
    if [ -d /run/systemd/system ]; then
        for service in "${services[@]}"; do
            [[ " ${missing[*]} " == *" $service "* ]] && { $sudo systemctl disable --quiet "$service" 2>/dev/null || true; }
        done
    fi
fi

if [ "${1:-}" = "--test" ]; then
    python3 - <<'PY' 2>/dev/null || python3 -m pip install -q -r Tests/live/requirements.txt
import websocket, pytest, cryptography, requests, firebase_admin, selenium, yaml
PY
fi
