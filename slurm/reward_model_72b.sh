#!/bin/bash
# The RLHF reward model (§4.2): recipes/reward_model_72b.py, a Bradley–Terry RM on
# Qwen2.5-72B-Instruct, on 8 nodes of 8 × H100 (the recipe's TP 8 × PP 4 × DP 2), requeueing itself
# at the time limit until its one epoch is done. Its export, runs/reward-model-72b/stages/0-rm/hf,
# is what slurm/serve_model.sh serves for the policies' RLHF (NEMO_CASCADE_RM_URL). Only what
# differs from cascade_14b.sh is here.
#
#   sbatch slurm/reward_model_72b.sh [KEY=VALUE ...]
#
#SBATCH --job-name=nemo-cascade-rm-72b
#SBATCH --nodes=8
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time=04:00:00
#SBATCH --requeue
#SBATCH --signal=B:USR1@120
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.log

: "${RECIPE:=recipes/reward_model_72b.py}"

# Slurm runs a copy of this script from its spool folder: find the checkout by REPO_DIR or the
# submit folder.
for d in "${REPO_DIR:-}/slurm" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-$PWD}/slurm"; do
  if [[ -f $d/common.sh ]]; then source "$d/common.sh"; break; fi
done
if ! declare -F cascade_main >/dev/null; then
  echo "slurm/common.sh not found: submit from the repository root or set REPO_DIR" >&2
  exit 1
fi
cascade_main "$@"
