"""SWE RL repair prompts (paper §4.7.1): the issue and the files to edit in the Agentless repair
prompt, with the context each instance gets decided by the stage's prompt limit.

§4.7.1 trains on two kinds of repair prompt: (a) the **ground-truth files** only (those the
golden patch edits), and (b) the ground truth mixed with **noisy files** the localizer
(DeepSeek-R1-0528, §7.1) ranked as relevant, at most 5 files in all, shuffled. The limit is the
stage's ``rollout.max_prompt_tokens``, so the 8B's input curriculum (16K → 24K, T13/T20) shows a
(b) instance more noisy files in its second part, and the 14B's 32K stage more again.
:func:`build_repair_prompt` builds one prompt per instance:

1. the variant: (a) with probability ``truth_only_share`` (``Data.swe_truth_only_share``; the
   paper gives no ratio, so the default is an even split), else (b) — drawn first from the
   instance's seeded ``rng``, so an instance keeps its variant at every prompt limit;
2. the ground-truth files, always (all of them, before any noisy file); an instance whose ground
   truth alone does not fit ``budget_tokens``, or holds more than ``max_files`` files, is dropped;
3. for (b), noisy files in the localizer's rank order, each added if the templated prompt still
   fits (one that does not is skipped for the next), until ``max_files`` files are shown; an
   instance that cannot show ``min_noisy_files`` of them (default 1) falls back to (a) rather than
   being dropped;
4. the shown files are shuffled with the same ``rng`` (one per instance and data seed), so the
   ground truth is not always first and a resumed run rebuilds exactly the same prompts.

The prompt text is Agentless's repair prompt (Xia et al. 2024, "Agentless: Demystifying LLM-based
Software Engineering Agents", github.com/OpenAutoCoder/Agentless, MIT), whose search/replace format
the SWE reward parses (``rewards/swe``); the evaluation suite (``evaluate/swe_tasks.py``) renders
the same template.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

MAX_FILES = 5
"""§4.7.1: a repair prompt shows at most five files (ground truth and noisy together)."""
MIN_NOISY_FILES = 1
"""The fewest noisy files a ground-truth-plus-noisy prompt shows; with fewer, the instance gets the
ground-truth-only prompt (§4.7.1's variant (a))."""
TRUTH_ONLY_SHARE = 0.5
"""The share of instances given the ground-truth-only prompt (§4.7.1 uses both, gives no ratio)."""

REPAIR_PROMPT = """We are currently solving the following issue within our repository. Here is the \
issue text:
--- BEGIN ISSUE ---
{issue}
--- END ISSUE ---

Below are some code segments, each from a relevant file. One or more of these files may contain \
bugs.\
{note}

--- BEGIN FILE ---
{files}
--- END FILE ---

Please first localize the bug based on the issue statement, and then generate *SEARCH/REPLACE* \
edits to fix \
the issue.

Every *SEARCH/REPLACE* edit must use this format:
1. The file path
2. The start of search block: <<<<<<< SEARCH
3. A contiguous chunk of lines to search for in the existing source code
4. The dividing line: =======
5. The lines to replace into the source code
6. The end of the replace block: >>>>>>> REPLACE

Here is an example:

```python
### mathweb/flask/app.py
<<<<<<< SEARCH
from flask import Flask
=======
import math
from flask import Flask
>>>>>>> REPLACE
```

Please note that the *SEARCH/REPLACE* edit REQUIRES PROPER INDENTATION. If you would like to add \
the line \
'        print(x)', you must fully write that out, with all those spaces before the code!
Wrap the *SEARCH/REPLACE* edit in blocks ```python...```."""
"""Agentless's repair prompt. ``{note}`` follows the files' introduction (the evaluation suite
explains its "... lines A-B omitted ..." markers there; training prompts show whole files and leave
it empty)."""


def render_repair_prompt(issue: str, files: Sequence[tuple[str, str]], note: str = "") -> str:
    """The repair prompt showing ``files`` (``(path, content)``) in the given order, each as ``###
    path`` and its content — the ``### path`` line the search/replace answer names its file with."""
    shown = "\n".join(f"### {path}\n{content.rstrip()}\n" for path, content in files)
    return REPAIR_PROMPT.format(issue=issue.strip(), note=f" {note}" if note else "",
                                files=shown.rstrip())


@dataclass(frozen=True)
class RepairPrompt:
    """A built repair prompt: its text and the files it shows, in prompt order (the reward applies
    the answer's edits to exactly these; an edit to a noisy file is a change the golden patch does
    not make)."""
    text: str
    files: dict[str, str]
    noisy: int
    """How many of ``files`` are localized noisy files (the rest are the ground truth)."""
    fell_back: bool = False
    """Drawn for ground truth plus noisy files, shown the ground truth only: no noisy file fit."""


@dataclass(frozen=True)
class PromptBudget:
    """What :func:`build_repair_prompt` needs from the stage that loads the rows: the prompt limit,
    how to count a prompt's tokens as the rollout engine will see it (templated, generation prompt
    included), the data seed of the shuffle, and the §4.7.1 settings (``Data.swe_max_files``,
    ``swe_min_noisy_files``, ``swe_truth_only_share``)."""
    limit: Optional[int]
    """``rollout.max_prompt_tokens``; None = no limit (the first ``max_files`` files)."""
    count_tokens: Callable[[str], int]
    seed: int = 0
    max_files: int = MAX_FILES
    min_noisy_files: int = MIN_NOISY_FILES
    truth_only_share: float = TRUTH_ONLY_SHARE

    def rng(self, instance: str) -> random.Random:
        """The shuffle's generator for one instance: fixed by the data seed and the instance id (a
        string seed is hashed with SHA-512, independent of PYTHONHASHSEED), so every load builds the
        same prompt."""
        return random.Random(f"swe-prompt:{self.seed}:{instance}")


def _noisy_files(truth: list[tuple[str, str]], candidates: Sequence[tuple[str, str]], fits,
                 max_files: int) -> list[tuple[str, str]]:
    """The localized files that fit next to the ground truth, in rank order (a ground-truth path
    among the candidates is not counted twice; one that does not fit is skipped for the next)."""
    noisy: list[tuple[str, str]] = []
    seen = {path for path, _ in truth}
    for path, content in candidates:
        if len(truth) + len(noisy) >= max_files:
            break
        if path not in seen and fits(truth + noisy + [(path, content)]):
            noisy.append((path, content))
        seen.add(path)
    return noisy


def build_repair_prompt(issue: str, golden_files: Mapping[str, str],
                        candidate_files: Sequence[tuple[str, str]],
                        budget_tokens: Optional[int], count_tokens: Callable[[str], int],
                        rng: random.Random,
                        max_files: int = MAX_FILES, min_noisy_files: int = MIN_NOISY_FILES,
                        truth_only_share: float = TRUTH_ONLY_SHARE) -> Optional[RepairPrompt]:
    """The §4.7.1 repair prompt of one instance (steps in the module docstring), or None when it is
    dropped.

    ``golden_files``: ``{path: content}`` of the files the golden patch edits. ``candidate_files``:
    the localizer's ``(path, content)`` in rank order. ``count_tokens(text)``: the tokens of
    ``text`` as the engine's prompt. ``budget_tokens``: the prompt limit (None: no limit). Every
    returned prompt has ``count_tokens(text) <= budget_tokens``."""
    def fits(shown: Sequence[tuple[str, str]]) -> bool:
        return (budget_tokens is None
                or count_tokens(render_repair_prompt(issue, shown)) <= budget_tokens)

    truth_only = rng.random() < truth_only_share  # first: the variant does not depend on the limit
    truth = list(golden_files.items())
    if len(truth) > max_files or not fits(truth):
        return None
    noisy = [] if truth_only else _noisy_files(truth, candidate_files, fits, max_files)
    while noisy and len(noisy) >= min_noisy_files:
        shown = truth + noisy
        rng.shuffle(shown)
        # Counted in selection order above; another order can merge tokens differently at a file
        # boundary, so the shuffled prompt is counted again and the last noisy file given up in the
        # rare case it no longer fits.
        if fits(shown):
            return RepairPrompt(render_repair_prompt(issue, shown), dict(shown), len(noisy))
        noisy.pop()
    shown = truth[:]
    rng.shuffle(shown)
    shown = shown if fits(shown) else truth  # the order counted above, if the shuffled one is over
    prompt = render_repair_prompt(issue, shown)
    return RepairPrompt(prompt, dict(shown), 0, fell_back=not truth_only)


__all__ = ["MAX_FILES", "MIN_NOISY_FILES", "TRUTH_ONLY_SHARE", "REPAIR_PROMPT", "PromptBudget",
           "RepairPrompt", "build_repair_prompt", "render_repair_prompt"]
