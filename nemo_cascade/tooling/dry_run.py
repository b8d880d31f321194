"""``nemo-cascade run RECIPE [KEY=VALUE ...] --dry-run``: every check a run makes before it trains,
on every stage it would train, each problem one line; nothing is started or written (no torchrun, no
run folder, no lock). Exit code 2 when there is a problem, 0 when the run would start.

The checks are preflight.py's — the config, the model folder, every input file and its rows' schema,
the IF-RL instruction taxonomy, a sandbox for code rewards, the CPU engine's dtype — plus the served
models of the stages it would train (probed once, not waited for) and ``nemo-cascade plan``'s
per-GPU memory of every stage against this machine's GPU (an 80 GiB H100 where there is none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from nemo_cascade import config
from nemo_cascade.tooling import plan
from nemo_cascade.errors import CascadeError
from nemo_cascade.rewards.serve import is_vllm_cpu

H100_GIB = 80.0
SERVER_WAIT_S = 5.0


def _gpu_gib() -> tuple[float, str]:
    import torch

    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        return props.total_memory / float(1 << 30), props.name
    return H100_GIB, f"a {H100_GIB:g} GiB H100 (no GPU here)"


def _memory(cfg: config.Cascade) -> list[str]:
    """The stages whose planned per-GPU memory does not fit, one line each."""
    # the recipe's stages: a repair the gate may insert is sized by `nemo-cascade plan` (its worst
    # case, every domain flagged, is no reason to refuse a run)
    gib, gpu = _gpu_gib()
    over = [s for s in plan.plan_cascade(cfg, gpu_gib=gib).stages if not s.fits]
    return [
        f"stages.{s.name}: planned memory on {gpu}: {s.verdict()} "
        f"(nemo-cascade plan shows where it goes)"
        for s in over
    ]


def problems(
    cfg: config.Cascade, only_stage: str | None = None
) -> tuple[list[str], list[config.Stage]]:
    """Every problem a run of ``cfg`` would stop on before training (one line each), and the stages
    it would train."""
    from nemo_cascade.cascade import preflight
    from nemo_cascade.cascade.lineage import stage_status
    from nemo_cascade.rollout.engine_dtype import check_cpu_engine_dtype

    found: list[str] = []

    def check(fn: Callable[[], object]) -> object:
        """``fn()``, or None with its one-line problem noted (once: two stages' same dead server is
        one problem)."""
        try:
            return fn()
        except CascadeError as e:
            line = (str(e).strip().splitlines() or [type(e).__name__])[0]
            if line.partition(": ")[2] not in {f.partition(": ")[2] for f in found}:
                found.append(line)
            return None

    if check(lambda: config.validate(cfg)) is None:
        return found, []  # the rest reads fields the config check found wrong
    status, _ = stage_status(Path(cfg.run_root) / cfg.name)
    stages = preflight.stages_to_run(cfg, status, only_stage)
    check(lambda: preflight.check_model(cfg))
    missing = len(found)
    check(lambda: preflight.check_inputs_exist(cfg))
    if (
        len(found) == missing
    ):  # every file is there: read each one's rows (a missing one is named above)
        for s in stages:
            for d in (s.data, *s.extra_data):
                check(lambda d=d, s=s: preflight.data_fingerprint(d, f"stages.{s.name}"))
        check(lambda: preflight.check_instruction_taxonomy(cfg))
    check(lambda: preflight.check_stage_needs(cfg))
    check(lambda: check_cpu_engine_dtype(cfg, on_cpu=is_vllm_cpu()))
    for s in stages:
        check(
            lambda s=s: preflight.check_endpoints([s], wait=SERVER_WAIT_S, file_wait=0.0, poll=1.0)
        )
    memory = check(lambda: _memory(cfg))
    found += memory or []
    return found, stages


def dry_run(cfg: config.Cascade, only_stage: str | None = None) -> int:
    """Print the problems (or what the run would do) and return the exit code."""
    found, stages = problems(cfg, only_stage)
    for line in found:
        print(f"nemo-cascade: problem: {line}")
    if found:
        print(f"nemo-cascade: dry run of {cfg.name}: {len(found)} problem(s); nothing was started")
        return 2
    world = cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.cp * cfg.parallel.dp
    todo = ", ".join(s.name for s in stages) or "none (every stage is done)"
    print(f"nemo-cascade: dry run of {cfg.name}: ready; {world} process(es) would train: {todo}")
    return 0


__all__ = ["dry_run", "problems"]
