"""The tiny cascade (recipes/tiny.py: SFT → RM → RLHF → IF → math → code → SWE) end to end through
the CLI, at a few steps per stage: every stage kind runs, the RLHF stage is scored by the RM the
cascade trained and served, the forgetting gate evaluates every row and fills the RM-scored column
of the row before the RM, the report and the lineage manifest are written, and a re-run skips
finished stages.

The math stage also runs the per-stage GRPO settings: half-half thinking modes (§4.3.2), dynamic
sampling with refill (§4.4.2) and a two-phase response-length curriculum, 8 tokens with overlong
filtering then 40 (§4.5.2). The IF stage mixes in arithmetic prompts scored as math
(``Stage.extra_data`` with ``Data.domain``): the mixed-domain run that recipes/smollm2_mixed.py
compares the cascade with. (That stages improve their own domain needs the full step counts: `make
run`, numbers in docs/cascade.md.)"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.tolerance import Net, assert_within
from tests.launch import job_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STAGES = ("sft", "rm", "rlhf", "ifeval", "math", "code", "swe")
SUITES = ("tiny-math", "tiny-ifeval", "tiny-code", "tiny-swe", "tiny-rlhf")
REDUCED = ("stages.sft.steps=60", "stages.rm.steps=4", "stages.rlhf.steps=1",
           "stages.ifeval.steps=1", "stages.math.steps=2", "stages.code.steps=1",
           "stages.swe.steps=1", "stages.*.grpo.prompts_per_step=4", "stages.*.grpo.group_size=4",
           "stages.math.grpo.prompts_per_step=8", "stages.ifeval.grpo.prompts_per_step=8",
           "gate.limit=6", "gate.samples=2", "stages.math.mode=half",
           "stages.math.grpo.refill_max_rounds=2",
           "stages.math.length_curriculum=1:8:filter,1:40:zero")


def recipe():
    """recipes/tiny.py with 32 IF prompts and 32 arithmetic ones mixed in its IF stage."""
    import runpy
    from dataclasses import replace

    from nemo_cascade.config import Data

    cfg = runpy.run_path(str(ROOT / "recipes" / "tiny.py"))["recipe"]()
    mixed = Data(source="synthetic:arithmetic", split="train", size=32, seed=9, domain="math")
    return replace(cfg, stages=tuple(replace(s, data=replace(s.data, size=32), extra_data=(mixed,))
                                     if s.name == "ifeval" else s for s in cfg.stages))


def _run(run_root, *extra):
    cmd = [sys.executable, "-m", "nemo_cascade.tooling.cli", "run", f"{__file__}:recipe",
           f"run_root={run_root}", *REDUCED, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, cwd=ROOT)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    proc = _run(root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    (root / "tiny" / "stdout.txt").write_text(proc.stdout)
    (root / "tiny" / "stderr.txt").write_text(proc.stderr)
    return root / "tiny"


def _metrics(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_every_stage_ran_in_order_from_its_parent(run):
    m = json.loads((run / "manifest.json").read_text())
    assert list(m["stages"]) == list(STAGES)
    assert all(m["stages"][s]["status"] == "done" for s in STAGES)
    hf = {s: m["stages"][s]["hf"] for s in STAGES}
    assert m["stages"]["sft"]["parent"] == m["base_model"]
    assert m["stages"]["rm"]["parent"] == hf["sft"] and m["stages"]["rlhf"]["parent"] == hf["sft"]
    for before, after in zip(("rlhf", "ifeval", "math", "code"), ("ifeval", "math", "code", "swe")):
        assert m["stages"][after]["parent"] == hf[before], (
            f"{after} must start from {before}'s export")
    assert m["versions"]["megatron-core"] and m["seed"] == 1234 and len(m["config_sha256"]) == 64
    assert all(len(m["stages"][s]["config_sha256"]) == 64 and m["stages"][s]["data_sha256"]
               for s in STAGES)
    assert len(m["stages"]["sft"]["data_sha256"]) == 5, "SFT blends five synthetic sets"
    for k, s in enumerate(STAGES):
        assert not (run / "stages" / f"{k}-{s}" / "checkpoint").exists()


def test_rlhf_is_scored_by_the_served_reward_model(run):
    rlhf = _metrics(run / "stages/2-rlhf/metrics.jsonl")
    assert rlhf and all(isinstance(r["reward_mean"], float) for r in rlhf)
    assert any(r["reward_std"] > 0 for r in rlhf), (
        "RM scores are real numbers that differ between samples")
    assert (run / "stages/1-rm/server.log").is_file()
    config = json.loads((run / "stages/1-rm/hf/config.json").read_text())
    assert config["architectures"] == ["Qwen3ForSequenceClassification"]


def test_gate_rows_and_report(run):
    def suites(row):
        return set(json.loads((run / row / "eval.json").read_text())["suites"])
    assert suites("base") == set(SUITES) - {"tiny-rlhf"}, "no RM exists before stage 1"
    assert suites("stages/0-sft") == set(SUITES), (
        "the sft row gets its RM column once the RM is trained")
    for k, s in enumerate(STAGES[2:], 2):
        assert suites(f"stages/{k}-{s}") == set(SUITES)
    assert not (run / "stages/1-rm/eval.json").exists(), "an RM stage does not change the policy"
    m = json.loads((run / "manifest.json").read_text())
    assert all(m["stages"][s]["gate"]["action"] == "warn" for s in STAGES if s != "rm")
    report = (run / "report.md").read_text()
    for s in ("base", *STAGES):
        assert s in report
    png = (run / "report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    stdout = (run / "stdout.txt").read_text()
    assert "tiny-math" in stdout and "swe" in stdout, "the forgetting matrix is printed at the end"


def test_grpo_stage_settings_reach_the_loop(run):
    math = _metrics(run / "stages/4-math/metrics.jsonl")
    # length curriculum: phase 0 asks vLLM for at most 8 tokens and filters truncated samples, phase
    # 1 for 40
    assert [(r["phase"], r["max_response_tokens"]) for r in math] == [(0, 8), (1, 40)]
    assert math[0]["response_len_mean"] <= 8 and math[0]["samples_overlong_filtered"] > 0
    # the zero policy keeps truncated samples (reward 0)
    assert math[1]["samples_overlong_filtered"] == 0
    for r in math:
        # refill: each extra round samples as many prompts as informative groups are missing, at
        # most 2 rounds
        assert (r["groups_informative"] <= 8
                and r["groups"] - r["groups_dropped"] == r["groups_informative"])
        if r["groups_informative"] < 8:  # a short batch: the whole refill budget was spent
            assert r["refill_rounds"] == 2 and r["groups"] > 8
        # half-half: the modes alternate over every prompt drawn, so the two counts differ by at
        # most one
        assert abs(r["groups/think"] - r["groups/no_think"]) <= 1
        assert r["groups/think"] + r["groups/no_think"] == r["groups"]
        assert {"reward_mean/think", "reward_mean/no_think", "epoch"} <= set(r)
    # RLHF's RM scores differ between samples, so its groups always train (60 SFT steps leave the
    # verifiable domains at reward 0 more often than not: whether they update at this scale is luck)
    trained = [r for s in ("rlhf", "ifeval", "math", "code", "swe")
               for r in _metrics(run / f"stages/{STAGES.index(s)}-{s}/metrics.jsonl")
               if "logprob_gap" in r]
    assert any(r["stage"] == "rlhf" for r in trained), "the RLHF stage made no GRPO update"
    # Strict on-policy with a verified weight sync: vLLM sampled with the very weights the actor
    # trains; their log-probs differ by the order of fp32 sums only (rows of at most 96 + 40 tokens,
    # tests/tolerance.py).
    net = Net.of(run / "base_model", 96 + 40)
    assert_within(max(r["logprob_gap"] for r in trained), torch.float32, net.forward_terms(),
                  what="actor vs engine log-prob gap")


def test_mixed_domain_stage_scores_each_domain_by_its_own_verifier(run):
    ifeval = _metrics(run / "stages/3-ifeval/metrics.jsonl")
    assert all(r["prompts/ifeval"] + r["prompts/math"] == r["groups"] for r in ifeval)
    # math verdicts (answer_found) and IF verdicts (if_pass/…) in one batch
    assert all({"reward_mean/ifeval", "reward_mean/math", "answer_found"} <= set(r) for r in ifeval)
    assert all(any(k.startswith("if_pass/") for k in r) for r in ifeval)
    m = json.loads((run / "manifest.json").read_text())
    assert len(m["stages"]["ifeval"]["data_sha256"]) == 2
    assert "- `ifeval` (ifeval+math):" in (run / "report.md").read_text()


def test_sft_is_packed(run):
    sft = _metrics(run / "stages/0-sft/metrics.jsonl")
    assert [r["step"] for r in sft] == list(range(60)) and sft[-1]["loss"] < sft[0]["loss"]
    assert all(r["packed_rows"] < 32 and r["packing_fill"] > 0.5 for r in sft)


def test_exports_load_in_transformers(run):
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(run / "stages/6-swe/hf",
                                                              dtype=torch.float32)
    base = transformers.AutoModelForCausalLM.from_pretrained(run / "base_model",
                                                             dtype=torch.float32)
    tok = transformers.AutoTokenizer.from_pretrained(run / "stages/6-swe/hf")
    assert (tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
            .endswith("hi /no_think<|im_end|>\n"))
    changed = [n for n, p in model.state_dict().items() if not torch.equal(p, base.state_dict()[n])]
    assert changed, "the exported weights must be the trained ones, not the base model's"


# Third-party chatter a person should not have to read between the progress bars
# (runtime/console.py): Megatron's gradient-bucket listing and config reprs, TE / Apex fallback
# warnings, vLLM's start-up log.
CHATTER = ("Params for bucket", "Setting up optimizer with config",
           "DistributedDataParallelConfig(", "Apex are not installed", "Apex is not installed",
           "Initializing a V1 LLM engine")


def test_console_shows_stage_events_and_the_log_holds_the_chatter(run):
    console = (run / "stdout.txt").read_text() + (run / "stderr.txt").read_text()
    for text in CHATTER:
        assert text not in console, f"{text!r} on the console"
    events = [line for line in console.replace("\r", "\n").splitlines()
              if " stage " in line or " base: " in line]
    for s in STAGES:
        for event in ("started", "done in", "gated"):
            assert sum(f"stage {s}: {event}" in x for x in events) == 1, (
                f"stage {s}: {event}\n" + "\n".join(events))
    assert sum("base: evaluated" in x for x in events) == 1
    log = (run / "logs" / "rank0.log").read_text()
    for text in CHATTER:
        assert text in log, f"{text!r} missing from {run / 'logs' / 'rank0.log'}"
    assert "stage sft: started" in log, "the log has the events too"


def test_rerun_skips_finished_stages(run):
    proc = _run(run.parent, "--verbose")  # --verbose: the chatter comes back to the console
    assert proc.returncode == 0, proc.stderr[-4000:]
    for s in STAGES:
        assert f"stage {s}: skipped (done)" in proc.stderr
    assert len(_metrics(run / "stages/4-math/metrics.jsonl")) == 2
    assert "Params for bucket" in proc.stderr and "Apex is not installed" in proc.stderr


def test_release_from_the_run(run, tmp_path):
    """`convert to-hf RUN`: the last policy stage's weights, the paper's decoding defaults, the
    trained chat template and a model card whose evaluation table is the run's forgetting matrix."""
    from huggingface_hub import ModelCard

    from nemo_cascade.tooling import release

    out = tmp_path / "release"
    env = job_env()
    proc = subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", "convert", "to-hf",
                           str(run), str(out), "--verify", "--license", "apache-2.0",
                           "--dataset", "openai/gsm8k"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    front = ModelCard.load(out / "README.md").data
    assert ((front.license, front.datasets, front.pipeline_tag)
            == ("apache-2.0", ["openai/gsm8k"], "text-generation"))
    check = subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", "convert",
                            "check", str(out)],
                           capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert check.returncode == 0 and "ready to upload" in check.stdout, (
        check.stdout + check.stderr[-2000:])
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["tensors_equal"] and report["max_logit_diff"] == 0.0
    card = (out / "README.md").read_text()
    assert "Forgetting matrix" in card and "stages/6-swe/hf" in card and "(Nemotron-Cascade" in card
    matrix = [line for line in (run / "report.md").read_text().splitlines()
              if line.startswith("| ")]
    assert matrix and all(line in card for line in matrix), (
        "the card's table is the run's report, not retyped")
    assert (json.loads((out / "generation_config.json").read_text())["temperature"]
            == release.GENERATION_DEFAULTS["temperature"])
    assert ((out / "chat_template.jinja").read_text()
            == (run / "stages/6-swe/hf/chat_template.jinja").read_text())
