#!/usr/bin/env bash
# Starts the test stack (or part of it) and waits until each server answers.
#
#   bash scripts/stack/up.sh                      # redis dynamodb cassandra kafka postgres mysql
#   bash scripts/stack/up.sh redis kafka          # just those
#
# Native processes on loopback by default; `docker compose -f
# docker-compose.test.yml up -d` instead when a Docker engine answers (force
# with IDEM_STACK_MODE=native|docker). A server that already answers is reused
# and not started twice. Logs: .stack/logs/. Details: docs/test-stack.md.
#
# Exit 0 when every requested server answers; 1 (naming the server and its log)
# otherwise. When IDEM_STACK_STARTED_FILE is set, the names of the servers this
# run started are appended to that file (scripts/test.sh uses it to stop only those).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case "${1:-}" in -h | --help)
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
esac

stack_select "$@" || exit 2
stack_lock
t_start=$SECONDS

mode=native
if stack_docker_available; then mode=docker; fi
log "mode: $mode; servers: ${STACK_SELECTED[*]}; logs: $STACK_LOG_DIR/"

declare -A watch_pid=() # name -> pid to watch while waiting ("" = none)
to_wait=()
started=()
failed=()

record_started() {
  started+=("$1")
  if [[ -n ${IDEM_STACK_STARTED_FILE:-} ]]; then echo "$1" >>"$IDEM_STACK_STARTED_FILE"; fi
}

if [[ $mode == docker ]]; then
  need=()
  for name in "${STACK_SELECTED[@]}"; do
    if [[ -f $(stack_dockerfile "$name") ]] || ! stack_probe "$name"; then
      need+=("$name")
    else
      log "$name: already answering at $(stack_endpoint_of "$name") (not started by the stack); reusing it"
    fi
  done
  if ((${#need[@]})); then
    log "docker compose up -d ${need[*]}"
    if ! stack_compose up -d "${need[@]}" >"$STACK_LOG_DIR/docker-compose.log" 2>&1; then
      err "docker compose up failed; see $STACK_LOG_DIR/docker-compose.log"
      tail -n 30 "$STACK_LOG_DIR/docker-compose.log" >&2
      exit 1
    fi
    for name in "${need[@]}"; do
      if [[ ! -f $(stack_dockerfile "$name") ]]; then
        touch "$(stack_dockerfile "$name")"
        record_started "$name"
      fi
      to_wait+=("$name")
      watch_pid[$name]=""
    done
  fi
else
  # Cold start: fetch the Cassandra and Kafka jars concurrently (Maven 3.8
  # resolves one pom at a time, so two processes roughly halve the wait).
  declare -A resolve_job=()
  for name in cassandra kafka; do
    [[ " ${STACK_SELECTED[*]} " == *" $name "* ]] || continue
    stack_jars_resolved "$name" && continue
    stack_owned_pid "$name" >/dev/null && continue
    stack_port_open "$(stack_host_of "$name")" "$(stack_port_of "$name")" && continue
    stack_resolve_jars "$name" &
    resolve_job[$name]=$!
  done
  for name in "${STACK_SELECTED[@]}"; do
    if [[ -n ${resolve_job[$name]:-} ]]; then
      wait "${resolve_job[$name]}" || true # on failure the start below retries and reports
    fi
    if pid=$(stack_owned_pid "$name"); then
      was=$(stack_owned_endpoint "$name")
      if [[ -n $was && $was != "$(stack_endpoint_of "$name")" ]]; then
        err "$name: the stack already runs $name for $was (pid $pid), not $(stack_endpoint_of "$name"); stop it first: bash scripts/stack/down.sh $name"
        failed+=("$name")
        continue
      fi
      log "$name: already started by the stack (pid $pid)"
      to_wait+=("$name")
      watch_pid[$name]=$pid
      continue
    fi
    host=$(stack_host_of "$name")
    port=$(stack_port_of "$name")
    if stack_port_open "$host" "$port"; then
      if node "$STACK_SCRIPTS/probe.mjs" "$name" --quiet --wait "${STACK_FOREIGN_WAIT:-10}" 2>/dev/null; then
        log "$name: already answering at $(stack_endpoint_of "$name") (not started by the stack); reusing it"
        continue
      fi
      err "$name: $host:$port is in use by something that does not answer as $name"
      failed+=("$name")
      continue
    fi
    log "$name: starting on $host:$port"
    if ! "stack_start_native_$name"; then
      failed+=("$name")
      stack_print_failure "$name"
      continue
    fi
    record_started "$name"
    to_wait+=("$name")
    watch_pid[$name]=$(stack_owned_pid "$name" || true)
  done
fi

# Wait for everything in parallel (Cassandra and Kafka boot concurrently).
declare -A probe_job=()
for name in "${to_wait[@]}"; do
  args=("$name" --wait "$(stack_timeout_of "$name")")
  [[ -n ${watch_pid[$name]:-} ]] && args+=(--pid "${watch_pid[$name]}")
  node "$STACK_SCRIPTS/probe.mjs" "${args[@]}" >"$STACK_DIR/wait-$name.out" 2>&1 &
  probe_job[$name]=$!
done
for name in "${to_wait[@]}"; do
  rc=0
  wait "${probe_job[$name]}" || rc=$?
  cat "$STACK_DIR/wait-$name.out"
  rm -f "$STACK_DIR/wait-$name.out"
  if ((rc != 0)); then
    failed+=("$name")
    stack_print_failure "$name"
    # Don't leave a half-started server of ours behind.
    if [[ " ${started[*]} " == *" $name "* ]]; then stack_stop_one "$name" >&2 || true; fi
  fi
done

if ((${#failed[@]})); then
  err "FAILED to bring up: ${failed[*]} (logs: $STACK_LOG_DIR/)"
  exit 1
fi

log "up in $((SECONDS - t_start))s${started:+ (started: ${started[*]})}:"
for name in "${STACK_SELECTED[@]}"; do
  case $name in
    redis) log "  REDIS_URL=$REDIS_URL" ;;
    dynamodb) log "  DYNAMODB_ENDPOINT=$DYNAMODB_ENDPOINT" ;;
    cassandra) log "  CASSANDRA_CONTACT_POINTS=$CASSANDRA_CONTACT_POINTS" ;;
    kafka) log "  KAFKA_BROKERS=$KAFKA_BROKERS" ;;
    postgres) log "  POSTGRES_URL=$(_redact_url "$POSTGRES_URL")" ;;
    mysql) log "  MYSQL_URL=$(_redact_url "$MYSQL_URL")" ;;
  esac
done
