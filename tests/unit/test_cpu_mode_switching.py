"""The CPU compat layer's device-rewriting mode (actor/cpu.py): off inside ``suspended()``, nested
ones included, and back on while ``active_while_pulled`` produces each item for a consumer that
suspended it — how the engine's weight load (vLLM's loaders, faster without the mode) pulls the
actor's gathers (Megatron code that needs it)."""
import pytest
import torch

from nemo_cascade.actor import cpu


@pytest.fixture(scope="module", autouse=True)
def compat():
    assert cpu.enable(), "these tests run where CUDA is absent"


def _rewrites_cuda() -> bool:
    try:
        torch.empty(1, device="cuda")
    except (AssertionError, RuntimeError):
        return False
    return True


def test_suspended_turns_the_mode_off_and_back_on_and_a_nested_one_does_nothing():
    assert _rewrites_cuda() and torch._C._len_torch_function_stack() == 1
    with cpu.suspended():
        assert not _rewrites_cuda()
        with cpu.suspended():
            assert not _rewrites_cuda() and torch._C._len_torch_function_stack() == 0
        assert not _rewrites_cuda(), (
            "the inner suspended() pushed the mode back inside the outer one")
    assert _rewrites_cuda() and torch._C._len_torch_function_stack() == 1


def test_each_item_is_produced_with_the_mode_on_for_a_suspended_consumer():
    def produce():
        for i in range(3):
            yield i, _rewrites_cuda(), torch._C._len_torch_function_stack()

    with cpu.suspended():
        seen = [(*item, _rewrites_cuda()) for item in cpu.active_while_pulled(produce())]
    assert seen == [(i, True, 1, False) for i in range(3)]
    assert _rewrites_cuda() and torch._C._len_torch_function_stack() == 1


def test_an_unsuspended_consumer_keeps_one_mode_and_an_error_restores_the_consumers_state():
    def produce():
        yield torch._C._len_torch_function_stack()
        raise ValueError("a gather failed")

    pulled = cpu.active_while_pulled(produce())
    assert next(pulled) == 1, "the mode was pushed a second time for a consumer that had it on"
    with cpu.suspended():
        with pytest.raises(ValueError, match="a gather failed"):
            next(pulled)
        assert not _rewrites_cuda()
    assert _rewrites_cuda() and torch._C._len_torch_function_stack() == 1
