#!/usr/bin/env bash
# Runs every repository benchmark in turn against the test stack (started here if needed, stopped after if we
# started it). Each prints its own figures and its baseline measured in the same run.
#   npm run bench:repositories            # all stores
#   npm run bench:repositories -- redis   # some stores
set -euo pipefail
cd "$(dirname "$0")/.."
stores=("$@")
((${#stores[@]})) || stores=(rocksdb redis dynamodb cassandra postgres mysql)
servers=()
for s in "${stores[@]}"; do [[ $s == rocksdb ]] || servers+=("$s"); done
if ((${#servers[@]})); then bash scripts/stack/up.sh "${servers[@]}"; fi
for s in "${stores[@]}"; do
  printf '\n===== %s =====\n' "$s"
  node --import tsx "bench/repositories/$s.ts"
done
printf '\n===== consumer wrapper overhead (memory) =====\n'
node --import tsx bench/consumer.ts
