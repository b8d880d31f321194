"""Checkpoint resume is bit-exact under DP=2 (distributed optimizer: Adam state sharded over DP
ranks), TP=2 and PP=2 (torchrun, gloo); a corrupt file on one rank makes every rank raise the same
CheckpointError; the offline release converter turns each layout's checkpoint into exactly the
actor's own HF export."""
import json
from pathlib import Path

import pytest
import torch

from tests.launch import torchrun

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("resume_worker.py")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS

    return BUILDERS["tiny-qwen3"](tmp_path_factory.mktemp("tiny-qwen3"), seed=0)


@pytest.mark.parametrize("tp,pp,model_files", [
    (1, 1, ["model_tp00_pp00.pt"]), (2, 1, ["model_tp00_pp00.pt", "model_tp01_pp00.pt"]),
    pytest.param(1, 2, ["model_tp00_pp00.pt", "model_tp00_pp01.pt"], marks=pytest.mark.slow)],
                         ids=["dp2", "tp2", "pp2"])
def test_resume_equals_uninterrupted(model_dir, tmp_path, tp, pp, model_files):
    proc = torchrun(WORKER, 2, model_dir, tmp_path, tp, pp, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["step"] == 3 and result["state"] == {"position": 3}
    assert sorted(result["files"]) == \
        sorted(model_files + ["meta.json", "train_rank00000.pt", "train_rank00001.pt"])
    for r in result["ranks"]:
        assert r["num_params"] > 0 and r["differ"] == [], \
            f"rank {r['rank']}: {r['differ']} differ after resume"
        assert r["lr"][0] == r["lr"][1]
    errors = {r["error"] for r in result["ranks"]}
    assert len(errors) == 1 and "train_rank00001.pt: sha256" in errors.pop(), result["ranks"]
    # Offline release conversion of the TP/PP-sharded checkpoint equals the actor's own gathered
    # export.
    from nemo_cascade.tooling import release
    from nemo_cascade.convert.hf_io import SafetensorsReader

    out = release.to_hf(release.resolve(tmp_path / "ckpt" / "step_000003", base=model_dir),
                        tmp_path / "release")
    mine, want = SafetensorsReader(out), SafetensorsReader(tmp_path / "hf_at_save")
    assert sorted(mine.names()) == sorted(want.names())
    assert [n for n in want.names() if not torch.equal(mine.get(n), want.get(n))] == []
