"""Prompt sets: read a ``Data`` source (a generated set, ``synthetic:NAME`` or ``benchmark:NAME``,
registered in :mod:`.generated`; or a jsonl/parquet file) into templated, tokenised prompts and SFT
examples; :class:`~.prompt_stream.PromptStream` serves prompts in a deterministic, resumable order.

jsonl rows (one JSON object per line, blank lines skipped):

- RL prompts: the stage domain's schema (:mod:`.schemas`: the released datasets' fields, e.g.
  ``problem`` + ``answer`` for math, ``prompt`` + ``instruction_id_list`` + ``kwargs`` for IF), or
  the project's own shape: the conversation (``"question"``/``"prompt"`` or ``"messages"``) plus
  ``"label"`` (any JSON value);
- optional ``"uid"`` (string or integer; default ``FILE:LINE``);
- SFT: the conversation plus ``"response"`` (a string), or ``"messages"`` ending with the assistant
  turn to learn; tool conversations (``tools``, ``tool_calls``, ``tool`` turns) as :mod:`.sft_rows`
  describes. SFT files are tokenized once into a cache, in shares over the ranks
  (:mod:`.sft_cache`); so are RL prompt files (:mod:`.prompt_cache`).

A malformed row raises :class:`DataError` with one line naming the file, the line and the expected
field; every loader may instead skip and count up to ``Data.max_bad_rows`` of them
(``PromptList.bad_rows``).
"""
from __future__ import annotations

import bisect
import itertools
import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from ..config import Data
from ..types import Prompt
from . import prompt_cache, sft_cache
from .chat import render
from .generated import is_generated, rows as generated_rows, sft_pairs
from .rows import DataError, read_jsonl
from .schemas import RowSchema
from .prompt_cache import user_text
from .prompt_cache import encode as _encode
from .prompt_stream import PromptStream
from .sft_rows import answer_mode, parse_sft_row, sft_segments

log = logging.getLogger(__name__)


class PromptList(list):
    """``list[Prompt]`` (or of SFT examples) that also reports what loading dropped."""

    dropped_too_long: int = 0
    """Rows whose templated prompt exceeded ``max_prompt_tokens``."""
    dropped_too_short: int = 0
    """Rows whose templated prompt is shorter than ``Data.min_prompt_tokens`` (SWE RL: 8K, §4.7)."""
    dropped_no_context: int = 0
    """SWE rows with localized candidate files whose ground-truth files alone do not fit
    ``max_prompt_tokens`` or number more than ``Data.swe_max_files`` (§4.7.1; a row whose noisy
    files do not fit falls back to the ground-truth-only prompt)."""
    bad_rows: int = 0
    """Rows skipped because they fit no schema of the domain or their label failed its check."""
    dropped_other_mode: int = 0
    """SFT rows whose learned answer is not in ``Data.keep_mode``."""
    alternate: Optional[list] = None
    """``mode="half"`` only: the same rows templated in no_think mode, index-aligned with this list
    (which holds their think templatings). :class:`PromptStream` alternates between the two
    (§4.3.2)."""

    def extend_with(self, other: "PromptList", times: int = 1, part: Sequence[int] = ()) -> None:
        """Append another source's prompts (a stage mixing several, ``Stage.extra_data``), with its
        counts and its no_think twins; ``times`` copies of them (``Data.repeat``), then the rows at
        indices ``part`` once more (a source's share of a pool, ``Data.share``), each copy after
        the first with uids of its own (``<uid>@copy2``, ...: the epoch filter tracks rows by
        uid)."""
        if self and (self.alternate is None) != (other.alternate is None):
            raise ValueError("cannot mix half-half prompt lists with single-mode ones")
        picks = [(n, i) for n in range(1, times + 1) for i in range(len(other))]
        picks += [(times + 1, i) for i in part]

        def listed(prompts):  # the prompts themselves, then copies renamed by uid
            return [replace(prompts[i], uid=f"{prompts[i].uid}@copy{n}") if n > 1 else prompts[i]
                    for n, i in picks]

        if other.alternate is not None:
            self.alternate = (self.alternate or []) + listed(other.alternate)
        self.extend(listed(other))
        # once, not per copy
        for count in ("dropped_too_long", "dropped_too_short", "dropped_no_context", "bad_rows"):
            setattr(self, count, getattr(self, count) + getattr(other, count))


POOL_LIMIT = 16
"""A pool built to its sources' shares holds at most this many times their rows: a large source
given a small share would otherwise multiply the others' rows without bound."""


def pool_by_share(parts: Sequence[PromptList], shares: Sequence[float], keys: Sequence[str],
                  names: Sequence[str]) -> PromptList:
    """One prompt pool in which ``parts[i]`` holds ``shares[i]`` of the rows (``Data.share``): the
    smallest such pool holding every row of every part, each part in whole copies and then a part
    of one, drawn with ``random.Random(keys[i])``. DataError (one line naming ``names[i]``) for an
    empty part or a pool over :data:`POOL_LIMIT` times the parts' rows."""
    sizes = [len(part) for part in parts]
    for name, n in zip(names, sizes):
        if not n:
            raise DataError(f"{name}: no prompts to give a share of the pool")
    pool = max(n / share for n, share in zip(sizes, shares))
    if pool > POOL_LIMIT * sum(sizes):
        worst = min(range(len(parts)), key=lambda i: shares[i] / sizes[i])
        raise DataError(f"{names[worst]}.share: {shares[worst]:g} of the pool for its "
                        f"{sizes[worst]:,} rows makes a pool of {pool:,.0f}, over {POOL_LIMIT} "
                        f"times the stage's {sum(sizes):,} rows; give it a larger share or fewer "
                        "rows (Data.size)")
    out = PromptList()
    for part, n, share, key in zip(parts, sizes, shares, keys):
        times, rest = divmod(max(n, round(share * pool)), n)
        out.extend_with(part, times, sorted(random.Random(key).sample(range(n), rest)))
    return out


# ------------------------------------------------------------------------------------------ public

def load_prompts(data_cfg: Data, tokenizer, mode: str, domain: RowSchema, max_prompt_tokens: int,
                 style: str = "cascade1", validate_label: Optional[Callable[[Any], None]] = None,
                 cache_fallback: Optional[Path] = None):
    """Templated, tokenised prompts of ``data_cfg`` (generation prompt included). Prompts longer
    than ``max_prompt_tokens`` are dropped; their count is ``result.dropped_too_long`` (and logged);
    so are prompts shorter than ``data_cfg.min_prompt_tokens`` (``result.dropped_too_short``).
    ``mode="half"`` (the unified model's half-half batches, §4.3.2) templates every row in both
    modes: the result holds the think prompts and ``result.alternate`` the no_think ones,
    index-aligned; a row is kept only if both templatings fit either limit (the flags, and
    cascade2's empty think block, differ in length). ``domain``: the reward domain whose rows these
    are (``rewards.get_domain``: its adapter and wording). ``validate_label`` (the domain's,
    ``rewards.VALIDATORS``) rejects a malformed label here, naming its file and line, rather than
    mid-training (docs/rewards.md). SWE rows with localized candidate files get their §4.7.1 prompt
    built here, for this ``max_prompt_tokens`` (:mod:`.swe_prompts`): a stage with a longer limit
    shows the same instance with more noisy files, and the counts the loader (and preflight) report
    are those of the real prompts. Rows that fit no such prompt are counted in
    ``result.dropped_no_context``. Math prompts are phrased as the math suites phrase theirs
    (``data_cfg.math_instruction``, :mod:`.math_prompt`).

    A file source with ``data_cfg.cache`` is read in shares over the ranks and tokenized once into
    the data cache (:mod:`.prompt_cache`: beside the data, else under ``cache_fallback``); the
    result is then a :class:`~.prompt_cache.CachedPrompts` that builds the same ``Prompt`` objects
    when they are drawn. Otherwise (and for generated sources) every rank reads and tokenizes the
    whole source (a ``PromptList``)."""
    if data_cfg.cache and not is_generated(data_cfg.source):
        cached = prompt_cache.load(data_cfg, tokenizer, mode, domain, max_prompt_tokens, style,
                                   validate_label, cache_fallback)
        if cached is not None:
            return _cached_prompts(data_cfg, max_prompt_tokens, *cached)
    out = PromptList()
    # (position in the source, one-line message): unreadable lines first
    bad: list[tuple[int, str]] = []
    rows = _source_rows(data_cfg, bad)
    modes = ("think", "no_think") if mode == "half" else (mode,)
    budget = (prompt_cache.swe_budget(data_cfg, tokenizer, modes, style, max_prompt_tokens)
              if domain.prompt_budget else None)
    items = [item for _, item in prompt_cache.adapted_rows(rows, domain, data_cfg, validate_label,
                                                           budget, bad)]
    # SWE rows whose §4.7.1 prompt fits no context
    out.dropped_no_context = sum(item is None for item in items)
    items = [item for item in items if item is not None]
    bad.sort(key=lambda b: b[0])  # the first bad row in file order is the one an error names
    out.bad_rows = len(bad)
    check_bad_rows(data_cfg, len(bad), bad[0][1] if bad else None)
    if mode == "half":
        out.alternate = []
    for uid, messages, label in items:
        ids = [_encode(tokenizer, render(messages, m, style)) for m in modes]
        if not _fits(out, [len(x) for x in ids], data_cfg.min_prompt_tokens, max_prompt_tokens):
            continue
        text = user_text(messages)  # the code-switch rule's input
        variants = [Prompt(prompt_tokens=x, domain=domain.name, label=label, mode=m, uid=uid,
                           user_text=text)
                    for x, m in zip(ids, modes)]
        out.append(variants[0])
        if mode == "half":
            out.alternate.append(variants[1])
    _report(data_cfg, out, max_prompt_tokens, out.dropped_no_context)
    return out


def _source_rows(data_cfg: Data, bad: list[tuple[int, str]]) -> list[tuple[int, str, dict]]:
    """``(position, where, row)`` for every row of the source: a generated set's, or a file's
    (its unreadable lines go to ``bad``)."""
    if is_generated(data_cfg.source):
        return [(i, f"{data_cfg.source}#{i}", row)
                for i, row in enumerate(generated_rows(data_cfg))]
    path = Path(data_cfg.source)
    return [(lineno, f"{path}:{lineno}", row)
            for lineno, row in read_jsonl(path, data_cfg.size, bad)]


def _cached_prompts(data_cfg: Data, limit: int, every, manifest: dict):
    """The rows of a cached prompt set within the length limits, with the in-memory path's counts
    and report."""
    out = _cached_rows(data_cfg, limit, manifest, every.lengths(), every)
    out.dropped_no_context = sum(part["no_context"] for part in manifest["parts"])
    _report(data_cfg, out, limit, out.dropped_no_context)
    return out


def _cached_rows(data_cfg: Data, limit: int, manifest: dict, lens: np.ndarray, every):
    """The rows of a cache entry (``every``: a :class:`~.prompt_cache.CachedPrompts` or
    :class:`~.sft_cache.TokenizedSFT`) whose prompts (``lens``: ``[rows, templatings]`` token
    counts) are within the length limits, with the drops and bad rows counted (the bad-row check
    applied)."""
    parts = manifest["parts"]
    count = sum(part["bad_rows"] for part in parts)
    check_bad_rows(data_cfg, count,
                   next((part["first_bad"] for part in parts if part["first_bad"]), None))
    too_long, too_short = lens.max(axis=1) > limit, lens.min(axis=1) < data_cfg.min_prompt_tokens
    out = every.kept(np.flatnonzero(~too_long & ~too_short))
    out.dropped_too_long = int(too_long.sum())
    out.dropped_too_short = int((too_short & ~too_long).sum())
    out.bad_rows = count
    return out


def _fits(out: PromptList, lengths: list[int], floor: int, limit: int) -> bool:
    """Whether prompts of these token counts (a row's templatings) are within ``[floor, limit]``;
    counts a drop on ``out``."""
    if max(lengths) > limit:
        out.dropped_too_long += 1
        return False
    if min(lengths) < floor:
        out.dropped_too_short += 1
        return False
    return True


def _sft_items(data_cfg: Data, mode: str, bad: list) -> list[tuple[list[dict], Optional[list]]]:
    """(messages ending with the turn to learn, tools) per row of an SFT source, the whole file read
    in memory (the path without a cache); bad rows go to ``bad`` as (line, message)."""
    if is_generated(data_cfg.source):
        return [(m + [{"role": "assistant", "content": r}], None)
                for m, r in sft_pairs(generated_rows(data_cfg), mode)]
    path = Path(data_cfg.source)
    items = []
    for lineno, row in read_jsonl(path, data_cfg.size, bad):
        try:
            items.append(parse_sft_row(row, f"{path}:{lineno}"))
        except DataError as e:
            bad.append((lineno, str(e)))
    return items


def check_bad_rows(data_cfg: Data, count: int, first: Optional[str]) -> None:
    """``Data.max_bad_rows`` for any loader: more than that many bad rows stop loading with the
    first one's one-line message (and the count); fewer are logged."""
    if count > data_cfg.max_bad_rows:
        more = (f" ({count} bad rows; data.max_bad_rows={data_cfg.max_bad_rows})" if count > 1
                else "")
        raise DataError(first + more)
    if count:
        log.warning("%s: skipped %d bad rows (data.max_bad_rows=%d); first: %s", data_cfg.source,
                    count,
                    data_cfg.max_bad_rows, first)


def load_sft_examples(data_cfg: Data, tokenizer, mode: str, max_prompt_tokens: int,
                      style: str = "cascade1", cache_fallback: Optional[Path] = None):
    """An example per row: its token segments, context and learned alternating (``(prompt_ids,
    response_ids)`` for a row of one learned turn; ``data.sft_segments``, ``Data.sft_turns``); a
    learned segment ends with ``<|im_end|>`` (the EOS the model must learn to emit). Segments are
    tokenised separately, as a rollout sees them (prompt tokens, then generated tokens). Over-long
    and too-short prompts (the text before the first learned segment) are dropped and counted as in
    load_prompts; bad rows are skipped and counted up to ``data_cfg.max_bad_rows``.

    A file source with ``data_cfg.cache`` is read in shares over the ranks and tokenized once into
    the cache (``data.sft_cache``: beside the data, else under ``cache_fallback``, the run dir's
    ``data_cache``); the result is then a memory-mapped :class:`~.sft_cache.TokenizedSFT` holding
    the same lists. Otherwise (and for generated sources) every rank reads and tokenizes the whole
    source in memory (a ``PromptList``)."""
    cached = None
    if data_cfg.cache and not is_generated(data_cfg.source):
        cached = sft_cache.load(Path(data_cfg.source), tokenizer, mode, style, data_cfg,
                                cache_fallback)
    if cached is not None:
        rows, manifest = cached
        out = _cached_rows(data_cfg, max_prompt_tokens, manifest, rows.prompt_lens[:, None], rows)
        out.dropped_other_mode = sum(part["other_mode"] for part in manifest["parts"])
        _report(data_cfg, out, max_prompt_tokens)
        return out
    out, bad = PromptList(), []
    items = _sft_items(data_cfg, mode, bad)
    bad.sort(key=lambda b: b[0])
    check_bad_rows(data_cfg, len(bad), bad[0][1] if bad else None)
    out.bad_rows = len(bad)
    for messages, tools in items:
        if data_cfg.keep_mode and answer_mode(messages, mode) != data_cfg.keep_mode:
            out.dropped_other_mode += 1
            continue
        segments = sft_segments(messages, tools, mode, style, data_cfg.sft_turns)
        prompt_ids = _encode(tokenizer, segments[0])
        if _fits(out, [len(prompt_ids)], data_cfg.min_prompt_tokens, max_prompt_tokens):
            out.append((prompt_ids, *(_encode(tokenizer, text) for text in segments[1:])))
    _report(data_cfg, out, max_prompt_tokens)
    return out


class SFTBlend(Sequence):
    """Several sources' examples back to back, each ``repeat`` times, without copying them."""

    def __init__(self, parts: list[tuple[Sequence, int]]):
        self._parts = [(rows, len(rows) * repeat) for rows, repeat in parts]
        self._ends = list(itertools.accumulate(n for _, n in self._parts))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = bisect.bisect_right(self._ends, i)
        rows, _ = self._parts[k]
        return rows[(i - (self._ends[k - 1] if k else 0)) % len(rows)]


def load_sft_blend(sources: tuple[Data, ...], tokenizer, mode: str, max_prompt_tokens: int,
                   style: str = "cascade1", cache_fallback: Optional[Path] = None) -> SFTBlend:
    """An SFT stage's examples: every source's rows (``load_sft_examples``), each source
    ``Data.repeat`` times — the per-source weights of the stage-2 blend (science ×2, SWE ×3, §3.3).
    ``sft_batches`` shuffles the whole blend every epoch, so an epoch sees each row of a ×N source N
    times."""
    parts = []
    for d in sources:
        rows = load_sft_examples(d, tokenizer, mode, max_prompt_tokens, style, cache_fallback)
        parts.append((rows, d.repeat))
        if d.repeat > 1:
            log.info("%s: %d rows ×%d in the SFT blend", d.source, len(rows), d.repeat)
    return SFTBlend(parts)


def _report(data_cfg: Data, out, limit: int, no_context: int = 0) -> None:
    """Log what a loader dropped and why; DataError when nothing is left. ``no_context``: SWE rows
    whose §4.7.1 prompt fits no context (prompt sets only)."""
    source, kept, floor = data_cfg.source, len(out), data_cfg.min_prompt_tokens
    other_mode = getattr(out, "dropped_other_mode", 0)
    total = kept + out.dropped_too_long + out.dropped_too_short + no_context + other_mode
    if other_mode:
        log.info("%s: left out %d of %d rows answered in another mode than data.keep_mode=%s",
                 source,
                 other_mode, total, data_cfg.keep_mode)
    if no_context:
        log.warning("%s: dropped %d of %d SWE rows whose ground-truth files alone do not fit %d "
                    "tokens in %d files (§4.7.1)", source, no_context, total, limit,
                    data_cfg.swe_max_files)
    if out.dropped_too_long:
        log.warning("%s: dropped %d of %d rows whose prompt exceeds %d tokens", source,
                    out.dropped_too_long,
                    total, limit)
    if out.dropped_too_short:
        log.warning("%s: dropped %d of %d rows whose prompt is shorter than "
                    "data.min_prompt_tokens=%d", source,
                    out.dropped_too_short, total, floor)
    if kept == 0:
        if total == 0 and not out.bad_rows:
            raise DataError(f"{source}: no rows (an empty file or data set)")
        short = (f", {out.dropped_too_short} shorter than data.min_prompt_tokens={floor}" if floor
                 else "")
        skipped = f"; {out.bad_rows} bad rows skipped" if out.bad_rows else ""
        if other_mode:
            skipped += f"; {other_mode} not in data.keep_mode={data_cfg.keep_mode}"
        context = (f", {no_context} whose ground truth alone fits no prompt in data.swe_max_files="
                   f"{data_cfg.swe_max_files}" if no_context else "")
        raise DataError(f"{source}: no usable rows ({out.dropped_too_long} longer than "
                        f"max_prompt_tokens={limit}{short}{context}{skipped})")


def sft_batches(examples: list, batch_size: int, seed: int):
    """Shuffled epochs of examples, batch after batch (epoch e shuffled with seed + e)."""
    epoch, order = 0, []
    while True:
        if len(order) < batch_size:
            fresh = list(range(len(examples)))
            random.Random(seed + epoch).shuffle(fresh)
            order, epoch = order + fresh, epoch + 1
        yield [examples[i] for i in order[:batch_size]]
        order = order[batch_size:]


def pad_id(tokenizer) -> int:
    """Padding never reaches the loss (masked), so any id works; models without a pad token use
    EOS."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


__all__ = ["pad_id", "sft_batches", "DataError", "PromptList", "POOL_LIMIT", "pool_by_share",
           "load_prompts", "load_sft_examples",
           "load_sft_blend", "SFTBlend", "check_bad_rows", "PromptStream"]
