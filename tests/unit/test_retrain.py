"""`nemo-cascade run RECIPE --stage NAME` on a run whose manifest says NAME is done
(stage_selection.check_selection, stage_selection.discard_for_retrain, lineage.reset_stages, cli):
refused in one line unless --retrain, which discards the stage and every later one — and only once,
so that a requeued job repeating the flag resumes the retraining."""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade.tooling import cli
from nemo_cascade import config
from nemo_cascade.cascade.driver import check_selection, discard_for_retrain, stage_dir
from nemo_cascade.checkpoint import META
from nemo_cascade.cascade.lineage import Manifest

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")
STAGES = ("sft", "rm", "rlhf", "ifeval", "math", "code", "swe")


@pytest.fixture
def cfg(tmp_path):
    return replace(cli.load_recipe(TINY), run_root=str(tmp_path / "runs"))


def _run(cfg, stopped="", **status):
    """A run directory: the manifest with these statuses, and each stage that started a file in its
    folder."""
    manifest = Manifest(cfg, Path(cfg.run_root) / cfg.name / "manifest.json", "base", {})
    for name, st in status.items():
        manifest.update(name, status=st, parent=f"parent-of-{name}")
        sdir = stage_dir(cfg, STAGES.index(name))
        sdir.mkdir(parents=True)
        (sdir / "metrics.jsonl").write_text('{"step": 0}\n')
    manifest.stop(stopped)
    return manifest.path


def _refusal(cfg, stage, retrain=False) -> str:
    with pytest.raises(config.ConfigError) as e:
        check_selection(cfg, stage, retrain)
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_done_stage_is_refused_unless_retrained(cfg):
    manifest = _run(cfg, sft="done", rm="done", rlhf="done", ifeval="running")
    msg = _refusal(cfg, "rlhf")
    assert msg == (f"--stage rlhf: already done ({stage_dir(cfg, 2) / 'hf'}, {manifest}); "
                   "add --retrain to discard its outputs and the later stage(s) ifeval, whose "
                   "lineage starts from it, and train it again")
    assert "later" not in _refusal(replace(cfg, stages=cfg.stages[:3]), "rlhf"), \
        "the last stage: nothing after it"
    check_selection(cfg, "rlhf", retrain=True)
    check_selection(cfg, "ifeval")  # interrupted: it resumes
    check_selection(cfg, None)      # the whole cascade: done stages are skipped
    assert _refusal(cfg, "math") == (
        f"--stage math: earlier stage(s) ifeval not done in {manifest}; run without --stage to "
        "train every stage not yet done")
    assert _refusal(cfg, None, retrain=True) == \
        "--retrain: name the stage to train again with --stage NAME"
    assert _refusal(cfg, "nope").startswith("--stage: no stage 'nope'")


def test_a_fresh_run_starts_only_at_its_first_stage(cfg):
    check_selection(cfg, "sft")
    check_selection(cfg, "sft", retrain=True)  # nothing done: nothing to discard, nothing refused
    assert "earlier stage(s) sft not done" in _refusal(cfg, "rm")


def test_retraining_a_carrying_stage_needs_the_state_it_carries(cfg):
    carry = replace(cfg, stages=tuple(replace(s, boundary=replace(s.boundary, optimizer="carry"))
                                      if s.name == "ifeval" else s for s in cfg.stages))
    _run(carry, sft="done", rm="done", rlhf="done", ifeval="done")
    assert _refusal(carry, "ifeval", retrain=True) == (
        "--stage ifeval --retrain: it starts from stage rlhf's optimizer state "
        "(boundary.optimizer=carry), which was removed when ifeval finished; retrain rlhf first "
        "(--stage rlhf --retrain) or set stages.ifeval.boundary.optimizer=reset")
    # rlhf kept it (ifeval was interrupted, say)
    kept = stage_dir(carry, 2) / "checkpoint" / "step_000009"
    kept.mkdir(parents=True)
    (kept / META).write_text("{}")
    check_selection(carry, "ifeval", retrain=True)


def test_retrain_discards_the_stage_and_every_later_one_once(cfg):
    manifest = _run(cfg, stopped="after stage math: tiny-code fell", sft="done", rm="done",
                    rlhf="done", ifeval="done", math="done")
    before = json.loads(manifest.read_text())
    assert discard_for_retrain(cfg, "rlhf") == ["rlhf", "ifeval", "math", "code", "swe"]
    assert [p.name for p in sorted((Path(cfg.run_root) / cfg.name / "stages").iterdir())] == \
        ["0-sft", "1-rm"]
    after = json.loads(manifest.read_text())
    assert (after["stages"]["sft"] == before["stages"]["sft"]
            and after["stages"]["rm"] == before["stages"]["rm"])
    assert all(after["stages"][s] == {"status": "pending"}
               for s in ("rlhf", "ifeval", "math", "code", "swe"))
    assert after["stopped"] == "", "the gate's stop came after a discarded stage"
    assert (after["config_sha256"] == before["config_sha256"]
            and after["git_sha"] == before["git_sha"])
    # The job that retrains rlhf is requeued with the same --retrain: rlhf is running now, and
    # continues.
    Manifest(cfg, manifest, "base", {}).update("rlhf", status="running")
    stage_dir(cfg, 2).mkdir(parents=True)
    assert discard_for_retrain(cfg, "rlhf") == [] and stage_dir(cfg, 2).is_dir()
    check_selection(cfg, "rlhf", retrain=True)


def test_cli_refuses_in_one_line_and_hands_retrain_to_the_job(cfg, tmp_path, capsys, monkeypatch):
    _run(cfg, sft="done", rm="done")
    started = []
    monkeypatch.setattr(cli, "run_torchrun", lambda argv, **_: started.append(argv) or 0)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    args = ["run", TINY, f"run_root={cfg.run_root}", "--stage", "rm"]
    assert cli.main(args) == 2 and not started
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nemo-cascade: error: --stage rm: already done (")
    assert cli.main(["run", TINY, f"run_root={cfg.run_root}", "--retrain"]) == 2 and not started
    assert cli.main([*args, "--retrain"]) == 0
    assert started[0][-3:] == ["--stage", "rm", "--retrain"], \
        "the torchrun job does the discarding (rank 0)"
    assert stage_dir(cfg, 1).is_dir(), "the launching process discards nothing"
