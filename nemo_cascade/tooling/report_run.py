"""What the cascade report shows, read from a run directory's files alone: the stages with their
status, the evaluated rows of the forgetting matrix and each stage's headline training curve
(``report.py`` renders them; ``compare.py`` reads several runs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from nemo_cascade.config import ON_POLICY_KINDS
from nemo_cascade.errors import CascadeError
from nemo_cascade.evaluate.eval_output import read_eval
from nemo_cascade.evaluate.paired import PairedTest, item_values, paired_test
from nemo_cascade.evaluate.stage_scores import scores
from nemo_cascade.runtime.files import read_json
from nemo_cascade.cascade.metrics import metric_rows
from nemo_cascade.cascade.repair import inserted_repairs

# The headline training number of each stage kind: what the stage optimises (GRPO) or fits (SFT,
# RM).
HEADLINE = {"grpo": "reward_mean", "distill": "reverse_kl", "sft": "loss",
            "reward_model": "accuracy"}
WINDOW = 10  # steps averaged at each end of a stage in the summary table


class ReportError(CascadeError, ValueError):
    """A run directory the report cannot read; the message names the file."""


@dataclass(frozen=True)
class StageInfo:
    index: int
    name: str
    kind: str
    domain: str | None
    """The reward domain; None for SFT / reward-model stages, whose `domain` means nothing."""
    steps: int
    """Planned: the config's, or for a stage given in epochs the count the manifest recorded at its
    start."""
    status: str
    seconds: float | None
    gate: dict
    dir: Path
    evaluate: bool = True  # Stage.evaluate: False = no gate after it, so no row
    epochs: float = 0.0    # Stage.epochs: the stage's length before it starts (steps still 0)
    teachers: dict = field(default_factory=dict)  # a distill stage's, as its manifest entry records
    inserted_by: str = ""  # the stage whose gate inserted this one (gate.on_regression = repair)


@dataclass(frozen=True)
class Run:
    name: str
    git_sha: str
    stages: list[StageInfo]
    history: list[tuple[str, dict[str, tuple[float, float]]]]
    """(row label, suite → (avg@K, stderr)), base first."""
    suite_domain: dict[str, str]
    row_domain: dict[str, str | None]
    """Row label → the domain whose suites that row's stage trained on."""
    curves: list[tuple[str, list[int], list[float]]]
    """Per stage: (headline metric, steps, values); see read_curve."""
    items: dict[str, dict[str, tuple[dict[str, float], bool]]] = field(default_factory=dict)
    """Row label → suite → :func:`.paired.item_values`."""

    def tests(self) -> list[dict[str, PairedTest]]:
        """Per row of ``history``: ``suite → paired test against the latest earlier row with the
        suite`` (the rows :func:`.stage_scores.deltas` compares), on the items both rows scored;
        none where they share no item (an eval.json without records)."""
        last, out = {}, []
        for label, _ in self.history:
            row, tests = self.items.get(label, {}), {}
            for suite, values in row.items():
                test = paired_test(last[suite], values) if suite in last else None
                if test is not None and test.items:
                    tests[suite] = test
            out.append(tests)
            last.update(row)
        return out


def _eval_row(path: Path, suite_domain: dict[str, str]
              ) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[dict[str, float], bool]]]:
    """``(suite → (avg@K, stderr), suite → per-item values)`` of one eval.json."""
    doc = read_eval(path, error=ReportError)
    try:
        suite_domain.update({s: r["domain"] for s, r in doc["suites"].items()})
        return scores(doc), {s: item_values(r) for s, r in doc["suites"].items()}
    except (KeyError, TypeError, AttributeError) as e:
        detail = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise ReportError(f"{path}: not an eval.json ({detail})") from None


def _domains(stage: dict) -> str:
    """A GRPO stage's reward domains as shown: ``math``, or ``ifeval+math+code`` for one that mixes
    sources of several (``Stage.extra_data`` with ``Data.domain``)."""
    own = stage.get("domain", "math")
    extra = [d.get("domain") or own for d in stage.get("extra_data") or []]
    return "+".join(dict.fromkeys([own, *extra]))


def trains_domain(domains: str | None, domain: str) -> bool:
    """Whether a stage of ``domains`` (``_domains``' form) trains on ``domain``."""
    return domains is not None and domain in domains.split("+")


def _stages(run_dir: Path, config: dict, manifest: dict) -> list[StageInfo]:
    """The configured stages in order, with the manifest's status; a stage the manifest lacks is
    pending."""
    try:
        out = []
        inserted = {repair: flagged for flagged, repair in inserted_repairs(manifest).items()}
        for k, s in enumerate(config["stages"]):
            entry = manifest.get("stages", {}).get(s["name"], {})
            kind, seconds, gate = s.get("kind", "grpo"), entry.get("seconds"), entry.get("gate")
            domains = _domains(s) if kind in ON_POLICY_KINDS else None
            teachers = entry.get("teachers")
            out.append(StageInfo(k, s["name"], kind, domains,
                                 int(entry.get("steps") or s.get("steps", 0)),
                                 str(entry.get("status", "pending")),
                                 float(seconds) if isinstance(seconds, (int, float)) else None,
                                 gate if isinstance(gate, dict) else {},
                                 run_dir / "stages" / f"{k}-{s['name']}",
                                 bool(s.get("evaluate", True)), float(s.get("epochs", 0.0)),
                                 teachers if isinstance(teachers, dict) else {},
                                 inserted.get(s["name"], "")))
        return out
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        detail = f"missing key {e}" if isinstance(e, KeyError) else str(e)
        raise ReportError(f"{run_dir / 'config.json'} / manifest.json: unexpected stages "
                          f"({detail})") from None


def load_run(run_dir: Path) -> Run:
    """Everything the report shows, read from ``run_dir``; raises :class:`ReportError` naming a bad
    file."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        what = "not a directory" if run_dir.exists() else "no such run directory"
        raise ReportError(f"{run_dir}: {what}")
    manifest = read_json(run_dir / "manifest.json", "the run's manifest", error=ReportError)
    config = read_json(run_dir / "config.json", "the run's resolved config", error=ReportError)
    stages = _stages(run_dir, config, manifest)
    suite_domain: dict[str, str] = {}
    history, row_domain, items = [], {}, {}
    rows = [("base", run_dir / "base" / "eval.json", None)]
    # a stage without an eval.json (pending, an RM) has no row
    rows += [(s.name, s.dir / "eval.json", s.domain) for s in stages]
    for label, path, domain in rows:
        if path.is_file():
            row, items[label] = _eval_row(path, suite_domain)
            history.append((label, row))
            row_domain[label] = domain
    return Run(str(manifest.get("name", run_dir.name)), str(manifest.get("git_sha", "")), stages,
               history,
               suite_domain, row_domain, [read_curve(s) for s in stages], items)


def finite_number(row: dict, key: str) -> float | None:
    value = row.get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def read_curve(stage: StageInfo) -> tuple[str, list[int], list[float]]:
    """``(metric, steps, values)`` of the stage's headline metric from its metrics.jsonl (empty when
    absent)."""
    key = HEADLINE.get(stage.kind, "loss")
    steps, values = [], []
    for row in metric_rows(stage.dir / "metrics.jsonl", missing_ok=True, error=ReportError):
        value = finite_number(row, key)
        if value is not None:
            step = row.get("step")
            steps.append(step if isinstance(step, int) else len(steps))
            values.append(value)
    return key, steps, values


__all__ = ["HEADLINE", "WINDOW", "ReportError", "StageInfo", "Run", "load_run", "read_curve",
           "finite_number", "trains_domain"]
