"""The start-of-run probe of served models (preflight.check_endpoints): a placeholder or unreachable
URL, or a URL file that never appears, fails in one line naming the stage's field — before the base
evaluation, not after."""
import time
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.cascade import preflight
from nemo_cascade.tooling.cli import load_recipe
from nemo_cascade.cascade.preflight import check_endpoints, served_endpoints, stages_to_run
from tests.unit.test_served_endpoints import HealthyServer, closed_port_url

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny():
    return load_recipe(str(ROOT / "recipes" / "tiny.py"))


def _rlhf_at(cfg, url: str, judge: str = ""):
    """The tiny cascade with its rlhf stage scored by the RM at ``url`` and its swe stage by the
    judge at ``judge``."""
    def change(s):
        if s.name == "rlhf":
            return replace(s, reward=replace(s.reward, reward_model_stage="", reward_model_url=url))
        if s.name == "swe":
            return replace(s, reward=replace(s.reward, judge_url=judge))
        return s
    return replace(cfg, stages=tuple(change(s) for s in cfg.stages))


def test_which_stages_and_fields_are_probed(tiny):
    cfg = _rlhf_at(tiny, "http://rm:1", judge="file:/runs/served/servers/judge.url")
    by_name = {s.name: served_endpoints(s) for s in cfg.stages}
    assert by_name["rlhf"] == [("reward_model_url", "http://rm:1")]
    assert by_name["swe"] == [("judge_url", "file:/runs/served/servers/judge.url")]
    assert by_name["math"] == [] and by_name["sft"] == []
    assert served_endpoints(config.stage_by_name(tiny, "rlhf")) == [], (
        "the cascade's own RM is served by the run itself")
    names = [s.name for s in stages_to_run(cfg, {"sft": "done", "rm": "done", "rlhf": "done"})]
    assert names == ["ifeval", "math", "code", "swe"], "a done stage needs no server"
    assert ([s.name for s in stages_to_run(cfg, {"rlhf": "done"}, "rlhf")]
            == ["rlhf"]), "--retrain needs it again"


def test_a_closed_port_fails_in_one_line_naming_the_field(tiny):
    url = closed_port_url()
    t0 = time.monotonic()
    with pytest.raises(config.ConfigError) as err:
        check_endpoints(list(_rlhf_at(tiny, url).stages), wait=0.3, poll=0.1)
    message = str(err.value)
    assert time.monotonic() - t0 < 5.0 and "\n" not in message
    assert message.startswith(f"stages.rlhf.reward.reward_model_url: {url}: no answer at /health")
    assert "after 0.3 s" in message and "reward model" in message


def test_a_placeholder_url_fails(tiny):
    with pytest.raises(config.ConfigError,
                       match=r"stages.rlhf.reward.reward_model_url: server URL 'RM_URL'"):
        check_endpoints(list(_rlhf_at(tiny, "RM_URL").stages), wait=0.1)


def test_a_url_file_that_never_appears_is_named(tiny, tmp_path):
    spec = f"file:{tmp_path / 'servers' / 'judge.url'}"
    with HealthyServer("rm") as rm:
        with pytest.raises(config.ConfigError) as err:
            check_endpoints(list(_rlhf_at(tiny, rm.url, judge=spec).stages), wait=1.0,
                            file_wait=0.2, poll=0.05)
    assert str(err.value).startswith(
        f"stages.swe.reward.judge_url: {spec}: no such file after waiting 0.2 s")


def test_healthy_servers_pass_and_are_probed_once(tiny, tmp_path):
    url_file = tmp_path / "judge.url"
    with HealthyServer("rm") as rm, HealthyServer("judge") as judge:
        url_file.write_text(judge.url + "\n")
        cfg = _rlhf_at(tiny, rm.url, judge=f"file:{url_file}")
        cfg = replace(
            cfg, stages=cfg.stages + (replace(config.stage_by_name(cfg, "rlhf"), name="rlhf2"),))
        assert (check_endpoints(list(cfg.stages), wait=1.0)
                == {rm.url: rm.url, f"file:{url_file}": judge.url})


def test_the_cascade_probes_before_anything_runs(tiny, tmp_path, monkeypatch):
    """run_cascade: the probe follows the config checks and precedes the run folder, the actor and
    the base eval."""
    from nemo_cascade.cascade import driver

    monkeypatch.setattr(preflight, "SERVER_WAIT_S", 0.2)
    monkeypatch.setattr(driver, "CascadeRun", lambda *a, **k: pytest.fail("the run started"))
    cfg = replace(_rlhf_at(tiny, closed_port_url()), run_root=str(tmp_path))
    with pytest.raises(config.ConfigError,
                       match="stages.rlhf.reward.reward_model_url: .*no answer at /health"):
        driver.run_cascade(cfg)
    assert not (tmp_path / cfg.name).exists()


def test_every_rank_joins_the_process_group_before_the_run_folder_is_written(
        tiny, tmp_path, monkeypatch):
    """Before ``init_distributed`` every rank takes itself for rank 0: two ranks that built the base
    model into one folder replaced it under each other's tokenizer read (a two-node job failed that
    way). So run_cascade joins the group first, and only then writes config.json and prepares the
    base model."""
    from nemo_cascade.cascade import driver
    from nemo_cascade.actor import process_groups

    order = []
    cfg = replace(tiny, run_root=str(tmp_path))
    monkeypatch.setattr(process_groups, "init_distributed", lambda minutes=None: order.append(
        ("joined", (tmp_path / cfg.name / "config.json").exists())))

    def prepare(cfg, out):
        order.append(("base model", (out / "config.json").exists()))
        raise KeyboardInterrupt  # the actor and the engine are not this test's business

    monkeypatch.setattr(driver, "prepare_base_model", prepare)
    with pytest.raises(KeyboardInterrupt):
        driver.run_cascade(cfg)
    assert order == [("joined", False), ("base model", True)]
