"""recipes/smollm2.py and recipes/smollm2_mixed.py: both pass the whole-cascade checks, the cascade
runs the paper's order of domains, and the mixed run differs from it only in mixing the domains —
same steps, same prompts, same settings, same gate — with its segments continuing one run."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.tooling.report import load_run
from nemo_cascade.tooling.compare import comparison_markdown, points
from nemo_cascade.cascade.lineage import config_hash
from nemo_cascade.cascade.preflight import check_cascade


@pytest.fixture(scope="module")
def both():
    return load_recipe("recipes/smollm2.py"), load_recipe("recipes/smollm2_mixed.py")


def test_both_recipes_pass_the_cascade_checks(both):
    for cfg in both:
        check_cascade(cfg)
        assert cfg.model.build == "smollm2-135m-instruct" and cfg.chat_style == "chatml"


def test_the_cascade_runs_if_then_math_then_code(both):
    cascade, _ = both
    # §4.1: IF-RL → math RL → code RL
    assert [(s.name, config.stage_domains(s)) for s in cascade.stages] == [
        ("ifeval", ("ifeval",)), ("math", ("math",)), ("code", ("code",))]
    assert [s.data.source for s in cascade.stages] == ["synthetic:if_requests", "benchmark:gsm8k",
                                                       "benchmark:mbpp"]
    assert all(s.data.split == "train" for s in cascade.stages)
    # the held-out test sides
    assert set(cascade.gate.suites) == {"ifeval", "gsm8k", "mbpp", "humaneval"}


def test_the_mixed_run_is_the_same_work_in_one_run(both):
    cascade, mixed = both
    assert sum(s.steps for s in mixed.stages) == sum(s.steps for s in cascade.stages)
    # gated at the same step counts
    assert [s.steps for s in mixed.stages] == [s.steps for s in cascade.stages]
    sources = {(replace(s.data, domain=""), s.domain) for s in cascade.stages}
    for segment in mixed.stages:
        assert ({(replace(d, domain=""), domain) for d, domain in config.prompt_sources(segment)}
                == sources)
        for section in ("rollout", "grpo", "reward", "mode"):
            assert getattr(segment, section) == getattr(cascade.stages[0], section)
        assert (replace(segment.actor, warmup_steps=0)
                == replace(cascade.stages[0].actor, warmup_steps=0))
    for section in ("model", "parallel", "gate", "chat_style"):
        assert getattr(mixed, section) == getattr(cascade, section)
    first, *later = mixed.stages
    assert (first.boundary == config.Boundary()
            and first.actor.warmup_steps == cascade.stages[0].actor.warmup_steps)
    assert all(s.boundary == config.Boundary(optimizer="carry", data="continue")
               and s.actor.warmup_steps == 0 for s in later), (
        "later segments continue the same optimizer, LR schedule and prompt stream")


def _default_engine(stages) -> list:
    """``stages`` on the default engine: the bf16 compiled one of the recipes is refused by the
    preflight on a CPU without bf16 instructions, so the files are checked this way on any CPU."""
    return [replace(s, rollout=replace(s.rollout, dtype="auto", compile="auto")) for s in stages]


def test_with_sft_starts_with_sft_on_training_splits_then_the_same_rl_stages(both):
    cascade, mixed = both
    sft_cascade = load_recipe("recipes/smollm2.py:with_sft")
    sft_mixed = load_recipe("recipes/smollm2_mixed.py:with_sft")
    for with_sft, without in ((sft_cascade, cascade), (sft_mixed, mixed)):
        first, *rest = with_sft.stages
        # §3: SFT first, then the RL stages as before, on the bf16 compiled engine
        default_engine = _default_engine(rest)
        check_cascade(replace(with_sft, stages=(first, *default_engine)))
        assert (first.kind == "sft"
                and [replace(s, data=None, extra_data=()) for s in default_engine]
                == [replace(s, data=None, extra_data=()) for s in without.stages])
        assert {(s.rollout.dtype, s.rollout.compile) for s in rest} == {("bfloat16", "on")}
        assert all(d.split == "train" for d in (first.data, *first.extra_data))
        assert (with_sft.gate.limit >= 250
                and with_sft.gate.suites == (*without.gate.suites, "leg-counting"))
    assert sft_cascade.stages[0] == sft_mixed.stages[0] and sft_cascade.gate == sft_mixed.gate
    blend = {d.source.partition("?")[0]
             for d in (sft_cascade.stages[0].data, *sft_cascade.stages[0].extra_data)}
    assert blend == {"benchmark:gsm8k", "synthetic:rg/leg_counting", "benchmark:mbpp",
                     "synthetic:if_requests"}
    # math after SFT: half GSM8K, half the easy word problems whose test split is the gate's
    # leg-counting suite
    math = next(s for s in sft_cascade.stages if s.kind == "grpo" and s.domain == "math")
    assert [(d.source.partition("?")[0], d.size) for d, _ in config.prompt_sources(math)] == [
        ("benchmark:gsm8k", 120), ("synthetic:rg/leg_counting", 120)]
    # the mixed twin trains on exactly the cascade's prompts, each with its domain
    cascade_sources = {(replace(d, domain=""), dom)
                       for s in sft_cascade.stages[1:] for d, dom in config.prompt_sources(s)}
    for segment in sft_mixed.stages[1:]:
        assert ({(replace(d, domain=""), dom) for d, dom in config.prompt_sources(segment)}
                == cascade_sources)


ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "docs" / "results" / "smollm2"


KEPT_RUNS = [  # (recipe, folder under docs/results/smollm2, its stages, RL steps at each gated row)
    ("recipes/smollm2.py", "cascade", ("ifeval", "math", "code"), [0, 20, 40, 60]),
    ("recipes/smollm2_mixed.py", "mixed", ("mixed1", "mixed2", "mixed3"), [0, 20, 40, 60]),
    ("recipes/smollm2.py:with_sft", "sft-cascade", ("sft", "ifeval", "math", "code"),
     [0, 0, 20, 40, 60]),
    ("recipes/smollm2_mixed.py:with_sft", "sft-mixed", ("sft", "mixed1", "mixed2", "mixed3"),
     [0, 0, 20, 40, 60]),
    ("recipes/smollm2.py:filtered", "filtered-cascade", ("ifeval", "math", "code"),
     [0, 20, 40, 60]),
    ("recipes/smollm2_mixed.py:filtered", "filtered-mixed", ("mixed1", "mixed2", "mixed3"),
     [0, 20, 40, 60]),
]


@pytest.mark.parametrize("spec, folder, stages, rl_steps", KEPT_RUNS)
def test_the_kept_runs_are_these_recipes_and_still_read(spec, folder, stages, rl_steps):
    """docs/results/smollm2.md reports the runs kept in docs/results/smollm2/ (their run directories
    without weights). Each must be its current recipe's run — a changed recipe needs a new run, not
    old numbers — and stay readable by the report and by the comparison that puts two side by
    side."""
    kept, current = KEPT / folder, load_recipe(spec)
    recorded = config.from_dict(config.Cascade, json.loads((kept / "config.json").read_text()))
    # where the run was written, not how it trained
    recorded = replace(recorded, run_root=current.run_root)
    # Equal as the lineage compares configs: settings added since that change no training (when
    # state is saved, how long a collective may wait) are filled in at their defaults and left out,
    # as in a resumed run's check.
    assert config_hash(recorded) == config_hash(current)
    assert [config_hash(s) for s in recorded.stages] == [config_hash(s) for s in current.stages]
    run = load_run(kept)
    assert [(s.name, s.status) for s in run.stages] == [(n, "done") for n in stages]
    assert all(s.steps == 20 for s in run.stages if s.kind == "grpo")
    assert [label for label, _ in run.history] == ["base", *stages]
    # the SFT row sits at 0 RL steps, beside the base row
    assert [p.steps for p in points(run)] == rl_steps


@pytest.mark.parametrize("folders, out",
                         [(("cascade", "mixed"), "."),
                          (("sft-cascade", "sft-mixed"), "sft-comparison"),
                          (("sft-cascade", "filtered-cascade"), "filtered-vs-unfiltered"),
                          (("filtered-cascade", "filtered-mixed"), "filtered-comparison")])
def test_the_kept_comparisons_are_of_the_kept_runs(folders, out):
    runs = [load_run(KEPT / folder) for folder in folders]
    assert (KEPT / out / "comparison.md").read_text().startswith(comparison_markdown(runs))


def test_filtered_trains_the_sft_model_on_training_rows_it_sometimes_solves():
    """recipes/smollm2.py:filtered and its mixed twin: RL from with_sft's SFT export, the same
    stages, gate and engine as with_sft, math and code prompts from the difficulty-filtered files —
    rows of the training splits only (never an item of the gate's held-out suites) — and each domain
    drawn equally often in the mixed run."""
    from nemo_cascade.cascade.driver import stage_dir
    from nemo_cascade.data.rows import read_jsonl

    sft, cascade, mixed = (load_recipe(spec) for spec in ("recipes/smollm2.py:with_sft",
                                                          "recipes/smollm2.py:filtered",
                                                          "recipes/smollm2_mixed.py:filtered"))
    export = str(stage_dir(replace(sft, run_root="runs"), 0) / "hf")
    assert (cascade.model == mixed.model == config.Model(hf_path=export)
            and sft.stages[0].kind == "sft")
    for cfg in (cascade, mixed):  # every check but the SFT export's presence: the same shape, built
        check_cascade(replace(cfg, model=sft.model, stages=tuple(_default_engine(cfg.stages))))
        assert cfg.gate == sft.gate and cfg.chat_style == sft.chat_style
    assert [replace(s, data=None, extra_data=()) for s in cascade.stages] == [
        replace(s, data=None, extra_data=()) for s in sft.stages[1:]]
    sources = {s.domain: s.data for s in cascade.stages}
    assert sources["ifeval"] == config.stage_by_name(sft, "ifeval").data
    # the filtered files hold train rows only: MBPP train task ids, leg-counting problems not in its
    # test split
    code_rows = [row for _, row in read_jsonl(Path(sources["code"].source))]
    assert code_rows and all(601 <= int(row["uid"].split("/")[1]) <= 974 for row in code_rows)
    held_out = {row["messages"][0]["content"]
                for _, row in read_jsonl(ROOT / "data" / "leg_counting" / "test.jsonl")}
    math_rows = [row for _, row in read_jsonl(Path(sources["math"].source))]
    assert math_rows and not {row["question"] for row in math_rows} & held_out
    # the mixed run: the cascade's prompts, each domain's pool listed to about the same size
    cascade_sources = {(replace(d, domain=""), dom)
                       for s in cascade.stages for d, dom in config.prompt_sources(s)}
    pools = {}
    for segment in mixed.stages:
        assert ({(replace(d, domain=""), dom) for d, dom in config.prompt_sources(segment)}
                == cascade_sources)
    for data, domain in config.prompt_sources(mixed.stages[0]):
        rows = data.size or sum(1 for _ in read_jsonl(Path(data.source)))
        pools[domain] = rows * data.repeat
    assert max(pools.values()) <= 1.25 * min(pools.values()), pools


def test_the_kept_sft_turns_runs_are_the_recipe_learning_all_turns_and_the_last():
    """docs/results/smollm2.md, "Which turns SFT learns": the two runs kept in sft-turns/ are
    recipes/smollm2.py:sft_turns with data.sft_turns all and last, and comparison.md is theirs."""
    current = load_recipe("recipes/smollm2.py:sft_turns")
    (sft,) = current.stages
    runs = []
    for turns in ("all", "last"):
        kept = KEPT / "sft-turns" / turns
        recorded = config.from_dict(config.Cascade, json.loads((kept / "config.json").read_text()))
        reading = replace(sft, data=replace(sft.data, sft_turns=turns))
        assert [config_hash(s) for s in recorded.stages] == [config_hash(reading)]
        run = load_run(kept)
        assert [(s.name, s.status) for s in run.stages] == [("sft", "done")]
        runs.append(run)
    comparison = (KEPT / "sft-turns" / "comparison.md").read_text()
    assert comparison.startswith(comparison_markdown(runs))


def test_the_kept_repair_run_is_the_recipe_and_its_repair_taught_the_student_itself():
    """docs/results/smollm2.md, "A repair after math RL": recipes/smollm2.py:filtered_with_repair
    run to its repair stage. Math RL cost IFEval nothing this time, so the best IFEval row was
    math's own and both domains' teacher was the student's starting point: the reverse KL is 0 at
    every step."""
    kept = KEPT / "filtered-repair"
    current = load_recipe(str(ROOT / "recipes" / "smollm2.py:filtered_with_repair"))
    recorded = config.from_dict(config.Cascade, json.loads((kept / "config.json").read_text()))
    recorded = replace(recorded, run_root=current.run_root)
    assert config_hash(recorded) == config_hash(current)
    assert [config_hash(s) for s in recorded.stages] == [config_hash(s) for s in current.stages]
    run = load_run(kept)
    assert [(s.name, s.status) for s in run.stages] == [
        ("ifeval", "done"), ("math", "done"), ("repair", "done"), ("code", "pending")]
    assert [label for label, _ in run.history] == ["ifeval", "math", "repair"]
    teachers = json.loads((kept / "manifest.json").read_text())["stages"]["repair"]["teachers"]
    assert {d: (t["source"], t["folder"].split("/")[-2]) for d, t in teachers.items()} == {
        "math": ("math", "1-math"), "ifeval": ("best", "1-math")}
    metrics = (kept / "stages/2-repair/metrics.jsonl").read_text()
    rows = [json.loads(line) for line in metrics.splitlines()]
    assert len(rows) == 10 and {r["reverse_kl"] for r in rows} == {0.0}
