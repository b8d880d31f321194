"""Whole-cascade validation before training (cascade/preflight.py, config.validate): stage kinds,
data files, reward servers, stage hand-over settings, the gate, the tokenizer; each a one-line error
naming the field or file. And the lineage manifest's resume guard (cascade/lineage.py)."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.cascade.lineage import Manifest, config_hash
from nemo_cascade.cascade.preflight import check_cascade, check_tokenizer, data_fingerprint

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    return load_recipe(str(ROOT / "recipes" / "tiny.py"))


def _stage(cfg, name, **changes):
    return replace(cfg,
                   stages=tuple(replace(s, **changes) if s.name == name else s for s in cfg.stages))


def _error(cfg) -> str:
    with pytest.raises(config.ConfigError) as e:
        check_cascade(cfg)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_the_tiny_recipe_is_the_whole_pipeline(tiny):
    """Every stage kind of §4.1 in the paper's order, the RLHF stage scored by the cascade's own
    RM."""
    assert [(s.kind, s.domain if s.kind == "grpo" else "") for s in tiny.stages] == [
        ("sft", ""), ("reward_model", ""), ("grpo", "rlhf"), ("grpo", "ifeval"), ("grpo", "math"),
        ("grpo", "code"), ("grpo", "swe")]
    assert config.stage_by_name(tiny, "rlhf").reward.reward_model_stage == "rm"
    assert {config.stage_by_name(tiny, s).domain for s in ("ifeval", "math", "code", "swe")} <= {
        __import__("nemo_cascade.evaluate.suites", fromlist=["x"]).get_suite(g).domain
        for g in tiny.gate.suites}
    hashes = check_cascade(tiny)
    assert len(hashes["sft"]) == 5 and all(len(h) == 64 for v in hashes.values() for h in v)


def test_a_bf16_actor_on_a_cpu_without_bf16_is_a_warning_not_an_error(tiny, monkeypatch, caplog):
    from nemo_cascade.cascade import preflight
    from nemo_cascade.rollout import engine_dtype

    monkeypatch.setattr(preflight, "is_vllm_cpu", lambda: True)
    monkeypatch.setattr(engine_dtype, "cpu_flags", lambda: {"avx2", "avx512f"})
    # the engines sample in fp32, so only the actor is in bf16
    bf16 = replace(tiny, model=replace(tiny.model, dtype="bfloat16"), stages=tuple(
        replace(s, rollout=replace(s.rollout, dtype="float32")) for s in tiny.stages))
    check_cascade(bf16)
    assert [r.getMessage() for r in caplog.records if "model.dtype=bfloat16" in r.getMessage()]
    caplog.clear()
    check_cascade(tiny)
    assert not [r for r in caplog.records if "model.dtype=bfloat16" in r.getMessage()]


def test_unknown_stage_kind(tiny):
    assert "stages.math.kind: unknown stage kind 'ppo'" in _error(_stage(tiny, "math", kind="ppo"))


def test_missing_data_file_names_the_stage(tiny, tmp_path):
    bad = _stage(tiny, "code", data=config.Data(source=str(tmp_path / "nope.jsonl")))
    assert f"stages.code.data.source: {tmp_path / 'nope.jsonl'}: no such file" in _error(bad)
    bad = _stage(tiny, "sft", extra_data=(config.Data(source="synthetic:chess"),))
    assert "stages.sft.data.source: data.source: unknown synthetic set 'chess'" in _error(bad)


def test_a_stage_needing_a_reward_model_without_one(tiny):
    no_rm = _stage(tiny, "rlhf", reward=config.Reward())
    assert ("stages.rlhf.reward.reward_model_url: the rlhf domain needs a reward model"
            in _error(no_rm))
    later = _stage(tiny, "rlhf", reward=config.Reward(reward_model_stage="math"))
    assert "'math' is not an earlier reward_model stage; those are ['rm']" in _error(later)
    both = _stage(tiny, "rlhf",
                  reward=config.Reward(reward_model_stage="rm", reward_model_url="http://x"))
    assert "set it or reward.reward_model_url, not both" in _error(both)
    bonus = _stage(tiny, "ifeval", reward=config.Reward(if_rm_bonus=True))
    assert "if_rm_bonus needs a reward model" in _error(bonus)


def test_gate_settings(tiny):
    assert "gate.suites: --suite nope: unknown suite" in _error(
        replace(tiny, gate=replace(tiny.gate, suites=("nope",))))
    tol = replace(tiny.gate, tolerance=("tiny-math=x",))
    assert "gate.tolerance: expected SUITE=DROP" in _error(replace(tiny, gate=tol))
    assert config.tolerances(replace(tiny.gate, tolerance=("tiny-code=0.1",)))["tiny-code"] == 0.1
    assert config.tolerances(tiny.gate)["tiny-math"] == tiny.gate.min_drop
    no_rm = replace(tiny, stages=tuple(s for s in tiny.stages if s.name not in ("rm", "rlhf")))
    assert ("tiny-rlhf is scored by a reward model, but the cascade has no reward_model stage"
            in _error(no_rm))
    served = replace(no_rm, gate=replace(no_rm.gate, reward_model_url="http://rm:8000"))
    check_cascade(served)  # a served RM scores the pairwise suite instead
    assert "gate.reward_model_url: the cascade trains a reward_model stage" in _error(
        replace(tiny, gate=served.gate))
    no_chunk = replace(tiny, gate=replace(tiny.gate, chunk_items=0))
    assert "gate.chunk_items: expected >= 1" in _error(no_chunk)


def test_boundary_policy_checks(tiny):
    carry = config.Boundary(optimizer="carry")
    assert "'carry' needs a policy stage right before" in _error(
        _stage(tiny, "rlhf", boundary=carry))
    changed = _stage(_stage(tiny, "math", boundary=carry), "math",
                     actor=config.Actor(lr=1e-4, adam_beta2=0.9))
    assert "actor.adam_beta2 must equal stage ifeval's" in _error(changed)
    check_cascade(_stage(tiny, "math", boundary=carry))  # same optimizer settings: fine
    cont = config.Boundary(data="continue")
    assert "'continue' needs an earlier grpo stage with the same data" in _error(
        _stage(tiny, "math", boundary=cont))
    assert "a reward_model stage reads data" in _error(
        _stage(tiny, "rm", extra_data=(config.Data(source="synthetic:arithmetic"),)))
    mixed = _stage(tiny, "math",
                   extra_data=(config.Data(source="synthetic:code_arithmetic", domain="code"),))
    check_cascade(mixed)  # a grpo stage may mix domains
    assert config.stage_domains(next(s for s in mixed.stages if s.name == "math")) == \
        ("math", "code")
    wrong = _stage(tiny, "math",
                   extra_data=(config.Data(source="synthetic:code_arithmetic", domain="coding"),))
    assert "stages.math.extra_data.0.domain: expected one of" in _error(wrong)
    sft_domain = _stage(tiny, "sft", data=config.Data(source="synthetic:arithmetic", domain="math"))
    assert "stages.sft.data.domain: only grpo prompts are scored in a domain" in _error(sft_domain)
    with_rlhf = _stage(tiny, "math",
                       extra_data=(config.Data(source="synthetic:arithmetic", domain="rlhf"),))
    assert ("stages.math.reward.reward_model_url: the rlhf domain needs a reward model"
            in _error(with_rlhf))
    assert "checkpoint_every: expected >= 0" in _error(_stage(tiny, "math", checkpoint_every=-1))
    assert "keep_checkpoints: expected >= 1" in _error(replace(tiny, keep_checkpoints=0))


def test_data_fingerprint_follows_the_rows(tmp_path):
    a = data_fingerprint(config.Data(source="synthetic:arithmetic", size=10, seed=1), "x")
    assert a == data_fingerprint(config.Data(source="synthetic:arithmetic", size=10, seed=1), "x")
    assert a != data_fingerprint(config.Data(source="synthetic:arithmetic", size=10, seed=2), "x")
    f = tmp_path / "d.jsonl"
    f.write_text('{"question": "q", "label": "1"}\n')
    before = data_fingerprint(config.Data(source=str(f)), "x")
    f.write_text('{"question": "q", "label": "2"}\n')
    assert data_fingerprint(config.Data(source=str(f)), "x") != before


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS

    return BUILDERS["tiny-qwen3"](tmp_path_factory.mktemp("m") / "tiny")


def test_tokenizer_mismatch(tiny_model, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    check_tokenizer(tok, tiny_model, [])
    small = tmp_path / "small"
    shutil.copytree(tiny_model, small)
    cfg = json.loads((small / "config.json").read_text())
    (small / "config.json").write_text(json.dumps({**cfg, "vocab_size": 100}))
    with pytest.raises(config.ConfigError,
                       match=r"the tokenizer has \d+ tokens but the model's vocab_size is 100"):
        check_tokenizer(tok, small, [])
    # a finished stage exported with another tokenizer (the base was swapped between runs)
    stage = tmp_path / "stages" / "0-sft"
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    build_tiny_tokenizer(stage / "hf", ["other text entirely " * 50], vocab_size=300)
    with pytest.raises(config.ConfigError, match="its tokenizer differs from the base model's"):
        check_tokenizer(tok, tiny_model, [stage])


def test_manifest_refuses_to_resume_a_stage_under_another_config(tiny, tmp_path):
    path = tmp_path / "manifest.json"
    m = Manifest(tiny, path, "base", {})
    math = config.stage_by_name(tiny, "math")
    m.update("math", status="running", config_sha256=config_hash(math))
    again = Manifest(tiny, path, "base", {})
    again.check_resumable(math)  # same config: resumes
    # a served RM on another host after a requeue: the same stage (endpoints are not part of the
    # hash)
    again.check_resumable(replace(math, reward=replace(
        math.reward, reward_model_url="http://node17:8000", judge_url="http://node18:8001")))
    with pytest.raises(
            config.ConfigError,
            match="stages.math: its config changed since the interrupted run started it"):
        again.check_resumable(replace(math, steps=math.steps + 1))
    path.write_text("{not json")
    with pytest.raises(config.ConfigError, match="manifest.json: not valid JSON"):
        Manifest(tiny, path, "base", {})


def test_tiny_suite_files_are_what_the_generator_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tiny_suites",
                                                  ROOT / "tools" / "make_tiny_suites.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for path, text in module.render_all().items():
        assert (ROOT / "data" / path).read_text() == text, f"data/{path} is stale: run the tool"


def test_training_requests_must_fit_the_models_positions(tiny, tiny_model):
    """A GRPO request longer than the model's positions would be cut short by vLLM: refused before
    training, with the fix (App. B's YaRN) in the message. The gate's budgets are not checked: they
    are capped."""
    from nemo_cascade.cascade.preflight import check_model

    cfg = replace(tiny, model=config.Model(hf_path=str(tiny_model)))
    check_model(cfg)  # 1024 positions hold every tiny request
    math = next(s for s in cfg.stages if s.kind == "grpo")
    long = _stage(cfg, math.name, rollout=replace(math.rollout, max_response_tokens=2000))
    with pytest.raises(config.ConfigError,
                       match=rf"stages.{math.name}.rollout: max_prompt_tokens \+ "
                             rf"max_response_tokens = \d+ exceeds the model's 1024 positions .* "
                             rf"set model.yarn_factor"):
        check_model(long)
    # 3072 positions with YaRN ×3
    check_model(replace(long, model=replace(long.model, yarn_factor=3.0)))


def test_the_recipes_yarn_factor_is_what_the_run_trains_and_serves(tiny, tiny_model, tmp_path):
    """``model.yarn_factor`` makes the run's base a view of the HF folder whose config.json adds
    YaRN over the model's native positions (App. B), the weights linked, not copied; without it the
    folder is used as is."""
    from nemo_cascade.cascade.base_model import prepare_base_model
    from nemo_cascade.cascade.driver import run_dir
    from nemo_cascade.convert.shape import read_hf_config

    plain = replace(tiny, run_root=str(tmp_path), model=config.Model(hf_path=str(tiny_model)))
    assert prepare_base_model(plain, run_dir(plain)) == str(tiny_model)
    scaled = replace(plain, model=replace(plain.model, yarn_factor=2.0))
    folder = Path(prepare_base_model(scaled, run_dir(scaled)))
    assert folder == tmp_path / tiny.name / "base_model"
    shape = read_hf_config(folder)
    assert shape.yarn == (2.0, 1024) and shape.max_position_embeddings == 2048
    weights = [p for p in folder.iterdir() if p.suffix == ".safetensors"]
    assert weights and all(p.is_symlink() and p.resolve().parent == tiny_model.resolve()
                           for p in weights)
    assert json.loads((tiny_model / "config.json").read_text()).get("rope_scaling") is None, \
        "the source is untouched"
    # the second call finds it made
    assert prepare_base_model(scaled, run_dir(scaled)) == str(folder)
    thrice = replace(scaled, model=replace(scaled.model, yarn_factor=3.0))
    remade = read_hf_config(prepare_base_model(thrice, run_dir(thrice)))
    assert remade.yarn == (3.0, 1024), "a changed factor remakes the view"


def test_a_repeated_grpo_source_is_listed_that_many_times_in_the_pool(tiny, tiny_model, tmp_path):
    """``Data.repeat`` in a GRPO stage: a small source (4 rows, ×3) enters the pool as often as a
    larger one (12 rows), each copy under its own uid so that the epoch filter can tell them
    apart."""
    from transformers import AutoTokenizer

    from nemo_cascade.cascade.stage_data import policy_data
    from nemo_cascade.data.loader import PromptStream

    math = config.stage_by_name(tiny, "math")
    larger = replace(math.data, size=12, seed=math.data.seed + 1)
    cfg = _stage(tiny, "math", data=replace(math.data, size=4, repeat=3), extra_data=(larger,))
    check_cascade(cfg)
    rm = config.stage_by_name(tiny, "rm")
    assert ("stages.rm.data.repeat: weights a source in an SFT blend or a GRPO prompt pool"
            in _error(_stage(tiny, "rm", data=replace(rm.data, repeat=2))))
    # what loading the prompts needs: the config and the tokenizer
    cfg, tokenizer = replace(cfg, run_root=str(tmp_path)), AutoTokenizer.from_pretrained(tiny_model)
    _, pool = policy_data(cfg, config.stage_by_name(cfg, "math"), tokenizer)
    assert len(pool) == 24 and not any("@copy" in p.uid for p in pool[12:]), \
        "the larger source once"
    first, *copies = [pool[k * 4:(k + 1) * 4] for k in range(3)]
    for n, copy in enumerate(copies, start=2):
        assert [p.prompt_tokens for p in copy] == [p.prompt_tokens for p in first]
        assert [p.uid for p in copy] == [f"{p.uid}@copy{n}" for p in first]
    PromptStream(pool, epoch_filter=(0.0, 0.0))  # refuses a pool whose uids repeat
    alone_source = replace(config.stage_by_name(cfg, "math"), extra_data=())
    _, alone = policy_data(cfg, alone_source, tokenizer)
    assert len(alone) == 12, "a repeated single source is listed three times too"


def test_sources_with_shares_hold_those_shares_of_the_pool(tiny, tiny_model, tmp_path):
    """``Data.share`` in a GRPO stage: a 4-row source at 60 % beside a 12-row one at 40 % — the
    smallest pool holding every row (30: 12 is 40 %) with the small source repeated to 18 rows, in
    four whole copies and a seeded half of a fifth, each under its own uid."""
    from transformers import AutoTokenizer

    from nemo_cascade.cascade.stage_data import policy_data
    from nemo_cascade.data.loader import PromptStream

    math = config.stage_by_name(tiny, "math")
    small = replace(math.data, size=4, share=0.6)
    larger = replace(math.data, size=12, seed=math.data.seed + 1, share=0.4)
    cfg = replace(_stage(tiny, "math", data=small, extra_data=(larger,)), run_root=str(tmp_path))
    check_cascade(cfg)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    _, pool = policy_data(cfg, config.stage_by_name(cfg, "math"), tokenizer)
    assert len(pool) == 30
    small_rows, larger_rows = pool[:18], pool[18:]
    assert len(larger_rows) == 12 and not any("@copy" in p.uid for p in larger_rows)
    first = small_rows[:4]
    for n in (2, 3, 4):
        assert [p.uid for p in small_rows[(n - 1) * 4:n * 4]] == [f"{p.uid}@copy{n}" for p in first]
    part = small_rows[16:]
    assert len(part) == 2 and all(p.uid.endswith("@copy5") for p in part)
    _, again = policy_data(cfg, config.stage_by_name(cfg, "math"), tokenizer)
    assert [p.uid for p in again] == [p.uid for p in pool], "the part is drawn the same each time"
    PromptStream(pool, epoch_filter=(0.0, 0.0))  # every uid its own


@pytest.mark.parametrize("shares, repeat, message", [
    ((0.5, 0.0), 1, "stages.math.extra_data.0.share: expected a share in (0, 1] on every source "
                    "once one source states one, got 0.0"),
    ((0.5, 0.3), 1, "stages.math: the sources' shares (data, extra_data.*) add up to 0.8; "
                    "expected 1"),
    ((1.5, -0.5), 1, "stages.math.data.share: expected a share in (0, 1]"),
    ((0.5, 0.5), 2, "stages.math.data.repeat: a source with a share is repeated as its share "
                    "needs; leave repeat at 1 (got 2)"),
])
def test_shares_that_do_not_make_a_pool_are_one_line(tiny, shares, repeat, message):
    math = config.stage_by_name(tiny, "math")
    cfg = _stage(tiny, "math", data=replace(math.data, share=shares[0], repeat=repeat),
                 extra_data=(replace(math.data, seed=9, share=shares[1]),))
    assert _error(cfg).startswith(message)
    sft = config.stage_by_name(tiny, "sft")
    assert _error(_stage(tiny, "sft", data=replace(sft.data, share=1.0))).startswith(
        "stages.sft.data.share: a share of a prompt pool, for grpo and distill stages")


def test_a_small_share_of_a_large_source_is_refused_before_the_pool_grows():
    from nemo_cascade.data.loader import POOL_LIMIT, DataError, PromptList, pool_by_share

    big, small = PromptList(range(1000)), PromptList(range(10))
    with pytest.raises(DataError, match=r"^stages.s.data.share: 0.01 of the pool for its 1,000 "
                                        r"rows makes a pool of 100,000, over 16 times"):
        pool_by_share([big, small], [0.01, 0.99], ["a", "b"], ["stages.s.data", "stages.s.x"])
    assert POOL_LIMIT == 16
    with pytest.raises(DataError, match="stages.s.x: no prompts to give a share of the pool"):
        pool_by_share([big, PromptList()], [0.5, 0.5], ["a", "b"], ["stages.s.data", "stages.s.x"])


def test_a_missing_base_that_was_never_released_names_the_recipe_that_makes_it(tmp_path):
    from nemo_cascade.config.recipe_file import load_recipe

    cfg = load_recipe(str(ROOT / "recipes" / "nemotron_cascade_14b_thinking.py"))
    cfg = replace(
        cfg, model=replace(cfg.model, hf_path=str(tmp_path / "Nemotron-Cascade-14B-Thinking-SFT")))
    assert _error(cfg) == (
        f"model.hf_path: {tmp_path}/Nemotron-Cascade-14B-Thinking-SFT is not there, and it "
        "is no release: run recipes/nemotron_cascade_14b_thinking.py:with_sft (which trains "
        "it first), or set model.hf_path to your own checkpoint")
    released = replace(cfg, model=replace(cfg.model, made_by=""))
    with pytest.raises(Exception, match="config.json: no such file"):  # a release's own message
        check_cascade(released)
