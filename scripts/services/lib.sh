# shellcheck shell=bash
# Sourced by scripts/services.sh (its settings and helpers are in scope).
# Helpers shared by every service: logging, pid files, launching and stopping,
# readiness, secrets, apt and Maven installs, Java class paths.

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
