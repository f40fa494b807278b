#!/usr/bin/env bash
# The server-free suites on another Node major, by hand (CI runs them in the same pool as the whole suite, see
# .ci/run): installs that Node from the npm registry, runs the README's first command and every suite that needs
# no server (the packaging tests among them) on it. The server tests are skipped, and say so: IDEM_SKIP_STORES=all.
#   bash scripts/ci-node.sh 20
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
major=${1:?usage: scripts/ci-node.sh <node major>}
PATH="$(bash scripts/node-major.sh "$major"):$PATH"
export PATH
echo "::: node $(node --version), npm $(npm --version)"
bash scripts/first-command.sh
# No server answers at these endpoints, so a test that needs one and ignores the opt-out fails loudly.
IDEM_SKIP_STORES=all REDIS_URL=redis://127.0.0.1:1 DYNAMODB_ENDPOINT=http://127.0.0.1:1 \
  CASSANDRA_CONTACT_POINTS=127.0.0.1:1 KAFKA_BROKERS=127.0.0.1:1 \
  POSTGRES_URL=postgres://idem:idem@127.0.0.1:1/idem MYSQL_URL=mysql://idem:idem@127.0.0.1:1/idem npm test
