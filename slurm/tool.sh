#!/bin/bash
# One nemo-cascade command as a job on one node, in the cascade jobs' container and mounts
# (slurm/common.sh): an evaluation of a stage or checkpoint, a conversion for release, a plan, a
# report. Paths are the container's: the runs folder is /runs, data /data, models /models (RUN_DIR,
# DATA_DIR, MODELS_DIR).
#
#   sbatch slurm/tool.sh eval /runs/nemotron-cascade-8b/stages/6-swe_24k --suite aime25,ifeval
#   sbatch slurm/tool.sh convert to-hf /runs/nemotron-cascade-8b /runs/release/my-8b --verify
#   sbatch -t 00:10:00 slurm/tool.sh plan recipes/nemotron_cascade_8b.py --time-limit 04:00:00
#   ACCOUNT=acct bash slurm/tool.sh COMMAND ...                  submits itself with those settings
#
# The command runs once (no torchrun, no requeue): `nemo-cascade eval` starts its own engine on the
# node's GPUs. Settings: slurm/common.sh (CONTAINER_IMAGE, the folders, ACCOUNT, TIME, DRY_RUN) and
# slurm/env.sh.
#
#SBATCH --job-name=nemo-cascade-tool
#SBATCH --nodes=1
#SBATCH --gpus-per-node=8
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --mem=0
#SBATCH --time=04:00:00
#SBATCH --output=%x-%j.log

# Slurm runs a copy of this script from its spool folder: find the checkout by REPO_DIR or the
# submit folder.
for d in "${REPO_DIR:-}/slurm" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-$PWD}/slurm"; do
  if [[ -f $d/common.sh ]]; then source "$d/common.sh"; break; fi
done
if ! declare -F tool_main >/dev/null; then
  echo "slurm/common.sh not found: submit from the repository root or set REPO_DIR" >&2
  exit 1
fi
tool_main "$@"
