#!/bin/bash
# Nemotron-Cascade-14B-Thinking: the whole cascade of recipes/nemotron_cascade_14b_thinking.py on 2 nodes of
# 8 × H100/H200 (the recipe's TP 8 × CP 2), in a pyxis/enroot container, requeueing itself at the time limit
# until the cascade is done. More nodes add data parallelism: sbatch -N 8 slurm/cascade_14b.sh parallel.dp=4
# (the paper's only stated scale is Code RL on 8 DGX H100 nodes, §4.6.2).
#
#   sbatch slurm/cascade_14b.sh [KEY=VALUE ...]                    from the repository root
#   ACCOUNT=acct PARTITION=batch bash slurm/cascade_14b.sh [...]   submits itself with those settings
#   DRY_RUN=1 bash slurm/cascade_14b.sh                            prints the sbatch command (in a job: srun)
#
# Arguments are overrides for `nemo-cascade run` (e.g. checkpoint_every_minutes=20). The recipe's parallel
# tp × pp × cp × dp must equal nodes × GPUS_PER_NODE: change both together (-N / NODES and parallel.dp=...).
# The served 72B reward model and SWE judge are not started here: set NEMO_CASCADE_RM_URL and
# NEMO_CASCADE_JUDGE_URL to running servers (or use `nemo-cascade launch`, which serves them as jobs).
# Every setting is an environment variable, documented in slurm/common.sh (site: ACCOUNT, PARTITION,
# CONTAINER_IMAGE, DATA_DIR, MODELS_DIR, RUN_DIR; the run: RUN_NAME, RECIPE) and slurm/env.sh (NCCL, vLLM,
# W&B); resubmitting with the same RUN_NAME continues the same run. docs/launch.md has the details.
#
#SBATCH --job-name=nemo-cascade-14b
#SBATCH --nodes=2
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@120
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.log

: "${RECIPE:=recipes/nemotron_cascade_14b_thinking.py}"

# Slurm runs a copy of this script from its spool folder: find the checkout by REPO_DIR or the submit folder.
for d in "${REPO_DIR:-}/slurm" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-$PWD}/slurm"; do
  if [[ -f $d/common.sh ]]; then source "$d/common.sh"; break; fi
done
if ! declare -F cascade_main >/dev/null; then
  echo "slurm/common.sh not found: submit from the repository root or set REPO_DIR" >&2
  exit 1
fi
cascade_main "$@"
