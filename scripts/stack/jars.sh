#!/usr/bin/env bash
# Fetches the jars of the Java servers named (kafka, cassandra) into .stack/<name>/lib (or IDEM_STACK_DIR)
# without starting anything. For tests that run a private Kafka broker on a machine where the shared broker
# answers already and is not the stack's (someone's own, another checkout's): up.sh then reuses that broker
# and fetches nothing (issue 20). One fetch at a time per server: test files running in parallel wait for the
# first, then find the jars resolved.
#
#   bash scripts/stack/jars.sh kafka
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
(($# > 0)) || {
  err "usage: bash scripts/stack/jars.sh kafka|cassandra ..."
  exit 2
}
mkdir -p "$STACK_LOG_DIR"
for name in "$@"; do
  [[ -f $STACK_SCRIPTS/$name/pom.xml ]] || {
    err "$name: no scripts/stack/$name/pom.xml (jars are fetched for: kafka, cassandra)"
    exit 2
  }
  (
    exec 9>"$STACK_DIR/.jars-$name.lock"
    flock 9
    stack_resolve_jars "$name"
  )
done
