"""Evaluation outputs: ``eval.json`` (everything), ``eval.md`` (one table), ``eval.svg`` (one bar
chart).

``eval.json`` holds, per suite, the resolved decoding (temperature, top-p, K, max tokens, mode,
template, seed, engine context), the data file (path, sha256, items, limit), the metrics, the
timings, every item's responses / scores / values / finish reasons, and the provenance (checkpoint,
git SHA and dirty flag, package versions, time). Writing into a folder that already has an
``eval.json`` keeps the suites this run did not evaluate, so a stage directory accumulates one file
for all suites (``stages/<k>-<name>/eval.json``, docs/cascade.md). The plot is SVG written by hand:
no plotting dependency.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping
from xml.sax.saxutils import escape

from ..errors import CascadeError
from ..runtime.files import read_json, write_text_atomically
from ..runtime.provenance import git_state, versions
from .suites import EvalError
from ..rewards.domains import DOMAINS

def provenance(checkpoint: str, model: str) -> dict:
    return {"checkpoint": str(checkpoint), "model": str(model),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "git": git_state(), "versions": versions()}


def write_eval(out_dir: Path, results: Mapping[str, dict], meta: dict) -> Path:
    """Merge ``results`` (suite name → ``SuiteResult.to_json()``) into ``out_dir/eval.json`` and
    rewrite the markdown table and the plot from the merged file. Returns the eval.json path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "eval.json"
    old = read_eval(path, missing_ok=True)
    suites = {**old.get("suites", {}),
              **{name: {**r, "provenance": meta} for name, r in results.items()}}
    doc = {**meta, "suites": suites}
    write_text_atomically(path, json.dumps(doc, indent=1, ensure_ascii=False))
    write_text_atomically(out_dir / "eval.md", markdown(doc))
    write_text_atomically(out_dir / "eval.svg", svg_bars(doc))
    return path


def read_eval(path: Path, *, missing_ok: bool = False,
              error: type[CascadeError] = EvalError) -> dict:
    """The one reader of an eval.json (``{}`` for a missing file if ``missing_ok``): a JSON object,
    or a one-line ``error`` naming the file (the run's report passes its ReportError)."""
    return read_json(path, "an eval.json (the suites' results, written by write_eval)",
                     missing_ok=missing_ok,
                     error=error)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _notes(r: dict) -> str:
    m = r["metrics"]
    notes = []
    # the domain's own notes (IFEval's other numbers, SWE's Eq. 2 mean)

    domain = DOMAINS.get(r["domain"])
    if domain is not None and domain.report_notes is not None:
        notes += domain.report_notes(m)
    if m.get("bt_win_prob") is not None:
        notes.append(f"BT P(win) {_pct(m['bt_win_prob'])}")
    if m["truncated"] is not None:
        notes.append(f"truncated {_pct(m['truncated'])}%, mean length "
                     f"{m['mean_response_tokens']:.0f} tokens")
    if m["too_long"]:
        notes.append(f"{m['too_long']} prompts too long (scored 0)")
    return "; ".join(notes)


def markdown(doc: dict) -> str:
    """One row per suite: avg@K ± standard error and pass@K in %, with the decoding that produced
    them."""
    lines = [f"# Evaluation of `{doc.get('checkpoint', '?')}`", "",
             "Scores in %: avg@K = mean over items of the mean over K samples (pass@1 estimate); ± "
             "= standard error over items; pass@K = Chen et al. unbiased estimator. Decoding per "
             "paper App. B unless stated in the row.", "",
             "| suite | domain | mode | K | T / top-p | max tokens | items | metric | avg@K | ± | "
             "pass@K | s | notes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in doc["suites"].items():
        d, m, k = r["decoding"], r["metrics"], r["decoding"]["samples"]
        lines.append(f"| {name} | {r['domain']} | {d['mode']} | {k} | {d['temperature']:g} / "
                     f"{d['top_p']:g} | {d['max_tokens']} | {r['data']['items']} | {r['metric']} | "
                     f"{_pct(m[f'avg@{k}'])} | {_pct(m['stderr'])} | {_pct(m[f'pass@{k}'])} | "
                     f"{r['seconds']['total']:.0f} | {_notes(r)} |")
    git = doc.get("git", {})
    lines += ["", f"git {git.get('sha', '?')[:12]}{' (dirty)' if git.get('dirty') else ''}; "
              + ", ".join(f"{k} {v}" for k, v in doc.get("versions", {}).items()), ""]
    return "\n".join(lines)


def svg_bars(doc: dict, width: int = 720) -> str:
    """Horizontal bars of avg@K (%) per suite with ±1 standard-error whiskers."""
    rows = [(name, r["metrics"][f"avg@{r['decoding']['samples']}"], r["metrics"]["stderr"],
             r["decoding"]["samples"])
            for name, r in doc["suites"].items()]
    left, right, row_h, top = 120, 70, 26, 40
    plot_w = width - left - right
    height = top + row_h * len(rows) + 30
    x = lambda v: left + plot_w * max(0.0, min(1.0, v))  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" '
             f'font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{left}" y="20" '
             f'font-size="14">{escape(str(doc.get("checkpoint", "")))[-80:]}: avg@K (%)</text>']
    for tick in range(0, 101, 20):
        parts.append(f'<line x1="{x(tick / 100):.1f}" y1="{top - 6}" x2="{x(tick / 100):.1f}" '
                     f'y2="{top + row_h * len(rows)}" stroke="#ddd"/>')
        parts.append(f'<text x="{x(tick / 100):.1f}" y="{top + row_h * len(rows) + 16}" '
                     f'text-anchor="middle">{tick}</text>')
    for i, (name, score, se, k) in enumerate(rows):
        y = top + i * row_h
        parts.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(name)} '
                     f'(K={k})</text>')
        parts.append(f'<rect x="{left}" y="{y + 4}" width="{x(score) - left:.1f}" '
                     f'height="{row_h - 8}" fill="#4a7ab5"/>')
        if se > 0:
            parts.append(f'<line x1="{x(score - se):.1f}" y1="{y + row_h / 2}" '
                         f'x2="{x(score + se):.1f}" y2="{y + row_h / 2}" stroke="black"/>')
        parts.append(f'<text x="{x(score) + 6:.1f}" y="{y + 15}">{_pct(score)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


__all__ = ["provenance", "write_eval", "read_eval", "markdown", "svg_bars"]
