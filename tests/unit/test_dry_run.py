"""`nemo-cascade run RECIPE --dry-run`: every problem a run would stop on, one line each, exit 2; a
recipe that would run says what it would train; nothing is started or written either way."""

import socket
from pathlib import Path

from nemo_cascade.tooling import cli, dry_run

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_recipe_that_would_run(tmp_path, capsys):
    assert cli.main(["run", TINY, f"run_root={tmp_path / 'runs'}", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "nemo-cascade: dry run of tiny: ready; 1 process(es) would train: "
        "sft, rm, rlhf, ifeval, math, code, swe"
    ]
    assert not (tmp_path / "runs").exists(), "nothing written: no run folder, no lock"


def test_every_problem_is_one_line_and_nothing_starts(tmp_path, capsys):
    port = _closed_port()
    code = cli.main(
        [
            "run",
            TINY,
            f"run_root={tmp_path / 'runs'}",
            "--dry-run",
            f"stages.math.data.source={tmp_path}/missing.jsonl",
            "stages.rlhf.reward.reward_model_stage=",
            f"stages.rlhf.reward.reward_model_url=http://127.0.0.1:{port}",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert (
        code == 2 and out[-1] == "nemo-cascade: dry run of tiny: 2 problem(s); nothing was started"
    )
    assert (
        out[0]
        == f"nemo-cascade: problem: stages.math.data.source: {tmp_path}/missing.jsonl: "
        "no such file; docs/recipes.md (Data) says where each file comes from"
    )
    assert out[1].startswith(
        f"nemo-cascade: problem: stages.rlhf.reward.reward_model_url: "
        f"http://127.0.0.1:{port}: no answer at /health"
    )
    assert not (tmp_path / "runs").exists()


def test_a_stage_over_the_gpu_s_memory_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(dry_run, "H100_GIB", 0.001)
    assert cli.main(["run", TINY, f"run_root={tmp_path}", "--dry-run"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith(
            "nemo-cascade: problem: stages.sft: planned memory on a 0.001 GiB H100 (no GPU "
            "here): "
        )
        and len(out) == 8
    )  # the seven stages, then the count


def test_a_bad_config_stops_the_other_checks(tmp_path, capsys):
    assert cli.main(["run", TINY, f"run_root={tmp_path}", "--dry-run", "parallel.tp=3"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert (
        len(out) == 2 and out[0].startswith("nemo-cascade: problem: ") and "1 problem(s)" in out[1]
    )
