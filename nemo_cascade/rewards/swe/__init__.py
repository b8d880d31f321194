"""The SWE reward: an execution-free score of an Agentless-style repair answer against the golden patch.

Paper §4.7, Eq. 2: the answer's edits are applied to the prompt's files and scored

- **−1** if the answer cannot be parsed or its edits cannot be applied;
- **1** if the patched files equal the golden patch's (the paper: Unidiff lexical similarity = 1);
- **0** if the edits leave every file unchanged;
- otherwise a **grade in [0, 1]** (:mod:`.reward`): a judge model's P("YES") that the candidate resolves the
  issue like the golden patch (the paper's choice, Kimi-Dev-72B: ``JudgeGrader(JudgeClient(url))``), asked with
  App. C.2's elements (issue, relevant files, edit format, golden patch, candidate patch: :func:`judge_prompt`)
  and read at the verdict after ``<judgement>``; or, with no judge server, :func:`lexical_similarity`
  (``LexicalGrader``, the default).

Label (docs/rewards.md): ``{"golden_patch": str, "files": {path: content}, "problem_statement": str}``;
``files`` are the files shown in the prompt, paths relative to the repository root. :func:`validate_label`
(data-loading time) also applies the golden patch: a golden patch that does not apply or changes nothing is
a one-line ValueError, never a mid-training surprise.

Rules (each one is a test in tests/unit/test_swe_reward.py):

- **Answer text.** A response opening with ``<think>`` is judged only after ``</think>``. Without
  ``</think>`` it scores ``unterminated_score``, by default **−1**, not the generic 0 of other domains: Eq. 2 gives
  an answer that cannot be parsed −1, and a 0 (= "left the code unchanged", better than a failed edit)
  would reward running out of tokens over attempting a fix. ``SWEReward(unterminated_score=0.0)`` restores
  the DESIGN rule. A non-string response scores −1.
- **Formats.** Agentless search/replace blocks (``### path`` then ``<<<<<<< SEARCH`` / ``=======`` /
  ``>>>>>>> REPLACE``, fenced or not), or a unified diff. A block's file is named on one of the
  :data:`~.edits.PATH_LOOKBACK_LINES` (8) lines before its SEARCH marker — ``### path``, or a bare path
  line naming a given file; without one it edits the previous block's file. If the answer has any SEARCH
  marker it is read as search/replace only.
- **Nothing to parse.** An empty (whitespace-only) answer proposes no change: 0. A non-empty answer without
  a single edit, a malformed block or hunk, or more than :data:`MAX_EDITS` edits: −1.
- **Search/replace.** Blocks apply in order, each to the file as edited so far. The SEARCH lines must occur
  **exactly once** in that file, compared line by line modulo trailing whitespace; zero or several
  occurrences are −1 — an ambiguous edit could be meant for either place, and Agentless's prompt asks for
  enough context to be unique. An empty SEARCH is −1. A block with several ``=======`` lines (the edited
  text holds one, e.g. an RST title) is read at the divider whose SEARCH occurs exactly once (the longest
  such SEARCH if several do). A block for a file not in ``files`` is −1 (a diff from ``/dev/null``
  creates a file).
- **Unified diffs** (models' are sloppy): hunks are placed by their context, not their header. Header
  counts are used only when they fit the body exactly; otherwise the hunk runs to the first line that cannot
  be a hunk line. Missing ``a/`` ``b/`` prefixes, wrong line numbers and blank context lines without their
  leading space are tolerated. A hunk's pre-image (context + removed lines) must match the file modulo
  trailing whitespace at or after the previous hunk, else −1; among several matches the one nearest the
  header's line number wins (how ``patch`` disambiguates). ``--- /dev/null`` creates a file that must not
  exist; ``+++ /dev/null`` deletes one and must remove all of it (without a hunk: an empty file, as
  :func:`render_unified_diff` writes it). A hunk with no line but ``\\ No newline`` markers is malformed.
  Renames and edits to files not in ``files`` are −1.
- **Equality** is semantic: both patches are applied and the resulting files compared modulo trailing
  whitespace (each line right-stripped, trailing blank lines dropped, CRLF as LF), so search/replace and
  diff answers, any context size or hunk split, are equal when they make the same change.
- **Lexical grade** (:func:`lexical_similarity`): difflib's ``SequenceMatcher`` ratio 2·M/(|c|+|g|) between
  the candidate's and the golden patch's *changed-region sequences*: per file, per changed region of a
  canonical diff of the normalised contents, an anchor (file, first old line) then the removed and the
  added lines, each line one item. Whole lines, not characters: it is computed from contents (so
  independent of how the model wrote the patch, unlike SWE-RL's character ratio over the patch text), a
  one-line fix that rewrites the right line differently still gets credit for its anchor and removed line
  (2/3), and it stays fast; past :data:`MAX_SEQUENCE_ITEMS` items it becomes the linear multiset Dice
  coefficient. It is < 1 for any change that differs from the golden one.
- **Bounded time.** Markers are found by one regex scan, diffs in one pass over the lines; each edit costs
  a few ``str.find`` scans of its file, and at most :data:`MAX_EDITS` edits are read; the canonical diff
  aligns at most :data:`~.diffs.MAX_DIFF_LINES` lines per file with difflib. The worst 1 MB inputs in the
  tests take about a second on one core; typical answers a few milliseconds.

Export: :func:`export_swebench_predictions` writes the official harness's JSONL (``instance_id``,
``model_name_or_path``, ``model_patch``); the patch is re-rendered from the applied edits as a ``git
apply``-able diff, so a sloppy but applicable model diff is exported in a form the harness accepts.
"""
from __future__ import annotations

from .diffs import changed_regions, normalize_content, render_unified_diff
from .edits import MAX_EDITS, PATH_LOOKBACK_LINES, PatchError, apply_answer
from .reward import (JUDGE_SYSTEM, JUDGE_TEMPLATE, JUDGEMENT_OPEN, MATCHES_GOLDEN, MAX_JUDGE_FILES_CHARS,
                     MAX_JUDGE_SECTION_CHARS, MAX_SEQUENCE_ITEMS, OUTCOMES, PARSE_FAILURE, UNCHANGED, Grader,
                     GradingCase, JudgeGrader, LexicalGrader, SWEReward, YesProbability, export_swebench_predictions,
                     golden_contents, judge_prompt, lexical_similarity, model_patch, reward_batch, swe_reward,
                     validate_label)

__all__ = ["swe_reward", "reward_batch", "SWEReward", "OUTCOMES", "validate_label", "golden_contents", "Grader",
           "GradingCase", "LexicalGrader", "JudgeGrader", "YesProbability", "judge_prompt", "JUDGE_TEMPLATE",
           "JUDGE_SYSTEM", "JUDGEMENT_OPEN", "MAX_JUDGE_FILES_CHARS",
           "lexical_similarity", "model_patch", "export_swebench_predictions", "apply_answer", "PatchError",
           "changed_regions", "normalize_content", "render_unified_diff", "MAX_EDITS", "PATH_LOOKBACK_LINES",
           "MAX_SEQUENCE_ITEMS", "MAX_JUDGE_SECTION_CHARS", "PARSE_FAILURE", "UNCHANGED", "MATCHES_GOLDEN"]
