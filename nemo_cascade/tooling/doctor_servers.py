"""Doctor's server rows: the reward models and judges this job needs now, waited for, and the ones
it needs later, only reported.

A job needs the servers of the stage it starts with (``--stage NAME`` for a ``launch`` job;
otherwise the first stage the run's manifest does not mark done) and the gate's reward model. Those
are waited for (``--server-wait``: 5 s by hand, 600 s in a job's node check, slurm/node.sh), with a
line every :data:`PROGRESS_EVERY_S` seconds: a serve job may still be loading its model, or
requeueing. A server only a later stage uses gets a ``warn`` row when it does not answer: it may be
started before that stage, and the run itself waits for it then.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.tooling.doctor_table import FAIL, NA, OK, WARN, Row, one_line
from nemo_cascade.rewards import endpoints

SERVER_WAIT_S = 5.0
"""How long doctor waits for a server this job needs now (its URL file to appear, then ``/health``),
unless told (``--server-wait``)."""
LATER_WAIT_S = 5.0
"""How long a server needed only later is probed: the moment's answer, not a wait."""
PROGRESS_EVERY_S = 30.0


def job_stages(
    cfg: config.Cascade, only: str = ""
) -> tuple[list[config.Stage], list[config.Stage]]:
    """(now, later): the stage this job starts with, and the stages it may reach after it. ``only``
    (``--stage NAME``, a ``launch`` job runs one stage): that stage, nothing later."""
    from nemo_cascade.cascade.lineage import stage_status

    if only:
        return [config.stage_by_name(cfg, only)], []
    status, _ = stage_status(Path(cfg.run_root) / cfg.name)
    todo = [s for s in cfg.stages if status.get(s.name) != "done"]
    return todo[:1], todo[1:]


def _urls(stages: list[config.Stage]) -> dict[str, list[str]]:
    """URL → the fields that name it: the served models ``stages`` score with, as the run itself
    probes them (``preflight.served_endpoints``: the fields their domains read)."""
    from nemo_cascade.cascade.preflight import served_endpoints

    urls: dict[str, list[str]] = {}
    for s in stages:
        for field, url in served_endpoints(s):
            urls.setdefault(url, []).append(f"stages.{s.name}.reward.{field}")
    return urls


def check_servers(
    cfg: config.Cascade | None, only: str = "", wait: float | None = None
) -> list[Row]:
    """A row per served model the recipe names: waited for (``wait`` seconds, default
    :data:`SERVER_WAIT_S`) when this job needs it now, reported when only a later stage does."""
    if cfg is None:
        return [Row(NA, "reward / judge servers", "no recipe given")]
    now_stages, later_stages = job_stages(cfg, only)
    now = _urls(now_stages)
    if cfg.gate.reward_model_url and cfg.gate.suites:  # every gate row scores the pairwise suites
        now.setdefault(cfg.gate.reward_model_url, []).append("gate.reward_model_url")
    if cfg.gate.judge_url and cfg.gate.suites:  # every gate row asks it (arena-hard)
        now.setdefault(cfg.gate.judge_url, []).append("gate.judge_url")
    later = {url: fields for url, fields in _urls(later_stages).items() if url not in now}
    wait = SERVER_WAIT_S if wait is None else wait
    rows = [_probe(url, fields, wait) for url, fields in now.items()]
    rows += [_probe(url, fields, LATER_WAIT_S, later=True) for url, fields in later.items()]
    served = [
        f"{s.name} ← {s.reward.reward_model_stage}"
        for s in now_stages + later_stages
        if config.samples_on_policy(s) and s.reward.reward_model_stage
    ]
    if served:
        rows.append(
            Row(NA, "reward model (served)", f"served by the cascade itself: {', '.join(served)}")
        )
    if rows:
        return rows
    if not now_stages:
        return [Row(NA, "reward / judge servers", "every stage is done: the job needs no server")]
    return [Row(NA, "reward / judge servers", "the recipe names no reward-model or judge URL")]


class _Progress:
    """``endpoints.probe``'s sleep, saying every :data:`PROGRESS_EVERY_S` seconds what is
    awaited."""

    def __init__(self, spec: str, fields: list[str], wait: float):
        self.what, self.wait = f"{spec} ({', '.join(fields)})", wait
        self.start = self.said = time.monotonic()

    def __call__(self, seconds: float) -> None:
        time.sleep(seconds)
        now = time.monotonic()
        if now - self.said >= PROGRESS_EVERY_S:
            self.said = now
            print(
                f"nemo-cascade doctor: waiting for {self.what}: {now - self.start:.0f} of "
                f"{self.wait:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def _probe(spec: str, fields: list[str], wait: float, later: bool = False) -> Row:
    """``/health`` of a URL, or of the URL a ``file:PATH`` names once the file appears
    (rewards/endpoints.py, as the run probes it), within ``wait`` seconds."""
    judge = all(f.endswith("judge_url") for f in fields)
    check, serve = (
        ("judge server", "vllm serve MODEL")
        if judge
        else ("reward-model server", "vllm serve MODEL --runner pooling")
    )
    try:
        url = endpoints.probe(
            spec,
            f"a server started by `{serve}`",
            wait=wait,
            file_wait=wait,
            poll=min(2.0, wait),
            sleep=_Progress(spec, fields, wait),
        )
    except (endpoints.EndpointError, ValueError) as e:
        if later:
            return Row(
                WARN,
                check,
                f"needed later ({', '.join(fields)}), not answering now: " f"{one_line(e)}",
                f"start it before that stage ({serve})",
            )
        return Row(FAIL, check, one_line(e), f"start it ({serve}) or correct {fields[0]}")
    return Row(OK, check, f"{url}/health answers ({', '.join(fields)})")


__all__ = ["check_servers", "job_stages", "SERVER_WAIT_S"]
