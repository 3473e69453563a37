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
#                                              (and its certificates and the device CA's revocation list)
#   scripts/services.sh browser                install Chromium for the web app's browser tests
#   scripts/services.sh speech                 install espeak-ng (non-English speech for model tests)
#
# services: mosquitto kafka postgres redis opensearch (default: all). Installs (apt, Maven) run one
# after the other, then the servers start side by side; each waits at most VOXWIRE_SERVICES_WAIT s.
#
# What runs (all bound to 127.0.0.1, each in its own session, output in .services/<name>/log):
#   mosquitto   Debian's mosquitto 2.0: TCP + websockets listeners, the same over TLS, and TLS
#               with client certificates from a device CA (CN = username), allow_anonymous false,
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
#   .services/mosquitto/tls/ca.crt) VOXWIRE_MOSQUITTO_CERT_PORT=18884 (TLS with a client
#   certificate from the device CA, .services/mosquitto/tls/device-ca.crt, instead of a password)
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
    MOSQUITTO_CERT_PORT=${VOXWIRE_MOSQUITTO_CERT_PORT:-18884}
    KAFKA_PORT=${VOXWIRE_KAFKA_PORT:-19092}
    KAFKA_CONTROLLER_PORT=${VOXWIRE_KAFKA_CONTROLLER_PORT:-19093}
    POSTGRES_PORT=${VOXWIRE_POSTGRES_PORT:-15432}
    REDIS_PORT=${VOXWIRE_REDIS_PORT:-16379}
    OPENSEARCH_PORT=${VOXWIRE_OPENSEARCH_PORT:-19200}
    OPENSEARCH_TRANSPORT_PORT=${VOXWIRE_OPENSEARCH_TRANSPORT_PORT:-19300}
}
default_ports

# Each service (install, configure, start, stop, check) and the commands live in scripts/services/.
for part in lib mosquitto kafka postgres redis opensearch commands; do
    # shellcheck source=/dev/null
    . "$HERE/$part.sh"
done

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
    speech)
        # not a server: the synthesiser that speaks German, French, Spanish for the model tests
        apt_install espeak-ng
        command -v espeak-ng >/dev/null || die "no espeak-ng after apt-get install"
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
