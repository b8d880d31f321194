"""Bradley–Terry RM math against hand-computed values, pair packing, and preference-pair loading
(nemo_cascade.algorithms.reward_model, nemo_cascade.data.preference)."""
import json
import math

import pytest
import torch

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade.algorithms.reward_model import bt_loss_terms, make_pair_batch, pair_accuracy
from nemo_cascade.config import Data
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError
from nemo_cascade.data.preference import load_preference_pairs, preference_rows
from nemo_cascade.tooling.demo_data.arithmetic import REJECT_KINDS, arithmetic, arithmetic_pairs
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from tests.tolerance import Net, assert_close

T = torch.tensor


def test_bt_loss_terms_hand_computed():
    # Rows interleave (chosen, rejected); the score is read at each row's last real token.
    # Pair 0: r_c = 2.0 (t=2), r_r = 1.0 (t=1); pair 1: r_c = 0.0 (t=0), r_r = 0.5 (t=3).
    scores = T(
        [[9.0, 9.0, 2.0, 9.0], [9.0, 1.0, 9.0, 9.0], [0.0, 9.0, 9.0, 9.0], [9.0, 9.0, 9.0, 0.5]],
        requires_grad=True)
    last = T([2, 1, 0, 3])
    num, den, metrics = bt_loss_terms(scores, last, torch.ones(4))
    # −log σ(1) − log σ(−0.5) = softplus(−1) + softplus(0.5)
    assert num.item() == pytest.approx(
        math.log1p(math.exp(-1)) + math.log1p(math.exp(0.5)), abs=1e-6)
    assert num.item() == pytest.approx(1.2873386717, abs=1e-6)
    assert int(den) == 2 and den.dtype == torch.int
    assert metrics["accuracy"].tolist() == [1.0, 2.0]  # pair 0 right, pair 1 wrong
    assert metrics["margin"].tolist() == pytest.approx([0.5, 2.0])  # 1.0 + (−0.5)
    num.backward()
    # d softplus(r_r − r_c) / d r_c = −σ(r_r − r_c): −σ(−1) = −0.26894, −σ(0.5) = −0.62246; +same
    # for r_r
    g = torch.zeros(4, 4)
    g[0, 2], g[1, 1], g[2, 0], g[3, 3] = -0.2689414214, 0.2689414214, -0.6224593312, 0.6224593312
    torch.testing.assert_close(scores.grad, g)


def test_bt_loss_padded_rows_add_nothing_and_ties_are_not_wins():
    scores = T([[1.0], [1.0], [50.0], [-50.0]])
    num, den, metrics = bt_loss_terms(scores, T([0, 0, 0, 0]), T([1.0, 1.0, 0.0, 0.0]))
    # only the tied pair: −log σ(0)
    assert num.item() == pytest.approx(math.log(2.0)) and int(den) == 1
    assert metrics["accuracy"].tolist() == [0.0, 1.0] and metrics["margin"].tolist() == [0.0, 1.0]
    # A large negative margin stays finite (softplus, not log(sigmoid)).
    big, _, _ = bt_loss_terms(T([[-100.0], [100.0]]), T([0, 0]), torch.ones(2))
    assert big.item() == pytest.approx(200.0)
    with pytest.raises(ValueError, match="pairs"):
        bt_loss_terms(torch.zeros(3, 2), T([0, 0, 0]), torch.ones(3))


def test_make_pair_batch_interleaves_and_keeps_the_last_tokens():
    batch = make_pair_batch([([1, 2, 3], [4, 5]), ([6, 7, 8, 9, 10, 11], [12])],
                            max_tokens=4, pad_id=0)
    assert batch.num_pairs == 2
    assert batch.tokens_B_T.tolist() == [[1, 2, 3, 0], [4, 5, 0, 0], [8, 9, 10, 11], [12, 0, 0, 0]]
    assert batch.last_B.tolist() == [2, 1, 3, 0]
    assert batch.pair_valid_B.tolist() == [1.0] * 4 and batch.num_truncated == 1
    assert sorted(batch.tensors()) == ["last", "pair_valid", "tokens"]
    with pytest.raises(ValueError, match="empty"):
        make_pair_batch([([1], [])], 4, 0)


def test_pair_accuracy():
    assert pair_accuracy([1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 2.0, -1.0]) == 0.5
    with pytest.raises(ValueError):
        pair_accuracy([1.0], [])


# ------------------------------------------------------------------------------------------- data

@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _jsonl(tmp_path, rows):
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.mark.parametrize("mode", ["no_think", "think"])
def test_synthetic_pairs_agree_with_the_math_verifier(mode):
    """Every chosen answer earns the math reward 1 and every rejected one 0: the preference is the
    verifier's."""
    from nemo_cascade.rewards import REWARDS

    rows = arithmetic("train", 60, seed=3)
    pairs = arithmetic_pairs(rows, mode, seed=3)
    assert {p["kind"] for p in pairs} == set(REJECT_KINDS)
    for row, p in zip(rows, pairs):
        assert p["prompt"] == [{"role": "user", "content": row["question"]}]
        assert REWARDS["math"](p["chosen"], row["answer"]) == 1.0, p
        assert REWARDS["math"](p["rejected"], row["answer"]) == 0.0, p
    assert arithmetic_pairs(rows[5:6], mode, seed=3) == pairs[5:6]  # per-problem, not per-draw
    assert arithmetic_pairs(rows, mode, seed=4) != pairs


def test_pairs_are_templated_conversations(tok, tmp_path):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    path = _jsonl(tmp_path, [{"prompt": "What is 1 + 1?", "chosen": "2", "rejected": "3"}, "",
                             {"prompt": msgs, "chosen": "Hello.", "rejected": "Go away."},
                             {"prompt": "tie", "chosen": "same", "rejected": "same"}])
    pairs = load_preference_pairs(Data(source=str(path)), tok, "no_think")
    assert len(pairs) == 2 and pairs.dropped_ties == 1
    expected = render(
        [{"role": "user", "content": "What is 1 + 1?"}, {"role": "assistant", "content": "2"}],
        "no_think", add_generation_prompt=False)
    assert tok.decode(pairs[0][0]) == expected
    # ...the RM rendering (data.rm_input), which the tiny tokenizer's cascade1 template also gives
    # in no_think mode.
    conv = msgs + [{"role": "assistant", "content": "Go away."}]
    assert pairs[1][1] == tok.apply_chat_template(conv, tokenize=True, add_generation_prompt=False,
                                                  return_dict=False)
    assert ([r[0] for r in preference_rows(Data(source=str(path)), "no_think")][:2]
            == [f"{path}:1", f"{path}:3"])


@pytest.mark.parametrize("row,field", [
    ({"chosen": "a", "rejected": "b"}, "'prompt'"),
    ({"prompt": "", "chosen": "a", "rejected": "b"}, "'prompt'"),
    ({"prompt": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
      "chosen": "a", "rejected": "b"}, "'prompt'"),
    ({"prompt": [{"role": "bot", "content": "q"}], "chosen": "a", "rejected": "b"}, "'prompt[0]'"),
    ({"prompt": "q", "rejected": "b"}, "'chosen'"),
    ({"prompt": "q", "chosen": "a", "rejected": 3}, "'rejected'"),
])
def test_malformed_rows_give_one_line_naming_file_line_and_field(tok, tmp_path, row, field):
    path = _jsonl(tmp_path, [{"prompt": "ok", "chosen": "a", "rejected": "b"}, row])
    with pytest.raises(DataError) as err:
        load_preference_pairs(Data(source=str(path)), tok, "no_think")
    msg = str(err.value)
    assert msg.startswith(f"{path}:2: ") and field in msg and "\n" not in msg


def test_bad_sources(tok, tmp_path):
    with pytest.raises(DataError, match="no preference pairs; expected one of"):
        load_preference_pairs(Data(source="synthetic:nope"), tok, "no_think")
    with pytest.raises(DataError, match="not found"):
        load_preference_pairs(Data(source=str(tmp_path / "missing.jsonl")), tok, "no_think")
    path = _jsonl(tmp_path, [{"prompt": "q", "chosen": "a", "rejected": "a"}])
    with pytest.raises(DataError, match="no usable preference pairs"):
        load_preference_pairs(Data(source=str(path)), tok, "no_think")
    synthetic = load_preference_pairs(Data(source="synthetic:arithmetic", size=10, seed=1),
                                      tok, "no_think")
    assert len(synthetic) == 10 and all(c != r for c, r in synthetic)


# ------------------------------------------------------------------------------- conversion, config

def test_score_head_rules_replace_any_lm_head():
    from nemo_cascade.convert import table

    for arch, tied in (("qwen3", True), ("llama", False), ("qwen2", False)):
        rules = table.rules_for(arch, tied_embeddings=tied, head="score")
        hf_names = [h for r in rules for h in r.hf]
        assert "score.weight" in hf_names and "lm_head.weight" not in hf_names
        assert [r for r in rules if r.megatron == "output_layer.weight"] == [table.SCORE_HEAD]
        assert table.SCORE_HEAD.tp == "replicated"
    with pytest.raises(ValueError, match="head 'value'"):
        table.rules_for("qwen3", False, head="value")


def test_reward_model_config_is_a_one_label_sequence_classifier():
    from nemo_cascade.convert.hf_config import is_reward_model, reward_model_config
    from nemo_cascade.convert.shape import shape_from_dict

    raw = {"architectures": ["LlamaForCausalLM"], "vocab_size": 64, "hidden_size": 32,
           "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
           "tie_word_embeddings": True, "pad_token_id": None}
    out = reward_model_config(raw, pad_token_id=7)
    assert (out["architectures"] == ["LlamaForSequenceClassification"]
            and out["id2label"] == {"0": "LABEL_0"})
    assert out["pad_token_id"] == 7 and out["tie_word_embeddings"] is False
    assert raw["architectures"] == ["LlamaForCausalLM"]  # the base config is not modified
    shape = shape_from_dict(out)
    assert (shape.arch == "llama" and is_reward_model(shape)
            and not is_reward_model(shape_from_dict(raw)))


def test_config_reward_model_stage_validation():
    from nemo_cascade import config

    rm = config.Stage(name="rm", kind="reward_model",
                      data=config.Data(source="synthetic:arithmetic"))
    cfg = config.Cascade(model=config.Model(build="tiny-qwen3"), stages=(rm,))
    assert config.validate(cfg) is cfg
    assert apply_overrides(cfg, ["stages.rm.rm_batch_size=8"]).stages[0].rm_batch_size == 8
    with pytest.raises(
            config.ConfigError,
            match=r"^parallel.micro_batch_size: a reward_model stage needs an even") as e:
        apply_overrides(cfg, ["parallel.micro_batch_size=3"])
    assert "\n" not in str(e.value)
    with pytest.raises(config.ConfigError, match=r"^stages.rm.rm_max_tokens: expected >= 1"):
        apply_overrides(cfg, ["stages.rm.rm_max_tokens=0"])
    with pytest.raises(config.ConfigError, match="expected one of"):
        apply_overrides(cfg, ["stages.rm.kind=critic"])


def test_only_policy_stages_hand_on_their_weights():
    from nemo_cascade import config
    from nemo_cascade.cascade.driver import hands_on_policy

    assert hands_on_policy(config.Stage(kind="sft")) and hands_on_policy(config.Stage(kind="grpo"))
    assert not hands_on_policy(config.Stage(kind="reward_model"))


@pytest.mark.parametrize("arch,sizes", [
    ("llama", {}),
    # §4.2: the RM's base is Qwen2.5-72B-Instruct (Qwen2: q/k/v biases, random and non-zero here)
    ("qwen2", dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2)),
])
def test_rm_actor_export_round_trip(tmp_path, arch, sizes):
    """In-process (TP=1): an untied causal LM → RM actor (new seeded head) → export as
    *ForSequenceClassification; transformers' scores equal the actor's (≤ 1e-5, fp32). The folder
    loads back into an RM actor with its head, and is refused as a policy."""
    import transformers

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.convert.hf_config import reward_model_config
    from nemo_cascade.convert.shape import ModelFilesError
    from nemo_cascade.convert.export import export_hf
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    base = make_tiny_hf_model(tmp_path / "base", vocab_size=320, arch=arch,
                              tie_word_embeddings=False, seed=3, **sizes)
    actor = RewardModelActor(str(base), config.Parallel(micro_batch_size=2), seed=5)
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(1, 320, (n,), generator=g).tolist() for n in (5, 17, 9, 12)]
    batch = make_pair_batch([(rows[0], rows[1]), (rows[2], rows[3])], 64, pad_id=0)
    got = actor.scores(batch.tokens_B_T, batch.last_B)
    export_hf(actor, tmp_path / "rm", base, config_fn=lambda c: reward_model_config(c, 0))

    hf = transformers.AutoModelForSequenceClassification.from_pretrained(
        tmp_path / "rm", dtype=torch.float32).eval()
    assert type(hf).__name__ == {"llama": "LlamaForSequenceClassification",
                                 "qwen2": "Qwen2ForSequenceClassification"}[arch]
    with torch.no_grad():
        expect = [hf(input_ids=torch.tensor([r])).logits[0, 0].item() for r in rows]
    terms = Net.of(tmp_path / "rm", 17).forward_terms()  # rows of at most 17 tokens
    assert_close(got, expect, torch.float32, terms, what="transformers' scores")
    assert got.abs().max().item() > 1e-3  # the seeded head is not zero

    # head from the folder
    again = RewardModelActor(str(tmp_path / "rm"), config.Parallel(micro_batch_size=2), seed=99)
    # the same weights, the same sums
    assert torch.equal(again.scores(batch.tokens_B_T, batch.last_B), got)
    with pytest.raises(ModelFilesError, match="is a reward model, not a causal LM policy"):
        MegatronActor(str(tmp_path / "rm"), config.Parallel())
