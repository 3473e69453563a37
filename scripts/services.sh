#!/usr/bin/env bash
# Install, start and stop the servers that voxwire's distributed mode needs, on 127.0.0.1 only.
#
#   scripts/services.sh start   [service...]   install what is missing, start, wait until ready
#   scripts/services.sh stop    [service...]   stop what this script started (pid files)
#   scripts/services.sh restart [service...]
#   scripts/services.sh status  [service...]   exit 0 only when all named services run
#   scripts/services.sh check   [service...]   functional smoke test of running services
#   scripts/services.sh env                    VOXWIRE_*=value lines (a dotenv file), e.g.
#                                              set -a; eval "$(scripts/services.sh env)"; set +a
#   scripts/services.sh reload  mosquitto      rebuild the ACL from acl.d/ and make Mosquitto re-read it
#   scripts/services.sh browser                install Chromium for the web app's browser tests
#
# services: mosquitto kafka postgres redis opensearch (default: all). Installs (apt, Maven) run one
# after the other, then the servers start side by side; each waits at most VOXWIRE_SERVICES_WAIT s.
#
# What runs (all bound to 127.0.0.1, each in its own session, output in .services/<name>/log):
#   mosquitto   Debian's mosquitto 2.0: TCP + websockets listeners, allow_anonymous false,
#               password file with the service user `voxwire-service` (password in secrets.env),
#               ACL file: the service user may do everything; tenants: dynamic-security plugin
#               (runtime, $CONTROL/dynamic-security/v1, default deny) + static acl.d/*.acl.
#   kafka       Apache Kafka (Maven Central jars) as a single-node KRaft broker+controller.
#   postgres    Debian's PostgreSQL: a private cluster (initdb) run as the `postgres` OS user,
#               role and database `voxwire`, scram password auth over TCP.
#   redis       Debian's redis-server: requirepass, append-only file.
#   opensearch  OpenSearch 2.19 (Maven Central jars) started by scripts/services/opensearch/
#               VoxwireOpenSearch.java with its standard modules; no security plugin: plain HTTP.
#
# Where things go (both ignored by git):
#   .cache/services/   downloaded jars (Maven local repository + copied runtime class paths)
#   .services/         one folder per service: config, data, `log`, `pid`; secrets.env (mode 600)
#
# Ports (env, defaults): VOXWIRE_MOSQUITTO_PORT=11883 VOXWIRE_MOSQUITTO_WS_PORT=18083
#   VOXWIRE_MOSQUITTO_TLS_PORT=18883 VOXWIRE_MOSQUITTO_WSS_PORT=18084 (TLS, self-signed CA in
#   .services/mosquitto/tls/ca.crt)
#   VOXWIRE_KAFKA_PORT=19092 VOXWIRE_KAFKA_CONTROLLER_PORT=19093 VOXWIRE_POSTGRES_PORT=15432
#   VOXWIRE_REDIS_PORT=16379 VOXWIRE_OPENSEARCH_PORT=19200 VOXWIRE_OPENSEARCH_TRANSPORT_PORT=19300
# Other knobs: VOXWIRE_SERVICES_WAIT (readiness limit per service, s, 120),
#   VOXWIRE_SERVICES_JAVA (java binary, `java`; Java 17+), VOXWIRE_KAFKA_VERSION (4.4.0),
#   VOXWIRE_OPENSEARCH_VERSION (2.19.6), VOXWIRE_KAFKA_HEAP, VOXWIRE_OPENSEARCH_HEAP,
#   VOXWIRE_SERVICES_DIR / VOXWIRE_SERVICES_CACHE (move .services / .cache/services),
#   VOXWIRE_SERVICES_CDS=0 (no class-data-sharing archives for the JVMs).
# A running service keeps the ports it was started with (recorded in .services/<name>/ports.env);
# `env` and `status` report those.
set -Eeuo pipefail
umask 022

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$ROOT/scripts/services
STATE=${VOXWIRE_SERVICES_DIR:-$ROOT/.services}
CACHE=${VOXWIRE_SERVICES_CACHE:-$ROOT/.cache/services}
HOST=127.0.0.1
ALL_SERVICES=(mosquitto kafka postgres redis opensearch)
WAIT=${VOXWIRE_SERVICES_WAIT:-120}
JAVA=${VOXWIRE_SERVICES_JAVA:-java}
KAFKA_VERSION=${VOXWIRE_KAFKA_VERSION:-4.4.0}
OPENSEARCH_VERSION=${VOXWIRE_OPENSEARCH_VERSION:-2.19.6}
KAFKA_HEAP=${VOXWIRE_KAFKA_HEAP:--Xms256m -Xmx512m}
OPENSEARCH_HEAP=${VOXWIRE_OPENSEARCH_HEAP:--Xms512m -Xmx512m}
MQTT_USER=voxwire-service
PG_USER=voxwire
PG_DB=voxwire

default_ports() {
    MOSQUITTO_PORT=${VOXWIRE_MOSQUITTO_PORT:-11883}
    MOSQUITTO_WS_PORT=${VOXWIRE_MOSQUITTO_WS_PORT:-18083}
    MOSQUITTO_TLS_PORT=${VOXWIRE_MOSQUITTO_TLS_PORT:-18883}
    MOSQUITTO_WSS_PORT=${VOXWIRE_MOSQUITTO_WSS_PORT:-18084}
    KAFKA_PORT=${VOXWIRE_KAFKA_PORT:-19092}
    KAFKA_CONTROLLER_PORT=${VOXWIRE_KAFKA_CONTROLLER_PORT:-19093}
    POSTGRES_PORT=${VOXWIRE_POSTGRES_PORT:-15432}
    REDIS_PORT=${VOXWIRE_REDIS_PORT:-16379}
    OPENSEARCH_PORT=${VOXWIRE_OPENSEARCH_PORT:-19200}
    OPENSEARCH_TRANSPORT_PORT=${VOXWIRE_OPENSEARCH_TRANSPORT_PORT:-19300}
}
default_ports

# ---------------------------------------------------------------- helpers

say() { printf '[services] %s\n' "$*" >&2; }
die() { printf '[services] error: %s\n' "$*" >&2; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs_since() { local ms=$(( $(now_ms) - $1 )); printf '%d.%01d' $((ms / 1000)) $(((ms % 1000) / 100)); }

log_tail() { # name [lines]
    local f=$STATE/$1/log
    if [[ -s $f ]]; then
        say "last lines of $f:"
        tail -n "${2:-40}" "$f" | sed 's/^/    /' >&2
    fi
}

# The ports a service was started with (so env/status/stop talk to the right one).
record_ports() { # name VAR...
    local name=$1; shift
    local f=$STATE/$name/ports.env var
    : >"$f"
    for var in "$@"; do printf '%s=%s\n' "$var" "${!var}" >>"$f"; done
}
load_ports() { # name
    local f=$STATE/$1/ports.env
    # shellcheck disable=SC1090
    [[ -f $f ]] && . "$f"
    return 0
}

# A process is ours when it is alive and its command line carries our marker (a path under
# .services), so a recycled pid is never mistaken for one of our servers.
pid_alive() { # pid marker
    local pid=$1 marker=$2
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker"
}
read_pid() { if [[ -s $1 ]]; then head -n 1 "$1" | tr -dc '0-9'; fi; }
rss_mib() { # pid -> RSS in MiB (the process and the others of its session)
    local total=0 kb
    for kb in $(ps -o rss= -s "$1" 2>/dev/null); do total=$((total + kb)); done
    echo $(((total + 512) / 1024))
}

# Start a command detached (own session, no terminal, stdin closed) with its output appended to
# .services/<name>/log; the pid of the exec'd program lands in .services/<name>/pid.
launch() { # name cmd...
    local name=$1; shift
    local dir=$STATE/$name
    rm -f "$dir/pid"
    printf '\n===== %s: starting %s =====\n' "$(date -Is)" "$name" >>"$dir/log"
    # fd 9 (the lock of this script) must not live on in the daemon
    # shellcheck disable=SC2016
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$dir/pid" "$@" >>"$dir/log" 2>&1 </dev/null 9>&- &
    local i
    for i in $(seq 1 50); do [[ -s $dir/pid ]] && return 0; sleep 0.1; done
    die "$name: no pid file after launch"
}

# The process exists and is not a zombie.
process_running() { # pid
    kill -0 "$1" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]
}

# Wait until `probe` succeeds, failing early when the process dies.
wait_ready() { # name pid marker probe-function (the marker is not needed: the pid is new)
    local name=$1 pid=$2 probe=$4 t0 deadline
    t0=$(now_ms); deadline=$((t0 + WAIT * 1000))
    while :; do
        # Not the marker: while the launcher execs the server, its command line can read
        # empty for a moment, and a live server was once taken for a dead one.
        if ! process_running "$pid"; then
            say "$name: the process exited during start-up"
            log_tail "$name"
            return 1
        fi
        if "$probe" >/dev/null 2>&1; then return 0; fi
        if (($(now_ms) > deadline)); then
            say "$name: not ready after ${WAIT}s (pid $pid)"
            log_tail "$name"
            return 1
        fi
        sleep 0.1
    done
}

# SIGTERM, wait, SIGKILL after a limit; then anything left in the process's own session.
stop_pid() { # name pid marker [limit_s]
    local name=$1 pid=$2 marker=$3 limit=${4:-60} i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < limit * 10; i++)); do
        pid_alive "$pid" "$marker" || break
        sleep 0.1
    done
    if pid_alive "$pid" "$marker"; then
        say "$name: pid $pid still alive after ${limit}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    local left
    # (zombies are already gone: only their exit status waits to be collected)
    left=$(ps -o pid=,stat= -s "$pid" 2>/dev/null | awk '$2 !~ /^Z/ {printf "%s ", $1}' || true)
    if [[ -n ${left// /} ]]; then
        say "$name: ending leftover processes of its session: $left"
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null || true
    fi
}

# Refuse to start when something else already listens on one of our ports.
ports_free() { # name port...
    local name=$1 port; shift
    for port in "$@"; do
        if (exec 3<>"/dev/tcp/$HOST/$port") 2>/dev/null; then
            say "$name: port $HOST:$port is already in use by another process"
            return 1
        fi
    done
}

random_secret() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

# secrets.env: generated once, mode 600; each missing key is added, none is changed.
ensure_secrets() {
    local f=$STATE/secrets.env key
    mkdir -p "$STATE"
    [[ -f $f ]] || (umask 077 && : >"$f")
    chmod 600 "$f"
    for key in VOXWIRE_MQTT_PASSWORD VOXWIRE_POSTGRES_PASSWORD VOXWIRE_REDIS_PASSWORD; do
        grep -q "^$key=" "$f" || printf '%s=%s\n' "$key" "$(random_secret)" >>"$f"
    done
    # shellcheck disable=SC1090
    . "$f"
}

# apt-get install what is missing; `apt-get update` only when a package is unknown or the
# install fails on stale lists. Servers are not auto-started by the packages (policy-rc.d).
apt_install() { # package...
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    ((EUID == 0)) || die "missing packages ${missing[*]}: run as root (apt-get install)"
    say "apt-get install ${missing[*]}"
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made_policy=1
    fi
    local rc=0
    (
        export DEBIAN_FRONTEND=noninteractive
        need_update=0
        for p in "${missing[@]}"; do
            apt-cache show "$p" >/dev/null 2>&1 || need_update=1
        done
        if ((need_update)); then say "apt-get update"; apt-get update -qq; fi
        if ! apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
            say "apt-get install failed: apt-get update, then again"
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends "${missing[@]}"
        fi
    ) >>"$STATE/apt.log" 2>&1 || rc=$?
    ((made_policy)) && rm -f "$policy"
    ((rc == 0)) || { tail -n 30 "$STATE/apt.log" >&2; die "apt-get install ${missing[*]} failed (log: $STATE/apt.log)"; }
}

java_check() {
    command -v "$JAVA" >/dev/null || die "no java ($JAVA): Java 17+ is needed for Kafka and OpenSearch"
    local v
    v=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
    [[ ${v%%.*} -ge 17 ]] 2>/dev/null || die "$JAVA is Java $v: Java 17+ is needed"
}

# Copy a runtime class path from Maven Central into .cache/services/<dir>/libs, once.
maven_libs() { # pom dir -Dprop=value...
    local pom=$1 dir=$2; shift 2
    local stamp
    stamp=$( (cat "$pom"; echo "$*") | sha256sum | cut -c1-16)
    [[ -f $dir/.complete && $(cat "$dir/.complete") == "$stamp" ]] && return 0
    command -v mvn >/dev/null || die "mvn (Maven) is needed to fetch jars"
    say "fetching jars for $(basename "$dir") from Maven Central (once; cached in $dir)"
    rm -rf "$dir/libs" "$dir/cds"
    mkdir -p "$dir"
    if ! mvn -B -q -f "$pom" -Dmaven.repo.local="$CACHE/m2" "$@" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dir/libs" >"$dir/mvn.log" 2>&1; then
        tail -n 30 "$dir/mvn.log" >&2
        die "mvn could not fetch the jars (log: $dir/mvn.log)"
    fi
    echo "$stamp" >"$dir/.complete"
}

# An explicit, sorted class path of every jar in <dir>/libs (plus extra jars): class data
# sharing wants jars only, in the same order every time.
java_classpath() { # dir [extra.jar...]
    local IFS=: jars=("$1"/libs/*.jar "${@:2}")
    echo "${jars[*]}"
}

# Class data sharing (AppCDS) halves the JVM start: the first run of a server records the classes
# it loaded into an archive when it exits (its first `stop` takes a few seconds longer); later
# starts map that archive. The archive is keyed by the JVM and the class path, and dropped with
# the jars. VOXWIRE_SERVICES_CDS=0 turns this off.
java_cds_opt() { # home-dir name classpath
    [[ ${VOXWIRE_SERVICES_CDS:-1} == 1 ]] || return 0
    local key jsa
    key=$( ("$JAVA" -version 2>&1; echo "$3") | sha256sum | cut -c1-12)
    jsa=$1/cds/$2-$key.jsa
    mkdir -p "$1/cds"
    if [[ -s $jsa ]]; then echo "-XX:SharedArchiveFile=$jsa"; else echo "-XX:ArchiveClassesAtExit=$jsa"; fi
}

# ---------------------------------------------------------------- mosquitto

MOSQ_DIR=$STATE/mosquitto
mosquitto_marker() { echo "$MOSQ_DIR/mosquitto.conf"; }
mosquitto_pid() { local p; p=$(read_pid "$MOSQ_DIR/pid"); pid_alive "$p" "$(mosquitto_marker)" && echo "$p"; }

mosquitto_install() { apt_install mosquitto mosquitto-clients; }

# Who may do what, in two layers:
# - the service user `voxwire-service` lives in the password file (mosquitto_passwd) and the ACL
#   file lets it read/write every topic, $SYS, and the dynamic-security control topic;
# - tenants (per-tenant rules, the hook voxwire uses) live in the dynamic-security plugin:
#   voxwire (broker/dynsec.py) creates clients, roles and role ACLs at run time by publishing
#   commands to $CONTROL/dynamic-security/v1 as the service user; the plugin keeps them in
#   .services/mosquitto/dynsec/dynamic-security.json across restarts. Its default ACL access is
#   deny (publish, receive, subscribe), so a tenant gets only what a role grants it.
# - static extras: acl.d/*.acl are appended to the ACL file on every start and on
#   `services.sh reload mosquitto` (SIGHUP: Mosquitto re-reads password and ACL files).
# Mosquitto asks the password/ACL files first and the plugin for users they do not know.
mosquitto_dynsec_plugin() {
    local f
    for f in /usr/lib/*/mosquitto_dynamic_security.so /usr/lib/mosquitto_dynamic_security.so \
        /usr/local/lib/mosquitto_dynamic_security.so; do
        [[ -f $f ]] && { echo "$f"; return 0; }
    done
    return 1
}

mosquitto_write_acl() {
    mkdir -p "$MOSQ_DIR/acl.d"
    [[ -f $MOSQ_DIR/acl.d/README ]] || cat >"$MOSQ_DIR/acl.d/README" <<'EOF'
Static ACL rules for the test Mosquitto (tenants normally come from the dynamic-security
plugin: ../dynsec/). Each *.acl file here is appended, in name order, to ../acl after the
service user's block; then `scripts/services.sh reload mosquitto`.
Mosquitto ACL syntax (2.x): `user NAME` then `topic [read|write|readwrite|deny] FILTER` lines
apply to that user; `pattern [read|write|readwrite|deny] FILTER` lines (with %u = username,
%c = client id) apply to every user. Users and passwords: `mosquitto_passwd -b ../passwd USER PW`
(then reload). Example tenant file acme.acl:
    user acme-device-1
    topic write audio/+/#
    pattern read transcription/%c/#
EOF
    {
        echo "# Generated by scripts/services.sh from the service user block and acl.d/*.acl: edit acl.d/."
        echo "user $MQTT_USER"
        echo "topic readwrite #"
        echo "topic read \$SYS/#"
        echo "topic readwrite \$CONTROL/dynamic-security/#"
        local f
        for f in "$MOSQ_DIR"/acl.d/*.acl; do
            [[ -e $f ]] || continue
            printf '\n# ---- %s\n' "$(basename "$f")"
            cat "$f"
        done
    } >"$MOSQ_DIR/acl.new"
    mv "$MOSQ_DIR/acl.new" "$MOSQ_DIR/acl"
}

# A CA of our own and a server certificate it signed, for 127.0.0.1 and localhost (made once):
# clients verify the TLS listeners with tls/ca.crt.
mosquitto_tls() {
    local tls=$MOSQ_DIR/tls
    [[ -s $tls/server.crt && -s $tls/ca.crt ]] && return 0
    mkdir -p "$tls"
    (
        umask 077
        openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=voxwire test CA" \
            -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
            -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$tls/san.ext"
        openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" \
            -CAcreateserial -days 3650 -extfile "$tls/san.ext" -out "$tls/server.crt" 2>/dev/null
    ) || die "mosquitto: could not make the TLS certificates (is openssl installed?)"
    chmod 644 "$tls/ca.crt" "$tls/server.crt"
}

mosquitto_configure() {
    mkdir -p "$MOSQ_DIR/data"
    mosquitto_tls
    # The service user's entry is (re)written from secrets.env; other users in passwd are kept.
    if [[ -f $MOSQ_DIR/passwd ]]; then
        mosquitto_passwd -b "$MOSQ_DIR/passwd" "$MQTT_USER" "$VOXWIRE_MQTT_PASSWORD"
    else
        (umask 077 && mosquitto_passwd -c -b "$MOSQ_DIR/passwd" "$MQTT_USER" "$VOXWIRE_MQTT_PASSWORD")
    fi
    mosquitto_write_acl
    local plugin="" dynsec=$MOSQ_DIR/dynsec/dynamic-security.json
    if plugin=$(mosquitto_dynsec_plugin); then
        mkdir -p "$MOSQ_DIR/dynsec"
        # created once; the plugin rewrites it whenever voxwire changes clients/roles
        [[ -s $dynsec ]] || cat >"$dynsec" <<'EOF'
{
	"defaultACLAccess": {
		"publishClientSend": false,
		"publishClientReceive": false,
		"subscribe": false,
		"unsubscribe": true
	},
	"clients": [],
	"groups": [],
	"roles": []
}
EOF
        plugin="plugin $plugin
plugin_opt_config_file $dynsec"
    else
        say "mosquitto: no mosquitto_dynamic_security.so: tenants can only come from acl.d/"
    fi
    local run_as=""
    # Started as root, Mosquitto drops to the `mosquitto` user: it must own what it reads/writes.
    if ((EUID == 0)) && id mosquitto >/dev/null 2>&1; then
        run_as="user mosquitto"
        chown -R mosquitto: "$MOSQ_DIR/data" "$MOSQ_DIR/passwd" "$MOSQ_DIR/acl" "$MOSQ_DIR/tls"
        [[ -d $MOSQ_DIR/dynsec ]] && chown -R mosquitto: "$MOSQ_DIR/dynsec"
    fi
    chmod 700 "$MOSQ_DIR/data"
    chmod 600 "$MOSQ_DIR/passwd" "$MOSQ_DIR/acl"
    if [[ -d $MOSQ_DIR/dynsec ]]; then chmod 700 "$MOSQ_DIR/dynsec"; fi
    cat >"$MOSQ_DIR/mosquitto.conf" <<EOF
# Generated by scripts/services.sh on every start: edit the script, not this file.
$run_as
per_listener_settings false
allow_anonymous false
password_file $MOSQ_DIR/passwd
acl_file $MOSQ_DIR/acl
$plugin

# socket_domain ipv4: without it the websockets listener of 2.0.x binds every interface
listener $MOSQUITTO_PORT $HOST
socket_domain ipv4
protocol mqtt

listener $MOSQUITTO_WS_PORT $HOST
socket_domain ipv4
protocol websockets

listener $MOSQUITTO_TLS_PORT $HOST
socket_domain ipv4
protocol mqtt
cafile $MOSQ_DIR/tls/ca.crt
certfile $MOSQ_DIR/tls/server.crt
keyfile $MOSQ_DIR/tls/server.key
tls_version tlsv1.2

listener $MOSQUITTO_WSS_PORT $HOST
socket_domain ipv4
protocol websockets
cafile $MOSQ_DIR/tls/ca.crt
certfile $MOSQ_DIR/tls/server.crt
keyfile $MOSQ_DIR/tls/server.key
tls_version tlsv1.2

persistence true
persistence_location $MOSQ_DIR/data/
autosave_interval 30
persistent_client_expiration 1d

# The default (1000 queued, then silent drops) lost 80% of a 20k QoS 1 burst on this machine.
max_queued_messages 100000
max_queued_bytes 0
max_inflight_messages 100
max_packet_size 1048576
set_tcp_nodelay true

log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
connection_messages true
log_timestamp_format %Y-%m-%dT%H:%M:%S
EOF
}

mosquitto_probe() {
    timeout 5 mosquitto_sub -h "$HOST" -p "$MOSQUITTO_PORT" -u "$MQTT_USER" -P "$VOXWIRE_MQTT_PASSWORD" \
        -i "voxwire-services-probe-$$" -t "\$SYS/broker/version" -C 1 -W 3
}

mosquitto_start() {
    ports_free mosquitto "$MOSQUITTO_PORT" "$MOSQUITTO_WS_PORT" "$MOSQUITTO_TLS_PORT" "$MOSQUITTO_WSS_PORT"
    mosquitto_configure
    record_ports mosquitto MOSQUITTO_PORT MOSQUITTO_WS_PORT MOSQUITTO_TLS_PORT MOSQUITTO_WSS_PORT
    launch mosquitto mosquitto -c "$MOSQ_DIR/mosquitto.conf"
    wait_ready mosquitto "$(read_pid "$MOSQ_DIR/pid")" "$(mosquitto_marker)" mosquitto_probe
}

mosquitto_stop() { local p; p=$(mosquitto_pid) && stop_pid mosquitto "$p" "$(mosquitto_marker)" 30; rm -f "$MOSQ_DIR/pid"; }
mosquitto_describe() {
    echo "mqtt://$HOST:$MOSQUITTO_PORT ws://$HOST:$MOSQUITTO_WS_PORT/mqtt" \
        "mqtts://$HOST:$MOSQUITTO_TLS_PORT wss://$HOST:$MOSQUITTO_WSS_PORT/mqtt"
}

mosquitto_reload() {
    local p
    mosquitto_write_acl
    ((EUID == 0)) && id mosquitto >/dev/null 2>&1 && chown mosquitto: "$MOSQ_DIR/acl" "$MOSQ_DIR/passwd"
    chmod 600 "$MOSQ_DIR/acl" "$MOSQ_DIR/passwd"
    if p=$(mosquitto_pid); then
        kill -HUP "$p"
        say "mosquitto: ACL rebuilt from acl.d/, SIGHUP sent (pid $p)"
    else
        say "mosquitto: ACL rebuilt; not running"
    fi
}

mosquitto_check() {
    local topic="voxwire/services-check/$$" got rc
    # anonymous clients are refused
    if timeout 5 mosquitto_sub -h "$HOST" -p "$MOSQUITTO_PORT" -t '#' -C 1 -W 2 >/dev/null 2>&1; then
        say "mosquitto: FAIL anonymous client was accepted"; return 1
    fi
    # publish (QoS 1, retained) then read it back as the service user
    mosquitto_pub -h "$HOST" -p "$MOSQUITTO_PORT" -V mqttv5 -u "$MQTT_USER" -P "$VOXWIRE_MQTT_PASSWORD" \
        -q 1 -r -t "$topic" -m "hello-$$"
    got=$(timeout 5 mosquitto_sub -h "$HOST" -p "$MOSQUITTO_PORT" -V mqttv5 -u "$MQTT_USER" \
        -P "$VOXWIRE_MQTT_PASSWORD" -q 1 -t "$topic" -C 1 -W 3) || true
    mosquitto_pub -h "$HOST" -p "$MOSQUITTO_PORT" -u "$MQTT_USER" -P "$VOXWIRE_MQTT_PASSWORD" -r -n -t "$topic"
    [[ $got == "hello-$$" ]] || { say "mosquitto: FAIL pub/sub round trip (got '$got')"; return 1; }
    # the websocket listener answers an MQTT upgrade
    rc=$(curl -s -o /dev/null -m 3 -w '%{http_code}' -H 'Connection: Upgrade' -H 'Upgrade: websocket' \
        -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
        -H 'Sec-WebSocket-Protocol: mqtt' "http://$HOST:$MOSQUITTO_WS_PORT/mqtt" || true)
    [[ $rc == 101 ]] || { say "mosquitto: FAIL websocket upgrade answered '$rc'"; return 1; }
    local dynsec="no dynamic-security plugin"
    if grep -q '^plugin ' "$MOSQ_DIR/mosquitto.conf"; then
        mosquitto_check_dynsec || return 1
        dynsec="dynsec tenant: allowed topic delivered, other topic denied"
    fi
    say "mosquitto: ok (anonymous refused, QoS 1 retained round trip, websocket upgrade 101, $dynsec)"
}

# A throw-away tenant made through the dynamic-security plugin, as voxwire does it.
mosquitto_check_dynsec() {
    local ctl=(mosquitto_ctrl -h "$HOST" -p "$MOSQUITTO_PORT" -u "$MQTT_USER" -P "$VOXWIRE_MQTT_PASSWORD" dynsec)
    local name="voxwire-services-check-$$" pw base="voxwire/services-check/$$" out got ok=1
    pw=$(random_secret)
    { "${ctl[@]}" createRole "$name" &&
        "${ctl[@]}" addRoleACL "$name" publishClientSend "$base/allowed/#" allow &&
        "${ctl[@]}" createClient "$name" -p "$pw" &&
        "${ctl[@]}" addClientRole "$name" "$name"; } >/dev/null 2>&1 || ok=0
    if ((ok)); then
        out=$(mktemp)
        timeout 6 mosquitto_sub -h "$HOST" -p "$MOSQUITTO_PORT" -u "$MQTT_USER" -P "$VOXWIRE_MQTT_PASSWORD" \
            -t "$base/#" -C 1 -W 4 >"$out" 2>/dev/null &
        local sub=$!
        sleep 0.5
        mosquitto_pub -h "$HOST" -p "$MOSQUITTO_PORT" -u "$name" -P "$pw" -q 1 -t "$base/denied" -m denied || true
        mosquitto_pub -h "$HOST" -p "$MOSQUITTO_PORT" -u "$name" -P "$pw" -q 1 -t "$base/allowed/x" -m allowed || true
        wait "$sub" || true
        got=$(cat "$out"); rm -f "$out"
    fi
    "${ctl[@]}" deleteClient "$name" >/dev/null 2>&1 || true
    "${ctl[@]}" deleteRole "$name" >/dev/null 2>&1 || true
    ((ok)) || { say "mosquitto: FAIL dynamic-security commands as $MQTT_USER"; return 1; }
    [[ $got == allowed ]] || { say "mosquitto: FAIL dynsec tenant: first message seen was '$got', not 'allowed'"; return 1; }
}

# ---------------------------------------------------------------- kafka

KAFKA_DIR=$STATE/kafka
KAFKA_HOME=$CACHE/kafka-$KAFKA_VERSION
kafka_marker() { echo "-Dvoxwire.service.dir=$KAFKA_DIR"; }
kafka_pid() { local p; p=$(read_pid "$KAFKA_DIR/pid"); pid_alive "$p" "$(kafka_marker)" && echo "$p"; }

kafka_install() {
    java_check
    maven_libs "$HERE/kafka/pom.xml" "$KAFKA_HOME" -Dkafka.version="$KAFKA_VERSION"
}

kafka_java() { # main-class args...  (a short-lived tool run on the broker's class path)
    "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2-tools.properties" -cp "$(java_classpath "$KAFKA_HOME")" "$@"
}

kafka_configure() {
    mkdir -p "$KAFKA_DIR/data" "$KAFKA_DIR/tmp"
    cat >"$KAFKA_DIR/server.properties" <<EOF
# Generated by scripts/services.sh on every start: a single-node KRaft broker+controller.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DIR/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=24
log.segment.bytes=67108864
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
    # shutdownHook = disable: Kafka's own shutdown hook logs until the very end
    cat >"$KAFKA_DIR/log4j2.properties" <<'EOF'
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
EOF
    sed -e 's/^rootLogger.level = info/rootLogger.level = warn/' "$KAFKA_DIR/log4j2.properties" \
        >"$KAFKA_DIR/log4j2-tools.properties"
    # Format the storage once: a standalone (dynamic-quorum) controller with a fixed cluster id.
    if [[ ! -f $KAFKA_DIR/data/meta.properties ]]; then
        [[ -s $KAFKA_DIR/cluster.id ]] || kafka_java kafka.tools.StorageTool random-uuid | tail -n 1 >"$KAFKA_DIR/cluster.id"
        say "kafka: formatting storage (cluster id $(cat "$KAFKA_DIR/cluster.id"))"
        kafka_java kafka.tools.StorageTool format --standalone --ignore-formatted \
            -t "$(cat "$KAFKA_DIR/cluster.id")" -c "$KAFKA_DIR/server.properties" >>"$KAFKA_DIR/log" 2>&1 ||
            { log_tail kafka; die "kafka: storage format failed"; }
        # the controller's address is written into the metadata log: remember it
        echo "$KAFKA_CONTROLLER_PORT" >"$KAFKA_DIR/formatted-controller-port"
    elif [[ -f $KAFKA_DIR/formatted-controller-port && $(cat "$KAFKA_DIR/formatted-controller-port") != "$KAFKA_CONTROLLER_PORT" ]]; then
        die "kafka: storage was formatted for controller port $(cat "$KAFKA_DIR/formatted-controller-port"), not $KAFKA_CONTROLLER_PORT: delete $KAFKA_DIR/data to start afresh"
    fi
}

kafka_probe() { python3 "$HERE/kafka/probe.py" "$HOST" "$KAFKA_PORT" 2; }

kafka_start() {
    ports_free kafka "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"
    kafka_configure
    record_ports kafka KAFKA_PORT KAFKA_CONTROLLER_PORT
    local cp; cp=$(java_classpath "$KAFKA_HOME")
    # shellcheck disable=SC2086,SC2046
    launch kafka "$JAVA" $KAFKA_HEAP $(java_cds_opt "$KAFKA_HOME" kafka "$cp") -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
        -Djava.awt.headless=true -Dfile.encoding=UTF-8 -Djava.net.preferIPv4Stack=true \
        -Djava.io.tmpdir="$KAFKA_DIR/tmp" \
        "$(kafka_marker)" -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
        -cp "$cp" kafka.Kafka "$KAFKA_DIR/server.properties"
    wait_ready kafka "$(read_pid "$KAFKA_DIR/pid")" "$(kafka_marker)" kafka_probe
}

kafka_stop() { local p; p=$(kafka_pid) && stop_pid kafka "$p" "$(kafka_marker)" 60; rm -f "$KAFKA_DIR/pid"; }
kafka_describe() { echo "bootstrap $HOST:$KAFKA_PORT (controller $HOST:$KAFKA_CONTROLLER_PORT)"; }

kafka_check() {
    local out topic="voxwire-services-check" got
    out=$(kafka_probe) || { say "kafka: FAIL metadata probe"; return 1; }
    say "kafka: metadata $out"
    # create a topic, produce one record, consume it, delete the topic (kafka-tools classes)
    kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$KAFKA_PORT" --create \
        --if-not-exists --topic "$topic" --partitions 1 --replication-factor 1 >/dev/null
    echo "hello-$$" | kafka_java org.apache.kafka.tools.ConsoleProducer \
        --bootstrap-server "$HOST:$KAFKA_PORT" --topic "$topic" --producer-property acks=all >/dev/null 2>&1
    got=$(kafka_java org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$HOST:$KAFKA_PORT" \
        --topic "$topic" --from-beginning --max-messages 1 --timeout-ms 20000 2>/dev/null | tail -n 1) || true
    kafka_java org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$KAFKA_PORT" --delete \
        --topic "$topic" >/dev/null || true
    [[ $got == "hello-$$" ]] || { say "kafka: FAIL produce/consume round trip (got '$got')"; return 1; }
    say "kafka: ok (topic create, produce acks=all, consume, delete)"
}

# ---------------------------------------------------------------- postgres

PG_DIR=$STATE/postgres
pg_bin() {
    local d
    d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    [[ -n $d && -x $d/initdb ]] || return 1
    echo "$d"
}
pg_marker() { echo "$PG_DIR/data"; }
postgres_pid() { local p; p=$(read_pid "$PG_DIR/data/postmaster.pid"); pid_alive "$p" "$(pg_marker)" && echo "$p"; }
# initdb and the server refuse root: as root they run as the `postgres` OS user.
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg_cmd() { if ((EUID == 0)); then echo "runuser -u postgres --"; fi; }
pg_socket_dir() {
    # a Unix socket path is limited to ~107 bytes
    if ((${#PG_DIR} < 80)); then echo "$PG_DIR/run"; else echo "/tmp"; fi
}

postgres_install() { pg_bin >/dev/null || apt_install postgresql; pg_bin >/dev/null || die "no PostgreSQL server binaries"; }

postgres_configure() {
    local bin; bin=$(pg_bin)
    mkdir -p "$PG_DIR" "$(pg_socket_dir)"
    touch "$PG_DIR/log"
    if ((EUID == 0)); then
        chown postgres: "$PG_DIR" "$PG_DIR/log"
        [[ $(pg_socket_dir) == /tmp ]] || chown postgres: "$(pg_socket_dir)"
    fi
    if [[ ! -f $PG_DIR/data/PG_VERSION ]]; then
        say "postgres: initdb $PG_DIR/data"
        rm -rf "$PG_DIR/data"
        as_pg "$bin/initdb" -D "$PG_DIR/data" -U postgres -E UTF8 --locale=C.UTF-8 \
            --auth-local=trust --auth-host=scram-sha-256 >>"$PG_DIR/log" 2>&1 ||
            { log_tail postgres; die "postgres: initdb failed"; }
    fi
}

postgres_probe() { "$(pg_bin)/pg_isready" -q -h "$HOST" -p "$POSTGRES_PORT" -t 2; }

pg_psql() { as_pg "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -h "$(pg_socket_dir)" -p "$POSTGRES_PORT" -U postgres "$@"; }

postgres_start() {
    local bin; bin=$(pg_bin)
    ports_free postgres "$POSTGRES_PORT"
    postgres_configure
    record_ports postgres POSTGRES_PORT
    printf '\n===== %s: starting postgres =====\n' "$(date -Is)" >>"$PG_DIR/log"
    # pg_ctl detaches the postmaster (setsid) and waits for it; settings that depend on the
    # environment are passed on the command line so that postgresql.conf stays initdb's.
    # shellcheck disable=SC2046
    if ! setsid $(as_pg_cmd) "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t "$WAIT" \
        -o "-c listen_addresses=$HOST -p $POSTGRES_PORT -k $(pg_socket_dir)" start >/dev/null </dev/null 9>&-; then
        say "postgres: pg_ctl start failed"
        log_tail postgres
        return 1
    fi
    wait_ready postgres "$(read_pid "$PG_DIR/data/postmaster.pid")" "$(pg_marker)" postgres_probe || return 1
    # the application role and database (password from secrets.env, synced on every start)
    local pw=${VOXWIRE_POSTGRES_PASSWORD//\'/\'\'}
    pg_psql -d postgres <<SQL >/dev/null
SELECT 'CREATE ROLE $PG_USER LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER')\gexec
ALTER ROLE $PG_USER LOGIN PASSWORD '$pw';
SELECT 'CREATE DATABASE $PG_DB OWNER $PG_USER' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$PG_DB')\gexec
SQL
}

postgres_stop() {
    postgres_pid >/dev/null || return 0
    as_pg "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 60 stop >/dev/null || {
        local p; p=$(postgres_pid) && stop_pid postgres "$p" "$(pg_marker)" 30
    }
}
postgres_describe() { echo "postgresql://$PG_USER@$HOST:$POSTGRES_PORT/$PG_DB"; }

postgres_check() {
    local out
    out=$(PGPASSWORD=$VOXWIRE_POSTGRES_PASSWORD PGCONNECT_TIMEOUT=5 "$(pg_bin)/psql" -X -q -tA \
        "host=$HOST port=$POSTGRES_PORT user=$PG_USER dbname=$PG_DB" \
        -c "CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (42); SELECT x FROM t; SHOW server_version" |
        tr '\n' ' ') || { say "postgres: FAIL password login over TCP"; return 1; }
    [[ $out == 42\ * ]] || { say "postgres: FAIL query answered '$out'"; return 1; }
    if PGPASSWORD=wrong PGCONNECT_TIMEOUT=5 "$(pg_bin)/psql" -X -tA "host=$HOST port=$POSTGRES_PORT user=$PG_USER dbname=$PG_DB" -c 'select 1' >/dev/null 2>&1; then
        say "postgres: FAIL a wrong password was accepted"; return 1
    fi
    say "postgres: ok (scram login over TCP as $PG_USER, wrong password refused, server ${out#42 })"
}

# ---------------------------------------------------------------- redis

REDIS_DIR=$STATE/redis
redis_marker() { echo "$HOST:$REDIS_PORT"; }
redis_pid() {
    local p; p=$(read_pid "$REDIS_DIR/redis.pid")
    pid_alive "$p" "$(redis_marker)" && [[ $(cat "/proc/$p/comm" 2>/dev/null) == redis-server* ]] && echo "$p"
}

redis_install() { apt_install redis-server; }

redis_configure() {
    mkdir -p "$REDIS_DIR/data"
    (umask 077 && cat >"$REDIS_DIR/redis.conf" <<EOF
# Generated by scripts/services.sh on every start (holds the password: mode 600).
bind $HOST
protected-mode yes
port $REDIS_PORT
requirepass $VOXWIRE_REDIS_PASSWORD
daemonize yes
pidfile $REDIS_DIR/redis.pid
logfile $REDIS_DIR/log
dir $REDIS_DIR/data
# persistence: append-only file (fsync every second), no RDB snapshots
save ""
appendonly yes
appendfsync everysec
maxmemory 512mb
maxmemory-policy noeviction
EOF
    )
    chmod 600 "$REDIS_DIR/redis.conf"
}

redis_cli() { REDISCLI_AUTH=$VOXWIRE_REDIS_PASSWORD timeout 5 redis-cli -h "$HOST" -p "$REDIS_PORT" "$@"; }
redis_probe() { [[ $(redis_cli ping 2>/dev/null) == PONG ]]; }

redis_start() {
    ports_free redis "$REDIS_PORT"
    redis_configure
    record_ports redis REDIS_PORT
    rm -f "$REDIS_DIR/redis.pid"
    printf '\n===== %s: starting redis =====\n' "$(date -Is)" >>"$REDIS_DIR/log"
    # daemonize yes: redis-server forks, detaches (setsid) and writes its pid file itself
    setsid redis-server "$REDIS_DIR/redis.conf" </dev/null >>"$REDIS_DIR/log" 2>&1 9>&- ||
        { log_tail redis; return 1; }
    local i p=""
    for i in $(seq 1 50); do p=$(read_pid "$REDIS_DIR/redis.pid"); [[ -n $p ]] && break; sleep 0.1; done
    [[ -n $p ]] || { say "redis: no pid file: it did not start"; log_tail redis 10; return 1; }
    wait_ready redis "$p" "$(redis_marker)" redis_probe
}

redis_stop() { local p; p=$(redis_pid) && stop_pid redis "$p" "$(redis_marker)" 30; rm -f "$REDIS_DIR/redis.pid"; }
redis_describe() { echo "redis://$HOST:$REDIS_PORT/0"; }

redis_check() {
    local out
    out=$(redis_cli set voxwire:services-check "v$$" >/dev/null && redis_cli get voxwire:services-check && redis_cli del voxwire:services-check >/dev/null) || true
    [[ $out == "v$$" ]] || { say "redis: FAIL set/get (got '$out')"; return 1; }
    out=$(timeout 5 redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>&1 || true)
    [[ $out == *NOAUTH* ]] || { say "redis: FAIL unauthenticated ping answered '$out'"; return 1; }
    say "redis: ok (auth set/get/del, unauthenticated client refused, $(redis_cli info server | tr -d '\r' | sed -n 's/^redis_version://p'))"
}

# ---------------------------------------------------------------- opensearch

OS_DIR=$STATE/opensearch
OS_HOME=$CACHE/opensearch-$OPENSEARCH_VERSION
# Modules loaded as class-path plugins: the transport/HTTP layer, analysis-common (custom
# analyzers: lowercase, asciifolding, stop, stemmer...), mapper-extras, reindex (delete/update
# by query), parent-join, painless (scripts). No security plugin: plain HTTP on loopback.
OS_PLUGINS=(
    org.opensearch.transport.Netty4Plugin
    org.opensearch.analysis.common.CommonAnalysisPlugin
    org.opensearch.index.mapper.MapperExtrasPlugin
    org.opensearch.index.reindex.ReindexPlugin
    org.opensearch.join.ParentJoinPlugin
    org.opensearch.painless.PainlessPlugin
)
opensearch_marker() { echo "-Dvoxwire.service.dir=$OS_DIR"; }
opensearch_pid() { local p; p=$(read_pid "$OS_DIR/pid"); pid_alive "$p" "$(opensearch_marker)" && echo "$p"; }

opensearch_install() {
    java_check
    maven_libs "$HERE/opensearch/pom.xml" "$OS_HOME" -Dopensearch.version="$OPENSEARCH_VERSION"
    # the launcher: compiled once per content of its source, kept as a jar (for CDS)
    local src=$HERE/opensearch/VoxwireOpenSearch.java out=$OS_HOME/launcher sum
    sum=$(sha256sum "$src" | cut -c1-16)
    if [[ ! -f $OS_HOME/launcher.jar || $(cat "$OS_HOME/launcher.sum" 2>/dev/null) != "$sum" ]]; then
        local bin; bin=$(dirname "$(readlink -f "$(command -v "$JAVA")")")
        local javac=$bin/javac jar=$bin/jar
        [[ -x $javac ]] || javac=javac
        [[ -x $jar ]] || jar=jar
        rm -rf "$out" "$OS_HOME/launcher.jar" "$OS_HOME/cds" && mkdir -p "$out"
        "$javac" -nowarn -d "$out" -cp "$(java_classpath "$OS_HOME")" "$src" >&2 || die "opensearch: javac failed"
        "$jar" cf "$OS_HOME/launcher.jar" -C "$out" . || die "opensearch: jar failed"
        rm -rf "$out"
        echo "$sum" >"$OS_HOME/launcher.sum"
    fi
}

opensearch_configure() {
    mkdir -p "$OS_DIR/home/config" "$OS_DIR/data" "$OS_DIR/logs" "$OS_DIR/tmp"
    cat >"$OS_DIR/home/config/opensearch.yml" <<EOF
# Generated by scripts/services.sh on every start. No security plugin: plain HTTP, loopback only.
cluster.name: voxwire
node.name: voxwire-1
path.data: $OS_DIR/data
path.logs: $OS_DIR/logs
network.host: $HOST
http.port: $OPENSEARCH_PORT
transport.port: $OPENSEARCH_TRANSPORT_PORT
discovery.type: single-node
# one node: no replicas to place, and a nearly full disk must not turn indices read-only
cluster.routing.allocation.disk.threshold_enabled: false
action.auto_create_index: true
EOF
    cat >"$OS_DIR/home/config/log4j2.properties" <<'EOF'
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.deprecation.name = org.opensearch.deprecation
logger.deprecation.level = error
EOF
}

opensearch_probe() {
    curl -sf -m 3 "http://$HOST:$OPENSEARCH_PORT/_cluster/health?wait_for_status=yellow&timeout=2s" |
        grep -q '"status":"\(green\|yellow\)"'
}

opensearch_start() {
    ports_free opensearch "$OPENSEARCH_PORT" "$OPENSEARCH_TRANSPORT_PORT"
    opensearch_configure
    record_ports opensearch OPENSEARCH_PORT OPENSEARCH_TRANSPORT_PORT
    local cp; cp=$(java_classpath "$OS_HOME" "$OS_HOME/launcher.jar")
    # shellcheck disable=SC2086,SC2046
    launch opensearch "$JAVA" $OPENSEARCH_HEAP $(java_cds_opt "$OS_HOME" opensearch "$cp") -XX:+UseG1GC -XX:G1ReservePercent=25 \
        -XX:InitiatingHeapOccupancyPercent=30 -XX:MaxDirectMemorySize=256m -Xss1m \
        -XX:+ExitOnOutOfMemoryError -XX:-OmitStackTraceInFastThrow \
        -Djava.awt.headless=true -Dfile.encoding=UTF-8 -Djna.nosys=true -Djava.net.preferIPv4Stack=true \
        -Djava.locale.providers=SPI,COMPAT -Djava.io.tmpdir="$OS_DIR/tmp" \
        -Dio.netty.noUnsafe=true -Dio.netty.noKeySetOptimization=true \
        -Dio.netty.recycler.maxCapacityPerThread=0 -Dio.netty.allocator.numDirectArenas=0 \
        -Dlog4j.shutdownHookEnabled=false -Dlog4j2.disable.jmx=true \
        "$(opensearch_marker)" -cp "$cp" \
        VoxwireOpenSearch "$OS_DIR/home" "${OS_PLUGINS[@]}"
    wait_ready opensearch "$(read_pid "$OS_DIR/pid")" "$(opensearch_marker)" opensearch_probe
}

opensearch_stop() { local p; p=$(opensearch_pid) && stop_pid opensearch "$p" "$(opensearch_marker)" 60; rm -f "$OS_DIR/pid"; }
opensearch_describe() { echo "http://$HOST:$OPENSEARCH_PORT (transport $OPENSEARCH_TRANSPORT_PORT)"; }

opensearch_check() {
    local b="http://$HOST:$OPENSEARCH_PORT" idx="voxwire-services-check-$$" r fail=0
    os() { curl -s -m 30 -H 'content-type: application/json' "$@"; }
    hits() { os "$b/$idx/_search?filter_path=hits.total.value" -d "$1" | sed -n 's/.*"value":\([0-9]*\).*/\1/p'; }
    expect() { # what expected got
        if [[ $2 == "$3" ]]; then say "opensearch:   $1: $3"; else say "opensearch: FAIL $1: expected $2, got '$3'"; fail=1; fi
    }
    r=$(os -XPUT "$b/$idx" -d '{
      "settings": {"number_of_shards": 1, "number_of_replicas": 0,
        "analysis": {
          "filter": {"en_stop": {"type": "stop", "stopwords": "_english_"},
                     "en_stem": {"type": "stemmer", "language": "english"}},
          "analyzer": {"vx_text": {"type": "custom", "tokenizer": "standard",
                                   "filter": ["lowercase", "asciifolding", "en_stop", "en_stem"]}}}},
      "mappings": {"properties": {
        "sid": {"type": "keyword"},
        "text": {"type": "text", "analyzer": "vx_text"},
        "segments": {"type": "nested", "properties": {
          "seq": {"type": "long"}, "speaker": {"type": "keyword"},
          "text": {"type": "text", "analyzer": "standard"}}}}}}')
    [[ $r == *'"acknowledged":true'* ]] || { say "opensearch: FAIL create index: $r"; return 1; }
    r=$(os -XPUT "$b/$idx/_doc/1?refresh=true" -d '{"sid": "s1", "text": "Café meetings are running late",
        "segments": [{"seq": 1, "speaker": "A", "text": "the quick brown fox"},
                     {"seq": 2, "speaker": "B", "text": "jumps over the lazy dog"}]}')
    [[ $r == *'"result":"created"'* ]] || { say "opensearch: FAIL index doc: $r"; fail=1; }
    expect "analyzer tokens" 'cafe,run' "$(os "$b/$idx/_analyze?filter_path=tokens.token" \
        -d '{"analyzer": "vx_text", "text": "The Cafés are Running"}' | grep -o '"token":"[^"]*"' | cut -d'"' -f4 | paste -sd,)"
    expect "nested query (lazy by B)" 1 "$(hits '{"query": {"nested": {"path": "segments", "query": {"bool": {"must": [
        {"match": {"segments.text": "lazy"}}, {"term": {"segments.speaker": "B"}}]}}}}}')"
    expect "nested query (lazy by A)" 0 "$(hits '{"query": {"nested": {"path": "segments", "query": {"bool": {"must": [
        {"match": {"segments.text": "lazy"}}, {"term": {"segments.speaker": "A"}}]}}}}}')"
    expect "match_phrase (cafe meeting)" 1 "$(hits '{"query": {"match_phrase": {"text": "cafe meeting"}}}')"
    expect "match_phrase (meetings are running)" 1 "$(hits '{"query": {"match_phrase": {"text": "meetings are running"}}}')"
    expect "match_phrase (running cafe)" 0 "$(hits '{"query": {"match_phrase": {"text": "running cafe"}}}')"
    expect "delete_by_query" 1 "$(os -XPOST "$b/$idx/_delete_by_query?refresh=true&filter_path=deleted" \
        -d '{"query": {"term": {"sid": "s1"}}}' | sed -n 's/.*"deleted":\([0-9]*\).*/\1/p')"
    r=$(os -XDELETE "$b/$idx")
    [[ $r == *'"acknowledged":true'* ]] || { say "opensearch: FAIL delete index: $r"; fail=1; }
    ((fail == 0)) || return 1
    say "opensearch: ok (custom analyzer, nested, match_phrase, delete_by_query, index deleted)"
}

# ---------------------------------------------------------------- commands

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
VOXWIRE_MQTT_CA_FILE=$MOSQ_DIR/tls/ca.crt
VOXWIRE_MQTT_USERNAME=$MQTT_USER
VOXWIRE_MQTT_PASSWORD=$VOXWIRE_MQTT_PASSWORD
VOXWIRE_KAFKA_BOOTSTRAP=$HOST:$KAFKA_PORT
VOXWIRE_POSTGRES_DSN=postgresql://$PG_USER:$VOXWIRE_POSTGRES_PASSWORD@$HOST:$POSTGRES_PORT/$PG_DB
VOXWIRE_REDIS_URL=redis://:$VOXWIRE_REDIS_PASSWORD@$HOST:$REDIS_PORT/0
VOXWIRE_OPENSEARCH_URL=http://$HOST:$OPENSEARCH_PORT
EOF
}

main() {
    local cmd=${1:-}
    [[ -n $cmd ]] && shift
    local services=("$@") s
    ((${#services[@]})) || services=("${ALL_SERVICES[@]}")
    for s in "${services[@]}"; do
        [[ " ${ALL_SERVICES[*]} " == *" $s "* ]] || die "unknown service '$s' (known: ${ALL_SERVICES[*]})"
    done
    mkdir -p "$STATE"
    case $cmd in
    start | stop | restart | reload)
        # one start/stop at a time per .services folder
        exec 9>"$STATE/.lock"
        flock -w 600 9 || die "another services.sh holds $STATE/.lock"
        ;;
    esac
    case $cmd in
    start)
        local t0 rc
        t0=$(now_ms)
        # not `cmd_start || ...`: bash ignores `set -e` in everything called from such a list
        set +e
        cmd_start "${services[@]}"
        rc=$?
        set -e
        say "start took $(secs_since "$t0")s"
        return $rc
        ;;
    stop) cmd_stop "${services[@]}" ;;
    restart)
        cmd_stop "${services[@]}"
        set +e
        cmd_start "${services[@]}"
        local rc=$?
        set -e
        return $rc
        ;;
    status) cmd_status "${services[@]}" ;;
    check) cmd_check "${services[@]}" ;;
    env) cmd_env ;;
    browser)
        # not a server: the browser the web app's tests drive (headless Chromium from Debian)
        apt_install chromium fonts-dejavu-core
        command -v chromium >/dev/null || die "no chromium after apt-get install"
        ;;
    reload)
        [[ ${services[*]} == mosquitto ]] || die "reload: only 'mosquitto' (rebuilds its ACL from acl.d/)"
        ensure_secrets
        load_ports mosquitto
        mosquitto_reload
        ;;
    *)
        sed -n '2,/^set -Eeuo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        [[ $cmd == -h || $cmd == --help || $cmd == help ]] && return 0
        return 2
        ;;
    esac
}

main "$@"
