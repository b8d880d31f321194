"""The vLLM rollout engine on CPU against transformers as the reference: sampling shapes, finish
reasons, logprob semantics (processed = after temperature / top-k), prompt scoring, in-place weight
pushes with the prefix cache reset, the one-line errors, and 2-rank per-rank generation under
torchrun.

One engine per module (start ≈ 5–30 s on CPU); tests that change its weights restore them.
This file is also the torchrun worker of the 2-rank test (``__main__`` at the bottom).
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

from nemo_cascade import config, types  # noqa: E402

TOL = 1e-4
ROLLOUT = config.Rollout(temperature=0.7, top_p=1.0, top_k=-1, max_prompt_tokens=256,
                         max_response_tokens=8, kv_cache_gib=0.25, seed=3)


_ASCII_IDS: list[int] = []
"""Ids of the tokens that decode to printable ASCII on their own: prompts made of them end on a
character boundary, as real (templated) prompts do. vLLM's detokeniser would otherwise carry a
prompt's dangling UTF-8 bytes into the response text."""


def _load_ascii_ids(model_dir) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    special = set(tok.all_special_ids)
    _ASCII_IDS[:] = [i for i in range(len(tok)) if i not in special
                     and (lambda s: s.isascii() and s.isprintable() and s.strip())(tok.decode([i]))]


@pytest.fixture(scope="module", autouse=True)
def _ascii_ids(tiny_qwen3_dir):
    _load_ascii_ids(tiny_qwen3_dir)


def _prompt(n_tokens: int, offset: int = 0, uid: str = "") -> types.Prompt:
    ids = [_ASCII_IDS[(offset + 7 * i) % len(_ASCII_IDS)] for i in range(n_tokens)]
    return types.Prompt(prompt_tokens=ids, domain="math", label="", uid=uid)


def _hf_logprobs(model, prompt: list[int], response: list[int], temperature: float = 1.0,
                 top_k: int = -1):
    """log p(response[t] | prompt, response[:t]) from transformers, after temperature and top-k
    masking."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = (model(ids).logits[0, len(prompt) - 1: len(prompt) - 1 + len(response)].double()
                  / temperature)
    if top_k > 0:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    lp = logits.log_softmax(-1)
    return lp.gather(-1, torch.tensor(response)[:, None]).squeeze(-1).tolist()


def _max_err(a, b) -> float:
    assert len(a) == len(b)
    return max((abs(x - y) for x, y in zip(a, b)), default=0.0)


@pytest.fixture(scope="module")
def hf_model(tiny_qwen3_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(tiny_qwen3_dir), dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def tokenizer(tiny_qwen3_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_qwen3_dir))


@pytest.fixture(scope="module")
def engine(tiny_qwen3_dir):
    from nemo_cascade.rollout.vllm import RolloutEngine

    eng = RolloutEngine(str(tiny_qwen3_dir), ROLLOUT)
    print(f"\nengine start: {eng.start_seconds:.1f} s")
    yield eng
    eng.shutdown()


# --------------------------------------------------------------------------------------- generation

def test_generate_shapes_and_length_finish(engine, tokenizer):
    prompts = [_prompt(5, 0, "a"), _prompt(40, 1, "b"), _prompt(77, 2, "c")]
    groups = engine.generate(prompts, n=4)
    assert len(groups) == 3
    for p, g in zip(prompts, groups):
        assert g.prompt is p and g.group_size == 4 and g.prompt_tokens == p.prompt_tokens
        assert len(g.rollout_logprobs_G_T) == len(g.finish_reason_G) == len(g.response_text_G) == 4
        for toks, lps, reason, text in zip(g.response_tokens_G_T, g.rollout_logprobs_G_T,
                                           g.finish_reason_G, g.response_text_G):
            assert len(toks) == len(lps) >= 1 and all(lp <= 0.0 for lp in lps)
            assert all(isinstance(t, int) for t in toks) and all(isinstance(x, float) for x in lps)
            if reason == "length":
                assert len(toks) == ROLLOUT.max_response_tokens
                # vLLM's incremental detokeniser drops an incomplete UTF-8 sequence at the very end
                assert (text.rstrip("\ufffd")
                        == tokenizer.decode(toks, skip_special_tokens=True).rstrip("\ufffd"))
            else:  # the random model sampled EOS
                assert reason == "stop" and toks[-1] == tokenizer.eos_token_id
    assert groups[0].response_tokens_G_T != groups[1].response_tokens_G_T


def test_log_prob_token_strings_are_not_decoded_but_the_text_still_is(engine, tokenizer):
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.v1.engine.logprobs import LogprobsProcessor

    from nemo_cascade.rollout import engine_start

    # a second engine in the process: the wrapper is not wrapped again
    engine_start.skip_logprob_token_strings()
    wrapper = LogprobsProcessor.__dict__["from_new_request"].__func__
    assert wrapper.__closure__[0].cell_contents.__name__ == "from_new_request", \
        "the wrapper wrapped itself"
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=0, logprobs=0, ignore_eos=True)
    (out,) = engine.llm.generate([TokensPrompt(prompt_token_ids=_prompt(12).prompt_tokens)],
                                 params, use_tqdm=False)
    sample = out.outputs[0]
    assert [next(iter(pos.values())).decoded_token for pos in sample.logprobs] == [None] * 8
    assert sample.text and sample.text.rstrip("\ufffd") == tokenizer.decode(
        sample.token_ids, skip_special_tokens=True).rstrip("\ufffd")


def test_same_step_reproduces_and_steps_differ(engine):
    prompts = [_prompt(20, 5), _prompt(20, 5)]  # identical prompts still get different seeds
    a = engine.generate(prompts, n=3, step=11)
    b = engine.generate(prompts, n=3, step=11)
    c = engine.generate(prompts, n=3, step=12)
    assert [g.response_tokens_G_T for g in a] == [g.response_tokens_G_T for g in b]
    assert [g.rollout_logprobs_G_T for g in a] == [g.rollout_logprobs_G_T for g in b]
    assert a[0].response_tokens_G_T != a[1].response_tokens_G_T
    assert [g.response_tokens_G_T for g in a] != [g.response_tokens_G_T for g in c]


def test_a_subset_at_its_places_samples_the_bits_the_whole_batch_did(engine):
    """A resumed GRPO step generates only the prompts with no saved group
    (runtime/step_rollouts.py), at their places in the batch: tokens AND log-probs must be the whole
    batch's, at lengths where split-KV attention (off on CPU, rollout/vllm.py) would have summed a
    sequence differently in a smaller batch."""
    r = dataclasses.replace(ROLLOUT, temperature=1.0, max_response_tokens=96)
    prompts = [_prompt(12 + k, k, str(k)) for k in range(16)]
    whole = engine.generate(prompts, n=8, sampling=r, step=5)
    todo = list(range(1, 16, 3))
    part = engine.generate([prompts[i] for i in todo], n=8, sampling=r, step=5, positions=todo)
    assert max(len(t) for g in part for t in g.response_tokens_G_T) > 64, (
        "long enough for several KV blocks")
    for i, group in zip(todo, part):
        assert group.response_tokens_G_T == whole[i].response_tokens_G_T
        assert group.rollout_logprobs_G_T == whole[i].rollout_logprobs_G_T, \
            f"prompt {i}: log-probs differ"
    with pytest.raises(ValueError, match="2 positions for 1 prompts"):
        engine.generate(prompts[:1], n=1, positions=[0, 1])


def test_generation_stops_between_engine_steps_when_asked(engine):
    from nemo_cascade.runtime.stop_request import GenerationStopped

    r = dataclasses.replace(ROLLOUT, max_response_tokens=64)
    prompts = [_prompt(10, k, str(k)) for k in range(4)]
    handed, asked = [], []
    with pytest.raises(GenerationStopped):
        engine.generate(prompts, n=2, sampling=r, step=1, on_group=lambda i, g: handed.append(i),
                        should_stop=lambda: asked.append(1) or len(asked) == 2)
    assert len(asked) == 2 and len(handed) < 4
    assert not engine.llm.llm_engine.has_unfinished_requests(), (
        "the dropped requests left the engine")
    assert len(engine.generate(prompts, n=2, sampling=r, step=1)) == 4, "the engine serves on"


def test_on_group_hands_over_each_group_as_it_finishes(engine):
    """Scoring while generating (§4.6.2) needs each group the moment its samples are done: the
    callback gets every prompt's group once, the very objects returned, the same samples as without
    it — and groups that end early (here: stopping at a common character) arrive while others still
    generate."""
    r = dataclasses.replace(ROLLOUT, max_response_tokens=24, stop=tuple("aeiou"))
    prompts = [_prompt(12, k, str(k)) for k in range(8)]
    handed, unfinished = {}, []

    def on_group(i, group):
        handed[i] = group
        unfinished.append(engine.llm.llm_engine.has_unfinished_requests())

    groups = engine.generate(prompts, n=2, sampling=r, step=4, on_group=on_group)
    assert sorted(handed) == list(range(8)) and all(handed[i] is g for i, g in enumerate(groups))
    plain = engine.generate(prompts, n=2, sampling=r, step=4)
    assert [g.response_tokens_G_T for g in groups] == [g.response_tokens_G_T for g in plain]
    assert any(unfinished), (
        "no group ended before the others: the test needs a stop that splits them")


def test_stop_string_gives_stop(engine):
    """Sample once, pick a character of sample 0's text, resample the same step with it as a stop
    string: the same seed reproduces the sample up to the stop string."""
    r = dataclasses.replace(ROLLOUT, max_response_tokens=24)
    prompt = _prompt(30, 9)
    (free,) = engine.generate([prompt], n=2, sampling=r, step=7)
    text = free.response_text_G[0]
    cut = next(i for i, ch in enumerate(text)
               if i >= 2 and ch.isprintable() and ch != "\ufffd" and not ch.isspace())
    stop = text[cut]
    (stopped,) = engine.generate([prompt], n=2, sampling=dataclasses.replace(r, stop=(stop,)),
                                 step=7)
    assert stopped.finish_reason_G[0] == "stop"
    assert stop not in stopped.response_text_G[0]
    assert text.startswith(stopped.response_text_G[0])
    toks = stopped.response_tokens_G_T[0]
    # the token completing the stop string is kept
    assert toks == free.response_tokens_G_T[0][: len(toks)]


def test_rollout_logprobs_are_processed_logprobs(engine, hf_model):
    """Sampled-token logprobs = log_softmax(logits / T) (and top-k masked) at the sampled tokens."""
    prompts = [_prompt(12, 3), _prompt(50, 4)]
    for r in (ROLLOUT, dataclasses.replace(ROLLOUT, temperature=1.3, top_k=5)):
        for g in engine.generate(prompts, n=3, sampling=r):
            for toks, lps in zip(g.response_tokens_G_T, g.rollout_logprobs_G_T):
                ref = _hf_logprobs(hf_model, g.prompt_tokens, toks, r.temperature, r.top_k)
                assert _max_err(lps, ref) <= TOL
    # ...and not the raw (T = 1) ones: the mode was chosen on purpose.
    g = engine.generate([prompts[0]], n=1)[0]
    raw = _hf_logprobs(hf_model, g.prompt_tokens, g.response_tokens_G_T[0], 1.0)
    assert _max_err(g.rollout_logprobs_G_T[0], raw) > 1e-2


def test_score_logprobs_matches_transformers(engine, hf_model):
    for prompt, cont in ((_prompt(1, 0), _prompt(9, 1)), (_prompt(70, 2), _prompt(33, 8))):
        got = engine.score_logprobs(prompt.prompt_tokens, cont.prompt_tokens)
        assert len(got) == len(cont.prompt_tokens)
        assert _max_err(got,
                        _hf_logprobs(hf_model, prompt.prompt_tokens, cont.prompt_tokens)) <= TOL


def test_around_generate_hook_wraps_engine_calls(engine):
    import contextlib

    entered = []

    @contextlib.contextmanager
    def hook():
        entered.append(True)
        yield

    engine.around_generate = hook
    try:
        engine.generate([_prompt(4)], n=1)
        engine.score_logprobs([3, 4], [5])
    finally:
        engine.around_generate = contextlib.nullcontext
    assert len(entered) == 2


def test_sleep_and_wake_up_are_noops_on_cpu(engine):
    engine.sleep()
    engine.wake_up(["weights"])
    engine.wake_up()
    assert len(engine.generate([_prompt(4)], n=2)[0].response_tokens_G_T) == 2


# ------------------------------------------------------------------------------------ weight pushes

def _perturbed(hf_model, scale: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=gen)
            for k, v in hf_model.state_dict().items()}


def test_load_weights_changes_logprobs_even_for_cached_prompts(engine, hf_model, tiny_qwen3_dir):
    from transformers import AutoModelForCausalLM

    names = engine.expected_weight_names()
    assert "model.embed_tokens.weight" in names and "model.layers.1.mlp.down_proj.weight" in names
    new = AutoModelForCausalLM.from_pretrained(str(tiny_qwen3_dir), dtype=torch.float32).eval()
    new.load_state_dict(_perturbed(hf_model, 0.05, seed=1))
    # > 3 KV blocks of 32 tokens: a prefix-cache hit after the first request
    prompt = _prompt(100, 6)
    engine.generate([prompt], n=2)  # caches the prompt's KV under the old weights
    try:
        # HF names straight from a state dict (incl. the tied lm_head.weight), streamed lazily.
        engine.load_weights((k, v.clone()) for k, v in new.state_dict().items())
        cont = _prompt(20, 1).prompt_tokens
        assert _max_err(engine.score_logprobs(prompt.prompt_tokens, cont),
                        _hf_logprobs(new, prompt.prompt_tokens, cont)) <= TOL
        # would read stale KV if the prefix cache were not reset
        (g,) = engine.generate([prompt], n=2)
        for toks, lps in zip(g.response_tokens_G_T, g.rollout_logprobs_G_T):
            assert _max_err(
                lps, _hf_logprobs(new, prompt.prompt_tokens, toks, ROLLOUT.temperature)) <= TOL
    finally:
        engine.load_weights(hf_model.state_dict().items())
    cont = _prompt(10, 2).prompt_tokens
    assert _max_err(engine.score_logprobs(prompt.prompt_tokens, cont),
                    _hf_logprobs(hf_model, prompt.prompt_tokens, cont)) <= TOL


def test_batch_larger_than_vllms_default_token_budget(engine):
    """160 seeded requests × 60 prompt tokens (> vLLM's default 4096-token step budget): on CPU a
    chunked prefill of a seeded request crashed vLLM 0.32 ("CPU Generator does not use offset")."""
    groups = engine.generate([_prompt(60, i, f"p{i}") for i in range(40)], n=4, step=3)
    assert len(groups) == 40 and all(g.group_size == 4 for g in groups)


def test_tied_push_without_lm_head_is_refused(engine, hf_model):
    """A tied checkpoint has no lm_head.weight, but vLLM's in-place reload keeps the OLD head
    without it."""
    sd = hf_model.state_dict()
    try:
        with pytest.raises(RuntimeError, match="weight push incomplete"):
            engine.load_weights((k, v) for k, v in sd.items() if k != "lm_head.weight")
    finally:
        engine.load_weights(sd.items())


def test_incomplete_push_raises(engine, hf_model):
    sd = hf_model.state_dict()
    try:
        with pytest.raises(RuntimeError, match="weight push incomplete: 1 of"):
            engine.load_weights((k, v) for k, v in sd.items()
                                if k != "model.layers.0.self_attn.q_norm.weight")
    finally:
        engine.load_weights(sd.items())


# ------------------------------------------------------------------------------------------ errors

def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg
    return msg


def test_head_dim_below_32_is_rejected_before_start(tiny_qwen3_dir, tmp_path):
    from nemo_cascade.rollout.vllm import RolloutEngine

    cfg = json.loads((tiny_qwen3_dir / "config.json").read_text())
    cfg.update(head_dim=16)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError) as e:
        RolloutEngine(str(tmp_path), ROLLOUT)
    assert _one_line(e.value).startswith(
        "head_dim 16 < 32: vLLM's CPU attention needs head_dim >= 32; set")


def test_missing_model_folder_or_config(tmp_path):
    from nemo_cascade.rollout.vllm import RolloutEngine

    with pytest.raises(FileNotFoundError) as e:
        RolloutEngine(str(tmp_path / "nope"), ROLLOUT)
    assert str(tmp_path / "nope") in _one_line(e.value)
    with pytest.raises(FileNotFoundError) as e:
        RolloutEngine(str(tmp_path), ROLLOUT)
    assert "config.json" in _one_line(e.value) and str(tmp_path) in str(e.value)


def test_prompt_longer_than_model_is_rejected(engine):
    with pytest.raises(ValueError, match="prompt long: 600 tokens >= max_model_len"):
        engine.generate([_prompt(600, uid="long")], n=1)


# ------------------------------------------------------------------------------------------ 2 ranks

@pytest.mark.dist
def test_two_ranks_generate_independently_under_torchrun(tiny_qwen3_dir, tmp_path):
    """torchrun, 2 ranks, gloo default group created first (as the actor does); per-rank engines
    with external_launcher: uneven call counts, per-rank weight pushes, the default group survives
    shutdown."""
    from tests.launch import torchrun

    proc = torchrun(Path(__file__), 2, tiny_qwen3_dir, tmp_path, 1, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r, res in enumerate(results):
        assert res["group_sizes"] == [2] * (r + 1)
        assert res["score_err"] <= TOL and res["pushed_err"] <= TOL, res
        assert res["default_group_alive"] and res["all_reduce"] == 3.0
        assert res["max_model_len"] == json.loads((tiny_qwen3_dir / "config.json").read_text())[
            "max_position_embeddings"]
    assert results[0]["pushed"] != results[1]["pushed"]  # each rank holds its own weights


@pytest.mark.dist
def test_two_ranks_share_a_tensor_parallel_engine(engine, tiny_qwen3_dir, tmp_path):
    """rollout.tensor_parallel_size=2: both ranks drive one engine sharded over them. Each rank
    still gets exactly its own prompts' groups — uneven shares included (rank 0's second call is
    empty, as a small refill round's share can be), log-probs equal transformers' before and after a
    push, and a prompt samples the same tokens as in the whole-engine-per-rank layout (its seed
    belongs to its owner rank)."""
    from tests.launch import torchrun

    proc = torchrun(Path(__file__), 2, tiny_qwen3_dir, tmp_path, 2, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0]["group_sizes"] == [2] and results[1]["group_sizes"] == [2, 2]
    for r, res in enumerate(results):
        assert res["uids"] == [f"r{r}c{c}" for c in range(len(res["uids"]))]
        assert res["score_err"] <= TOL and res["pushed_err"] <= TOL, res
        assert res["default_group_alive"] and res["all_reduce"] == 3.0
    assert results[0]["pushed"] == results[1]["pushed"]  # one engine
    # a whole engine, rank 0's seeds
    (alone,) = engine.generate([_prompt(10, 0, uid="r0c0")], n=2, step=0)
    assert results[0]["tokens"] == [alone.response_tokens_G_T]


def _two_rank_worker(model_dir: str, out_dir: str, engine_tp: int) -> None:
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from nemo_cascade.rollout.vllm import RolloutEngine

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    _load_ascii_ids(model_dir)
    # An evaluation budget past the model's positions (App. B asks 64K) is capped, not refused by
    # vLLM.
    eng = RolloutEngine(model_dir, dataclasses.replace(ROLLOUT, tensor_parallel_size=engine_tp),
                        distributed=True, max_model_len=1 << 20)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    groups = []
    # rank 0: one prompt, then nothing (with engine TP it still joins rank 1's call)
    for call in range(2):
        if rank == 1 or call == 0 or engine_tp > 1:
            mine = ([_prompt(10, rank + call, uid=f"r{rank}c{call}")] if rank == 1 or call == 0
                    else [])
            groups += eng.generate(mine, n=2, step=call)
    prompt, cont = _prompt(40, 1).prompt_tokens, _prompt(6, 2).prompt_tokens
    score_err = _max_err(eng.score_logprobs(prompt, cont), _hf_logprobs(model, prompt, cont))
    # whole engines: each rank its own weights; one shared engine: the same weights from both ranks
    model.load_state_dict(_perturbed(model, 0.05, seed=10 + (rank if engine_tp == 1 else 0)))
    eng.load_weights(model.state_dict().items())
    pushed = eng.score_logprobs(prompt, cont)
    pushed_err = _max_err(pushed, _hf_logprobs(model, prompt, cont))
    eng.shutdown()
    alive = dist.is_initialized()
    x = torch.tensor([rank + 1.0])
    dist.all_reduce(x)
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(dict(
        max_model_len=eng.max_model_len, group_sizes=[g.group_size for g in groups],
        uids=[g.prompt.uid for g in groups], tokens=[g.response_tokens_G_T for g in groups],
        score_err=score_err, pushed_err=pushed_err, pushed=pushed, default_group_alive=alive,
        all_reduce=x.item())))
    dist.destroy_process_group()


if __name__ == "__main__":
    _two_rank_worker(sys.argv[1], sys.argv[2], int(sys.argv[3]))


def test_sampling_params_carry_the_rollout_settings():
    """top-k (IF-RL: 20, T16), top-p, temperature, length and stop strings reach vLLM's
    SamplingParams."""
    from nemo_cascade.rollout.vllm import RolloutEngine

    r = config.Rollout(temperature=0.6, top_p=0.95, top_k=20, max_response_tokens=12,
                       stop=("\n\n",))
    p = RolloutEngine._sampling_params(r, n=8, seed=64)
    assert (p.n, p.temperature, p.top_p, p.top_k, p.max_tokens, p.stop, p.seed, p.logprobs) == (
        8, 0.6, 0.95, 20, 12, ["\n\n"], 64, 0)
    # vLLM: both = off
    assert RolloutEngine._sampling_params(config.Rollout(), n=2, seed=None).top_k in (-1, 0)
