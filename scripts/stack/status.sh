#!/usr/bin/env bash
# Shows, per server, whether it answers and who started it.
#
#   bash scripts/stack/status.sh [names]
#
# One line per server: NAME STATE OWNER ENDPOINT, where STATE is up|down and
# OWNER is pid:<n> (started by up.sh, so down.sh can stop it), docker, or
# external (answers, but down.sh will not touch it). Always exits 0.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stack_select "$@" || exit 2
for name in "${STACK_SELECTED[@]}"; do
  owner=-
  if pid=$(stack_owned_pid "$name"); then owner="pid:$pid"
  elif [[ -f $(stack_dockerfile "$name") ]]; then owner=docker
  fi
  if stack_probe "$name" 2>/dev/null; then
    state=up
    [[ $owner == - ]] && owner=external
  else
    state=down
  fi
  printf '%-10s %-5s %-12s %s\n' "$name" "$state" "$owner" "$(stack_endpoint_of "$name")"
done
