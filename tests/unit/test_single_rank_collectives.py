"""Megatron's grad-buffer collectives over a one-rank data-parallel group (actor/cpu.py): the
identity, done without gloo's copy of the whole buffer; asynchronous calls still go to gloo. Checked
on the real gloo group a CPU actor runs in, with the profiler telling whether gloo was called."""
import pytest
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from nemo_cascade.actor import cpu
from nemo_cascade.actor.process_groups import init_distributed


@pytest.fixture(scope="module")
def buffers():
    init_distributed()  # the same default group a CPU actor joins: gloo, one rank
    assert cpu.enable(), "these tests run where CUDA is absent"
    from megatron.core.distributed import param_and_grad_buffer

    return param_and_grad_buffer


def _gloo_calls(fn):
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        result = fn()
    return result, [e.name for e in prof.events() if "c10d" in e.name or "gloo" in e.name]


def test_megatron_gets_the_wrapped_collectives_once(buffers):
    cpu.enable()  # a second enable must not wrap the wrapper
    assert buffers.dist_reduce_scatter_func.identity_over_one_rank is dist.reduce_scatter_tensor
    assert buffers.dist_all_gather_func.identity_over_one_rank is dist.all_gather_into_tensor


def test_reduce_scatter_of_a_buffer_onto_itself_is_left_alone_and_equals_gloos(buffers):
    grads = torch.randn(1000)
    expected = grads.clone()
    # what gloo makes of it over one rank
    dist.reduce_scatter_tensor(expected, expected.clone(), group=None)
    # Megatron's shard of the buffer for DP rank 0 of 1: the whole buffer
    shard = grads.view(-1)[0:1000]
    result, calls = _gloo_calls(lambda: buffers.dist_reduce_scatter_func(
        shard, grads, op=dist.ReduceOp.SUM, group=None, async_op=False))
    assert result is None and calls == []
    assert torch.equal(grads, expected)


def test_all_gather_into_other_memory_copies(buffers):
    shard, params = torch.randn(64), torch.zeros(64)
    _, calls = _gloo_calls(
        lambda: buffers.dist_all_gather_func(params, shard, group=None, async_op=False))
    assert calls == [] and torch.equal(params, shard)


def test_asynchronous_calls_still_go_to_gloo(buffers):
    grads = torch.randn(64)
    work, calls = _gloo_calls(
        lambda: buffers.dist_reduce_scatter_func(grads, grads.clone(), group=None, async_op=True))
    work.wait()
    assert calls, "an overlapped reduce hands back gloo's handle: it must not be short-cut"
