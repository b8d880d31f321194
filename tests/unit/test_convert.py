"""HF ⇄ Megatron conversion: table reshapes, TP shards, bit-exact round trips, logits parity with
transformers."""
import pytest
import torch

from nemo_cascade.convert import table
from nemo_cascade.convert.shape import ModelFilesError, read_hf_config, shape_from_dict
from nemo_cascade.config import ConfigError
from nemo_cascade.convert.shape import ModelShape
from tests.tolerance import Net, assert_close

GEOM = ModelShape("g", vocab_size=16, hidden_size=8, ffn_hidden_size=16, num_layers=1,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=2)


def test_qkv_interleaves_per_kv_group():
    h, d = GEOM.hidden_size, GEOM.head_dim
    q = torch.arange(4 * d * h, dtype=torch.float32).reshape(4 * d, h)
    k = -torch.arange(2 * d * h, dtype=torch.float32).reshape(2 * d, h) - 1
    v = 1000 + torch.arange(2 * d * h, dtype=torch.float32).reshape(2 * d, h)
    rule = next(r for r in table.TABLES["qwen3"] if "linear_qkv" in r.megatron)
    entry = table.Entry("x", ("q", "k", "v"), rule, 0)
    fused = table.to_megatron(entry, [q, k, v], GEOM)
    # group 0 = q heads 0,1 then k head 0 then v head 0; group 1 likewise.
    expect = torch.cat([q[0:4], k[0:2], v[0:2], q[4:8], k[2:4], v[2:4]])
    assert torch.equal(fused, expect)
    back = dict(table.to_hf(entry, fused, GEOM))
    assert torch.equal(back["q"], q) and torch.equal(back["k"], k) and torch.equal(back["v"], v)


def test_qkv_bias_interleaves_like_the_weight():
    """Qwen2's fused q/k/v bias is interleaved per KV group exactly as the fused weight's rows, so a
    TP rank's column slice of the bias belongs to its slice of the weight."""
    h, d = GEOM.hidden_size, GEOM.head_dim
    qw, kw, vw = torch.randn(4 * d, h), torch.randn(2 * d, h), torch.randn(2 * d, h)
    qb, kb, vb = torch.randn(4 * d), torch.randn(2 * d), torch.randn(2 * d)
    rules = {r.megatron.rsplit(".", 1)[-1]: r for r in table.TABLES["qwen2"]
             if "linear_qkv" in r.megatron}
    w_entry, b_entry = (table.Entry("x", ("q", "k", "v"), rules[k], 0) for k in ("weight", "bias"))
    fused_w, fused_b = (table.to_megatron(w_entry, [qw, kw, vw], GEOM),
                        table.to_megatron(b_entry, [qb, kb, vb], GEOM))
    assert torch.equal(fused_b, torch.cat([qb[0:4], kb[0:2], vb[0:2], qb[4:8], kb[2:4], vb[2:4]]))
    # Megatron's fused projection equals HF's three projections, interleaved: weight rows and bias
    # agree
    x = torch.randn(h)
    assert torch.allclose(fused_w @ x + fused_b,
                          table.to_megatron(b_entry, [qw @ x + qb, kw @ x + kb, vw @ x + vb], GEOM))
    for r in range(2):
        assert (table.shard(fused_b, rules["bias"].tp, r, 2).shape[0]
                == table.shard(fused_w, rules["weight"].tp, r, 2).shape[0])
    back = dict(table.to_hf(b_entry, fused_b, GEOM))
    assert torch.equal(back["q"], qb) and torch.equal(back["k"], kb) and torch.equal(back["v"], vb)


def test_qwen2_table_has_qkv_biases_after_each_qkv_weight():
    names = [e.megatron for e in table.expand(table.rules_for("qwen2", tied_embeddings=False), 2)]
    for i in range(2):
        w = names.index(f"decoder.layers.{i}.self_attention.linear_qkv.weight")
        assert names[w + 1] == f"decoder.layers.{i}.self_attention.linear_qkv.bias"
    assert not any("layernorm" in n and "self_attention" in n for n in names)  # no q/k norm
    assert not any(n.endswith(".bias")
                   for n in (e.megatron for e in table.expand(table.rules_for("qwen3", True), 2)))


QWEN25_72B = {  # huggingface.co/Qwen/Qwen2.5-72B-Instruct config.json (the RM's base, §4.2)
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 8192, "initializer_range": 0.02,
    "intermediate_size": 29568, "max_position_embeddings": 32768, "max_window_layers": 70,
    "model_type": "qwen2", "num_attention_heads": 64, "num_hidden_layers": 80,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 152064}


def test_qwen2_configs():
    from nemo_cascade.convert.hf_config import reward_model_config
    from nemo_cascade.convert.megatron_args import transformer_config_kwargs

    shape = shape_from_dict(QWEN25_72B)
    assert ((shape.arch, shape.qkv_bias, shape.qk_norm, shape.head_dim, shape.rope_theta)
            == ("qwen2", True, False, 128, 1e6))
    kwargs = transformer_config_kwargs(shape, tp=8, pp=4, bf16=True)
    assert kwargs["add_qkv_bias"] and not kwargs["add_bias_linear"] and not kwargs["qk_layernorm"]
    rm = shape_from_dict(reward_model_config(QWEN25_72B, pad_token_id=0))
    assert rm.hf_architecture == "Qwen2ForSequenceClassification" and rm.arch == "qwen2"
    # Qwen2 ignores the field
    assert shape_from_dict({**QWEN25_72B, "attention_bias": True}).qkv_bias


@pytest.mark.parametrize("change,field", [
    ({"use_sliding_window": True}, "use_sliding_window=true"),  # layers 70..79 would slide
    ({"layer_types": ["full_attention"] * 79 + ["sliding_attention"]}, "layer_types"),
])
def test_sliding_window_is_refused_in_one_line(change, field):
    with pytest.raises(ModelFilesError,
                       match=f"config.json: {field} asks for sliding-window attention on") as e:
        shape_from_dict({**QWEN25_72B, **change})
    assert "\n" not in str(e.value)
    # a window that covers no layer is full attention: accepted (transformers' rule: layers >=
    # max_window_layers)
    assert shape_from_dict({**QWEN25_72B, "use_sliding_window": True,
                            "max_window_layers": 80}).arch == "qwen2"
    with pytest.raises(ModelFilesError,
                       match="attention_bias=true is not supported for Qwen3ForCausalLM"):
        shape_from_dict(
            {**QWEN25_72B, "architectures": ["Qwen3ForCausalLM"], "attention_bias": True})


@pytest.mark.parametrize("kind", ["column", "row", "vocab", "glu", "replicated"])
@pytest.mark.parametrize("tp", [1, 2, 4])
def test_shard_unshard_roundtrip(kind, tp):
    full = torch.randn(16, 8)
    shards = [table.shard(full, kind, r, tp) for r in range(tp)]
    assert torch.equal(table.unshard(shards, kind), full)


def test_glu_shard_holds_gate_and_up_slices():
    gate, up = torch.zeros(4, 2), torch.ones(4, 2)
    local = table.shard(torch.cat([gate, up]), "glu", rank=1, size=2)
    assert torch.equal(local, torch.cat([gate[2:], up[2:]]))


def test_tied_embeddings_drop_output_layer_and_te_renames():
    tied = table.rules_for("qwen3", tied_embeddings=True)
    assert not any(r.megatron == "output_layer.weight" for r in tied)
    te = table.rules_for("llama", tied_embeddings=False, te=True)
    assert any(r.megatron.endswith("linear_qkv.layer_norm_weight") for r in te)
    with pytest.raises(ValueError, match="no conversion table"):
        table.rules_for("gpt2", False)


def test_bad_configs_give_one_line_errors(tmp_path):
    with pytest.raises(ModelFilesError, match="config.json: no such file"):
        read_hf_config(tmp_path)
    with pytest.raises(ModelFilesError, match="not supported"):
        shape_from_dict({"architectures": ["GPT2LMHeadModel"]})
    with pytest.raises(ModelFilesError, match="missing field 'hidden_size'"):
        shape_from_dict({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 2})


QWEN2_SIZES = dict(hidden_size=128, num_attention_heads=4, num_key_value_heads=2)
"""Two KV groups of two query heads (head_dim 32):
the q/k/v weight and bias interleaving is not trivial."""


@pytest.mark.parametrize("arch,tied,sizes", [("qwen3", True, {}), ("llama", False, {}),
                                             ("qwen2", False, QWEN2_SIZES)])
def test_megatron_matches_transformers(tmp_path, arch, tied, sizes):
    """HF → Megatron → HF is bit-exact, and Megatron's log-probs equal transformers' within fp32
    rounding (tests/tolerance.py). Qwen2: the q/k/v biases are random and non-zero (tiny_models.py),
    so a bias mis-interleaved or dropped changes log-probs."""
    import transformers

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.convert.hf_io import SafetensorsReader
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=320, arch=arch, tie_word_embeddings=tied,
                       seed=3, **sizes)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    tokens = torch.randint(0, 320, (3, 21), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = hf(tokens).logits.float()
    expect = torch.log_softmax(logits[:, :-1] / 0.8, -1).gather(-1, tokens[:, 1:, None])[..., 0]

    actor = MegatronActor(str(tmp_path), config.Parallel())
    got = actor.logprobs(tokens, temperature=0.8)
    assert torch.all(got[:, 0] == 0)
    assert_close(got[:, 1:], expect, torch.float32, Net.of(tmp_path, 21).forward_terms(),
                 what="log-probs vs transformers")

    reader = SafetensorsReader(tmp_path)
    exported = dict(actor.iter_hf_weights())
    assert sorted(exported) == sorted(reader.names())
    for name in reader.names():
        assert torch.equal(exported[name], reader.get(name)), name


def test_parallel_layout_must_divide_model(tmp_path):
    from nemo_cascade.convert.megatron_args import check_parallel
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=256, arch="qwen3")
    shape = read_hf_config(tmp_path)
    with pytest.raises(ConfigError,
                       match=r"parallel.tp=2 must divide the model's num_key_value_heads=1"):
        check_parallel(shape, tp=2, pp=1)
    with pytest.raises(ConfigError,
                       match=r"parallel.pp=4 must divide the model's num_hidden_layers=2"):
        check_parallel(shape, tp=1, pp=4)


def test_yarn_rope_matches_transformers(tmp_path):
    """A config with YaRN rope scaling (paper App. B: factor 2–3 over 32768) is computed as
    transformers does — the actor must not silently fall back to plain RoPE; sequences run past the
    original context."""
    import transformers

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.convert.shape import read_hf_config
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    make_tiny_hf_model(tmp_path, vocab_size=320, arch="qwen3", seed=5, rope_scaling=yarn,
                       max_position_embeddings=64)
    assert read_hf_config(tmp_path).yarn == (4.0, 16)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    tokens = torch.randint(0, 320, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expect = (torch.log_softmax(hf(tokens).logits.float()[:, :-1], -1)
                  .gather(-1, tokens[:, 1:, None])[..., 0])
    got = MegatronActor(str(tmp_path), config.Parallel()).logprobs(tokens, temperature=1.0)
    assert_close(got[:, 1:], expect, torch.float32,
                 Net.of(tmp_path, 40).forward_terms(), what="YaRN log-probs")


def test_unsupported_rope_scaling_is_one_line():
    from nemo_cascade.convert.hf_config import with_yarn
    from nemo_cascade.convert.shape import ModelFilesError, shape_from_dict

    base = {"architectures": ["Qwen3ForCausalLM"], "num_attention_heads": 2, "hidden_size": 64,
            "vocab_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,
            "max_position_embeddings": 32768, "rope_theta": 1e6}
    with pytest.raises(ModelFilesError, match="rope scaling 'linear' is not supported"):
        shape_from_dict({**base, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})
    with pytest.raises(ModelFilesError, match="yarn settings"):
        shape_from_dict(
            {**base, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "beta_fast": 16}})
    scaled = with_yarn(base, 2.0)  # App. B: 8B evaluates with factor 2 over 32768
    assert (shape_from_dict(scaled).yarn == (2.0, 32768)
            and scaled["max_position_embeddings"] == 65536)
