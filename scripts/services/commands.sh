# shellcheck shell=bash
# Sourced by scripts/services.sh (its settings and helpers are in scope).
# The commands of scripts/services.sh (start, stop, status, check, env) over the services.

service_pid() { "${1}_pid"; }

# Start one service (in a background subshell of cmd_start) and report.
start_one() { # name
    local name=$1 t0 st p
    t0=$(now_ms)
    # a subshell outside any `if`, so that `set -e` holds inside the start function
    set +e
    (set -e; "${name}_start")
    st=$?
    set -e
    if ((st == 0)) && p=$(service_pid "$name"); then
        say "$name: ready in $(secs_since "$t0")s (pid $p, $("${name}_describe"))"
    else
        # do not leave a half-started server behind
        if service_pid "$name" >/dev/null; then "${name}_stop" || true; fi
        say "$name: FAILED to start (log: $STATE/$name/log)"
        return 1
    fi
}

cmd_start() {
    ensure_secrets
    local name p rc=0 todo=() pids=() i
    # install what is missing first, one service after the other (apt and Maven)
    for name in "$@"; do
        load_ports "$name"
        if p=$(service_pid "$name"); then
            say "$name: already running (pid $p, $("${name}_describe"))"
            default_ports
            continue
        fi
        default_ports
        mkdir -p "$STATE/$name"
        "${name}_install"
        todo+=("$name")
    done
    # then start them side by side: they do not depend on each other
    for name in "${todo[@]}"; do
        start_one "$name" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[i]}" || rc=1
    done
    return $rc
}

stop_one() { # name
    local name=$1 p t0
    load_ports "$name"
    if p=$(service_pid "$name"); then
        t0=$(now_ms)
        "${name}_stop"
        if service_pid "$name" >/dev/null; then
            say "$name: still running after stop"
            return 1
        fi
        say "$name: stopped (pid $p, $(secs_since "$t0")s)"
    else
        say "$name: not running"
    fi
}

cmd_stop() {
    # side by side: a JVM that writes its class-data archive at exit takes a few seconds
    local name pids=() i rc=0
    for name in "$@"; do
        stop_one "$name" &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[i]}" || rc=1
    done
    return $rc
}

cmd_status() {
    local name p rc=0
    for name in "$@"; do
        load_ports "$name"
        if p=$(service_pid "$name"); then
            printf '%-10s running  pid %-7s rss %4s MiB  %s\n' "$name" "$p" "$(rss_mib "$p")" "$("${name}_describe")"
        else
            printf '%-10s stopped\n' "$name"
            rc=3
        fi
        default_ports
    done
    return $rc
}

cmd_check() {
    ensure_secrets
    local name rc=0
    for name in "$@"; do
        load_ports "$name"
        if ! service_pid "$name" >/dev/null; then
            say "$name: FAIL not running"; rc=1
        elif ! "${name}_check"; then
            rc=1
        fi
        default_ports
    done
    return $rc
}

cmd_env() {
    ensure_secrets
    local name
    for name in "${ALL_SERVICES[@]}"; do load_ports "$name"; done
    cat <<EOF
VOXWIRE_MQTT_URL=mqtt://$HOST:$MOSQUITTO_PORT
VOXWIRE_WS_URL=ws://$HOST:$MOSQUITTO_WS_PORT/mqtt
VOXWIRE_MQTTS_URL=mqtts://$HOST:$MOSQUITTO_TLS_PORT
VOXWIRE_WSS_URL=wss://$HOST:$MOSQUITTO_WSS_PORT/mqtt
VOXWIRE_MQTTS_CERT_URL=mqtts://$HOST:$MOSQUITTO_CERT_PORT
VOXWIRE_MQTT_CA_FILE=$MOSQ_DIR/tls/ca.crt
VOXWIRE_DEVICE_CA_CERT=$MOSQ_DIR/tls/device-ca.crt
VOXWIRE_DEVICE_CA_KEY=$MOSQ_DIR/tls/device-ca.key
VOXWIRE_DEVICE_CRL=$MOSQ_DIR/tls/device-ca.crl
VOXWIRE_MQTT_USERNAME=$MQTT_USER
VOXWIRE_MQTT_PASSWORD=$VOXWIRE_MQTT_PASSWORD
VOXWIRE_KAFKA_BOOTSTRAP=$HOST:$KAFKA_PORT
VOXWIRE_POSTGRES_DSN=postgresql://$PG_USER:$VOXWIRE_POSTGRES_PASSWORD@$HOST:$POSTGRES_PORT/$PG_DB
VOXWIRE_REDIS_URL=redis://:$VOXWIRE_REDIS_PASSWORD@$HOST:$REDIS_PORT/0
VOXWIRE_OPENSEARCH_URL=http://$HOST:$OPENSEARCH_PORT
EOF
}
