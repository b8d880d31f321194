# shellcheck shell=bash
# The environment of every node of a nemo-cascade job: NCCL, Megatron, vLLM, W&B, caches.
#
# Sourced by slurm/common.sh (the batch step), by slurm/node.sh (inside the container, on every node) and by
# the nemo-run Slurm tasks (nemo_cascade/tooling/launch.py). A variable that is already set keeps its value — even an
# empty one — so any of these is overridden by exporting it before `sbatch` (sbatch passes the environment on).
# Reads RUN_NAME and RUNS_MOUNT when set (the job scripts and launch.py set both).

_nc_default() {  # NAME VALUE: export NAME=VALUE unless NAME is set already (then just export it)
  if [[ -z ${!1+set} ]]; then export "$1=$2"; else export "${1?}"; fi
}

# --- NCCL (InfiniBand fabric of DGX H100/H200 nodes) ----------------------------------------------------------
# Bootstrap and socket traffic: every interface except loopback and docker bridges. Sites name theirs
# (e.g. NCCL_SOCKET_IFNAME=bond0); NCCL_IB_HCA (e.g. "mlx5_0,mlx5_3") is left to NCCL's detection unless set.
_nc_default NCCL_SOCKET_IFNAME "^lo,docker"
_nc_default NCCL_IB_DISABLE 0
_nc_default NCCL_IB_TIMEOUT 22            # IB retry timeout 4.096 µs × 2^22 ≈ 17 s: survives fabric hiccups
_nc_default NCCL_IB_RETRY_CNT 7
_nc_default NCCL_DEBUG WARN
if [[ -n ${NCCL_IB_HCA:-} ]]; then export NCCL_IB_HCA; fi
# gloo groups (host-side object exchanges, every rollout round's) cross nodes too. Gloo takes
# interface names only, not NCCL's "^exclude" form: a site that names its interfaces for NCCL names
# them for gloo as well; otherwise gloo gets the interface this node reaches the job's first node
# (MASTER_ADDR) through. Left to itself gloo takes the host name's address, which many images
# resolve to 127.0.x.1: loopback, which other nodes cannot reach.
# ADDRESS: the interface this node reaches ADDRESS through (if it is this node's own address: the
# interface that holds it); nothing when either cannot be found
_nc_route_ifname() {
  local addr dev
  addr=$(getent ahostsv4 "$1" 2>/dev/null | awk 'NR == 1 {print $1}')
  [[ -n $addr ]] && command -v ip >/dev/null || return 0
  dev=$(ip -o route get "$addr" 2>/dev/null | sed -n 's/.* dev \([^ ]*\).*/\1/p')
  if [[ $dev == lo ]]; then
    dev=$(ip -o -4 addr show 2>/dev/null \
            | awk -v a="$addr" '{split($4, p, "/")} p[1] == a {print $2; exit}')
  fi
  echo "$dev"
}
if [[ -z ${GLOO_SOCKET_IFNAME+set} ]]; then
  if [[ $NCCL_SOCKET_IFNAME != [\^=]* ]]; then
    export GLOO_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME
  elif [[ -n ${MASTER_ADDR:-} ]]; then  # on the nodes (node.sh): the batch step sets MASTER_ADDR
    _nc_if=$(_nc_route_ifname "$MASTER_ADDR")
    if [[ -n $_nc_if ]]; then export GLOO_SOCKET_IFNAME=$_nc_if; fi
    unset _nc_if
  fi
fi
# A rank whose collective fails or times out aborts the job (and so ends the srun step) instead of leaving
# the other ranks hanging until the time limit.
_nc_default TORCH_NCCL_ASYNC_ERROR_HANDLING 1
_nc_default TORCH_NCCL_AVOID_RECORD_STREAMS 1
# Megatron-Core overlaps tensor/sequence-parallel communication with compute only when kernels reach the GPU
# in issue order: one hardware queue per device.
_nc_default CUDA_DEVICE_MAX_CONNECTIONS 1

# --- the paper recipes' inputs (recipes/nemotron_cascade_*.py read these; container paths) -------------------------
_nc_default NEMO_CASCADE_MODELS "${MODELS_MOUNT:-/models}"               # Qwen3-*-Base, Nemotron-Cascade-*-SFT
_nc_default NEMO_CASCADE_DATA "${DATA_MOUNT:-/data}/nemotron-cascade"     # one prompt file per stage
# NEMO_CASCADE_RM_URL / NEMO_CASCADE_JUDGE_URL: the served 72B RM and SWE judge, when set (no default here).

# --- caches ---------------------------------------------------------------------------------------
# Downloads on the shared runs folder, so a requeued job reuses them. Compile caches node-local:
# vLLM points the whole process's inductor cache into VLLM_CACHE_ROOT, and its file locks, like
# Triton's, and NFS or Lustre disagree (a requeued job on another node compiles again).
_nc_default CACHE_DIR "${RUNS_MOUNT:-/runs}/.cache"
_nc_default HF_HOME "$CACHE_DIR/huggingface"
_nc_default NODE_CACHE_DIR "/tmp/nemo-cascade-cache-${USER:-nemo}"
_nc_default VLLM_CACHE_ROOT "$NODE_CACHE_DIR/vllm"
_nc_default TORCHINDUCTOR_CACHE_DIR "$NODE_CACHE_DIR/inductor"
_nc_default TRITON_CACHE_DIR "$NODE_CACHE_DIR/triton"

# --- vLLM (the colocated rollout engine; served reward models / judges) ---------------------------------------
_nc_default VLLM_LOGGING_LEVEL INFO
_nc_default VLLM_NO_USAGE_STATS 1
_nc_default DO_NOT_TRACK 1
_nc_default VLLM_WORKER_MULTIPROC_METHOD spawn  # CUDA is initialised before vLLM starts workers

# --- Weights & Biases (enabled per run with wandb=true; the job scripts pass it when WANDB=1) -----------------
# Without an API key the run logs offline into the run folder (`wandb sync` uploads it later).
if [[ -n ${WANDB_API_KEY:-} ]]; then _nc_default WANDB_MODE online; else _nc_default WANDB_MODE offline; fi
_nc_default WANDB_PROJECT nemo-cascade
# Every W&B run of one cascade run (one per stage) is grouped under the run's name, across requeues.
_nc_default WANDB_RUN_GROUP "${RUN_NAME:-nemo-cascade}"
_nc_default WANDB_RESUME allow
if [[ -n ${RUN_NAME:-} ]]; then _nc_default WANDB_DIR "${RUNS_MOUNT:-/runs}/$RUN_NAME"; fi

# --- processes ------------------------------------------------------------------------------------------------
_nc_default PYTHONUNBUFFERED 1
# torchrun would set 1 thread per rank; the CPU-side work (tokenising, reward workers) gets a node's share.
_nc_cpus=$(nproc 2>/dev/null || echo 8)
_nc_default OMP_NUM_THREADS "$(( _nc_cpus / ${GPUS_PER_NODE:-8} > 0 ? _nc_cpus / ${GPUS_PER_NODE:-8} : 1 ))"
unset _nc_cpus
