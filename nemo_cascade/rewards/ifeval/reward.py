"""Turning checker verdicts into IF-RL rewards: per-instruction strict/loose verdicts, the
prompt-level 0/1 reward, per-instruction pass rates, and the thinking-model reward with a
reward-model bonus (paper §4.4).

Strict and loose follow the IFEval paper (Zhou et al. 2023, §2.2) as implemented by lm-eval and
IFBench: strict checks the response as is; loose passes an instruction if *any* of eight variants
passes — the response with its first line, its last line or both removed, each with and without
``*`` characters. A blank (variant of a) response never passes.

Thinking responses (docs/rewards.md): only the text after ``</think>`` is judged, with the
whitespace that separates it from the thinking removed; a response whose thinking never closed fails
every instruction.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from ...data.chat import split_thinking
from ...data.schemas import RefusedRow
from .spec import Instruction, bind
from .taxonomy import ALL, EVALUATION_ONLY

logger = logging.getLogger(__name__)
Registry = Mapping[str, Instruction]


def bind_label(label: Any, registry: Registry = ALL) -> list[tuple[Instruction, dict]]:
    """The label's instructions with validated kwargs. ValueError (one line) for a malformed
    label."""
    if not isinstance(label, Mapping):
        raise ValueError(f"ifeval label must be a dict, got {type(label).__name__}")
    ids = label.get("instruction_id_list")
    if not isinstance(ids, (list, tuple)) or not ids or not all(isinstance(i, str) for i in ids):
        raise ValueError("ifeval label needs 'instruction_id_list': a non-empty list of "
                         "instruction ids")
    kwargs = label.get("kwargs")
    if kwargs is None:
        kwargs = [{}] * len(ids)
    if not isinstance(kwargs, (list, tuple)) or len(kwargs) != len(ids):
        raise ValueError("ifeval label: 'kwargs' must be a list with one dict per instruction "
                         f"({len(ids)})")
    prompt = label.get("prompt", "")
    if not isinstance(prompt, str):
        raise ValueError("ifeval label: 'prompt' must be a string")
    bound = []
    for iid, kw in zip(ids, kwargs):
        instruction = registry.get(iid)
        if instruction is None:
            raise ValueError(f"ifeval label: unknown instruction id {iid!r}")
        bound.append((instruction, bind(instruction, kw)))
    return bound


def validate_label(label: Any, registry: Registry = ALL) -> None:
    """Raise a one-line ValueError if ``label`` is not a well-formed IFEval/IFBench row (call at
    load time)."""
    bind_label(label, registry)


def validate_training_label(label: Any, *, allow_eval_instructions: bool = False,
                            setting: str = "data.allow_eval_instructions") -> None:
    """:func:`validate_label` for a row an IF-RL stage trains on (§4.4.2: IFEval, then
    IFBench-Train).

    A well-formed label whose ids include one of the IFBench *test* taxonomy
    (``taxonomy.EVALUATION_ONLY``) is refused with :class:`~nemo_cascade.data.schemas.RefusedRow` —
    training on the evaluation's constraints leaks into the ``ifbench`` suite's score — unless
    ``allow_eval_instructions`` (the source's ``Data.allow_eval_instructions``; ``setting`` is its
    config path, named in the message).
    """
    bind_label(label, ALL)
    if allow_eval_instructions:
        return
    held = [iid for iid in label["instruction_id_list"] if iid in EVALUATION_ONLY]
    if held:
        raise RefusedRow(f"ifeval label: instruction id {held[0]!r} is in the IFBench test "
                         "taxonomy, which is for evaluation only (IF-RL trains on IFEval and "
                         f"IFBench-Train, §4.4.2); set {setting}=true to train on it")


def loose_variants(text: str) -> list[str]:
    """The eight texts the loose verdict tries, in the reference's order."""
    lines = text.split("\n")
    cut = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(),
           "\n".join(lines[1:-1]).strip()]
    return [text, text.replace("*", ""), *cut, *(c.replace("*", "") for c in cut)]


def _passes(instruction: Instruction, kwargs: dict, text: str) -> bool:
    if not text.strip():
        return False
    try:
        return bool(instruction.check(text, **kwargs))
    # a verifier must never raise on model output (docs/rewards.md)
    except Exception:  # noqa: BLE001
        logger.warning("checker %s raised on a %d-character response; counted as not followed",
                       instruction.id, len(text), exc_info=True)
        return False


def judged_text(response: Any) -> Optional[str]:
    """The part of ``response`` the checkers see, or None when nothing can be judged (unclosed
    thinking)."""
    if not isinstance(response, str):
        return None
    thinking, answer, closed = split_thinking(response)
    if not closed:
        return None
    return answer if thinking is None else answer.lstrip()


def per_instruction(response: str, label: Any, *, loose: bool = False,
                    registry: Registry = ALL) -> list[bool]:
    """One verdict per instruction of ``label``, in order (strict by default)."""
    bound = bind_label(label, registry)
    text = judged_text(response)
    if text is None:
        return [False] * len(bound)
    texts = loose_variants(text) if loose else [text]
    return [any(_passes(ins, kw, t) for t in texts) for ins, kw in bound]


def ifeval_reward(response: str, label: Any, *, loose: bool = False) -> float:
    """1.0 iff the response follows every instruction of the label (paper §4.4: R_IF), else 0.0.

    All or nothing, as the paper's R_IF (§4.4.2: the thinking models' RM bonus needs R_IF = 1). The
    IF-RLVR verifier of open-instruct, which the released IF-RLVR data was made for, averages
    instead (the fraction of instructions followed); that is deliberately not what is trained
    here."""
    return 1.0 if all(per_instruction(response, label, loose=loose)) else 0.0


def ifeval_reward_loose(response: str, label: Any) -> float:
    """:func:`ifeval_reward` with the loose verdicts."""
    return ifeval_reward(response, label, loose=True)


def instruction_pass_rates(
        results: Iterable[tuple[Sequence[str], Sequence[bool]]]) -> dict[str, float]:
    """Pass rate per instruction id over ``(instruction_id_list, verdicts)`` pairs, e.g. an
    evaluation run's labels zipped with :func:`per_instruction`; ids sorted."""
    passed: dict[str, int] = {}
    seen: dict[str, int] = {}
    for ids, verdicts in results:
        if len(ids) != len(verdicts):
            raise ValueError(f"{len(ids)} instruction ids but {len(verdicts)} verdicts")
        for iid, ok in zip(ids, verdicts):
            seen[iid] = seen.get(iid, 0) + 1
            passed[iid] = passed.get(iid, 0) + bool(ok)
    return {iid: passed[iid] / seen[iid] for iid in sorted(seen)}


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def if_reward_with_rm(r_if_G: Sequence[float], rm_scores_G: Sequence[float],
                      eps: float = 1e-6) -> list[float]:
    """IF-RL reward of a thinking model's group (paper §4.4.2): ``R_IF + sigmoid(ẑ_RM)`` where the
    response follows all instructions (``R_IF = 1``), else 0.

    ``ẑ_RM = (s − mean(s)) / (std(s) + eps)`` over the whole group's reward-model scores ``s``, with
    the unbiased std as in the GRPO advantage (``algorithms/grpo.py``); a group of one, or of equal
    scores, has ẑ = 0 (bonus 0.5). So a passing response earns 1 to 2, more the more the RM prefers
    it to its siblings, and the RM cannot reward a response that breaks an instruction.
    """
    if len(r_if_G) != len(rm_scores_G):
        raise ValueError(f"{len(r_if_G)} IF rewards but {len(rm_scores_G)} RM scores")
    scores = [float(s) for s in rm_scores_G]
    if not all(math.isfinite(s) for s in scores):
        raise ValueError(f"non-finite reward-model score in {scores}")
    g = len(scores)
    if g <= 1 or all(s == scores[0] for s in scores):
        z_G = [0.0] * g
    else:
        # z is scale-free: (s - mean) / (std + eps) equals the same on s / c with eps / c. Dividing
        # by the largest magnitude first keeps the sums and squares finite for any finite scores.
        scale = max(abs(s) for s in scores)
        t_G = [s / scale for s in scores]
        mean = sum(t_G) / g
        spread = math.sqrt(sum((t - mean) ** 2 for t in t_G) / (g - 1))
        z_G = [(t - mean) / (spread + eps / scale) for t in t_G]
    return [float(r) + _sigmoid(z) if r == 1 else 0.0 for r, z in zip(r_if_G, z_G)]


__all__ = ["bind_label", "validate_label", "validate_training_label", "per_instruction",
           "ifeval_reward",
           "ifeval_reward_loose", "instruction_pass_rates", "if_reward_with_rm", "loose_variants",
           "judged_text"]
