"""MKL's vector math is settled once per process, on one element of each precision, before an actor,
a CPU engine or a served model computes (nemo_cascade/runtime/cpu_math.py; the race it prevents is
in docs/testing.md)."""
import torch

from nemo_cascade.runtime import cpu_math


def test_every_vml_function_runs_once_on_one_element_per_precision(monkeypatch):
    calls = []
    for name in cpu_math.VML_FUNCTIONS:
        assert callable(getattr(torch, name)), name
        monkeypatch.setattr(torch, name, lambda x, name=name: calls.append(
            (name, x.dtype, x.numel())))
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: True)
    monkeypatch.setattr(cpu_math, "_settled", False)
    assert cpu_math.settle_vector_math()
    assert sorted(calls, key=str) == sorted(((n, d, 1) for n in cpu_math.VML_FUNCTIONS
                                             for d in (torch.float32, torch.float64)), key=str)
    # once
    assert not cpu_math.settle_vector_math() and len(calls) == 2 * len(cpu_math.VML_FUNCTIONS)


def test_without_mkl_nothing_runs(monkeypatch):
    monkeypatch.setattr(torch.backends.mkl, "is_available", lambda: False)
    monkeypatch.setattr(cpu_math, "_settled", False)
    monkeypatch.setattr(torch, "cos", lambda x: (_ for _ in ()).throw(AssertionError("cos ran")))
    assert not cpu_math.settle_vector_math()


def test_the_actor_settles_it_before_its_first_forward(tmp_path, monkeypatch):
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    order = []
    monkeypatch.setattr(cpu_math, "settle_vector_math", lambda: order.append("settled"))
    monkeypatch.setattr(MegatronActor, "load_hf", lambda self, path: order.append("weights"))
    MegatronActor(str(make_tiny_hf_model(tmp_path, vocab_size=256)), config.Parallel())
    assert order == ["settled", "weights"]


def test_a_served_model_settles_it_before_vllm_starts():
    """The served RM / judge process (rewards/serve.py) settles it before vLLM forks its engine,
    which inherits the settled choice."""
    from nemo_cascade.rewards import serve

    code = serve._CHILD_CODE
    assert code.index("settle_vector_math()") < code.index(
        "from vllm.entrypoints.cli.main import main")
