"""`nemo-cascade run RECIPE [key=value ...] [--stage NAME]`.

RECIPE is ``recipes/NAME.py`` (its ``recipe()`` function, or ``recipes/NAME.py:function``) or
``package.module:function``. The config is resolved and checked in this process first — a user mistake
ends with one line naming the field or file and exit code 2 — then the job runs under torchrun with
tp × pp × dp processes.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

from nemo_cascade import config as C

def _user_errors() -> tuple[type[Exception], ...]:
    from nemo_cascade.convert.arch import ModelFilesError
    from nemo_cascade.data.loader import DataError

    return (C.ConfigError, ModelFilesError, DataError)


def load_recipe(spec: str) -> C.Cascade:
    """A recipe is a function returning a Cascade: ``path.py[:fn]`` or ``module:fn`` (default fn: recipe)."""
    target, _, fn = spec.partition(":")
    fn = fn or "recipe"
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise C.ConfigError(f"recipe {target}: no such file")
        mod_spec = importlib.util.spec_from_file_location(f"nemo_cascade_recipe_{path.stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as e:
            raise C.ConfigError(f"recipe {spec}: cannot import module {target!r} ({e})") from None
    if not callable(getattr(module, fn, None)):
        raise C.ConfigError(f"recipe {spec}: no function {fn!r} in {target}")
    cfg = getattr(module, fn)()
    if not isinstance(cfg, C.Cascade):
        raise C.ConfigError(f"recipe {spec}: {fn}() returned {type(cfg).__name__}, expected nemo_cascade.config.Cascade")
    return cfg


def preflight(cfg: C.Cascade) -> None:
    """Checks that need files, run before any process starts: the model folder, its shapes against the
    parallel layout and the engine, and every stage's data."""
    from nemo_cascade.convert.arch import check_parallel, read_hf_config

    C.validate(cfg)
    if cfg.model.build:
        from nemo_cascade.convert.tiny import BUILDERS

        if cfg.model.build not in BUILDERS:
            raise C.ConfigError(f"model.build: unknown shape {cfg.model.build!r}; expected one of {sorted(BUILDERS)}")
    if cfg.model.hf_path:
        spec = read_hf_config(cfg.model.hf_path)
        check_parallel(spec, cfg.parallel.tp, cfg.parallel.pp)
        if any(s.kind == "grpo" for s in cfg.stages) and spec.head_dim < 32:
            raise C.ConfigError(f"{cfg.model.hf_path}/config.json: head_dim {spec.head_dim} < 32, which vLLM's "
                                f"CPU attention rejects; use a model with head_dim >= 32")
    for i, s in enumerate(cfg.stages):
        src = s.data.source
        if not src.startswith("synthetic:") and not Path(src).is_file():
            raise C.ConfigError(f"stages.{s.name}.data.source: {src}: no such file")
        if s.kind == "grpo":
            from nemo_cascade.rewards import REWARDS

            if s.domain not in REWARDS:
                raise C.ConfigError(f"stages.{s.name}.domain: no reward {s.domain!r}; expected one of {sorted(REWARDS)}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_run(args) -> int:
    cfg = C.apply_overrides(load_recipe(args.recipe), args.overrides)
    if args.stage:
        C.stage_by_name(cfg, args.stage)
    preflight(cfg)
    world = cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.dp
    if "LOCAL_RANK" in os.environ:  # we are a torchrun worker
        from nemo_cascade.cascade import run_cascade

        out = run_cascade(C.validate(cfg, world_size=int(os.environ["WORLD_SIZE"])), only_stage=args.stage)
        if int(os.environ.get("RANK", 0)) == 0:
            from nemo_cascade.metrics import summarize

            for stage_dir in sorted((out / "stages").iterdir(), key=lambda p: int(p.name.split("-")[0])):
                if (stage_dir / "metrics.jsonl").is_file():
                    print(summarize(stage_dir))
            print(f"done: {out}")
        return 0
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
           f"--master_port={_free_port()}", "-m", "nemo_cascade.cli", "run", args.recipe, *args.overrides]
    if args.stage:
        cmd += ["--stage", args.stage]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(max(1, os.cpu_count() // world)))}
    return subprocess.call(cmd, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nemo-cascade", description="Cascade RL on Megatron-Core + vLLM")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a cascade (or one stage of it)")
    run.add_argument("recipe", help="recipes/NAME.py[:fn] or package.module:fn")
    run.add_argument("overrides", nargs="*", help="KEY=VALUE, e.g. stages.math.steps=5 parallel.tp=2")
    run.add_argument("--stage", help="run only this stage")
    args, extra = parser.parse_known_args(argv)
    # KEY=VALUE overrides may also follow options (`run R --stage math a.b=1`): argparse leaves them over.
    stray = [x for x in extra if x.startswith("-") or "=" not in x]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return {"run": cmd_run}[args.command](args)
    except _user_errors() as e:
        print(f"nemo-cascade: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
