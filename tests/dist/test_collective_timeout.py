"""Process groups under torchrun (2 gloo processes): ``parallel.collective_timeout_minutes`` reaches
the default group and the object-exchange group, and ``ranks``' exchanges run over the object group
on both branches (the gloo default group reused on CPU; a gloo group of its own where the default is
NCCL). The decisions for a GPU machine, recorded without one: tests/unit/test_collectives.py."""
import json
from pathlib import Path

import pytest

from tests.launch import torchrun

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("timeout_worker.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeout") / "result.json"
    proc = torchrun(WORKER, 2, out, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads(out.read_text())


def test_default_group_has_the_configured_timeout(ranks):
    assert [r["default_timeout"] for r in ranks] == [7 * 60.0] * 2
    assert all(r["cpu_object_group"] is None
               for r in ranks), "on CPU the gloo default group carries objects"


def test_megatrons_groups_have_the_configured_timeout(ranks):
    """Not Megatron's default of 30 minutes: its groups wait as long as the default group."""
    assert [r["megatron_timeouts"] for r in ranks
            ] == [{"tp": 420.0, "dp": 420.0, "dp_gloo": 420.0}] * 2


def test_exchanges_over_the_default_gloo_group(ranks):
    for r in ranks:
        assert r["shares"] == [0, 1, 1] and r["most"] == 11 and r["from_main"] == "url-of-0"


def test_own_object_group_is_gloo_with_the_same_timeout(ranks):
    for r in ranks:
        assert r["own_group"] and r["own_backend"] == "gloo" and r["own_timeout"] == 7 * 60.0
        assert r["own_shares"] == ["r0", "r1"]
