"""Prompt sets: read a ``Data`` source (``synthetic:NAME`` or a jsonl file) into templated, tokenised prompts
and SFT examples, and serve them in a deterministic, resumable order (:class:`PromptStream`).

jsonl rows (one JSON object per line, blank lines skipped):

- the conversation: ``"question"`` or ``"prompt"`` (a string, one user turn) or ``"messages"``
  (``[{"role", "content"}, ...]``; for prompts the last turn must not be the assistant's);
- the label: ``"answer"`` (a string or number; numbers become strings) or ``"label"`` (any JSON value);
- optional ``"uid"`` (string or integer; default ``FILE:LINE``);
- SFT only: ``"response"`` (a string), or ``"messages"`` ending with the assistant turn to learn.

A malformed row raises :class:`DataError` with one line naming the file, the line and the expected field.
"""
from __future__ import annotations

import hashlib
import json
import logging
import random
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ..config import Data
from ..types import Prompt
from .chat import IM_END, render
from .synthetic import SYNTHETIC, sft_pairs

log = logging.getLogger(__name__)

SYNTHETIC_PREFIX = "synthetic:"
_MISSING = object()


class DataError(ValueError):
    """A bad data source or row; the message is one line naming the file, line and field."""


class PromptList(list):
    """``list[Prompt]`` (or of SFT examples) that also reports what loading dropped."""

    dropped_too_long: int = 0
    """Rows whose templated prompt exceeded ``max_prompt_tokens``."""


# ------------------------------------------------------------------------------------------- rows

def _read_jsonl(path: Path, limit: int) -> list[tuple[int, dict]]:
    """``(line number, object)`` per non-blank line; the first ``limit`` rows if ``limit > 0``."""
    if path.suffix == ".parquet":
        raise DataError(f"{path}: parquet sources are not supported yet; convert to jsonl")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"data file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"{path}: cannot read ({type(e).__name__}: {e})") from None
    rows = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        rows.append((lineno, obj))
        if 0 < limit <= len(rows):
            break
    return rows


def _messages(row: dict, where: str, for_sft: bool) -> list[dict]:
    """The conversation of a row as chat messages (validated)."""
    for key in ("question", "prompt"):
        if key in row:
            if not isinstance(row[key], str) or not row[key]:
                raise DataError(f"{where}: field {key!r} must be a non-empty string")
            return [{"role": "user", "content": row[key]}]
    msgs = row.get("messages", _MISSING)
    if msgs is _MISSING:
        raise DataError(f"{where}: expected field 'question', 'prompt' or 'messages'")
    if not isinstance(msgs, list) or not msgs:
        raise DataError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects")
    for j, m in enumerate(msgs):
        if (not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant")
                or not isinstance(m.get("content"), str)):
            raise DataError(f"{where}: field 'messages[{j}]' must be an object with role "
                            f"system|user|assistant and string content")
    if not for_sft and msgs[-1]["role"] == "assistant":
        raise DataError(f"{where}: field 'messages' must not end with an assistant turn in a prompt set")
    return [{k: m[k] for k in ("role", "content", "mode") if k in m} for m in msgs]


def _label(row: dict, where: str) -> Any:
    if "answer" in row:
        ans = row["answer"]
        if isinstance(ans, bool) or not isinstance(ans, (str, int, float)):
            raise DataError(f"{where}: field 'answer' must be a string or number, got {type(ans).__name__}")
        return ans if isinstance(ans, str) else str(ans)
    if "label" in row and row["label"] is not None:
        return row["label"]
    raise DataError(f"{where}: expected field 'answer' or 'label'")


def _uid(row: dict, default: str, where: str) -> str:
    uid = row.get("uid", default)
    if isinstance(uid, bool) or not isinstance(uid, (str, int)):
        raise DataError(f"{where}: field 'uid' must be a string or integer")
    return str(uid)


def _synthetic_rows(data_cfg: Data) -> list[dict]:
    name = data_cfg.source[len(SYNTHETIC_PREFIX):]
    if name not in SYNTHETIC:
        raise DataError(f"data.source: unknown synthetic set {name!r}; expected one of {sorted(SYNTHETIC)}")
    try:
        return SYNTHETIC[name](data_cfg.split, data_cfg.size, data_cfg.seed)
    except ValueError as e:
        raise DataError(f"data.source {data_cfg.source}: {e}") from None


def _encode(tokenizer, text: str) -> list[int]:
    # The template already holds every control token; a BOS/EOS added here would be a second copy.
    return list(tokenizer.encode(text, add_special_tokens=False))


# ------------------------------------------------------------------------------------------ public

def load_prompts(data_cfg: Data, tokenizer, mode: str, domain: str, max_prompt_tokens: int,
                 style: str = "cascade1", validate_label: Optional[Callable[[Any], None]] = None) -> PromptList:
    """Templated, tokenised prompts of ``data_cfg`` (generation prompt included). Prompts longer than
    ``max_prompt_tokens`` are dropped; their count is ``result.dropped_too_long`` (and logged).
    ``validate_label`` (the domain's, ``rewards.VALIDATORS``) rejects a malformed label here, naming its file
    and line, rather than mid-training (DESIGN.md "Rewards")."""
    out = PromptList()
    if data_cfg.source.startswith(SYNTHETIC_PREFIX):
        items = [(r["uid"], [{"role": "user", "content": r["question"]}], r["answer"])
                 for r in _synthetic_rows(data_cfg)]
    else:
        path = Path(data_cfg.source)
        items = []
        for lineno, row in _read_jsonl(path, data_cfg.size):
            where = f"{path}:{lineno}"
            label = _label(row, where)
            if validate_label is not None:
                try:
                    validate_label(label)
                except ValueError as e:
                    raise DataError(f"{where}: {e}") from None
            items.append((_uid(row, where, where), _messages(row, where, False), label))
    for uid, messages, label in items:
        ids = _encode(tokenizer, render(messages, mode, style))
        if len(ids) > max_prompt_tokens:
            out.dropped_too_long += 1
            continue
        out.append(Prompt(prompt_tokens=ids, domain=domain, label=label, mode=mode, uid=uid))
    _report(data_cfg.source, len(out), out.dropped_too_long, max_prompt_tokens)
    return out


def _sft_items(data_cfg: Data, mode: str) -> list[tuple[list[dict], str]]:
    """(prompt messages, response) per row of an SFT source."""
    if data_cfg.source.startswith(SYNTHETIC_PREFIX):
        return sft_pairs(_synthetic_rows(data_cfg), mode)
    path = Path(data_cfg.source)
    items = []
    for lineno, row in _read_jsonl(path, data_cfg.size):
        where = f"{path}:{lineno}"
        messages = _messages(row, where, True)
        if "response" in row:
            if not isinstance(row["response"], str):
                raise DataError(f"{where}: field 'response' must be a string")
            items.append((messages, row["response"]))
        elif messages[-1]["role"] == "assistant" and len(messages) > 1:
            items.append((messages[:-1], messages[-1]["content"]))
        else:
            raise DataError(f"{where}: expected field 'response' or 'messages' ending with an assistant turn")
    return items


def load_sft_examples(data_cfg: Data, tokenizer, mode: str, max_prompt_tokens: int,
                      style: str = "cascade1") -> PromptList:
    """``(prompt_token_ids, response_token_ids)`` per row; the response ends with ``<|im_end|>`` (the EOS the
    model must learn to emit). Prompt and response are tokenised separately, exactly as a rollout sees them
    (prompt tokens, then generated tokens). Over-long prompts are dropped and counted as in load_prompts."""
    out = PromptList()
    for messages, response in _sft_items(data_cfg, mode):
        prompt_ids = _encode(tokenizer, render(messages, mode, style))
        if len(prompt_ids) > max_prompt_tokens:
            out.dropped_too_long += 1
            continue
        out.append((prompt_ids, _encode(tokenizer, response + IM_END)))
    _report(data_cfg.source, len(out), out.dropped_too_long, max_prompt_tokens)
    return out


def _report(source: str, kept: int, dropped: int, limit: int) -> None:
    if dropped:
        log.warning("%s: dropped %d of %d rows whose prompt exceeds %d tokens", source, dropped,
                    kept + dropped, limit)
    if kept == 0:
        raise DataError(f"{source}: no usable rows ({dropped} longer than max_prompt_tokens={limit})")


# ------------------------------------------------------------------------------------------ stream

class PromptStream:
    """Prompts in shuffled epochs, deterministic and resumable.

    Epoch ``e`` visits every prompt once in the order of ``random.Random(seed + e)``; a batch that runs past
    the end of an epoch continues into the next. ``state_dict()`` is ``{epoch, position, num_prompts,
    fingerprint}``: restoring it into a stream over the same prompts draws exactly the batches the original
    would have drawn next. Restoring into a different prompt set raises DataError (a stage resumed on other
    data would silently skip or repeat rows).
    """

    def __init__(self, prompts: list[Prompt], seed: int = 0):
        if not prompts:
            raise DataError("PromptStream: no prompts")
        self._prompts = list(prompts)
        self._seed = seed
        self._epoch, self._position = 0, 0
        self._order = self._epoch_order(0)
        self._fingerprint = hashlib.sha256("\n".join(p.uid for p in self._prompts).encode()).hexdigest()[:16]

    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(len(self._prompts)))
        random.Random(self._seed + epoch).shuffle(order)
        return order

    def __iter__(self) -> Iterator[Prompt]:
        return self

    def __next__(self) -> Prompt:
        if self._position == len(self._order):
            self._epoch, self._position = self._epoch + 1, 0
            self._order = self._epoch_order(self._epoch)
        prompt = self._prompts[self._order[self._position]]
        self._position += 1
        return prompt

    def next_batch(self, n: int) -> list[Prompt]:
        """The next ``n`` prompts (crossing into the next epoch when this one runs out)."""
        return [next(self) for _ in range(n)]

    @property
    def epoch(self) -> int:
        return self._epoch

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "position": self._position, "num_prompts": len(self._prompts),
                "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict) -> None:
        for key in ("num_prompts", "fingerprint"):
            if key in state and state[key] != self.state_dict()[key]:
                raise DataError(f"resume: data {key} {state[key]!r} in the checkpoint differs from "
                                f"{self.state_dict()[key]!r} of the loaded prompt set")
        epoch, position = int(state["epoch"]), int(state["position"])
        if epoch < 0 or not 0 <= position <= len(self._prompts):
            raise DataError(f"resume: bad data position epoch={epoch} position={position}")
        self._epoch, self._position = epoch, position
        self._order = self._epoch_order(epoch)


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
    """Padding never reaches the loss (masked), so any id works; models without a pad token use EOS."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


__all__ = ["pad_id", "sft_batches", "DataError", "PromptList", "load_prompts", "load_sft_examples", "PromptStream",
           "SYNTHETIC_PREFIX"]
