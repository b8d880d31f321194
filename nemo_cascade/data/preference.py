"""Preference pairs for reward-model training (paper §4.2): rows ``{"prompt", "chosen",
"rejected"}`` read, validated, templated and tokenised; a ``synthetic:NAME`` source reads the
preference form registered for that set (:mod:`.generated`).

jsonl rows (one JSON object per line, blank lines skipped):

- ``"prompt"``: a string (one user turn) or a list of ``{"role", "content"}`` messages ending with a
  non-assistant turn (the conversation the two responses reply to);
- ``"chosen"`` / ``"rejected"``: the preferred and the dispreferred response, strings;
- optional ``"uid"``.

A malformed row raises :class:`~nemo_cascade.data.loader.DataError` with one line naming the file,
the line and the field; up to ``Data.max_bad_rows`` of them (and unreadable lines) are skipped and
counted instead (``PairList.bad_rows``), as in every loader. A pair whose two responses are
identical carries no preference (the paper drops HelpSteer3's ties, §4.2): it is skipped and counted
(``PromptList.dropped_ties``).

Each side is tokenised as the whole conversation with the response as the final assistant turn,
rendered by :func:`~nemo_cascade.data.rm_input.render_rm_input` (the chat template, **no**
generation prompt) — the one rendering the exported RM's chat template and the served RM's client
(``rewards.remote.RewardModelClient.score_conversations``) also use, so the RM scores the inputs it
learned.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from ..config import Data
from .chat import valid_mode
from . import generated
from .loader import DataError, PromptList, check_bad_rows, read_jsonl
from .rm_input import render_rm_input

log = logging.getLogger(__name__)

_ROLES = ("system", "user", "assistant")


class PairList(PromptList):
    """``list[(chosen_ids, rejected_ids)]`` that also reports what loading skipped."""

    dropped_ties: int = 0
    """Rows whose chosen and rejected responses were identical."""


# ------------------------------------------------------------------------------------------ rows

def _prompt_messages(value, where: str) -> list[dict]:
    if isinstance(value, str):
        if not value:
            raise DataError(f"{where}: field 'prompt' must be a non-empty string or a list of "
                            "messages")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise DataError(f"{where}: field 'prompt' must be a non-empty string or a list of {{role, "
                        f"content}} objects")
    for j, m in enumerate(value):
        if (not isinstance(m, dict) or m.get("role") not in _ROLES
                or not isinstance(m.get("content"), str)):
            raise DataError(f"{where}: field 'prompt[{j}]' must be an object with role "
                            "system|user|assistant and string content")
        # a per-turn switch (§3.1.2); render would reject it
        if "mode" in m and not valid_mode(m["mode"]):
            raise DataError(f"{where}: field 'prompt[{j}].mode' must be 'think' or 'no_think'")
    if value[-1]["role"] == "assistant":
        raise DataError(f"{where}: field 'prompt' must not end with an assistant turn (the "
                        "responses reply to it)")
    return [{k: m[k] for k in ("role", "content", "mode") if k in m} for m in value]


def parse_row(row: dict, where: str) -> tuple[list[dict], str, str]:
    """``(prompt messages, chosen, rejected)`` of one row, or a one-line DataError naming
    ``where``."""
    if "prompt" not in row:
        raise DataError(f"{where}: expected field 'prompt' (a string or a list of messages)")
    messages = _prompt_messages(row["prompt"], where)
    out = []
    for key in ("chosen", "rejected"):
        if key not in row:
            raise DataError(f"{where}: expected field {key!r} (a response string)")
        if not isinstance(row[key], str):
            raise DataError(f"{where}: field {key!r} must be a string, got "
                            f"{type(row[key]).__name__}")
        out.append(row[key])
    return messages, out[0], out[1]


def preference_rows(data_cfg: Data, mode: str,
                    bad: Optional[list] = None) -> list[tuple[str, list[dict], str, str]]:
    """``(uid, prompt messages, chosen, rejected)`` per row of a preference source. ``bad``: a list
    that collects ``(line, message)`` of unreadable or malformed rows instead of raising on the
    first."""
    if data_cfg.source.startswith(generated.SYNTHETIC_PREFIX):  # a registered set's preference form
        rows = generated.preference_rows(data_cfg, mode)
        return [(r["uid"], r["prompt"], r["chosen"], r["rejected"]) for r in rows]
    path = Path(data_cfg.source)
    out = []
    for lineno, row in read_jsonl(path, data_cfg.size, bad):
        where = f"{path}:{lineno}"
        try:
            messages, chosen, rejected = parse_row(row, where)
        except DataError as e:
            if bad is None:
                raise
            bad.append((lineno, str(e)))
            continue
        out.append((str(row.get("uid", where)), messages, chosen, rejected))
    return out


def load_preference_pairs(data_cfg: Data, tokenizer, mode: str,
                          style: str = "cascade1") -> PairList:
    """``(chosen_ids, rejected_ids)`` per usable row: each the token ids of the whole conversation
    (prompt turns + the response as the assistant turn, no generation prompt). Over-long sequences
    are kept whole here; the batch builder keeps their last tokens
    (``algorithms.reward_model.make_pair_batch``)."""
    out, bad = PairList(), []
    rows = preference_rows(data_cfg, mode, bad)
    bad.sort(key=lambda b: b[0])
    check_bad_rows(data_cfg, len(bad), bad[0][1] if bad else None)  # the same rule as every loader
    out.bad_rows = len(bad)
    for uid, messages, chosen, rejected in rows:
        if chosen == rejected:
            out.dropped_ties += 1
            continue
        out.append(tuple(_encode_conversation(tokenizer, messages, response, mode, style)
                         for response in (chosen, rejected)))
    if out.dropped_ties:
        log.warning("%s: skipped %d pairs whose chosen and rejected responses are identical",
                    data_cfg.source, out.dropped_ties)
    if not out:
        raise DataError(f"{data_cfg.source}: no usable preference pairs")
    return out


def _encode_conversation(tokenizer, messages: list[dict], response: str, mode: str,
                         style: str) -> list[int]:
    text = render_rm_input([*messages, {"role": "assistant", "content": response}], mode, style)
    # The template holds every control token; special tokens added here would be a second copy.
    return list(tokenizer.encode(text, add_special_tokens=False))


__all__ = ["PairList", "parse_row", "preference_rows", "load_preference_pairs"]
