"""Reliability figures: hostile programs tried / contained, fuzz cases run, kill points / equal
resumes.

Each figure is measured by running the same harness the tests use, not counted from the test files:

- **hostile programs**: ``tests/unit/hostile_programs.run_corpus`` — every attack of the corpus
  through a code Scorer at once; contained = scored 0, the scorer did not raise, ended in its time
  bound, no process left and its host witnesses saw nothing; plus the controls (a right and a wrong
  program) in the same run and after.
- **fuzz**: the fuzz tier (``tests/unit/test_fuzz_*.py``) run in this process; cases run per target
  come from ``tests/unit/fuzz_budget.CASES_RUN``, failures from pytest.
- **kill and resume**: ``tests/integration/test_resume.kill_and_resume`` — the reduced cascade
  SIGKILLed at each crash point (``nemo_cascade.runtime.faults``) and stopped once by its served
  reward model going away, resumed after each, compared with an uninterrupted run (weights, logged
  numbers, gate scores, manifest). A few minutes on 2 cores; ``--skip-resume`` leaves it out.

Results are appended to ``bench/results/reliability.jsonl``; docs/reliability.md quotes them.

    .venv/bin/python bench/reliability.py                  # everything (~6 min on 2 cores)
    .venv/bin/python bench/reliability.py --skip-resume    # hostile programs and fuzzing (~1 min)
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the harnesses live in tests/
RESULTS = ROOT / "bench" / "results" / "reliability.jsonl"


def hostile() -> dict:
    from tests.unit.hostile_programs import run_corpus

    verdicts, extra = run_corpus()
    escaped = [f"{v.name}: {'; '.join(v.problems)}" for v in verdicts if not v.contained]
    return {
        "tried": len(verdicts), "contained": sum(v.contained for v in verdicts), "escaped": escaped,
        "controls": extra["controls"], "controls_after": extra["after"],
        "seconds": round(extra["elapsed_s"], 1)}


def fuzz() -> dict:
    import pytest

    from tests.unit import fuzz_budget

    started = time.monotonic()
    files = sorted(str(p) for p in (ROOT / "tests" / "unit").glob("test_fuzz_*.py"))
    code = pytest.main(["-q", "-p", "no:cacheprovider", *files])
    return {
        "targets": len(fuzz_budget.CASES_RUN), "cases": sum(fuzz_budget.CASES_RUN.values()),
        "budget": sum(fuzz_budget.FUZZ_EXAMPLES.values()), "passed": int(code) == 0,
        "per_target": dict(sorted(fuzz_budget.CASES_RUN.items())),
        "seconds": round(time.monotonic() - started, 1)}


def kill_and_resume() -> dict:
    from tests.integration import test_resume as harness

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        tmp = Path(tmp)
        with harness.served_reward_model(tmp / "rm") as proxy:
            harness.run_to_end(tmp / "straight", proxy.url)
            outcome = harness.kill_and_resume(tmp / "broken", proxy)
        differ = harness.differences(tmp / "straight" / "resume", tmp / "broken" / "resume")
    return {
        "kill_points": outcome["kills"],
        "server_stop": outcome["server_stop"],
        "interruptions": len(outcome["kills"]) + 1,  # + the reward server's death
        "equal": not differ,
        "differences": differ,
        "seconds": round(time.monotonic() - started, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-resume", action="store_true",
                        help="leave out the kill-and-resume run (minutes)")
    args = parser.parse_args()
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "host": platform.node(), "hostile": hostile(),
        "fuzz": fuzz()}
    if not args.skip_resume:
        record["resume"] = kill_and_resume()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")

    h, z = record["hostile"], record["fuzz"]
    print(
        f"\nhostile programs    {h['contained']}/{h['tried']} contained; controls "
        f"{h['controls']} then "
        f"{h['controls_after']} (expected [1.0, 0.0]); {h['seconds']} s")
    for line in h["escaped"]:
        print(f"  ESCAPED {line}")
    print(
        f"fuzz                {z['cases']} cases over {z['targets']} targets (budget "
        f"{z['budget']}); "
        f"{'all passed' if z['passed'] else 'FAILURES'}; {z['seconds']} s")
    ok = h["contained"] == h["tried"] and z["passed"]
    if "resume" in record:
        r = record["resume"]
        print(
            f"kill and resume     a run interrupted {r['interruptions']} times "
            f"({len(r['kill_points'])} SIGKILL "
            f"points: {', '.join(r['kill_points'])}; 1 reward-server death) and resumed "
            "after each ended "
            f"{'EQUAL to' if r['equal'] else 'DIFFERENT from'} the uninterrupted run (weights, "
            "logged numbers, "
            f"gate scores, manifest); {r['seconds']} s")
        print(f"  server stop said: {r['server_stop']}")
        for line in r["differences"]:
            print(f"  DIFFERS {line}")
        ok = ok and r["equal"]
    print(f"appended to {RESULTS.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
