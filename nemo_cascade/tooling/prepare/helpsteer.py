"""The reward model's preference pairs and the RLHF prompts, from HelpSteer2 and HelpSteer3 (paper
§4.2, §4.3.1).

Pairs (``rm/preference_pairs.jsonl``: ``prompt``, ``chosen``, ``rejected``):

- ``nvidia/HelpSteer2`` rates every response 0–4 on helpfulness, correctness, coherence, complexity
  and verbosity; a prompt's two responses are consecutive rows. §4.2 takes 10K pairs from it and
  says only that HelpSteer3's ties are removed. Rule here: the response with the higher
  **helpfulness** is chosen; equal helpfulness is broken by correctness, then coherence; a pair
  equal on all three is a tie and removed. Complexity and verbosity never decide, so the RM is not
  taught to prefer longer or more elaborate answers for their own sake. A prompt with one response
  is dropped (``unpaired``). Multi-turn prompts (turns joined by ``<extra_id_1>User`` /
  ``<extra_id_1>Assistant``) become message lists.
- ``nvidia/HelpSteer3`` (``preference`` subset): ``context`` (messages), ``response1``,
  ``response2`` and ``overall_preference`` in −3..3: negative prefers response 1, positive response
  2, 0 is a tie and removed (§4.2: 36K pairs after removing ties).

RLHF prompts (``rlhf/prompts.jsonl``, not released): "a subset of the RM preference prompts, with
all math and competitive-programming prompts removed" (§4.3.1) — the same two sets' prompts, each
once, without those that :func:`math_or_contest` flags.
"""
from __future__ import annotations

import re
from typing import Iterator, Optional, Union

from nemo_cascade.data.schemas import SchemaError
from nemo_cascade.tooling.prepare.sources import Bad, Drop

HS2_KEYS = ("helpfulness", "correctness", "coherence")
"""HelpSteer2 attributes that order a pair, most important first."""
_HS2_TURN = re.compile(r"<extra_id_1>(User|Assistant)\n?")


def hs2_prompt(text: str) -> Union[str, list[dict]]:
    """A HelpSteer2 prompt: a string, or messages when it holds ``<extra_id_1>`` turn markers."""
    parts = _HS2_TURN.split(text)
    if len(parts) == 1:
        return text
    messages = [{"role": "user", "content": parts[0].strip()}] if parts[0].strip() else []
    for k in range(1, len(parts), 2):
        messages.append({"role": "user" if parts[k] == "User" else "assistant",
                         "content": parts[k + 1].strip()})
    return messages


def _hs2_score(row: dict, where: str) -> tuple:
    out = []
    for key in HS2_KEYS:
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{where}: field {key!r} must be a number (a 0-4 rating)")
        out.append(value)
    return tuple(out)


def _hs2_text(row: dict, key: str, where: str) -> str:
    if not isinstance(row.get(key), str) or not row[key].strip():
        raise SchemaError(f"{where}: expected field {key!r} (a non-empty string)")
    return row[key]


def helpsteer2_pairs(rows: Iterator) -> Iterator:
    """HelpSteer2 rows → pair rows (consecutive rows sharing a prompt form a pair)."""
    held: Optional[tuple[str, dict]] = None
    for where, row in rows:
        if isinstance(row, Bad):
            yield where, row
            continue
        try:
            prompt = _hs2_text(row, "prompt", where)
            _hs2_text(row, "response", where)
            _hs2_score(row, where)
        except SchemaError as e:
            yield where, Bad(str(e))
            continue
        if held is None:
            held = (where, row)
            continue
        first_where, first = held
        if first["prompt"] != prompt:  # the held row had no partner
            yield first_where, Drop("unpaired")
            held = (where, row)
            continue
        held = None
        a, b = _hs2_score(first, first_where), _hs2_score(row, where)
        if a == b:
            yield where, Drop("tie")
            continue
        chosen, rejected = (first, row) if a > b else (row, first)
        yield where, {"prompt": hs2_prompt(prompt), "chosen": chosen["response"],
                      "rejected": rejected["response"], "source": "nvidia/HelpSteer2"}
    if held is not None:
        yield held[0], Drop("unpaired")


def _hs3_context(row: dict, where: str) -> list[dict]:
    context = row.get("context")
    if isinstance(context, str):
        return [{"role": "user", "content": context}]
    if not isinstance(context, list) or not context:
        raise SchemaError(
            f"{where}: expected field 'context' (a non-empty list of {{role, content}})")
    out = []
    for j, m in enumerate(context):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise SchemaError(f"{where}: field 'context[{j}]' must be an object with role "
                              "system|user|assistant and string content")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def helpsteer3_pair(row: dict, where: str):
    """One HelpSteer3 preference row → a pair row, or a dropped tie."""
    context = _hs3_context(row, where)
    preference = row.get("overall_preference")
    if (isinstance(preference, bool) or not isinstance(preference, (int, float))
            or not -3 <= preference <= 3):
        raise SchemaError(f"{where}: field 'overall_preference' must be a number in -3..3")
    one, two = _hs2_text(row, "response1", where), _hs2_text(row, "response2", where)
    if preference == 0:
        return Drop("tie")
    chosen, rejected = (one, two) if preference < 0 else (two, one)
    return {"prompt": context, "chosen": chosen, "rejected": rejected,
            "source": "nvidia/HelpSteer3", "strength": abs(preference)}


# ------------------------------------------------------------------------------------- RLHF prompts

_LATEX = re.compile(
    r"\\(frac|sqrt|int|sum|prod|boxed|lim|cdot|times|leq|geq|neq|pi|theta|alpha|infty)\b|\$[^$\n]*"
    r"[\d=^+\-*/][^$\n]*\$|\\\(|\\\[")
_MATH_WORDS = re.compile(
    r"\b(solve|equations?|integrals?|derivatives?|polynomials?|probability|theorem|prove that|"
    r"calculate|compute|simplify|factori[sz]e|arithmetic|algebra|geometry|triangle|perimeter|"
    r"area of|sum of|product of|remainder|divisible|prime numbers?|fractions?|percent(age)?|"
    r"how many|how much|what is the value|find the value|math(s|ematics|ematical)?)\b", re.I)
_MATH_EXPR = re.compile(
    r"\d\s*[+*/^×÷=<>]\s*\(?-?\d|\b\d+\s*-\s*\d+\s*=|\b[a-z]\s*[=^]\s*-?\d|\b\d+[a-z]\b\s*[+\-=]",
    re.I)
_CONTEST = re.compile(
    r"\b(input format|output format|sample input|sample output|input specification|"
    r"output specification|constraints\s*:|time limit|memory limit|codeforces|leetcode|atcoder|"
    r"hackerrank|codechef|spoj|the first line (of (the )?input )?contains|test cases?)\b|"
    r"\d\s*(≤|<=|\\le)\s*[a-z]\w*\s*(≤|<=|\\le)", re.I)


def math_or_contest(text: str) -> Optional[str]:
    """``"math"`` or ``"competitive_code"`` when a prompt is one (§4.3.1 removes both from RLHF),
    else None.

    Competitive programming: the statement layout of contest problems (input/output format, sample
    input, constraints like ``1 ≤ n ≤ 10^5``, judge names, "the first line contains"). Math: LaTeX
    math (``\\frac``, ``$x^2 = 4$``, ...), or a math word ("solve", "equation", "probability", "how
    many", ...) together with an arithmetic or algebraic expression (``3 + 4``, ``x = 2``, ``2x +
    1``). A word alone ("compute the sentiment") or a number alone ("a 300-word essay") is not
    math."""
    if _CONTEST.search(text):
        return "competitive_code"
    if _LATEX.search(text) or (_MATH_WORDS.search(text) and _MATH_EXPR.search(text)):
        return "math"
    return None


def _user_text(prompt: Union[str, list[dict]]) -> str:
    return (prompt if isinstance(prompt, str)
            else "\n".join(m["content"] for m in prompt if m["role"] == "user"))


def rlhf_prompts_hs2(rows: Iterator) -> Iterator:
    """HelpSteer2 rows → RLHF prompt rows (``prompt`` or ``messages``), math/contest prompts
    dropped."""
    for where, row in rows:
        if isinstance(row, Bad):
            yield where, row
            continue
        try:
            prompt = hs2_prompt(_hs2_text(row, "prompt", where))
        except SchemaError as e:
            yield where, Bad(str(e))
            continue
        if isinstance(prompt, list) and prompt[-1]["role"] == "assistant":
            yield where, Bad(f"{where}: field 'prompt' ends with an assistant turn")
            continue
        yield where, _rlhf_row(prompt)


def rlhf_prompt_hs3(row: dict, where: str):
    """One HelpSteer3 row → an RLHF prompt row."""
    context = _hs3_context(row, where)
    if context[-1]["role"] == "assistant":
        raise SchemaError(f"{where}: field 'context' must end with a user turn")
    return _rlhf_row(context)


def _rlhf_row(prompt: Union[str, list[dict]]):
    reason = math_or_contest(_user_text(prompt))
    if reason:
        return Drop(reason)
    return {"prompt": prompt} if isinstance(prompt, str) else {"messages": prompt}


__all__ = ["helpsteer2_pairs", "helpsteer3_pair", "hs2_prompt", "math_or_contest",
           "rlhf_prompts_hs2", "rlhf_prompt_hs3", "HS2_KEYS"]
