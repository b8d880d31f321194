"""Length phases that end at a clip ratio (LengthPhase.until_clip_ratio, §4.5.2) and their resumable
state."""
import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.algorithms.length_curriculum import CLIP_RATIO_WINDOW, LengthCurriculum
from nemo_cascade.data.loader import DataError


def _stage(*phases: config.LengthPhase) -> config.Stage:
    return config.Stage(name="math", kind="grpo", steps=sum(p.steps for p in phases),
                        length_curriculum=phases, data=config.Data(source="synthetic:arithmetic"))


def _run(curriculum: LengthCurriculum, ratios, start: int = 0) -> list[int]:
    """The phase index of each step run, feeding ``ratios`` as the steps' clip ratios."""
    seen = []
    for step, ratio in enumerate(ratios, start):
        if curriculum.finished:
            break
        seen.append(curriculum.at()[0])
        curriculum.record(step, ratio)
    return seen


def test_fixed_phases_follow_their_steps_whatever_the_clip_ratio():
    stage = _stage(config.LengthPhase(3, 24, "filter"), config.LengthPhase(2, 32, "zero"))
    assert _run(LengthCurriculum(stage), [0.0] * 10) == [0, 0, 0, 1, 1]
    assert [config.phase_at(stage, s)[0] for s in range(5)] == [0, 0, 0, 1, 1]


def test_a_phase_ends_once_its_clip_ratio_averages_down_to_the_threshold():
    stage = _stage(config.LengthPhase(20, 24, "filter", until_clip_ratio=0.1),
                   config.LengthPhase(4, 32, "zero"))
    ratios = [0.5, 0.3, 0.2, 0.1, 0.05, 0.05, 0.0, 0.0] + [0.0] * 20
    # window means: steps 0–4 → 0.23, 1–5 → 0.14, 2–6 → 0.08 ≤ 0.1: phase 0 ends after step 6
    seen = _run(LengthCurriculum(stage), ratios)
    assert seen == [0] * 7 + [1] * 4
    assert CLIP_RATIO_WINDOW == 5


def test_a_phase_never_ends_before_a_full_window_nor_after_its_steps():
    stage = _stage(config.LengthPhase(3, 24, until_clip_ratio=0.5), config.LengthPhase(2, 32))
    assert _run(LengthCurriculum(stage), [0.0] * 10) == [0, 0, 0, 1, 1]  # steps cap the phase
    long = _stage(config.LengthPhase(30, 24, until_clip_ratio=0.5), config.LengthPhase(2, 32))
    assert _run(LengthCurriculum(long),
                [0.0] * 40)[:CLIP_RATIO_WINDOW + 1] == [0] * CLIP_RATIO_WINDOW + [1]


def test_state_resumes_mid_phase_bit_for_bit():
    stage = _stage(config.LengthPhase(20, 24, until_clip_ratio=0.1), config.LengthPhase(4, 32))
    ratios = [0.5, 0.3, 0.2, 0.1, 0.05, 0.05, 0.0] + [0.0] * 10
    whole = _run(LengthCurriculum(stage), ratios)
    first = LengthCurriculum(stage)
    part = _run(first, ratios[:4])
    resumed = LengthCurriculum(stage)
    resumed.begin(4, first.state_dict())
    assert part + _run(resumed, ratios[4:], start=4) == whole


def test_a_checkpoint_without_the_state_derives_fixed_boundaries_from_the_step():
    stage = _stage(config.LengthPhase(3, 24), config.LengthPhase(2, 32))
    c = LengthCurriculum(stage)
    c.begin(4, None)
    assert c.at()[0] == 1 and not c.finished
    c.record(4, 0.0)
    assert c.finished


def test_a_state_that_does_not_fit_the_stage_is_one_line():
    c = LengthCurriculum(_stage(config.LengthPhase(3, 24), config.LengthPhase(2, 32)))
    with pytest.raises(DataError) as e:
        c.begin(5, {"starts": [0, 3, 5, 9], "recent": []})
    assert "\n" not in str(e.value) and "length-curriculum" in str(e.value)


def test_the_command_line_form_and_its_check():
    tiny = config.Cascade(name="t", model=config.Model(build="tiny"),
                          stages=(_stage(config.LengthPhase(40, 24)), ))
    cfg = apply_overrides(tiny, ["stages.math.length_curriculum=30:24:filter:C0.1,10:32:zero:T0.8"])
    assert cfg.stages[0].length_curriculum == (config.LengthPhase(30, 24, "filter", None, 0.1),
                                              config.LengthPhase(10, 32, "zero", 0.8, 0.0))
    with pytest.raises(config.ConfigError,
                       match=r"length_curriculum.0.until_clip_ratio: expected a share in \[0, 1\)"):
        apply_overrides(tiny, ["stages.math.length_curriculum=30:24:C1.5,10:32"])
