# Starts and stops a throwaway Mosquitto for the comparison (sourced by compare.sh, not run).
# start_mosquitto PORT: plain MQTT on PORT+1 (Mosquitto needs one), WebSockets on PORT, both on
# 127.0.0.1; anonymous, no persistence, no connection limit, TCP_NODELAY. Sets MQTT_URL, MOSQ_PID.
# With SERVER_CPU set (e.g. 0), the broker runs pinned to that CPU (taskset -c).
MOSQUITTO="${MOSQUITTO:-/usr/sbin/mosquitto}"
MOSQ_PID=""

start_mosquitto() {
    local port="$1"
    if [ ! -x "$MOSQUITTO" ]; then "$(dirname "${BASH_SOURCE[0]}")/install-bench-deps.sh" mosquitto >&2; fi
    if [ ! -x "$MOSQUITTO" ]; then echo "no $MOSQUITTO (apt-get install -y mosquitto)" >&2; exit 1; fi
    MOSQ_DIR="$(mktemp -d -t presence-bench-mosquitto.XXXXXX)"
    cat >"$MOSQ_DIR/mosquitto.conf" <<CONF
per_listener_settings false
allow_anonymous true
persistence false
max_connections -1
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
listener $((port + 1)) 127.0.0.1
listener $port 127.0.0.1
protocol websockets
CONF
    local pin=()
    if [ -n "${SERVER_CPU:-}" ]; then pin=(taskset -c "$SERVER_CPU"); fi
    "${pin[@]}" "$MOSQUITTO" -c "$MOSQ_DIR/mosquitto.conf" >"$MOSQ_DIR/mosquitto.log" 2>&1 &
    MOSQ_PID=$!
    for _ in $(seq 1 50); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then MQTT_URL="ws://127.0.0.1:$port/mqtt"; return; fi
        sleep 0.1
    done
    echo "mosquitto did not start on $port; see $MOSQ_DIR/mosquitto.log" >&2
    exit 1
}

stop_mosquitto() {
    if [ -n "$MOSQ_PID" ] && kill -0 "$MOSQ_PID" 2>/dev/null; then
        kill -TERM "$MOSQ_PID" 2>/dev/null || true
        timeout 10 tail --pid="$MOSQ_PID" -f /dev/null || kill -KILL "$MOSQ_PID" 2>/dev/null || true
    fi
    MOSQ_PID=""
}
