#!/usr/bin/env bash
# Stops test-stack servers that scripts/stack/up.sh started (pid files in
# .stack/pids/, or docker compose services it brought up). Servers it did not
# start are left alone.
#
#   bash scripts/stack/down.sh                 # everything up.sh started
#   bash scripts/stack/down.sh kafka           # just Kafka (data is kept)
#   bash scripts/stack/down.sh --kill redis    # SIGKILL instead of SIGTERM (crash)
#   bash scripts/stack/down.sh --purge         # also delete the stopped servers' data
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

signal=TERM
purge=0
names=()
for a in "$@"; do
  case $a in
    --kill) signal=KILL ;;
    --purge) purge=1 ;;
    -h | --help)
      sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      err "unknown option $a"
      exit 2
      ;;
    *) names+=("$a") ;;
  esac
done
stack_select "${names[@]}" || exit 2
stack_lock

# Stop in parallel; each line of output is prefixed by stack_stop_one.
jobs_=()
for name in "${STACK_SELECTED[@]}"; do
  stack_stop_one "$name" "$signal" &
  jobs_+=($!)
done
rc=0
for j in "${jobs_[@]}"; do wait "$j" || rc=1; done

if ((purge)); then
  for name in "${STACK_SELECTED[@]}"; do
    if stack_owned_pid "$name" >/dev/null; then continue; fi
    case $name in
      redis) rm -rf "$STACK_DIR/redis" ;;
      dynamodb) rm -rf "$STACK_DIR/dynamodb/data" ;;
      cassandra) rm -rf "$STACK_DIR/cassandra/data" ;;
      kafka) rm -rf "$STACK_DIR/kafka/data" "$STACK_DIR/kafka/cluster.id" ;;
      postgres) rm -rf "$(stack_db_home postgres "$STACK_POSTGRES_USER")" ;;
      mysql) rm -rf "$(stack_db_home mysql mysql)" ;;
    esac
    if stack_docker_available 2>/dev/null; then stack_compose rm -f -s -v "$name" >/dev/null 2>&1 || true; fi
    log "$name: data purged"
  done
fi
exit $rc
