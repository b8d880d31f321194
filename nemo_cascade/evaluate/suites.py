"""The benchmark suites: which data, which reward domain, which decoding budget and thinking mode.

A :class:`Suite` declares everything a run needs besides the model: the reward domain (a key of
``nemo_cascade.rewards.DOMAINS``; scoring goes through ``rewards.Scorer``, the verifiers training
uses), the data file and its loader (rows → :class:`Item`: the chat messages, the reward label and,
where one exists, a reference response), the default thinking mode, samples per item K and response
budget, and the metric.

Decoding (paper App. B; docs/evaluation.md): temperature 0.6, top-p 0.95 for every suite; K samples
per item with avg@K as the score — AIME avg@64, IFEval / IFBench avg@8, SWE-bench avg@4, the paper's
values; response budget 64K tokens ("thinking budget"), 32K for IFEval / IFBench / ArenaHard and for
SWE. A suite's ``mode`` is the one the paper reports for the unified model: thinking except on
IFEval (non-thinking, T2); the thinking-only models are evaluated in thinking mode on every suite
(T1, T8: ``--mode think``, a thinking recipe's ``gate.mode``). The engine serves the model with YaRN
factor 2 over its native positions for every paper suite, and SWE-bench prompts may be 32K tokens
long (App. B); the 14B's SWE-bench evaluation takes 64K input with YaRN 3, which its recipe states
(``gate.yarn``, ``gate.max_input_tokens``). Suites the paper does not report (GSM8K, MATH-500,
HumanEval, MBPP, the HH-RLHF proxy) use the same decoding; their K is our choice, stated in
``Suite.paper``. Every default can be overridden per run (``EvalSettings``; ``nemo-cascade eval
--samples``, ``--max-tokens``, ``--mode``, ``--yarn``, ``--max-input-tokens``), which a 2-core CPU
needs.

Prompts: math suites append the AceMath/AceReason instruction "Please reason step by step, and put
your final answer within \\boxed{}." (the math reward reads the last ``\\boxed{}``, §4.5), phrased
by ``data.math_prompt.math_prompt`` as the training rows are (``Data.math_instruction``'s default);
code suites ask for a self-contained script in a fenced block (the code reward runs the last Python
block, §4.6); SWE uses the Agentless repair prompt (:mod:`.swe_tasks`); IFEval / IFBench / RLHF
prompts are the dataset's own text.

``SUITES`` (``all``) are the suites whose data ships in ``data/``; the paper's LiveCodeBench
v5/v6, GPQA-Diamond, MMLU-Pro and ArenaHard (:mod:`.paper_benchmarks`) are downloaded by
``nemo-cascade data prepare-eval`` and asked for by name.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

from ..config import Reward
from ..data.math_prompt import MATH_INSTRUCTION, math_prompt
from ..data.mbpp_tasks import CODE_INSTRUCTION, mbpp_task
from .suite_types import (DATA, PAPER_DECODING, ROOT, SWE_INPUT_TOKENS, YARN_FACTOR, EvalError,
                          Item, Suite, per_row, row_field, user_turn, validated)
from .paper_benchmarks import PREPARED_SUITES
from .swe_tasks import load_swe


@per_row
def load_ifeval(row: dict, where: str, lineno: int) -> Item:
    """IFEval ``input_data.jsonl`` / IFBench ``IFBench_test.jsonl`` rows: ``key``, ``prompt``,
    ``instruction_id_list``, ``kwargs``; the label is the row (the ``ifeval`` domain covers both
    taxonomies)."""
    prompt = row_field(row, "prompt", where)
    label = validated("ifeval", {"prompt": prompt,
                                 "instruction_id_list": row.get("instruction_id_list"),
                                 "kwargs": row.get("kwargs")}, where)
    return Item(str(row.get("key", lineno)), user_turn(prompt), label)


def _math_item(uid: str, problem: str, answer: str, where: str) -> Item:
    answer = validated("math", answer.strip(), where)
    reference = f"The final answer is \\boxed{{{answer}}}."
    return Item(uid, user_turn(math_prompt(problem)), answer, reference)


def gsm8k_final_answer(solution: str) -> str:
    """The number after GSM8K's ``####`` marker, without thousands commas; ValueError if there is
    none."""
    if "####" not in solution:
        raise ValueError("field 'answer' has no '#### <number>' final answer")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


@per_row
def load_gsm8k(row: dict, where: str, lineno: int) -> Item:
    """GSM8K rows ``question`` / ``answer``; the label is the number after ``####`` without
    thousands commas."""
    try:
        final = gsm8k_final_answer(row_field(row, "answer", where))
    except ValueError as e:
        raise EvalError(f"{where}: {e}") from None
    return _math_item(str(lineno), row_field(row, "question", where), final, where)


@per_row
def load_math(row: dict, where: str, lineno: int) -> Item:
    """MATH-500 / AIME rows: ``problem`` and ``answer`` (string or integer); uid from ``unique_id``
    or ``id``."""
    answer = row_field(row, "answer", where, (str, int))
    uid = str(row.get("unique_id", row.get("id", lineno)))
    return _math_item(uid, row_field(row, "problem", where), str(answer), where)


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


@per_row
def load_humaneval(row: dict, where: str, lineno: int) -> Item:
    """HumanEval rows (``task_id``, ``prompt``, ``canonical_solution``, ``test``, ``entry_point``):
    the model writes the whole function; the label runs the dataset's ``check(candidate)``."""
    prompt = row_field(row, "prompt", where)
    label = validated("code", {"test_code": row_field(row, "test", where),
                                "entry_point": row_field(row, "entry_point", where)}, where)
    text = f"{CODE_INSTRUCTION}\n\n{_fenced(prompt)}"
    reference = _fenced(prompt + row.get("canonical_solution", ""))
    return Item(row_field(row, "task_id", where), user_turn(text), label, reference)


@per_row
def load_mbpp(row: dict, where: str, lineno: int) -> Item:
    """MBPP rows (``task_id``, ``text``, ``code``, ``test_setup_code``, ``test_list``): the prompt
    shows the task and its three asserts (the MBPP paper's format); the label runs setup code +
    asserts. The function name (entry point) is the one the first assert calls. The format is
    ``data.mbpp_tasks.mbpp_task``'s, shared with the MBPP-derived training set."""
    tests = row_field(row, "test_list", where, list)
    try:
        text, label = mbpp_task(row_field(row, "text", where), tests,
                                row.get("test_setup_code") or "")
    except ValueError as e:
        raise EvalError(f"{where}: {e}") from None
    reference = _fenced(row_field(row, "code", where).replace("\r\n", "\n"))
    return Item(str(row.get("task_id", lineno)), user_turn(text), validated("code", label, where),
                reference)


_HH_TURN = re.compile(r"\n\n(Human|Assistant): ?")


def hh_conversation(dialogue: str) -> Optional[list[dict]]:
    """An HH-RLHF dialogue (``\\n\\nHuman: ...\\n\\nAssistant: ...``) as chat messages, or None when
    it does not alternate Human/Assistant from a Human turn or has an empty turn."""
    parts = _HH_TURN.split(dialogue)
    if parts[0].strip() or len(parts) < 3:
        return None
    messages = []
    for k in range(1, len(parts), 2):
        role = "user" if parts[k] == "Human" else "assistant"
        content = parts[k + 1].strip()
        if (not content or (messages and messages[-1]["role"] == role)
                or (not messages and role != "user")):
            return None
        messages.append({"role": role, "content": content})
    return messages


@per_row
def load_hh_rlhf(row: dict, where: str, lineno: int) -> Optional[Item]:
    """HH-RLHF pairs: the conversation before the final ``Assistant:`` turn of ``chosen`` is the
    prompt, the final turn of ``chosen`` is the reference answer to beat. Rows that do not parse (10
    of the 2354 helpful-base test rows: broken turn structure or an empty turn) are skipped,
    deterministically."""
    messages = hh_conversation(row_field(row, "chosen", where))
    if messages is None or len(messages) < 2 or messages[-1]["role"] != "assistant":
        return None
    prompt = messages[:-1]
    return Item(str(lineno), prompt, validated("rlhf", {"messages": prompt}, where),
                messages[-1]["content"])


def load_rows(domain: str) -> Callable[[Path], list[Item]]:
    """The project's own row shape ``{"uid", "messages", "label", "reference"}`` (the tiny suites,
    written by tools/make_tiny_suites.py), labels checked by ``domain``'s validator."""
    def item(row: dict, where: str, lineno: int) -> Item:
        messages = row_field(row, "messages", where, list)
        label = validated(domain, row.get("label"), where)
        return Item(str(row.get("uid", lineno)), messages, label, row.get("reference"))
    return per_row(item)


def _load_swe(path: Path) -> list[Item]:
    return load_swe(path)


# ------------------------------------------------------------------------------------- the registry

def _repo_file(*parts: str) -> Callable[[], Path]:
    return lambda: DATA.joinpath(*parts)


SWE_BENCH_LITE = DATA / "swe-bench-lite" / "test.jsonl.gz"
"""SWE-bench Lite's 300 test instances with their full issues
(data/swe-bench-lite/ATTRIBUTION.md)."""
SWE_BENCH_LITE_FIXTURE = ROOT / "tests" / "data" / "swe" / "swe_bench_lite_patches.jsonl.gz"
"""For fast tests: the same 300 rows with the golden patch and the issue's first 500 characters."""


def default_swe_data() -> Path:
    return SWE_BENCH_LITE


_MATH = Reward()  # last \boxed{} (§4.5), math-verify equivalence


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("ifeval", "ifeval", "IFEval, 541 prompts, 25 instruction types (Zhou et al. 2023)",
          load_ifeval,
          _repo_file("ifeval", "input_data.jsonl.gz"), mode="no_think", samples=8, max_tokens=32768,
          metric="prompt-level strict accuracy",
          paper=f"{PAPER_DECODING}; prompt-strict avg@8, non-thinking (T2), max 32K"),
    Suite("ifbench", "ifeval",
          "IFBench test, 300 prompts, 58 out-of-distribution constraints (Pyatkin et al. 2025)",
          load_ifeval, _repo_file("ifbench", "IFBench_test.jsonl.gz"), mode="think", samples=8,
          max_tokens=32768,
          metric="prompt-level strict accuracy", paper=f"{PAPER_DECODING}; avg@8, max 32K"),
    Suite("gsm8k", "math", "GSM8K test, 1319 grade-school word problems (Cobbe et al. 2021)",
          load_gsm8k,
          _repo_file("gsm8k", "test.jsonl.gz"), mode="think", samples=1, max_tokens=65536,
          metric="accuracy (boxed answer, math-verify)",
          paper=f"{PAPER_DECODING}, 64K budget; not in the paper, K=1 is our choice", reward=_MATH),
    Suite("math500", "math", "MATH-500 (Lightman et al. 2023)", load_math,
          _repo_file("math500", "test.jsonl.gz"),
          mode="think", samples=4, max_tokens=65536, metric="accuracy (boxed answer, math-verify)",
          paper=f"{PAPER_DECODING}, 64K budget; not in the paper, K=4 is our choice", reward=_MATH),
    Suite("aime24", "math", "AIME 2024 I+II, 30 problems", load_math,
          _repo_file("aime24", "test.jsonl.gz"),
          mode="think", samples=64, max_tokens=65536, metric="accuracy (boxed answer, math-verify)",
          paper=f"{PAPER_DECODING}; avg@64, 64K budget", reward=_MATH),
    Suite("aime25", "math", "AIME 2025 I+II, 30 problems", load_math,
          _repo_file("aime25", "test.jsonl.gz"),
          mode="think", samples=64, max_tokens=65536, metric="accuracy (boxed answer, math-verify)",
          paper=f"{PAPER_DECODING}; avg@64, 64K budget", reward=_MATH),
    Suite("humaneval", "code", "HumanEval, 164 problems (Chen et al. 2021)", load_humaneval,
          _repo_file("humaneval", "HumanEval.jsonl.gz"), mode="think", samples=8, max_tokens=65536,
          metric="pass rate (all tests, sandboxed)",
          paper=f"{PAPER_DECODING}, 64K budget; not in the paper, K=8 as for LiveCodeBench"),
    Suite("mbpp", "code", "MBPP test split, 500 tasks (Austin et al. 2021)", load_mbpp,
          _repo_file("mbpp", "test.jsonl.gz"), mode="think", samples=4, max_tokens=65536,
          metric="pass rate (all tests, sandboxed)",
          paper=f"{PAPER_DECODING}, 64K budget; not in the paper, K=4 is our choice"),
    Suite("swe", "swe",
          "SWE-bench Lite repair (Agentless prompt, files rebuilt from the golden patch's hunks)",
          _load_swe, default_swe_data, mode="think", samples=4, max_tokens=32768,
          metric="share of samples equal to the golden patch (Eq. 2 reward 1)",
          paper=f"{PAPER_DECODING}; avg@4, 32K budget, input 32K (SWE-bench Verified, Agentless)",
          max_input_tokens=SWE_INPUT_TOKENS),
    Suite("rlhf", "rlhf",
          "HH-RLHF helpful-base test: win rate against the chosen answer under the reward model",
          load_hh_rlhf, _repo_file("hh-rlhf", "helpful-base", "test.jsonl.gz"), mode="think",
          samples=1,
          max_tokens=32768, metric="win rate vs. reference (ties 0.5)",
          paper=f"{PAPER_DECODING}, max 32K; an ArenaHard-style proxy (ArenaHard uses a GPT-4 "
                "judge)",
          pairwise=True),
)}
"""Every benchmark by name (``nemo-cascade eval --suite NAME``; ``all`` means these)."""


def prepared_suites() -> dict[str, Suite]:
    """The paper's benchmarks whose data is downloaded, not shipped (LiveCodeBench, GPQA-Diamond,
    MMLU-Pro, ArenaHard: :mod:`.paper_benchmarks`, imported when asked, as it builds on this
    module): by name, not in ``all``, listed after ``SUITES``."""
    return PREPARED_SUITES


REGISTERED_SUITES: dict[str, Suite] = {}
"""Suites added by :func:`register_suite` (the tiny cascade's, registered by
``nemo_cascade.tooling.demo_data``): by name only, not in ``all``; listed after ``SUITES`` in
registration order."""


def register_suite(suite: Suite) -> None:
    """Make ``suite`` known by name (``--suite NAME``, a gate's suites). Registering the same suite
    again is a no-op; another suite under a taken name is a ValueError (its scores would depend on
    import order)."""
    taken = suite.name in SUITES or suite.name in prepared_suites()
    if taken or REGISTERED_SUITES.get(suite.name, suite) is not suite:
        raise ValueError(f"suite {suite.name!r} is already registered")
    REGISTERED_SUITES[suite.name] = suite


def get_suite(name: str) -> Suite:
    known = {**SUITES, **prepared_suites(), **REGISTERED_SUITES}
    if name not in known:
        names = sorted(SUITES) + sorted(prepared_suites()) + sorted(REGISTERED_SUITES)
        raise EvalError(f"--suite {name}: unknown suite; expected one of {names} (or 'all')")
    return known[name]


def help_lines() -> list[str]:
    """One line per known suite (``SUITES``, the prepared ones, then ``REGISTERED_SUITES``) for
    ``nemo-cascade eval --help``: name, description, and the defaults a run gets (mode, K, response
    budget, YaRN, input limit)."""
    lines = []
    for suite in (*SUITES.values(), *prepared_suites().values(), *REGISTERED_SUITES.values()):
        extra = f", input <= {suite.max_input_tokens}" if suite.max_input_tokens else ""
        yarn = f"YaRN x{suite.yarn_factor:g}" if suite.yarn_factor > 1 else "no YaRN"
        lines.append(f"{suite.name}: {suite.description} [{suite.mode}, K={suite.samples}, "
                     f"max {suite.max_tokens} tokens, {yarn}{extra}]")
    return lines


def suite_names(spec: str) -> list[str]:
    """``NAME``, ``A,B,C`` or ``all`` → suite names (validated, order kept, duplicates dropped)."""
    names = (list(SUITES) if spec.strip() == "all"
             else [s.strip() for s in spec.split(",") if s.strip()])
    if not names:
        raise EvalError("--suite: expected a suite name, a comma-separated list or 'all'")
    for name in names:
        get_suite(name)
    return list(dict.fromkeys(names))


def load_items(suite: Suite, path: Optional[Path] = None,
               limit: int = 0) -> tuple[list[Item], Path]:
    """The suite's items (the first ``limit`` if > 0) and the file they came from."""
    given = Path(path) if path else None
    path = given or suite.default_data()
    if not path.is_file():
        fetch = f" (download it: {suite.get_data})" if suite.get_data and given is None else ""
        raise EvalError(f"suite {suite.name}: data file not found: {path}{fetch}")
    items = suite.load(path)
    if not items:
        raise EvalError(f"suite {suite.name}: no items in {path}")
    return (items[:limit] if limit > 0 else items), path


__all__ = ["Item", "Suite", "SUITES", "REGISTERED_SUITES", "register_suite", "prepared_suites",
           "gsm8k_final_answer", "YARN_FACTOR", "SWE_INPUT_TOKENS", "ROOT", "DATA", "help_lines",
           "load_rows", "EvalError", "get_suite", "suite_names", "load_items", "hh_conversation",
           "MATH_INSTRUCTION", "CODE_INSTRUCTION", "default_swe_data"]
