"""The tiny cascade end to end through the CLI (SFT → math GRPO), at a few steps: run dir, metrics, manifest,
hand-off between stages, HF exports that transformers loads, and a re-run that skips finished stages.

The math stage also runs the per-stage GRPO settings: half-half thinking modes (§4.3.2), dynamic sampling with
refill (§4.4.2) and a two-phase response-length curriculum, 8 tokens with overlong filtering then 32 (§4.5.2).
SFT runs 60 steps so that some groups have mixed rewards and GRPO updates happen (after 20 every reward is 0)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
GRPO_SETTINGS = ("stages.math.mode=half", "stages.math.grpo.refill_max_rounds=2",
                 "stages.math.length_curriculum=1:8:filter,1:32:zero")


def _run(run_root, *extra):
    cmd = [sys.executable, "-m", "nemo_cascade.cli", "run", str(ROOT / "recipes" / "tiny.py"),
           f"run_root={run_root}", "stages.sft.steps=60", "stages.math.steps=2",
           "stages.math.grpo.prompts_per_step=8", "stages.math.grpo.group_size=4", *GRPO_SETTINGS, *extra]
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
    assert [r["step"] for r in sft] == list(range(60)) and [r["step"] for r in math] == [0, 1]
    assert sft[-1]["loss"] < sft[0]["loss"], "SFT must reduce the loss"
    for key in ("reward_mean", "reward_std", "response_len_mean", "truncation_rate", "groups_dropped",
                "time/generate", "time/score", "tokens_per_s"):
        assert key in math[0], key
    trained = [r for r in math if "logprob_gap" in r]
    assert trained, "no GRPO update happened: every group had equal rewards"
    # Strict on-policy with a verified weight sync: vLLM sampled with the very weights the actor trains.
    assert all(r["logprob_gap"] < 1e-4 for r in trained)


def test_grpo_stage_settings_reach_the_loop(run):
    math = _metrics(run / "stages/1-math/metrics.jsonl")
    # length curriculum: phase 0 asks vLLM for at most 8 tokens and filters truncated samples, phase 1 for 32
    assert [(r["phase"], r["max_response_tokens"]) for r in math] == [(0, 8), (1, 32)]
    assert math[0]["response_len_mean"] <= 8 and math[0]["samples_overlong_filtered"] > 0
    assert math[1]["samples_overlong_filtered"] == 0  # the zero policy keeps truncated samples (reward 0)
    for r in math:
        # refill: each extra round samples as many prompts as informative groups are missing, at most 2 rounds
        assert r["groups_informative"] <= 8 and r["groups"] - r["groups_dropped"] == r["groups_informative"]
        if r["groups_informative"] < 8:  # a short batch: the whole refill budget was spent
            assert r["refill_rounds"] == 2 and r["groups"] > 8
        # half-half: the modes alternate over every prompt drawn, so the two counts differ by at most one
        assert abs(r["groups/think"] - r["groups/no_think"]) <= 1
        assert r["groups/think"] + r["groups/no_think"] == r["groups"]
        assert {"reward_mean/think", "reward_mean/no_think", "epoch"} <= set(r)


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
