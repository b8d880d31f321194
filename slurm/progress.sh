# shellcheck shell=bash
# What a batch shell tells a run about its job, and what it asks of a requeue. Sourced on the host (outside any
# container) by slurm/common.sh and by the nemo-run Slurm jobs of `nemo-cascade launch` (their setup lines).
#
#   nc_job_end                  export NEMO_CASCADE_JOB_END (seconds since the epoch) from `squeue -o %e`, so
#                               that a run in a container without Slurm's commands still knows when its job ends
#                               and saves before it (nemo_cascade/runtime/deadline.py); nothing when squeue cannot say
#   nc_requeue_guard RUN MAX    0 unless the last MAX jobs of this job id all left RUN where they found it: a
#                               requeue must move the run forward (a checkpoint, a saved rollout or gate chunk, an
#                               export), or the chain of requeues stops with one line saying why

nc_job_end() {
  local end
  end=$(squeue -h -j "${SLURM_JOB_ID:-}" -o %e 2>/dev/null | head -n1) || true
  end=$(date -d "$end" +%s 2>/dev/null) || return 0  # N/A, Unknown, empty: no known end
  export NEMO_CASCADE_JOB_END=$end
}

nc_run_progress() {  # RUN: one line that changes whenever the run saves something that lets it go on
  local run=$1
  (cd "$run" 2>/dev/null && find . \( -path '*/checkpoint/step_*/meta.json' -o -path '*/rollouts/*.jsonl' \
      -o -path '*/eval_partial/*' -o -name eval.json -o -path '*/hf/*.safetensors' \) -printf '%p %s %T@\n' \
      2>/dev/null | sort | md5sum | cut -d' ' -f1)
}

nc_requeue_guard() {
  local run=$1 max=$2 now last= stalls=0 file=$1/.requeue_progress
  now=$(nc_run_progress "$run")
  if [[ ${SLURM_RESTART_COUNT:-0} -gt 0 && -f $file ]]; then
    read -r last stalls < "$file" || true
    if [[ $last == "$now" ]]; then stalls=$(( ${stalls:-0} + 1 )); else stalls=0; fi
  fi
  if (( stalls >= max )); then
    echo "nemo-cascade: error: job ${SLURM_JOB_ID:-?}: the last $stalls jobs saved nothing in $run" \
         "(MAX_STALLED_REQUEUES=$max): not running again; see the job log above for why" >&2
    return 1
  fi
  mkdir -p "$run" && echo "$now $stalls" > "$file"
}
