"""The tiny cascade end to end through the CLI (SFT → math GRPO), at a few steps: run dir, metrics, manifest,
hand-off between stages, HF exports that transformers loads, and a re-run that skips finished stages."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _run(run_root, *extra):
    cmd = [sys.executable, "-m", "nemo_cascade.cli", "run", str(ROOT / "recipes" / "tiny.py"),
           f"run_root={run_root}", "stages.sft.steps=20", "stages.math.steps=2",
           "stages.math.grpo.prompts_per_step=8", "stages.math.grpo.group_size=4", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    proc = _run(root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return root / "tiny"


def _metrics(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_run_directory_and_metrics(run):
    assert json.loads((run / "config.json").read_text())["name"] == "tiny"
    sft, math = _metrics(run / "stages/0-sft/metrics.jsonl"), _metrics(run / "stages/1-math/metrics.jsonl")
    assert [r["step"] for r in sft] == list(range(20)) and [r["step"] for r in math] == [0, 1]
    assert sft[-1]["loss"] < sft[0]["loss"], "SFT must reduce the loss"
    for key in ("reward_mean", "reward_std", "response_len_mean", "truncation_rate", "groups_dropped",
                "time/generate", "time/score", "tokens_per_s"):
        assert key in math[0], key
    trained = [r for r in math if "logprob_gap" in r]
    # Strict on-policy with a verified weight sync: vLLM sampled with the very weights the actor trains.
    assert all(r["logprob_gap"] < 1e-4 for r in trained)


def test_manifest_records_lineage(run):
    m = json.loads((run / "manifest.json").read_text())
    assert m["versions"]["megatron-core"] == "0.16.1" and m["seed"] == 1234
    sft, math = m["stages"]["sft"], m["stages"]["math"]
    assert sft["status"] == math["status"] == "done"
    assert sft["parent"] == m["base_model"] and math["parent"] == sft["hf"], "math must start from SFT's weights"


def test_exports_load_in_transformers(run):
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(run / "stages/1-math/hf", dtype=torch.float32)
    base = transformers.AutoModelForCausalLM.from_pretrained(run / "base_model", dtype=torch.float32)
    tok = transformers.AutoTokenizer.from_pretrained(run / "stages/1-math/hf")
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False).endswith("hi /no_think<|im_end|>\n")
    changed = [n for n, p in model.state_dict().items() if not torch.equal(p, base.state_dict()[n])]
    assert changed, "the exported weights must be the trained ones, not the base model's"


def test_rerun_skips_finished_stages(run):
    proc = _run(run.parent)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "stage sft: skipped (done)" in proc.stderr and "stage math: skipped (done)" in proc.stderr
    assert len(_metrics(run / "stages/1-math/metrics.jsonl")) == 2
