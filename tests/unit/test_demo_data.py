"""The demo package's registration: every set, suite and base model under its config name, and the
rows read through the core's registry byte-identical to the generators' (the preflight data hash and
the kept runs' manifests hash these rows: a pinned hash below changing means every such run's data
changed)."""
import hashlib
import json
from pathlib import Path

import pytest

from nemo_cascade.cascade.base_model import BUILDERS
from nemo_cascade.config import Data
from nemo_cascade.data import generated
from nemo_cascade.data.preference import preference_rows
from nemo_cascade.evaluate.suites import REGISTERED_SUITES
from nemo_cascade.tooling import demo_data
from nemo_cascade.tooling.demo_data import (arithmetic, benchmark_sets, chat_arithmetic,
                                            reasoning_gym, synthetic_domains, tiny_models,
                                            tiny_suites)

# (source, split, size, seed) → sha256[:16] of the rows as the preflight hashes them, computed
# before the sets moved out of the core.
PINNED = {
    ("synthetic:arithmetic", "train", 0, 0): "bb5786df558493b6",
    ("synthetic:arithmetic", "test", 50, 3): "0a82fc6dbac872e7",
    ("synthetic:if_arithmetic", "train", 40, 1): "753c3fd00c791aa0",
    ("synthetic:code_arithmetic", "test", 0, 0): "ce048c08d589604b",
    ("synthetic:bugfix_arithmetic", "train", 30, 2): "cb3269dccedc153f",
    ("synthetic:chat_arithmetic", "train", 40, 4): "29a14790e6c1cc7b",
    ("synthetic:if_requests", "train", 60, 0): "ffb3e2140496a12d",
    ("synthetic:mbpp_code", "train", 25, 0): "944840bbae8a5ba0",
    ("synthetic:mbpp_bugfix", "test", 0, 0): "93d46e8e38d64a1e",
    ("benchmark:gsm8k", "train", 40, 0): "429763c815cdbbcf",
    ("benchmark:mbpp", "test", 30, 1): "dd9793f351b517ab",
}
DIRECT = {"synthetic:arithmetic": arithmetic.arithmetic, **{f"synthetic:{k}": v for k, v in
          synthetic_domains.DOMAIN_TASKS.items()}, "benchmark:gsm8k": benchmark_sets.gsm8k,
          "benchmark:mbpp": benchmark_sets.mbpp}


def _hash(rows) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.mark.parametrize("key", sorted(PINNED), ids=lambda k: f"{k[0]}-{k[1]}-{k[2]}-{k[3]}")
def test_registered_rows_are_the_generators_and_unchanged(key):
    source, split, size, seed = key
    rows = generated.rows(Data(source=source, split=split, size=size, seed=seed))
    assert rows == DIRECT[source](split, size, seed)
    assert _hash(rows) == PINNED[key]


def test_reasoning_gym_family():
    pytest.importorskip("reasoning_gym")
    spec = "chain_sum?max_digits=2&max_terms=3"
    rows = generated.rows(Data(source=f"synthetic:rg/{spec}", split="train", size=20, seed=0))
    assert rows == reasoning_gym.rows(spec, "train", 20, 0) and _hash(rows) == "02048140ddce5470"


PAIRS = {"arithmetic": (arithmetic.arithmetic, arithmetic.arithmetic_pairs,
                        arithmetic.REJECT_KINDS),
         "chat_arithmetic": (chat_arithmetic.chat_arithmetic, chat_arithmetic.chat_pairs,
                             chat_arithmetic.REJECT_KINDS)}


@pytest.mark.parametrize("name,mode,pinned", [
    ("arithmetic", "no_think", "638ee1439c776ba0"), ("arithmetic", "think", "7b7e65d34dd50f93"),
    ("chat_arithmetic", "no_think", "2719ea0f965f7a6e"),
    ("chat_arithmetic", "think", "4e72e05c65532dc6")])
def test_preference_pairs(name, mode, pinned):
    """The registered preference form of a synthetic set is its generator's, pinned, and draws
    every kind of rejected answer."""
    make_rows, make_pairs, kinds = PAIRS[name]
    rows = preference_rows(Data(source=f"synthetic:{name}", split="train", size=64, seed=5), mode)
    direct = make_pairs(make_rows("train", 64, 5), mode, 5)
    assert rows == [(r["uid"], r["prompt"], r["chosen"], r["rejected"]) for r in direct]
    assert _hash(rows) == pinned
    assert {r["kind"] for r in direct} == set(kinds)
    assert all(r["chosen"] != r["rejected"] for r in direct)


def test_chat_rows_ask_the_math_sets_problems_in_the_same_split():
    """A chat row is the arithmetic problem the math set draws with the same arguments, so chat SFT
    never shows a held-out math problem. Its SFT reply greets the user by name, or for about half
    of the problems answers curtly (what RLHF has to win); never in the math set's format."""
    for split in ("train", "test"):
        chat = chat_arithmetic.chat_arithmetic(split, 0, 3)
        math = arithmetic.arithmetic(split, 0, 3)
        assert [r["uid"] for r in chat] == [f"chat_{r['uid']}" for r in math]
        for c, m in zip(chat, math):
            lhs = m["solution"].split(" = ")[0]
            assert lhs in c["prompt"] and c["name"] in c["prompt"] and "boxed" not in c["response"]
            replies = (f"Hi {c['name']}! {lhs} is {m['answer']}.", f"{lhs} is {m['answer']}.")
            assert c["response"] in replies
        curt = sum(not r["response"].startswith("Hi ") for r in chat) / len(chat)
        assert abs(curt - chat_arithmetic.CURT_PERCENT / 100) < 0.1, curt


def test_suites_and_builders_registered_and_register_is_idempotent():
    demo_data.register()  # the session has registered already: a second call changes nothing
    assert list(REGISTERED_SUITES) == [
        "tiny-math", "tiny-ifeval", "tiny-code", "tiny-swe", "tiny-rlhf", "leg-counting"]
    assert tuple(REGISTERED_SUITES.values()) == \
        tiny_suites.TINY_SUITES + tiny_suites.WORD_MATH_SUITES
    assert BUILDERS == tiny_models.BUILDERS
    assert sorted(BUILDERS) == ["smollm2-135m-instruct", "tiny-qwen3", "tiny-qwen3-cascade"]


def test_another_function_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        generated.register("synthetic:arithmetic", lambda split, size, seed: [])


@pytest.mark.parametrize("build", sorted(tiny_models.BUILDERS))
def test_every_builder_fills_the_folder_a_fresh_run_hands_it(tmp_path, build):
    """A fresh run builds its base model into an empty temporary folder
    (base_model.prepare_base_model publishes it whole as <run>/base_model): every registered builder
    must write into that folder, not refuse it."""
    from nemo_cascade.cascade.base_model import prepare_base_model
    from nemo_cascade.config import Cascade, Model

    out = Path(prepare_base_model(Cascade(model=Model(build=build)), tmp_path))
    assert out == tmp_path / "base_model" and (out / "config.json").is_file()
    assert (list(out.glob("*.safetensors"))
            and [p.name for p in tmp_path.iterdir()] == ["base_model"])
