"""`nemo-cascade run RECIPE [key=value ...] [--stage NAME [--retrain]]`, `nemo-cascade eval
CHECKPOINT --suite NAME`, `nemo-cascade convert to-hf|from-hf|verify ...`, `nemo-cascade report
RUN_DIR [RUN_DIR ...]` and `nemo-cascade launch RECIPE --executor local|slurm [--dryrun]` (a
nemo-run experiment, launch.py) and `nemo-cascade plan RECIPE [--gpu-memory-gib 80] [--shape NAME]
[--time-limit 04:00:00]` (a per-GPU memory estimate, plan/; step times and checkpoint intervals
against a job's time limit, plan_time.py) and `nemo-cascade data prepare STAGE|all --out DIR` (the
recipes' data files, prepare/); `convert` and `data` live in cli_tools.py, every command's arguments
and help text in cli_parser.py.

RECIPE is ``recipes/NAME.py`` (its ``recipe()`` function, or ``recipes/NAME.py:function``) or
``package.module:function``. The config is resolved and checked in this process first — a user
mistake ends with one line naming the field or file and exit code 2 — then the job runs under
torchrun with tp × pp × cp × dp processes.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import NoReturn

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.config.recipe_file import load_recipe
from nemo_cascade.runtime import console, heartbeat, process_exit, stop_request, parent_death
from nemo_cascade.tooling import (demo_data, worker_log, run_lock, launch, plan, plan_table,
                                  plan_time, doctor)
from nemo_cascade.tooling.cli_parser import build_parser
from nemo_cascade.tooling.cli_tools import cmd_convert, cmd_data
from nemo_cascade.errors import CascadeError
from nemo_cascade.tooling.torchrun import run_torchrun
from nemo_cascade.cascade import repair
from nemo_cascade.evaluate import suite_names, EvalSettings
from nemo_cascade.evaluate.eval_output import markdown, read_eval
from nemo_cascade.evaluate.suites import EvalError, get_suite
from nemo_cascade.runtime.files import OutOfSpace, out_of_space, out_of_space_line, writer_of
from nemo_cascade.runtime.stop_request import EXIT_CODE, StopRequested
from nemo_cascade.tooling.dry_run import dry_run
from nemo_cascade.tooling.run_lock import LOCK_NAME


def _run_job(cfg: config.Cascade, only_stage: str | None, retrain: bool) -> int:
    """Inside torchrun: the cascade, then (rank 0) each stage's headline metric and the forgetting
    matrix."""
    from nemo_cascade.cascade.driver import GateStop, run_cascade, run_dir
    from nemo_cascade.tooling.report import build_report, matrix_text

    try:
        out = run_cascade(cfg, only_stage=only_stage, retrain=retrain, report=build_report,
                          size_rm_server=plan.size_rm_server)
        code = 0
    except GateStop as e:
        out, code = run_dir(cfg), 3
        print(f"stopped by the forgetting gate {e} (gate.on_regression=stop)",
              file=console.stream())
    except StopRequested as e:
        # saved at a step boundary: the run is resumable, nothing to summarise
        if int(os.environ.get("RANK", 0)) == 0:
            print(f"\nnemo-cascade: {e}", file=console.stream())
        return EXIT_CODE
    if int(os.environ.get("RANK", 0)) == 0:
        from nemo_cascade.cascade.metrics import summarize

        for stage_dir in sorted((out / "stages").iterdir(),
                                key=lambda p: int(p.name.split("-")[0])):
            if (stage_dir / "metrics.jsonl").is_file():
                print(summarize(stage_dir), file=console.out())
        print(matrix_text(out), file=console.out())
        print(f"done: {out} (report: {out / 'report.md'})", file=console.out())
    return code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmd_run(args) -> int:
    from nemo_cascade.cascade.preflight import check_cascade

    from nemo_cascade.cascade.stage_selection import recorded_stages

    # with the repair stages the gate inserted in this run folder (gate.on_regression=repair)
    cfg = recorded_stages(apply_overrides(load_recipe(args.recipe), args.overrides))
    if args.stage:
        config.stage_by_name(cfg, args.stage)
    if args.dry_run:
        return dry_run(cfg, args.stage)
    check_cascade(cfg)  # every stage's files, before any process starts
    world = cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.cp * cfg.parallel.dp
    # A torchrun worker: torchrun sets TORCHELASTIC_RUN_ID. Not LOCAL_RANK/RANK — a single-process
    # actor (tests, notebooks) puts those in os.environ, and a CLI started from there must still
    # launch its own job.
    if "TORCHELASTIC_RUN_ID" in os.environ:
        # the chatter of Megatron, vLLM, TE: into the run's log (worker_log.py)
        rank = int(os.environ.get("RANK", 0))
        if args.own_process:
            worker_log.to_log(worker_log.log_path(Path(cfg.run_root) / cfg.name, rank),
                              args.verbose, rank)
        # slurm/node.sh: rank 0 holds
        with _hold_run_folder(Path(cfg.run_root) / cfg.name, "nemo-cascade run"):
            with _said_when_out_of_space(Path(cfg.run_root) / cfg.name):
                world_size = int(os.environ["WORLD_SIZE"])
                cfg = config.validate(cfg, world_size=world_size)
                run = Path(cfg.run_root) / cfg.name
                with heartbeat.watching(run, rank, cfg.parallel.stall_minutes):
                    return _run_job(cfg, args.stage, args.retrain)
    # a finished stage, or one whose earlier stages are not: one line, before torchrun
    if args.stage or args.retrain:
        from nemo_cascade.cascade.driver import check_selection

        check_selection(cfg, args.stage, args.retrain)
    # before anything is written
    with _hold_run_folder(Path(cfg.run_root) / cfg.name, "nemo-cascade run"):
        _stop_on_usr1(cfg)
        torchrun = [f"--nproc_per_node={world}", f"--master_port={_free_port()}", "-m",
                    "nemo_cascade.tooling.cli", "run", args.recipe, *args.overrides]
        if args.stage:
            torchrun += ["--stage", args.stage] + (["--retrain"] if args.retrain else [])
        torchrun += ["--verbose"] if args.verbose else []
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, os.cpu_count() // world)))
        return run_torchrun(torchrun,
                            run_dir=None if args.verbose else Path(cfg.run_root) / cfg.name)


@contextlib.contextmanager
def _said_when_out_of_space(where: Path):
    """A full disk or quota met under ``where`` becomes one line (files.OutOfSpace), not a traceback
    in the rank's log."""
    try:
        yield
    except CascadeError:
        raise  # said already
    except Exception as e:
        full = out_of_space(e)
        if full is None:
            raise
        raise OutOfSpace(out_of_space_line(full, where, writer_of(e))) from e


@contextlib.contextmanager
def _hold_run_folder(run_dir: Path, command: str):
    """The run folder's lock (run_lock.py) for a ``with`` block: taken by the launcher, inherited by
    its workers (the environment names it); under a torchrun that did not take it (slurm/node.sh),
    rank 0 takes it — a refusal there ends that rank with exit 2, and torchrun stops the others."""
    if "TORCHELASTIC_RUN_ID" in os.environ and int(os.environ.get("RANK", 0)) != 0:
        yield None
        return
    with run_lock.acquire(run_dir, command) as lock:
        # torchrun's workers, launch's tasks: they run under this lock
        os.environ[run_lock.ENV] = lock.env_value
        try:
            yield lock
        finally:
            os.environ.pop(run_lock.ENV, None)


def _stop_on_usr1(cfg: config.Cascade) -> None:
    """SIGUSR1 to ``nemo-cascade run`` saves and stops the run at its next step boundary (as a Slurm
    job's time-limit signal does): the launcher hands it on as the run folder's stop request, which
    every rank watches (runtime/stop_request.py). An old request is dropped first: it must not stop
    the run that resumes."""
    from nemo_cascade.cascade.driver import run_dir

    out = run_dir(cfg)
    stop_request.clear(out)
    signal.signal(signal.SIGUSR1,
                  lambda *_: stop_request.request(out, "SIGUSR1 to nemo-cascade run"))


def _count(value: str | None, option: str, minimum: int = 1) -> int | None:
    """An integer option checked here, so a bad value is one line (argparse would add its usage
    text)."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise EvalError(f"{option}: expected an integer >= {minimum}, got {value!r}")
    return number


def _data_paths(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not path:
            raise EvalError(f"--data {pair}: expected SUITE=PATH")
        get_suite(name)
        if not Path(path).is_file():
            raise EvalError(f"--data {pair}: no such file {path}")
        out[name] = path
    return out


def _per_suite(pairs: list[str], option: str, kind: type, minimum: float) -> dict:
    """``SUITE=VALUE`` options (``--yarn``, ``--max-input-tokens``) as a dict, each value checked
    here (one line)."""
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        try:
            value = kind(text)
        except ValueError:
            value = None
        if not sep or value is None or not value >= minimum:
            raise EvalError(
                f"{option} {pair}: expected SUITE=VALUE with a {kind.__name__} >= {minimum:g}")
        get_suite(name)
        out[name] = value
    return out


def cmd_eval(args) -> int:
    """Evaluate a checkpoint on one or more suites (nemo_cascade.evaluate); prints the table, writes
    eval.json. Engines over several GPUs (``--tensor-parallel-size`` × ``--data-parallel`` > 1): the
    command starts itself again under torchrun, one rank per GPU (standalone.py)."""
    from nemo_cascade.tooling.standalone import check_layout, output_folder

    for plugin in args.plugin:  # a user's domain and suites, registered before a suite is named
        config.load_plugin(plugin)
    names = suite_names(args.suite)
    world = check_layout(args.tensor_parallel_size, args.data_parallel, args.gpu_memory_utilization)
    with _hold_stage_folder(args):
        # its logs/ takes vLLM's start-up log (worker_log.py)
        out = output_folder(args.checkpoint, args.out)
        if world > 1 and "TORCHELASTIC_RUN_ID" not in os.environ:
            return run_torchrun([f"--nproc_per_node={world}", f"--master_port={_free_port()}", "-m",
                                 "nemo_cascade.tooling.cli", *args.argv],
                                run_dir=None if args.verbose else out)
        if args.own_process:
            rank = int(os.environ.get("RANK", 0))
            worker_log.to_log(worker_log.log_path(out, rank), args.verbose, rank)
        return _evaluate(args, names)


def _hold_stage_folder(args):
    """``eval`` writing into a run's stage folder (``--out``, or by default the stage evaluated)
    holds the run folder's lock, so it never writes beside a run of that folder (nor a run starts
    beside it)."""
    from nemo_cascade.tooling.standalone import resolve_checkpoint

    try:
        out = Path(args.out) if args.out else resolve_checkpoint(args.checkpoint)[1]
    except EvalError:
        return contextlib.nullcontext()  # said in its turn, after the options' own checks
    run = (out.absolute().parent.parent
           if out is not None and out.absolute().parent.name == "stages" else None)
    if run is None or not ((run / "manifest.json").is_file() or (run / LOCK_NAME).exists()):
        return contextlib.nullcontext()
    return _hold_run_folder(run, "nemo-cascade eval")


def _evaluate(args, names: list[str]) -> int:
    from nemo_cascade.tooling.standalone import evaluate_checkpoint

    settings = EvalSettings(
        samples=_count(args.samples, "--samples"),
        max_tokens=_count(args.max_tokens, "--max-tokens"),
        temperature=args.temperature, top_p=args.top_p, mode=args.mode, template=args.template,
        limit=_count(args.limit, "--limit") or 0, seed=args.seed, data=_data_paths(args.data),
        reward_model_url=args.reward_model_url or "", judge_url=args.judge_url or "",
        sandbox=args.sandbox, answer_pattern=args.answer_pattern,
        yarn=_per_suite(args.yarn, "--yarn", float, 1),
        max_input_tokens=_per_suite(args.max_input_tokens, "--max-input-tokens", int, 0),
        math_grader=args.math_grader)
    results, path = evaluate_checkpoint(
        args.checkpoint, names, settings, out_dir=Path(args.out) if args.out else None,
        reward_model=args.reward_model,
        max_model_len=_count(args.max_model_len, "--max-model-len", 2),
        kv_cache_gib=args.kv_cache_gib, tensor_parallel_size=args.tensor_parallel_size,
        data_parallel=args.data_parallel, gpu_memory_utilization=args.gpu_memory_utilization)
    if int(os.environ.get("RANK", "0")) != 0:  # rank 0 prints for all
        return 0
    print(markdown({**read_eval(path), "suites": {n: r.to_json() for n, r in results.items()}}),
          file=console.out())
    print(f"wrote {path} ({path.with_suffix('.md').name}, {path.with_suffix('.svg').name})",
          file=console.out())
    return 0


def cmd_launch(args) -> int:
    """The cascade as a nemo-run experiment: one task per stage, plus its served models
    (launch.py)."""
    cfg = apply_overrides(load_recipe(args.recipe), args.overrides)
    # Slurm: each job's rank 0 takes the lock (slurm/node.sh)
    if args.dryrun or args.executor != "local":
        return launch.launch(cfg, launch.spec_from_args(args), dryrun=args.dryrun, out=args.out)
    # the tasks inherit it
    with _hold_run_folder(Path(cfg.run_root) / cfg.name, "nemo-cascade launch"):
        return launch.launch(cfg, launch.spec_from_args(args), out=args.out)


def cmd_plan(args) -> int:
    """Per-GPU memory of every stage on the recipe's layout (plan/, printed by plan_table.py),
    then each stage's step time, progress per ``--time-limit`` job and jobs (plan_time.py).
    Estimates: exit 0 even when a stage is over its memory (a WARNING line); exit 2 with one line
    when a job cannot move a stage forward."""

    limit_s = plan_time.parse_time_limit(args.time_limit)  # a bad value: one line, before any work
    recipe = apply_overrides(load_recipe(args.recipe), args.overrides)
    cfg = repair.with_possible_repairs(recipe)
    memory = plan.plan_cascade(cfg, gpu_gib=args.gpu_memory_gib, shape=args.shape)
    print(plan_table.render(memory))
    inserted = [s.name for s in cfg.stages if s not in recipe.stages]
    if inserted:
        print(f"{', '.join(inserted)}: inserted only where the gate flags a regression "
              "(gate.on_regression=repair), sized here with every domain the recipe trains flagged")
    print()
    times = plan_time.time_plan(cfg, memory, limit_s)
    gate = plan_time.gate_time(cfg, memory, times[0].budget_s if times else 0.0)
    print(plan_time.render_times(times, args.time_limit, cfg.checkpoint_every_minutes,
                                 time_limit_s=limit_s, gate=gate))
    plan_time.check_progress(times, args.time_limit, gate)  # no progress in a job: one line, exit 2
    return 0


def cmd_doctor(args) -> int:
    """Is this node ready: one table of checks (doctor.py); exit 2 when a check fails. Under
    torchrun every rank checks its own GPU and joins one all-reduce; rank 0 prints."""
    if args.overrides and not args.recipe:
        raise config.ConfigError(
            f"doctor: {args.overrides[0]}: KEY=VALUE overrides need a RECIPE before them")
    cfg = (config.validate(apply_overrides(load_recipe(args.recipe), args.overrides))
           if args.recipe else None)
    if args.stage and cfg is None:
        raise config.ConfigError(f"doctor: --stage {args.stage}: needs a RECIPE")
    if args.server_wait < 0:
        raise config.ConfigError(
            f"doctor: --server-wait {args.server_wait:g}: expected seconds >= 0")
    return doctor.doctor(cfg, args.recipe or "", args.stage, args.server_wait)


def cmd_report(args) -> int:
    """Rebuild RUN_DIR/report.md and report.png from the run directory's files and print the
    forgetting matrix; with several run directories, write their side-by-side comparison
    (tooling/compare.py) into --out."""
    from nemo_cascade.tooling.report import build_report, matrix_text

    if len(args.run_dir) > 1:
        from nemo_cascade.tooling.compare import build_comparison

        if not args.out:
            raise config.ConfigError(
                "report: several run directories are compared into --out DIR; give --out")
        md, png = build_comparison([Path(d) for d in args.run_dir], Path(args.out))
        print(md.read_text().split("\n![]")[0])
        print(f"wrote {md} and {png}")
        return 0
    md, png = build_report(Path(args.run_dir[0]))
    print(matrix_text(Path(args.run_dir[0])), end="")
    print(f"wrote {md} and {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    # Before any config is read: the demo sets, suites and base models are known to the core only
    # once registered. Torchrun workers enter here too (``-m nemo_cascade.tooling.cli run``), so
    # every rank registers them.
    demo_data.register()
    parser = build_parser()
    # a torchrun worker: it must not outlive its launcher (runtime/parent_death.py)
    if "TORCHELASTIC_RUN_ID" in os.environ:
        parent_death.bind_worker()
    args, extra = parser.parse_known_args(argv)
    # what a command that relaunches itself repeats
    args.argv = list(sys.argv[1:] if argv is None else argv)
    # the process is this command: its output may go to a log (worker_log.py)
    args.own_process = argv is None
    # KEY=VALUE overrides may also follow options (`run R --stage math a.b=1`): argparse leaves
    # them over.
    overridable = ("run", "launch", "plan", "doctor")
    stray = [x for x in extra
             if x.startswith("-") or "=" not in x or args.command not in overridable]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra and args.command in overridable:
        args.overrides = [*args.overrides, *extra]
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    command = {"run": cmd_run, "eval": cmd_eval, "report": cmd_report, "convert": cmd_convert,
               "launch": cmd_launch, "plan": cmd_plan, "doctor": cmd_doctor,
               "data": cmd_data}[args.command]
    try:
        with _said_when_out_of_space(Path.cwd()):
            return command(args)
    except CascadeError as e:
        # every user-facing error (nemo_cascade.errors); a served RM / judge that fails
        # outside a training step stops the run with its one line too: a done stage's gate runs
        # again on resume.
        print(f"nemo-cascade: error: {e}", file=console.stream())
        return 2


def entry() -> NoReturn:
    """The ``nemo-cascade`` command and its torchrun workers
    (``python -m nemo_cascade.tooling.cli``), ended without the interpreter's teardown
    (runtime/process_exit.py)."""
    process_exit.run_and_exit(main)


if __name__ == "__main__":
    entry()
