"""The forgetting gate as the cascade runs it: the same suites after every stage, regressions
checked, the report rebuilt (paper §4.1.1: "later stages do not erase earlier skills", T2 / T4–T8).

After each policy stage (but one with ``evaluate = false``: the first part of a paper stage split
into several, which gets no row) the colocated engine already serves the stage's final weights;
:class:`Gate` runs ``cfg.gate.suites`` on it with the paper's evaluation decoding (App. B) and
writes the stage directory's ``eval.json``; ``gate.mode`` picks the thinking mode (the unified
model's per-suite modes of T2, or thinking for every suite for the thinking-only models, App. B).
The colocated engine serves the rope scaling the actor trains with (config.json's), whatever YaRN
factor a suite asks for (App. B: 2; the 14B's SWE-bench 3): every row is evaluated alike, each
suite's eval.json records both factors, a mismatch is logged once, and ``nemo-cascade eval`` on the
stage directory evaluates it with the suites' own factors. The starting model is evaluated too
(``RUN_DIR/base/eval.json``) so the first stage has a row to be compared with. Suites scored by a
reward model (the RLHF win rate) need the cascade's RM: rows evaluated before it existed get that
column filled in once the RM stage has finished (the policy then still holds the weights of the row
before). Regressions (``evaluate.stage_scores.row_regressions``, by ``gate.rule``) are recorded in
the manifest and are logged or end the cascade.
"""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable

from nemo_cascade import config
from nemo_cascade.runtime import heartbeat, ranks, stop_request
from nemo_cascade.runtime.deadline import Deadline
from nemo_cascade.evaluate import stage_scores
from nemo_cascade.evaluate.runner import (EvalSettings, GateStopped, context_needed, prepare,
                                          run_suite)
from nemo_cascade.evaluate.eval_output import provenance, write_eval
from nemo_cascade.evaluate.row_progress import RowProgress
from nemo_cascade.runtime.faults import crash_point

log = logging.getLogger(__name__)

# stands in for the RM's URL while suites are prepared, before it is served
_UNSERVED = "http://127.0.0.1:1"


def _per_suite(items: tuple[str, ...], kind: type) -> dict:
    """``("SUITE=VALUE", ...)`` (gate.yarn, gate.max_input_tokens; checked by config validation) as
    a dict."""
    return {suite: kind(value) for suite, _, value in (item.partition("=") for item in items)}


class GateStop(RuntimeError):
    """The gate found regressions and ``gate.on_regression = stop``."""


class Gate:
    def __init__(self, cfg: config.Cascade, tokenizer):
        g = cfg.gate
        self.cfg = g
        self.settings = self.settings_for(cfg)
        pending = replace(self.settings, reward_model_url=_UNSERVED)
        self.prepared = {name: prepare(name, pending, tokenizer) for name in g.suites}
        self.tolerance = config.tolerances(g)
        # suites whose YaRN factor the colocated engine does not serve, logged once
        self.warned: set[str] = set()
        # how long a finished item waits for its write
        self.flush_seconds = cfg.rollout_checkpoint_seconds

    @staticmethod
    def settings_for(cfg: config.Cascade) -> EvalSettings:
        """The evaluation settings of ``cfg.gate``: App. B decoding, its thinking mode (``suite``:
        each suite's own, T2's for the unified model) and per-suite YaRN factors and input
        limits."""
        g = cfg.gate
        return EvalSettings(samples=g.samples or None, max_tokens=g.max_tokens or None,
                            temperature=g.temperature,
                            top_p=g.top_p, limit=g.limit, seed=cfg.seed, template=cfg.chat_style,
                            progress=False,
                            mode=None if g.mode == "suite" else g.mode,
                            yarn=_per_suite(g.yarn, float),
                            max_input_tokens=_per_suite(g.max_input_tokens, int),
                            chunk_items=g.chunk_items, judge_url=g.judge_url)

    @property
    def enabled(self) -> bool:
        return bool(self.prepared)

    def context_tokens(self) -> int:
        """The engine context the suites need: the longest prompt plus the largest response
        budget."""
        return context_needed(self.prepared.values())

    def evaluate(self, engine, out_dir: Path, checkpoint: str, rm_url: str = "",
                 only_pairwise: bool = False,
                 should_stop: Callable[[], bool] | None = None) -> None:
        """Run the suites on the weights ``engine`` serves (those of the folder ``checkpoint``);
        write ``out_dir/eval.json`` (merged with what is there). Pairwise suites run only when an RM
        is served (``rm_url``). Finished chunks and suites are kept in ``out_dir/eval_partial``
        until then (evaluate/row_progress.py): a row stopped by ``should_stop`` (``GateStopped``) or
        killed resumes there."""
        settings = replace(self.settings, reward_model_url=rm_url)
        names = [n for n, p in self.prepared.items()
                 if (rm_url or not p.suite.pairwise) and (p.suite.pairwise or not only_pairwise)]
        if not names:
            return
        progress = RowProgress(out_dir, checkpoint, self.flush_seconds)
        # where a server is reached is not what it computes: a requeued job's judge may be on
        # another host
        key = {**asdict(settings), "reward_model_url": bool(rm_url),
               "judge_url": bool(settings.judge_url)}
        results = {}
        for name in names:
            results[name] = progress.suite(name, key)
            if results[name] is None:
                results[name] = run_suite(engine, self.prepared[name], settings, progress,
                                          should_stop).to_json()
                progress.save_suite(name, key, results[name])
            decoding = results[name]["decoding"]
            if (decoding["engine_yarn_factor"] != decoding["yarn_factor"]
                    and name not in self.warned):
                self.warned.add(name)
                # The colocated engine serves the rope the actor trains with; App. B's factor needs
                # `nemo-cascade eval` on the stage directory (docs/evaluation.md). Rows stay
                # comparable.
                log.warning("gate %s: %s evaluated with YaRN %g (the training engine's), not the "
                            "suite's %g",
                            out_dir.name, name, decoding["engine_yarn_factor"],
                            decoding["yarn_factor"])
            crash_point("evaluate")
            log.info("gate %s: %s = %.3f", out_dir.name, name,
                     results[name]["metrics"][f"avg@{results[name]['decoding']['samples']}"])
        if ranks.is_main():
            write_eval(out_dir, results, provenance(checkpoint, checkpoint))
        ranks.barrier()
        progress.remove()

    def evaluate_row(self, engine, row: Path, weights: str, rm_url: str, only_pairwise: bool,
                     run_dir: Path,
                     deadline: Deadline) -> None:
        """:meth:`evaluate` on one row, stopping between engine steps or chunks of items when a stop
        request (stop_request.py) or the job's end (``deadline``) comes: the finished items are kept
        and the run ends as after a training step (``StopRequested``, exit 75)."""
        def stop_due() -> bool:  # asked between engine steps and chunks: the row advances
            heartbeat.advance()
            return stop_request.requested(run_dir) or deadline.due()

        try:
            with heartbeat.phase("gate", f"gate row {row.name}"):
                self.evaluate(engine, row, weights, rm_url, only_pairwise, stop_due)
        except GateStopped as e:
            end = time.strftime("%F %T", time.localtime(deadline.end or 0))
            why = (f"on request ({stop_request.reason(run_dir)})"
                   if stop_request.requested(run_dir) else f"before the job's end at {end}")
            raise stop_request.StopRequested(
                f"stopped {why} in the gate of {row.name}, {e}; its finished items are kept in "
                f"{row / 'eval_partial'}; run the same command again to continue") from None

    def check(self, row_dirs: list[Path], current: Path) -> list[stage_scores.Regression]:
        """Regressions of ``current``'s eval.json against the rows before it (``row_dirs``, in
        order), by ``gate.rule``."""
        return stage_scores.row_regressions(row_dirs, current, self.tolerance, self.cfg.rule,
                                            self.cfg.alpha, self.cfg.sigmas)


__all__ = ["Gate", "GateStop"]
