#!/usr/bin/env bash
# The README's first command (`npx idem dedup --id id examples/events.ndjson` runs bin/idem.js) on the `node` first
# in PATH, in a temp directory so its store does not land in the checkout: 4 of the 6 lines are written.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/idem-first-command.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/examples" && cp examples/events.ndjson "$work/examples/"
lines=$(cd "$work" && node "$root/bin/idem.js" dedup --id id examples/events.ndjson | grep -c .)
if [[ $lines != 4 ]]; then
  echo "the README's first command wrote $lines lines, not 4, on Node $(node --version)" >&2
  exit 1
fi
echo "::: the README's first command: 4 of 6 lines written on Node $(node --version)"
