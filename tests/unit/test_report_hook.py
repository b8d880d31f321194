"""The tooling's parts of a run sit behind hooks: the core calls the report hook it is given with
the run folder (rank 0 only), calls nothing without one, and `nemo-cascade run` hands it the
tooling's build_report and the memory plan's sizing of the reward-model server."""
import pytest

from nemo_cascade.cascade import driver
from nemo_cascade import config
from nemo_cascade.runtime import ranks
from nemo_cascade.runtime.stop_request import EXIT_CODE, StopRequested
from nemo_cascade.tooling import cli, plan
from nemo_cascade.tooling.report import build_report


def _run(tmp_path, report):
    """A CascadeRun with only what ``_report`` reads: no actor, engine or tokenizer is built."""
    run = object.__new__(driver.CascadeRun)
    run.out, run.report = tmp_path / "run", report
    return run


def test_the_hook_gets_the_run_folder_on_rank_0_only(tmp_path, monkeypatch):
    called = []
    run = _run(tmp_path, called.append)
    monkeypatch.setattr(ranks, "is_main", lambda: True)
    run._report()
    assert called == [tmp_path / "run"]
    monkeypatch.setattr(ranks, "is_main", lambda: False)
    run._report()
    assert called == [tmp_path / "run"]


def test_without_a_hook_no_report_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(ranks, "is_main", lambda: True)
    _run(tmp_path, None)._report()
    assert not (tmp_path / "run").exists()


def test_run_cascade_hands_the_hooks_to_the_run(tmp_path, monkeypatch):
    class Started(Exception):
        pass

    def fake_run(cfg, base, data_hashes, report=None, size_rm_server=None):
        raise Started(report, size_rm_server)

    monkeypatch.setattr(driver, "check_cascade", lambda cfg: {})
    monkeypatch.setattr(driver, "check_endpoints", lambda stages: {})
    monkeypatch.setattr(driver, "prepare_base_model", lambda cfg, out: "base-model")
    monkeypatch.setattr(driver, "CascadeRun", fake_run)
    monkeypatch.setattr(ranks, "is_main", lambda: True)
    cfg = config.Cascade(name="hook", run_root=str(tmp_path),
                         stages=(config.Stage(name="sft", kind="sft"), ))
    hook = lambda out: None  # noqa: E731
    size = lambda cfg, gpu_gib: None  # noqa: E731
    with pytest.raises(Started) as started:
        driver.run_cascade(cfg, report=hook, size_rm_server=size)
    assert started.value.args == (hook, size)


def test_the_run_command_passes_the_tooling_hooks(monkeypatch):
    seen = {}

    def fake_run_cascade(cfg, only_stage=None, retrain=False, report=None, size_rm_server=None):
        seen["report"], seen["size_rm_server"] = report, size_rm_server
        raise StopRequested("stopped on request")  # ends _run_job before it reads a run folder

    monkeypatch.setattr(driver, "run_cascade", fake_run_cascade)
    monkeypatch.setenv("RANK", "1")
    assert cli._run_job(config.Cascade(name="hook"), None, False) == EXIT_CODE
    assert seen["report"] is build_report and seen["size_rm_server"] is plan.size_rm_server
