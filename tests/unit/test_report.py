"""The cascade report (tooling/report.py) on a synthetic run directory written with the project's
own writers (config.dumps, report.write_eval, metrics.MetricsLog): matrix numbers and deltas,
own-domain changes, gate regressions, stages without eval, the summary table, the PNG, and
`nemo-cascade report`'s one-line errors."""
from __future__ import annotations

import json
import struct

import pytest

from nemo_cascade import config
from nemo_cascade.tooling.cli import main
from nemo_cascade.tooling.report import ReportError, build_report, load_run, matrix_text, read_curve
from nemo_cascade.evaluate.stage_scores import deltas
from nemo_cascade.evaluate.eval_output import write_eval
from nemo_cascade.cascade.metrics import MetricsLog

DOMAIN = {"ifeval": "ifeval", "gsm8k": "math", "math500": "math", "humaneval": "code",
          "rlhf": "rlhf"}
# avg@K after each row; the reward-model stage and the unfinished code / swe stages have no
# eval.json.
SCORES = {
    "base": {"ifeval": .300, "gsm8k": .400, "math500": .200, "humaneval": .100, "rlhf": .250},
    "sft": {"ifeval": .350, "gsm8k": .450, "math500": .250, "humaneval": .150, "rlhf": .300},
    "rlhf": {"ifeval": .340, "gsm8k": .440, "math500": .260, "humaneval": .150, "rlhf": .400},
    # math500 not evaluated here
    "ifrl": {"ifeval": .420, "gsm8k": .430, "humaneval": .140, "rlhf": .350},
    "math": {"ifeval": .410, "gsm8k": .500, "math500": .300, "humaneval": .160, "rlhf": .360},
}
STAGES = [
    ("sft", "sft", "math", 25), ("rm", "reward_model", "rlhf", 6), ("rlhf", "grpo", "rlhf", 30),
    ("ifrl", "grpo", "ifeval", 20), ("math", "grpo", "math", 12), ("code", "grpo", "code", 40),
    ("swe", "grpo", "swe", 10)]
REGRESSION = "rlhf: 35.0 now vs 40.0 after rlhf (drop 5.0 > 2.0)"


def _suite(name: str, score: float, k: int = 4) -> dict:
    return {"suite": name, "domain": DOMAIN[name], "metric": "accuracy",
            "decoding": {"temperature": 0.6, "top_p": 0.95, "top_k": -1, "samples": k,
                         "max_tokens": 64, "mode": "think", "template": "cascade1", "seed": 0,
                         "max_model_len": 128},
            "data": {"path": "x", "sha256": "0", "items": 50, "limit": 50},
            "metrics": {f"avg@{k}": score, "stderr": 0.01, f"pass@{k}": score, "mean_reward": score,
                        "prompt_loose": score, "instruction_strict": score,
                        "instruction_loose": score, "truncated": 0.0, "mean_response_tokens": 40.0,
                        "too_long": 0},
            "records": [], "seconds": {"generate": 1.0, "score": 0.1, "total": 1.2}, "reward": {}}


def _log(stage_dir, name: str, rows: list[dict]) -> None:
    log = MetricsLog(stage_dir, name, total_steps=len(rows))
    for step, row in enumerate(rows):
        log.log(step, {**row, "time/step": 0.5, "phase": "p0"})
    log.close()


@pytest.fixture
def run_dir(tmp_path):
    cfg = config.Cascade(
        name="synthetic",
        stages=tuple(config.Stage(name=n, kind=k, domain=d, steps=s) for n, k, d, s in STAGES))
    run = tmp_path / "runs" / "synthetic"
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.dumps(cfg))
    status = {"sft": "done", "rm": "done", "rlhf": "done", "ifrl": "done", "math": "done",
              "code": "running"}
    stages = {n: {"status": status.get(n, "pending")} for n, *_ in STAGES}
    for i, n in enumerate(["sft", "rm", "rlhf", "ifrl", "math"]):
        stages[n]["seconds"] = 100.0 * (i + 1)
    stages["ifrl"]["gate"] = {"regressions": [REGRESSION], "action": "warn"}
    stages["math"]["gate"] = {"regressions": [], "action": "warn"}
    (run / "manifest.json").write_text(json.dumps({
        "name": "synthetic", "git_sha": "0123456789abcdef0123", "versions": {}, "seed": 1,
        "base_model": "m", "stages": stages}))
    meta = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}
    dirs = {n: run / "stages" / f"{k}-{n}" for k, (n, *_) in enumerate(STAGES)}
    for row, scores in SCORES.items():
        write_eval(run / "base" if row == "base" else dirs[row],
                   {s: _suite(s, v) for s, v in scores.items()}, meta)
    _log(dirs["sft"], "sft", [{"loss": 2.0 - 0.04 * i, "grad_norm": 1.0} for i in range(25)])
    _log(dirs["rm"], "rm", [{"loss": 0.7, "accuracy": a} for a in [0.5, 0.5, 0.6, 0.7, 0.8, 0.9]])
    _log(dirs["rlhf"], "rlhf", [{"reward_mean": 0.1 + 0.01 * i} for i in range(30)])
    _log(dirs["ifrl"], "ifrl", [{"reward_mean": 0.5} for _ in range(20)])
    _log(dirs["math"], "math", [{"reward_mean": 0.2 + 0.05 * i} for i in range(12)])
    _log(dirs["code"], "code", [{"reward_mean": 0.3} for _ in range(5)])
    with (dirs["code"] / "metrics.jsonl").open("a") as f:
        # a crash mid-write: the cut-off line is dropped
        f.write('{"stage": "code", "step": 5, "rew')
    return run


def test_rows_skip_stages_without_eval(run_dir):
    run = load_run(run_dir)
    assert [label for label, _ in run.history] == ["base", "sft", "rlhf", "ifrl", "math"]
    assert run.history[0][1]["gsm8k"] == (0.4, 0.01)
    assert run.row_domain == {
        "base": None, "sft": None, "rlhf": "rlhf", "ifrl": "ifeval", "math": "math"}


def test_deltas_bridge_a_suite_missing_from_a_row():
    history = [(n, {s: (v, 0.0) for s, v in row.items()}) for n, row in SCORES.items()]
    d = deltas(history)
    assert d[0] == {}
    assert d[2]["rlhf"] == pytest.approx(0.10)
    assert d[3] == pytest.approx({
        "ifeval": 0.08, "gsm8k": -0.01, "humaneval": -0.01, "rlhf": -0.05})
    # against the rlhf row: ifrl did not evaluate math500
    assert d[4]["math500"] == pytest.approx(0.04)


def test_matrix_text_numbers_deltas_and_own_domain(run_dir):
    lines = matrix_text(run_dir).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header == ["stage", "ifeval (ifeval)", "gsm8k (math)", "math500 (math)",
                      "humaneval (code)", "rlhf (rlhf)"]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.strip().strip("|").split("|")[1:]]
             for line in lines[2:7]}
    assert cells["base"] == ["30.0", "40.0", "20.0", "10.0", "25.0"]
    assert cells["sft"] == [
        "35.0 (+5.0)", "45.0 (+5.0)", "25.0 (+5.0)", "15.0 (+5.0)", "30.0 (+5.0)"]
    assert cells["rlhf"] == [
        "34.0 (-1.0)", "44.0 (-1.0)", "26.0 (+1.0)", "15.0 (+0.0)", "40.0 (+10.0)*"]
    assert cells["ifrl"] == ["42.0 (+8.0)*", "43.0 (-1.0)", "–", "14.0 (-1.0)", "35.0 (-5.0)"]
    assert cells["math"] == [
        "41.0 (-1.0)", "50.0 (+7.0)*", "30.0 (+4.0)*", "16.0 (+2.0)", "36.0 (+1.0)"]
    own = lines[lines.index("own-domain change:") + 1:]
    assert own == ["- `rlhf` (rlhf): rlhf +10.0", "- `ifrl` (ifeval): ifeval +8.0",
                   "- `math` (math): gsm8k +7.0, math500 +4.0 (mean +5.5)",
                   "- `code` (code): not evaluated yet", "- `swe` (swe): not evaluated yet"]


def test_a_mixed_domain_stage_owns_every_domain_it_trains(tmp_path):
    """One GRPO stage over IF + math prompts (extra_data with Data.domain): both domains' suites are
    its own."""
    mixed = config.Stage(name="mixed", domain="ifeval",
                         data=config.Data(source="synthetic:if_arithmetic"),
                         extra_data=(config.Data(source="synthetic:arithmetic", domain="math"),))
    run = tmp_path / "mixed"
    run.mkdir()
    (run / "config.json").write_text(config.dumps(config.Cascade(name="mixed", stages=(mixed,))))
    (run / "manifest.json").write_text(
        json.dumps({"name": "mixed", "stages": {"mixed": {"status": "done"}}}))
    meta = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}
    for row, (a, b, c) in {"base": (.3, .4, .1), "mixed": (.35, .42, .09)}.items():
        write_eval(run / ("base" if row == "base" else "stages/0-mixed"),
                   {"ifeval": _suite("ifeval", a), "gsm8k": _suite("gsm8k", b),
                    "humaneval": _suite("humaneval", c)}, meta)
    text = matrix_text(run)
    assert "- `mixed` (ifeval+math): ifeval +5.0, gsm8k +2.0 (mean +3.5)" in text
    row = next(line for line in text.splitlines() if line.startswith("| mixed"))
    assert ([c.strip() for c in row.strip("|").split("|")]
            == ["mixed", "35.0 (+5.0)*", "42.0 (+2.0)*", "9.0 (-1.0)"])


def test_grpo_steps_table_shows_signal_truncation_time_and_each_domains_reward(tmp_path):
    """A mixed-domain stage's rewards per domain, weighted by its prompts in each step
    (rewards.scoring's reward_mean/<domain>, prompts/<domain>); informative groups summed,
    truncation averaged over steps."""
    mixed = config.Stage(name="mixed", domain="ifeval", steps=4,
                         data=config.Data(source="synthetic:if_arithmetic"),
                         extra_data=(config.Data(source="synthetic:arithmetic", domain="math"),))
    run = tmp_path / "mixed"
    run.mkdir()
    (run / "config.json").write_text(config.dumps(config.Cascade(name="mixed", stages=(mixed,))))
    (run / "manifest.json").write_text(
        json.dumps({"name": "mixed", "stages": {"mixed": {"status": "done"}}}))
    steps = [  # (groups, informative, truncated, generate s, {domain: (reward, prompts)})
        (4, 1, 0.5, 0.4, {"ifeval": (0.2, 2), "math": (0.0, 2)}),
        (4, 2, 0.25, 0.3, {"ifeval": (0.5, 3), "math": (1.0, 1)}),
        (6, 0, 0.0, 0.4, {"ifeval": (0.4, 1)}),
        (4, 3, 0.25, 0.4, {"ifeval": (0.6, 2), "math": (0.5, 2)})]
    _log(run / "stages" / "0-mixed", "mixed", [
        {"reward_mean": 0.0, "groups": g, "groups_informative": i, "truncation_rate": t,
         "time/generate": gen, **{f"reward_mean/{d}": r for d, (r, _) in per.items()},
         **{f"prompts/{d}": n for d, (_, n) in per.items()}}
        for g, i, t, gen, per in steps])
    md = build_report(run)[0].read_text()
    row = next(line for line in md.split("## GRPO steps")[1].splitlines()
               if line.startswith("| mixed"))
    # first n = 2 steps: ifeval (0.2·2 + 0.5·3) / 5, math (0·2 + 1·1) / 3; last 2: ifeval (0.4 +
    # 0.6·2) / 3, math 0.5
    assert [c.strip() for c in row.strip("|").split("|")] == [
        "mixed", "6 / 18", "25", "0.5", "75",
        "ifeval 0.380 → 0.533 (8 prompts); math 0.333 → 0.500 (5 prompts)"]


def test_a_stage_with_informative_groups_below_a_third_is_flagged(tmp_path):
    """A stage where fewer than a third of the groups carried a signal says so in its row (most of
    its steps trained on little); exactly a third is not flagged (the test above)."""
    math = config.Stage(name="math", domain="math", steps=2,
                        data=config.Data(source="synthetic:arithmetic"))
    run = tmp_path / "weak"
    run.mkdir()
    (run / "config.json").write_text(config.dumps(config.Cascade(name="weak", stages=(math,))))
    (run / "manifest.json").write_text(
        json.dumps({"name": "weak", "stages": {"math": {"status": "done"}}}))
    _log(run / "stages" / "0-math", "math", [{"reward_mean": 0.1, "groups": 6,
                                              "groups_informative": i, "truncation_rate": 0.0,
                                              "time/generate": 0.2} for i in (1, 2)])
    row = next(line
               for line in build_report(run)[0].read_text().split("## GRPO steps")[1].splitlines()
               if line.startswith("| math"))
    assert row.split("|")[2].strip() == "3 / 12 (below a third: little signal)"


def test_report_markdown(run_dir):
    md_path, png_path = build_report(run_dir)
    assert (md_path, png_path) == (run_dir / "report.md", run_dir / "report.png")
    md = md_path.read_text()
    assert md.startswith("# Cascade report: synthetic\n") and "git `0123456789ab`" in md
    assert "| math  | 41.0 (-1.0)     | **50.0 (+7.0)** | **30.0 (+4.0)** |" in md
    regressions = md.split("## Gate regressions\n\n")[1].split("\n\n")[1]
    # a manifest before the rule
    assert regressions == f"- `ifrl` (warn, unpaired rule): {REGRESSION}"
    summary = {line.split("|")[2].strip(): [c.strip() for c in line.strip().strip("|").split("|")]
               for line in md.split("## Stages")[1].split("## GRPO steps")[0].splitlines()
               if line.startswith("| ") and "---" not in line}
    assert summary["sft"] == [
        "0", "sft", "sft", "–", "25/25", "done", "100", "loss", "1.820", "1.220", "10"]
    assert summary["rm"] == [
        "1", "rm", "reward_model", "–", "6/6", "done", "200", "accuracy", "0.533", "0.800", "3"]
    assert summary["rlhf"][3:] == [
        "rlhf", "30/30", "done", "300", "reward_mean", "0.145", "0.345", "10"]
    # 0.2 + 0.05·mean(0..5), 0.2 + 0.05·mean(6..11)
    assert summary["math"][8:] == ["0.325", "0.625", "6"]
    assert summary["code"][4:] == ["5/40", "running", "–", "reward_mean", "0.300", "0.300", "2"]
    assert summary["swe"][4:] == ["0/10", "pending", "–", "reward_mean", "–", "–", "0"]
    assert md.rstrip().endswith("![](report.png)")
    assert not list(run_dir.glob(".*.tmp"))


def test_report_png_is_a_real_png(run_dir):
    _, png = build_report(run_dir)
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    assert 1200 <= width <= 2400 and 450 <= height <= 1200, (width, height)
    assert png.stat().st_size > 20_000  # a blank canvas of that size compresses to a few KB


def test_cut_off_last_line_dropped_but_bad_middle_line_named(run_dir):
    code = load_run(run_dir).stages[5]
    assert read_curve(code) == ("reward_mean", [0, 1, 2, 3, 4], [0.3] * 5)
    path = code.dir / "metrics.jsonl"
    path.write_text('{"step": 0, "reward_mean": 0.1}\nnot json\n')
    with pytest.raises(ReportError, match=r"metrics\.jsonl:2: invalid JSON"):
        read_curve(code)


def test_run_without_any_eval_still_reports(run_dir):
    import shutil

    shutil.rmtree(run_dir / "base")
    for f in run_dir.glob("stages/*/eval.json"):
        f.unlink()
    assert matrix_text(run_dir).startswith("no evaluation yet")
    md, png = build_report(run_dir)
    assert "No evaluation yet" in md.read_text() and png.stat().st_size > 0


def _cli_error(capsys, run_dir) -> str:
    assert main(["report", str(run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("nemo-cascade: error: ")
    return err


def test_cli_prints_paths_and_matrix(capsys, run_dir):
    assert main(["report", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {run_dir / 'report.md'}" in out and str(run_dir / "report.png") in out
    assert "| math  | 41.0 (-1.0)" in out


def test_cli_user_errors_are_one_line(capsys, run_dir, tmp_path):
    capsys.readouterr()  # the fixture's progress bars
    assert _cli_error(capsys, tmp_path / "nope").endswith(
        f"{tmp_path / 'nope'}: no such run directory")
    (run_dir / "manifest.json").rename(run_dir / "manifest.bak")
    assert _cli_error(capsys, run_dir).endswith(
        f"{run_dir / 'manifest.json'}: no such file (expected the run's manifest)")
    (run_dir / "manifest.json").write_text("{\"name\": ")
    assert f"{run_dir / 'manifest.json'}: not valid JSON (" in _cli_error(capsys, run_dir)
    (run_dir / "manifest.bak").rename(run_dir / "manifest.json")
    (run_dir / "config.json").write_text("[1, 2]")
    assert _cli_error(capsys, run_dir).endswith(
        f"{run_dir / 'config.json'}: expected the run's resolved config (a JSON object), "
        "got a JSON array")
    (run_dir / "config.json").write_text(json.dumps({"stages": [{"name": "sft"}]}))
    (run_dir / "stages" / "0-sft" / "eval.json").write_text('{"suites": {"x": {"domain": "math"}}}')
    assert ("0-sft/eval.json: not an eval.json (missing key 'metrics')"
            in _cli_error(capsys, run_dir))
    (run_dir / "config.json").write_text(json.dumps({"stages": [{"kind": "sft"}]}))
    assert ("config.json / manifest.json: unexpected stages (missing key 'name')"
            in _cli_error(capsys, run_dir))


def test_importing_the_package_does_not_import_matplotlib():
    import subprocess
    import sys

    code = ("import sys, nemo_cascade.evaluate, nemo_cascade.tooling.cli; "
            "assert 'matplotlib' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _gated_run(root, name, stages, rows):
    """A run directory whose GRPO stages are gated with the given suite scores (avg@1)."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.dumps(config.Cascade(name=name, stages=stages)))
    (run / "manifest.json").write_text(
        json.dumps({"name": name, "stages": {s.name: {"status": "done"} for s in stages}}))
    meta = {"checkpoint": "ckpt", "git": {"sha": "abc", "dirty": False}, "versions": {}}
    for k, (label, scores) in enumerate(rows):
        folder = run / "base" if label == "base" else run / "stages" / f"{k - 1}-{label}"
        write_eval(folder, {s: _suite(s, v, k=1) for s, v in scores.items()}, meta)
    return run


def test_runs_compare_at_equal_rl_steps(tmp_path, capsys):
    """`report A B --out D`: rows of both runs at the RL steps done by then, finals side by side
    with the difference in points (cascade vs mixed)."""
    data = config.Data(source="synthetic:arithmetic")
    cascade = _gated_run(tmp_path, "cascade",
                         (config.Stage(name="if", domain="ifeval", steps=20, data=data),
                          config.Stage(name="math", steps=20, data=data)),
                         [("base", {"ifeval": .2, "gsm8k": .1}),
                          ("if", {"ifeval": .3, "gsm8k": .1}),
                          ("math", {"ifeval": .28, "gsm8k": .2})])
    mixed = _gated_run(tmp_path, "mixed",
                       (config.Stage(name="m1", domain="ifeval", steps=20, data=data),
                        config.Stage(name="m2", domain="ifeval", steps=20, data=data)),
                       [("base", {"ifeval": .2, "gsm8k": .1}),
                        ("m1", {"ifeval": .25, "gsm8k": .12}),
                        ("m2", {"ifeval": .27, "gsm8k": .15})])
    out = tmp_path / "cmp"
    assert main(["report", str(cascade), str(mixed), "--out", str(out)]) == 0
    md = (out / "comparison.md").read_text()
    ifeval = md.split("## ifeval (ifeval)")[1].split("##")[0]
    assert ("| 20 | 30.0 ± 1.0 (if) | 25.0 ± 1.0 (m1) |" in ifeval
            and "| 0 | 20.0 ± 1.0 (base) |" in ifeval)
    final = md.split("## Final rows")[1]
    assert "| gsm8k | 20.0 ± 1.0 | 15.0 ± 1.0 | -5.0 ± 1.4 |" in final
    assert "cascade (math, 40 steps)" in final
    assert (out / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "wrote" in capsys.readouterr().out
    assert main(["report", str(cascade), str(mixed)]) == 2  # several runs need --out
    assert "give --out" in capsys.readouterr().err


def test_a_distill_stage_shows_its_teachers_and_its_reverse_kl(run_dir):
    """The synthetic run with its code stage turned into a distill stage: its headline metric is the
    reverse KL, every group carries a signal, and the manifest's teachers are listed."""
    cfg = json.loads((run_dir / "config.json").read_text())
    code = next(s for s in cfg["stages"] if s["name"] == "code")
    code["kind"] = "distill"
    (run_dir / "config.json").write_text(json.dumps(cfg))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    teacher = {"source": "best", "folder": "x/hf", "row": "4-math"}
    manifest["stages"]["code"]["teachers"] = {"code": teacher,
                                              "rlhf": {"source": "rlhf", "folder": "y"}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    _log(run_dir / "stages" / "5-code", "code", [{"reverse_kl": 0.4 - 0.1 * i, "groups": 4.0,
                                                  "groups_informative": 1.0} for i in range(4)])
    md = build_report(run_dir)[0].read_text()
    listed = md.split("## Distill stages")[1]
    assert "- `code`: code ← `best` (row `4-math`), rlhf ← `rlhf`\n" in listed
    row = next(line for line in md.split("## Stages")[1].splitlines() if line.startswith("| 5 "))
    assert "distill" in row and "reverse_kl" in row
    assert "16 / 16 (teachers)" in md.split("## GRPO steps")[1]
