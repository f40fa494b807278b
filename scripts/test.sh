#!/usr/bin/env bash
# Body of `npm test`: bring up the test stack (Redis, DynamoDB/dynalite,
# Cassandra, Kafka, PostgreSQL, MariaDB), run the test suite, then stop the servers this run
# started (servers that were already up are reused and left running).
#
# Opt-outs (exported unchanged to the tests, which skip the same stores):
#   IDEM_SKIP_STORES=redis,cassandra,...  don't start these (names: redis,
#                                         dynamodb, cassandra, kafka, postgres, mysql; memory and
#                                         rocksdb need no server; "all" = every server)
#   IDEM_SKIP_KAFKA=1                     same as adding kafka to IDEM_SKIP_STORES
#   IDEM_STACK_MANAGE=0                   start/stop nothing; use the servers at
#                                         REDIS_URL, DYNAMODB_ENDPOINT, MYSQL_URL, ... as they are
#   IDEM_STACK_KEEP=1                     leave the servers this run started running
#   IDEM_TEST_CONCURRENCY=N               files run at once (default 3)
#   IDEM_TEST_KAFKA_CLIENTS=kafkajs       the Kafka clients to run client-dependent files on (default both)
#   IDEM_SOAK=1                           crash and outage tests at their soak sizes (npm run test:soak)
# Arguments replace the default file list / add node --test options:
#   npm test -- test/repositories/redis.test.ts
#   npm test -- --test-name-pattern=outage
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

banner() {
  printf '\n==================================================================\n'
  printf '  %s\n' "$@"
  printf '==================================================================\n\n'
}

# ---- which servers -----------------------------------------------------------------
all=(redis dynamodb cassandra kafka postgres mysql)
skip_raw="${IDEM_SKIP_STORES:-}"
if [[ ${IDEM_SKIP_KAFKA:-0} =~ ^(1|true|yes)$ ]]; then skip_raw+=",kafka"; fi
skip=()
for s in ${skip_raw//[,;]/ }; do
  s=${s,,}
  case $s in
    all | '*') skip=("${all[@]}") ;;
    dynamo | ddb | dynalite) s=dynamodb ;;
    postgresql | pg) s=postgres ;;
    mariadb) s=mysql ;;
  esac
  [[ " ${all[*]} " == *" $s "* && " ${skip[*]} " != *" $s "* ]] && skip+=("$s")
done
want=()
for s in "${all[@]}"; do [[ " ${skip[*]} " == *" $s "* ]] || want+=("$s"); done

# The tests read the same variables.
IDEM_SKIP_STORES=$(
  IFS=,
  echo "${skip[*]}"
)
export IDEM_SKIP_STORES
if [[ " ${skip[*]} " == *" kafka "* ]]; then export IDEM_SKIP_KAFKA=1; fi

if ((${#skip[@]})); then
  banner "SKIPPING servers/stores: ${skip[*]}" \
    "(IDEM_SKIP_STORES=${IDEM_SKIP_STORES}${IDEM_SKIP_KAFKA:+ IDEM_SKIP_KAFKA=$IDEM_SKIP_KAFKA})" \
    "Their tests are skipped; this is NOT a full run."
fi

# ---- stack up; always stop what we started ------------------------------------------------
started_file=$(mktemp "${TMPDIR:-/tmp}/idem-stack-started.XXXXXX")
lease_dir="${IDEM_STACK_DIR:-.stack}/leases"
mkdir -p "$lease_dir"
echo $$ >"$lease_dir/$$"

teardown() {
  local rc=$?
  trap - EXIT INT TERM
  rm -f "$lease_dir/$$"
  mapfile -t started < <(sort -u "$started_file")
  rm -f "$started_file"
  if ((${#started[@]})); then
    local other=() f
    for f in "$lease_dir"/*; do
      [[ -e $f ]] || continue
      if kill -0 "$(basename "$f")" 2>/dev/null; then other+=("$(basename "$f")"); else rm -f "$f"; fi
    done
    if [[ ${IDEM_STACK_KEEP:-0} == 1 ]]; then
      echo "[test] IDEM_STACK_KEEP=1: leaving ${started[*]} running (bash scripts/stack/down.sh)"
    elif ((${#other[@]})); then
      echo "[test] other test runs (pids ${other[*]}) are using the stack: leaving ${started[*]} running"
    else
      echo "[test] stopping the servers this run started: ${started[*]}"
      bash scripts/stack/down.sh "${started[@]}" || echo "[test] WARNING: stack teardown failed" >&2
    fi
  fi
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ ${IDEM_STACK_MANAGE:-1} == 0 ]]; then
  echo "[test] IDEM_STACK_MANAGE=0: not starting servers; using REDIS_URL, DYNAMODB_ENDPOINT, CASSANDRA_CONTACT_POINTS, KAFKA_BROKERS, POSTGRES_URL, MYSQL_URL as set"
elif ((${#want[@]})); then
  if ! IDEM_STACK_STARTED_FILE="$started_file" bash scripts/stack/up.sh "${want[@]}"; then
    banner "TEST STACK FAILED TO START - not running the tests." \
      "See the [stack] ERROR lines above for the server and its log (${IDEM_STACK_DIR:-.stack}/logs/)." \
      "To run without a server: IDEM_SKIP_STORES=<name> npm test"
    exit 1
  fi
fi

# Endpoints for the tests (defaults match scripts/stack/lib.sh).
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"
export DYNAMODB_ENDPOINT="${DYNAMODB_ENDPOINT:-http://127.0.0.1:4567}"
export CASSANDRA_CONTACT_POINTS="${CASSANDRA_CONTACT_POINTS:-127.0.0.1:9042}"
export KAFKA_BROKERS="${KAFKA_BROKERS:-127.0.0.1:9092}"
export POSTGRES_URL="${POSTGRES_URL:-postgres://idem:idem@127.0.0.1:5432/idem}"
# The stack PostgreSQL's TLS certificate is signed by the same CA.
export POSTGRES_TLS_CA="${POSTGRES_TLS_CA:-${IDEM_STACK_DIR:-$PWD/.stack}/tls/ca.pem}"
export MYSQL_URL="${MYSQL_URL:-mysql://idem:idem@127.0.0.1:3306/idem}"
# The stack MariaDB's TLS certificate is signed by the same CA as Cassandra's.
export MYSQL_TLS_CA="${MYSQL_TLS_CA:-${IDEM_STACK_DIR:-$PWD/.stack}/tls/ca.pem}"
# The CA that signed the stack Cassandra's TLS certificate (generated by scripts/stack/lib.sh).
export CASSANDRA_TLS_CA="${CASSANDRA_TLS_CA:-${IDEM_STACK_DIR:-$PWD/.stack}/tls/ca.pem}"

# scripts/run-tests.mjs runs the files concurrently (IDEM_TEST_CONCURRENCY, default 3), the Kafka files once per
# client, and ends with the ten slowest files, the failed tests with their errors, and the totals.
status=0
node scripts/run-tests.mjs "$@" || status=$?
if ((${#skip[@]})); then
  echo "[test] NOTE: skipped servers/stores: ${skip[*]} (IDEM_SKIP_STORES)"
fi
exit "$status"
