#!/usr/bin/env bash
# pip's stderr (the file $1) as scripts/setup_venv.sh shows it, for a pip command that succeeded:
#  - "WARNING: Location '...'" lines go (find-links folders some machines' pip config names; one per call);
#  - pip's "dependency resolver" ERROR block (its header line, then one line per conflict) goes only when every
#    conflict in it is one the setup settles in its next command (SETTLED: the anyio that nemo-run's resolver
#    picks below what openai needs, pinned back by `pip install --no-deps ... anyio==`); a block with any other
#    conflict is shown whole, header included, so a new conflict is never hidden.
set -euo pipefail
header="^ERROR: pip's dependency resolver does not currently take into account"
settled="requires anyio.*but you have anyio .* which is incompatible"
conflict="(which is incompatible|which is not installed)\.?$"
shown=$(grep -v -e "^WARNING: Location '" "$1" || true)
unsettled=$(grep -E -e "$conflict" <<<"$shown" | grep -v -e "$settled" || true)
if [ -z "$unsettled" ]; then
  shown=$(grep -v -e "$header" -e "$settled" <<<"$shown" || true)
fi
if [ -n "$shown" ]; then
  printf '%s\n' "$shown"
fi
