"""Every evaluation suite end to end on a tiny model: the project's vLLM engine generates, the
training rewards score (code in the bubblewrap sandbox, RLHF through a real ``vllm serve`` reward
model), and the outputs are written — once through the Python API (the forgetting gate's entry
point) and once through ``nemo-cascade eval --suite all``. 3 items per suite, 16 tokens per sample.

One policy engine (in this process) and one reward-model server per module, started together.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
pytest.importorskip("vllm")

from nemo_cascade import types  # noqa: E402
from nemo_cascade.config import Reward  # noqa: E402
from nemo_cascade.evaluate import SUITES, EvalSettings, evaluate, prepare  # noqa: E402
from nemo_cascade.evaluate.eval_output import write_eval  # noqa: E402
from nemo_cascade.evaluate.runner import _add_pairwise, _record  # noqa: E402
from nemo_cascade.tooling.standalone import (  # noqa: E402
    build_engine, engine_context, load_tokenizer)
from nemo_cascade.evaluate.suites import SWE_BENCH_LITE_FIXTURE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
POSITIONS = 4096
"""The tiny model's context: the SWE prompts (files rebuilt from golden hunks) are ~2.3K
tiny-tokenizer tokens."""
MAX_TOKENS = 16


def _settings(url: str, **kw) -> EvalSettings:
    return EvalSettings(limit=3, samples=2, max_tokens=MAX_TOKENS,
                        data={"swe": str(SWE_BENCH_LITE_FIXTURE)}, reward_model_url=url, **kw)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3
    from tests.integration._remote_helpers import build_tiny_reward_model

    policy = build_tiny_qwen3(tmp_path_factory.mktemp("policy"))
    cfg = json.loads((policy / "config.json").read_text())
    cfg["max_position_embeddings"] = POSITIONS  # RoPE: positions are computed, not learned
    (policy / "config.json").write_text(json.dumps(cfg))
    return policy, build_tiny_reward_model(tmp_path_factory.mktemp("rm"))


@pytest.fixture(scope="module")
def stack(models, tmp_path_factory):
    from nemo_cascade.rewards.serve import VLLMServer
    from tests.integration._remote_helpers import session_token

    policy, rm_dir = models
    server = VLLMServer(rm_dir, runner="pooling", max_model_len=1024, single_engine_process=True,
                        log_path=tmp_path_factory.mktemp("logs") / "rm.log", token=session_token())
    engine = None
    try:
        server.launch()  # loads while the policy engine starts
        tok = load_tokenizer(policy)
        prepared = [prepare(name, _settings("http://pending"), tok) for name in SUITES]
        engine = build_engine(policy, engine_context(prepared, POSITIONS), kv_cache_gib=0.25)
        server.wait_ready()
        yield engine, tok, server.url, policy
    finally:
        if engine is not None:
            engine.shutdown()
        server.stop()


def test_every_suite_runs_three_items_through_engine_and_rewards(stack, tmp_path):
    engine, tok, url, _ = stack
    results = evaluate(engine, tok, list(SUITES), _settings(url))
    assert list(results) == list(SUITES)
    for name, r in results.items():
        assert r.metrics["too_long"] == 0, name  # every prompt fits: all 3 items were generated
        assert len(r.records) == 3
        assert ((r.decoding["temperature"], r.decoding["top_p"], r.decoding["samples"])
                == (0.6, 0.95, 2))
        for rec in r.records:
            assert len(rec["responses"]) == 2 and all(isinstance(t, str) for t in rec["responses"])
            assert all(0 < n <= MAX_TOKENS for n in rec["response_tokens"])
            assert set(rec["finish_reasons"]) <= {"stop", "length"}
            assert all(v in (0.0, 0.5, 1.0) for v in rec["values"]) and len(rec["correct"]) == 2
            assert all(isinstance(s, float) and math.isfinite(s)
                       for s in rec["scores"]), (name, rec["scores"])
        assert 0.0 <= r.score <= 1.0 and {"avg@2", "pass@2", "pass@1", "stderr"} <= set(r.metrics)
    assert ({"prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose"}
            <= set(results["ifeval"].metrics))
    assert {"win_rate", "bt_win_prob", "mean_reference_score"} <= set(results["rlhf"].metrics)
    assert all(math.isfinite(rec["reference_score"]) for rec in results["rlhf"].records)
    assert results["humaneval"].reward["sandbox"] == "bwrap"
    path = write_eval(tmp_path, {n: r.to_json() for n, r in results.items()},
                      {"checkpoint": "tiny"})
    assert len(json.loads(path.read_text())["suites"]) == len(SUITES)


def test_downloaded_benchmarks_run_through_the_engine_and_record_their_version(stack, tmp_path):
    """lcb-v5, gpqa-diamond and mmlu-pro on the hub-layout fixtures ``data prepare-eval`` converts
    (tests/data/benchmarks): generated by the engine, scored (LiveCodeBench in the sandbox), and the
    benchmark's release or subset recorded in eval.json."""
    from nemo_cascade.evaluate import get_suite
    from nemo_cascade.tooling.prepare.benchmarks import prepare_benchmarks
    from tests.unit.test_paper_benchmarks import FILES, HUB

    engine, tok, url, _ = stack
    prepare_benchmarks("all", tmp_path / "benchmarks", source_dir=HUB)
    names = ["lcb-v5", "gpqa-diamond", "mmlu-pro"]
    data = {name: str(tmp_path / "benchmarks" / FILES[name]) for name in names}
    settings = EvalSettings(limit=3, samples=2, max_tokens=MAX_TOKENS, data=data,
                            reward_model_url=url)
    results = evaluate(engine, tok, names, settings)
    path = write_eval(tmp_path, {n: r.to_json() for n, r in results.items()},
                      {"checkpoint": "tiny"})
    written = json.loads(path.read_text())["suites"]
    for name in names:
        r = results[name]
        assert r.metrics["too_long"] == 0 and r.records, name
        assert all(len(rec["responses"]) == 2 for rec in r.records), name
        assert written[name]["data"]["version"] == get_suite(name).data_version, name
    assert {"answered"} <= set(results["gpqa-diamond"].metrics)
    assert results["lcb-v5"].reward["sandbox"] == "bwrap"


def test_same_seed_gives_the_same_samples(stack):
    engine, tok, url, _ = stack
    first, again = (evaluate(engine, tok, ["gsm8k"], _settings(url))["gsm8k"] for _ in range(2))
    other = evaluate(engine, tok, ["gsm8k"], _settings(url, seed=1))["gsm8k"]
    responses = lambda r: [rec["responses"] for rec in r.records]  # noqa: E731
    assert responses(first) == responses(again)
    assert responses(first) != responses(other)


@pytest.mark.parametrize("chunk_items, stopped", [
    # between chunks: once the first chunk's group is on disk
    (1, "suite gsm8k, after 1 of its 3 items here"),
    # inside the only chunk, at the engine's first look
    (3, "suite gsm8k, in the chunk at item 0"),
])
def test_a_suite_stopped_midway_resumes_there_and_equals_an_uninterrupted_one(
        stack, tmp_path, monkeypatch, chunk_items, stopped):
    """A gate row longer than a job (evaluate/row_progress.py): each item's group is kept as it
    finishes, a stop ends the suite between chunks or inside one, and the next try generates only
    the items with no group, at their places' seeds — the same records as an uninterrupted suite."""
    from nemo_cascade.evaluate.row_progress import RowProgress
    from nemo_cascade.evaluate.runner import GateStopped, run_suite

    engine, tok, url, policy = stack
    settings = _settings(url, chunk_items=chunk_items)
    prep = prepare("gsm8k", settings, tok)
    straight = run_suite(engine, prep, settings)
    looks = []

    # chunk_items=3: the second look is the engine's first, 8 steps into the chunk
    def stop() -> bool:
        looks.append(1)
        return (any((tmp_path / "eval_partial/gsm8k").rglob("*.jsonl")) if chunk_items == 1
                else len(looks) == 2)

    with pytest.raises(GateStopped, match=stopped):
        run_suite(engine, prep, settings, RowProgress(tmp_path, policy, 0), stop)
    generated, generate = [], engine.generate
    monkeypatch.setattr(
        engine, "generate",
        lambda prompts, *a, **kw: generated.append(len(prompts)) or generate(prompts, *a, **kw))
    resumed = run_suite(engine, prep, settings, RowProgress(tmp_path, policy, 0), lambda: False)
    if chunk_items == 1:
        assert generated == [0, 1, 1], "the saved chunk is read, not generated"
    assert resumed.records == straight.records and resumed.metrics == straight.metrics


def test_reference_answer_ties_with_itself_under_the_served_reward_model(stack):
    engine, tok, url, _ = stack
    settings = _settings(url)
    prep = prepare("rlhf", settings, tok)
    from nemo_cascade.rewards import Scorer

    groups = [types.PromptGroup(p, [[0]], [[0.0]], ["stop"], response_text_G=[item.reference])
              for p, item in zip(prep.prompts, prep.items)]
    Scorer("rlhf", Reward(reward_model_url=url)).score(groups)
    records = [_record(prep, i, g) for i, g in enumerate(groups)]
    _add_pairwise(prep, list(range(3)), records, settings)
    assert [rec["values"] for rec in records] == [[0.5]] * 3
    assert [rec["bt_win_prob"] for rec in records] == [[pytest.approx(0.5, abs=1e-4)]] * 3


def test_cli_runs_every_suite_and_writes_the_reports(stack, tmp_path):
    _, _, url, policy = stack
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_cascade.tooling.cli", "eval", str(policy), "--suite", "all",
         "--limit", "3", "--samples", "1", "--max-tokens", "8",
         "--data", f"swe={SWE_BENCH_LITE_FIXTURE}", "--reward-model-url", url,
         "--out", str(out), "--kv-cache-gib", "0.25"],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "eval.json").read_text())
    assert list(doc["suites"]) == list(SUITES)
    assert (doc["git"] and {"torch", "transformers"} <= set(doc["versions"])
            and doc["settings"]["limit"] == 3)
    assert all(len(r["records"]) == 3 and r["decoding"]["samples"] == 1
               for r in doc["suites"].values())
    table = (out / "eval.md").read_text()
    assert all(f"| {name} |" in table for name in SUITES) and "| gsm8k |" in proc.stdout
    assert (out / "eval.svg").read_text().startswith("<svg")
