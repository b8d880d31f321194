"""The actor's context-parallel bookkeeping on 2 gloo processes (one CP group): each rank gets
Megatron's load-balanced chunks (rank 0: chunks 0 and 3, rank 1: chunks 1 and 2 of a sequence padded
to a multiple of 2·cp), with the next-token labels that cross chunk borders; the reassembled
log-probs equal the whole-sequence ones; the gradients summed over the CP group equal the
whole-sequence gradient; and only one CP rank counts the tokens Megatron divides by. (The model's
own CP attention is TE's: tests/gpu.)"""
import json
from pathlib import Path

import pytest
import torch

from tests.launch import torchrun
from tests.tolerance import assert_within

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("cp_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("cp") / "result.json"
    proc = torchrun(WORKER, 2, out, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text())


def test_each_rank_gets_its_two_chunks_and_their_labels(ranks):
    tokens = ranks[0]["tokens"]
    padded = [row + [0] * 3 for row in tokens]  # 13 → 16 = 4 chunks of 4
    chunks = {0: (0, 3), 1: (1, 2)}
    for r in ranks:
        a, b = chunks[r["rank"]]
        assert r["positions"] == list(range(4 * a, 4 * a + 4)) + list(range(4 * b, 4 * b + 4))
        assert r["input_ids"] == [row[4 * a:4 * a + 4] + row[4 * b:4 * b + 4] for row in padded]
        nxt = [row[1:] + [0] for row in padded]
        assert r["labels"] == [row[4 * a:4 * a + 4] + row[4 * b:4 * b + 4] for row in nxt]


# cp_worker.py's stand-in model: a log-softmax over V = 11 logits per token, a loss summed over B·T
# = 3·13 weighted tokens, gradients summed over the two ranks' chunks (tests/tolerance.py).
VOCAB, TOKENS = 11, 3 * 13


def test_reassembled_logprobs_and_loss_equal_the_whole_sequence(ranks):
    for r in ranks:
        assert_within(r["logprobs_error"], torch.float32, VOCAB, r["logprob_max"],
                      what="CP log-probs")
        assert_within(abs(r["loss"] - r["ref_loss"]), torch.float32, VOCAB + TOKENS,
                      r["loss_scale"], what="CP loss")


def test_gradients_sum_to_the_whole_sequence_gradient(ranks):
    for r in ranks:
        assert_within(r["grad_error"], torch.float32, VOCAB + TOKENS, r["grad_norm"],
                      what="CP gradient")
        assert r["local_grad_error"] > 1e-3 * r["grad_norm"], (
            "each rank alone holds only its chunks' share")


def test_only_one_cp_rank_counts_tokens(ranks):
    counts = {r["rank"]: r["count"] for r in ranks}
    assert counts == {0: 13, 1: 0}, (
        "Megatron sums counts over DP × CP ranks; the loss is whole on every CP rank")
    assert all(r["report_den"] == 13 for r in ranks), "metrics keep the whole count on every rank"


def test_packed_rows_are_refused_under_context_parallel(ranks):
    assert ranks[0]["packed_error"].startswith("parallel.cp > 1 cannot split packed rows")


def test_cp_logprobs_work_in_place_on_the_logits(ranks):
    """As the non-CP path: the logits are divided by the temperature in place and consumed by the
    in-place cross-entropy — no scaled fp32 copy of the step's largest tensor beside them."""
    assert all(r["consumed"] for r in ranks)
