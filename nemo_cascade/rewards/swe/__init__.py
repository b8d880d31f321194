"""The SWE reward: an execution-free score of an Agentless-style repair answer against the golden
patch.

Paper §4.7, Eq. 2: the answer's edits are applied to the prompt's files and scored

- **−1** if the answer cannot be parsed or its edits cannot be applied;
- **1** if the patched files equal the golden patch's (the paper: Unidiff lexical similarity = 1);
- **0** if the edits leave every file unchanged;
- otherwise a **grade in [0, 1]** (:mod:`.reward`): a judge model's P("YES") that the candidate
  resolves the issue like the golden patch (the paper's choice, Kimi-Dev-72B:
  ``JudgeGrader(JudgeClient(url))``), asked with App. C.2's elements (issue, relevant files, edit
  format, golden patch, candidate patch: :func:`judge_prompt`) and read at the verdict after
  ``<judgement>``; or, with no judge server, :func:`lexical_similarity` (``LexicalGrader``, the
  default).

Label (docs/rewards.md): ``{"golden_patch": str, "files": {path: content}, "problem_statement":
str}``; ``files`` are the files shown in the prompt, paths relative to the repository root.
:func:`validate_label` (data-loading time) also applies the golden patch: a golden patch that does
not apply or changes nothing is a one-line ValueError, never a mid-training surprise.

How an answer is read — the answer text, the edit formats, search/replace and diff application,
equality, the lexical grade, the time bounds — is in docs/rewards.md, "The SWE reward's rules";
each rule is a test in tests/unit/test_swe_reward.py.

Export: :func:`export_swebench_predictions` writes the official harness's JSONL (``instance_id``,
``model_name_or_path``, ``model_patch``); the patch is re-rendered from the applied edits as a ``git
apply``-able diff, so a sloppy but applicable model diff is exported in a form the harness accepts.
"""
from __future__ import annotations

from .diffs import changed_regions, normalize_content, render_unified_diff
from .edits import MAX_EDITS, PATH_LOOKBACK_LINES, PatchError, apply_answer
from .reward import (JUDGE_SYSTEM, JUDGE_TEMPLATE, JUDGEMENT_OPEN, MATCHES_GOLDEN,
                     MAX_JUDGE_FILES_CHARS,
                     MAX_JUDGE_SECTION_CHARS, MAX_SEQUENCE_ITEMS, OUTCOMES, PARSE_FAILURE,
                     UNCHANGED, Grader,
                     GradingCase, JudgeGrader, LexicalGrader, SWEReward, YesProbability,
                     export_swebench_predictions,
                     golden_contents, judge_prompt, lexical_similarity, model_patch, reward_batch,
                     swe_reward,
                     validate_label)

__all__ = ["swe_reward", "reward_batch", "SWEReward", "OUTCOMES", "validate_label",
           "golden_contents", "Grader",
           "GradingCase", "LexicalGrader", "JudgeGrader", "YesProbability", "judge_prompt",
           "JUDGE_TEMPLATE",
           "JUDGE_SYSTEM", "JUDGEMENT_OPEN", "MAX_JUDGE_FILES_CHARS",
           "lexical_similarity", "model_patch", "export_swebench_predictions", "apply_answer",
           "PatchError",
           "changed_regions", "normalize_content", "render_unified_diff", "MAX_EDITS",
           "PATH_LOOKBACK_LINES",
           "MAX_SEQUENCE_ITEMS", "MAX_JUDGE_SECTION_CHARS", "PARSE_FAILURE", "UNCHANGED",
           "MATCHES_GOLDEN"]
