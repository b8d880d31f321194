"""Generated prompt sets: a ``Data.source`` of the form ``synthetic:NAME`` or ``benchmark:NAME``
names rows made in code instead of a file. The core holds only this grammar and a registry; the sets
themselves are registered by whoever provides them (the demo sets:
``nemo_cascade.tooling.demo_data.register()``, which the ``nemo-cascade`` command calls before it
reads a config), so the training core carries no demo data.
"""
from __future__ import annotations

from typing import Callable

from ..config import Data
from .rows import DataError

SYNTHETIC_PREFIX, BENCHMARK_PREFIX = "synthetic:", "benchmark:"
GENERATED_PREFIXES = (SYNTHETIC_PREFIX, BENCHMARK_PREFIX)
REGISTERED_BY = ("nemo_cascade.tooling.demo_data.register() registers the demo ones; the "
                 "nemo-cascade command calls it")
"""What the one-line error names when nothing is registered at all (a process that skipped the
registration)."""

_SETS: dict[str, dict[str, Callable[..., list[dict]]]] = {p: {} for p in GENERATED_PREFIXES}
_FAMILIES: dict[str, dict[str, Callable[..., list[dict]]]] = {p: {} for p in GENERATED_PREFIXES}
_PREFERENCE: dict[str, dict[str, Callable[..., list[dict]]]] = {p: {} for p in GENERATED_PREFIXES}


def is_generated(source: str) -> bool:
    """Whether a ``Data.source`` names a generator (``synthetic:NAME``, ``benchmark:NAME``) rather
    than a file."""
    return source.startswith(GENERATED_PREFIXES)


def _split(source: str) -> tuple[str, str]:
    """``(prefix, name)`` of a generated source; ValueError for any other string (a registering
    module's bug)."""
    for prefix in GENERATED_PREFIXES:
        if source.startswith(prefix) and len(source) > len(prefix):
            return prefix, source[len(prefix):]
    raise ValueError(f"generated source {source!r}: expected one of {list(GENERATED_PREFIXES)} and "
                     "a name")


def _put(table: dict, source: str, fn: Callable) -> None:
    prefix, name = _split(source)
    # two providers of one name: the rows would depend on import order
    if table[prefix].get(name, fn) is not fn:
        raise ValueError(f"generated source {source!r} is already registered to another function")
    table[prefix][name] = fn


def register(source: str, fn: Callable[[str, int, int], list[dict]]) -> None:
    """Register a named set: ``source`` (``"synthetic:arithmetic"``) reads ``fn(split, size, seed)
    -> rows``."""
    _put(_SETS, source, fn)


def register_family(prefix: str, fn: Callable[[str, str, int, int], list[dict]]) -> None:
    """Register a parametrised family: every source starting with ``prefix`` (``"synthetic:rg/"``)
    reads ``fn(rest, split, size, seed) -> rows``, ``rest`` being the source after ``prefix`` (a
    task and options)."""
    _put(_FAMILIES, prefix, fn)


def register_preference(source: str, fn: Callable[[list[dict], str, int], list[dict]]) -> None:
    """Register a set's preference form: in a reward_model stage, ``source`` reads ``fn(rows, mode,
    seed) -> [{"uid", "prompt", "chosen", "rejected", ...}]`` of its generated rows."""
    _put(_PREFERENCE, source, fn)


def _unregistered(name: str, kind: str) -> DataError:
    return DataError(f"data.source: unknown {kind} set {name!r}; no {kind} sets are registered in "
                     f"this process ({REGISTERED_BY})")


def rows(data_cfg: Data) -> list[dict]:
    """The rows of a ``synthetic:NAME`` or ``benchmark:NAME`` source (deterministic in split, size
    and seed)."""
    prefix, name = _split(data_cfg.source)
    kind, sets, families = prefix.rstrip(":"), _SETS[prefix], _FAMILIES[prefix]
    if not sets and not families:
        raise _unregistered(name, kind)
    family = next((f for f in families if name.startswith(f)), None)
    if name not in sets and family is None:
        other = "".join(f" or {f}TASK" for f in families)
        raise DataError(f"data.source: unknown {kind} set {name!r}; expected one of "
                        f"{sorted(sets)}{other}")
    try:
        if family is not None:
            return families[family](name[len(family):], data_cfg.split, data_cfg.size,
                                    data_cfg.seed)
        return sets[name](data_cfg.split, data_cfg.size, data_cfg.seed)
    except ValueError as e:
        raise DataError(f"data.source {data_cfg.source}: {e}") from None


def preference_rows(data_cfg: Data, mode: str) -> list[dict]:
    """The preference rows of a generated source (its rows through its registered preference
    form)."""
    prefix, name = _split(data_cfg.source)
    kind, forms = prefix.rstrip(":"), _PREFERENCE[prefix]
    if not forms:
        raise _unregistered(name, kind)
    if name not in forms:
        raise DataError(f"data.source: {kind} set {name!r} has no preference pairs; expected one "
                        f"of {sorted(forms)}")
    return forms[name](rows(data_cfg), mode, data_cfg.seed)


def sft_pairs(rows: list[dict], mode: str = "no_think") -> list[tuple[list[dict], str]]:
    """``(prompt messages, response text)`` per row, for SFT on a synthetic task.

    no_think: ``"23 + 45 = 68. The answer is \\boxed{68}."``; think: the working goes inside
    ``<think>...</think>`` and the answer follows (the thinking format of §3.1.2).
    """
    if mode not in ("think", "no_think"):
        raise ValueError(f"mode must be 'think' or 'no_think', got {mode!r}")
    pairs = []
    for row in rows:
        # the other domains' sets (synthetic_domains) carry a reference response
        if "response" in row:
            response = row["response"]
            if mode == "think":
                response = f"<think>\nI follow the request exactly.\n</think>\n\n{response}"
            pairs.append(([{"role": "user", "content": row["prompt"]}], response))
            continue
        work, answer = row.get("solution", ""), row["answer"]
        final = f"The answer is \\boxed{{{answer}}}."
        if mode == "think":
            response = f"<think>\n{work}.\n</think>\n\n{final}"
        else:
            response = f"{work}. {final}" if work else final
        pairs.append(([{"role": "user", "content": row["question"]}], response))
    return pairs


__all__ = ["GENERATED_PREFIXES", "SYNTHETIC_PREFIX", "BENCHMARK_PREFIX", "is_generated", "register",
           "register_family", "register_preference", "rows", "preference_rows", "sft_pairs"]
