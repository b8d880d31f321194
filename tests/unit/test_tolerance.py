"""The suite's tolerance rule (tests/tolerance.py) against real kernel choices: the tiny actor's
log-probs, losses and grad norms computed with the kernels this CPU picks, and again with the ones
another CPU family gets — MKL's GEMMs limited to AVX2 (which MKL is reported to pick on AMD CPUs),
ATen's own kernels to AVX2, oneDNN to AVX-512 without AMX — agree within the rule's bounds. On
either family this exercises both kinds of kernels. The bounds are not vacuous: one weight matrix
off by one part in a thousand fails them."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tolerance import Net, assert_close, assert_training_close, bound, unit_roundoff
from tests.launch import job_env

WORKER = Path(__file__).with_name("kernel_worker.py")
ROWS, LENGTH, STEPS = 4, 24, 2  # kernel_worker.py
KERNELS = {
    "this CPU's": {},
    "MKL at AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ATen at AVX2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "another family's": {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
                         "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    # These two change the kernels on any x86 CPU. The AVX2 limits do not on an AMD one, whose MKL
    # already runs AVX2 kernels there (the AMD EPYC of 2026-12-07: same bits).
    "MKL's compatible kernels": {"MKL_CBWR": "COMPATIBLE"},
    "ATen unvectorized": {"ATEN_CPU_CAPABILITY": "default"},
}
CHANGE_ANYWHERE = {"MKL's compatible kernels", "ATen unvectorized"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    return make_tiny_hf_model(tmp_path_factory.mktemp("tiny"), vocab_size=256, arch="qwen3",
                              num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2)


def run(model_dir, out: Path, env: dict) -> dict:
    """kernel_worker.py in a fresh process of its own (not joining this one's process group), under
    ``env``."""
    base = job_env("MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ATEN_CPU_CAPABILITY",
                   "ONEDNN_MAX_CPU_ISA")
    proc = subprocess.run([sys.executable, str(WORKER), str(model_dir), str(out)],
                          env={**base, **env}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def runs(model, tmp_path_factory):
    out = tmp_path_factory.mktemp("kernels")
    return {name: run(model, out / f"{i}.json", env)
            for i, (name, env) in enumerate(KERNELS.items())}


def test_another_cpu_familys_kernels_stay_within_the_bounds(model, runs):
    net, tokens = Net.of(model, LENGTH), ROWS * LENGTH
    ref = runs["this CPU's"]
    changed = []
    for name, got in runs.items():
        assert_close(got["initial"], ref["initial"], torch.float32, net.forward_terms(),
                     what=f"{name} log-probs")
        assert_training_close(got, ref, net, tokens, name)
        assert_close(got["final"], ref["final"], torch.float32, net.terms_after(STEPS, tokens),
                     what=f"{name} log-probs after training")
        changed += [name] if got != ref else []
    # the limits really changed the kernels (else this test compares a run with itself)
    assert set(changed) >= CHANGE_ANYWHERE, changed


def test_the_same_kernels_give_the_same_bits(model, runs, tmp_path):
    assert run(model, tmp_path / "again.json", {}) == runs["this CPU's"]


def test_a_real_defect_fails_the_bounds(model):
    """One weight matrix off by one part in a thousand (a wrong scale) moves the log-probs past the
    bound for the same arithmetic in another order."""
    import transformers

    net = Net.of(model, LENGTH)
    hf = transformers.AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    tokens = torch.randint(0, 256, (ROWS, LENGTH), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = torch.log_softmax(hf(tokens).logits, -1)
        hf.model.layers[1].mlp.down_proj.weight.mul_(1 + 1e-3)
        after = torch.log_softmax(hf(tokens).logits, -1)
    with pytest.raises(AssertionError, match="differs by"):
        assert_close(after, before, torch.float32, net.forward_terms(), what="a scaled weight")


def test_bounds_follow_the_arithmetic():
    assert unit_roundoff(torch.float32) == 2.0 ** -24 and unit_roundoff(torch.bfloat16) == 2.0 ** -8
    # sqrt of the additions
    assert bound(torch.float32, 400) == pytest.approx(2 * bound(torch.float32, 100))
    assert bound(torch.float32, 100, magnitude=3.0) == pytest.approx(3 * bound(torch.float32, 100))
    assert bound(torch.bfloat16, 1) / bound(torch.float32, 1) == 2.0 ** 16
    net = Net(layers=2, hidden=64, ffn=128, seq=20, vocab=256)
    assert (net.terms_after(1, 100) == net.step_terms(100) + net.forward_terms()
            > 2 * net.forward_terms())
    ratio = assert_close([1.0, 2.0], np.array([1.0, 2.0]) * (1 + bound(torch.float32, 10) / 2),
                         torch.float32, 10, relative=True)
    assert 0.49 < ratio < 0.51
