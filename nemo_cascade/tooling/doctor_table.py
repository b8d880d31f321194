"""The rows of ``nemo-cascade doctor``'s table and how the table is printed (tooling/doctor.py)."""

from __future__ import annotations

from dataclasses import dataclass

OK, FAIL, NA, WARN = "ok", "FAIL", "n/a", "warn"
"""A ``warn`` row does not fail the node: something runs slower, or is needed later than this
job."""


@dataclass(frozen=True)
class Row:
    status: str
    check: str
    detail: str
    fix: str = ""
    """One line: what to do about a FAIL (or a warn)."""


def one_line(e: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none), at most 300
    characters."""
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


def render(rows: list[Row], title: str) -> str:
    width = max(len(r.check) for r in rows)
    lines = [title, f"{'status':<6}  {'check':<{width}}  detail"]
    for r in rows:
        lines.append(f"{r.status:<6}  {r.check:<{width}}  {r.detail}")
        if r.status in (FAIL, WARN) and r.fix:
            lines.append(f"{'':<6}  {'':<{width}}  fix: {r.fix}")
    counts = {s: sum(r.status == s for r in rows) for s in (OK, FAIL, NA, WARN)}
    warned = f", {counts[WARN]} warn" if counts[WARN] else ""
    lines.append(f"{counts[OK]} ok, {counts[FAIL]} FAIL, {counts[NA]} n/a{warned}")
    return "\n".join(lines)


__all__ = ["Row", "OK", "FAIL", "NA", "WARN", "one_line", "render"]
