"""A ``reward_model`` stage inside a cascade, through the CLI: SFT → RM → SFT on synthetic
arithmetic.

Checks that the RM learns (held-out pair accuracy well above chance, scored by transformers on the
exported folder), logs loss / accuracy / margin per step, and is not handed on as a policy: the
stage after it starts from the SFT stage's checkpoint (paper §4.2–4.3: the RM scores the policy, it
does not become it).
"""
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.launch import job_env

pytestmark = pytest.mark.dist
ROOT = Path(__file__).resolve().parents[2]
RM_STEPS = 40


def recipe():
    from nemo_cascade.config import Actor, Cascade, Data, Model, Parallel, Stage

    sft = Stage(name="sft", kind="sft",
                data=Data(source="synthetic:arithmetic", split="train", seed=1), steps=10,
                sft_batch_size=32, sft_max_tokens=96, actor=Actor(lr=2e-3))
    rm = Stage(name="rm", kind="reward_model",
               data=Data(source="synthetic:arithmetic", split="train", seed=2), steps=RM_STEPS,
               rm_batch_size=32, rm_max_tokens=96, actor=Actor(lr=2e-3, warmup_steps=5))
    after = replace(sft, name="sft2", steps=1, data=replace(sft.data, seed=3))
    return Cascade(name="rm", model=Model(build="tiny-qwen3"),
                   parallel=Parallel(micro_batch_size=32), stages=(sft, rm, after))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return root / "rm"


def _metrics(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_reward_model_learns_held_out_preferences(run):
    import torch
    import transformers

    from nemo_cascade.algorithms.reward_model import pair_accuracy
    from nemo_cascade.data.chat import render
    from nemo_cascade.tooling.demo_data.arithmetic import arithmetic, arithmetic_pairs

    rows = _metrics(run / "stages/1-rm/metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(RM_STEPS))
    assert all(r["pairs"] == 32 and 0.0 <= r["accuracy"] <= 1.0 for r in rows)
    first, last = rows[:5], rows[-5:]
    mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
    assert (mean(last, "loss") < mean(first, "loss")
            and mean(last, "margin_mean") > mean(first, "margin_mean"))

    folder = run / "stages/1-rm/hf"
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, dtype=torch.float32).eval()
    # problems never trained on
    held_out = arithmetic_pairs(arithmetic("test", 0, seed=0), "no_think", seed=0)

    def score(p, response):
        text = render([*p["prompt"], {"role": "assistant", "content": response}], "no_think",
                      add_generation_prompt=False)
        with torch.no_grad():
            return (model(input_ids=torch.tensor([tok.encode(text, add_special_tokens=False)]))
                    .logits[0, 0].item())

    chosen = [score(p, p["chosen"]) for p in held_out]
    rejected = [score(p, p["rejected"]) for p in held_out]
    acc = pair_accuracy(chosen, rejected)
    by_kind = {k: pair_accuracy(*zip(*[(c, r) for c, r, p in zip(chosen, rejected, held_out)
                                       if p["kind"] == k]))
               for k in {p["kind"] for p in held_out}}
    print(f"\n[rm stage] held-out pair accuracy {acc:.3f} over {len(held_out)} pairs; "
          f"by kind {by_kind}; train accuracy last 5 steps {mean(last, 'accuracy'):.3f}")
    # Measured: 0.61 overall (235 pairs; chance is 0.50 ± 0.03). In 40 steps the ~1M-parameter RM
    # learns the format preference (an answer outside \boxed{} loses: 1.00) while the two kinds that
    # need arithmetic or comparing two numbers stay near chance — learnable, but not in a test-sized
    # run.
    assert acc >= 0.58 and by_kind["unboxed"] >= 0.9, (acc, by_kind)


def test_reward_model_is_not_handed_on_as_the_policy(run):
    m = json.loads((run / "manifest.json").read_text())
    sft, rm, after = m["stages"]["sft"], m["stages"]["rm"], m["stages"]["sft2"]
    assert sft["status"] == rm["status"] == after["status"] == "done"
    assert rm["parent"] == sft["hf"] and rm["kind"] == "reward_model"
    assert after["parent"] == sft["hf"], \
        "the stage after an RM continues from the last policy stage"
    config = json.loads((run / "stages/1-rm/hf/config.json").read_text())
    assert (config["architectures"] == ["Qwen3ForSequenceClassification"]
            and config["pad_token_id"] == 0)
    assert json.loads((run / "stages/2-sft2/hf/config.json").read_text())["architectures"] == \
        ["Qwen3ForCausalLM"]


def test_a_rerun_skips_the_finished_rm_and_still_hands_on_the_policy(run):
    """The resume path: with every stage done, re-running only sft2 is refused in one line; with
    --retrain it starts from sft's weights again (the RM before it is skipped, not handed on)."""
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={run.parent}", "--stage", "sft2"]
    env = job_env()
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].startswith(
        "nemo-cascade: error: --stage sft2: already done ("), refused.stderr[-2000:]
    proc = subprocess.run([*cmd, "--retrain"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    m = json.loads((run / "manifest.json").read_text())
    assert (m["stages"]["sft2"]["status"] == "done"
            and m["stages"]["sft2"]["parent"] == m["stages"]["sft"]["hf"])
    assert [json.loads(x)["step"]
            for x in (run / "stages/2-sft2/metrics.jsonl").read_text().splitlines()] == [0]
