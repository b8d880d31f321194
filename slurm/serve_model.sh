#!/bin/bash
# A model served by vLLM for as long as the cascade needs it — days: the 72B reward model (§4.2–4.3) or the SWE
# judge (§4.7) — in a job of its own that outlives every stage job and requeues itself at its time limit.
#
#   MODEL=/models/Qwen2.5-72B-RM NAME=rm sbatch slurm/serve_model.sh [VLLM_SERVE_ARG ...]
#   MODEL=/models/Kimi-Dev-72B NAME=judge RUNNER=generate bash slurm/serve_model.sh   submits itself
#   DRY_RUN=1 MODEL=... NAME=rm bash slurm/serve_model.sh                             prints the sbatch command
#
# MODEL is a local HF folder as the container sees it (compute nodes are offline: no Hub downloads;
# a folder that does not exist is refused in one line). Once the server answers /health its URL,
# http://HOST:PORT, and the token every request must carry (a new one per start;
# nemo_cascade/runtime/server_token.py) are written (atomically, readable by the owner only) to
# $RUN_DIR/$RUN_NAME/servers/$NAME.url — in the container $RUNS_MOUNT/$RUN_NAME/... — and removed
# when it stops. A stage names that file instead of a URL, and its client re-reads it when a request
# fails (the server came back on another node) and waits for a restart, boundedly:
#   nemo-cascade run RECIPE stages.rlhf.reward.reward_model_url=file:/runs/served/servers/rm.url
#   (or export NEMO_CASCADE_RM_URL=file:/runs/served/servers/rm.url for the paper recipes)
#
# Settings (environment): MODEL (required), NAME (rm), RUNNER (pooling: a reward model; generate: a judge LM),
# RUN_NAME (served: the folder of the URL files), DTYPE (bfloat16), SERVE_GPUS (GPUS_PER_NODE: vLLM tensor
# parallel size), PORT (0: derived from the run folder and NAME, the same on every restart), READY_TIMEOUT
# (3600 s for the model to load), PYTHON (python, inside the container). Site, container, mounts, requeue
# (MAX_REQUEUES): slurm/common.sh; vLLM and cache variables: slurm/env.sh; docs/launch.md.
#
#SBATCH --job-name=nemo-cascade-serve
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

: "${RUN_NAME:=served}"
RECIPE=  # a server runs no recipe (one exported for a cascade job must not be read here)
: "${NAME:=rm}"
: "${RUNNER:=pooling}"
: "${DTYPE:=bfloat16}"
: "${PORT:=0}"
: "${READY_TIMEOUT:=3600}"
: "${PYTHON:=python}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # compute nodes are offline: fail at once instead of retrying

# Slurm runs a copy of this script from its spool folder: find the checkout by REPO_DIR or the submit folder.
for d in "${REPO_DIR:-}/slurm" "$(dirname "$0")" "${SLURM_SUBMIT_DIR:-$PWD}/slurm"; do
  if [[ -f $d/common.sh ]]; then source "$d/common.sh"; break; fi
done
if ! declare -F cascade_main >/dev/null; then
  echo "slurm/common.sh not found: submit from the repository root or set REPO_DIR" >&2
  exit 1
fi
: "${SERVE_GPUS:=$GPUS_PER_NODE}"
export NAME RUNNER DTYPE PORT READY_TIMEOUT PYTHON SERVE_GPUS MODEL="${MODEL:-}"

serve_host_path() {  # where MODEL (a container path) is on the host: the mounts of common.sh, reversed
  local m=$1
  if [[ $CONTAINER_IMAGE != none && $m == "$MODELS_MOUNT"/* ]]; then echo "$MODELS_DIR/${m#"$MODELS_MOUNT"/}"
  elif [[ $CONTAINER_IMAGE != none && $m == "$RUNS_MOUNT"/* ]]; then echo "$RUN_DIR/${m#"$RUNS_MOUNT"/}"
  else echo "$m"; fi
}

serve_check() {  # one line and exit 2 for what would only fail after the job queued and vLLM imported
  local host_path
  if [[ -z $MODEL ]]; then nc_log "MODEL is not set: the local HF folder to serve (e.g. $MODELS_MOUNT/NAME)"; exit 2; fi
  if [[ $RUNNER != pooling && $RUNNER != generate ]]; then
    nc_log "RUNNER=$RUNNER: expected pooling (a reward model) or generate (a judge LM)"; exit 2
  fi
  host_path=$(serve_host_path "$MODEL")
  if [[ ! -f $host_path/config.json ]]; then
    nc_log "MODEL=$MODEL: no HF model folder at $host_path (no config.json); compute nodes do not download models"
    exit 2
  fi
}

serve_on_node() {  # inside the container (srun): the served model, until a signal stops it
  cd "$REPO_MOUNT"
  source slurm/env.sh
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  local vllm_args
  vllm_args=$(printf ' %q' --tensor-parallel-size "$SERVE_GPUS" "$@")
  exec "$PYTHON" -m nemo_cascade.tooling.launch serve --run-dir "$RUNS_MOUNT/$RUN_NAME" --name "$NAME" --model "$MODEL" \
    --runner "$RUNNER" --host 0.0.0.0 --port "$PORT" --dtype "$DTYPE" --ready-timeout "$READY_TIMEOUT" \
    --vllm-args "${vllm_args# }"
}

serve_job() {  # the batch step: srun the server, requeue at the time limit (common.sh's traps)
  local mounts url_file="$RUN_DIR/$RUN_NAME/servers/$NAME.url"
  source "$NC_SLURM_DIR/env.sh"
  NC_CMD=(srun --nodes=1 --ntasks=1 --kill-on-bad-exit=1)
  if [[ $CONTAINER_IMAGE != none ]]; then
    mounts="$REPO_DIR:$REPO_MOUNT,$RUN_DIR:$RUNS_MOUNT,$DATA_DIR:$DATA_MOUNT,$MODELS_DIR:$MODELS_MOUNT"
    NC_CMD+=(--container-image="$CONTAINER_IMAGE" --container-mounts="$mounts${EXTRA_MOUNTS:+,$EXTRA_MOUNTS}"
             --container-workdir="$REPO_MOUNT" --no-container-mount-home)
  fi
  NC_CMD+=(bash "$REPO_MOUNT/slurm/serve_model.sh" --on-node "$@")
  nc_log "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}, at most $MAX_REQUEUES): serving $MODEL ($RUNNER," \
         "$SERVE_GPUS GPUs) as $NAME; URL file $url_file"
  if [[ $DRY_RUN == 1 ]]; then nc_do "${NC_CMD[@]}"; return 0; fi
  # A URL left by a job that was killed hard (a failed node) names a dead server: clients wait for the new one.
  rm -f "$url_file"
  # A server has nothing to save: on the time-limit signal it requeues and stops at once (not common.sh's
  # save-and-stop of a training run). The traps only note the signal; serve_wait handles it between waits.
  NC_PENDING=()
  trap 'NC_PENDING+=(USR1)' USR1
  trap 'NC_PENDING+=(TERM)' TERM
  "${NC_CMD[@]}" &
  NC_STEP_PID=$!
  serve_wait
}

serve_wait() {  # wait for the server step; USR1 (time limit) or TERM: requeue when due, then stop the server
  local rc status=0 sig requeued=0 count=${SLURM_RESTART_COUNT:-0}
  while :; do
    rc=0
    wait "$NC_STEP_PID" || rc=$?
    if [[ $rc != 127 ]]; then status=$rc; fi  # 127: already collected by an earlier wait
    if (( ${#NC_PENDING[@]} == 0 )); then break; fi
    while (( ${#NC_PENDING[@]} )); do
      sig=${NC_PENDING[0]}
      NC_PENDING=("${NC_PENDING[@]:1}")
      if [[ $requeued == 0 && ( $sig == USR1 || $REQUEUE_ON_TERM == 1 ) ]] && (( count < MAX_REQUEUES )); then
        requeued=1
        nc_log "SIG$sig: requeueing job $SLURM_JOB_ID (restart $((count + 1)) of at most $MAX_REQUEUES); the" \
               "server stops now and publishes its URL again when the job restarts"
        nc_do scontrol requeue "$SLURM_JOB_ID" || nc_log "scontrol requeue $SLURM_JOB_ID failed"
      elif [[ $requeued == 0 && $sig == USR1 ]]; then
        nc_log "SIG$sig: not requeueing: job $SLURM_JOB_ID was restarted $count times (MAX_REQUEUES=$MAX_REQUEUES)"
      else
        nc_log "SIG$sig: stopping the server"
      fi
      kill -TERM "$NC_STEP_PID" 2>/dev/null || true  # srun passes it on: the server removes its URL file
    done
  done
  trap - USR1 TERM
  if [[ $requeued == 1 ]]; then nc_log "the server step ended (exit $status); the job is requeued"; exit 0; fi
  nc_log "the server step ended (exit $status)"
  exit "$status"
}

if [[ ${1:-} == --on-node ]]; then
  shift
  serve_on_node "$@"
fi
serve_check
if [[ -z ${SLURM_JOB_ID:-} ]]; then nc_submit "$@"; else serve_job "$@"; fi
