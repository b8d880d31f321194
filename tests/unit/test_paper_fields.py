"""The config fields the paper's recipes needed and the config could not say (docs/recipes.md,
"Paper features without a config field"): a temperature per length phase (T17–T19), no gate after
the first parts of a split stage, a minimum prompt length (SWE: 8K, §4.7), per-source weights in an
SFT blend (§3.3), a stage length in epochs (T14, §4.2). Each: the override and JSON forms, the
one-line errors, the stage hash of runs that predate it, and what it does where it acts (loader, the
GRPO loop, the cascade's gate, the report)."""
import json
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.cascade.lineage import config_hash

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")


@pytest.fixture
def tiny():
    # sft (sft_max_tokens 96) → math (max_prompt_tokens 64, 40 steps)
    return load_recipe(TINY + ":math_only")


def _error(cfg_or_fn) -> str:
    with pytest.raises(config.ConfigError) as e:
        cfg_or_fn()
    assert "\n" not in str(e.value)
    return str(e.value)


# ------------------------------------------------------------------------------------------- config

def test_overrides_set_every_new_field_and_survive_the_json_round_trip(tiny):
    cfg = apply_overrides(tiny, [
        "stages.math.data.min_prompt_tokens=16", "stages.sft.data.repeat=3",
        "stages.sft.evaluate=false", "stages.sft.steps=0", "stages.sft.epochs=1.5",
        "stages.math.length_curriculum=30:24:filter,10:32:zero:T0.8"])
    sft, math = config.stage_by_name(cfg, "sft"), config.stage_by_name(cfg, "math")
    assert math.data.min_prompt_tokens == 16 and sft.data.repeat == 3
    assert (sft.evaluate, sft.steps, sft.epochs, math.evaluate) == (False, 0, 1.5, True)
    assert math.length_curriculum == (config.LengthPhase(30, 24, "filter"),
                                      config.LengthPhase(10, 32, "zero", 0.8))
    assert config.from_dict(config.Cascade, json.loads(config.dumps(cfg))) == cfg


def test_a_config_json_written_before_the_fields_existed_still_loads(tiny):
    old = config.to_dict(tiny)
    for s in old["stages"]:
        for key in ("evaluate", "epochs"):
            del s[key]
        for key in ("min_prompt_tokens", "repeat"):
            del s["data"][key]
    assert config.from_dict(config.Cascade, old) == tiny


@pytest.mark.parametrize("text,phase", [
    ("40:32", config.LengthPhase(40, 32, "none", None)),
    # the three-field form reads as before
    ("40:32:zero", config.LengthPhase(40, 32, "zero", None)),
    ("40:32:T0.8", config.LengthPhase(40, 32, "none", 0.8)),
    ("40:32:filter:T1.2", config.LengthPhase(40, 32, "filter", 1.2)),
    ("40:32:t1.1:zero", config.LengthPhase(40, 32, "zero", 1.1)),
])
def test_length_curriculum_string_form(tiny, text, phase):
    cfg = apply_overrides(tiny, [f"stages.math.length_curriculum={text}"])
    assert config.stage_by_name(cfg, "math").length_curriculum == (phase,)


@pytest.mark.parametrize("override,message", [
    ("stages.math.length_curriculum=40:32:T0.8:T0.9",
     "at most one OVERLONG, one T<temperature> and one C<clip ratio>"),
    ("stages.math.length_curriculum=40:32:zero:filter",
     "at most one OVERLONG, one T<temperature> and one C<clip ratio>"),
    ("stages.math.length_curriculum=40:32:zero:T0.8:C0.1:x",
     "expected STEPS:TOKENS[:OVERLONG][:T<temperature>]"),
    ("stages.math.length_curriculum=40:32:Thot",
     "stages.math.length_curriculum (T<temperature>): expected float"),
    ("stages.math.length_curriculum=20:32,20:40:T0",
     "stages.math.length_curriculum.1.temperature: RL sampling needs > 0"),
    ("stages.math.data.min_prompt_tokens=-1",
     "stages.math.data.min_prompt_tokens: expected >= 0, got -1"),
    ("stages.math.data.min_prompt_tokens=65",
     "stages.math.data.min_prompt_tokens: 65 is above rollout.max_prompt_tokens=64"),
    ("stages.sft.data.min_prompt_tokens=97",
     "stages.sft.data.min_prompt_tokens: 97 is above sft_max_tokens=96"),
    ("stages.sft.data.repeat=0", "stages.sft.data.repeat: expected an integer >= 1, got 0"),
    ("stages.sft.epochs=1",
     "stages.sft.epochs: the length is steps or epochs, not both; set steps=0"),
    ("stages.sft.epochs=-1", "stages.sft.epochs: expected >= 0"),
    ("stages.sft.steps=0", "stages.sft.steps: expected >= 1, got 0 (or steps=0 with epochs > 0)"),
    ("stages.math.epochs=1", "stages.math.epochs: a grpo stage's length is steps"),
    ("stages.sft.evaluate=maybe", "stages.sft.evaluate: expected bool"),
    ("stages.sft.data.repeat=2.5", "stages.sft.data.repeat: expected int"),
])
def test_bad_values_name_the_field(tiny, override, message):
    assert message in _error(lambda: apply_overrides(tiny, [override]))


def test_extra_data_and_reward_model_sources_are_checked_too():
    full = load_recipe(TINY)
    sft = config.stage_by_name(full, "sft")
    blend = replace(sft, extra_data=(*sft.extra_data[:1], replace(sft.extra_data[1], repeat=0)))
    cfg = replace(full, stages=tuple(blend if s.name == "sft" else s for s in full.stages))
    assert ("stages.sft.extra_data.1.repeat: expected an integer >= 1, got 0"
            in _error(lambda: config.validate(cfg)))
    blend = replace(sft, extra_data=(replace(sft.extra_data[0], repeat=2.5),))
    cfg = replace(full, stages=tuple(blend if s.name == "sft" else s for s in full.stages))
    assert ("stages.sft.extra_data.0.repeat: expected an integer >= 1, got 2.5"
            in _error(lambda: config.validate(cfg)))
    rm = config.stage_by_name(full, "rm")
    cfg = replace(full, stages=tuple(replace(rm, data=replace(rm.data, min_prompt_tokens=8))
                                     if s.name == "rm" else s for s in full.stages))
    assert ("stages.rm.data.min_prompt_tokens: a reward_model stage keeps every row"
            in _error(lambda: config.validate(cfg)))
    epochs = replace(full, stages=tuple(replace(s, steps=0, epochs=1.0) if s.kind != "grpo" else s
                                        for s in full.stages))
    assert config.validate(epochs) is epochs  # SFT and RM stages may be given in epochs


def test_epochs_resolve_to_steps_over_the_loaded_rows():
    sft = config.Stage(name="sft", kind="sft", steps=0, epochs=1.0, sft_batch_size=32)
    # ⌈100 / 32⌉: the last batch wraps into epoch 2
    assert config.with_epoch_steps(sft, 100).steps == 4
    assert config.with_epoch_steps(sft, 64).steps == 2
    assert config.with_epoch_steps(sft, 1).steps == 1
    assert config.with_epoch_steps(replace(sft, epochs=1.5), 64).steps == 3
    # not 2 by rounding
    assert config.with_epoch_steps(replace(sft, epochs=0.1, sft_batch_size=3), 30).steps == 1
    rm = config.Stage(name="rm", kind="reward_model", steps=0, epochs=1.0, rm_batch_size=256)
    # §4.2: 82K pairs, batch 256, one epoch
    assert config.with_epoch_steps(rm, 82_000).steps == 321
    given = config.Stage(name="s", kind="sft", steps=7)
    assert config.with_epoch_steps(given, 10_000) is given


def test_the_log_shows_t14_s_steps_beside_the_epoch_they_cover():
    """T14: 1 epoch and 20K steps of 256 for stage 1, whose §3 rows (about 8.5M) make 33K steps."""
    sft = config.Stage(name="sft_16k", kind="sft", steps=20_000, sft_batch_size=256)
    assert config.epochs_line(sft, 8_500_000) == (
        "sft_16k: 20,000 steps × 256 = 5,120,000 sequences = 0.60 epochs of its 8,500,000 rows "
        "(1 epoch = 33,204 steps)")
    by_epochs = config.with_epoch_steps(replace(sft, steps=0, epochs=1.0), 8_500_000)
    assert config.epochs_line(by_epochs, 8_500_000).startswith(
        "sft_16k: 1 epoch, 33,204 steps × 256")


def test_phase_rollout_takes_the_phase_temperature_or_the_stage_one():
    stage = config.Stage(rollout=config.Rollout(temperature=1.2, max_response_tokens=8, top_p=0.95))
    hot = config.phase_rollout(stage, config.LengthPhase(5, 28_672, "filter"))
    # T18: 14B 1.2 → 1.1
    cool = config.phase_rollout(stage, config.LengthPhase(5, 40_960, "zero", 1.1))
    assert (hot.temperature, hot.max_response_tokens, hot.top_p) == (1.2, 28_672, 0.95)
    assert (cool.temperature, cool.max_response_tokens, cool.top_p) == (1.1, 40_960, 0.95)


# ------------------------------------------------------------------------------------------- hashes

def _hashed_stages():
    math = config.Stage(
        name="math", data=config.Data(source="x.jsonl"),
        length_curriculum=(config.LengthPhase(5, 24, "filter"), config.LengthPhase(5, 32, "zero")))
    sft = config.Stage(name="sft", kind="sft", data=config.Data(source="a.jsonl"),
                       extra_data=(config.Data(source="b.jsonl"),))
    return math, sft


def test_stage_hashes_of_configs_written_before_the_new_fields_are_unchanged():
    """The manifest refuses to resume a running stage whose config hash changed: a field added with
    its default must leave the hash of every existing config as it was. The literals are these
    configs' hashes before the fields (and Rollout.tensor_parallel_size) existed: what a manifest of
    schema version 1 (every manifest written before versions were recorded) holds."""
    math, sft = _hashed_stages()
    assert config_hash(math, schema_version=1) == \
        "33469b76d2e6863416b2f99bfa81cdf4c20ed9d4310c0288a2d29f8edb82870c"
    assert config_hash(sft, schema_version=1) == \
        "dad41ff51121d6160d249bd2633473929e7d705180dad6ee63a71cdca5275b76"
    cascade = config.Cascade(name="t", model=config.Model(build="tiny-qwen3"), stages=(math, sft))
    assert config_hash(cascade, schema_version=1) == \
        "f78bcf731e7dfe05e9efdc70989ef4f574eee1679883cf9779d69e846fef40c9"


def test_setting_a_new_field_changes_the_hash_except_the_gate_switch():
    math, sft = _hashed_stages()
    changed = [
        replace(math, length_curriculum=(config.LengthPhase(5, 24, "filter"),
                                         config.LengthPhase(5, 32, "zero", 0.8))),
        replace(math, data=replace(math.data, min_prompt_tokens=8192)),
        replace(math, data=replace(math.data, math_instruction="")),
        replace(math, reward=replace(math.reward, math_grader="rule")),
        replace(math, rollout=replace(math.rollout, tensor_parallel_size=2)),
        replace(sft, extra_data=(config.Data(source="b.jsonl", repeat=2),)),
        replace(sft, steps=0, epochs=1.0),
    ]
    hashes = {config_hash(s) for s in changed} | {config_hash(math), config_hash(sft)}
    assert len(hashes) == len(changed) + 2
    # The gate runs after the stage trained: switching it for an interrupted stage must not block
    # its resume.
    assert config_hash(replace(math, evaluate=False)) == config_hash(math)


# ------------------------------------------------------------------------------------------- loader

@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _jsonl(tmp_path, rows, name="rows.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _prompt_len(tok, question: str, mode: str) -> int:
    from nemo_cascade.data.chat import render

    return len(tok.encode(render([{"role": "user", "content": question}], mode),
                          add_special_tokens=False))


def test_short_prompts_are_dropped_and_counted_like_long_ones(tok, tmp_path, caplog):
    from nemo_cascade.data.loader import DataError, load_prompts, load_sft_examples
    from nemo_cascade.rewards import get_domain

    questions = ["hi", "what is one plus one", "count " * 10, "word " * 200]
    floor, limit = (_prompt_len(tok, questions[1], "no_think"),
                    _prompt_len(tok, questions[2], "no_think"))
    path = _jsonl(tmp_path, [{"question": q, "answer": "1", "response": "1"} for q in questions])
    # the lengths are measured on the bare questions: no math request appended
    # (data.math_instruction)
    bare = ""
    prompts = load_prompts(config.Data(source=path, min_prompt_tokens=floor, math_instruction=bare),
                           tok, "no_think", get_domain("math"), limit)
    assert [p.uid for p in prompts] == [f"{path}:2", f"{path}:3"]  # both bounds are inclusive
    assert (prompts.dropped_too_short, prompts.dropped_too_long) == (1, 1)
    assert ("dropped 1 of 4 rows whose prompt is shorter than "
            f"data.min_prompt_tokens={floor}") in caplog.text
    examples = load_sft_examples(config.Data(source=path, min_prompt_tokens=floor), tok,
                                 "no_think", limit)
    assert len(examples) == 2 and (examples.dropped_too_short, examples.dropped_too_long) == (1, 1)
    with pytest.raises(DataError,
                       match=rf"no usable rows \(1 longer than max_prompt_tokens={limit}, "
                             rf"3 shorter than data.min_prompt_tokens={limit + 1}\)"):
        load_prompts(config.Data(source=path, min_prompt_tokens=limit + 1, math_instruction=bare),
                     tok, "no_think", get_domain("math"),
                     limit)


def test_half_mode_keeps_a_row_only_if_both_templatings_reach_the_minimum(tok, tmp_path):
    from nemo_cascade.data.loader import DataError, load_prompts
    from nemo_cascade.rewards import get_domain

    question = "what is one plus one"
    think, no_think = _prompt_len(tok, question, "think"), _prompt_len(tok, question, "no_think")
    assert think != no_think, "the flags differ in length, which this test relies on"
    data = config.Data(source=_jsonl(tmp_path, [{"question": question, "answer": "2"}]),
                  # lengths of the bare question
                  min_prompt_tokens=max(think, no_think), math_instruction="")
    assert len(load_prompts(data, tok, "think" if think > no_think else "no_think",
                            get_domain("math"), 64)) == 1
    with pytest.raises(DataError, match="1 shorter than data.min_prompt_tokens"):
        load_prompts(data, tok, "half", get_domain("math"),
                     64)  # the shorter templating is under the minimum


def test_sft_blend_counts_a_source_repeat_times(tok, tmp_path):
    from nemo_cascade.data.loader import load_sft_blend, sft_batches

    a = _jsonl(tmp_path, [{"question": f"a{i}", "response": "x"} for i in range(3)], "a.jsonl")
    b = _jsonl(tmp_path, [{"question": f"b{i}", "response": "y"} for i in range(2)], "b.jsonl")
    blend = load_sft_blend((config.Data(source=a), config.Data(source=b, repeat=3)), tok,
                           "no_think", 64)
    assert len(blend) == 3 + 3 * 2
    prompts = [tuple(p) for p, _ in blend]
    assert all(prompts.count(p) == (3 if tok.decode(list(p)).count("b") else 1) for p in prompts)
    epoch = next(sft_batches(blend, len(blend), seed=0))  # one epoch: every b row three times
    assert sorted(map(tuple, (p for p, _ in epoch))) == sorted(prompts)


# ---------------------------------------------------------------------------------------- GRPO loop

class _Engine:
    def __init__(self, calls=None):
        self.rollouts, self.calls = [], calls if calls is not None else []

    def generate(self, prompts, n, rollout, step, positions=None, on_group=None, should_stop=None):
        from nemo_cascade.types import PromptGroup

        self.rollouts.append(rollout)
        groups = [PromptGroup(p, [[5, 6]] * n, [[-0.5, -0.5]] * n, ["stop"] * n, ["ok"] * n)
                  for p in prompts]
        for i, group in enumerate(groups):
            if on_group:
                on_group(i, group)
        return groups

    def sleep(self):
        self.calls.append("engine.sleep")


class _Actor:
    te = False  # the local attention spec (GRPO.share_prompts applies)

    def __init__(self, calls=None):
        self.train_temperatures, self.ref_temperatures, self.trained = [], [], []
        self.calls = calls if calls is not None else []

    def snapshot_reference(self):
        pass

    @contextmanager
    def reference_weights(self):
        yield

    def logprobs(self, tokens, temperature, layout=None):
        self.calls.append("reference forward")
        self.ref_temperatures.append(temperature)
        import torch

        return torch.zeros(tokens.shape, dtype=torch.float32)

    def train_step(self, tensors, loss_fn, temperature):
        from types import SimpleNamespace

        self.calls.append("train")
        self.train_temperatures.append(temperature)
        self.trained.append(tensors)
        return SimpleNamespace(loss=0.0, grad_norm=0.0, lr=1e-6, tokens=1, metrics={})


class _Scorer:
    def __init__(self, domains, settings):
        self.settings = settings

    def score(self, groups):
        for g in groups:  # half right: every group informative
            g.rewards_G = [float(i % 2) for i in range(g.group_size)]
            g.reward_details_G = [{} for _ in range(g.group_size)]
        return groups

    def penalize_code_switching(self, groups):
        return 0


class _Log:
    def __init__(self):
        self.rows = []

    def log(self, step, metrics, progress=None):
        self.rows.append(metrics)

    def close(self):
        pass


def test_each_length_phase_samples_and_trains_at_its_temperature(monkeypatch, tmp_path):
    """T17: the 40K phase samples at 0.8; the actor's log-probs (the loss and the KL reference) must
    be taken at the temperature the engine sampled with, else the importance ratio compares two
    different policies."""
    from nemo_cascade import weight_sync
    from nemo_cascade.cascade.stage import StageContext, run_grpo
    from nemo_cascade.data.loader import PromptList
    from nemo_cascade.types import Prompt
    from nemo_cascade.weight_sync import SyncStats

    monkeypatch.setattr("nemo_cascade.cascade.stage.stage_scorer", _Scorer)
    monkeypatch.setattr(weight_sync, "push", lambda actor, engine: SyncStats(1, 1, 1.0))
    stage = config.Stage(name="math", steps=3,
                         rollout=config.Rollout(temperature=1.0, max_response_tokens=8),
                         grpo=config.GRPO(group_size=2, prompts_per_step=2, kl_coef=1e-3),
                         length_curriculum=(config.LengthPhase(2, 8, "filter"),
                                            config.LengthPhase(1, 16, "zero", 0.8)))
    prompts = PromptList(Prompt([1, 2, 3], "math", "1", uid=str(i)) for i in range(4))
    engine, actor, log = _Engine(), _Actor(), _Log()
    run_grpo(StageContext(actor, engine, 0, tmp_path, log), stage, prompts)
    assert [(r.temperature, r.max_response_tokens) for r in engine.rollouts] == [
        (1.0, 8), (1.0, 8), (0.8, 16)]
    assert actor.train_temperatures == actor.ref_temperatures == [1.0, 1.0, 0.8]
    assert [(m["phase"], m["temperature"], m["max_response_tokens"]) for m in log.rows] == [
        (0, 1.0, 8), (0, 1.0, 8), (1, 0.8, 16)]
    # a group's samples share their prompt (local spec)
    assert all("prefix_ids" in t for t in actor.trained)


def test_the_engine_gives_its_memory_back_before_the_kl_reference_forward(monkeypatch, tmp_path):
    """With kl_coef > 0 the reference log-probs are a full forward of the actor: on a GPU it must
    not run beside the engine's weights and KV cache."""
    from nemo_cascade import weight_sync
    from nemo_cascade.data.loader import PromptList
    from nemo_cascade.cascade.stage import StageContext, run_grpo
    from nemo_cascade.types import Prompt
    from nemo_cascade.weight_sync import SyncStats

    monkeypatch.setattr("nemo_cascade.cascade.stage.stage_scorer", _Scorer)
    monkeypatch.setattr(weight_sync, "push", lambda actor, engine: SyncStats(1, 1, 1.0))
    stage = config.Stage(name="math", steps=1, rollout=config.Rollout(max_response_tokens=8),
                         grpo=config.GRPO(group_size=2, prompts_per_step=2, kl_coef=1e-3))
    calls = []
    run_grpo(StageContext(_Actor(calls), _Engine(calls), 0, tmp_path, _Log()), stage,
             PromptList(Prompt([1, 2, 3], "math", "1", uid=str(i)) for i in range(2)))
    assert calls == ["engine.sleep", "reference forward", "train"]


def test_samples_keep_their_own_prompt_on_transformer_engine(monkeypatch, tmp_path):
    """GRPO.share_prompts needs the local spec's per-sample mask: on TE (whose packed attention sees
    whole sequences) the stage lays each sample out with its own prompt."""
    from nemo_cascade import weight_sync
    from nemo_cascade.data.loader import PromptList
    from nemo_cascade.cascade.stage import StageContext, run_grpo
    from nemo_cascade.types import Prompt
    from nemo_cascade.weight_sync import SyncStats

    monkeypatch.setattr("nemo_cascade.cascade.stage.stage_scorer", _Scorer)
    monkeypatch.setattr(weight_sync, "push", lambda actor, engine: SyncStats(1, 1, 1.0))
    stage = config.Stage(name="math", steps=1, rollout=config.Rollout(max_response_tokens=8),
                         grpo=config.GRPO(group_size=2, prompts_per_step=2))
    actor = _Actor()
    actor.te = True
    run_grpo(StageContext(actor, _Engine(), 0, tmp_path, _Log()), stage,
             PromptList(Prompt([1, 2, 3], "math", "1", uid=str(i)) for i in range(2)))
    assert (len(actor.trained) == 1 and "segment_ids" in actor.trained[0]
            and "prefix_ids" not in actor.trained[0])


# ----------------------------------------------------------------------------------------- the gate

class _Gate:
    enabled = True

    def __init__(self):
        self.evaluated, self.checked, self.rm_urls = [], [], []

    def evaluate(self, engine, out_dir, checkpoint, rm_url="", only_pairwise=False):
        self.evaluated.append((Path(out_dir).name, only_pairwise))
        self.rm_urls.append(rm_url)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "eval.json").write_text("{}")

    def evaluate_row(self, engine, row, weights, rm_url, only_pairwise, run_dir, deadline):
        self.evaluate(engine, row, weights, rm_url, only_pairwise)

    def check(self, rows, current):
        self.checked.append(([Path(r).name for r in rows], Path(current).name))
        return []


class _Manifest:
    def __init__(self, done=()):
        self.done_stages, self.updates = set(done), []
        self.data = {"stages": {}}  # no verdict records a repair stage

    def done(self, name):
        return name in self.done_stages

    def gated(self, name):
        return True

    def update(self, name, **fields):
        self.updates.append((name, fields))


class _Sleeper:
    def __init__(self):
        self.sleeps = 0

    def sleep(self):
        self.sleeps += 1


def _run(monkeypatch, tmp_path, stages, done=(), gate=config.Gate()):
    from nemo_cascade.cascade import driver
    from nemo_cascade import weight_sync

    cfg = config.Cascade(name="split", run_root=str(tmp_path), stages=stages, gate=gate)
    # the gate's bookkeeping, without building an actor or an engine
    run = object.__new__(driver.CascadeRun)
    run.cfg, run.base, run.out = cfg, "base-model", driver.run_dir(cfg)
    run.gate, run.manifest, run.engine = _Gate(), _Manifest(done), _Sleeper()
    run.actor = type("A", (), {"hf_path": "base-model"})()
    run.weights_from, run.rows = "base-model", [run.out / "base"]
    run.deadline = None  # the fake gate stops for nothing
    run.reward_models = driver.OwnRewardModels(cfg, run.out)
    run.reports = []
    run._report = lambda: run.reports.append(len(run.rows))
    run.gate.evaluate(None, run.out / "base", "base-model")
    monkeypatch.setattr(weight_sync, "push", lambda actor, engine: None)
    return run


def test_no_gate_after_a_first_part_and_the_next_part_is_checked_against_the_rows_before(
        monkeypatch, tmp_path):
    stages = (config.Stage(name="sft", kind="sft"), config.Stage(name="math", evaluate=False),
              config.Stage(name="math_40k"))
    run = _run(monkeypatch, tmp_path, stages)
    run.gate_after(0, stages[0])
    # math: no evaluation, the engine given back, the report
    run.gate_after(1, stages[1])
    assert run.gate.evaluated == [("base", False), ("0-sft", False)]
    assert (run.engine.sleeps == 2 and [r.name for r in run.rows] == ["base", "0-sft"]
            and run.reports == [2, 2])
    # no verdict
    assert [u for u in run.manifest.updates if u[0] == "math"] == [("math", {"gated": True})]
    run.gate_after(2, stages[2])
    assert run.gate.evaluated[-1] == ("2-math_40k", False)
    assert run.gate.checked == [(["base"], "0-sft"), (["base", "0-sft"], "2-math_40k")]
    assert [r.name for r in run.rows] == ["base", "0-sft", "2-math_40k"]


def test_a_finished_unevaluated_stage_adds_no_row_on_resume(monkeypatch, tmp_path):
    stages = (config.Stage(name="sft", kind="sft"), config.Stage(name="math", evaluate=False),
              config.Stage(name="math_40k"))
    run = _run(monkeypatch, tmp_path, stages, done=("sft", "math"))
    assert (not run.runs_now(stages[0], None) and not run.runs_now(stages[1], None)
            and run.runs_now(stages[2], None))
    # asking acts on nothing
    assert [r.name for r in run.rows] == ["base"] and not run.weights_from.endswith("hf")
    run.skip(0, stages[0])
    run.skip(1, stages[1])
    assert ([r.name for r in run.rows] == ["base", "0-sft"]
            and run.weights_from.endswith("1-math/hf"))


@pytest.mark.parametrize("evaluated", [True, False])
def test_a_reward_model_fills_the_rm_column_only_of_the_policy_it_follows(
        monkeypatch, tmp_path, evaluated):
    """The RM stage scores the current policy's pairwise suites into that policy's row; when the
    policy stage before it had no gate, there is no such row — and the row before it holds other
    weights."""
    stages = (config.Stage(name="sft", kind="sft"), config.Stage(name="ifrl", evaluate=evaluated),
              config.Stage(name="rm", kind="reward_model"))
    run = _run(monkeypatch, tmp_path, stages)
    run.gate_after(0, stages[0])
    run.gate_after(1, stages[1])
    run.reward_models.add("rm", tmp_path / "rm")
    run.reward_models.urls["rm"] = "http://rm"  # served already
    run.gate_after(2, stages[2])
    pairwise = [name for name, only_pairwise in run.gate.evaluated if only_pairwise]
    assert pairwise == (["1-ifrl"] if evaluated else [])


def test_a_served_gate_rm_scores_every_row_of_a_cascade_without_an_rm_stage(monkeypatch, tmp_path):
    """``gate.reward_model_url``: the base row and each stage's row get the pairwise suites."""
    stages = (config.Stage(name="sft", kind="sft"), config.Stage(name="rlhf"))
    run = _run(monkeypatch, tmp_path, stages, gate=config.Gate(reward_model_url="file:/rm.url"))
    (run.out / "base" / "eval.json").unlink()
    run.evaluate_base()
    run.gate_after(0, stages[0])
    run.gate_after(1, stages[1])
    assert run.gate.evaluated[1:] == [("base", False), ("0-sft", False), ("1-rlhf", False)]
    assert run.gate.rm_urls[1:] == ["file:/rm.url"] * 3
    unserved = _run(monkeypatch, tmp_path / "unserved", stages)
    unserved.gate_after(0, stages[0])
    assert unserved.gate.rm_urls == ["", ""]  # the pairwise suites wait for an RM stage


# --------------------------------------------------------------------------------------- the report

def _suite(score: float) -> dict:
    return {"suite": "s", "domain": "math", "metric": "accuracy",
            "decoding": {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": 4,
                         "max_tokens": 32, "mode": "no_think", "template": "cascade1", "seed": 0,
                         "max_model_len": 128},
            "data": {"path": "x", "sha256": "0", "items": 10, "limit": 0},
            "metrics": {"avg@4": score, "stderr": 0.0, "pass@4": score, "truncated": 0.0,
                        "mean_response_tokens": 10.0, "too_long": 0},
            "records": [], "seconds": {"generate": 0.1, "score": 0.1, "total": 0.2}, "reward": {}}


def test_report_of_a_split_stage_and_a_stage_in_epochs(tmp_path):
    from nemo_cascade.tooling.report import load_run, render_markdown
    from nemo_cascade.evaluate.eval_output import write_eval

    stages = (config.Stage(name="sft", kind="sft", steps=0, epochs=1.0),
              config.Stage(name="math", evaluate=False), config.Stage(name="math_40k", steps=5),
              config.Stage(name="sft2", kind="sft", steps=0, epochs=2.0))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(config.dumps(config.Cascade(name="split", stages=stages)))
    manifest = {"sft": {"status": "done", "steps": 7}, "math": {"status": "done"},
                "math_40k": {"status": "done"}, "sft2": {"status": "pending"}}
    (run / "manifest.json").write_text(json.dumps({"name": "split", "stages": manifest}))
    for row, score in (("base", 0.1), ("stages/0-sft", 0.3), ("stages/2-math_40k", 0.6)):
        write_eval(run / row, {"gsm8k": _suite(score)}, {"checkpoint": row})
    loaded = load_run(run)
    assert [label for label, _ in loaded.history] == ["base", "sft", "math_40k"]
    assert [s.steps for s in loaded.stages] == [7, 10, 5, 0]
    md = render_markdown(loaded)
    row = next(line for line in md.splitlines() if line.startswith("| math_40k "))
    assert "60.0 (+30.0)" in row  # the change against sft, the row before the split stage
    assert "- `math` (math): no gate after it (evaluate = false): see the next row" in md
    # planned: in epochs before the start, then in steps
    assert "| 0/2 epochs " in md and "| 0/7 " in md
