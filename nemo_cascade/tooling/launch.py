"""nemo-run experiments for a cascade: one task per stage, in cascade order, plus a task per served
model.

``python -m nemo_cascade.tooling.launch RECIPE --executor local|slurm [--dryrun] [KEY=VALUE ...]``
(the same as ``nemo-cascade launch ...``) builds a ``nemo_run.Experiment`` from the tasks of
launch_tasks.py: each stage's ``nemo-cascade run RECIPE --stage NAME`` starting after the stage
before it (Slurm: ``afterok`` job dependencies; local: one after the other), and a *serve* task
wherever a stage scores with a served model. Every task runs through ``python -m
nemo_cascade.tooling.launch task|serve`` (launch_tasks.main).

This is the only module that imports ``nemo_run`` (docs/architecture.md), and only inside the
functions that build the experiment: the ``task`` / ``serve`` entry points run in containers without
nemo-run. Slurm settings come from the environment variables of slurm/common.sh (ACCOUNT, PARTITION,
CONTAINER_IMAGE, RUN_DIR, ...; docs/launch.md).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
import shutil

from nemo_cascade import config
from nemo_cascade.tooling import launch_tasks
from nemo_cascade.tooling.launch_tasks import (REPO, Task, plan, serve_command, served_port,
                                               task_command)

DEFAULT_IMAGE = str(REPO / "containers" / "nemo-cascade.sqsh")
"""The project's pinned image (containers/Dockerfile, imported with enroot; docs/launch.md "The
container")."""


# -------------------------------------------------------------------------------------------- Slurm
def slurm_shape(cfg: config.Cascade, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per node) for the actor's tp × pp × cp × dp ranks."""
    p = cfg.parallel
    world = p.tp * p.pp * p.cp * p.dp
    if world <= gpus_per_node:
        return 1, world
    if world % gpus_per_node:
        raise config.ConfigError(
            f"parallel: tp × pp × cp × dp = {world} ranks do not fill whole nodes of "
            f"{gpus_per_node} GPUs (GPUS_PER_NODE); change parallel.dp")
    return world // gpus_per_node, gpus_per_node


@dataclass(frozen=True)
class Site:
    """Slurm settings, from the environment variables that slurm/common.sh reads
    (docs/launch.md)."""
    account: str = ""
    partition: str = ""
    qos: str = ""
    time: str = "04:00:00"
    image: str = DEFAULT_IMAGE
    # (host, container): the repository, runs, data, models, extras
    mounts: tuple[tuple[str, str], ...] = ()
    gpus_per_node: int = 8
    master_port: int = 29500
    retries: int = 1
    """Requeues of a served model's job after a failure (RETRIES)."""
    max_requeues: int = 2000
    """Requeues of a stage's job (MAX_REQUEUES): each job of a long stage ends by saving before its
    time limit (exit 75) and is requeued until the stage is done; hundreds for a cascade
    (`nemo-cascade plan`)."""
    max_stalled: int = 3
    """A stage's requeued job does not run once this many jobs in a row saved nothing
    (MAX_STALLED_REQUEUES)."""
    node_setup: str = ""
    wandb: bool = True

    @property
    def repo_mount(self) -> str:
        return self.mounts[0][1]

    @property
    def runs_mount(self) -> str:
        return self.mounts[1][1]

    @classmethod
    def from_env(cls, env=os.environ) -> "Site":
        def get(name: str, default: str = "") -> str:
            return env.get(name) or default

        repo = get("REPO_DIR", str(REPO))
        image = get("CONTAINER_IMAGE", get("CONTAINER", DEFAULT_IMAGE))
        host = {"REPO": repo, "RUNS": get("RUN_DIR", f"{repo}/runs"),
                "DATA": get("DATA_DIR", f"{repo}/data"),
                "MODELS": get("MODELS_DIR", f"{repo}/models")}
        inside = {"REPO": "/workspace/nemo-cascade", "RUNS": "/runs", "DATA": "/data",
                  "MODELS": "/models"}
        # without a container ("none") the tasks see the host paths
        mounts = [(host[k], get(f"{k}_MOUNT", host[k] if image == "none" else inside[k]))
                  for k in host]
        mounts += [tuple(m.split(":", 1)) for m in get("EXTRA_MOUNTS").split(",") if ":" in m]
        try:
            names = {"gpus_per_node": "GPUS_PER_NODE", "master_port": "MASTER_PORT",
                     "retries": "RETRIES", "max_requeues": "MAX_REQUEUES",
                     "max_stalled": "MAX_STALLED_REQUEUES"}
            numbers = {k: int(get(var, str(getattr(cls, k)))) for k, var in names.items()}
        except ValueError as e:
            raise config.ConfigError(
                f"launch: GPUS_PER_NODE, MASTER_PORT, RETRIES, MAX_REQUEUES and "
                f"MAX_STALLED_REQUEUES must be integers ({e})") from None
        return cls(account=get("ACCOUNT"), partition=get("PARTITION"), qos=get("QOS"),
                   time=get("TIME", cls.time), image=image, mounts=tuple(mounts),
                   node_setup=get("NODE_SETUP"), wandb=get("WANDB", "1") == "1", **numbers)


# --------------------------------------------------------------------------------------- experiment
@dataclass(frozen=True)
class Launch:
    """What one launch needs besides the config (the parsed ``nemo-cascade launch`` options)."""
    recipe: str
    overrides: tuple[str, ...]
    executor: str = "local"
    reward_model: str = ""
    judge: str = ""
    serve_gpus: int = 8
    vllm_args: str = ""
    wait: float = 4 * 3600.0
    launch_id: str = ""
    watch: bool = False


def _for_executor(cfg: config.Cascade, spec: Launch,
                  site: Site | None) -> tuple[config.Cascade, Launch]:
    """The recipe path and run folder as the tasks see them (Slurm: inside the container); W&B on
    when WANDB=1, as in the sbatch scripts."""
    keys = {o.split("=", 1)[0] for o in spec.overrides}
    overrides, (file, sep, fn) = list(spec.overrides), spec.recipe.partition(":")
    if site and "run_root" not in keys:
        overrides.append(f"run_root={site.runs_mount}")
        cfg = replace(cfg, run_root=site.runs_mount)
    if site and site.wandb and "wandb" not in keys:
        overrides.append("wandb=true")
    if file.endswith(".py"):
        path, repo = Path(file).resolve(), Path(site.mounts[0][0] if site else REPO).resolve()
        if not site:
            file = str(path)
        elif path.is_relative_to(repo):  # else: a path the container must see as it is
            file = f"{site.repo_mount}/{path.relative_to(repo)}"
    return cfg, replace(spec, recipe=file + sep + fn, overrides=tuple(overrides))


def _inline(cmd: list[str], cwd: str, slurm: bool) -> str:
    lines = [f"cd {shlex.quote(cwd)}"]
    if slurm:  # the node environment of slurm/env.sh, as in the sbatch scripts
        lines += ["source slurm/env.sh", 'export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"']
    return "\n".join(lines + ["exec " + shlex.join(cmd)]) + "\n"


def _stage_job_lines(site: Site, name: str) -> list[str]:
    """A stage job's batch-shell lines before its srun (on the host, where Slurm's commands are):
    stop a chain of requeues that no longer saves anything, and hand the job's end to the run
    (slurm/progress.sh). nemo-run's batch shell runs srun in the foreground and could not act on a
    time-limit signal before the kill; the run stops itself before its end instead (deadline.py),
    exits 75, and the batch shell requeues the job (nemo-run's TORCHX_MAX_RETRIES = MAX_REQUEUES);
    ``afterok`` holds while it is requeued."""
    repo, run = site.mounts[0][0], f"{site.mounts[1][0]}/{name}"
    # nemo-run's batch shell traces every line (set -vx): not the sourced file's
    return ["{ set +vx; } 2>/dev/null", f"source {shlex.quote(repo)}/slurm/progress.sh", "set -x",
            f"nc_requeue_guard {shlex.quote(run)} {site.max_stalled} || exit 1", "nc_job_end"]


def _slurm_executor(run, site: Site, name: str, nodes: int, gpus: int, after: tuple[str, ...],
                    dryrun: bool, stage: bool = True):
    env = {"RUN_NAME": name, "RUNS_MOUNT": site.runs_mount, "DATA_MOUNT": site.mounts[2][1],
           "MODELS_MOUNT": site.mounts[3][1], "GPUS_PER_NODE": str(gpus),
           "MASTER_PORT": str(site.master_port),
           **({"NODE_SETUP": site.node_setup} if site.node_setup else {})}
    image = None if site.image == "none" else site.image
    executor = run.SlurmExecutor(
        account=site.account or None, partition=site.partition or None, qos=site.qos or None,
        time=site.time, nodes=nodes, ntasks_per_node=1, gpus_per_node=gpus, exclusive=True,
        container_image=image,
        container_mounts=[f"{a}:{b}" for a, b in site.mounts] if image else [],
        srun_args=["--no-container-mount-home"] if image else None,
        # nemo-run writes `export K=V` unquoted
        env_vars={k: shlex.quote(v) for k, v in env.items()},
        job_name_prefix=f"nemo-cascade-{name}.",
        retries=site.max_requeues if stage else site.retries,
        packager=run.Packager(),
        # sbatch on this machine (a login node); the jobs read their scripts from the experiment
        # folder under NEMORUN_HOME, which must therefore be on the cluster's shared filesystem
        tunnel=run.LocalTunnel(job_dir=""),
        # afterok on a stage that failed can never be satisfied: cancel those jobs instead of
        # leaving them pending
        additional_parameters={"kill_on_invalid_dep": "yes"},
        setup_lines="\n".join([
            'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
            *(_stage_job_lines(site, name) if stage else [])]))
    # job ids exist only once submitted (nemo-run fills them in then): show the task names instead
    if dryrun:
        executor.dependencies = [f"slurm://dryrun/<{a}>" for a in after]
    return executor


def add_tasks(run, exp, cfg: config.Cascade, spec: Launch, site: Site | None,
              dryrun: bool = False) -> list[Task]:
    """Add the plan's tasks to the (entered) nemo_run.Experiment ``exp``; ``site`` None: local
    executor."""
    run_dir = str(Path(cfg.run_root) / cfg.name)
    python, cwd = ("python", site.repo_mount) if site else (sys.executable, str(REPO))
    tasks = plan(cfg, run_dir, reward_model=spec.reward_model, judge=spec.judge,
                 serve_is_dependency=not site)
    nodes, gpus = slurm_shape(cfg, site.gpus_per_node) if site else (1, 1)
    for t in tasks:
        if t.serve:
            cmd = serve_command(
                python, run_dir, spec.launch_id, t.name, t.serve, dtype=cfg.model.dtype,
                host="0.0.0.0" if site else "127.0.0.1", ready_timeout=3600 if site else 600,
                vllm_args=spec.vllm_args or (f"--tensor-parallel-size {spec.serve_gpus}"
                                             if site else ""),
                port=served_port(run_dir, t.name), watch_pid=0 if site else os.getpid(),
                detach=not site)
        else:
            launcher = (["bash", "slurm/node.sh"] if site
                        else [python, "-m", "nemo_cascade.tooling.cli", "run"])
            cmd = task_command(python, run_dir, spec.launch_id, t,
                               [*launcher, spec.recipe, "--stage", t.stage, *spec.overrides],
                               spec.wait)
        executor = (_slurm_executor(run, site, cfg.name,
                                    *((1, spec.serve_gpus) if t.serve else (nodes, gpus)),
                                    t.after, dryrun, stage=not t.serve)
                    if site else run.LocalExecutor())
        exp.add(run.Script(inline=_inline(cmd, cwd, bool(site))), executor=executor, name=t.name,
                dependencies=list(t.after))
    return tasks


def _nemo_run():
    try:
        # its imports (fastapi/starlette) warn about their own deprecations
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import nemo_run
    except ImportError as e:
        raise config.ConfigError(f"launch: nemo-run is not importable ({e}); install it as "
                                 "tools/setup_venv.sh does (pip install nemo-run==0.11.1, then "
                                 "--no-deps leptonai==0.27.3 anyio==4.16.0)") from None
    return nemo_run


def render(exp) -> dict[str, str]:
    """Dry run: per task, its sbatch script (Slurm) and the script it runs, as nemo-run writes
    them."""
    exp.dryrun(log=False, delete_exp_dir=False)
    out, exp_dir = {}, Path(exp._exp_dir)
    for job in exp.jobs:
        sbatch, script = (exp_dir / f"{job.id}_sbatch.sh",
                          exp_dir / job.id / "scripts" / f"{job.id}.sh")
        out[job.id] = ((sbatch.read_text() + "\n") if sbatch.is_file() else "") + \
            f"# ---- {script.name}: the task's script\n{script.read_text()}"
    shutil.rmtree(exp_dir, ignore_errors=True)
    return out


def plan_table(tasks: list[Task]) -> str:
    return "\n".join(
        f"  {t.name:<20} after {','.join(t.after) or '-':<24} "
        + (f"serves {t.serve.model} ({t.serve.runner}) for {','.join(t.serve.consumers)}"
           if t.serve else f"stage {t.stage}"
           + (f", needs {','.join(n for n, _ in t.servers)}" if t.servers else ""))
        for t in tasks)


def launch(cfg: config.Cascade, spec: Launch, *, dryrun: bool = False, out: str = "") -> int:
    """Dry-run the experiment (print, and write to ``out``, each task's scripts) or run it: Slurm
    submits and returns; local runs every task and returns 0 when the manifest shows every stage
    done (3: gate stop)."""
    site = Site.from_env() if spec.executor == "slurm" else None
    if site and not dryrun and not site.account:
        raise config.ConfigError("launch: set ACCOUNT (the Slurm account) for --executor slurm")
    for path in (spec.reward_model, spec.judge) if not site else ():
        if path and not Path(path).is_dir():
            raise config.ConfigError(f"launch: {path}: no such model folder")
    spec = replace(spec,
                   launch_id=spec.launch_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    cfg, spec = _for_executor(cfg, spec, site)
    if site:
        # a layout that does not fill whole nodes: one line, before nemo-run
        slurm_shape(cfg, site.gpus_per_node)
        _check_paths_survive_nemo_run(site)
    run, run_dir = _nemo_run(), Path(cfg.run_root) / cfg.name
    with run.Experiment(f"nemo-cascade-{cfg.name}", log_level="WARN") as exp:
        tasks = add_tasks(run, exp, cfg, spec, site, dryrun)
        print(f"nemo-cascade launch {spec.launch_id}: {cfg.name} → {run_dir} ({spec.executor})\n"
              f"{plan_table(tasks)}")
        if dryrun:
            for name, text in render(exp).items():
                print(f"\n######## {name}\n{text}")
                if out:
                    Path(out).mkdir(parents=True, exist_ok=True)
                    (Path(out) / f"{name}.sh").write_text(text)
            return 0
        exp.run(sequential=False, detach=bool(site))
        if site:
            print(f"submitted {len(tasks)} jobs; the run folder is {run_dir} in the container "
                  f"({site.mounts[1][0]} here); status: nemo experiment status {exp._id}")
            return watch_jobs(exp, tasks) if spec.watch else 0
    from nemo_cascade.cascade.lineage import stage_status

    status, stopped = stage_status(run_dir)
    print(f"run {run_dir}: " + ", ".join(f"{s.name} {status.get(s.name, 'pending')}"
                                         for s in cfg.stages))
    return 3 if stopped else 0 if all(status.get(s.name) == "done" for s in cfg.stages) else 1


def _check_paths_survive_nemo_run(site: Site) -> None:
    """nemo-run (0.11) replaces every "/nemo_run" in a rendered sbatch script with the job's folder
    — its own placeholder — so a path with a folder of that name (NEMORUN_HOME, a mount) would point
    the job at a folder that does not exist, and Slurm fails it without a log. Refused here in one
    line instead."""
    home = os.environ.get("NEMORUN_HOME", "")
    named = {"NEMORUN_HOME": home, **{f"mount {a}": a for a, _ in site.mounts}}
    for what, path in named.items():
        if "/nemo_run" in path:
            raise config.ConfigError(
                f"launch: {what}={path}: nemo-run rewrites '/nemo_run' in job scripts; "
                f"use a path without a folder named nemo_run")


TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN")


def watch_jobs(exp, tasks: list[Task], poll_s: float = 5.0,
               timeout_s: float = 7 * 24 * 3600.0) -> int:
    """Follow the submitted jobs through nemo-run (Slurm's accounting, ``sacct``) until each has
    ended, printing every change of state; 0 when every job succeeded, else 1 with one line naming
    the stage that failed and the jobs Slurm cancelled because of it (``afterok`` can no longer be
    met)."""
    states: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = {name: str(info["status"]).rsplit(".", 1)[-1]
               for name, info in exp.status(return_dict=True).items()}
        for name, state in now.items():
            if states.get(name) != state:
                print(f"  {time.strftime('%H:%M:%S')} {name}: {state}", flush=True)
        states = now
        if all(state in TERMINAL for state in states.values()):
            break
        time.sleep(poll_s)
    failed = [t.name for t in tasks if states.get(t.name) not in ("SUCCEEDED", "CANCELLED")]
    cancelled = [t.name for t in tasks if states.get(t.name) == "CANCELLED"]
    if not failed and not cancelled:
        print(f"every job succeeded ({', '.join(t.name for t in tasks)})")
        return 0
    first = (failed or cancelled)[0]
    after = f"; cancelled after it: {', '.join(cancelled)}" if failed and cancelled else ""
    index = [t.name for t in tasks].index(first)
    print(f"nemo-cascade: error: launch: {first} {states.get(first, 'did not end').lower()}{after} "
          f"(its log: nemo experiment logs {exp._id} {index})", file=sys.stderr)
    return 1


# ------------------------------------------------------------------------------------- command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``nemo-cascade launch`` (cli.py adds the recipe and the overrides)."""
    p.add_argument(
        "--executor", choices=["local", "slurm"], default="local",
        help="local: run the tasks here, one after the other; slurm: one sbatch job per task")
    p.add_argument("--dryrun", action="store_true",
                   help="print each task's sbatch / script instead of running")
    p.add_argument("--out", default="",
                   help="--dryrun: also write each task's text to OUT/<task>.sh")
    p.add_argument("--reward-model", default="", help="serve this HF reward model for the stages "
                   "that score with an RM by URL (domain rlhf, reward.if_rm_bonus)")
    p.add_argument("--judge", default="",
                   help="serve this HF judge LM for the swe stages (reward.judge_url)")
    p.add_argument("--serve-gpus", type=int, default=8,
                   help="slurm: GPUs (vLLM tensor parallel) per served model")
    p.add_argument("--vllm-args", default="",
                   help="extra `vllm serve` arguments for the served models")
    p.add_argument("--wait", type=float, default=4 * 3600.0,
                   help="seconds a stage waits for its servers' URLs")
    p.add_argument("--watch", action="store_true", help="slurm: after submitting, follow the jobs "
                   "until they end (exit 1 naming the stage that failed)")


def spec_from_args(args) -> Launch:
    return Launch(recipe=args.recipe, overrides=tuple(args.overrides), executor=args.executor,
                  reward_model=args.reward_model, judge=args.judge, serve_gpus=args.serve_gpus,
                  vllm_args=args.vllm_args, wait=args.wait, watch=args.watch)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["task"], ["serve"]):
        return launch_tasks.main(argv)
    # RECIPE ...: the CLI resolves the recipe and the overrides (one line per user mistake), then
    # calls launch() — cli sits above this module, so hand over to it as a process rather than
    # import it.
    os.execv(sys.executable, [sys.executable, "-m", "nemo_cascade.tooling.cli", "launch", *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
