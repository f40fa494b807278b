# shellcheck shell=bash
# Shared helpers for the test stack (sourced by up.sh, down.sh, status.sh).
#
# Servers: redis, dynamodb (dynalite), cassandra, kafka, postgres, mysql (MariaDB). Each runs natively on
# loopback (or via docker-compose.test.yml when a Docker engine answers), with
# state under .stack/ and logs under .stack/logs/. See docs/test-stack.md.

STACK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STACK_SCRIPTS="$STACK_ROOT/scripts/stack"
STACK_DIR=${IDEM_STACK_DIR:-$STACK_ROOT/.stack}
STACK_LOG_DIR="$STACK_DIR/logs"
STACK_PID_DIR="$STACK_DIR/pids"
STACK_ALL=(redis dynamodb cassandra kafka postgres mysql)
STACK_COMPOSE_FILE="$STACK_ROOT/docker-compose.test.yml"

# ---- endpoints (env overridable) -------------------------------------------
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export DYNAMODB_ENDPOINT=${DYNAMODB_ENDPOINT:-http://127.0.0.1:4567}
export CASSANDRA_CONTACT_POINTS=${CASSANDRA_CONTACT_POINTS:-127.0.0.1:9042}
export KAFKA_BROKERS=${KAFKA_BROKERS:-127.0.0.1:9092}
export POSTGRES_URL=${POSTGRES_URL:-postgres://idem:idem@127.0.0.1:5432/idem}
export MYSQL_URL=${MYSQL_URL:-mysql://idem:idem@127.0.0.1:3306/idem}

# _hostport URL-OR-HOSTPORT DEFAULT_PORT -> "host port" (first entry of a list)
_hostport() {
  local s=${1%%,*} def=$2 host port
  s=${s#*://}          # scheme
  s=${s##*@}           # user:pass@
  s=${s%%/*}           # /path
  s=${s%%\?*}
  if [[ $s == \[* ]]; then # [ipv6]:port
    host=${s%%]*}; host=${host#[}
    port=${s#*]}; port=${port#:}
  elif [[ $s == *:* ]]; then
    host=${s%%:*}; port=${s##*:}
  else
    host=$s; port=
  fi
  echo "${host:-127.0.0.1} ${port:-$def}"
}
# _redact_url URL -> the URL with its password replaced by *** (for logs and pid files).
_redact_url() {
  local u=$1
  if [[ $u =~ ^([a-z][a-z0-9+.-]*://[^:/@]*):[^@/]*@(.*)$ ]]; then u="${BASH_REMATCH[1]}:***@${BASH_REMATCH[2]}"; fi
  echo "$u"
}
read -r REDIS_HOST REDIS_PORT < <(_hostport "$REDIS_URL" 6379)
read -r DYNAMODB_HOST DYNAMODB_PORT < <(_hostport "$DYNAMODB_ENDPOINT" 4567)
read -r CASSANDRA_HOST CASSANDRA_PORT < <(_hostport "$CASSANDRA_CONTACT_POINTS" 9042)
read -r KAFKA_HOST KAFKA_PORT < <(_hostport "$KAFKA_BROKERS" 9092)
read -r POSTGRES_HOST POSTGRES_PORT < <(_hostport "$POSTGRES_URL" 5432)
# Debian's PostgreSQL 15 (package postgresql-15); another major with POSTGRES_BIN_DIR.
POSTGRES_BIN_DIR=${POSTGRES_BIN_DIR:-/usr/lib/postgresql/15/bin}
read -r MYSQL_HOST MYSQL_PORT < <(_hostport "$MYSQL_URL" 3306)
CASSANDRA_STORAGE_PORT=${CASSANDRA_STORAGE_PORT:-7000}
# Client TLS on Cassandra's native port (optional: plaintext still works there). The stack's
# own CA signs the server certificate; tests trust it through CASSANDRA_TLS_CA.
CASSANDRA_TLS=${CASSANDRA_TLS:-1}
STACK_TLS_DIR="$STACK_DIR/tls"
export CASSANDRA_TLS_CA=${CASSANDRA_TLS_CA:-$STACK_TLS_DIR/ca.pem}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
# Durable servers (issue 34: the SQL inbox rows with fsync on too), for a second stack in a dir and on ports of its
# own (IDEM_STACK_DIR, POSTGRES_URL, MYSQL_URL): POSTGRES_FSYNC=on keeps PostgreSQL's fsync and full_page_writes
# (off by default: throwaway data), MYSQL_DURABLE=1 flushes InnoDB's log at every commit (2 by default). The mode is
# part of the endpoint the pid file records, so up.sh will not reuse a server started in the other mode.
POSTGRES_FSYNC=${POSTGRES_FSYNC:-off}
MYSQL_DURABLE=${MYSQL_DURABLE:-0}
STACK_POSTGRES_MODE=
[[ $POSTGRES_FSYNC == on ]] && STACK_POSTGRES_MODE=' (fsync on)'
STACK_MYSQL_MODE=
[[ $MYSQL_DURABLE == 1 ]] && STACK_MYSQL_MODE=' (durable)'
# TLS on MariaDB's port too (optional per client, as MySQL servers are), signed by the stack CA.
MYSQL_TLS=${MYSQL_TLS:-1}
export MYSQL_TLS_CA=${MYSQL_TLS_CA:-$STACK_TLS_DIR/ca.pem}
export REDIS_PORT DYNAMODB_PORT CASSANDRA_PORT KAFKA_PORT KAFKA_CONTROLLER_PORT CASSANDRA_STORAGE_PORT POSTGRES_PORT
export MYSQL_PORT

# ---- readiness timeouts (seconds) --------------------------------------------
STACK_TIMEOUT_REDIS=${STACK_TIMEOUT_REDIS:-30}
STACK_TIMEOUT_DYNAMODB=${STACK_TIMEOUT_DYNAMODB:-30}
STACK_TIMEOUT_CASSANDRA=${STACK_TIMEOUT_CASSANDRA:-180}
STACK_TIMEOUT_KAFKA=${STACK_TIMEOUT_KAFKA:-120}
STACK_TIMEOUT_POSTGRES=${STACK_TIMEOUT_POSTGRES:-60}
STACK_TIMEOUT_MYSQL=${STACK_TIMEOUT_MYSQL:-60}

# ---- JVM sizing ----------------------------------------------------------------
CASSANDRA_HEAP=${CASSANDRA_HEAP:-1G}
KAFKA_HEAP_MAX=${KAFKA_HEAP_MAX:-1G}
KAFKA_HEAP_MIN=${KAFKA_HEAP_MIN:-256m}

log() { printf '[stack] %s\n' "$*"; }
warn() { printf '[stack] WARNING: %s\n' "$*" >&2; }
err() { printf '[stack] ERROR: %s\n' "$*" >&2; }

stack_init_dirs() {
  mkdir -p "$STACK_DIR" "$STACK_LOG_DIR" "$STACK_PID_DIR"
}

# Serialise up/down across concurrent callers (several engineers, test runs).
# Servers are spawned with fd 9 closed, so they never hold this lock.
stack_lock() {
  stack_init_dirs
  local f="$STACK_DIR/stack.lock"
  exec 9>>"$f"
  if ! flock -n 9; then
    log "waiting for another up.sh/down.sh to finish ($f)"
    if ! flock -w "${STACK_LOCK_TIMEOUT:-600}" 9; then
      err "could not take $f within ${STACK_LOCK_TIMEOUT:-600}s; holders: $(fuser "$f" 2>/dev/null || echo '?')"
      exit 1
    fi
  fi
}

stack_is_server() {
  local n
  for n in "${STACK_ALL[@]}"; do [[ $n == "$1" ]] && return 0; done
  return 1
}

# Canonical name for user input (accepts a few aliases).
stack_canon() {
  case "${1,,}" in
    redis) echo redis ;;
    dynamodb | dynamo | ddb | dynalite) echo dynamodb ;;
    cassandra | cql) echo cassandra ;;
    kafka) echo kafka ;;
    postgres | postgresql | pg) echo postgres ;;
    mysql | mariadb | mariadbd) echo mysql ;;
    *) return 1 ;;
  esac
}

# Parses server names from "$@" into STACK_SELECTED (all when empty).
stack_select() {
  STACK_SELECTED=()
  local a c
  if [[ $# -eq 0 ]]; then
    STACK_SELECTED=("${STACK_ALL[@]}")
    return 0
  fi
  for a in "$@"; do
    a=${a//,/ }
    for c in $a; do
      if ! c=$(stack_canon "$c"); then
        err "unknown server '$c' (expected: ${STACK_ALL[*]})"
        return 2
      fi
      [[ " ${STACK_SELECTED[*]} " == *" $c "* ]] || STACK_SELECTED+=("$c")
    done
  done
}

stack_port_of() {
  case $1 in
    redis) echo "$REDIS_PORT" ;; dynamodb) echo "$DYNAMODB_PORT" ;;
    cassandra) echo "$CASSANDRA_PORT" ;; kafka) echo "$KAFKA_PORT" ;;
    postgres) echo "$POSTGRES_PORT" ;;
    mysql) echo "$MYSQL_PORT" ;;
  esac
}
stack_host_of() {
  case $1 in
    redis) echo "$REDIS_HOST" ;; dynamodb) echo "$DYNAMODB_HOST" ;;
    cassandra) echo "$CASSANDRA_HOST" ;; kafka) echo "$KAFKA_HOST" ;;
    postgres) echo "$POSTGRES_HOST" ;;
    mysql) echo "$MYSQL_HOST" ;;
  esac
}
stack_timeout_of() {
  case $1 in
    redis) echo "$STACK_TIMEOUT_REDIS" ;; dynamodb) echo "$STACK_TIMEOUT_DYNAMODB" ;;
    cassandra) echo "$STACK_TIMEOUT_CASSANDRA" ;; kafka) echo "$STACK_TIMEOUT_KAFKA" ;;
    postgres) echo "$STACK_TIMEOUT_POSTGRES" ;;
    mysql) echo "$STACK_TIMEOUT_MYSQL" ;;
  esac
}
stack_endpoint_of() {
  case $1 in
    redis) echo "$REDIS_URL" ;; dynamodb) echo "$DYNAMODB_ENDPOINT" ;;
    cassandra) echo "$CASSANDRA_CONTACT_POINTS" ;; kafka) echo "$KAFKA_BROKERS" ;;
    postgres) echo "$(_redact_url "$POSTGRES_URL")$STACK_POSTGRES_MODE" ;;
    mysql) echo "$(_redact_url "$MYSQL_URL")$STACK_MYSQL_MODE" ;;
  esac
}
# Log files worth showing when a server fails (framework log + raw stdout/stderr).
stack_logs_of() {
  case $1 in
    redis) echo "$STACK_LOG_DIR/redis.log" ;;
    dynamodb) echo "$STACK_LOG_DIR/dynamodb.log" ;;
    cassandra) echo "$STACK_LOG_DIR/cassandra.log $STACK_LOG_DIR/cassandra.out" ;;
    kafka) echo "$STACK_LOG_DIR/kafka.log $STACK_LOG_DIR/kafka.out" ;;
    postgres) echo "$STACK_LOG_DIR/postgres.log" ;;
    mysql) echo "$STACK_LOG_DIR/mysql.log $STACK_LOG_DIR/mysql.out" ;;
  esac
}

# True when something accepts TCP connections on host:port.
stack_port_open() {
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# One readiness probe attempt (quiet unless $2 = verbose).
stack_probe() {
  local args=("$1")
  [[ ${2:-} == verbose ]] || args+=(--quiet)
  node "$STACK_SCRIPTS/probe.mjs" "${args[@]}"
}

# ---- ownership: pid files --------------------------------------------------------
stack_pidfile() { echo "$STACK_PID_DIR/$1.pid"; }
stack_dockerfile() { echo "$STACK_PID_DIR/$1.docker"; }
# Endpoint the owned server was started for (3rd field of its pid file).
stack_owned_endpoint() {
  local pid start endpoint
  read -r pid start endpoint <"$(stack_pidfile "$1")" 2>/dev/null || true
  echo "$endpoint"
}

# Start time (clock ticks since boot) of a process: identifies it across pid
# reuse; unlike the command line it survives process-title rewriting (Redis).
stack_proc_start() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  # shellcheck disable=SC2086
  set -- $st
  [[ $1 != Z && $1 != X ]] || return 1 # zombie / dead
  echo "${20}"
}

# Prints the pid of the server we started if it is still alive (same pid and
# same start time as recorded by stack_spawn); else nothing, dropping stale files.
stack_owned_pid() {
  local f pid start now _endpoint
  f=$(stack_pidfile "$1")
  [[ -f $f ]] || return 1
  read -r pid start _endpoint <"$f" || true
  if [[ $pid =~ ^[0-9]+$ ]] && now=$(stack_proc_start "$pid") && [[ $now == "$start" ]]; then
    echo "$pid"
    return 0
  fi
  rm -f "$f"
  return 1
}

stack_docker_available() {
  case "${IDEM_STACK_MODE:-auto}" in
    native) return 1 ;;
    docker) return 0 ;;
  esac
  command -v docker >/dev/null 2>&1 && timeout 15 docker info >/dev/null 2>&1 &&
    timeout 15 docker compose version >/dev/null 2>&1
}

stack_compose() {
  docker compose -f "$STACK_COMPOSE_FILE" -p "${IDEM_STACK_COMPOSE_PROJECT:-idem-test-stack}" "$@"
}

stack_print_failure() {
  local name=$1 f
  err "$name did not come up ($(stack_endpoint_of "$name")). Logs are in $STACK_LOG_DIR/"
  for f in $(stack_logs_of "$name"); do
    if [[ -s $f ]]; then
      printf '[stack] ---- last 40 lines of %s ----\n' "$f" >&2
      tail -n 40 "$f" >&2
    fi
  done
  if [[ -f $(stack_dockerfile "$name") ]]; then
    printf '[stack] ---- docker compose logs %s ----\n' "$name" >&2
    stack_compose logs --tail 40 "$name" >&2 || true
  fi
  printf '[stack] ---- end of %s logs ----\n' "$name" >&2
}

# Starts "$@" as a detached process (own session, survives the caller) with
# stdout/stderr appended to $STACK_LOG_DIR/<name>.<ext>; records its pid.
stack_spawn() {
  local name=$1 out=$2
  shift 2
  local pf tmp i
  pf=$(stack_pidfile "$name")
  tmp="$pf.new"
  rm -f "$tmp"
  printf '\n==== %s: starting %s at %s ====\n' "$name" "$1" "$(date -Is)" >>"$out"
  # The inner bash records its own pid, then exec()s the server (same pid),
  # whether or not setsid had to fork.
  # 9>&- : the server must not inherit (and so hold forever) the .lock fd.
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$tmp" "$@" </dev/null >>"$out" 2>&1 9>&- &
  for ((i = 0; i < 100; i++)); do
    [[ -s $tmp ]] && break
    sleep 0.05
  done
  local pid start
  pid=$(cat "$tmp" 2>/dev/null || true)
  rm -f "$tmp"
  if [[ -z $pid ]] || ! start=$(stack_proc_start "$pid"); then
    err "could not start $name (see $out)"
    return 1
  fi
  echo "$pid $start $(stack_endpoint_of "$name")" >"$pf"
}

# ---- provisioning ------------------------------------------------------------------
stack_ensure_redis_binary() {
  if command -v redis-server >/dev/null 2>&1; then return 0; fi
  log "redis-server not found: installing Debian package redis-server"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
      err "redis-server missing and not root: apt-get install -y redis-server"
      return 1
    fi
  fi
  # Keep the package's own init script from starting a system-wide Redis on
  # 6379 (we run our own instance): policy-rc.d exit 101 = "don't start".
  local policy=/usr/sbin/policy-rc.d created=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null && "${sudo[@]}" chmod +x "$policy" && created=1
  fi
  local rc=0
  {
    "${sudo[@]}" apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends redis-server
  } >>"$STACK_LOG_DIR/apt.log" 2>&1 || rc=$?
  if ((created)); then "${sudo[@]}" rm -f "$policy"; fi
  if ((rc != 0)) || ! command -v redis-server >/dev/null 2>&1; then
    err "apt-get install redis-server failed (see $STACK_LOG_DIR/apt.log)"
    tail -n 20 "$STACK_LOG_DIR/apt.log" >&2
    return 1
  fi
}

# Debian's postgresql package (the server binaries under $POSTGRES_BIN_DIR). Its init
# script must not start a cluster of its own (we run ours under the stack dir).
stack_ensure_postgres_binary() {
  [[ -x $POSTGRES_BIN_DIR/postgres && -x $POSTGRES_BIN_DIR/initdb ]] && return 0
  log "postgres: $POSTGRES_BIN_DIR/postgres not found: installing Debian package postgresql"
  if [[ $(id -u) -ne 0 ]]; then
    err "postgres missing and not root: apt-get install -y postgresql"
    return 1
  fi
  local policy=/usr/sbin/policy-rc.d created=0 rc=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  # Install from the current lists first; refresh them only when that fails (stale lists).
  {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; }
  } >>"$STACK_LOG_DIR/apt.log" 2>&1 || rc=$?
  if ((created)); then rm -f "$policy"; fi
  if ((rc != 0)) || [[ ! -x $POSTGRES_BIN_DIR/postgres ]]; then
    err "apt-get install postgresql failed or did not provide $POSTGRES_BIN_DIR (see $STACK_LOG_DIR/apt.log)"
    tail -n 20 "$STACK_LOG_DIR/apt.log" >&2
    return 1
  fi
}

# Resolves the jars of scripts/stack/<name>/pom.xml into .stack/<name>/lib once
# (re-resolves when the pom changes). Uses ~/.m2 (or STACK_MAVEN_REPO).
stack_jars_resolved() {
  local stamp="$STACK_DIR/$1/lib/.resolved"
  [[ -f $stamp && $(<"$stamp") == "$(sha256sum "$STACK_SCRIPTS/$1/pom.xml" | cut -d' ' -f1)" ]]
}
stack_resolve_jars() {
  local name=$1 pom="$STACK_SCRIPTS/$1/pom.xml" lib="$STACK_DIR/$1/lib" stamp want
  stamp="$lib/.resolved"
  want=$(sha256sum "$pom" | cut -d' ' -f1)
  if stack_jars_resolved "$name"; then return 0; fi
  command -v mvn >/dev/null 2>&1 || {
    err "mvn not found (needed once to fetch $name jars from Maven Central)"
    return 1
  }
  command -v java >/dev/null 2>&1 || {
    err "java not found (Java 17+ runs $name)"
    return 1
  }
  log "$name: resolving jars from Maven Central into $lib (first run only)"
  local t0=$SECONDS args=(-B -q -f "$pom")
  [[ -n ${STACK_MAVEN_REPO:-} ]] && args+=("-Dmaven.repo.local=$STACK_MAVEN_REPO")
  mkdir -p "$STACK_DIR/$name"
  rm -rf "$lib.tmp"
  # shellcheck disable=SC2086
  if ! mvn "${args[@]}" ${STACK_MAVEN_ARGS:-} dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$lib.tmp" >"$STACK_LOG_DIR/maven-$name.log" 2>&1; then
    err "$name: Maven resolution failed; see $STACK_LOG_DIR/maven-$name.log"
    tail -n 30 "$STACK_LOG_DIR/maven-$name.log" >&2
    rm -rf "$lib.tmp"
    return 1
  fi
  rm -rf "$lib"
  mv "$lib.tmp" "$lib"
  echo "$want" >"$stamp"
  log "$name: $(find "$lib" -name '*.jar' | wc -l) jars resolved in $((SECONDS - t0))s"
}

# Fills @KEY@ placeholders: stack_render TEMPLATE OUT KEY=VALUE...
stack_render() {
  local in=$1 out=$2 kv expr=()
  shift 2
  for kv in "$@"; do expr+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
  sed "${expr[@]}" "$in" >"$out.tmp" && mv -f "$out.tmp" "$out"
}

# ---- TLS material ---------------------------------------------------------------------
# A throwaway CA and a server certificate for 127.0.0.1/localhost (and the stack's host),
# generated once into $STACK_TLS_DIR and kept: a running server holds the keystore, so it is
# never replaced under it (delete the directory, then restart the server, to renew).
# Files: ca.pem (what clients trust), server.pem/server.key, server.p12 (Java keystore).
STACK_TLS_PASSWORD=idem-test-stack
stack_tls_certs() {
  local dir=$STACK_TLS_DIR
  [[ -s $dir/ca.pem && -s $dir/server.p12 ]] && return 0
  command -v openssl >/dev/null 2>&1 || {
    err "openssl not found (needed once to generate the test stack's TLS certificates)"
    return 1
  }
  log "tls: generating a test CA and a server certificate into $dir"
  local tmp="$dir.tmp.$$" san="IP:127.0.0.1,DNS:localhost"
  [[ $CASSANDRA_HOST != 127.0.0.1 && $CASSANDRA_HOST != localhost ]] && {
    if [[ $CASSANDRA_HOST =~ ^[0-9.]+$ ]]; then san+=",IP:$CASSANDRA_HOST"; else san+=",DNS:$CASSANDRA_HOST"; fi
  }
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj '/CN=idem test stack CA' \
      -keyout "$tmp/ca.key" -out "$tmp/ca.pem" &&
      openssl req -newkey rsa:2048 -nodes -subj '/CN=localhost' \
        -keyout "$tmp/server.key" -out "$tmp/server.csr" &&
      printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' \
        "$san" >"$tmp/server.ext" &&
      openssl x509 -req -days 3650 -in "$tmp/server.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" \
        -CAcreateserial -extfile "$tmp/server.ext" -out "$tmp/server.pem" &&
      openssl pkcs12 -export -name server -in "$tmp/server.pem" -inkey "$tmp/server.key" \
        -certfile "$tmp/ca.pem" -passout "pass:$STACK_TLS_PASSWORD" -out "$tmp/server.p12"
  } >>"$STACK_LOG_DIR/tls.log" 2>&1; then
    err "tls: certificate generation failed (see $STACK_LOG_DIR/tls.log)"
    rm -rf "$tmp"
    return 1
  fi
  rm -f "$tmp/server.csr" "$tmp/server.ext" "$tmp/ca.srl"
  rm -rf "$dir" && mv "$tmp" "$dir"
}

# ---- native launchers ----------------------------------------------------------------
stack_start_native_redis() {
  stack_ensure_redis_binary || return 1
  mkdir -p "$STACK_DIR/redis"
  local pass args
  pass=$(node -e 'try{const u=new URL(process.argv[1]);process.stdout.write(decodeURIComponent(u.password))}catch{}' "$REDIS_URL")
  args=(redis-server --bind "$REDIS_HOST" --port "$REDIS_PORT" --save '' --appendonly no
    --daemonize no --dir "$STACK_DIR/redis" --logfile "$STACK_LOG_DIR/redis.log"
    --pidfile "$STACK_DIR/redis/redis.pid" --protected-mode no)
  [[ -n $pass ]] && args+=(--requirepass "$pass")
  stack_spawn redis "$STACK_LOG_DIR/redis.log" "${args[@]}"
}

stack_start_native_dynamodb() {
  local bin="$STACK_ROOT/node_modules/dynalite/cli.js"
  [[ -f $bin ]] || {
    err "dynalite is not installed (node_modules/dynalite); run npm ci"
    return 1
  }
  mkdir -p "$STACK_DIR/dynamodb/data"
  local args=(node "$bin" --host "$DYNAMODB_HOST" --port "$DYNAMODB_PORT"
    --createTableMs "${DYNALITE_CREATE_TABLE_MS:-0}"
    --deleteTableMs "${DYNALITE_DELETE_TABLE_MS:-0}"
    --updateTableMs "${DYNALITE_UPDATE_TABLE_MS:-0}")
  # On disk by default, so tables survive an outage test's stop/start.
  if [[ ${DYNALITE_IN_MEMORY:-0} != 1 ]]; then args+=(--path "$STACK_DIR/dynamodb/data"); fi
  stack_spawn dynamodb "$STACK_LOG_DIR/dynamodb.log" "${args[@]}"
}

stack_start_native_cassandra() {
  stack_resolve_jars cassandra || return 1
  local home="$STACK_DIR/cassandra" conf="$STACK_DIR/cassandra/conf" data="$STACK_DIR/cassandra/data"
  mkdir -p "$conf" "$data"
  local tls=false
  if [[ $CASSANDRA_TLS == 1 ]]; then
    stack_tls_certs || return 1
    tls=true
  fi
  stack_render "$STACK_SCRIPTS/cassandra/cassandra.yaml.in" "$conf/cassandra.yaml" \
    "LISTEN=$CASSANDRA_HOST" "RPC=$CASSANDRA_HOST" "STORAGE_PORT=$CASSANDRA_STORAGE_PORT" \
    "NATIVE_PORT=$CASSANDRA_PORT" "DATA=$data" "CLIENT_TLS=$tls" \
    "KEYSTORE=$STACK_TLS_DIR/server.p12" "KEYSTORE_PASSWORD=$STACK_TLS_PASSWORD"
  cp -f "$STACK_SCRIPTS/cassandra/logback.xml" "$conf/logback.xml"
  local jamm
  jamm=$(find "$home/lib" -maxdepth 1 -name 'jamm-*.jar' | head -n1)
  local jvm=(
    -Didem.stack.server=cassandra
    "-Xms$CASSANDRA_HEAP" "-Xmx$CASSANDRA_HEAP"
    -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1
    -XX:MaxGCPauseMillis=300 -XX:InitiatingHeapOccupancyPercent=70
    -XX:+PerfDisableSharedMem -XX:+HeapDumpOnOutOfMemoryError
    "-XX:HeapDumpPath=$home" -XX:+ExitOnOutOfMemoryError
    -ea -da:net.openhft...
    -Djava.net.preferIPv4Stack=true
    -Djdk.attach.allowAttachSelf=true
    -Dio.netty.tryReflectionSetAccessible=true
    -Dio.netty.allocator.useCacheForAllThreads=true
    -Dio.netty.allocator.maxOrder=11
    # conf/jvm17-server.options (JPMS)
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
    --add-opens java.base/java.util.concurrent=ALL-UNNAMED
    --add-opens java.base/java.util.concurrent.atomic=ALL-UNNAMED
    --add-opens java.base/java.math=ALL-UNNAMED
    --add-opens java.base/java.net=ALL-UNNAMED
    # what bin/cassandra + cassandra-env.sh would pass
    -Dcassandra-foreground=yes
    "-Dcassandra.config=file://$conf/cassandra.yaml"
    "-Dcassandra.storagedir=$data"
    "-Dcassandra.logdir=$STACK_LOG_DIR"
    "-Dlogback.configurationFile=file://$conf/logback.xml"
    # fast single-node test startup
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.ring_delay_ms=0
    -Dcassandra.superuser_setup_delay_ms=0
    -Dcassandra.load_ring_state=false
    -Dcassandra.unsafesystem=true
  )
  [[ -n $jamm ]] && jvm=("-javaagent:$jamm" "${jvm[@]}")
  # JMX is off unless asked for (avoids a fixed port 7199 clash).
  [[ -n ${CASSANDRA_JMX_PORT:-} ]] && jvm+=("-Dcassandra.jmx.local.port=$CASSANDRA_JMX_PORT")
  # shellcheck disable=SC2206
  [[ -n ${CASSANDRA_JVM_EXTRA:-} ]] && jvm+=($CASSANDRA_JVM_EXTRA)
  stack_spawn cassandra "$STACK_LOG_DIR/cassandra.out" \
    java "${jvm[@]}" -cp "$home/lib/*:$conf" org.apache.cassandra.service.CassandraDaemon
}

# JVM command line shared by the Kafka broker and its StorageTool.
stack_kafka_cmd() {
  local home="$STACK_DIR/kafka"
  STACK_KAFKA_CMD=(java -Didem.stack.server=kafka "-Xms$KAFKA_HEAP_MIN" "-Xmx$KAFKA_HEAP_MAX"
    -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
    -XX:+ExplicitGCInvokesConcurrent -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
    "-Dkafka.logs.dir=$STACK_LOG_DIR" "-Dlog4j2.configurationFile=$home/conf/log4j2.xml"
    -cp "$home/lib/*")
  # shellcheck disable=SC2206
  [[ -n ${KAFKA_JVM_EXTRA:-} ]] && STACK_KAFKA_CMD+=($KAFKA_JVM_EXTRA)
  return 0
}

stack_start_native_kafka() {
  stack_resolve_jars kafka || return 1
  local home="$STACK_DIR/kafka" conf="$STACK_DIR/kafka/conf" data="$STACK_DIR/kafka/data"
  mkdir -p "$conf" "$data"
  stack_render "$STACK_SCRIPTS/kafka/server.properties.in" "$conf/server.properties" \
    "HOST=$KAFKA_HOST" "PORT=$KAFKA_PORT" "CONTROLLER_PORT=$KAFKA_CONTROLLER_PORT" "DATA=$data"
  cp -f "$STACK_SCRIPTS/kafka/log4j2.xml" "$conf/log4j2.xml"
  stack_kafka_cmd
  if [[ ! -f $data/meta.properties ]]; then
    local cid
    if [[ -s $home/cluster.id ]]; then cid=$(<"$home/cluster.id"); else
      # What `kafka-storage.sh random-uuid` prints (16 random bytes, base64url,
      # not starting with '-'), without paying for another JVM start.
      cid=$(node -e 'const c=require("crypto");let s;do{s=c.randomBytes(16).toString("base64url")}while(s.startsWith("-"));process.stdout.write(s)')
      echo "$cid" >"$home/cluster.id"
    fi
    log "kafka: formatting KRaft storage in $data (cluster id $cid)"
    if ! "${STACK_KAFKA_CMD[@]}" kafka.tools.StorageTool format -t "$cid" -c "$conf/server.properties" \
      >>"$STACK_LOG_DIR/kafka.out" 2>&1; then
      err "kafka: storage format failed (see $STACK_LOG_DIR/kafka.out)"
      return 1
    fi
  fi
  stack_spawn kafka "$STACK_LOG_DIR/kafka.out" "${STACK_KAFKA_CMD[@]}" kafka.Kafka "$conf/server.properties"
}

# PostgreSQL refuses to run as root: the cluster belongs to the `postgres` OS user (created by
# the Debian package). setpriv exec()s in place (unlike runuser/su, which fork to keep a PAM
# session), so the pid stack_spawn records is the postmaster itself.
STACK_POSTGRES_USER=${STACK_POSTGRES_USER:-postgres}
# Where a database server run as its own OS user keeps its files: under the stack dir when that user can
# reach it, else (a checkout under a private home such as /root) in a folder of its own under /tmp, keyed by the
# stack dir so two checkouts never share one.
stack_db_home() { # NAME OS-USER
  local name=$1 user=$2
  if [[ $(id -un) == "$user" ]] || setpriv "--reuid=$user" "--regid=$user" --init-groups --reset-env \
    test -x "$STACK_DIR" 2>/dev/null; then
    echo "$STACK_DIR/$name"
    return
  fi
  local key
  key=$(printf '%s' "$STACK_DIR" | sha1sum | cut -c1-12)
  mkdir -p "/tmp/idem-stack-$key" && chmod 755 "/tmp/idem-stack-$key"
  echo "/tmp/idem-stack-$key/$name"
}

stack_as_postgres_cmd() {
  STACK_AS_POSTGRES=()
  [[ $(id -un) == "$STACK_POSTGRES_USER" ]] ||
    STACK_AS_POSTGRES=(setpriv "--reuid=$STACK_POSTGRES_USER" "--regid=$STACK_POSTGRES_USER" --init-groups --reset-env)
}
stack_as_postgres() {
  stack_as_postgres_cmd
  "${STACK_AS_POSTGRES[@]}" "$@"
}

# User, password and database of POSTGRES_URL (defaults idem/idem/idem), one per line.
stack_postgres_credentials() {
  node -e '
    let u; try { u = new URL(process.argv[1]) } catch { u = new URL("postgres://x") }
    const d = (s, def) => (s ? decodeURIComponent(s) : def);
    process.stdout.write([d(u.username, "idem"), d(u.password, "idem"), d(u.pathname.slice(1), "idem")].join("\n"));
  ' "$POSTGRES_URL"
}

# initdb into $STACK_DIR/postgres/data once, with the role and database of POSTGRES_URL
# created in single-user mode (no server, no socket, no superuser password needed).
# `.provisioned` marks a complete cluster: a half-made one (interrupted initdb) is redone.
stack_postgres_init() {
  local home data
  home=$(stack_db_home postgres "$STACK_POSTGRES_USER") data="$home/data"
  [[ -f $home/.provisioned && -f $data/PG_VERSION ]] && return 0
  local user pass db
  { read -r user; read -r pass; read -r db; } < <(stack_postgres_credentials)
  if [[ ! $user =~ ^[A-Za-z_][A-Za-z0-9_]*$ || ! $db =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    err "postgres: POSTGRES_URL user and database must be plain identifiers (got user '$user', database '$db')"
    return 1
  fi
  log "postgres: initdb into $data (role and database $user/$db)"
  rm -rf "$data" "$home/.provisioned"
  mkdir -p "$data" "$home/run"
  chown "$STACK_POSTGRES_USER:" "$home" "$data" "$home/run"
  chmod 700 "$data" "$home/run"
  # trust for the unix socket only (its directory is 0700, postgres-owned); TCP needs a
  # password (scram-sha-256), written below over initdb's pg_hba.conf.
  # initdb insists on a superuser password when TCP auth is password-based: a random one
  # nobody needs (the superuser logs in through the socket).
  (umask 077 && openssl rand -hex 24 >"$home/.pwfile") && chown "$STACK_POSTGRES_USER:" "$home/.pwfile" || return 1
  local rc=0
  stack_as_postgres "$POSTGRES_BIN_DIR/initdb" -D "$data" -U postgres -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 "--pwfile=$home/.pwfile" \
    >>"$STACK_LOG_DIR/postgres.log" 2>&1 || rc=$?
  rm -f "$home/.pwfile"
  if ((rc != 0)); then
    err "postgres: initdb failed (see $STACK_LOG_DIR/postgres.log)"
    return 1
  fi
  printf '%s\n' '# Written by scripts/stack/lib.sh (stack_postgres_init).' \
    'local all all trust' 'host all all all scram-sha-256' >"$data/pg_hba.conf"
  chown "$STACK_POSTGRES_USER:" "$data/pg_hba.conf"
  local sqlpass=${pass//\'/\'\'} out
  # Single-user mode reads one statement per line and exits 0 even when one fails: its
  # output is checked for ERROR/FATAL instead. (The password never reaches a log.)
  out=$(printf '%s\n' \
    "CREATE ROLE \"$user\" LOGIN PASSWORD '$sqlpass';" \
    "CREATE DATABASE \"$db\" OWNER \"$user\";" |
    stack_as_postgres "$POSTGRES_BIN_DIR/postgres" --single -D "$data" postgres 2>&1) || rc=$?
  if ((rc != 0)) || [[ $out == *ERROR* || $out == *FATAL* ]]; then
    printf '%s\n' "${out//"$sqlpass"/***}" >>"$STACK_LOG_DIR/postgres.log"
    err "postgres: creating role/database $user/$db failed (see $STACK_LOG_DIR/postgres.log)"
    return 1
  fi
  touch "$home/.provisioned"
}

stack_start_native_postgres() {
  stack_ensure_postgres_binary || return 1
  stack_postgres_init || return 1
  local home data
  home=$(stack_db_home postgres "$STACK_POSTGRES_USER") data="$home/data"
  local args=("$POSTGRES_BIN_DIR/postgres" -D "$data"
    -c "listen_addresses=$POSTGRES_HOST" -c "port=$POSTGRES_PORT"
    -c "unix_socket_directories=$home/run"
    # Logs to stderr = $STACK_LOG_DIR/postgres.log.
    -c logging_collector=off -c "max_connections=${POSTGRES_MAX_CONNECTIONS:-200}")
  if [[ $POSTGRES_FSYNC == on ]]; then
    # Durable: every COMMIT waits for its WAL flush (the settings' defaults, stated so no conf overrides them).
    args+=(-c fsync=on -c full_page_writes=on -c synchronous_commit=on)
  else
    # Throwaway test data: no fsync (a crash of the server process still loses nothing
    # committed; only an OS crash would).
    args+=(-c fsync=off -c full_page_writes=off)
  fi
  # TLS on the same port (clients choose; plaintext still works): the stack CA's server
  # certificate, copied because PostgreSQL wants its key owned by itself and 0600.
  if [[ ${POSTGRES_TLS:-1} == 1 ]]; then
    stack_tls_certs || return 1
    mkdir -p "$home/tls"
    cp -f "$STACK_TLS_DIR/server.pem" "$STACK_TLS_DIR/server.key" "$home/tls/"
    chown -R "$STACK_POSTGRES_USER:" "$home/tls"
    chmod 600 "$home/tls/server.key"
    args+=(-c ssl=on -c "ssl_cert_file=$home/tls/server.pem" -c "ssl_key_file=$home/tls/server.key")
  fi
  stack_as_postgres_cmd
  stack_spawn postgres "$STACK_LOG_DIR/postgres.log" "${STACK_AS_POSTGRES[@]}" "${args[@]}"
}

# ---- mysql (MariaDB) ---------------------------------------------------------------
# Debian's mariadb-server, run by hand (no init here): mariadb-install-db once into
# $STACK_DIR/mysql/data, then mariadbd as the `mysql` OS user on $MYSQL_HOST:$MYSQL_PORT
# only, with its own socket and pid file under $STACK_DIR/mysql. The database and user
# of MYSQL_URL (idem/idem) are (re)created by an init file on every start, so a changed
# password in MYSQL_URL takes effect on the next start.
stack_ensure_mariadb_binary() {
  if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1; then return 0; fi
  log "mariadbd not found: installing Debian package mariadb-server"
  if [[ $(id -u) -ne 0 ]]; then
    err "mariadbd missing and not root: apt-get install -y mariadb-server"
    return 1
  fi
  # The package's postinst would start a system-wide server on 3306 (we run our
  # own): policy-rc.d exit 101 = "don't start".
  local policy=/usr/sbin/policy-rc.d created=0 rc=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  # The package lists may be stale or absent: update only when a plain install fails.
  {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server; }
  } >>"$STACK_LOG_DIR/apt.log" 2>&1 || rc=$?
  if ((created)); then rm -f "$policy"; fi
  if ((rc != 0)) || ! command -v mariadbd >/dev/null 2>&1; then
    err "apt-get install mariadb-server failed (see $STACK_LOG_DIR/apt.log)"
    tail -n 20 "$STACK_LOG_DIR/apt.log" >&2
    return 1
  fi
}

# Prints "user password database" of MYSQL_URL (percent-decoded).
stack_mysql_credentials() {
  node -e 'const u=new URL(process.argv[1]);const d=decodeURIComponent;process.stdout.write([d(u.username)||"idem",d(u.password),d(u.pathname.slice(1))||"idem"].join("\n"))' "$MYSQL_URL"
}

stack_start_native_mysql() {
  stack_ensure_mariadb_binary || return 1
  local home data run_as=()
  home=$(stack_db_home mysql mysql) data="$home/data"
  mkdir -p "$home"
  # As root, mariadbd drops to the mysql user itself (--user); the data, socket and pid
  # files must then belong to that user.
  if [[ $(id -u) -eq 0 ]]; then run_as=(--user=mysql); fi
  if [[ ! -d $data/mysql ]]; then
    log "mysql: initialising a data directory in $data"
    rm -rf "$data" && mkdir -p "$data"
    if ((${#run_as[@]})); then chown mysql:mysql "$home" "$data"; fi
    # root logs in through the socket only (unix_socket auth): no root password exists.
    if ! mariadb-install-db --no-defaults "${run_as[@]}" --datadir="$data" --skip-test-db \
      --auth-root-authentication-method=socket >>"$STACK_LOG_DIR/mysql.out" 2>&1; then
      err "mysql: mariadb-install-db failed (see $STACK_LOG_DIR/mysql.out)"
      rm -rf "$data"
      return 1
    fi
  fi
  local user pass db
  { read -r user; read -r pass; read -r db; } < <(stack_mysql_credentials; echo)
  if [[ ! $user =~ ^[A-Za-z0-9_]+$ || ! $db =~ ^[A-Za-z0-9_]+$ || $pass == *"'"* || $pass == *\\* ]]; then
    err "mysql: MYSQL_URL must name a plain user and database, and a password without ' or \\"
    return 1
  fi
  # Run at every start, before the server accepts connections (--init-file): idempotent,
  # and it never leaves the password anywhere but this mode-600 file.
  local init="$home/init.sql"
  (
    umask 077
    cat >"$init" <<SQL
CREATE DATABASE IF NOT EXISTS \`$db\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE USER IF NOT EXISTS '$user'@'$MYSQL_HOST' IDENTIFIED BY '$pass';
ALTER USER '$user'@'$MYSQL_HOST' IDENTIFIED BY '$pass';
GRANT ALL PRIVILEGES ON \`$db\`.* TO '$user'@'$MYSQL_HOST';
SQL
  )
  local tls=()
  if [[ $MYSQL_TLS == 1 ]]; then
    stack_tls_certs || return 1
    # A copy the mysql user can read (the stack's key is root's, mode 600).
    mkdir -p "$home/tls"
    cp -f "$STACK_TLS_DIR/ca.pem" "$STACK_TLS_DIR/server.pem" "$STACK_TLS_DIR/server.key" "$home/tls/"
    chmod 600 "$home/tls/server.key"
    tls=(--ssl-ca="$home/tls/ca.pem" --ssl-cert="$home/tls/server.pem" --ssl-key="$home/tls/server.key")
  fi
  # The error log is written by mariadbd after it dropped to the mysql user.
  touch "$STACK_LOG_DIR/mysql.log"
  if ((${#run_as[@]})); then chown -R mysql:mysql "$home" "$STACK_LOG_DIR/mysql.log"; fi
  # --no-defaults: nothing from /etc/mysql (the Debian config points at /run/mysqld and
  # /var/lib/mysql). innodb_flush_log_at_trx_commit=2 survives a SIGKILL of mariadbd (only
  # an OS crash loses the last second), which is all a test server needs. MYSQL_DURABLE=1:
  # 1, the log flushed at every COMMIT (no binary log runs here, so sync_binlog has nothing to sync).
  local flush=2
  [[ $MYSQL_DURABLE == 1 ]] && flush=1
  stack_spawn mysql "$STACK_LOG_DIR/mysql.out" mariadbd --no-defaults "${run_as[@]}" \
    --datadir="$data" --socket="$home/mysqld.sock" --pid-file="$home/mysqld.pid" \
    --bind-address="$MYSQL_HOST" --port="$MYSQL_PORT" --skip-name-resolve \
    --log-error="$STACK_LOG_DIR/mysql.log" --init-file="$init" \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    --innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit="$flush" --max-connections=300 \
    "${tls[@]}"
}

# ---- stopping ------------------------------------------------------------------------
stack_stop_timeout_of() {
  case $1 in cassandra | kafka) echo 60 ;; mysql) echo 30 ;; *) echo 15 ;; esac
}

# Stops the server we started (native pid or docker service). Returns 0 when
# stopped or not ours; prints what it did.
stack_stop_one() {
  local name=$1 signal=${2:-TERM} pid i limit
  if [[ -f $(stack_dockerfile "$name") ]]; then
    log "$name: docker compose stop $name"
    stack_compose stop "$name" >/dev/null
    rm -f "$(stack_dockerfile "$name")"
    return 0
  fi
  if ! pid=$(stack_owned_pid "$name"); then
    if stack_port_open "$(stack_host_of "$name")" "$(stack_port_of "$name")"; then
      log "$name: running at $(stack_endpoint_of "$name") but not started by the stack; leaving it alone"
    else
      log "$name: not running"
    fi
    return 0
  fi
  local start
  start=$(stack_proc_start "$pid" || true)
  # PostgreSQL's SIGTERM is a "smart" shutdown that waits for every client (a test's pool) to
  # disconnect; SIGINT is its "fast" shutdown, what everyone else calls TERM.
  [[ $name == postgres && $signal == TERM ]] && signal=INT
  log "$name: stopping pid $pid (SIG$signal)"
  kill "-$signal" "$pid" 2>/dev/null || true
  limit=$(($(stack_stop_timeout_of "$name") * 10))
  for ((i = 0; i < limit && ${#start} > 0; i++)); do
    [[ $(stack_proc_start "$pid" || true) == "$start" ]] || break # gone (or a zombie)
    sleep 0.1
  done
  if [[ -n $start && $(stack_proc_start "$pid" || true) == "$start" ]]; then
    warn "$name: pid $pid still alive after $((limit / 10))s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$(stack_pidfile "$name")"
  # Wait for the port to close so an immediate up.sh won't see the old server.
  for ((i = 0; i < 50; i++)); do
    stack_port_open "$(stack_host_of "$name")" "$(stack_port_of "$name")" || break
    sleep 0.1
  done
  log "$name: stopped"
}
