"""parallel.overlap_grad_reduce / overlap_param_gather at DP=2 (torchrun, gloo) train exactly as
without overlap: losses, grad norms, log-probs, the KL reference, HF exports and checkpoints over 4
steps — and the collectives really run asynchronously: gradient buckets start reducing inside the
backward pass, parameter buckets are gathered by the next forward's pre-hooks, and every read of the
weights outside a forward gathers first."""
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.launch import torchrun
from tests.tolerance import Net, assert_close

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("overlap_worker.py")
MODES = ("plain", "grad", "plain_do", "grad_do", "grad_gather_do")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny"), vocab_size=256)


@pytest.fixture(scope="module")
def net(model_dir):
    return Net.of(model_dir, 20)  # overlap_worker.py: 4 steps of 6, 8, 10 and 7 rows of 20 tokens


@pytest.fixture(scope="module")
def runs(model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("overlap")
    proc = torchrun(WORKER, 2, model_dir, out, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return {m: torch.load(out / f"{m}.pt") for m in MODES}


def tensors(run: dict) -> dict[str, torch.Tensor]:
    """Everything a run produced that depends on the weights, flattened to named tensors."""
    out = {f"logprobs.{k}": v for k, v in run["logprobs"].items()}
    for part in ("export_step3", "export_final", "checkpoint"):
        out.update({f"{part}.{k}": v for k, v in run[part].items()})
    out["loss"], out["grad_norm"] = torch.tensor(run["loss"]), torch.tensor(run["grad_norm"])
    return out


STEPS, TOKENS = 4, 10 * 20  # the largest of overlap_worker.py's batches


def assert_same(got: dict, want: dict, net: Net | None = None) -> None:
    """Without ``net``: the same sums in the same order, so the same bits. With it, the grad norm is
    summed shard by shard in another order, which reaches every weight through the clipping:
    tests/tolerance.py's bound for numbers that all four steps' additions lead to."""
    a, b = tensors(got), tensors(want)
    assert sorted(a) == sorted(b)
    assert got["tokens"] == want["tokens"]
    for name in a:
        if net is None:
            assert torch.equal(a[name], b[name]), name
        else:
            assert_close(a[name].double().numpy(), b[name].double().numpy(), torch.float32,
                         net.terms_after(STEPS, TOKENS), relative=name in ("loss", "grad_norm"),
                         what=name)


def test_runs_train(runs):
    for mode, run in runs.items():
        assert run["bucket_groups"] == (1 if mode.startswith("plain") else 4), mode
        assert len(set(np.round(run["loss"], 9))) == 4, f"{mode}: losses must change across steps"
    assert not torch.equal(
        runs["plain"]["export_step3"]["model.norm.weight"],
        runs["plain"]["export_final"]["model.norm.weight"]), "step 4 must change the weights"
    # The reference swap (right after step 1) read the starting weights: the first step's old
    # log-probs.
    torch.testing.assert_close(runs["plain"]["logprobs"]["reference"],
                               runs["plain"]["logprobs"]["old_0"], rtol=0, atol=0)


def test_overlap_grad_reduce_is_exact(runs):
    assert_same(runs["grad"], runs["plain"])


def test_overlap_with_distributed_optimizer(runs, net):
    # The distributed optimizer shards every bucket over the DP ranks and sums the grad norm shard
    # by shard: with 4 buckets instead of 1 the shards, and so the summation order, differ —
    # rounding only (measured: grad norms 1.5e-7 relative, weights <= 1e-7, log-probs <= 9.5e-7;
    # PP=2: weights 1.7e-7).
    assert_same(runs["grad_do"], runs["plain_do"], net)
    # Same buckets: deferring the parameter all-gather to the next forward changes nothing at all.
    assert_same(runs["grad_gather_do"], runs["grad_do"])
    # And the distributed optimizer itself agrees with the plain one.
    assert_same(runs["plain_do"], runs["plain"], net)


def _calls(step_events, name):
    return [e for e in step_events if e[0] == name]


@pytest.mark.parametrize("mode", ["grad", "grad_do", "grad_gather_do"])
def test_gradient_buckets_reduce_during_backward(runs, mode):
    events = runs[mode]["events"]
    groups = {e[1] for e in _calls(events[1], "start_grad_sync")}
    assert len(groups) == 4
    # the first step only counts gradients (Megatron learns each bucket's size)
    for step in events[1:4]:
        starts = _calls(step, "start_grad_sync")
        assert (len(starts) == 4
                and all(outstanding and in_backward
                        for _, _, outstanding, in_backward in starts)), (
            f"{mode}: every bucket's reduce must start asynchronously inside the backward pass: "
            f"{starts}")
        first_finish = next(i for i, e in enumerate(step) if e[0] == "finish_grad_sync")
        assert all(step.index(s) < first_finish for s in starts)


def test_parameter_gather_overlaps_the_next_forward(runs):
    events = runs["grad_gather_do"]["events"]
    # Step 2 was followed by nothing: step 3's first forward gathered, bucket by bucket,
    # asynchronously.
    step3 = events[2]
    first_forced = next((i for i, e in enumerate(step3) if e[0] == "start_param_sync(force_sync)"),
                        len(step3))
    async_gathers = [e for e in step3[:first_forced] if e[0] == "start_param_sync" and e[2]]
    assert len({e[1] for e in async_gathers}) == 4, step3[:first_forced]
    # Steps 1, 3 and 4 were followed by a read of the weights outside a forward: it gathered at
    # once.
    for k in (0, 2, 3):
        tail = events[k][[e[0] for e in events[k]].index("finish_grad_sync"):]
        assert len(_calls(tail, "start_param_sync(force_sync)")) == 4, (k, tail)
    # Without overlap_param_gather the optimizer step itself gathers, synchronously.
    plain = runs["grad_do"]["events"][1]
    assert [e[2] for e in _calls(plain, "start_param_sync")] == [False] * 4


@pytest.mark.slow
def test_pipeline_parallel_overlap(tmp_path):
    """PP=2 × DP=2: the 1F1B schedule's no_sync / grad_sync_func path (stages after the first start
    their reduce after their last backward) and the embedding bucket of the tied head."""
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    model_dir = make_tiny_hf_model(tmp_path / "tiny4", vocab_size=256, num_hidden_layers=4)
    proc = torchrun(WORKER, 4, model_dir, tmp_path / "out", 2, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    runs = {m: torch.load(tmp_path / "out" / f"{m}.pt") for m in MODES}
    assert runs["grad"]["bucket_groups"] > 1 and len(set(np.round(runs["plain"]["loss"], 9))) == 4
    assert_same(runs["grad"], runs["plain"])
    assert_same(runs["grad_do"], runs["plain_do"], Net.of(model_dir, 20))
    assert_same(runs["grad_gather_do"], runs["grad_do"])
