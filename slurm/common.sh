# shellcheck shell=bash
# What slurm/cascade_*.sh share: settings, self-submission, the srun → torchrun launch, and requeue at the time
# limit. A job script sets its #SBATCH lines and RECIPE, sources this file and calls
# `cascade_main "$@"` (its arguments are KEY=VALUE overrides for `nemo-cascade run`).
#
# Settings — environment variables, all optional (sbatch passes the submitting shell's environment to the job):
#   ACCOUNT PARTITION QOS   the site's account / partition / QoS. Used when a script submits itself
#                           (`bash slurm/cascade_14b.sh`); with plain sbatch give -A/-p or SBATCH_ACCOUNT/...
#   NODES TIME              replace the script's #SBATCH --nodes / --time (self-submission; or sbatch -N / -t)
#   CONTAINER_IMAGE         pyxis/enroot image (alias: CONTAINER), or an Apptainer/Singularity
#                           image file (*.sif: srun runs `apptainer exec --nv`); "none" runs on
#                           the nodes' own Python
#                           (default $REPO_DIR/containers/nemo-cascade.sqsh: the project's pinned image, built
#                           from containers/Dockerfile as docs/launch.md "The container" shows)
#   REPO_DIR                this checkout on the cluster's shared filesystem (default: where this file is)
#   RUN_DIR                 folder of runs; the run is $RUN_DIR/$RUN_NAME (default $REPO_DIR/runs)
#   DATA_DIR MODELS_DIR     prompt data and models (default $REPO_DIR/data, $REPO_DIR/models)
#   REPO_MOUNT RUNS_MOUNT DATA_MOUNT MODELS_MOUNT
#                           where those appear in the container (/workspace/nemo-cascade, /runs, /data, /models);
#                           recipes name data and models by these paths
#   EXTRA_MOUNTS            more container mounts, "src:dst[,src:dst...]"
#   RUN_NAME                the run's name (name=...): the same name continues the same run
#                           (default: the recipe's own, Cascade.name, read by the batch shell's
#                           python3 — standard library only, so no container or venv is needed)
#   RECIPE                  recipe file or module:function (default: the script's)
#   GPUS_PER_NODE           8;   MASTER_PORT   29500 (rendezvous port on the first node)
#   NODE_SETUP              shell code run on every node before torchrun, e.g. "pip install --no-deps -e ."
#   MAX_REQUEUES            2000: requeues before the job stops requeueing itself (counted by Slurm's
#                           SLURM_RESTART_COUNT, which also counts preemptions); a cascade takes hundreds of
#                           4-hour jobs (`nemo-cascade plan RECIPE --time-limit 04:00:00` counts them)
#   MAX_STALLED_REQUEUES    3: a requeued job does not run once this many jobs in a row saved nothing in the run
#                           folder (no checkpoint, rollout or gate chunk, export): a failure that repeats stops
#   STOP_GRACE              90: seconds the job waits, after the time-limit signal, for the run to save at the end
#                           of its current step and stop; then it is stopped (it resumes from its last checkpoint)
#   REQUEUE_ON_TERM         0; 1 = requeue on SIGTERM too (sites whose preemption cancels instead of requeueing;
#                           note that scancel also sends SIGTERM)
#   WANDB                   1: also log to Weights & Biases (wandb=true); 0: only metrics.jsonl
#   LOG_DIR                 job logs of a self-submitted job (default $RUN_DIR/slurm-logs)
#   DRY_RUN                 1: print the sbatch / srun / scontrol commands instead of running them
# NCCL, vLLM, W&B and cache variables: slurm/env.sh.
#
# Resume: a requeued or resubmitted job runs `nemo-cascade run` on the same run folder again; the run's
# manifest.json skips finished stages and the interrupted stage continues from its newest checkpoint
# (stages.NAME.checkpoint_every steps, checkpoint_every_minutes of wall time, and the save on the time-limit
# signal). Nothing here deletes or rewrites run files but the stop request (and writes only its own
# .requeue_progress), so a restart is always safe.
#
# The run also knows its job's end (NEMO_CASCADE_JOB_END, from squeue here: a container may have no Slurm
# commands) and stops by itself, saving first, when only its save still fits (exit 75): the job requeues then too.
#
# The time-limit signal (USR1, 120 s ahead) reaches only this batch shell: torchrun would die of it, and other
# nodes and the container cannot be signalled from here. So it is handed on as a file, RUN_DIR/RUN_NAME/stop_request,
# which every rank sees; the ranks save at the end of the current step and stop (nemo_cascade/runtime/stop_request.py).

set -euo pipefail
NC_SLURM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$NC_SLURM_DIR/progress.sh"

: "${REPO_DIR:=$(dirname "$NC_SLURM_DIR")}"
: "${CONTAINER_IMAGE:=${CONTAINER:-$REPO_DIR/containers/nemo-cascade.sqsh}}"
: "${RUN_DIR:=$REPO_DIR/runs}"
NC_GIVEN_DIRS=${DATA_DIR:+DATA_DIR}" "${MODELS_DIR:+MODELS_DIR}  # set by the user: must exist, container or not
: "${DATA_DIR:=$REPO_DIR/data}"
: "${MODELS_DIR:=$REPO_DIR/models}"
if [[ $CONTAINER_IMAGE == none ]]; then  # no container: the mounts are the host paths themselves
  : "${REPO_MOUNT:=$REPO_DIR}" "${RUNS_MOUNT:=$RUN_DIR}" "${DATA_MOUNT:=$DATA_DIR}" "${MODELS_MOUNT:=$MODELS_DIR}"
else
  : "${REPO_MOUNT:=/workspace/nemo-cascade}" "${RUNS_MOUNT:=/runs}" "${DATA_MOUNT:=/data}" "${MODELS_MOUNT:=/models}"
fi
: "${EXTRA_MOUNTS:=}"
: "${RECIPE:=}"  # the cascade scripts set it; slurm/tool.sh runs no recipe
: "${RUN_NAME:=}"  # default: the recipe's own name (nc_recipe, once the job's arguments are known)
: "${GPUS_PER_NODE:=8}"
: "${MASTER_PORT:=29500}"
: "${NODE_SETUP:=}"
: "${MAX_REQUEUES:=2000}"
: "${MAX_STALLED_REQUEUES:=3}"
: "${STOP_GRACE:=90}"
: "${REQUEUE_ON_TERM:=0}"
: "${WANDB:=1}"
: "${LOG_DIR:=$RUN_DIR/slurm-logs}"
: "${DRY_RUN:=0}"
export REPO_DIR CONTAINER_IMAGE RUN_DIR DATA_DIR MODELS_DIR REPO_MOUNT RUNS_MOUNT DATA_MOUNT MODELS_MOUNT \
  EXTRA_MOUNTS RECIPE RUN_NAME GPUS_PER_NODE MASTER_PORT NODE_SETUP MAX_REQUEUES MAX_STALLED_REQUEUES STOP_GRACE \
  REQUEUE_ON_TERM WANDB

nc_log() { echo "[nemo-cascade $(date '+%F %T')] $*" >&2; }

nc_do() {  # run a command, or (DRY_RUN=1) print it
  if [[ $DRY_RUN == 1 ]]; then printf '+'; printf ' %q' "$@"; printf '\n'; else "$@"; fi
}

cascade_main() {  # outside a job: submit this script; inside: run the cascade
  [[ -n $RECIPE ]] || nc_fail "the job script sets RECIPE"
  if [[ -z ${SLURM_JOB_ID:-} ]]; then nc_submit "$@"; else nc_run_job "$@"; fi
}

tool_main() {  # COMMAND ARGS...: one nemo-cascade command on one node (slurm/tool.sh)
  if [[ $# == 0 || $1 == -* ]]; then
    nc_fail "expected a nemo-cascade command and its arguments, e.g. \`sbatch slurm/tool.sh eval" \
            "/runs/NAME/stages/4-math --suite aime25\`"
  fi
  if [[ -z ${SLURM_JOB_ID:-} ]]; then nc_submit "$@"; return; fi
  nc_check_inputs
  source "$NC_SLURM_DIR/env.sh"
  nc_srun_prefix 1
  NC_CMD+=(env "PYTHONPATH=$REPO_MOUNT" python -m nemo_cascade.tooling.cli "$@")
  nc_log "job $SLURM_JOB_ID: nemo-cascade $* (in $REPO_MOUNT; the runs folder is $RUNS_MOUNT)"
  nc_do "${NC_CMD[@]}"
}

# GPUS KEY=VALUE...: the run's name (into RUN_NAME, unless set) and its layout against GPUS, read by
# tooling/job_recipe.py with the batch host's python3 (standard library only)
nc_recipe() {
  local out rc=0 why python=${NC_PYTHON:-python3}
  out=$(cd "$REPO_DIR" && PYTHONPATH="$REPO_DIR" "$python" -m nemo_cascade.tooling.job_recipe \
          "$RECIPE" "${@:2}" --world "$1" 2>&1) || rc=$?
  why=${out##*$'\n'}
  if [[ $rc == 0 ]]; then
    : "${RUN_NAME:=$why}"
  elif [[ $rc == 2 ]]; then
    nc_fail "${why#nemo-cascade: error: }"
  elif [[ -z $RUN_NAME ]]; then  # 3: the recipe needs more than this python3 has; else: no python3
    nc_fail "RUN_NAME is unset and the recipe's name cannot be read here" \
            "(${why:-$python exited $rc}): set RUN_NAME"
  else
    nc_log "layout not checked before the job (${why:-$python exited $rc}); the nodes check it"
  fi
  export RUN_NAME
}

nc_submit() {
  local script args nodes
  script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
  nodes=${NODES:-$(sed -n 's/^#SBATCH --nodes=\([0-9]*\)$/\1/p' "$script")}
  if [[ ! $GPUS_PER_NODE =~ ^[1-9][0-9]*$ ]]; then
    nc_fail "GPUS_PER_NODE=$GPUS_PER_NODE: expected a positive integer"
  fi
  if [[ ! ${nodes:-1} =~ ^[1-9][0-9]*$ ]]; then
    nc_fail "NODES=$nodes: expected a positive integer"
  fi
  if [[ -n $RECIPE ]]; then nc_recipe "$(( ${nodes:-1} * GPUS_PER_NODE ))" "$@"; fi
  args=(--chdir="$REPO_DIR" --output="$LOG_DIR/%x-%j.log"
        ${ACCOUNT:+"--account=$ACCOUNT"} ${PARTITION:+"--partition=$PARTITION"} ${QOS:+"--qos=$QOS"}
        ${NODES:+"--nodes=$NODES"} ${TIME:+"--time=$TIME"})
  if [[ $DRY_RUN != 1 ]]; then mkdir -p "$LOG_DIR"; fi
  nc_do sbatch "${args[@]}" "$script" "$@"
}

nc_check_inputs() {  # what would otherwise fail on every node after the job started (or at container mount)
  local recipe=${RECIPE%%:*} name dirs=$NC_GIVEN_DIRS
  if [[ $recipe == *.py ]]; then
    [[ $recipe == /* ]] || recipe=$REPO_DIR/$recipe
    [[ -f $recipe ]] || nc_fail "RECIPE=$RECIPE: no such file $recipe"
  fi
  if [[ $CONTAINER_IMAGE != none ]]; then dirs="DATA_DIR MODELS_DIR"; fi  # pyxis cannot mount what is not there
  if [[ $CONTAINER_IMAGE == */* && $CONTAINER_IMAGE != *://* && $CONTAINER_IMAGE == *.sqsh && ! -f $CONTAINER_IMAGE ]]; then
    nc_fail "CONTAINER_IMAGE=$CONTAINER_IMAGE: no such image file; build it (docs/launch.md, The container)," \
            "name a registry image, or set CONTAINER_IMAGE=none"
  fi
  if [[ $CONTAINER_IMAGE == *.sif ]]; then
    [[ -f $CONTAINER_IMAGE ]] \
      || nc_fail "CONTAINER_IMAGE=$CONTAINER_IMAGE: no such image file; build it" \
                 "(docs/launch.md, The container) or set CONTAINER_IMAGE=none"
    nc_apptainer >/dev/null \
      || nc_fail "CONTAINER_IMAGE=$CONTAINER_IMAGE: a .sif image runs with apptainer or" \
                 "singularity, and neither is on PATH here (load its module first)"
  fi
  for name in $dirs; do
    [[ -d ${!name} ]] || nc_fail "$name=${!name}: no such folder (see docs/launch.md, Settings)"
  done
  if [[ ! $GPUS_PER_NODE =~ ^[1-9][0-9]*$ ]]; then nc_fail "GPUS_PER_NODE=$GPUS_PER_NODE: expected a positive integer"; fi
}

nc_fail() { nc_log "error: $*"; exit 2; }

# VAR: a host path exported for `data prepare` (NEMO_CASCADE_DATA, ...) → its path in the container
nc_container_path() {
  local name=$1 value=${!1:-} pair src dst
  if [[ -z $value || $CONTAINER_IMAGE == none || $value != /* ]]; then return 0; fi
  local -a pairs
  IFS=, read -ra pairs <<< "$(nc_mounts)"
  for pair in "${pairs[@]}"; do  # a container path already
    dst=${pair#*:}; dst=${dst%%:*}
    if [[ $value == "$dst" || $value == "$dst"/* ]]; then return 0; fi
  done
  for pair in "${pairs[@]}"; do  # a host path under a mounted folder: where the container sees it
    src=${pair%%:*} dst=${pair#*:}; dst=${dst%%:*}
    if [[ $value == "$src" || $value == "$src"/* ]]; then
      export "$name=$dst${value#"$src"}"
      nc_log "$name=$value is ${!name} in the container"
      return 0
    fi
  done
  nc_fail "$name=$value: a host path the container does not mount; unset it (the recipes" \
          "then read $DATA_MOUNT and $MODELS_MOUNT), point DATA_DIR / MODELS_DIR at its folder," \
          "or add it to EXTRA_MOUNTS"
}

nc_apptainer() { command -v apptainer || command -v singularity; }  # Singularity's newer name first

nc_mounts() {  # the container's mounts: "src:dst,..."
  local mounts="$REPO_DIR:$REPO_MOUNT,$RUN_DIR:$RUNS_MOUNT,$DATA_DIR:$DATA_MOUNT"
  echo "$mounts,$MODELS_DIR:$MODELS_MOUNT${EXTRA_MOUNTS:+,$EXTRA_MOUNTS}"
}

nc_srun_prefix() {  # NODES: srun of one task per node, in the container, into NC_CMD
  local mounts
  NC_CMD=(srun --nodes="$1" --ntasks-per-node=1 --kill-on-bad-exit=1)
  mounts=$(nc_mounts)
  if [[ $CONTAINER_IMAGE == *.sif ]]; then  # Apptainer: the same binds; --nv: the host's GPU driver
    NC_CMD+=("$(nc_apptainer)" exec --nv --no-home --bind="$mounts" --pwd="$REPO_MOUNT"
             "$CONTAINER_IMAGE")
  elif [[ $CONTAINER_IMAGE != none ]]; then
    NC_CMD+=(--container-image="$CONTAINER_IMAGE" --container-mounts="$mounts"
             --container-workdir="$REPO_MOUNT" --no-container-mount-home)
  fi
}

nc_srun_command() {  # the srun → node.sh → torchrun command of this job, into NC_CMD
  nc_srun_prefix "$SLURM_NNODES"
  NC_CMD+=(bash "$REPO_MOUNT/slurm/node.sh" "$RECIPE" "run_root=$RUNS_MOUNT" "name=$RUN_NAME")
  if [[ $WANDB == 1 ]]; then NC_CMD+=(wandb=true); fi
}

nc_run_job() {
  nc_check_inputs
  nc_container_path NEMO_CASCADE_DATA
  nc_container_path NEMO_CASCADE_MODELS
  nc_recipe "$(( SLURM_NNODES * GPUS_PER_NODE ))" "$@"
  source "$NC_SLURM_DIR/env.sh"
  # The rendezvous host: the job's first node (`scontrol show hostnames ... | head -n1`, without the pipe, which
  # under pipefail fails when head exits before scontrol has written every name).
  MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST")
  export MASTER_ADDR=${MASTER_ADDR%%$'\n'*}
  nc_srun_command
  NC_CMD+=("$@")
  nc_log "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}, at most $MAX_REQUEUES): $RECIPE" \
         "→ $RUN_DIR/$RUN_NAME on $SLURM_NNODES node(s) × $GPUS_PER_NODE GPUs, rendezvous $MASTER_ADDR:$MASTER_PORT"
  if [[ -f $RUN_DIR/$RUN_NAME/manifest.json ]]; then
    nc_log "continuing the existing run: its manifest skips finished stages, its checkpoints resume the current one"
  fi
  if [[ $DRY_RUN == 1 ]]; then nc_do "${NC_CMD[@]}"; return 0; fi
  NC_RUN=$RUN_DIR/$RUN_NAME
  mkdir -p "$NC_RUN"
  rm -f "$NC_RUN/stop_request"  # an earlier job's request must not stop this one
  nc_requeue_guard "$NC_RUN" "$MAX_STALLED_REQUEUES" || exit 1
  nc_job_end
  if [[ -n ${NEMO_CASCADE_JOB_END:-} ]]; then
    nc_log "the job ends at $(date -d "@$NEMO_CASCADE_JOB_END" '+%F %T'): the run saves and stops before it"
  fi
  # The traps only note the signal: it is handled below, between waits, one at a time — a handler that ran
  # inside another (bash runs a trap between any two commands) could requeue twice.
  NC_REQUEUED=0 NC_PENDING=() NC_NOT_REQUEUED=
  trap 'NC_PENDING+=(USR1)' USR1
  trap 'NC_PENDING+=(TERM)' TERM
  "${NC_CMD[@]}" &
  NC_STEP_PID=$!
  nc_wait_step
}

nc_wait_step() {  # wait for the srun step; a trapped signal ends `wait` early: handle it, then wait again
  local rc=0 again sig
  while :; do
    if (( ${#NC_PENDING[@]} == 0 )); then
      wait "$NC_STEP_PID" || rc=$?
      if (( ${#NC_PENDING[@]} == 0 )); then break; fi  # the step ended
    fi
    while (( ${#NC_PENDING[@]} )); do
      sig=${NC_PENDING[0]}
      NC_PENDING=("${NC_PENDING[@]:1}")
      nc_on_signal "$sig"
    done
    if ! kill -0 "$NC_STEP_PID" 2>/dev/null; then  # it ended meanwhile: collect its status, if not yet
      again=0
      wait "$NC_STEP_PID" 2>/dev/null || again=$?
      if [[ $again != 127 ]]; then rc=$again; fi
      break
    fi
    rc=0
  done
  trap - USR1 TERM
  if [[ $rc == 75 && $NC_REQUEUED == 0 && -z $NC_NOT_REQUEUED ]]; then  # the run saved and stopped itself
    NC_REQUEUED=1
    nc_requeue "the run stopped before the job's end (exit 75)"
  fi
  if [[ $NC_REQUEUED == 1 ]]; then
    nc_log "srun ended (exit $rc); the job is requeued and continues from the run's last checkpoint"
    exit 0
  fi
  if [[ -n $NC_NOT_REQUEUED ]]; then  # the last line says why the run is left unfinished
    nc_log "srun ended (exit $rc); not requeued: $NC_NOT_REQUEUED; resubmit the script to continue the run"
    exit $(( rc ? rc : 1 ))
  fi
  nc_log "srun ended (exit $rc)"
  exit "$rc"
}

nc_on_signal() {  # SIGUSR1 (--signal=B:USR1@120: the time limit is near) or SIGTERM (preemption, scancel)
  local sig=$1
  if [[ $NC_REQUEUED == 0 && ( $sig == USR1 || $REQUEUE_ON_TERM == 1 ) ]]; then
    NC_REQUEUED=1
    nc_save_and_stop "$sig"
    nc_requeue "SIG$sig"
  else
    nc_log "SIG$sig: stopping"
    kill -TERM "$NC_STEP_PID" 2>/dev/null || true  # srun passes it on to torchrun, which stops its ranks
  fi
}

nc_save_and_stop() {  # ask the run to save after its current step; stop it after STOP_GRACE seconds regardless
  local sig=$1 t
  nc_log "SIG$sig: the run saves at the end of its current step and stops (waiting at most ${STOP_GRACE}s)"
  echo "SIG$sig to job $SLURM_JOB_ID" > "$NC_RUN/stop_request.tmp" && mv "$NC_RUN/stop_request.tmp" "$NC_RUN/stop_request"
  for (( t = 0; t < STOP_GRACE; t++ )); do
    kill -0 "$NC_STEP_PID" 2>/dev/null || return 0
    sleep 1
  done
  nc_log "no step ended within ${STOP_GRACE}s: stopping it (it resumes from its last checkpoint)"
  kill -TERM "$NC_STEP_PID" 2>/dev/null || true
}

nc_requeue() {  # WHY: the signal, or the run's own stop
  local why=$1 count=${SLURM_RESTART_COUNT:-0}
  if (( count < MAX_REQUEUES )); then
    nc_log "$why: requeueing job $SLURM_JOB_ID (restart $((count + 1)) of at most $MAX_REQUEUES)"
    nc_do scontrol requeue "$SLURM_JOB_ID" || nc_log "scontrol requeue $SLURM_JOB_ID failed"
  else
    NC_REQUEUED=0 NC_NOT_REQUEUED="job $SLURM_JOB_ID was restarted $count times (MAX_REQUEUES=$MAX_REQUEUES)"
    nc_log "$why: not requeueing: $NC_NOT_REQUEUED"
  fi
}
