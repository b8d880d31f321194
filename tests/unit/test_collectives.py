"""The collective timeout (``Parallel.collective_timeout_minutes``) and the gloo group for host-side
object exchanges: which process groups ``init_distributed`` creates, with which backend and timeout,
on a GPU machine (NCCL default group + a gloo object group) and on CPU (the gloo default group
serves both) — decided without a GPU by recording the calls. The real groups under torchrun:
tests/dist/test_collective_timeout.py."""
from dataclasses import replace
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade import config
from nemo_cascade.runtime import ranks


@pytest.fixture
def calls(monkeypatch):
    """torch.distributed as seen by init_distributed, recording instead of creating process
    groups."""
    from nemo_cascade.actor import process_groups

    made: list = []
    state = {"backend": None}

    def init_process_group(backend, timeout=None):
        made.append(("init", backend, timeout))
        state["backend"] = backend

    monkeypatch.setattr(dist, "is_initialized", lambda: state["backend"] is not None)
    monkeypatch.setattr(dist, "init_process_group", init_process_group)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: state["backend"])
    monkeypatch.setattr(dist, "new_group", lambda ranks=None, timeout=None, backend=None:
                        made.append(("new_group", backend, timeout)) or "gloo-group")
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    for k, v in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT="1").items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(ranks, "_group", [])
    monkeypatch.setattr(ranks, "_timeout", ranks._timeout)
    return process_groups, made


def test_the_default_fits_the_papers_rollouts():
    assert config.Parallel().collective_timeout_minutes == 120.0
    assert ranks.collective_timeout() >= timedelta(minutes=120), (
        "NCCL's 10 minutes is what aborted long rollouts")


def test_gpu_nccl_default_group_and_a_gloo_object_group_with_the_same_timeout(calls, monkeypatch):
    groups, made = calls
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    groups.init_distributed(90)
    t = timedelta(minutes=90)
    assert made == [("init", "nccl", t), ("new_group", "gloo", t)]
    assert ranks.object_group() == "gloo-group" and ranks.collective_timeout() == t
    groups.init_distributed(5)  # already initialized: nothing new
    assert len(made) == 2


def test_cpu_reuses_the_gloo_default_group(calls, monkeypatch):
    groups, made = calls
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    groups.init_distributed()  # no setting given: the config's default
    t = timedelta(minutes=config.Parallel.collective_timeout_minutes)
    assert made == [("init", "gloo", t)]
    assert ranks.object_group() is None, "None = the default group, which is gloo here"


def test_a_default_group_made_elsewhere_gets_its_object_group_at_the_first_exchange(
        calls, monkeypatch):
    _, made = calls
    dist.init_process_group("nccl")  # the recording stand-in: e.g. a script that made its own group
    assert ranks.object_group() == "gloo-group"
    assert made[-1] == ("new_group", "gloo", ranks.collective_timeout())
    assert ranks.object_group() == "gloo-group" and len(made) == 2, "created once"


@pytest.mark.parametrize("backend,own", [("gloo", False), ("nccl", True),
                                         ("cpu:gloo,cuda:nccl", True)])
def test_needs_own_object_group(backend, own):
    assert ranks.needs_own_object_group(backend) is own


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), 7 * 24 * 60 + 1])
def test_bad_timeouts_are_one_line_config_errors(value):
    from nemo_cascade.config.checks import validate_parallel_settings

    with pytest.raises(config.ConfigError, match=r"^parallel\.collective_timeout_minutes: "
                                                 r"expected minutes in \(0, 10080\], got "):
        validate_parallel_settings(config.Model(),
                                   replace(config.Parallel(), collective_timeout_minutes=value))


def test_timeout_is_a_setting_of_the_config_tree():
    cfg = apply_overrides(_tiny(), ["parallel.collective_timeout_minutes=240"])
    assert cfg.parallel.collective_timeout_minutes == 240
    config.validate(cfg)


def _tiny():
    from nemo_cascade.tooling.cli import load_recipe
    from tests.unit.test_config import TINY

    return load_recipe(TINY)


def test_the_timeout_does_not_change_the_config_hash():
    """A run aborted by a collective timeout must resume with a longer one (the manifest compares
    hashes)."""
    from nemo_cascade.cascade.lineage import config_hash

    cfg = _tiny()
    longer = apply_overrides(cfg, ["parallel.collective_timeout_minutes=600"])
    assert config_hash(longer) == config_hash(cfg)
