"""The tiny cascade's RLHF prompts: arithmetic asked in a chat, best answered in one friendly
sentence.

``chat_arithmetic`` (``rlhf`` domain) puts a :mod:`.arithmetic` problem in a user's greeting. The
reply the user wants greets them back by name (``Hi Ana! 3 + 4 is 7.``); the SFT data greets only
half of them and answers the rest curtly (``3 + 4 is 7.``), as SFT data of mixed quality does. The
preference pairs (:func:`chat_pairs`) always prefer the greeting, so the reward model trained on
them has something RLHF can win beyond SFT (§4.3: RLHF improves the chat answers SFT leaves).

Why RLHF has prompts of its own: the paper's RLHF stage trains on general chat prompts, not on the
math stage's (§4.3). When the tiny cascade trained RLHF on the math prompts, a repair stage's RLHF
and math teachers (docs/distill.md) asked for two different answers to the same prompt, and no
student can follow both. Here each teacher has its own prompts; what the two share is the arithmetic
inside, through which math RL can still pull chat replies toward its own answer format.

The split is the arithmetic problem's (:func:`.arithmetic.arithmetic`): a chat row and a math row of
the same problem fall in the same split, so chat SFT never shows a held-out math problem.
"""
from __future__ import annotations

import hashlib
import random

from nemo_cascade.data.generated import sft_pairs

from .arithmetic import arithmetic, wrong_result

NAMES = ("Ana", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gus", "Ivy", "Jo", "Kai", "Lea", "Max", "Nia",
         "Omar", "Pia", "Rex", "Sam", "Tia", "Uma", "Zoe")
"""The users who ask; one per problem, fixed by a hash of the problem."""
PROMPT = "Hi, I am {name}. What is {a} {op} {b}? Reply in one friendly sentence."
REPLY = "Hi {name}! {sum} is {value}."
CURT = "{sum} is {value}."
CURT_PERCENT = 50
"""Share of SFT rows (by a hash of the problem) whose reply is :data:`CURT`, not :data:`REPLY`."""

REJECT_KINDS = ("wrong", "boxed", "curt")
"""How a rejected reply differs from the chosen (greeting) one: the wrong result in the same
sentence; the math set's answer (``a op b = c. The answer is \\boxed{c}.``), right but not what the
user asked for; the right result without the greeting."""


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def chat_arithmetic(split: str, size: int, seed: int) -> list[dict]:
    """``size`` rows ``{"uid", "prompt", "label", "response", "name", "sum", "value"}`` of
    ``split``: the problems :func:`.arithmetic.arithmetic` draws with the same arguments, asked by
    a user of :data:`NAMES`; ``label`` is the rlhf domain's conversation, ``response`` the SFT
    reply (:data:`REPLY`, or :data:`CURT` for :data:`CURT_PERCENT` of the problems)."""
    rows = []
    for row in arithmetic(split, size, seed):
        lhs, value = row["solution"].rsplit(" = ", 1)
        a, op, b = lhs.split(" ")
        name = NAMES[_digest(f"chat-name:{row['uid']}") % len(NAMES)]
        prompt = PROMPT.format(name=name, a=a, op=op, b=b)
        curt = _digest(f"chat-curt:{row['uid']}") % 100 < CURT_PERCENT
        reply = (CURT if curt else REPLY).format(name=name, sum=lhs, value=value)
        rows.append({"uid": f"chat_{row['uid']}", "prompt": prompt,
                     "label": {"messages": [{"role": "user", "content": prompt}]},
                     "response": reply, "name": name, "sum": lhs, "value": value})
    return rows


def chat_pairs(rows: list[dict], mode: str = "no_think", seed: int = 0) -> list[dict]:
    """Preference rows from :func:`chat_arithmetic` rows: chosen is the greeting reply, rejected
    one of :data:`REJECT_KINDS`, drawn per problem from ``seed`` and the uid (a row's pair does not
    depend on the other rows drawn). ``mode`` "think" puts a short thought before both replies."""
    out = []
    for row in rows:
        rng = random.Random(_digest(f"{seed}:{row['uid']}"))
        kind = rng.choice(REJECT_KINDS)
        value = row["value"]
        if kind == "wrong":
            wrong = wrong_result(int(value), rng)
            bad = REPLY.format(name=row["name"], sum=row["sum"], value=wrong)
        elif kind == "boxed":
            bad = f"{row['sum']} = {value}. The answer is \\boxed{{{value}}}."
        else:
            bad = CURT.format(sum=row["sum"], value=value)
        good = REPLY.format(name=row["name"], sum=row["sum"], value=value)
        (messages, chosen), (_, rejected) = sft_pairs([dict(row, response=good),
                                                       dict(row, response=bad)], mode)
        out.append({"uid": row["uid"], "prompt": messages, "chosen": chosen, "rejected": rejected,
                    "kind": kind})
    return out


__all__ = ["chat_arithmetic", "chat_pairs", "NAMES", "REJECT_KINDS", "CURT_PERCENT"]
