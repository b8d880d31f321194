"""Repair on demand (repair.py, ``gate.on_regression = repair``): which stage the gate inserts
after a flagged GRPO stage, where it is not inserted, how a re-run rebuilds it from the manifest,
what ``plan`` sizes, and the one-line errors of a repair setting that has nothing to repair."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.config.recipe_file import load_recipe
from nemo_cascade.cascade.lineage import Manifest
from nemo_cascade.cascade.repair import (insert, inserts_after, repair_stage, with_possible_repairs,
                                         with_recorded_repairs)

ROOT = Path(__file__).resolve().parents[2]


def _tiny(**gate) -> config.Cascade:
    cfg = load_recipe(str(ROOT / "recipes" / "tiny.py"))
    return replace(cfg, gate=replace(cfg.gate, on_regression="repair", **gate))


def _index(cfg: config.Cascade, name: str) -> int:
    return [s.name for s in cfg.stages].index(name)


def test_flagged_domains_learn_from_their_best_row_and_the_stage_keeps_its_own():
    cfg = _tiny(repair=config.Repair(steps=7, lr=2e-5, reward_weight=0.5))
    k = _index(cfg, "math")
    math, rlhf = cfg.stages[k], cfg.stages[_index(cfg, "rlhf")]
    repair = repair_stage(cfg, k, ["rlhf"])
    assert repair.name == "math-repair" and repair.kind == "distill"
    assert repair.distill.teachers == ("math=math", "rlhf=best")
    assert repair.distill.reward_weight == 0.5
    assert (repair.steps, repair.actor.lr) == (7, 2e-5)
    # the math stage's own prompts, then the RLHF stage's, scored by the RM that stage used
    assert repair.data == math.data
    assert repair.extra_data == (replace(rlhf.data, domain="rlhf"),)
    assert repair.reward.reward_model_stage == "rm"
    assert repair.rollout == math.rollout
    assert repair.grpo == replace(math.grpo, refill_max_rounds=0)  # every group kept
    repaired = insert(cfg, k, repair)
    config.validate(repaired)
    assert [s.name for s in repaired.stages][k:k + 3] == ["math", "math-repair", "code"]
    # 0 = the flagged stage's learning rate
    assert repair_stage(_tiny(), k, ["rlhf"]).actor.lr == math.actor.lr


def test_the_repair_fits_every_domains_prompts_and_answers_and_keeps_every_group():
    cfg = _tiny()
    k, j = _index(cfg, "math"), _index(cfg, "rlhf")
    rlhf = cfg.stages[j]
    long_prompts = replace(rlhf, rollout=replace(rlhf.rollout, max_prompt_tokens=200))
    math = cfg.stages[k]
    phased = replace(math, grpo=replace(math.grpo, epoch_filter=True), length_curriculum=(
        config.LengthPhase(10, 24, "filter"), config.LengthPhase(14, 64, "zero")))
    stages = list(cfg.stages)
    stages[j], stages[k] = long_prompts, phased
    repair = repair_stage(replace(cfg, stages=tuple(stages)), k, ["rlhf"])
    assert (repair.rollout.max_prompt_tokens, repair.rollout.max_response_tokens) == (200, 64)
    assert repair.length_curriculum == () and repair.grpo.overlong == "zero"
    assert (repair.grpo.epoch_filter, repair.grpo.refill_max_rounds) == (False, 0)


def test_a_flagged_own_domain_learns_from_its_best_row_and_a_domain_without_prompts_is_skipped(
        caplog):
    cfg = _tiny()
    k = _index(cfg, "ifeval")
    own = repair_stage(cfg, k, ["ifeval", "math"])
    assert own.distill.teachers == ("ifeval=best", "math=best")
    # math's prompts come from the math stage after it: the recipe's prompts of that domain
    assert own.extra_data == (replace(cfg.stages[_index(cfg, "math")].data, domain="math"),)
    assert repair_stage(cfg, k, ["mcq"]) is None
    assert "no stage of the recipe has mcq prompts" in caplog.text


def test_the_gate_inserts_only_after_a_grpo_stage_it_may_separate_from_the_next():
    cfg = _tiny()
    assert [s.name for s in cfg.stages if inserts_after(cfg, _index(cfg, s.name))] == [
        "rlhf", "ifeval", "math", "code", "swe"]
    warn = replace(cfg, gate=replace(cfg.gate, on_regression="warn"))
    assert not inserts_after(warn, _index(cfg, "math"))
    k = _index(cfg, "math")
    placed = insert(cfg, k, repair_stage(cfg, k, ["rlhf"]))
    assert inserts_after(placed, k)  # judged again: its own repair is replaced
    assert not inserts_after(placed, k + 1)  # not after a distill stage
    by_hand = replace(placed.stages[k + 1], name="repair")
    recipe = replace(cfg, stages=(*cfg.stages[:k + 1], by_hand, *cfg.stages[k + 1:]))
    assert not inserts_after(recipe, k)  # the recipe placed a distill stage there
    carried = replace(cfg.stages[k + 1], boundary=config.Boundary(optimizer="carry"))
    stages = (*cfg.stages[:k + 1], carried, *cfg.stages[k + 2:])
    assert not inserts_after(replace(cfg, stages=stages), k)


def test_a_rerun_rebuilds_the_inserted_stages_from_the_manifest(tmp_path):
    cfg = _tiny()
    k = _index(cfg, "math")
    repaired = insert(cfg, k, repair_stage(cfg, k, ["rlhf", "code"]))
    manifest = {"stages": {"math": {"gate": {"repair": {"stage": "math-repair",
                                                        "domains": ["rlhf", "code"]}}}}}
    assert with_recorded_repairs(cfg, manifest) == repaired
    assert with_recorded_repairs(repaired, manifest) == repaired  # replaced, not doubled
    assert with_recorded_repairs(cfg, {}) == cfg
    assert insert(repaired, k, None) == cfg

    m = Manifest(cfg, tmp_path / "manifest.json", "base", {})
    m.update("math", status="done")
    entry = {"status": "pending", "kind": "distill", "data_sha256": ["abc"]}
    m.set_stages([s.name for s in repaired.stages], {"math-repair": entry})
    written = json.loads((tmp_path / "manifest.json").read_text())["stages"]
    assert list(written) == [s.name for s in repaired.stages]
    assert written["math-repair"] == {"config_sha256": "", **entry}
    assert written["math"]["status"] == "done"
    m.set_stages([s.name for s in cfg.stages], {})  # withdrawn
    assert list(json.loads((tmp_path / "manifest.json").read_text())["stages"]) == [
        s.name for s in cfg.stages]


def test_plan_sizes_a_repair_after_every_grpo_stage_with_every_domain_as_a_teacher(capsys):
    from nemo_cascade.tooling.cli import main

    cfg = _tiny()
    possible = with_possible_repairs(cfg)
    repairs = [s for s in possible.stages if s.kind == "distill"]
    assert [s.name for s in repairs] == ["rlhf-repair", "ifeval-repair", "math-repair",
                                         "code-repair", "swe-repair"]
    assert {config.frozen_copies(s) for s in repairs} == {5}  # one best row per domain
    config.validate(possible)
    assert with_possible_repairs(replace(cfg, gate=replace(cfg.gate, on_regression="warn"))) == \
        replace(cfg, gate=replace(cfg.gate, on_regression="warn"))
    assert main(["plan", str(ROOT / "recipes" / "tiny.py"), "gate.on_regression=repair"]) == 0
    out = capsys.readouterr().out
    assert "math-repair" in out and "inserted only where the gate flags a regression" in out


def test_frozen_copies_count_each_domains_best_row():
    stage = config.Stage(kind="distill", extra_data=(config.Data(domain="code"),
                                                     config.Data(domain="swe")),
                         distill=config.Distill(teachers=("math=best", "code=best", "swe=sft")))
    assert config.frozen_copies(stage) == 3


@pytest.mark.parametrize("change,message", [
    (dict(suites=()), "gate.on_regression: 'repair' pulls flagged domains back toward their best "
                      "gate rows; the gate has no suites"),
    (dict(repair=config.Repair(steps=0)), "gate.repair.steps: expected >= 1"),
    (dict(repair=config.Repair(lr=-1.0)), "gate.repair.lr: expected >= 0"),
])
def test_a_repair_setting_that_cannot_repair_is_one_line(change, message):
    with pytest.raises(config.ConfigError) as e:
        config.validate(_tiny(**change))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_repair_setting_with_no_earlier_row_to_repair_from_is_one_line():
    cfg = load_recipe(str(ROOT / "recipes" / "tiny.py:math_only"))
    gate = config.Gate(suites=("tiny-math",), evaluate_base=False, on_regression="repair")
    only_rl = replace(cfg, stages=cfg.stages[1:], gate=gate)
    with pytest.raises(config.ConfigError) as e:
        config.validate(only_rl)
    assert str(e.value) == ("gate.on_regression: 'repair' repairs a GRPO stage from the gate rows "
                            "before it; no GRPO stage here has an earlier row to repair from")
    config.validate(replace(only_rl, gate=replace(gate, evaluate_base=True)))
    config.validate(replace(cfg, gate=gate))  # the SFT stage's row comes first


def test_a_stage_counts_as_finished_with_the_repair_its_gate_inserted(tmp_path):
    from nemo_cascade.cascade.stage_selection import check_selection, recorded_stages
    from nemo_cascade.tooling.launch_tasks import finished_stages

    cfg = replace(_tiny(), run_root=str(tmp_path))
    k = _index(cfg, "math")
    repaired = insert(cfg, k, repair_stage(cfg, k, ["rlhf"]))
    m = Manifest(cfg, tmp_path / cfg.name / "manifest.json", "base", {})
    for name in ("sft", "rm", "rlhf", "ifeval", "math"):
        m.update(name, status="done")
    m.update("math", gate={"repair": {"stage": "math-repair", "domains": ["rlhf"]}})
    m.set_stages([s.name for s in repaired.stages],
                 {"math-repair": {"status": "pending", "kind": "distill"}})
    assert recorded_stages(cfg) == repaired  # the recipe, with what the manifest inserted
    run = str(tmp_path / cfg.name)
    assert finished_stages(run) == ({"sft", "rm", "rlhf", "ifeval"}, "")
    check_selection(repaired, "math")  # done, its repair not: `--stage math` trains the repair
    with pytest.raises(config.ConfigError, match="earlier stage.s. math-repair not done"):
        check_selection(repaired, "code")
    m.update("math-repair", status="done")
    assert "math" in finished_stages(run)[0]
    with pytest.raises(config.ConfigError, match="--stage math: already done"):
        check_selection(repaired, "math")


def test_no_repair_once_a_later_stage_has_started_and_none_without_prompts():
    from nemo_cascade.cascade.repair import repair_for

    cfg = _tiny()
    k = _index(cfg, "math")
    assert repair_for(cfg, k, ["rlhf"], ["code"]) == (None, "later stage(s) code already started")
    repair, why_not = repair_for(cfg, k, ["rlhf"], ["math-repair"])  # its own, judged again
    assert repair.name == "math-repair" and why_not == ""
    assert repair_for(cfg, k, ["mcq"], []) == (None, "no prompts of mcq in the recipe")
