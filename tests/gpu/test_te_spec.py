"""The Transformer Engine path of the actor on one GPU: TE's parameter names are the conversion
table's (HF load and export round-trip), its log-probs match transformers (fp32 and bf16), packed
SFT rows attend per example through TE's ``thd`` layout, and FP8 (delayed / current / blockwise)
train steps run and fit a repeated batch."""
import math

import pytest
import torch

from nemo_cascade import config

VOCAB = 512


def te_actor(model_dir, dtype="float32", fp8="none", **parallel):
    from nemo_cascade.actor.megatron import MegatronActor

    return MegatronActor(str(model_dir), config.Parallel(micro_batch_size=2, **parallel),
                         dtype=dtype, seed=7, transformer_impl="transformer_engine", fp8=fp8)


def sft_loss(logprobs_B_T, mb):
    from nemo_cascade.algorithms import sft

    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


@pytest.mark.parametrize("model", ["tiny", "tiny_qwen2"])
def test_te_parameters_are_the_tables_and_round_trip(te, model, request):
    from nemo_cascade.convert.hf_io import SafetensorsReader

    tiny = request.getfixturevalue(model)
    actor = te_actor(tiny)
    assert actor.te and actor.plan.te
    names = {n for n, _ in actor.model.named_parameters()}
    assert names == {e.megatron for e in actor.entries}, (
        "every TE parameter has exactly one table entry")
    # TE's fused input norm
    assert "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight" in names
    assert "decoder.layers.0.mlp.linear_fc1.layer_norm_weight" in names
    assert ("decoder.layers.0.self_attention.linear_qkv.bias" in names) == (model == "tiny_qwen2")
    reader = SafetensorsReader(tiny)
    exported = dict(actor.iter_hf_weights())
    assert sorted(exported) == sorted(reader.names())
    for name in reader.names():
        assert torch.equal(exported[name].cpu(), reader.get(name)), name


@pytest.mark.parametrize("model", ["tiny", "tiny_qwen2"])
@pytest.mark.parametrize("dtype,max_diff,mean_diff", [("float32", 2e-2, 2e-3),
                                                      ("bfloat16", 0.3, 0.03)])
def test_te_logprobs_match_transformers(te, model, request, dtype, max_diff, mean_diff):
    """Against transformers in fp32 on the same GPU. bf16 tolerance: a bf16 forward differs from
    fp32 by up to ~0.1 nat per token on these random weights (docs/install.md: ~8e-2 for a bf16 vLLM
    engine); fp32 leaves room for TF32 GEMMs inside TE."""
    import transformers

    tiny = request.getfixturevalue(model)

    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).cuda().eval()
    tokens = torch.randint(0, VOCAB, (3, 77), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = hf(tokens.cuda()).logits.float().cpu()
    expect = torch.log_softmax(logits[:, :-1] / 0.8, -1).gather(-1, tokens[:, 1:, None])[..., 0]
    got = te_actor(tiny, dtype=dtype).logprobs(tokens, temperature=0.8)
    diff = (got[:, 1:] - expect).abs()
    assert torch.all(got[:, 0] == 0)
    assert diff.max().item() <= max_diff and diff.mean().item() <= mean_diff, (
        diff.max().item(), diff.mean().item())


@pytest.fixture(scope="module")
def sharp(tiny, tmp_path_factory):
    """``tiny`` with attention that matters: random init gives near-uniform attention whose output
    barely moves the logits, so attending across examples would change little. Scaling the q/k norms
    sharpens the softmax (logits ×16) and v/o the attention output (×25)."""
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32)
    with torch.no_grad():
        for layer in model.model.layers:
            a = layer.self_attn
            (a.q_norm.weight.mul_(4.0), a.k_norm.weight.mul_(4.0), a.v_proj.weight.mul_(5.0),
             a.o_proj.weight.mul_(5.0))
    out = tmp_path_factory.mktemp("sharp")
    model.save_pretrained(out, safe_serialization=True)
    return out


def per_token_logprobs(actor, batch):
    """The log-probs the loss function sees, row by row (one rank, no padding rows: microbatches in
    order)."""
    seen = []

    def keep(lp, mb):
        seen.append(lp.detach().float().cpu())
        return sft_loss(lp, mb)

    actor.train_step(batch, keep)
    return torch.cat(seen)


def test_te_packed_rows_attend_per_example(te, sharp):
    """TE's causal attention ignores attention masks, so packed rows go through the thd layout. Per
    trained token, the packed log-probs equal each example's own (up to bf16 noise: fused attention
    has no fp32 thd kernel), far closer than the same rows attended as plain causal sequences (the
    leak the layout prevents)."""
    from nemo_cascade.algorithms.packing import pack_sft_batch

    actor = te_actor(sharp, dtype="bfloat16")
    actor.configure_optimizer(config.Actor(lr=0.0), 10)  # measure only
    g = torch.Generator().manual_seed(0)
    def draw(n):
        return torch.randint(3, VOCAB, (n,), generator=g).tolist()

    examples = [(draw(p), draw(r)) for p, r in ((5, 17), (13, 4), (9, 12), (4, 26), (21, 9))]
    packed = pack_sft_batch(examples, max_tokens=64, pad_id=0)
    assert packed.num_sequences < len(examples)
    t = packed.tensors()
    with_boundaries = per_token_logprobs(actor, t)
    leaky = per_token_logprobs(actor, {"tokens": t["tokens"], "loss_mask": t["loss_mask"]})
    errors, leaks = [], []
    k = 0
    for row in range(packed.num_sequences):
        for seg in range(1, int(packed.segment_ids_B_T[row].max()) + 1):
            where = packed.segment_ids_B_T[row] == seg
            trained = packed.loss_mask_B_T[row][where] > 0
            alone = per_token_logprobs(
                actor, pack_sft_batch([examples[k]], 64, 0).tensors())[0][trained]
            errors.append((with_boundaries[row][where][trained] - alone).abs())
            leaks.append((leaky[row][where][trained] - alone).abs())
            k += 1
    assert k == len(examples)
    error, leak = torch.cat(errors).mean().item(), torch.cat(leaks).mean().item()
    assert error < 0.1 and error < 0.2 * leak, (error, leak)


@pytest.mark.parametrize("recipe", ["delayed", "current", "blockwise"])
def test_fp8_train_steps_fit_a_repeated_batch(te, tiny, recipe):
    from packaging.version import Version

    from nemo_cascade.actor import precision

    need = precision.FP8_MIN_CAPABILITY[recipe]
    if torch.cuda.get_device_capability() < need:
        pytest.skip(f"fp8={recipe} needs compute capability >= {need}")
    if Version(te) < Version(precision.FP8_MIN_TE[recipe]):
        pytest.skip(
            f"fp8={recipe} needs transformer_engine >= {precision.FP8_MIN_TE[recipe]}, found {te}")
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (4, 128), generator=g)
    mask = torch.ones(4, 128)
    mask[:, 0] = 0.0
    batch = {"tokens": tokens, "loss_mask": mask}

    bf16 = te_actor(tiny, dtype="bfloat16")
    bf16.configure_optimizer(config.Actor(lr=0.0), 1)
    bf16_loss = bf16.train_step(batch, sft_loss).loss
    del bf16

    actor = te_actor(tiny, dtype="bfloat16", fp8=recipe)
    assert (actor.tconfig.fp8 == "hybrid"
            and actor.tconfig.fp8_recipe == precision.FP8_RECIPES[recipe])
    actor.configure_optimizer(config.Actor(lr=1e-3), total_steps=12)
    losses = [actor.train_step(batch, sft_loss).loss for _ in range(12)]
    assert all(math.isfinite(x) for x in losses), losses
    assert losses[0] != bf16_loss, "FP8 GEMMs must change the numbers (is FP8 really on?)"
    assert abs(losses[0] - bf16_loss) < 0.1 * bf16_loss, "but only by quantization error"
    assert losses[-1] < 0.9 * losses[0], losses
