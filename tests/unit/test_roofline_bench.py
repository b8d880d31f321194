"""bench/roofline.py's counting: a train step's FLOPs and GEMMs from the model's shape, the decode
roofline, and what a packed batch asks of the actor."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from nemo_cascade.convert.shape import ModelShape

ROOT = Path(__file__).parents[2]
SHAPE = ModelShape(name="t", vocab_size=96, hidden_size=32, ffn_hidden_size=48, num_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=8, tied_embeddings=True)


@pytest.fixture(scope="module")
def roofline():
    sys.path.insert(0, str(ROOT))  # the script imports its sibling benches as bench.*
    try:
        spec = importlib.util.spec_from_file_location("roofline", ROOT / "bench" / "roofline.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT))


def test_train_flops_match_torchs_count_of_the_same_model(roofline):
    """The shape's count equals what torch's FLOP counter sees in a forward and backward of the HF
    model of that shape (every position trained, so the LM head runs at all of them)."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                      tie_word_embeddings=True,
                      attn_implementation="eager")  # its products counted (CPU SDPA is not)
    model = Qwen3ForCausalLM(cfg)
    rows, length = 3, 20
    tokens = torch.randint(0, 96, (rows, length))
    with FlopCounterMode(display=False) as counter:
        model(tokens).logits.float().sum().backward()
    want = roofline.train_flops(SHAPE, [length] * rows, rows * length)
    assert counter.get_total_flops() == pytest.approx(want, rel=0.02)


def test_the_gemms_are_the_linear_work(roofline):
    """The GEMMs the limit is measured on do the step's linear FLOPs, padding included."""
    positions, trained = 60, 25
    gemms = roofline.train_gemms(SHAPE, positions, trained)
    attention = 3 * 4 * 2 * 4 * 8 * positions ** 2
    no_attention = roofline.train_flops(SHAPE, [positions], trained) - attention
    gemm = sum(count * 2 * m * k * n for count, m, k, n in gemms)
    assert gemm == no_attention
    assert len(roofline.train_gemms(SHAPE, positions, 0)) == 3 * 4  # no trained position: no head


def test_decode_bound_is_the_slower_of_memory_and_compute(roofline):
    weights = 2 * sum(SHAPE.layer_params()) + 32 * 96
    kv = SHAPE.kv_bytes_per_token(4)
    slow_memory = roofline.decode_bound(SHAPE, sequences=4, mean_context=10, dtype_bytes=4,
                                        read_bytes_per_s=1e6, flops_per_s=1e15)
    memory_s = (4 * weights + 40 * kv) / 1e6
    assert slow_memory["bound"] == slow_memory["memory"] == pytest.approx(4 / memory_s)
    slow_compute = roofline.decode_bound(SHAPE, sequences=4, mean_context=10, dtype_bytes=4,
                                         read_bytes_per_s=1e15, flops_per_s=1e6)
    assert slow_compute["bound"] == slow_compute["compute"] == pytest.approx(1e6 / (2 * weights))


def test_batch_counts_of_packed_and_unpacked_rows(roofline):
    mask = torch.tensor([[0, 1, 1, 0, 1, 0], [0, 0, 1, 0, 0, 0]])
    segments = torch.tensor([[1, 1, 1, 2, 2, 0], [1, 1, 1, 0, 0, 0]])
    packed = {"loss_mask": mask, "segment_ids": segments}
    assert roofline.batch_counts(packed) == {"positions": 10, "trained": 4, "lengths": [3, 2, 3]}
    unpacked = {"positions": 10, "trained": 4, "lengths": [5, 3]}
    assert roofline.batch_counts({"loss_mask": mask}) == unpacked


def test_a_row_reads_the_colocated_run_against_the_replay_and_the_plan(roofline):
    """Medians over the measured steps; generation colocated over alone; the plan's error is
    predicted / measured − 1, per phase and for the two together."""
    bound = {"memory": 400.0, "compute": 900.0, "bound": 400.0}
    model = {"params": 1e6, "weight_bytes": 4e6, "kv_bytes_per_token": 1e3, "kv_tokens": 10**6,
             "max_seqs": 256, "samples_per_prompt": 4}
    step = {"tokens": 1000, "sequences": 8, "prompt_tokens": 200, "longest": 10,
            "train_s": 2.0, "generate_s": 1.0, "forward_backward_s": 1.5}
    co = {"model": "tiny", "dtype": "float32", "engine_dtype": "float32", "rounds": 3, "threads": 2,
          "counts": {}, "step_s": [1.0, 2.0, 3.0],
          "phase_s": {"generate": [1.0, 1.0, 1.0], "score": [0.0] * 3, "train": [2.0, 4.0, 3.0],
                      "sync": [0.1] * 3},
          "train_parts_s": {"forward_backward": [1.0, 2.0, 3.0], "optimizer": [0.5] * 3},
          "train_flops": [6.0, 8.0, 9.0], "matmul": {"flops_per_s": 1e11, "seconds": 0.2},
          "read_bytes_per_s": 1e10, "copy_bytes_per_s": 2e10,
          "generate": [{"seconds": 1.0, "tokens": 100, "bound_tokens_per_s": bound}] * 3,
          "plan": {"model": model, "steps": [step] * 3}}
    al = {"generate": [{"seconds": 0.5, "tokens": 100}] * 3}
    row = roofline.summarize(co, al)
    assert row["train_flops_per_s"] == pytest.approx(3.0)  # median of 3, 2, 3
    assert row["train_of_limit"] == pytest.approx(3e-11)
    assert row["colocated_of_alone"] == pytest.approx(0.5) and row["generate_of_bound"] == 0.25
    # the plan's written efficiencies (35 % MFU, 60 % of the bandwidth, 3 ms an iteration) on the
    # measured limits: 6e9 FLOPs at 3.5e10 FLOP/s + Adam's 3e7 B at 6e9 B/s
    train = 6e9 / 3.5e10 + 3e7 / 6e9
    # two prompts of 100 tokens prefilled at 2e6 FLOPs a token; 10 iterations of 3 ms and
    # (4e6 + 8 · 105 · 1e3) B at 6e9 B/s
    generate = 2 * 100 * 2e6 / 3.5e10 + 10 * (0.003 + 4.84e6 / 6e9)
    assert row["plan"]["assumed_error"] == pytest.approx(
        {"train_s": train / 2.0 - 1, "generate_s": generate - 1,
         "step_s": (train + generate) / 3.0 - 1})
