"""RL prompt sets at scale: a prompt file is adapted, templated and tokenized once, in shares over
the ranks, into the data cache (the same entries, keys and atomic publishing as SFT files:
:mod:`.sft_cache`), and every later load — a restart, the next stage on the same data — maps the
stored tokens instead of parsing the file.

Why every rank maps the whole set rather than keeping only its share of rows: a GRPO step's prompts
are drawn from one seeded global order that every rank computes (``prompt_stream.PromptStream``:
shuffled epochs, half-half modes, the epoch filter keyed by uid), and each rank then generates its
contiguous slice of that step's prompts (``ranks.my_share``). Which rows a rank needs changes every
step, so each rank reads only its share of the *file* (to tokenize it) and then maps every part; a
node's ranks share the pages.

What is stored per part ``k`` (one per share):

- ``part-k.tokens`` (int32) and ``part-k.offsets.npy``: each kept row's templated prompt ids, one
  run per mode (two under ``mode="half"``: think, then no_think), so length limits are applied at
  load time from the offsets alone and a stage with another ``max_prompt_tokens`` reuses the entry
  (SWE excepted: its §4.7.1 prompt is built for the limit, so the limit is part of its key);
- ``part-k.uids.json``: the rows' uids, read whole at load — the prompt stream tracks rows by uid
  (resume fingerprint, epoch filter);
- ``part-k.meta`` and ``part-k.meta_offsets.npy``: per row the JSON ``[user_text, label]``, decoded
  only when the row is drawn. The label stored is the one the loader built (``schemas.adapt``:
  IF-RLVR ground truth parsed, SWE files chosen for the limit, the label check passed), not the raw
  row, so serving it needs no second parse of the source and no re-run of the adapter; a code row's
  tests or an SWE row's files cost disk once rather than memory on every rank. A label that JSON
  cannot give back exactly (a tuple, bytes, a non-string key: possible from a parquet row or a
  Python-literal ground truth) makes the file uncacheable: it is then loaded in memory as before,
  never served changed.

Bad rows, refused rows, rows whose SWE prompt fits no context and ``Data.max_bad_rows`` behave
exactly as in the in-memory path (``loader.load_prompts``); the manifest keeps each part's counts
and first bad row.
"""
from __future__ import annotations

import array
import dataclasses
import hashlib
import json
import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional

import numpy as np

from ..config import Data
from ..runtime.files import write_text_atomically
from ..types import Prompt
from . import sft_cache, chat, math_prompt, schemas, swe_prompts
from .chat import JINJA_TEMPLATES, render
from .rows import DataError, Share
from .schemas import RefusedRow, RowSchema, adapt
from .swe_prompts import PromptBudget

log = logging.getLogger(__name__)

READ_AT_LOAD = ("max_bad_rows", "min_prompt_tokens", "repeat", "cache")
"""``Data`` fields applied when an entry is loaded (or not about tokens at all): not part of the
key."""
SWE_ONLY = ("seed", "swe_max_files", "swe_min_noisy_files", "swe_truth_only_share")
"""``Data`` fields that change the tokens of SWE rows only (the §4.7.1 prompt's variant, files)."""


class Uncacheable(ValueError):
    """A prompt set whose labels JSON cannot store exactly; it is loaded in memory instead."""


def encode(tokenizer, text: str) -> list[int]:
    # The template already holds every control token; a BOS/EOS added here would be a second copy.
    return list(tokenizer.encode(text, add_special_tokens=False))


def swe_budget(data_cfg: Data, tokenizer, modes: tuple[str, ...], style: str,
               limit: int) -> PromptBudget:
    """The §4.7.1 prompt budget of an SWE source: the stage's limit, counted on the templated prompt
    in every mode it is rendered in (the longest must fit), the source's seed and file limits."""
    def count_tokens(text: str) -> int:
        messages = [{"role": "user", "content": text}]
        return max(len(encode(tokenizer, render(messages, m, style))) for m in modes)

    return PromptBudget(limit, count_tokens, data_cfg.seed, data_cfg.swe_max_files,
                        data_cfg.swe_min_noisy_files, data_cfg.swe_truth_only_share)


def prompt_item(domain: RowSchema, row: dict, where: str, data_cfg: Data,
                validate_label: Optional[Callable[[Any], None]],
                budget: Optional[PromptBudget]) -> Optional[tuple[str, list[dict], Any]]:
    """``(uid, messages, label)`` of one row of an RL prompt set; None for an SWE row whose §4.7.1
    prompt fits no context (dropped, not bad). ValueError (SchemaError, a label check's, a bad uid)
    for a bad row; RefusedRow for a row a setting refuses (the caller stops loading:
    ``max_bad_rows`` does not skip it)."""
    # the released datasets' schemas (data/schemas.py)
    messages, label = adapt(domain, row, where, budget)
    if messages is None:
        return None
    if domain.phrase:  # math: the suites' request for a boxed answer (data/math_prompt.py, §4.5)
        messages = domain.phrase(messages, data_cfg)
    if validate_label is not None:  # the domain's own label check
        validate_label(label)
    uid = row.get("uid", where)
    if isinstance(uid, bool) or not isinstance(uid, (str, int)):
        raise DataError(f"{where}: field 'uid' must be a string or integer")
    return str(uid), messages, label


def adapted_rows(rows: Iterable[tuple[int, str, dict]], domain: RowSchema, data_cfg: Data,
                 validate_label,
                 budget: Optional[PromptBudget],
                 bad: list[tuple[int, str]]) -> Iterator[tuple[str, Optional[tuple]]]:
    """``(where, prompt_item)`` per ``(position, where, row)`` of a prompt source that fits the
    domain's schema (the item None for an SWE row that fits no context), for the in-memory loader
    and the cache's shares alike; a row that does not goes to ``bad`` as (position, one-line
    message). A row a setting refuses stops loading (DataError; in a cache share, on every rank:
    ``sft_cache.cached_entry``)."""
    for position, where, row in rows:
        try:
            item = prompt_item(domain, row, where, data_cfg, validate_label, budget)
        # not a bad row: a setting decides, so max_bad_rows does not skip it
        except RefusedRow as e:
            raise DataError(f"{where}: {e}") from None
        except ValueError as e:  # SchemaError, a validator's ValueError, a bad uid
            bad.append((position, str(e) if str(e).startswith(where) else f"{where}: {e}"))
            continue
        yield where, item


def user_text(messages: list[dict]) -> str:
    """The user turns as written, the code-switch rule's input (``Prompt.user_text``)."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "user")


def _json_exact(x: Any) -> bool:
    """Whether ``json.loads(json.dumps(x))`` is ``x`` again, with the same types."""
    if x is None or type(x) in (str, bool, int, float):
        return True
    if type(x) is list:
        return all(_json_exact(v) for v in x)
    if type(x) is dict:
        return all(type(k) is str and _json_exact(v) for k, v in x.items())
    return False


def _validator_name(validate_label) -> Optional[str]:
    """A stable description of the label check (its function and bound settings) for the entry's
    key."""
    if validate_label is None:
        return None
    func = getattr(validate_label, "func", validate_label)
    name = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', type(func).__name__)}"
    bound = getattr(validate_label, "keywords", None)
    return name + (json.dumps(bound, sort_keys=True, default=str) if bound else "")


def _code_digest(domain: RowSchema, validate_label) -> str:
    """A hash of the source of the modules that turn a row into a prompt and a label (the adapters,
    the math instruction, the SWE prompt builder, the chat template code, this module, the label
    check's module): a change to any of them invalidates the entries it would have built
    differently, with no format bump."""
    modules = [schemas, math_prompt, swe_prompts, chat, sys.modules[__name__]]
    if domain.phrase is not None:  # the domain's wording (math's, in rewards/math.py)
        modules.append(sys.modules[domain.phrase.__module__])
    func = getattr(validate_label, "func", validate_label)
    if func is not None and getattr(sys.modules.get(func.__module__), "__file__", None):
        modules.append(sys.modules[func.__module__])
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()


def prompt_settings(data_cfg: Data, domain: RowSchema, mode: str, style: str,
                    max_prompt_tokens: int,
                    validate_label) -> dict:
    """What decides a prompt entry's tokens and labels besides the file and the tokenizer: every
    ``Data`` field not applied at load time (so a field added later is in the key unless listed in
    :data:`READ_AT_LOAD`) — the source as written included, since a row's default uid is
    ``SOURCE:LINE`` — the domain, mode, template, label check, the code that builds prompts and, for
    SWE, the prompt limit."""
    swe = domain.prompt_budget
    fields = {k: v for k, v in dataclasses.asdict(data_cfg).items()
              if k not in READ_AT_LOAD and (swe or k not in SWE_ONLY)}
    return {"kind": "prompts", "data": fields, "domain": domain.name, "mode": mode, "style": style,
            "template": JINJA_TEMPLATES[style], "validator": _validator_name(validate_label),
            "code": _code_digest(domain, validate_label),
            "max_prompt_tokens": max_prompt_tokens if swe else None}


# ------------------------------------------------------------------------------------------ build

def tokenize_share(share: Share, tokenizer, data_cfg: Data, domain: RowSchema, mode: str,
                   style: str,
                   max_prompt_tokens: int, validate_label, out: Path,
                   progress: bool = False) -> dict:
    """Adapt, template and tokenize one share into ``out/part-K.*``; returns the part's summary
    (rows, tokens, bad rows and the first one's message, SWE rows dropped for no context). Raises
    :class:`Uncacheable`."""
    k, modes = share.index, (("think", "no_think") if mode == "half" else (mode,))
    budget = (swe_budget(data_cfg, tokenizer, modes, style, max_prompt_tokens)
              if domain.prompt_budget else None)
    offsets, meta_offsets = array.array("q", [0]), array.array("q", [0])
    uids: list[str] = []
    bad: list[tuple[int, str]] = []
    no_context = 0

    def stored(where: str, item: Optional[tuple]) -> Optional[list[dict]]:
        """The row's messages to tokenize, its uid and meta record stored; None for an SWE row that
        fits no context."""
        nonlocal no_context
        if item is None:
            no_context += 1
            return None
        uid, messages, label = item
        if not _json_exact(label):
            raise Uncacheable(f"{where}: its label ({type(label).__name__}) does not round-trip "
                              "through JSON")
        record = json.dumps([user_text(messages), label], ensure_ascii=False).encode()
        meta.write(record)
        meta_offsets.append(meta_offsets[-1] + len(record))
        uids.append(uid)
        return messages

    def encode(f: BinaryIO, pending: list[list[dict]]) -> None:
        texts = [render(messages, m, style) for messages in pending for m in modes]
        for ids in sft_cache.encode_batch(tokenizer, texts):
            f.write(np.asarray(ids, dtype=np.int32).tobytes())
            offsets.append(offsets[-1] + len(ids))

    rows = ((line, share.where(line), row) for line, row in share.rows(bad))
    with open(out / f"part-{k}.meta", "wb") as meta:
        items = (stored(*item) for item in adapted_rows(rows, domain, data_cfg, validate_label,
                                                        budget, bad))
        sft_cache.tokenize_rows(share, out, progress, items, encode)
    np.save(out / f"part-{k}.offsets.npy", np.frombuffer(offsets, dtype=np.int64))
    np.save(out / f"part-{k}.meta_offsets.npy", np.frombuffer(meta_offsets, dtype=np.int64))
    write_text_atomically(out / f"part-{k}.uids.json", json.dumps(uids, ensure_ascii=False))
    bad.sort()
    return {"part": k, "rows": len(uids), "tokens": offsets[-1], "meta_bytes": meta_offsets[-1],
            "bad_rows": len(bad), "first_bad": bad[0][1] if bad else None, "no_context": no_context}


# ------------------------------------------------------------------------------------------- load

class CachedPrompts(Sequence):
    """``Prompt`` objects of a cached prompt set, built when drawn: token ids from the mapped parts,
    the label and user text decoded from the row's meta record. Carries ``PromptList``'s counts and,
    under ``mode="half"``, ``alternate`` (the same rows' no_think templatings). ``uids`` lists every
    kept row's uid without building the prompts."""

    dropped_too_long = dropped_too_short = dropped_no_context = bad_rows = 0

    def __init__(self, parts: list[dict], domain: str, modes: tuple[str, ...], keep: np.ndarray,
                 variant: int = 0):
        self._parts, self._domain, self._modes, self._variant = parts, domain, modes, variant
        self._starts = np.concatenate([[0], np.cumsum([p["rows"] for p in parts])]).astype(np.int64)
        self._keep = keep
        self.alternate: Optional[CachedPrompts] = None

    def __len__(self) -> int:
        return len(self._keep)

    @property
    def uids(self) -> list[str]:
        every = [u for p in self._parts for u in p["uids"]]
        return [every[i] for i in self._keep.tolist()]

    def lengths(self) -> np.ndarray:
        """``[rows, modes]`` token counts of every row's templatings, from the offsets alone."""
        n = len(self._modes)
        if not self._parts:
            return np.zeros((0, n), np.int64)
        return np.concatenate([np.diff(np.asarray(p["offsets"])).reshape(-1, n)
                               for p in self._parts])

    def kept(self, keep: np.ndarray) -> CachedPrompts:
        """Rows ``keep`` (indices into every row), with their no_think twins under
        ``mode="half"``."""
        out = CachedPrompts(self._parts, self._domain, self._modes, keep)
        if len(self._modes) == 2:
            out.alternate = CachedPrompts(self._parts, self._domain, self._modes, keep, variant=1)
        return out

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = int(self._keep[i])
        k = int(np.searchsorted(self._starts, row, side="right")) - 1
        part, local = self._parts[k], row - int(self._starts[k])
        at = local * len(self._modes) + self._variant
        ids = part["tokens"][int(part["offsets"][at]):int(part["offsets"][at + 1])].tolist()
        begin, end = int(part["meta_offsets"][local]), int(part["meta_offsets"][local + 1])
        text, label = json.loads(part["meta"][begin:end].tobytes())
        return Prompt(prompt_tokens=ids, domain=self._domain, label=label,
                      mode=self._modes[self._variant],
                      uid=part["uids"][local], user_text=text)


def _map(path: Path, dtype, count: int) -> np.ndarray:
    # a plain ndarray over the mapping: slicing an np.memmap runs its Python-level
    # __array_finalize__ per row
    return np.memmap(path, dtype=dtype, mode="r").view(np.ndarray) if count else np.zeros(0, dtype)


def open_prompts(entry: Path, mode: str) -> tuple[list[dict], dict]:
    """The mapped parts of a prompt entry and its manifest; DataError if a part does not match the
    manifest."""
    manifest = sft_cache.read_manifest(entry)
    modes = ("think", "no_think") if mode == "half" else (mode,)
    parts = []
    for summary in manifest["parts"]:
        k, rows = summary["part"], summary["rows"]
        part = {"rows": rows,
                "tokens": _map(entry / f"part-{k}.tokens", np.int32, summary["tokens"]),
                "offsets": np.load(entry / f"part-{k}.offsets.npy", mmap_mode="r").view(np.ndarray),
                "meta": _map(entry / f"part-{k}.meta", np.uint8, summary["meta_bytes"]),
                "meta_offsets": np.load(entry / f"part-{k}.meta_offsets.npy",
                                        mmap_mode="r").view(np.ndarray),
                "uids": json.loads((entry / f"part-{k}.uids.json").read_text())}
        if (len(part["tokens"]) != summary["tokens"]
                or len(part["offsets"]) != rows * len(modes) + 1
                or len(part["meta"]) != summary["meta_bytes"]
                or len(part["meta_offsets"]) != rows + 1
                or len(part["uids"]) != rows):
            raise DataError(f"{entry}: part {k} does not match its manifest; delete the folder to "
                            "rebuild it")
        parts.append(part)
    return parts, manifest


def load(data_cfg: Data, tokenizer, mode: str, domain: RowSchema, max_prompt_tokens: int,
         style: str,
         validate_label, fallback: Optional[Path]) -> Optional[tuple[CachedPrompts, dict]]:
    """Every row of a prompt file adapted and tokenized (no length filter; the result keeps every
    row) and the manifest, from the cache or built into it now (collective: every rank calls it).
    None when there is nowhere to store a cache, the tokenizer has no digest, or a label cannot be
    stored exactly (:class:`Uncacheable`)."""
    path = Path(data_cfg.source)

    def tokenize(share: Share, out: Path, progress: bool) -> dict:
        try:
            return tokenize_share(share, tokenizer, data_cfg, domain, mode, style,
                                  max_prompt_tokens, validate_label,
                                  out, progress)
        except Uncacheable as e:
            return {"uncacheable": str(e)}

    settings = prompt_settings(data_cfg, domain, mode, style, max_prompt_tokens, validate_label)
    entry = sft_cache.cached_entry(path, tokenizer, settings, data_cfg.size, fallback, tokenize)
    if entry is None:
        return None
    parts, manifest = open_prompts(entry, mode)
    modes = ("think", "no_think") if mode == "half" else (mode,)
    every = CachedPrompts(parts, domain.name, modes, np.arange(sum(p["rows"] for p in parts),
                                                               dtype=np.int64))
    return every, manifest


__all__ = ["CachedPrompts", "load", "open_prompts", "tokenize_share", "prompt_settings",
           "prompt_item",
           "adapted_rows", "swe_budget", "encode", "user_text", "Uncacheable"]
