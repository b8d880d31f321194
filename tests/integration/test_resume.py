"""Kill and resume, and a reward server that dies (docs/reliability.md): the cascade SIGKILLed at
every kind of moment, or stopped by its dead reward model, resumes to the uninterrupted run's bits.

A reduced cascade — SFT, then RLHF GRPO scored by a served reward model (a real ``vllm serve`` of a
tiny Bradley–Terry RM, reached through a proxy the test can cut), carrying SFT's optimizer, with KL
to the stage's start and the forgetting gate on two suites — runs once uninterrupted, and once
killed by SIGKILL at each point of :data:`KILLS` (``nemo_cascade.runtime.faults``: the process dies
there, as on a node failure), stopped once by the RM going away mid-stage (bounded retries, then one
error line and the last finished step saved), and re-run after each. On CPU the resumed run's final
weights must equal the uninterrupted run's bit for bit, and so must every logged number, every gate
score and the manifest's stage records. bench/reliability.py runs the same.
"""
import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

KILLS = (
    ("train:15", "SFT's 15th optimizer step, after its checkpoint of step 9", {"sft": "running"}),
    ("checkpoint.write:1", "SFT's checkpoint of step 19: files on disk, meta.json and rename not",
     {"sft": "running"}),
    ("stage.done:1", "SFT recorded done; its clean-up and gate not run", {"sft": "done"}),
    ("evaluate:1", "the gate after SFT: one of its two suites evaluated", {"sft": "done"}),
    ("generate:2",
     "RLHF's second rollout, before its first checkpoint (the carried Adam state restarts it)",
     {"sft": "done", "rlhf": "running"}),
)
"""(NEMO_CASCADE_CRASH_AT, the moment it is, the manifest's stage status it leaves)."""
SERVER_DIES_AT = 4
"""The RLHF step whose scoring finds the reward model gone: after the checkpoint of step 2, so the
stop saves 3."""
STOPPED_IN = 4
"""The RLHF step a stop request interrupts while its groups are scored (the run resumes there after
the server stop), and which the next run, killed in its update, leaves with every group saved."""
PROMPTS_PER_STEP = 8
"""RLHF prompts per step. Each group is scored as soon as it is generated
(``reward.score_while_generating``, §4.6.2): one ``POST /classify`` per group of 4, so a step sends
this many."""


def recipe():
    from nemo_cascade.config import (GRPO, Actor, Boundary, Cascade, Data, Gate, Model, Parallel,
                                     Rollout, Stage)

    sft = Stage(name="sft", kind="sft",
                data=Data(source="synthetic:arithmetic", split="train", seed=1), steps=30,
                sft_batch_size=32, sft_max_tokens=96, checkpoint_every=10,
                actor=Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=5))
    # The RM's URL comes as an override (stages.rlhf.reward.reward_model_url=…); served URLs are not
    # part of a stage's lineage hash, so a resume may reach its RM elsewhere.
    rlhf = Stage(name="rlhf", kind="grpo", domain="rlhf", steps=6, checkpoint_every=3,
                 boundary=Boundary(optimizer="carry"),
                 data=Data(source="synthetic:arithmetic", split="test", size=16, seed=2),
                 actor=Actor(lr=1e-4, lr_schedule="cosine", warmup_steps=1),
                 rollout=Rollout(max_prompt_tokens=96, max_response_tokens=24),
                 grpo=GRPO(group_size=4, prompts_per_step=PROMPTS_PER_STEP, kl_coef=0.01))
    gate = Gate(suites=("tiny-math", "tiny-ifeval"), samples=1, limit=8, max_tokens=24)
    return Cascade(name="resume", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=32), stages=(sft, rlhf), keep_checkpoints=2,
                   gate=gate)


class CuttableProxy:
    """A TCP forwarder to the reward-model server that the test can cut: after ``cut_after(n)``, the
    n+1-th ``POST /classify`` and every connection after it are reset, as when the server process
    dies (the client sees the same connection errors). ``restore()`` lets connections through
    again."""

    def __init__(self, target_port: int):
        self.target_port, self.limit, self.classified, self.dead = target_port, None, 0, False
        self.delay = 0.0
        """Seconds each ``POST /classify`` waits before it is passed on: a slow reward server."""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_after(self, classify_requests: int) -> None:
        self.limit, self.classified, self.dead = classify_requests, 0, False

    def restore(self) -> None:
        self.limit, self.dead = None, False

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = client.recv(65536)
        if head.startswith(b"POST /classify") and self.limit is not None:
            self.dead = self.dead or self.classified >= self.limit
            self.classified += 1
        if head.startswith(b"POST /classify") and self.delay:
            time.sleep(self.delay)
        if self.dead:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                              b"\x01\x00\x00\x00\x00\x00\x00\x00")
            client.close()  # a reset, as from a port whose server is gone
            return
        upstream = socket.create_connection(("127.0.0.1", self.target_port))
        upstream.sendall(head)
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@contextlib.contextmanager
def served_reward_model(folder: Path):
    """A real ``vllm serve`` of a tiny random Bradley–Terry RM built in ``folder``, behind a
    :class:`CuttableProxy` (yielded): the ``tiny_rm_server`` fixture's server, for
    bench/reliability.py, which runs without pytest."""
    from tests.integration._remote_helpers import tiny_reward_model_server

    server = tiny_reward_model_server(folder)
    try:
        server.start()
        yield CuttableProxy(int(server.url.rsplit(":", 1)[1]))
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reward_model(tiny_rm_server):
    """The session's tiny RM server (tests/integration/conftest.py) behind a
    :class:`CuttableProxy`."""
    return CuttableProxy(int(tiny_rm_server.wait_ready().url.rsplit(":", 1)[1]))


def _cmd(root, rm_url):
    # Every scored group is written as it is scored: a stop loses none (not hashed: when state is
    # saved).
    return [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
            f"run_root={root}", f"stages.rlhf.reward.reward_model_url={rm_url}",
            "rollout_checkpoint_seconds=0"]


def _run(root, rm_url, crash_at: str = "") -> subprocess.CompletedProcess:
    env = job_env("NEMO_CASCADE_CRASH_AT")
    if crash_at:
        env["NEMO_CASCADE_CRASH_AT"] = crash_at
    return subprocess.run(_cmd(root, rm_url), capture_output=True, text=True, timeout=900,
                          cwd=ROOT, env=env)


def _groups_saved(folder: Path) -> int:
    """How many groups the rollout checkpoint ``folder`` (one step's) holds, each counted once."""
    saved = set()
    for part in folder.glob("*.jsonl"):
        saved |= {(part.name.split("-")[1], json.loads(line)["index"])
                  for line in part.read_text().splitlines()[1:]}
    return len(saved)


def run_stopped_while_scoring(root: Path, proxy: CuttableProxy) -> tuple[str, int]:
    """Resume at RLHF step :data:`STOPPED_IN` with a slow reward model, and ask the run to stop (as
    the time-limit signal does) as soon as the step's first scored group is on disk: the run stops
    inside the step, keeping its scored groups. Returns the run's last line and how many groups were
    kept."""
    folder = root / "resume/stages/1-rlhf/rollouts" / f"step_{STOPPED_IN:06d}"
    done = threading.Event()

    def request_at_first_group():
        while not done.is_set() and not any(folder.glob("*.jsonl")):
            time.sleep(0.02)
        if not done.is_set():
            (root / "resume/stop_request").write_text("time limit (test)\n")

    proxy.delay = 1.0  # 8 groups scored one after another: about 8 s of scoring per step
    threading.Thread(target=request_at_first_group, daemon=True).start()
    try:
        proc = _run(root, proxy.url)
    finally:
        proxy.delay = 0.0
        done.set()
    assert proc.returncode == 75, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return proc.stderr.rstrip().splitlines()[-1], _groups_saved(folder)


def run_to_end(root: Path, rm_url: str) -> subprocess.CompletedProcess:
    proc = _run(root, rm_url)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc


def run_killed(root: Path, rm_url: str, crash_at: str) -> None:
    """Run until crash point ``crash_at`` kills it: it must die by SIGKILL there, not end or fail
    otherwise, and say so in one line (128 + 9, as a shell reports it)."""
    proc = _run(root, rm_url, crash_at)
    assert proc.returncode == 128 + signal.SIGKILL, \
        f"{crash_at}: rc {proc.returncode}: " + proc.stderr[-4000:]
    assert proc.stderr.rstrip().splitlines()[-1].startswith("nemo-cascade: error: rank 0 ") and \
        "killed by SIGKILL" in proc.stderr.rstrip().splitlines()[-1]
    assert "Traceback" not in proc.stderr


def run_until_server_dies(root: Path, proxy: CuttableProxy) -> str:
    """Run with the RM going away in RLHF step :data:`SERVER_DIES_AT`; returns the run's one error
    line."""
    # This run starts RLHF from step 0 (see KILLS), whose groups the killed run had all written
    # (rollout checkpoints): steps 1 to 3 send requests, step 4 finds the server gone.
    proxy.cut_after((SERVER_DIES_AT - 1) * PROMPTS_PER_STEP)
    try:
        proc = _run(root, proxy.url)
    finally:
        proxy.restore()
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return proc.stderr.rstrip().splitlines()[-1]


def kill_and_resume(root: Path, proxy: CuttableProxy) -> dict:
    """Run the recipe under ``root`` killed at each of :data:`KILLS`, stopped by the RM's death,
    then to its end. Returns what happened: the kill points and the server stop's line."""
    run = root / "resume"
    for crash_at, moment, status in KILLS:
        run_killed(root, proxy.url, crash_at)
        assert _status(run) == {"rlhf": "pending", **status}, \
            f"after a kill at {crash_at} ({moment})"
        if crash_at == "checkpoint.write:1":
            ckpts = sorted(p.name for p in (run / "stages/0-sft/checkpoint").iterdir())
            assert ckpts == ["step_000009", "step_000019.tmp"], ckpts
    stop = run_until_server_dies(root, proxy)
    assert _status(run) == {"sft": "done", "rlhf": "running"}
    stopped, kept = run_stopped_while_scoring(root, proxy)
    # The step's missing groups are generated, all of them written, then the run dies in the update.
    run_killed(root, proxy.url, "train:1")
    complete = _groups_saved(run / "stages/1-rlhf/rollouts" / f"step_{STOPPED_IN:06d}")
    run_to_end(root, proxy.url)
    return {"kills": [c for c, _, _ in KILLS], "server_stop": stop, "stopped": stopped,
            "kept": kept, "complete": complete}


def _status(run):
    return {k: v["status"]
            for k, v in json.loads((run / "manifest.json").read_text())["stages"].items()}


def _metrics(run, stage):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith("time/") and k not in
             ("tokens_per_s", "sync_mb_per_s")}
            for line in (run / "stages" / stage / "metrics.jsonl").read_text().splitlines()]


def _scores(row: Path) -> dict:
    return {name: suite["metrics"]
            for name, suite in json.loads((row / "eval.json").read_text())["suites"].items()}


def _record(run, stage):
    entry = json.loads((run / "manifest.json").read_text())["stages"][stage]
    return {k: entry.get(k) for k in ("status", "gated", "gate", "config_sha256", "data_sha256")}


def differences(a: Path, b: Path) -> list[str]:
    """What differs between two finished runs of the recipe (empty when the resumed one equals the
    other)."""
    out = [] if _scores(a / "base") == _scores(b / "base") else ["base: gate scores"]
    for stage, name in (("0-sft", "sft"), ("1-rlhf", "rlhf")):
        if _metrics(a, stage) != _metrics(b, stage):
            out.append(f"{stage}: logged numbers")
        if (a / "stages" / stage / "hf/model.safetensors").read_bytes() != \
                (b / "stages" / stage / "hf/model.safetensors").read_bytes():
            out.append(f"{stage}: weights")
        if _scores(a / "stages" / stage) != _scores(b / "stages" / stage):
            out.append(f"{stage}: gate scores")
        if _record(a, name) != _record(b, name):
            out.append(f"{stage}: manifest record {_record(a, name)} vs {_record(b, name)}")
    return out


def test_killed_at_every_kind_of_moment_and_resumed_equals_uninterrupted(tmp_path, reward_model):
    straight, broken = tmp_path / "straight", tmp_path / "broken"
    run_to_end(straight, reward_model.url)
    outcome = kill_and_resume(broken, reward_model)

    stop = outcome["server_stop"]
    assert (stop.startswith(f"nemo-cascade: error: {reward_model.url}/")
            and "after 4 attempts" in stop), stop
    assert "stopped in step 4 of stage rlhf, state after step 3 saved in" in stop, stop
    stopped = outcome["stopped"]
    assert (stopped.startswith("nemo-cascade: stopped on request (time limit (test)) in step 4 of "
                               "stage rlhf, during generation; resumes from ")
            and "step_000003" in stopped), stopped
    assert 1 <= outcome["kept"] < PROMPTS_PER_STEP, outcome
    assert outcome["complete"] == PROMPTS_PER_STEP, outcome
    a, b = straight / "resume", broken / "resume"
    assert differences(a, b) == []
    assert not (b / "stages/1-rlhf/rollouts").exists(), \
        "a done stage's rollout checkpoints are removed"
    for stage, name in (("0-sft", "sft"), ("1-rlhf", "rlhf")):
        assert set(_scores(b / "stages" / stage)) == {"tiny-math", "tiny-ifeval"}
        assert _record(b, name)["status"] == "done" and _record(b, name)["gated"] is True
        assert not (b / "stages" / stage / "checkpoint").exists(), \
            "finished stages' checkpoints are removed"
    assert (json.loads((b / "manifest.json").read_text())["stages"]["rlhf"]["resumed_from"]
            .endswith("step_000003"))
    assert all(m["num_sequences"] for m in _metrics(b, "1-rlhf")), \
        "every RLHF step trains (dense RM scores)"
