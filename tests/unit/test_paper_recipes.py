"""The paper's recipes (recipes/nemotron_cascade_*.py, recipes/reward_model_72b.py): they build and validate
without model files, GPUs or network, round-trip through config.json's form, run their stages in the paper's
order, carry the paper's numbers (PAPER.md: T14–T20, §4.2–4.7; the expected values below are copied from there,
not from the recipes), and docs/recipes.md shows exactly what they set."""
import json
import re
from dataclasses import replace
from functools import reduce
from pathlib import Path

import pytest

from nemo_cascade import config as C
from nemo_cascade.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "recipes.md"
K = 1024
ENV = ("NEMO_CASCADE_MODELS", "NEMO_CASCADE_DATA", "NEMO_CASCADE_RM_URL", "NEMO_CASCADE_JUDGE_URL")

POLICY = {
    "8b": "recipes/nemotron_cascade_8b.py",
    "8b_thinking": "recipes/nemotron_cascade_8b_thinking.py",
    "14b_thinking": "recipes/nemotron_cascade_14b_thinking.py",
}
RM = "recipes/reward_model_72b.py"
FUNCTIONS = {"8b": ("recipe", "with_sft"), "8b_thinking": ("recipe", "with_sft"),
             "14b_thinking": ("recipe", "with_sft", "single_node")}
ALL = [(POLICY[m], fn) for m in POLICY for fn in FUNCTIONS[m]] + [(RM, "recipe")]

SHAPES = {  # (query heads, KV heads, layers) of the HF configs; no model files are read here
    "Qwen3-8B": (32, 8, 36), "Qwen3-14B": (40, 8, 40), "Qwen2.5-72B": (64, 8, 80)}
GPUS_PER_NODE = 8

# ---- the paper's numbers, per model (PAPER.md §2 "Hyperparameters", T14–T20) ------------------------------------
# math / code / SWE phases in order: (steps, max response, overlong, temperature[, max prompt])
PAPER = {
    "8b": dict(
        sft_steps=(20_000, 32_000), sft_lrs=(5e-5, 2e-5),                                    # T14
        rlhf_steps=800, rlhf_mode="half",                                                  # T15, §4.3.2
        if_steps=(2300, 800), if_mode="no_think", if_response=(8 * K, 8 * K),               # T16 unified, §4.4.2
        if_overlong=("none", "none"), if_rm_bonus=False,
        math_lr=2e-6, math=[(190, 24 * K, "filter", 1.0), (240, 32 * K, "zero", 1.0),      # T17
                            (70, 40 * K, "zero", 0.8)],
        code_steps=90, code=[(44 * K, 1.0), (48 * K, 0.8)],                                # T19 unified
        swe=[(30, 16 * K, "filter"), (30, 24 * K, "none")],                                # T20, T13 (8B: 24K)
    ),
    "8b_thinking": dict(
        sft_steps=(20_000, 32_000), sft_lrs=(5e-5, 2e-5),
        rlhf_steps=800, rlhf_mode="think",
        if_steps=(550, 300), if_mode="think", if_response=(8 * K, 16 * K), if_overlong=("none", "filter"),
        if_rm_bonus=True,
        math_lr=2e-6, math=[(190, 24 * K, "filter", 1.0), (240, 32 * K, "zero", 1.0), (70, 40 * K, "zero", 0.8)],
        code_steps=64, code=[(44 * K, 1.2)],
        swe=[(30, 16 * K, "filter"), (30, 24 * K, "none")],
    ),
    "14b_thinking": dict(
        sft_steps=(22_000, 41_000), sft_lrs=(5e-5, 5e-5),  # T14: the 14B column lists only 5e-5
        rlhf_steps=900, rlhf_mode="think",
        if_steps=(800, 120), if_mode="think", if_response=(8 * K, 16 * K), if_overlong=("none", "filter"),
        if_rm_bonus=True,
        math_lr=2.5e-6, math=[(120, 28 * K, "filter", 1.2), (100, 40 * K, "zero", 1.1)],  # T18
        code_steps=64, code=[(56 * K, 1.0)],
        swe=[(120, 32 * K, "filter")],  # T20: 0–120; T13: 32K for the 14B
    ),
}


@pytest.fixture(autouse=True)
def _default_environment(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def load(path: str, fn: str = "recipe") -> C.Cascade:
    return load_recipe(f"{ROOT / path}:{fn}")


def world(cfg: C.Cascade) -> int:
    p = cfg.parallel
    return p.tp * p.pp * p.cp * p.dp


def domain_stages(cfg: C.Cascade, domain: str) -> list[C.Stage]:
    return [s for s in cfg.stages if s.kind == "grpo" and s.domain == domain]


def phases(cfg: C.Cascade, domain: str) -> list[tuple]:
    """(steps, max response, overlong, temperature, max prompt) of every length phase of the domain's stages."""
    return [(p.steps, p.max_response_tokens, p.overlong, s.rollout.temperature, s.rollout.max_prompt_tokens)
            for s in domain_stages(cfg, domain) for p in C.length_phases(s)]


# ---- build, validate, serialise ------------------------------------------------------------------------------

@pytest.mark.parametrize("path,fn", ALL)
def test_recipe_builds_validates_and_round_trips(path, fn):
    cfg = load(path, fn)
    assert C.validate(cfg, world_size=world(cfg)) is cfg
    with pytest.raises(C.ConfigError, match="world size"):
        C.validate(cfg, world_size=world(cfg) + 1)
    assert C.from_dict(C.Cascade, json.loads(C.dumps(cfg))) == cfg
    assert cfg.model.hf_path and not cfg.model.build
    assert (cfg.model.dtype, cfg.model.transformer_impl) == ("bfloat16", "auto")
    assert cfg.chat_style == "cascade1"  # §3.1.2


@pytest.mark.parametrize("model", POLICY)
@pytest.mark.parametrize("fn", ["recipe", "with_sft"])
def test_stage_order_is_the_papers(model, fn):
    """[SFT 16K → SFT 32K] → RLHF → IF-RL → math → code → SWE (§4.1); a paper stage may be split in parts."""
    stages = load(POLICY[model], fn).stages
    sft = [s.name for s in stages if s.kind == "sft"]
    assert sft == (["sft_16k", "sft_32k"] if fn == "with_sft" else [])
    assert [s.name for s in stages[:len(sft)]] == sft, "SFT stages lead"
    rl = stages[len(sft):]
    assert all(s.kind == "grpo" for s in rl)
    domains = [s.domain for s in rl]
    collapsed = [d for i, d in enumerate(domains) if i == 0 or d != domains[i - 1]]
    assert collapsed == ["rlhf", "ifeval", "math", "code", "swe"]
    for before, s in zip(rl, rl[1:]):
        if s.boundary.optimizer == "carry":
            assert s.domain == before.domain, "only the parts of one paper stage carry the optimizer over"


@pytest.mark.parametrize("model", POLICY)
def test_rl_only_recipe_is_with_sft_without_sft(model):
    base, full = load(POLICY[model]), load(POLICY[model], "with_sft")
    assert base.stages == full.stages[2:]
    size = "14B" if model.startswith("14b") else "8B"
    assert full.model.hf_path == f"models/Qwen3-{size}-Base"  # §1
    assert base.model.hf_path.startswith("models/Nemotron-Cascade-") and base.model.hf_path.endswith("-SFT")
    assert not full.gate.evaluate_base and base.gate.evaluate_base
    if model == "14b_thinking":
        one = load(POLICY[model], "single_node")
        assert world(one) == GPUS_PER_NODE
        assert {s.rollout.gpu_memory_utilization for s in one.stages} == {0.5}
        same_engine = [replace(s, rollout=replace(s.rollout, gpu_memory_utilization=0.6)) for s in one.stages]
        assert same_engine == list(base.stages)


def test_paths_and_servers_come_from_the_environment(monkeypatch):
    """Nothing is read at build time: model, data and server locations are strings from the environment."""
    monkeypatch.setenv("NEMO_CASCADE_MODELS", "/nonexistent/models")
    monkeypatch.setenv("NEMO_CASCADE_DATA", "/nonexistent/data")
    monkeypatch.setenv("NEMO_CASCADE_RM_URL", "http://rm-node:8000")
    monkeypatch.setenv("NEMO_CASCADE_JUDGE_URL", "http://judge-node:8001")
    cfg = load(POLICY["8b_thinking"], "with_sft")
    C.validate(cfg, world_size=world(cfg))
    assert cfg.model.hf_path == "/nonexistent/models/Qwen3-8B-Base"
    for s in cfg.stages:
        assert all(d.source.startswith("/nonexistent/data/") for d in (s.data, *s.extra_data))
    assert C.stage_by_name(cfg, "rlhf").reward.reward_model_url == "http://rm-node:8000"
    assert {s.reward.reward_model_url for s in domain_stages(cfg, "ifeval")} == {"http://rm-node:8000"}
    assert {s.reward.judge_url for s in domain_stages(cfg, "swe")} == {"http://judge-node:8001"}
    rm = load(RM)
    assert rm.model.hf_path == "/nonexistent/models/Qwen2.5-72B-Instruct"
    assert rm.stages[0].data.source == "/nonexistent/data/rm/preference_pairs.jsonl"


# ---- the paper's numbers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", POLICY)
def test_sft_stages_follow_table_14(model):
    want = PAPER[model]
    sft1, sft2 = load(POLICY[model], "with_sft").stages[:2]
    assert (sft1.steps, sft2.steps) == want["sft_steps"]
    assert (sft1.actor.lr, sft2.actor.lr) == want["sft_lrs"]
    for s in (sft1, sft2):
        assert s.sft_batch_size == 256
        assert (s.actor.lr_schedule, s.actor.min_lr, s.actor.weight_decay) == ("cosine", 0.0, 1e-4)
        assert (s.actor.adam_beta1, s.actor.adam_beta2) == (0.9, 0.95)
    assert (sft1.sft_max_tokens, sft2.sft_max_tokens) == (16 * K, 32 * K)
    assert sft2.data == sft1.data, "stage 2 re-uses the general data (§3.1.1)"
    sources = [d.source for d in sft2.extra_data]
    science = [x for x in sources if x.endswith("science.jsonl")]
    swe = [x for x in sources if "swe" in x]
    assert len(science) == 2 and len(set(science)) == 1, "stage-2 science is upsampled 2× (§3.3)"
    assert len(swe) == 3 and len(set(swe)) == 1, "SWE is upsampled 3× in stage 2 (§3.3)"
    assert any("tool_calling" in x for x in sources) and not any("tool_calling" in d.source for d in sft1.extra_data)


@pytest.mark.parametrize("model", POLICY)
def test_every_rl_stage_is_strict_on_policy_grpo(model):
    for s in load(POLICY[model]).stages:
        g = s.grpo
        assert (g.kl_coef, g.loss_aggregation, g.reward_shaping) == (0.0, "token", "none"), s.name  # §4.1.2
        assert (s.actor.adam_beta1, s.actor.adam_beta2) == (0.9, 0.95)
        assert s.rollout.top_p == 0.95, s.name  # T15–T20
        assert g.group_size == (16 if s.domain == "swe" else 8), s.name


@pytest.mark.parametrize("model", POLICY)
def test_rlhf_follows_table_15(model):
    want = PAPER[model]
    (rlhf,) = domain_stages(load(POLICY[model]), "rlhf")
    assert (rlhf.steps, rlhf.mode) == (want["rlhf_steps"], want["rlhf_mode"])
    assert (rlhf.grpo.prompts_per_step, rlhf.grpo.group_size) == (256, 8)
    assert (rlhf.actor.lr, rlhf.rollout.temperature) == (2e-6, 0.6)
    assert (rlhf.rollout.max_response_tokens, rlhf.grpo.overlong) == (12 * K, "none")
    assert rlhf.reward.code_switch_penalty == "batch_min_minus_10"  # §4.3.2
    assert rlhf.reward.reward_model_url  # the served 72B RM (§4.2)


def test_only_the_unified_model_trains_half_half():
    modes = {m: C.stage_by_name(load(POLICY[m]), "rlhf").mode for m in POLICY}
    assert modes == {"8b": "half", "8b_thinking": "think", "14b_thinking": "think"}
    unified = load(POLICY["8b"])
    assert {s.mode for s in domain_stages(unified, "ifeval")} == {"no_think"}  # §4.4.2
    for m in ("8b_thinking", "14b_thinking"):
        assert {s.mode for s in load(POLICY[m]).stages} == {"think"}


@pytest.mark.parametrize("model", POLICY)
def test_if_rl_follows_table_16(model):
    want = PAPER[model]
    stages = domain_stages(load(POLICY[model]), "ifeval")
    assert tuple(s.steps for s in stages) == want["if_steps"]
    assert tuple(s.rollout.max_response_tokens for s in stages) == want["if_response"]
    assert tuple(s.grpo.overlong for s in stages) == want["if_overlong"]
    assert stages[0].data != stages[1].data, "IFEval taxonomy first, then IFBench taxonomy (§4.4)"
    for s in stages:
        assert s.mode == want["if_mode"]
        assert (s.grpo.prompts_per_step, s.grpo.group_size, s.actor.lr) == (256, 8, 2e-6)
        assert (s.rollout.temperature, s.rollout.top_k) == (0.6, 20)
        assert s.grpo.drop_zero_variance_groups and s.grpo.refill_max_rounds > 0  # dynamic filtering, §4.4.2
        assert s.reward.if_rm_bonus is want["if_rm_bonus"]
        assert bool(s.reward.reward_model_url) is want["if_rm_bonus"]


@pytest.mark.parametrize("model", POLICY)
def test_math_rl_length_curriculum(model):
    """8B: 24K filter → 32K zero → 40K zero at T 1.0, 1.0, 0.8 (T17); 14B: 28K filter → 40K zero at 1.2, 1.1."""
    want = PAPER[model]
    cfg = load(POLICY[model])
    assert [p[:4] for p in phases(cfg, "math")] == want["math"]
    for s in domain_stages(cfg, "math"):
        assert (s.actor.lr, s.grpo.prompts_per_step, s.grpo.group_size) == (want["math_lr"], 128, 8)
        assert s.grpo.epoch_filter and (s.grpo.readmit_unsolved, s.grpo.readmit_solved) == (0.10, 0.01)  # §4.5.2
        assert s.reward.code_switch_penalty == "-1"  # §4.5
        assert s.data.source.endswith("rl-math/train.jsonl")
    later = domain_stages(cfg, "math")[1:]
    assert all(s.boundary == C.Boundary(optimizer="carry", data="continue") for s in later)


@pytest.mark.parametrize("model", POLICY)
def test_code_rl_follows_table_19(model):
    want = PAPER[model]
    cfg = load(POLICY[model])
    stages = domain_stages(cfg, "code")
    assert sum(s.steps for s in stages) == want["code_steps"]
    assert [(p[1], p[3]) for p in phases(cfg, "code")] == want["code"]
    for s in stages:
        assert (s.actor.lr, s.grpo.prompts_per_step, s.grpo.overlong) == (4e-6, 128, "none")
        assert s.reward.code_switch_penalty == "0"  # §4.6: −1 hurt


@pytest.mark.parametrize("model", POLICY)
def test_swe_rl_follows_table_20(model):
    want = PAPER[model]
    cfg = load(POLICY[model])
    stages = domain_stages(cfg, "swe")
    assert [(p[0], p[4], p[2]) for p in phases(cfg, "swe")] == want["swe"]
    for s in stages:
        assert (s.grpo.group_size, s.grpo.prompts_per_step) == (16, 128)
        assert (s.actor.lr, s.rollout.temperature, s.rollout.max_response_tokens) == (2.5e-6, 1.0, 16 * K)
        assert s.reward.judge_url  # Eq. 2's judge (T12: semantic reward)
    assert all(s.boundary.optimizer == "carry" for s in stages[1:])


def test_14b_rl_steps_add_up_to_figure_1():
    total = sum(s.steps for s in load(POLICY["14b_thinking"]).stages)
    assert total == 900 + 920 + 220 + 64 + 120 == 2224
    assert abs(total - 2232) <= 8  # Fig. 1 counts 2232


def test_reward_model_follows_section_4_2():
    cfg = load(RM)
    (rm,) = cfg.stages
    assert rm.kind == "reward_model"
    assert (rm.rm_batch_size, rm.actor.lr) == (256, 2e-6)
    assert rm.steps == 82_000 // 256  # one epoch of 82K pairs
    assert cfg.model.hf_path.endswith("/Qwen2.5-72B-Instruct")
    assert world(cfg) > GPUS_PER_NODE, "a 72B RM trains on several nodes"


# ---- parallel plans ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,fn", ALL)
def test_parallel_plan_fits_the_model_and_whole_nodes(path, fn):
    """What preflight.check_model checks against config.json, here against the known shapes."""
    cfg = load(path, fn)
    heads, kv_heads, layers = SHAPES["Qwen2.5-72B" if path == RM else "Qwen3-14B" if "14b" in path else "Qwen3-8B"]
    p = cfg.parallel
    assert heads % p.tp == 0 and kv_heads % p.tp == 0 and layers % p.pp == 0
    assert world(cfg) % GPUS_PER_NODE == 0
    assert p.micro_batch_size >= 1
    fractions = {s.rollout.gpu_memory_utilization for s in cfg.stages if s.kind == "grpo"}
    assert len(fractions) <= 1, "one colocated engine serves every stage: one memory fraction"


# ---- docs/recipes.md ----------------------------------------------------------------------------------------

MARK = re.compile(r"<!-- (stages|cascade): (\S+) -->")
REQUIRED_STAGE_ROWS = {"steps", "mode", "actor.lr", "grpo.prompts_per_step", "grpo.group_size", "rollout.temperature",
                       "rollout.top_p", "rollout.top_k", "rollout.max_prompt_tokens", "rollout.max_response_tokens",
                       "grpo.overlong", "grpo.kl_coef", "reward.code_switch_penalty", "sft_batch_size",
                       "sft_max_tokens"}
REQUIRED_CASCADE_ROWS = {"model.hf_path", "model.dtype", "parallel.tp", "parallel.pp", "parallel.cp", "parallel.dp"}


def _tables(text: str) -> list[tuple[str, str, list[list[str]]]]:
    """``(kind, spec, rows)`` of every table right after a ``<!-- stages|cascade: … -->`` marker."""
    lines, out = text.splitlines(), []
    for i, line in enumerate(lines):
        m = MARK.fullmatch(line.strip())
        if m:
            rows = []
            for row in lines[i + 1:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            out.append((m.group(1), m.group(2), [rows[0]] + rows[2:]))  # header, then the body
    return out


def _ticked(cell: str):
    m = re.match(r"`([^`]*)`", cell)
    return m.group(1) if m else None


def _same(doc: str, actual) -> bool:
    if isinstance(actual, bool):
        return doc == str(actual).lower()
    if isinstance(actual, (int, float)):
        try:
            return float(doc) == float(actual)
        except ValueError:
            return False
    if isinstance(actual, tuple):
        if actual and isinstance(actual[0], C.LengthPhase):
            return doc == ",".join(f"{p.steps}:{p.max_response_tokens}:{p.overlong}" for p in actual)
        return doc == ",".join(map(str, actual))
    return doc == str(actual)


def _field(obj, path: str):
    return reduce(getattr, path.split("."), obj)


def _required_rows(kind: str, columns: list) -> set[str]:
    if kind == "cascade":
        return REQUIRED_CASCADE_ROWS
    kinds = {s.kind for s in columns}
    rows = {"steps", "mode", "actor.lr"} | (REQUIRED_STAGE_ROWS if "grpo" in kinds else set())
    rows |= {"rm_batch_size"} if "reward_model" in kinds else set()
    return rows - ({"sft_batch_size", "sft_max_tokens"} if "sft" not in kinds else set())


def doc_problems(text: str) -> list[str]:
    """Every way docs/recipes.md disagrees with the recipes (empty when in sync)."""
    problems, covered = [], set()
    for kind, spec, rows in _tables(text):
        path, _, fn = spec.partition(":")
        header, body = rows[0], rows[1:]
        names = [_ticked(c) for c in header[1:-1]]
        if kind == "stages":
            columns = list(load(path, fn).stages)
            if names != [s.name for s in columns]:
                problems.append(f"{spec}: stage columns {names}, the recipe has {[s.name for s in columns]}")
                continue
        else:
            columns = [load(path, name.removesuffix("()")) for name in names]
        missing = _required_rows(kind, columns) - {_ticked(r[0]) for r in body}
        if missing:
            problems.append(f"{spec}: no row for {sorted(missing)}")
        covered.add((kind, path))
        for row in body:
            name = _ticked(row[0])
            for column, obj, cell in zip(names, columns, row[1:-1]):
                actual, doc = _field(obj, name), _ticked(cell)
                if doc is None and cell == "—" and kind == "stages":
                    default = _field(C.Stage(kind=obj.kind), name)
                    if actual != default:
                        problems.append(f"{spec} {column} {name}: the doc says — (default {default!r}), the recipe "
                                        f"sets {actual!r}")
                elif doc is None or not _same(doc, actual):
                    problems.append(f"{spec} {column} {name}: the doc says {cell!r}, the recipe has {actual!r}")
    for path in [*POLICY.values(), RM]:
        for kind in ("stages", "cascade"):
            if (kind, path) not in covered:
                problems.append(f"{path}: no {kind} table")
    return problems


def test_docs_match_the_recipes():
    problems = doc_problems(DOC.read_text())
    assert not problems, "docs/recipes.md is out of date:\n" + "\n".join(problems)


@pytest.mark.parametrize("old,new", [
    ("| `steps` | `20000` |", "| `steps` | `20001` |"),                            # a wrong value
    ("`190:24576:filter,240:32768:zero`", "`190:24576:filter,240:32768:none`"),     # a wrong curriculum
    ("| `grpo.refill_max_rounds` | — | — | — |", "| `grpo.refill_max_rounds` | — | — | `3` |"),  # — vs a value
    ("| `reward.code_switch_penalty` | — | — | `batch_min_minus_10` |",
     "| `reward.code_switch_penalty` | — | — | — |"),                                # a set value shown as default
    ("`math_40k` | `code` | `code_48k`", "`math_40k` | `code_48k` | `code`"),       # stage columns out of order
    ("<!-- cascade: recipes/reward_model_72b.py -->", ""),                          # a recipe without its table
])
def test_doc_check_catches_drift(old, new):
    text = DOC.read_text()
    assert old in text
    assert doc_problems(text.replace(old, new, 1))


def test_docs_name_every_data_file():
    text = DOC.read_text()
    prefix = "data/nemotron-cascade/"
    for path, fn in ALL:
        for s in load(path, fn).stages:
            for d in (s.data, *s.extra_data):
                assert d.source.startswith(prefix)
                assert f"`{d.source.removeprefix(prefix)}`" in text, f"docs/recipes.md: no row for {d.source}"
