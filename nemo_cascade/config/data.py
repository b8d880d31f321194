"""Where a stage's rows come from (:class:`Data`): the source, its split and size, how bad rows and
long prompts are handled, and its weight in a blend or a prompt pool. A section of
:class:`~.schema.Stage` (``data``, ``extra_data``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Data:
    source: str = ""
    """A jsonl/parquet path, or ``synthetic:NAME`` / ``benchmark:NAME`` (sets registered in
    data.generated)."""
    size: int = 0
    """Synthetic sets: number of rows to generate. File sets: 0 = all rows."""
    split: Literal["train", "test"] = "train"
    seed: int = 0
    max_bad_rows: int = 0
    """Rows that fit no schema of the stage's domain (or whose label fails its check; an SFT or
    preference row of the wrong shape), and jsonl lines that are not a JSON object in UTF-8, are
    skipped and counted up to this many, by every loader (RL prompts, SFT, preference pairs); one
    more stops loading with the first bad row's file, line and field. 0 = strict."""
    min_prompt_tokens: int = 0
    """Drop rows whose templated prompt is shorter than this many tokens; counted and logged like
    those over the stage's prompt limit (``rollout.max_prompt_tokens``, SFT ``sft_max_tokens``). SWE
    RL drops prompts under 8K tokens (§4.7): short ones hold too little of the repository to learn
    repair from. 0 = keep all."""
    repeat: int = 1
    """Times this source's rows count in an SFT blend (every epoch sees each row ``repeat`` times;
    stage-2 SFT: science ×2, SWE ×3, §3.3) or in a GRPO prompt pool (each copy its own uid: a
    mixed-domain run balancing a small source)."""
    share: float = 0.0
    """GRPO and distill: this source's share of the stage's prompt pool, in (0, 1], instead of its
    share by row count (0). Set on every source of a stage or on none, summing to 1; a source is
    repeated (whole copies, then a seeded part of one) to reach its share, never cut.
    Multi-domain RL in fixed proportions ([P2]: 55 % MCQA, 30 % tool calling, 15 % structured
    output)."""
    keep_mode: Literal["", "think", "no_think"] = ""
    """SFT rows: keep only those whose learned answer is in this mode (its user turn's ``mode``,
    else the stage's ``mode``), the others counted and left out. A thinking-only model learns from
    the thinking answers of the general data, whose rows answer in both modes (§3.2); its SFT
    differs from the unified model's (T8). Empty: every row."""
    sft_turns: Literal["all", "last"] = "all"
    """SFT rows of several assistant turns (multi-turn chat, tool calling): ``all`` learns every
    assistant turn in one sequence, each after the context it was answered in (§3: the tool-calling
    set's 1.41M turns are its training targets); ``last`` learns only the final one, the earlier
    turns being context."""
    swe_max_files: int = 5
    """swe rows with localized ``candidate_files``: the most files a built repair prompt shows,
    ground truth and noisy together (§4.7.1: at most 5; data/swe_prompts.py)."""
    swe_min_noisy_files: int = 1
    """swe rows with localized ``candidate_files``: the fewest noisy files a ground-truth-plus-noisy
    prompt shows; a row drawn for one that cannot show this many next to its ground truth within
    ``rollout.max_prompt_tokens`` gets the ground-truth-only prompt instead (§4.7.1's two variants).
    A row is dropped only when its ground truth alone does not fit."""
    swe_truth_only_share: float = 0.5
    """swe rows with localized ``candidate_files``: the share of instances shown their ground-truth
    files only (§4.7.1's first variant; the others get ground truth plus noisy files), drawn per
    instance and ``seed``. The paper uses both variants and gives no ratio: an even split."""
    domain: str = ""
    """GRPO: the reward domain this source's prompts are read and scored in; empty = the stage's
    ``domain``. A stage whose ``extra_data`` name other domains trains them all in one run:
    mixed-domain RL, the baseline the cascade's domain-wise stages are compared with
    (docs/results/smollm2.md)."""
    allow_eval_instructions: bool = False
    """IF-RL (``ifeval``) prompts: allow instruction ids of the IFBench *test* taxonomy, which is
    for evaluation only. Off, a row holding one stops loading with its file, line and id: IF-RL
    trains on IFEval, then on IFBench-Train (§4.4.2), and training on the test constraints leaks
    into the ``ifbench`` suite's score."""
    cache: bool = True
    """SFT and RL prompt files: tokenize once, in shares over the ranks, into a cache beside the
    data (``.nemo_cascade_cache/``; ``<run dir>/data_cache/`` when the data folder is read-only)
    that restarts and later stages map instead of re-tokenizing (data/sft_cache.py,
    data/prompt_cache.py). false: every rank reads and tokenizes the whole file in memory."""
    math_instruction: str = ("Please reason step by step, and put your final answer within "
                             "\\boxed{}.")
    """math prompts: appended to the problem after a blank line (``data.math_prompt``), the phrasing
    the math evaluation suites use, so RL trains on the prompt it is evaluated with. The released
    math RL set holds bare problems and the reward reads the last ``\\boxed{}`` (§4.5); this is the
    AceMath / AceReason request for it. A prompt that already asks for ``\\boxed`` is kept as it is;
    "" keeps every row as it is."""


__all__ = ["Data"]
