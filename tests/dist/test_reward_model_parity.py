"""The reward-model actor (Bradley–Terry, scalar head on the last token, paper §4.2) over TP=1, TP=2
and PP=2: the same losses and scores in every layout, and an exported *ForSequenceClassification
folder whose transformers scores equal the actor's (fp32; bounds from tests/tolerance.py)."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.launch import torchrun
from tests.tolerance import Net, assert_close, assert_training_close

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("rm_worker.py")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The tiny recipe's causal LM (tied embeddings, 4 layers, 2 KV groups) with its tokenizer: the
    RM starts from a policy checkpoint, whose LM head it drops."""
    from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("base"))


def run_layout(base, out, nproc, tp, pp):
    proc = torchrun(WORKER, nproc, base, out, tp, pp, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return json.loads((out / "result.json").read_text())


@pytest.fixture(scope="module")
def reference(base, tmp_path_factory):
    out = tmp_path_factory.mktemp("tp1")
    return out, run_layout(base, out, 1, 1, 1)


def hf_scores(folder, rows, pad_id):
    """transformers' raw scores: each row alone, and all rows in one right-padded batch (which reads
    the score at the last non-pad token, so it checks the exported pad_token_id too)."""
    import torch
    import transformers

    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        folder, dtype=torch.float32).eval()
    assert type(model).__name__ == "Qwen3ForSequenceClassification" and model.config.num_labels == 1
    assert model.config.pad_token_id == pad_id
    width = max(map(len, rows))
    padded = torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])
    with torch.no_grad():
        alone = [model(input_ids=torch.tensor([r])).logits[0, 0].item() for r in rows]
        batched = model(input_ids=padded).logits[:, 0].tolist()
    return alone, batched


# rm_worker.py: 5 pairs of at most 18 tokens, 3 steps; eval rows of at most 24
TOKENS, STEPS = 10 * 18, 3


def check_export(out, result):
    """transformers reads the exported weights bit for bit: only the forward's order of additions
    differs."""
    alone, batched = hf_scores(out / "rm", result["eval_rows"], pad_id=0)
    terms = Net.of(out / "rm", 24).forward_terms()
    assert_close(alone, result["final_scores"], torch.float32, terms,
                 what="transformers' scores, row alone")
    assert_close(batched, result["final_scores"], torch.float32, terms,
                 what="transformers' scores, batched")
    assert np.ptp(result["final_scores"]) > 1.0, (
        "scores must differ between inputs for the check to mean much")


def test_tp1_trains_and_exports_a_model_transformers_scores_identically(reference):
    out, ref = reference
    assert ref["pairs"] == [5, 5, 5] and ref["truncated"] == 1
    assert (ref["loss"][-1] < ref["loss"][0] and ref["accuracy"][-1] == 1.0
            and ref["margin"][-1] > ref["margin"][0])
    # The head starts small (N(0, 0.02²)), not at zero: initial scores differ but are O(0.1).
    assert 0 < np.abs(ref["initial_scores"]).max() < 1.0
    check_export(out, ref)
    from nemo_cascade.convert.hf_io import SafetensorsReader

    names = SafetensorsReader(out / "rm").names()
    assert "score.weight" in names and not any(n.startswith("lm_head") for n in names)
    assert SafetensorsReader(out / "rm").get("score.weight").shape == (1, 128)
    assert (out / "rm" / "tokenizer.json").is_file()


@pytest.mark.parametrize("tp,pp", [(2, 1), (1, 2)], ids=["tp2", "pp2"])
def test_layout_matches_tp1(base, reference, tmp_path, tp, pp):
    _, ref = reference
    got = run_layout(base, tmp_path, 2, tp, pp)
    net = Net.of(base, 24)
    assert_close(got["initial_scores"], ref["initial_scores"], torch.float32, net.forward_terms(),
                 what="initial scores")  # the same seeded head
    assert_training_close(got, ref, net, TOKENS, "RM")
    assert_close(got["final_scores"], ref["final_scores"], torch.float32,
                 net.terms_after(STEPS, TOKENS), what="final scores")
    assert got["pairs"] == ref["pairs"] and got["accuracy"] == ref["accuracy"]
    check_export(tmp_path, got)
