# shellcheck shell=bash
# Sourced by scripts/services.sh (its settings and helpers are in scope).
# PostgreSQL: a private cluster run as the `postgres` OS user.

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
