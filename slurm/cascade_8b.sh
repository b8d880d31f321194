#!/bin/bash
# Nemotron-Cascade-8B (unified: thinking and non-thinking): the whole cascade of recipes/nemotron_cascade_8b.py
# on one node of 8 × H100/H200 (the recipe's TP 2 × CP 2 × DP 2) in a pyxis/enroot container, requeueing itself
# at the time limit until done. More nodes add data parallelism: sbatch -N 4 slurm/cascade_8b.sh parallel.dp=8
#
#   sbatch slurm/cascade_8b.sh [KEY=VALUE ...]                     from the repository root
#   ACCOUNT=acct PARTITION=batch bash slurm/cascade_8b.sh [...]    submits itself with those settings
#   DRY_RUN=1 bash slurm/cascade_8b.sh                             prints the sbatch command (in a job: srun)
#
# Arguments are overrides for `nemo-cascade run`. The recipe's parallel tp × pp × cp × dp must equal
# nodes × GPUS_PER_NODE. The RM and judge servers: NEMO_CASCADE_RM_URL, NEMO_CASCADE_JUDGE_URL (as for 14B).
# Settings: slurm/common.sh (site, run, requeue) and slurm/env.sh (NCCL, vLLM, W&B, recipe paths);
# docs/launch.md. Only what differs from cascade_14b.sh is here.
#
#SBATCH --job-name=nemo-cascade-8b
#SBATCH --nodes=1
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@120
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.log

: "${RECIPE:=recipes/nemotron_cascade_8b.py}"

# Slurm runs a copy of this script from its spool folder: find the checkout by REPO_DIR or the submit folder.
for d in "${REPO_DIR:-}/slurm" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-$PWD}/slurm"; do
  if [[ -f $d/common.sh ]]; then source "$d/common.sh"; break; fi
done
if ! declare -F cascade_main >/dev/null; then
  echo "slurm/common.sh not found: submit from the repository root or set REPO_DIR" >&2
  exit 1
fi
cascade_main "$@"
