#!/usr/bin/env bash
# One node of a multi-node nemo-cascade job. srun starts this once per node (inside the container); it starts
# torchrun, whose GPUS_PER_NODE ranks join the other nodes' by c10d rendezvous at MASTER_ADDR:MASTER_PORT
# (the batch step sets MASTER_ADDR to the job's first node) and run `python -m nemo_cascade.tooling.cli run ARGS...`.
# Under torchrun the CLI runs the job in each rank instead of launching its own torchrun (TORCHELASTIC_RUN_ID).
#
#   bash slurm/node.sh RECIPE [KEY=VALUE ...] [--stage NAME]
#
# Used by slurm/cascade_*.sh and by the nemo-run Slurm tasks (nemo_cascade/tooling/launch.py).
# DOCTOR=1 (default): `nemo-cascade doctor RECIPE [KEY=VALUE...] [--stage NAME]` first, on every
# node — a node that fails a check (CUDA, versions, TE/FP8, vLLM's reload API, bubblewrap,
# interfaces, the servers this job needs now, disk, memory) ends the job with its table in the log
# instead of failing later inside the cascade. DOCTOR=0 skips it. SERVER_WAIT: seconds a server this
# job needs now is waited for (600: a serve job may be loading its model, or requeueing).
# NODE_SETUP: shell code run first on every node (e.g. "pip install --no-deps -e ."); TORCHRUN: the
# launcher (default: torchrun run by nemo_cascade/tooling/torchrun.py, which ends a failed job with
# one line instead of torchrun's traceback and table in the job log).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source slurm/env.sh
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [[ -n ${NODE_SETUP:-} ]]; then
  eval "$NODE_SETUP"
fi
: "${MASTER_ADDR:?is unset: the batch step sets it to the first node of the job}"
if [[ ${DOCTOR:-1} == 1 ]]; then
  doctor_args=()
  for arg in "$@"; do  # the recipe, its overrides and --stage NAME; not the run's --retrain
    if [[ $arg != --retrain ]]; then doctor_args+=("$arg"); fi
  done
  # Under torchrun over every node, as the job will run (one more port than the job's own
  # rendezvous), so the NCCL and gloo all-reduces cross the nodes before any model loads.
  ${TORCHRUN:-python -m nemo_cascade.tooling.torchrun} \
    --nnodes="${SLURM_NNODES:-1}" --nproc_per_node="${GPUS_PER_NODE:-8}" \
    --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$(( ${MASTER_PORT:-29500} + 1 ))" \
    --rdzv_id="${SLURM_JOB_ID:-nemo-cascade}-doctor" --max_restarts=0 \
    -m nemo_cascade.tooling.cli doctor "${doctor_args[@]}" --server-wait "${SERVER_WAIT:-600}" \
    || { echo "nemo-cascade: error: node $(hostname) failed the checks above (DOCTOR=0 skips them)" >&2; exit 2; }
fi
exec ${TORCHRUN:-python -m nemo_cascade.tooling.torchrun} \
  --nnodes="${SLURM_NNODES:-1}" --nproc_per_node="${GPUS_PER_NODE:-8}" \
  --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:${MASTER_PORT:-29500}" --rdzv_id="${SLURM_JOB_ID:-nemo-cascade}" \
  --max_restarts=0 \
  -m nemo_cascade.tooling.cli run "$@"
