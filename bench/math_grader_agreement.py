"""How often math-verify and the AceMath-style rule grader disagree on answers a model wrote (paper
§4.5: the paper trained math RL with AceMath's rule verifier; ``Reward.math_grader`` chooses between
the two).

Inputs are ``eval.json`` files of ``nemo-cascade eval`` (every sampled response of every math suite:
GSM8K, MATH-500, AIME24/25). Each response gives the answer the reward would read — the last
``\\boxed{}`` after ``</think>`` — and, for responses that box nothing, the answer they state ("the
answer is 42", ``#### 42``) or else their last number: more model-written strings to compare the
graders on, reported apart. The reference solutions' own boxed answers (MATH-500, AIME24 rows carry
a worked solution) are a third source: correct answers in a human's formatting, where any
disagreement is one grader's false negative. The labelled pairs of tests/unit/test_math_verify.py
(fractions, percentages, intervals, sets, units, ...) are reported last: not model output, a map of
the formats on which the graders part.

Both graders run through the reward's own path (``MathVerifier.score_answers``: the in-process exact
check, then the grader in killable workers under the per-sample timeout). Responses shared by
several files (the same model, seed and prompt) are counted once. Writes
``bench/results/math_grader_agreement.json`` (the table and every disagreeing case) and prints the
table.

    .venv/bin/python bench/math_grader_agreement.py docs/results/smollm2/*/base/eval.json \\
        docs/results/smollm2/*/stages/*/eval.json bench/results/math_grader_agreement/*.eval.json.gz

The two ``.eval.json.gz`` files there are SmolLM2-135M-Instruct on the math suites (docs/rewards.md
gives the ``nemo-cascade eval`` commands that wrote them).
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import Counter, defaultdict
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "math_grader_agreement.json"
SOLUTION_SETS = {"math500": ROOT / "data" / "math500" / "test.jsonl.gz",
                 "aime24": ROOT / "data" / "aime24" / "test.jsonl.gz"}
"""Suites whose rows carry a worked ``solution`` with a boxed answer (AIME25's rows have none)."""
_LAST_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def stated_answer(response: str) -> tuple[str | None, str]:
    """The answer a response commits to and how it was found: ``boxed`` (what the reward reads),
    ``stated`` ("the answer is …" or ``#### …``) or ``last number``; (None, "none") when there is
    nothing."""
    from nemo_cascade.data.chat import split_thinking
    from nemo_cascade.rewards.math import ANSWER_PATTERNS, MathVerifier, extract_by_pattern

    boxed = MathVerifier().extract_answer(response)
    if boxed and boxed.strip():
        return boxed, "boxed"
    _, text, terminated = split_thinking(response)
    if not terminated:
        return None, "none"
    for name in ("answer_is", "gsm8k"):
        found = extract_by_pattern(text, re.compile(ANSWER_PATTERNS[name]))
        if found:
            return found, "stated"
    numbers = _LAST_NUMBER.findall(text)
    return (numbers[-1], "last number") if numbers else (None, "none")


def model_answers(paths: list[Path]) -> tuple[list[dict], Counter]:
    """One row per distinct (suite, item, response) of the math suites in ``paths``; and how many
    responses found an answer each way."""
    seen, rows, how = set(), [], Counter()
    for path in paths:
        text = (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz"
                else path.read_text())
        for suite, run in json.loads(text)["suites"].items():
            if run.get("domain") != "math":
                continue
            for record in run["records"]:
                for response in record["responses"]:
                    key = (suite, record["uid"], response)
                    if key in seen:
                        continue
                    seen.add(key)
                    answer, kind = stated_answer(response)
                    how[(suite, kind)] += 1
                    if answer is not None:
                        rows.append({"dataset": suite, "source": kind, "uid": record["uid"],
                                     "answer": answer, "reference": str(record["label"])})
    return rows, how


def solution_answers() -> list[dict]:
    """The boxed answer of each reference solution against the row's answer field."""
    from nemo_cascade.rewards.math import extract_boxed

    rows = []
    for suite, path in SOLUTION_SETS.items():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                row = json.loads(line)
                boxed = extract_boxed(row.get("solution") or "")
                if boxed:
                    rows.append({"dataset": suite, "source": "reference solution",
                                 "uid": str(row.get("unique_id", row.get("id", lineno))),
                                 "answer": boxed, "reference": str(row["answer"])})
    return rows


def labelled_pairs() -> list[dict]:
    """The hand-written formatting variants of tests/unit/test_math_verify.py (labelled by
    math-verify's semantics before the rule grader existed): not model output, a map of where the
    two graders part."""
    from tests.unit.test_math_verify import EQUIVALENCES

    return [{"dataset": "labelled pairs", "source": "hand-written", "uid": str(k), "answer": pred,
             "reference": ref, "label": bool(label)}
            for k, (pred, ref, label) in enumerate(EQUIVALENCES)]


def grade_all(rows: list[dict], timeout_s: float, workers: int) -> dict:
    """Fill each row's ``math_verify`` and ``rule`` verdicts; returns each grader's pool counts
    (timeouts)."""
    from nemo_cascade.rewards.math import MathVerifier

    counts = {}
    for grader in ("math_verify", "rule"):
        verifier = MathVerifier(timeout_s=timeout_s, num_workers=workers, grader=grader)
        before = Counter(verifier.pool().counts)
        scores = verifier.score_answers([r["answer"] for r in rows], [r["reference"] for r in rows])
        for r, s in zip(rows, scores):
            r[grader] = s == 1.0
        counts[grader] = dict(Counter(verifier.pool().counts) - before)
    return counts


def table(rows: list[dict]) -> list[dict]:
    """Per (dataset, answer source): answers, agreement and who alone said correct; ``graded``: how
    many the in-process exact check could not settle, so that a grader decided them (the rest agree
    by construction)."""
    from nemo_cascade.rewards.math import is_equivalent

    groups = defaultdict(list)
    for r in rows:
        groups[(r["dataset"], r["source"])].append(r)
    out = []
    for (dataset, source), some in sorted(groups.items()):
        agree = sum(r["math_verify"] == r["rule"] for r in some)
        graded = sum(not is_equivalent(r["answer"], r["reference"]) for r in some)
        out.append({"dataset": dataset, "source": source, "n": len(some), "graded": graded,
                    "agree": agree, "agree_pct": round(100 * agree / len(some), 1),
                    "both_correct": sum(r["math_verify"] and r["rule"] for r in some),
                    "math_verify_only": sum(r["math_verify"] and not r["rule"] for r in some),
                    "rule_only": sum(r["rule"] and not r["math_verify"] for r in some)})
    return out


def markdown(summary: list[dict], disagreements: list[dict], per_kind: int) -> str:
    lines = ["| dataset | answers | n | graded | agree % | both correct "
             "| math-verify only | rule only |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {t['dataset']} | {t['source']} | {t['n']} | {t['graded']} | {t['agree_pct']} "
              f"| {t['both_correct']} | {t['math_verify_only']} | {t['rule_only']} |"
              for t in summary]
    for kind, label in (("math_verify", "math-verify only"), ("rule", "rule only")):
        cases = [d for d in disagreements if d[kind]][:per_kind]
        lines += ["", f"{label} correct ({sum(d[kind] for d in disagreements)}):"]
        lines += [f"- {d['dataset']} {d['uid']} ({d['source']}): answer `{d['answer']}`, reference "
                  f"`{d['reference']}`" for d in cases]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("eval_json", nargs="*", type=Path,
                        help="eval.json files of nemo-cascade eval (.gz too)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--timeout-s", type=float, default=10.0,
                        help="per-sample grader timeout (a shared machine is slow; a timeout "
                             "scores 0 and would show as a disagreement)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--examples", type=int, default=8,
                        help="disagreeing cases printed per kind")
    parser.add_argument(
        "--references", action=argparse.BooleanOptionalAction, default=True,
        help="also grade the reference solutions' boxed answers and the labelled pairs")
    args = parser.parse_args(argv)
    for path in args.eval_json:
        if not path.is_file():
            parser.error(f"{path}: no such eval.json")

    started = time.time()
    rows, how = model_answers(args.eval_json)
    if args.references:
        rows += solution_answers() + labelled_pairs()
    counts = grade_all(rows, args.timeout_s, args.workers)
    summary = table(rows)
    disagreements = [r for r in rows if r["math_verify"] != r["rule"]]
    result = {
        "command": "python bench/math_grader_agreement.py "
                   + " ".join(str(p) for p in args.eval_json),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 1),
        "versions": {p: version(p) for p in ("math-verify", "latex2sympy2_extended", "sympy")},
        "inputs": [str(p) for p in args.eval_json],
        "responses": {f"{suite}/{kind}": n for (suite, kind), n in sorted(how.items())},
        "pool_counts": counts, "table": summary, "disagreements": disagreements,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(markdown(summary, disagreements, args.examples))
    print(f"\nresponses by answer source: {result['responses']}\npool counts: {counts}\n"
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
