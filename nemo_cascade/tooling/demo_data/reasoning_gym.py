"""reasoning-gym prompt sets for the math domain: ``synthetic:rg/TASK`` rows drawn from the
``reasoning-gym`` package's procedural generators, in the shape of :func:`.arithmetic.arithmetic`
(``uid``, ``question``, ``answer``, ``solution``), so one set serves the SFT warm-start
(``data.generated.sft_pairs``) and GRPO with the ``math`` reward (the last ``\\boxed{}``, judged by
equivalence).

Which tasks: the paper's math RL keeps only problems with a verifiable final answer and drops
multiple-choice, true/false and proof items (§4.5). Here that means tasks whose reference is a
number our ``math`` verifier can judge by equivalence; :data:`SUPPORTED` lists them with the reason.
Left out, for example: fraction_simplification and dice (they demand a *reduced* fraction, and
equivalence accepts an unreduced one), decimal_arithmetic and power_function (the reference follows
a rounding / significant-figure rule, not equivalence), bitwise_arithmetic and base_conversion
(non-decimal notation), number_sequence (~100 ms per problem).

Options: ``synthetic:rg/chain_sum?max_digits=2&max_terms=3`` passes ``max_digits=2, max_terms=3`` to
the task's reasoning-gym config (each value read as JSON, else kept as a string), e.g. to make
problems small enough for a tiny model on CPU. ``seed`` and ``size`` come from ``Data`` and cannot
be set here.

Splits: a problem is in ``train`` or ``test`` by a hash of its question text (:func:`split_of`),
never by seed. Disjoint reasoning-gym seeds would not give disjoint problems: a task draws problem
``i`` from ``Random(seed + i)``, so seed ``s`` repeats seed ``s + 1`` shifted by one, and small
problem spaces repeat questions under any seed. Hashing the text makes the splits disjoint whatever
seeds, sizes or options are used; ``seed`` only picks which problems of the split are drawn and
their order. Rows of one call are distinct, and a call with a smaller ``size`` returns a prefix of a
larger one.

``reasoning_gym`` is imported inside functions: the package is optional, and importing it loads
every task module (sympy, matplotlib), ~1.5 s.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

RG_PREFIX = "rg/"
"""``synthetic:rg/TASK`` addresses these sets (loader.py strips ``synthetic:``)."""
RG_VERSION = "0.1.25"
"""The reasoning-gym release the generators and tests are pinned to (tools/setup_venv.sh,
setup.py)."""
TEST_FRACTION_PERCENT = 15
"""Share of problems (by hash of the question) held out for the test split, as in
:mod:`.arithmetic`."""
DEFAULT_SIZE = 500
"""Rows drawn when ``size <= 0``: a task's problem space has no end to enumerate; reasoning-gym's
own default."""
DRAWS_PER_ROW = 20
"""At most ``DRAWS_PER_ROW * size + EXTRA_DRAWS`` problems are generated to fill one split (a 15 %
split needs ~7 per row); a task whose options allow fewer distinct problems raises instead of
looping."""
EXTRA_DRAWS = 200
BOXED_INSTRUCTION = "Put the final answer in \\boxed{}."
"""Appended to every question: the math reward reads the last ``\\boxed{}`` (§4.5)."""

SUPPORTED: tuple[tuple[str, str], ...] = (
    ("basic_arithmetic",
     "integer value of a + - * / expression (divisions are exact by construction)"),
    ("chain_sum", "integer result of a chain of additions and subtractions"),
    ("decimal_chain_sum",
     "exact decimal sum; compared as numbers, so trailing zeros do not matter"),
    ("products", "integer product"),
    ("gcd", "integer greatest common divisor"),
    ("lcm", "integer least common multiple"),
    ("count_bits", "integer count of 1 bits"),
    ("count_primes", "integer count of primes in a range"),
    ("simple_equations", "integer root of a linear equation (the verifier also accepts 'x = 13')"),
    ("leg_counting", "integer total of legs"),
    ("letter_counting", "integer count of a letter in a text"),
    ("aiw", "integer answer to an 'Alice in Wonderland' family/colleague question"),
    ("gsm_symbolic",
     "integer answer to a GSM8K-style word problem; ships a worked solution for SFT"),
)
"""(reasoning-gym task, why the ``math`` verifier can judge its answers by equivalence)."""
SUPPORTED_NAMES = tuple(name for name, _ in SUPPORTED)


def split_of(task: str, question: str) -> str:
    """``train`` or ``test`` for one problem — a hash of its question text, so never a function of
    the seed."""
    digest = hashlib.sha256(f"rg/{task}:{question}".encode()).digest()
    return "test" if int.from_bytes(digest[:4], "big") % 100 < TEST_FRACTION_PERCENT else "train"


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"chain_sum?max_digits=2"`` → ``("chain_sum", {"max_digits": 2})``; ValueError (one line)
    for an unsupported task or a malformed option."""
    task, _, query = spec.partition("?")
    if task not in SUPPORTED_NAMES:
        raise ValueError(
            f"unknown reasoning-gym task {task!r}; supported (answers the math "
            "verifier can judge): "
            f"{', '.join(SUPPORTED_NAMES)}")
    options: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"rg/{task}: option {item!r} must be KEY=VALUE")
        if key in ("seed", "size"):
            raise ValueError(
                f"rg/{task}: option {key!r} comes from data.{key}, not from the source")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value  # a bare word such as format_style=natural
    return task, options


def _dataset(task: str, options: dict[str, Any], seed: int, draws: int):
    try:
        import reasoning_gym
    except ImportError:
        raise ValueError(f"rg/{task} needs reasoning-gym: run tools/setup_venv.sh "
                         f"(or pip install reasoning-gym=={RG_VERSION})") from None
    # Our seed is hashed into reasoning-gym's: it draws problem i from Random(seed + i), so seeds 0
    # and 1 would give the same problems shifted by one; hashed seeds start streams far apart.
    rg_seed = int.from_bytes(hashlib.sha256(f"rg/{task}/seed/{seed}".encode()).digest()[:4], "big")
    try:
        return reasoning_gym.create_dataset(task, seed=rg_seed, size=draws, **options)
    # unknown option / a config's validate() assertion
    except (TypeError, AssertionError, ValueError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"rg/{task}: bad options {options}: {reason}") from None


def entries(spec: str, split: str, size: int, seed: int) -> list[dict]:
    """reasoning-gym's own entries (``question``, ``answer``, ``metadata``) of :func:`rows`,
    index-aligned — what its ``score_answer`` expects (the agreement tests use them)."""
    if split not in ("train", "test"):
        raise ValueError(f"rg: split must be 'train' or 'test', got {split!r}")
    task, options = parse_spec(spec)
    want = size if size > 0 else DEFAULT_SIZE
    draws = DRAWS_PER_ROW * want + EXTRA_DRAWS
    seen: set[str] = set()
    out = []
    dataset = _dataset(task, options, seed, draws)
    for i in range(draws):
        entry = dataset[i]
        question = entry["question"].rstrip()  # the text the uid and the split are keyed on
        if question in seen or split_of(task, question) != split:
            continue
        seen.add(question)
        out.append(entry)
        if len(out) == want:
            return out
    raise ValueError(f"rg/{task}: only {len(out)} distinct {split} problems in {draws} draws "
                     f"(options {options}); lower data.size or widen the task's options")


def _solution(entry: dict) -> str:
    """Worked steps for SFT where reasoning-gym has them: gsm_symbolic's chain of thought (less its
    ``#### N`` line: the answer goes in ``\\boxed{}``), the expression the arithmetic tasks
    evaluate, or for leg_counting each animal's legs times its count and the sum (from the
    generator's own leg table)."""
    meta = entry.get("metadata", {})
    if meta.get("source_dataset") == "leg_counting":
        return _leg_steps(meta["animals"])
    if isinstance(meta.get("answer_cot"), str):
        steps = [line for line in meta["answer_cot"].splitlines() if not line.startswith("####")]
        return "\n".join(steps).strip().rstrip(".")  # sft_pairs adds ". The answer is ..."
    if isinstance(meta.get("expression"), str):
        return f"{meta['expression']} = {entry['answer']}"
    return ""


def _leg_steps(animals: dict[str, int]) -> str:
    """``"2 cows have 2 × 4 = 8 legs. 1 spider has 8 legs. 8 + 8 = 16"``: what a small model needs
    to learn, the legs of each animal and the arithmetic, written out (the generator's answer is the
    bare total)."""
    from reasoning_gym.arithmetic.leg_counting import ANIMALS

    parts, totals = [], []
    for name, count in animals.items():
        legs = ANIMALS[name]
        totals.append(count * legs)
        parts.append(f"1 {name} has {legs} legs" if count == 1
                     else f"{count} {name}s have {count} × {legs} = {count * legs} legs")
    steps = ". ".join(parts)
    return steps if len(totals) == 1 else f"{steps}. {' + '.join(map(str, totals))} = {sum(totals)}"


def _row(task: str, entry: dict) -> dict:
    question = entry["question"].rstrip()
    return {
        "uid": f"rg/{task}:{hashlib.sha256(question.encode()).hexdigest()[:16]}",
        "question": f"{question}\n\n{BOXED_INSTRUCTION}",
        "answer": str(entry["answer"]).strip(),
        "solution": _solution(entry),
    }


def rows(spec: str, split: str, size: int, seed: int) -> list[dict]:
    """``size`` rows ``{"uid", "question", "answer", "solution"}`` of reasoning-gym task ``spec``
    (``TASK`` or ``TASK?KEY=VALUE&...``) in ``split``; ``size <= 0`` draws :data:`DEFAULT_SIZE`.
    Deterministic for a given seed. ``solution`` is empty where reasoning-gym has no worked steps
    (SFT then learns the boxed answer alone)."""
    task = spec.partition("?")[0]
    return [_row(task, e) for e in entries(spec, split, size, seed)]


__all__ = [
    "rows", "entries", "split_of", "parse_spec", "SUPPORTED", "SUPPORTED_NAMES", "RG_PREFIX",
    "RG_VERSION", "TEST_FRACTION_PERCENT", "DEFAULT_SIZE", "BOXED_INSTRUCTION"]
