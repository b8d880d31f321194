"""nemo-run experiments for a cascade: one task per stage, in cascade order, plus a task per served model.

``python -m nemo_cascade.launch RECIPE --executor local|slurm [--dryrun] [KEY=VALUE ...]`` (the same as
``nemo-cascade launch ...``) builds a ``nemo_run.Experiment`` whose tasks are ``nemo-cascade run RECIPE --stage
NAME`` for every stage, each starting after the stage before it (Slurm: ``afterok`` job dependencies; local: one
after the other), and a *serve* task wherever a stage scores with a served model:

- a stage whose ``reward.reward_model_stage`` names an earlier ``reward_model`` stage: ``serve-<that stage>``
  serves its export (``stages/<k>-<rm>/hf``, vLLM pooling runner); the stage gets the URL as
  ``reward.reward_model_url`` (§4.2–4.3);
- ``--reward-model PATH``: ``serve-reward-model`` for the stages that score with an RM by URL (domain rlhf or
  ``reward.if_rm_bonus``) — an RM trained elsewhere, e.g. the 72B one of §4.2;
- ``--judge PATH``: ``serve-judge`` (generate runner) for the swe stages, as ``reward.judge_url`` (§4.7, Eq. 2).

A serve task starts after the stage before the first stage it serves, publishes its URL under
``RUN/servers/<launch id>/`` and stops once every stage it serves has ended. Every stage task runs through
``python -m nemo_cascade.launch task``, which exits at once when its stage
is already done (a relaunched experiment continues the run), refuses to start before the earlier stages are done
(a local experiment starts later tasks even after a failure), and waits for the URLs of the servers it needs.

This is the only module that imports ``nemo_run`` (DESIGN.md), and only inside the functions that build the
experiment: the ``task`` / ``serve`` entry points run in containers without nemo-run. Slurm settings come from
the environment variables of slurm/common.sh (ACCOUNT, PARTITION, CONTAINER_IMAGE, RUN_DIR, ...; docs/launch.md).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from nemo_cascade import config as C

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IMAGE = "nvcr.io/nvidia/nemo:25.09"
RM_DOMAINS = ("rlhf",)
"""Domains scored by a reward model (besides ifeval with ``reward.if_rm_bonus``)."""


@dataclass(frozen=True)
class Serve:
    """A served model: which HF folder, how, and for which stages (as which ``reward`` field)."""
    model: str
    runner: str            # "pooling" (reward model) or "generate" (judge LM)
    field: str             # the Reward field its URL goes into: reward_model_url or judge_url
    consumers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """One task of the experiment: a stage (``stage`` set) or a server (``serve`` set)."""
    name: str
    after: tuple[str, ...] = ()   # task names it starts after (Slurm: afterok)
    stage: str = ""
    earlier: tuple[str, ...] = ()  # stages that must be done before this stage runs
    servers: tuple[tuple[str, str], ...] = ()  # (serve task, Reward field) whose URLs this stage needs
    serve: Serve | None = None


# ------------------------------------------------------------------------------------------------ the plan
def _served_by(cfg: C.Cascade, stage: C.Stage, run_dir: str, reward_model: str,
               judge: str) -> list[tuple[str, Serve]]:
    """The served models a stage scores with, as (serve task name, Serve without consumers)."""
    out, rw = [], stage.reward
    if stage.kind != "grpo":
        return out
    if rw.reward_model_stage:  # the cascade's own RM: serve that stage's export
        j = [s.name for s in cfg.stages].index(rw.reward_model_stage)
        model = f"{run_dir}/stages/{j}-{rw.reward_model_stage}/hf"
        out.append((f"serve-{rw.reward_model_stage}", Serve(model, "pooling", "reward_model_url")))
    elif reward_model and (stage.domain in RM_DOMAINS or rw.if_rm_bonus):
        out.append(("serve-reward-model", Serve(reward_model, "pooling", "reward_model_url")))
    if judge and stage.domain == "swe":
        out.append(("serve-judge", Serve(judge, "generate", "judge_url")))
    return out


def plan(cfg: C.Cascade, run_dir: str, *, reward_model: str = "", judge: str = "",
         serve_is_dependency: bool = False) -> list[Task]:
    """The tasks in submission order: each stage after the one before it; a serve task after the stage before
    the first stage it serves. ``serve_is_dependency`` (local): a stage also starts after its serve tasks, which
    return once their server is up; on Slurm a serve job runs until its stages end, so they wait for its URL."""
    names = [s.name for s in cfg.stages]
    consumers: dict[str, list[str]] = {}
    tasks: list[Task] = []
    for k, s in enumerate(cfg.stages):
        prev = tuple(names[k - 1:k])
        needs = _served_by(cfg, s, run_dir, reward_model, judge)
        for name, serve in needs:
            if name not in consumers:
                consumers[name] = []
                tasks.append(Task(name, prev, serve=serve))
            consumers[name].append(s.name)
        after = prev + (tuple(n for n, _ in needs) if serve_is_dependency else ())
        tasks.append(Task(s.name, after, stage=s.name, earlier=tuple(names[:k]),
                          servers=tuple((n, serve.field) for n, serve in needs)))
    return [replace(t, serve=replace(t.serve, consumers=tuple(consumers[t.name]))) if t.serve else t for t in tasks]


def slurm_shape(cfg: C.Cascade, gpus_per_node: int) -> tuple[int, int]:
    """(nodes, GPUs per node) for the actor's tp × pp × cp × dp ranks."""
    p = cfg.parallel
    world = p.tp * p.pp * getattr(p, "cp", 1) * p.dp
    if world <= gpus_per_node:
        return 1, world
    if world % gpus_per_node:
        raise C.ConfigError(f"parallel: tp × pp × cp × dp = {world} ranks do not fill whole nodes of "
                            f"{gpus_per_node} GPUs (GPUS_PER_NODE); change parallel.dp")
    return world // gpus_per_node, gpus_per_node


def served_port(run_dir: str, task: str) -> int:
    """A port derived from the run and task: the same server URL in every launch of a run, so a stage that
    resumes keeps the config it started with (the URL is part of it)."""
    return 20000 + int(hashlib.sha256(f"{run_dir}/{task}".encode()).hexdigest(), 16) % 20000


# ------------------------------------------------------------------------------------------------ run state
def stage_status(run_dir: str | Path) -> tuple[dict[str, str], str]:
    """Per-stage status from the run's manifest.json ({} before the first stage starts) and its stop reason."""
    path = Path(run_dir) / "manifest.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}, ""
    except json.JSONDecodeError:  # being replaced this instant (written atomically): read again
        time.sleep(0.5)
        data = json.loads(path.read_text())
    return {k: v.get("status", "pending") for k, v in data.get("stages", {}).items()}, data.get("stopped", "")


def servers_dir(run_dir: str | Path, launch_id: str) -> Path:
    return Path(run_dir) / "servers" / launch_id


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def wait_for_url(run_dir: str, launch_id: str, task: str, timeout: float, poll: float = 2.0) -> str:
    """The URL a serve task published; raises RuntimeError when it stopped or did not come up in time."""
    d, t0 = servers_dir(run_dir, launch_id), time.monotonic()
    while True:
        if (d / f"{task}.url").is_file():
            return (d / f"{task}.url").read_text().strip()
        if (d / f"{task}.stopped").is_file():
            raise RuntimeError(f"server task {task} stopped: {(d / f'{task}.stopped').read_text().strip()}")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"server task {task} published no URL in {timeout:.0f} s ({d})")
        time.sleep(poll)


def served_out(run_dir: str, launch_id: str, task: str, consumers: tuple[str, ...]) -> bool:
    """Whether a server is no longer needed: each stage it serves is done or its task gave up, or the
    forgetting gate stopped the cascade."""
    status, stopped = stage_status(run_dir)
    d = servers_dir(run_dir, launch_id)
    return bool(stopped) or all(status.get(s) == "done" or (d / f"{task}.released.{s}").is_file()
                                for s in consumers)


# ------------------------------------------------------------------------------------------------ task entry
def _forward_signals(child: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda s, _f: child.send_signal(s))


def run_task(args) -> int:
    """One stage: skip when done, refuse before the earlier stages are, wait for servers, run ``args.command``."""
    status, stopped = stage_status(args.run_dir)
    if status.get(args.stage) == "done":
        print(f"launch: stage {args.stage} is done in {args.run_dir}/manifest.json; nothing to do")
        return 0
    if stopped:
        print(f"launch: not starting stage {args.stage}: the forgetting gate stopped the cascade ({stopped})",
              file=sys.stderr)
        return 3
    missing = [s for s in args.earlier if status.get(s) != "done"]
    if missing:
        print(f"launch: not starting stage {args.stage}: earlier stage(s) {', '.join(missing)} not done",
              file=sys.stderr)
        return 1
    extra = []
    for spec in args.server:
        task, _, field = spec.partition("=")
        if field not in ("reward_model_url", "judge_url"):
            print(f"launch task: --server {spec}: expected TASK=reward_model_url or TASK=judge_url", file=sys.stderr)
            return 2
        try:
            url = wait_for_url(args.run_dir, args.id, task, args.wait)
        except RuntimeError as e:
            print(f"launch: stage {args.stage}: {e}", file=sys.stderr)
            return 1
        extra.append(f"stages.{args.stage}.reward.{field}={url}")
        if field == "reward_model_url":
            extra.append(f"stages.{args.stage}.reward.reward_model_stage=")
    child = subprocess.Popen([*args.command, *extra])
    _forward_signals(child)
    rc = child.wait()
    # A server may stop for this stage once the stage gave up for good: it succeeded, or failed with no Slurm
    # requeue left (nemo-run requeues a failed job TORCHX_MAX_RETRIES times). Killed by a signal: maybe requeued.
    final = rc == 0 or int(os.environ.get("SLURM_RESTART_COUNT", 0)) >= int(os.environ.get("TORCHX_MAX_RETRIES", 0))
    if rc >= 0 and final:
        for spec in args.server:
            task = spec.partition("=")[0]
            d = servers_dir(args.run_dir, args.id)
            d.mkdir(parents=True, exist_ok=True)
            _write(d / f"{task}.released.{args.stage}", f"exit {rc}\n")
    return rc


def run_serve(args) -> int:
    """Serve a model until the stages it serves have ended (``--detach``: in a background process, returning
    once the server is up, while ``--watch-pid`` lives)."""
    d = servers_dir(args.run_dir, args.id)
    d.mkdir(parents=True, exist_ok=True)
    if served_out(args.run_dir, args.id, args.name, tuple(args.consumers)):
        print(f"launch: {args.name}: {', '.join(args.consumers)} already done; not serving")
        return 0
    if args.detach:
        return _serve_detached(args, d)
    from nemo_cascade.rewards.serve import VLLMServer, is_vllm_cpu

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    port = args.port or served_port(args.run_dir, args.name)
    server = VLLMServer(args.model, runner=args.runner, host=args.host, port=port, dtype=args.dtype,
                        extra_args=shlex.split(args.vllm_args), log_path=d / f"{args.name}.log",
                        ready_timeout=args.ready_timeout, single_engine_process=is_vllm_cpu())
    why = "its stages ended"
    try:
        server.start()
        host = "127.0.0.1" if args.host in ("127.0.0.1", "localhost") else socket.gethostname()
        _write(d / f"{args.name}.url", f"http://{host}:{port}\n")
        print(f"launch: {args.name} serves {args.model} at http://{host}:{port} for {', '.join(args.consumers)}")
        while not served_out(args.run_dir, args.id, args.name, tuple(args.consumers)):
            if server.proc is None or server.proc.poll() is not None:
                why = f"the server exited (log {server.log_path})"
                return 1
            if args.watch_pid and not _alive(args.watch_pid):
                why = f"the launching process {args.watch_pid} ended"
                break
            time.sleep(args.poll)
        return 0
    except BaseException as e:
        why = f"{type(e).__name__}: {e}".splitlines()[0]
        raise
    finally:
        (d / f"{args.name}.url").unlink(missing_ok=True)
        _write(d / f"{args.name}.stopped", why + "\n")
        server.stop()
        print(f"launch: {args.name} stopped: {why}")


def _serve_detached(args, d: Path) -> int:
    """Start this serve task again without --detach, in its own session, and return once its URL is out."""
    argv = serve_command(sys.executable, args.run_dir, args.id, args.name,
                         Serve(args.model, args.runner, "", tuple(args.consumers)), host=args.host,
                         dtype=args.dtype, vllm_args=args.vllm_args, ready_timeout=args.ready_timeout,
                         watch_pid=args.watch_pid, port=args.port)
    with open(d / f"{args.name}.out", "ab") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True, cwd=REPO)
    t0 = time.monotonic()
    while not (d / f"{args.name}.url").is_file():
        if child.poll() is not None or (d / f"{args.name}.stopped").is_file():
            print(f"launch: {args.name} did not start (see {d / (args.name + '.out')} and .log)", file=sys.stderr)
            return 1
        if time.monotonic() - t0 > args.ready_timeout + 60:
            child.terminate()
            return 1
        time.sleep(1.0)
    print(f"launch: {args.name} is up at {(d / (args.name + '.url')).read_text().strip()} (pid {child.pid})")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


# ------------------------------------------------------------------------------------------------ commands
def task_command(python: str, run_dir: str, launch_id: str, task: Task, stage_cmd: list[str],
                 wait: float) -> list[str]:
    """``python -m nemo_cascade.launch task ... -- STAGE_CMD`` for a stage task."""
    cmd = [python, "-m", "nemo_cascade.launch", "task", "--run-dir", run_dir, "--id", launch_id,
           "--stage", task.stage, "--wait", str(int(wait))]
    if task.earlier:
        cmd += ["--earlier", ",".join(task.earlier)]
    for name, field in task.servers:
        cmd += ["--server", f"{name}={field}"]
    return cmd + ["--", *stage_cmd]


def serve_command(python: str, run_dir: str, launch_id: str, name: str, serve: Serve, *, host: str, dtype: str,
                  vllm_args: str = "", ready_timeout: float = 600, watch_pid: int = 0, port: int = 0,
                  detach: bool = False) -> list[str]:
    """``python -m nemo_cascade.launch serve ...`` for a serve task."""
    cmd = [python, "-m", "nemo_cascade.launch", "serve", "--run-dir", run_dir, "--id", launch_id, "--name", name,
           "--model", serve.model, "--runner", serve.runner, "--for", ",".join(serve.consumers), "--host", host,
           "--dtype", dtype, "--ready-timeout", str(int(ready_timeout))]
    cmd += ["--vllm-args", vllm_args] if vllm_args else []
    cmd += ["--watch-pid", str(watch_pid)] if watch_pid else []
    cmd += ["--port", str(port)] if port else []
    return cmd + (["--detach"] if detach else [])


@dataclass(frozen=True)
class Site:
    """Slurm settings, from the environment variables that slurm/common.sh reads (docs/launch.md)."""
    account: str = ""
    partition: str = ""
    qos: str = ""
    time: str = "04:00:00"
    image: str = DEFAULT_IMAGE
    mounts: tuple[tuple[str, str], ...] = ()  # (host, container): the repository, runs, data, models, extras
    gpus_per_node: int = 8
    master_port: int = 29500
    retries: int = 1
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
        host = {"REPO": repo, "RUNS": get("RUN_DIR", f"{repo}/runs"), "DATA": get("DATA_DIR", f"{repo}/data"),
                "MODELS": get("MODELS_DIR", f"{repo}/models")}
        inside = {"REPO": "/workspace/nemo-cascade", "RUNS": "/runs", "DATA": "/data", "MODELS": "/models"}
        # without a container ("none") the tasks see the host paths
        mounts = [(host[k], get(f"{k}_MOUNT", host[k] if image == "none" else inside[k])) for k in host]
        mounts += [tuple(m.split(":", 1)) for m in get("EXTRA_MOUNTS").split(",") if ":" in m]
        try:
            numbers = {k: int(get(k.upper(), str(getattr(cls, k))))
                       for k in ("gpus_per_node", "master_port", "retries")}
        except ValueError as e:
            raise C.ConfigError(f"launch: GPUS_PER_NODE, MASTER_PORT and RETRIES must be integers ({e})") from None
        return cls(account=get("ACCOUNT"), partition=get("PARTITION"), qos=get("QOS"), time=get("TIME", cls.time),
                   image=image, mounts=tuple(mounts), node_setup=get("NODE_SETUP"), wandb=get("WANDB", "1") == "1",
                   **numbers)


# ------------------------------------------------------------------------------------------------ experiment
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


def _for_executor(cfg: C.Cascade, spec: Launch, site: Site | None) -> tuple[C.Cascade, Launch]:
    """The recipe path and run folder as the tasks see them (Slurm: inside the container); W&B on when WANDB=1,
    as in the sbatch scripts."""
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


def _slurm_executor(run, site: Site, name: str, nodes: int, gpus: int, after: tuple[str, ...], dryrun: bool):
    env = {"RUN_NAME": name, "RUNS_MOUNT": site.runs_mount, "DATA_MOUNT": site.mounts[2][1],
           "MODELS_MOUNT": site.mounts[3][1], "GPUS_PER_NODE": str(gpus),
           "MASTER_PORT": str(site.master_port), **({"NODE_SETUP": site.node_setup} if site.node_setup else {})}
    image = None if site.image == "none" else site.image
    executor = run.SlurmExecutor(
        account=site.account or None, partition=site.partition or None, qos=site.qos or None, time=site.time,
        nodes=nodes, ntasks_per_node=1, gpus_per_node=gpus, exclusive=True, container_image=image,
        container_mounts=[f"{a}:{b}" for a, b in site.mounts] if image else [],
        srun_args=["--no-container-mount-home"] if image else None,
        env_vars={k: shlex.quote(v) for k, v in env.items()},  # nemo-run writes `export K=V` unquoted
        job_name_prefix=f"nemo-cascade-{name}.", retries=site.retries, packager=run.Packager(),
        # sbatch on this machine (a login node); the jobs read their scripts from the experiment folder under
        # NEMORUN_HOME, which must therefore be on the cluster's shared filesystem
        tunnel=run.LocalTunnel(job_dir=""),
        # afterok on a stage that failed can never be satisfied: cancel those jobs instead of leaving them pending
        additional_parameters={"kill_on_invalid_dep": "yes"},
        setup_lines='export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)')
    if dryrun:  # job ids exist only once submitted (nemo-run fills them in then): show the task names instead
        executor.dependencies = [f"slurm://dryrun/<{a}>" for a in after]
    return executor


def add_tasks(run, exp, cfg: C.Cascade, spec: Launch, site: Site | None, dryrun: bool = False) -> list[Task]:
    """Add the plan's tasks to the (entered) nemo_run.Experiment ``exp``; ``site`` None: local executor."""
    run_dir = str(Path(cfg.run_root) / cfg.name)
    python, cwd = ("python", site.repo_mount) if site else (sys.executable, str(REPO))
    tasks = plan(cfg, run_dir, reward_model=spec.reward_model, judge=spec.judge, serve_is_dependency=not site)
    nodes, gpus = slurm_shape(cfg, site.gpus_per_node) if site else (1, 1)
    for t in tasks:
        if t.serve:
            cmd = serve_command(python, run_dir, spec.launch_id, t.name, t.serve, dtype=cfg.model.dtype,
                                host="0.0.0.0" if site else "127.0.0.1", ready_timeout=3600 if site else 600,
                                vllm_args=spec.vllm_args or (f"--tensor-parallel-size {spec.serve_gpus}"
                                                             if site else ""),
                                port=served_port(run_dir, t.name), watch_pid=0 if site else os.getpid(),
                                detach=not site)
        else:
            launcher = ["bash", "slurm/node.sh"] if site else [python, "-m", "nemo_cascade.cli", "run"]
            cmd = task_command(python, run_dir, spec.launch_id, t,
                               [*launcher, spec.recipe, "--stage", t.stage, *spec.overrides], spec.wait)
        executor = (_slurm_executor(run, site, cfg.name, *((1, spec.serve_gpus) if t.serve else (nodes, gpus)),
                                    t.after, dryrun) if site else run.LocalExecutor())
        exp.add(run.Script(inline=_inline(cmd, cwd, bool(site))), executor=executor, name=t.name,
                dependencies=list(t.after))
    return tasks


def _nemo_run():
    try:
        with warnings.catch_warnings():  # its imports (fastapi/starlette) warn about their own deprecations
            warnings.simplefilter("ignore")
            import nemo_run
    except ImportError as e:
        raise C.ConfigError(f"launch: nemo-run is not importable ({e}); install it as scripts/setup_venv.sh does "
                            f"(pip install nemo-run==0.11.1, then --no-deps leptonai==0.27.3 anyio==4.16.0)") from None
    return nemo_run


def render(exp) -> dict[str, str]:
    """Dry run: per task, its sbatch script (Slurm) and the script it runs, as nemo-run writes them."""
    import shutil

    exp.dryrun(log=False, delete_exp_dir=False)
    out, exp_dir = {}, Path(exp._exp_dir)
    for job in exp.jobs:
        sbatch, script = exp_dir / f"{job.id}_sbatch.sh", exp_dir / job.id / "scripts" / f"{job.id}.sh"
        out[job.id] = ((sbatch.read_text() + "\n") if sbatch.is_file() else "") + \
            f"# ---- {script.name}: the task's script\n{script.read_text()}"
    shutil.rmtree(exp_dir, ignore_errors=True)
    return out


def plan_table(tasks: list[Task]) -> str:
    return "\n".join(
        f"  {t.name:<20} after {','.join(t.after) or '-':<24} "
        + (f"serves {t.serve.model} ({t.serve.runner}) for {','.join(t.serve.consumers)}" if t.serve else
           f"stage {t.stage}" + (f", needs {','.join(n for n, _ in t.servers)}" if t.servers else ""))
        for t in tasks)


def launch(cfg: C.Cascade, spec: Launch, *, dryrun: bool = False, out: str = "") -> int:
    """Dry-run the experiment (print, and write to ``out``, each task's scripts) or run it: Slurm submits and
    returns; local runs every task and returns 0 when the manifest shows every stage done (3: gate stop)."""
    site = Site.from_env() if spec.executor == "slurm" else None
    if site and not dryrun and not site.account:
        raise C.ConfigError("launch: set ACCOUNT (the Slurm account) for --executor slurm")
    for path in (spec.reward_model, spec.judge) if not site else ():
        if path and not Path(path).is_dir():
            raise C.ConfigError(f"launch: {path}: no such model folder")
    spec = replace(spec, launch_id=spec.launch_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    cfg, spec = _for_executor(cfg, spec, site)
    if site:
        slurm_shape(cfg, site.gpus_per_node)  # a layout that does not fill whole nodes: one line, before nemo-run
    run, run_dir = _nemo_run(), Path(cfg.run_root) / cfg.name
    with run.Experiment(f"nemo-cascade-{cfg.name}", log_level="WARN") as exp:
        tasks = add_tasks(run, exp, cfg, spec, site, dryrun)
        print(f"nemo-cascade launch {spec.launch_id}: {cfg.name} → {run_dir} ({spec.executor})\n{plan_table(tasks)}")
        if dryrun:
            for name, text in render(exp).items():
                print(f"\n######## {name}\n{text}")
                if out:
                    Path(out).mkdir(parents=True, exist_ok=True)
                    (Path(out) / f"{name}.sh").write_text(text)
            return 0
        exp.run(sequential=False, detach=bool(site))
    if site:
        print(f"submitted {len(tasks)} jobs; the run folder is {run_dir} in the container ({site.mounts[1][0]} here)")
        return 0
    status, stopped = stage_status(run_dir)
    print(f"run {run_dir}: " + ", ".join(f"{s.name} {status.get(s.name, 'pending')}" for s in cfg.stages))
    return 3 if stopped else 0 if all(status.get(s.name) == "done" for s in cfg.stages) else 1


# ------------------------------------------------------------------------------------------------ command line
def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``nemo-cascade launch`` (cli.py adds the recipe and the overrides)."""
    p.add_argument("--executor", choices=["local", "slurm"], default="local",
                   help="local: run the tasks here, one after the other; slurm: one sbatch job per task")
    p.add_argument("--dryrun", action="store_true", help="print each task's sbatch / script instead of running")
    p.add_argument("--out", default="", help="--dryrun: also write each task's text to OUT/<task>.sh")
    p.add_argument("--reward-model", default="", help="serve this HF reward model for the stages that score "
                   "with an RM by URL (domain rlhf, reward.if_rm_bonus)")
    p.add_argument("--judge", default="", help="serve this HF judge LM for the swe stages (reward.judge_url)")
    p.add_argument("--serve-gpus", type=int, default=8, help="slurm: GPUs (vLLM tensor parallel) per served model")
    p.add_argument("--vllm-args", default="", help="extra `vllm serve` arguments for the served models")
    p.add_argument("--wait", type=float, default=4 * 3600.0, help="seconds a stage waits for its servers' URLs")


def spec_from_args(args) -> Launch:
    return Launch(recipe=args.recipe, overrides=tuple(args.overrides), executor=args.executor,
                  reward_model=args.reward_model, judge=args.judge, serve_gpus=args.serve_gpus,
                  vllm_args=args.vllm_args, wait=args.wait)


def _entry_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nemo_cascade.launch", description="task entry points")
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("task", help="run one stage of a launched cascade (see module docstring)")
    t.add_argument("--run-dir", required=True)
    t.add_argument("--id", required=True, help="the launch id (servers/<id>/ holds the served URLs)")
    t.add_argument("--stage", required=True)
    t.add_argument("--earlier", type=lambda s: [x for x in s.split(",") if x], default=[])
    t.add_argument("--server", action="append", default=[], metavar="TASK=FIELD")
    t.add_argument("--wait", type=float, default=4 * 3600.0)
    t.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("serve", help="serve a model for stages of a launched cascade")
    for name in ("--run-dir", "--id", "--name", "--model"):
        s.add_argument(name, required=True)
    s.add_argument("--runner", choices=["pooling", "generate"], default="pooling")
    s.add_argument("--for", dest="consumers", type=lambda v: [x for x in v.split(",") if x], required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--dtype", default="float32")
    s.add_argument("--vllm-args", default="")
    s.add_argument("--ready-timeout", type=float, default=600.0)
    s.add_argument("--watch-pid", type=int, default=0)
    s.add_argument("--poll", type=float, default=5.0)
    s.add_argument("--detach", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["task"], ["serve"]):
        args = _entry_parser().parse_args(argv)
        if args.what == "task":
            args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not args.command:
                print("launch task: no command after --", file=sys.stderr)
                return 2
            return run_task(args)
        return run_serve(args)
    # RECIPE ...: the CLI resolves the recipe and the overrides (one line per user mistake), then calls
    # launch() — cli sits above this module, so hand over to it as a process rather than import it.
    os.execv(sys.executable, [sys.executable, "-m", "nemo_cascade.cli", "launch", *argv])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
