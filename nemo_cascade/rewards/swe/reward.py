"""The SWE reward of paper §4.7, Eq. 2 (rules in ``swe/__init__``), its graders, and the SWE-bench
export."""
from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Protocol, Sequence, Union

from ...data.chat import split_thinking
from .diffs import Contents, changed_regions, normalize_content, normalized, render_unified_diff
from .edits import PatchError, apply_answer

PARSE_FAILURE = -1.0
"""Eq. 2: the answer cannot be parsed or its edits cannot be applied."""
UNCHANGED = 0.0
"""Eq. 2: the edits leave every file as it was."""
MATCHES_GOLDEN = 1.0
"""Eq. 2: the edited files equal the golden patch's (modulo trailing whitespace)."""

MAX_SEQUENCE_ITEMS = 4000
"""Above this many changed-region items (both changes together) :func:`lexical_similarity` switches
from difflib's ratio (quadratic in the worst case) to the linear multiset Dice coefficient. Golden
patches in SWE-bench Lite have at most a few hundred items, so only runaway answers cross it."""
MAX_JUDGE_SECTION_CHARS = 20_000
"""Each of issue, golden and candidate patch is cut to this many characters in the judge prompt, so
one runaway patch cannot push the issue out of the judge's context (the judge client keeps the last
tokens)."""
MAX_JUDGE_FILES_CHARS = 60_000
"""The relevant files' contents together are cut to this many characters in the judge prompt (each
file also to :data:`MAX_JUDGE_SECTION_CHARS`)."""


# ------------------------------------------------------------------ labels

def validate_label(label: Any) -> None:
    """Raise a one-line ValueError unless ``label`` is ``{"golden_patch": str, "files": {path: str},
    "problem_statement": str}`` whose golden patch applies to ``files`` and changes them."""
    golden_contents(label)


def golden_contents(label: Any) -> dict[str, Optional[str]]:
    """The label checked (see :func:`validate_label`) and its golden patch applied: the normalised
    ``{path: content}`` of the files it touches."""
    if not isinstance(label, dict):
        raise ValueError(f"swe label: expected a dict, got {type(label).__name__}")
    for key in ("golden_patch", "problem_statement"):
        if not isinstance(label.get(key), str):
            raise ValueError(f"swe label: {key!r} must be a string, got "
                             f"{type(label.get(key)).__name__}")
    files = label.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str)
                                              and isinstance(v, str) for k, v in files.items()):
        raise ValueError("swe label: 'files' must be a dict {path: file content} of strings")
    try:
        after = apply_answer(label["golden_patch"], label["files"])
    except PatchError as e:
        raise ValueError(f"swe label: golden_patch does not apply to 'files': {e}") from None
    after = normalized(after)
    if not after or _unchanged(label["files"], after):
        raise ValueError("swe label: golden_patch changes nothing in 'files'")
    return after


def _unchanged(files: Contents, after_normalized: Contents) -> bool:
    return all(normalize_content(files.get(p)) == text for p, text in after_normalized.items())


# -------------------------------------------------------- graders (the "otherwise" branch of Eq. 2)

@dataclass
class GradingCase:
    """A candidate change that applied, changed something and differs from the golden one, as
    normalised ``{path: content}``: ``before`` for every path either one touched, ``golden`` and
    ``candidate`` for the paths each one touched."""
    problem_statement: str
    before: Contents
    golden: Contents
    candidate: Contents

    def diffs(self) -> tuple[str, str]:
        """(golden, candidate) as canonical unified diffs of normalised contents."""
        return (render_unified_diff(self.before, self.golden),
                render_unified_diff(self.before, self.candidate))


class Grader(Protocol):
    """Scores in [0, 1] for cases Eq. 2 leaves to a similarity; called once per batch with all of
    them."""

    def grade(self, cases: Sequence[GradingCase]) -> list[float]: ...


def lexical_similarity(candidate: Sequence[tuple], golden: Sequence[tuple]) -> float:
    """difflib's ``SequenceMatcher(None, candidate, golden, autojunk=False).ratio()`` = 2·M / (|c| +
    |g|), M the items in matching blocks, over changed-region sequences
    (:func:`~.diffs.changed_regions`: region anchors and whole signed lines). Past
    :data:`MAX_SEQUENCE_ITEMS` items, the multiset Dice coefficient 2·|c ∩ g| / (|c| + |g|) (an
    upper bound of the ratio, linear time)."""
    total = len(candidate) + len(golden)
    if not total:
        return 1.0
    if total > MAX_SEQUENCE_ITEMS:
        return 2 * sum((Counter(candidate) & Counter(golden)).values()) / total
    return difflib.SequenceMatcher(None, candidate, golden, autojunk=False).ratio()


class LexicalGrader:
    """The execution-free, server-free grade: :func:`lexical_similarity` of the candidate's and the
    golden patch's changed regions. It is < 1 here: equal sequences would mean equal files, scored 1
    earlier."""

    def grade(self, cases: Sequence[GradingCase]) -> list[float]:
        return [lexical_similarity(changed_regions(c.before, c.candidate),
                                   changed_regions(c.before, c.golden))
                for c in cases]


Prompt = Union[str, Sequence[dict]]


class YesProbability(Protocol):
    """A judge model's P("YES") per prompt, read right after ``answer_prefix`` where the judge
    writes its verdict (``nemo_cascade.rewards.remote.JudgeClient`` is one)."""

    def p_yes(self, prompts: Sequence[Prompt], *, answer_prefix: str = "") -> list[float]: ...


JUDGEMENT_OPEN = "<judgement>"
"""App. C.2: the judge answers ``<judgement>YES</judgement>`` or ``<judgement>NO</judgement>``;
P("YES") is read at the token after this tag (``JudgeGrader`` passes it as the client's
``answer_prefix``)."""

JUDGE_SYSTEM = """\
You are an expert software engineer who reviews patches. You are given an issue reported in a code \
repository, \
the contents of the relevant source files, a golden patch written by the repository's maintainers \
that resolves \
the issue, and a candidate patch. Judge whether the candidate patch resolves the issue as the \
golden patch does. \
Respond only with <judgement>YES</judgement> if it does or <judgement>NO</judgement> if it does \
not."""
"""The judge's system prompt (App. C.2 elements; the wording is reconstructed, see
:func:`judge_prompt`)."""

JUDGE_TEMPLATE = """\
## Issue
{issue}

## Relevant file contents
{files}

## Edit format
Both patches are unified diffs against the files above. `--- a/PATH` and `+++ b/PATH` name the \
file (`/dev/null` \
when it is created or deleted); each hunk starts with `@@ -A,B +C,D @@` (B lines from line A of \
the original, D \
lines from line C of the patched file); lines starting with `-` are removed, lines starting with \
`+` are added and \
lines starting with a space are unchanged context.

## Golden patch
```diff
{golden}
```

## Candidate patch
```diff
{candidate}
```

Does the candidate patch resolve the issue as the golden patch does? It must fix the reported \
behaviour and would \
pass the same tests. Differences in naming, comments, formatting or code structure do not matter; \
a missing part of \
the fix, a wrong fix or an extra change in behaviour does. Answer with <judgement>YES</judgement> \
or \
<judgement>NO</judgement>."""
"""The judge's user turn: issue, file contents, edit format, golden patch, candidate patch, then the
question."""


def _cut(text: str, limit: int = MAX_JUDGE_SECTION_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


def _file_sections(files: Mapping[str, Optional[str]]) -> str:
    """Each file (path order) as ``### path`` and its content fenced, each cut to
    MAX_JUDGE_SECTION_CHARS and all of them to MAX_JUDGE_FILES_CHARS; a file that does not exist yet
    is said to be new."""
    parts = []
    for path in sorted(files):
        text = files[path]
        if text is None:
            parts.append(f"### {path}\n(does not exist before the patches: a new file)")
        else:
            parts.append(f"### {path}\n```\n{_cut(text.rstrip())}\n```")
    return _cut("\n\n".join(parts), MAX_JUDGE_FILES_CHARS) if parts else "(none)"


def judge_prompt(problem_statement: str, files: Mapping[str, Optional[str]], golden_diff: str,
                 candidate_diff: str) -> list[dict]:
    """The judge conversation of App. C.2: a system turn (the reviewer's task and the answer format)
    and a user turn with the issue, the relevant files' contents (``files``: ``{path: content before
    the patches}``, None for a file one of them creates), how the patches are written, the golden
    patch and the candidate patch, in that order, the question last. The judge's chat template adds
    its generation prompt; the client reads P("YES") after :data:`JUDGEMENT_OPEN`.

    What is verbatim and what is not: the elements, their order and the answer format
    ``<judgement>YES</judgement>`` / ``<judgement>NO</judgement>`` are App. C.2's; the sentences
    around them are ours (the appendix's wording could not be consulted). Both patches are shown as
    canonical unified diffs of normalised contents (so the judge sees the change, not how the policy
    spelled it), hence the edit format describes unified diffs. Every section is cut to
    :data:`MAX_JUDGE_SECTION_CHARS` (the files together to :data:`MAX_JUDGE_FILES_CHARS`) so a
    runaway input cannot push the rest out of the judge's context."""
    text = JUDGE_TEMPLATE.format(issue=_cut(problem_statement.strip()), files=_file_sections(files),
                                 golden=_cut(golden_diff.rstrip("\n")),
                                 candidate=_cut(candidate_diff.rstrip("\n")))
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": text}]


class JudgeGrader:
    """Paper §4.7's semantic grade: a judge model's P("YES") that the candidate resolves the issue
    like the golden patch (the paper used Kimi-Dev-72B), read at the verdict after ``<judgement>``
    (App. C.2). One ``p_yes`` call per batch for every case."""

    def __init__(self, judge: YesProbability):
        self.judge = judge

    def grade(self, cases: Sequence[GradingCase]) -> list[float]:
        prompts = [judge_prompt(c.problem_statement, c.before, *c.diffs()) for c in cases]
        scores = self.judge.p_yes(prompts, answer_prefix=JUDGEMENT_OPEN) if prompts else []
        if len(scores) != len(prompts):
            raise RuntimeError(f"judge returned {len(scores)} scores for {len(prompts)} prompts")
        return [min(1.0, max(0.0, float(s))) for s in scores]


# ------------------------------------------------------------------ the reward

OUTCOMES = ("parse_failure", "unterminated", "unchanged", "matches_golden", "graded")
"""The Eq. 2 branch each sample took, as reported by :meth:`SWEReward.verdicts` (a training
diagnostic)."""
_FIXED_SCORES = {"parse_failure": PARSE_FAILURE, "unchanged": UNCHANGED,
                 "matches_golden": MATCHES_GOLDEN}


class SWEReward:
    """Eq. 2 with a chosen grader: ``reward(response, label)`` for one sample,
    ``reward.reward_batch(responses, labels)`` for a rollout batch (the grader sees all samples that
    reach it at once), ``reward.verdicts`` for the batch with each sample's Eq. 2 branch.

    ``grader``: :class:`LexicalGrader` (default, no server) or ``JudgeGrader(JudgeClient(url))``
    (the paper). ``unterminated_score``: the score of a thinking response without ``</think>`` (see
    ``swe/__init__``)."""

    def __init__(self, grader: Optional[Grader] = None, *,
                 unterminated_score: float = PARSE_FAILURE):
        self.grader: Grader = grader if grader is not None else LexicalGrader()
        self.unterminated_score = float(unterminated_score)

    def __call__(self, response: Any, label: dict) -> float:
        return self.reward_batch([response], [label])[0]

    def reward_batch(self, responses: Sequence[Any], labels: Sequence[dict]) -> list[float]:
        return self.verdicts(responses, labels)[0]

    def verdicts(self, responses: Sequence[Any],
                 labels: Sequence[dict]) -> tuple[list[float], list[dict]]:
        """``(scores, details)``: ``details[i] = {"outcome": one of OUTCOMES}``. Labels are checked
        once per distinct label object (a group's samples share one); a malformed label is a
        ValueError naming its index. The grader is called once, with every sample Eq. 2 leaves to
        it."""
        if len(responses) != len(labels):
            raise ValueError(f"swe reward_batch: {len(responses)} responses for {len(labels)} "
                             "labels")
        golden_by_label: dict[int, dict] = {}
        scores: list[float] = []
        outcomes: list[str] = []
        cases: list[tuple[int, GradingCase]] = []
        for i, (response, label) in enumerate(zip(responses, labels)):
            if id(label) not in golden_by_label:
                try:
                    golden_by_label[id(label)] = golden_contents(label)
                except ValueError as e:
                    raise ValueError(f"labels[{i}]: {e}") from None
            outcome = self._outcome(response, label, golden_by_label[id(label)])
            if isinstance(outcome, GradingCase):
                cases.append((i, outcome))
                outcome = "graded"
            outcomes.append(outcome)
            scores.append(self.unterminated_score if outcome == "unterminated"
                          else _FIXED_SCORES.get(outcome, 0.0))
        grades = self.grader.grade([case for _, case in cases]) if cases else []
        for (i, _), grade in zip(cases, grades):
            scores[i] = grade
        return scores, [{"outcome": outcome} for outcome in outcomes]

    def _outcome(self, response: Any, label: dict, golden: dict) -> Union[str, GradingCase]:
        """The Eq. 2 branch, or the case to grade. Never raises on the response."""
        if not isinstance(response, str):
            return "parse_failure"
        _, answer, terminated = split_thinking(response)
        if not terminated:
            return "unterminated"
        try:
            candidate = normalized(apply_answer(answer, label["files"]))
        except PatchError:
            return "parse_failure"
        before = normalized({p: label["files"].get(p) for p in set(candidate) | set(golden)})
        if {**before, **candidate} == {**before, **golden}:
            return "matches_golden"
        if all(before[p] == text for p, text in candidate.items()):
            return "unchanged"
        return GradingCase(label["problem_statement"], before, golden, candidate)


_LEXICAL = SWEReward()


def swe_reward(response: str, label: dict) -> float:
    """REWARDS["swe"] without a judge server: Eq. 2 with the lexical grade for the "otherwise"
    case."""
    return _LEXICAL(response, label)


def reward_batch(responses: Sequence[str], labels: Sequence[dict]) -> list[float]:
    """:func:`swe_reward` over a batch."""
    return _LEXICAL.reward_batch(responses, labels)


# ------------------------------------------------------------------ SWE-bench export

def model_patch(response: Any, files: Mapping[str, str]) -> str:
    """The answer's edits as a ``git apply``-able unified diff against ``files`` (exact contents,
    not normalised); ``""`` when there is nothing to apply — SWE-bench counts an empty patch as
    unresolved."""
    if not isinstance(response, str):
        return ""
    _, answer, terminated = split_thinking(response)
    if not terminated:
        return ""
    try:
        return render_unified_diff(files, apply_answer(answer, files))
    except PatchError:
        return ""


def export_swebench_predictions(path: Union[str, os.PathLike],
                                rows: Iterable[Mapping[str, Any]]) -> int:
    """Write SWE-bench predictions JSONL (``instance_id``, ``model_name_or_path``, ``model_patch``)
    for the official harness, one line per row ``{"instance_id", "model_name_or_path", "response",
    "files"}`` (``files``: the prompt's ``{path: content}``). Returns the number of rows written."""
    count = 0
    with open(path, "w", encoding="utf-8") as out:
        for i, row in enumerate(rows):
            missing = {"instance_id", "model_name_or_path", "response", "files"} - set(row)
            if missing:
                raise ValueError(f"rows[{i}]: missing {sorted(missing)}")
            record = {"instance_id": row["instance_id"],
                      "model_name_or_path": row["model_name_or_path"],
                      "model_patch": model_patch(row["response"], row["files"])}
            out.write(json.dumps(record) + "\n")
            count += 1
    return count


__all__ = ["validate_label", "golden_contents", "SWEReward", "OUTCOMES", "swe_reward",
           "reward_batch", "Grader",
           "GradingCase", "LexicalGrader", "JudgeGrader", "YesProbability", "judge_prompt",
           "JUDGE_TEMPLATE",
           "lexical_similarity", "model_patch", "export_swebench_predictions", "PARSE_FAILURE",
           "UNCHANGED",
           "MATCHES_GOLDEN", "MAX_SEQUENCE_ITEMS", "MAX_JUDGE_SECTION_CHARS",
           "MAX_JUDGE_FILES_CHARS", "JUDGE_SYSTEM",
           "JUDGEMENT_OPEN"]
