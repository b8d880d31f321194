"""HTTP client for served reward models and judges: a vLLM OpenAI-compatible server queried over the
network.

Two scores, one transport:

- :class:`RewardModelClient` — a Bradley–Terry reward model's scalar (paper §4.2: a linear head on
  the last hidden state; §4.3 uses it as the RLHF reward). The client renders each conversation
  itself with ``data.rm_input.render_rm_input``, the rendering the RM stage trained on, and the
  server only tokenises the text (``/tokenize``: the folder's tokenizer is the training one) — its
  chat template never shapes a scored input. Which (style, mode) the RM was trained with is read
  once from the server: the exported RM's chat template renders a probe conversation as exactly one
  of the RM renderings, else the server is refused (an RM folder carrying its base model's
  template). The ids are scored many per request through ``/classify`` with
  ``use_activation=false``, which returns the raw logit — the default applies a sigmoid (vLLM 0.32).
  A BT score is meant to be compared across responses; the sigmoid would squash it.
- :class:`JudgeClient` — a judge LM's P("YES") (SWE reward, paper §4.7 Eq. 2, Kimi-Dev-72B), read
  after the ``<judgement>`` tag App. C.2's judge writes (after its own reasoning, if it reasons
  first) and summed over the word's spellings, each by the chain rule over its tokens; how and
  why is in docs/rewards.md, "Reading a judge's P(YES)".

Inputs longer than the server's ``max_model_len`` keep their **last** tokens: both models read their
answer at the final position, which must stay the real end of the conversation (counted in
``truncated``).

Transport: :class:`~.http_endpoint.HttpEndpoint` (timeouts, bounded retries, ``file:`` URLs of
servers that restart elsewhere, one-line :class:`~.http_endpoint.RewardServerError` failures).
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Optional, Sequence, Union

from ..data.rm_input import PROBE, RM_RENDERINGS, render_rm_input
from .http_endpoint import HttpEndpoint, RewardServerError, one_line

Messages = Sequence[dict]
Prompt = Union[str, Messages]
_TOKEN_KEY = "token_id:"


def _clean(text: str) -> str:
    """Lone surrogates cannot be encoded as UTF-8 JSON; model output may contain them. Replace,
    never raise."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _garbage(url: str, what: str) -> RewardServerError:
    return RewardServerError(f"{url}: malformed answer: {one_line(what)}")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class _ServedModel:
    """What both clients share: the endpoint, ``/tokenize`` (server-side chat template) and a thread
    pool."""

    EXPECT = "a vLLM OpenAI-compatible server (vllm serve)"
    """What must answer at the URL, for error lines (HttpEndpoint.expect)."""

    def __init__(self, url: str, model: Optional[str], batch_size: int, concurrency: int, **http):
        if batch_size < 1 or concurrency < 1:
            raise ValueError(f"batch_size and concurrency must be >= 1, got {batch_size}, "
                             f"{concurrency}")
        self.http = HttpEndpoint(url, expect=self.EXPECT, **http)
        self.model, self.batch_size, self.concurrency = model, batch_size, concurrency
        self.truncated = 0
        """Inputs cut to the server's max_model_len so far (their last tokens kept)."""

    def _payload(self, **fields) -> dict:
        return {"model": self.model, **fields} if self.model else fields

    def tokenize(self, prompt: Prompt, *, add_generation_prompt: bool,
                 special: bool = True) -> tuple[list[int], int]:
        """``(token ids, server max_model_len)`` of a plain string (``special``: add BOS etc. like
        the completions endpoint does) or of a conversation rendered with the server's chat
        template."""
        if isinstance(prompt, str):
            payload = self._payload(prompt=_clean(prompt), add_special_tokens=special)
        else:
            messages = [{"role": m["role"], "content": _clean(m["content"])} for m in prompt]
            payload = self._payload(messages=messages, add_generation_prompt=add_generation_prompt)
        resp = self.http.post("/tokenize", payload)
        ids, max_len = ((resp.get("tokens"), resp.get("max_model_len")) if isinstance(resp, dict)
                        else (None, None))
        if not (isinstance(ids, list)
                and all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
                and isinstance(max_len, int) and max_len > 0):
            raise _garbage(self.http.base_url + "/tokenize",
                           f"expected tokens and max_model_len, got {resp!r:.200}")
        return ids, max_len

    def _keep_last(self, ids: list[int], limit: int) -> list[int]:
        if len(ids) <= limit:
            return ids
        self.truncated += 1
        return ids[len(ids) - limit:]

    def _map(self, fn, items: Sequence) -> list:
        """``[fn(x) for x in items]`` with up to ``concurrency`` requests in flight, order kept."""
        if len(items) <= 1 or self.concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    def _chunks(self, items: Sequence) -> list:
        return [items[i:i + self.batch_size] for i in range(0, len(items), self.batch_size)]

    def _post_indexed(self, path: str, payload: dict, key: str, count: int,
                      read: Callable[[str, dict, int], Any]
                      ) -> list:
        """POST ``payload`` and return ``read(url, item, index)`` for the ``count`` items of the
        answer's ``key`` list, in index order: vLLM's ``/classify`` and ``/v1/completions`` number
        their items, and every index must come exactly once (a malformed answer is a one-line
        :class:`RewardServerError`)."""
        resp = self.http.post(path, payload)
        url = self.http.base_url + path
        items = resp.get(key) if isinstance(resp, dict) else None
        if not isinstance(items, list) or len(items) != count:
            raise _garbage(url, f"expected {count} items in {key!r}, got {resp!r:.200}")
        out: list = [None] * count
        for item in items:
            index = item.get("index") if isinstance(item, dict) else None
            if not (isinstance(index, int) and 0 <= index < count and out[index] is None):
                raise _garbage(url, f"bad or repeated index in {item!r:.200}")
            out[index] = read(url, item, index)
        return out


class RewardModelClient(_ServedModel):
    """Raw Bradley–Terry scores from a server started with ``--runner pooling`` (``/classify``), at
    most ``batch_size`` inputs per request, ``concurrency`` requests in flight."""

    EXPECT = ("a reward model (a num_labels=1 sequence classifier) served by `vllm serve MODEL "
              "--runner pooling`")

    def __init__(self, url: str, model: Optional[str] = None, *, batch_size: int = 32,
                 concurrency: int = 4,
                 **http):
        super().__init__(url, model, batch_size, concurrency, **http)
        self._rendering: Optional[tuple[str, str]] = None

    def rendering(self) -> tuple[str, str]:
        """The ``(style, mode)`` of ``data.rm_input.RM_RENDERINGS`` the served RM was trained with,
        read once: the server renders ``rm_input.PROBE`` with its chat template (the exported RM's
        is its training rendering, ``rm_input.rm_chat_template``) and the token ids must equal those
        of exactly one rendering's text. Otherwise a one-line :class:`RewardServerError` quoting
        what the server rendered."""
        if self._rendering is None:
            served, _ = self.tokenize(list(PROBE), add_generation_prompt=False)
            found = [r for r in RM_RENDERINGS
                     if self._text_ids(render_rm_input(PROBE, r[1], r[0])) == served]
            if len(found) != 1:
                shown = self.http.post("/detokenize", self._payload(tokens=served))
                text = shown.get("prompt") if isinstance(shown, dict) else shown
                raise RewardServerError(
                    f"{self.http.base_url}: the served reward model's chat template renders a "
                    f"conversation as {one_line(repr(text), 160)}, not as a reward_model stage "
                    "trains (data.rm_input: cascade1 with /think or /no_think flags, or plain "
                    "ChatML); serve an RM exported by its reward_model stage (its folder carries "
                    "that rendering as its chat template)")
            self._rendering = found[0]
        return self._rendering

    def _text_ids(self, text: str) -> list[int]:
        """The server tokenizer's ids of an RM input, no special tokens added: as the training pairs
        were encoded (``data.preference``); the rendered text holds every control token itself."""
        return self.tokenize(text, add_generation_prompt=False, special=False)[0]

    def score_conversations(self, conversations: Sequence[Messages]) -> list[float]:
        """One score per conversation (``[{"role", "content"}, ...]``, ending with the assistant
        turn to judge), rendered here by ``render_rm_input`` in the served RM's training rendering
        (:meth:`rendering`)."""
        style, mode = self.rendering()
        texts = [render_rm_input(c, mode, style) for c in conversations]
        tokenize = partial(self.tokenize, add_generation_prompt=False, special=False)
        return self._score_ids(self._map(tokenize, texts))

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """One score per already-formatted string (tokenized by the server, special tokens
        added)."""
        return self._score_ids(self._map(lambda t: self.tokenize(t, add_generation_prompt=False),
                                         texts))

    def _score_ids(self, tokenized: list[tuple[list[int], int]]) -> list[float]:
        inputs = [self._keep_last(ids, max_len) for ids, max_len in tokenized]
        return [s for chunk in self._map(self._classify, self._chunks(inputs)) for s in chunk]

    def _classify(self, inputs: list[list[int]]) -> list[float]:
        def score(url: str, item: dict, index: int) -> float:
            probs = item.get("probs")
            if not (isinstance(probs, list) and len(probs) == 1 and _finite(probs[0])):
                raise _garbage(url,
                               "expected one finite score (a num_labels=1 reward model), got "
                               f"{probs!r:.200}")
            return float(probs[0])

        return self._post_indexed("/classify", self._payload(input=inputs, use_activation=False),
                                  "data",
                                  len(inputs), score)


class JudgeClient(_ServedModel):
    """P("YES") from a judge LM served with ``--runner generate`` (see the module docstring for the
    method). ``yes`` lists the spellings whose probabilities add up: "YES" after a chat generation
    prompt or a tag, " YES" after a raw "Answer:" prompt. ``reasoning_tokens``: 0 for a judge that
    answers at once; N > 0 lets the judge write up to N tokens before the answer prefix
    (``Reward.judge_reasoning_tokens``)."""

    EXPECT = "a judge LM served by `vllm serve MODEL --runner generate`"

    def __init__(self, url: str, model: Optional[str] = None, *,
                 yes: Sequence[str] = ("YES", " YES"),
                 reasoning_tokens: int = 0, batch_size: int = 32, concurrency: int = 4, **http):
        super().__init__(url, model, batch_size, concurrency, **http)
        if not yes or not all(isinstance(v, str) and v for v in yes):
            raise ValueError(f"yes must be non-empty strings, got {yes!r}")
        if reasoning_tokens < 0:
            raise ValueError(f"reasoning_tokens must be >= 0, got {reasoning_tokens}")
        self.yes = tuple(yes)
        self.reasoning_tokens = reasoning_tokens
        self._yes_ids: Optional[list[list[int]]] = None

    def yes_token_ids(self) -> list[list[int]]:
        """The canonical tokenization of each spelling (fetched once); refuses prefix-overlapping
        ones."""
        if self._yes_ids is None:
            ids = [self.tokenize(v, add_generation_prompt=False,
                                 special=False)[0] for v in self.yes]
            for a, (va, ia) in enumerate(zip(self.yes, ids)):
                for vb, ib in zip(self.yes[a + 1:], ids[a + 1:]):
                    if not ia or not ib or ia[:len(ib)] == ib or ib[:len(ia)] == ia:
                        raise ValueError(f"yes spellings {va!r} {ia} and {vb!r} {ib} overlap as "
                                         "token sequences")
            self._yes_ids = ids
        return self._yes_ids

    def p_yes(self, prompts: Sequence[Prompt], *, answer_prefix: str = "") -> list[float]:
        """P(YES) per prompt: a string (sent as is, special tokens added like ``/v1/completions``)
        or a conversation (rendered with the judge's chat template plus its generation prompt), read
        right after ``answer_prefix`` (e.g. ``"<judgement>"``; empty: at the first generated token)
        — after the judge's reasoning when ``reasoning_tokens`` > 0, which needs a prefix to stop
        at."""
        if self.reasoning_tokens and not answer_prefix:
            raise ValueError("a reasoning judge (reasoning_tokens > 0) needs the answer_prefix it "
                             "writes before its verdict, e.g. '<judgement>'")
        if not prompts:
            return []
        yes_ids = self.yes_token_ids()
        room = max(len(v) for v in yes_ids)  # the longest spelling must fit after the context
        prefix_ids = (self.tokenize(answer_prefix, add_generation_prompt=False, special=False)[0]
                      if answer_prefix else [])
        tokenized = self._map(lambda p: self.tokenize(p, add_generation_prompt=True), prompts)
        reserve = room + len(prefix_ids) + self.reasoning_tokens  # what must fit after the prompt
        if tokenized and tokenized[0][1] <= reserve:  # one server: one max_model_len
            raise ValueError(f"{self.http.base_url}: the judge's max_model_len {tokenized[0][1]} "
                             f"leaves no room for a prompt before {reserve} tokens of reasoning, "
                             "answer prefix and answer")
        prompt_ids = [self._keep_last(ids, max_len - reserve) for ids, max_len in tokenized]
        if self.reasoning_tokens:
            reasoning = self._reason(prompt_ids, answer_prefix)
            tails = self._map(lambda text: self.tokenize(text + answer_prefix,
                                                         add_generation_prompt=False,
                                                         special=False)[0], reasoning)
        else:
            tails = [prefix_ids] * len(prompts)
        # A re-tokenized reasoning may come out a little longer than the tokens generated: keep the
        # last ones (not counted again in ``truncated``: the input was counted if its prompt was
        # cut).
        prompt_ids = [(ids + tail)[-(max_len - room):]
                      for ids, tail, (_, max_len) in zip(prompt_ids, tails, tokenized)]
        logp = [[0.0] * len(yes_ids) for _ in prompts]  # log P(spelling v | context i)
        for depth in range(room):
            # One context per (prompt, token prefix) still needing its next token; spellings may
            # share one.
            wanted: dict[tuple[int, tuple[int, ...]], set[int]] = {}
            for i in range(len(prompts)):
                for v in yes_ids:
                    if depth < len(v):
                        wanted.setdefault((i, tuple(v[:depth])), set()).add(v[depth])
            keys = list(wanted)
            contexts = [(prompt_ids[i] + list(prefix),
                         sorted(wanted[(i, prefix)])) for i, prefix in keys]
            found = [lp for chunk in self._map(self._next_token_logprobs,
                                               self._chunks(contexts)) for lp in chunk]
            for (i, prefix), lps in zip(keys, found):
                for k, v in enumerate(yes_ids):
                    if depth < len(v) and tuple(v[:depth]) == prefix:
                        logp[i][k] += lps[v[depth]]
        return [min(1.0, sum(math.exp(x) for x in row)) for row in logp]

    def _reason(self, prompt_ids: list[list[int]], stop: str) -> list[str]:
        """The judge's greedy continuation of each prompt, up to ``reasoning_tokens`` tokens,
        without the ``stop`` text and what would follow it (vLLM cuts the text at a stop string).
        Greedy, so no seed is needed."""
        def text_of(url: str, choice: dict, index: int) -> str:
            if not isinstance(choice.get("text"), str):
                raise _garbage(url, f"no text in {choice!r:.200}")
            return choice["text"]

        def generate(chunk: list[list[int]]) -> list[str]:
            payload = self._payload(prompt=chunk, max_tokens=self.reasoning_tokens, temperature=0.0,
                                    stop=[stop])
            return self._post_indexed("/v1/completions", payload, "choices", len(chunk), text_of)

        return [text for chunk in self._map(generate, self._chunks(prompt_ids)) for text in chunk]

    def _next_token_logprobs(self,
                             contexts: list[tuple[list[int], list[int]]]) -> list[dict[int, float]]:
        """For each ``(context ids, wanted ids)``: the log-probability of each wanted id as the next
        token."""
        wanted = sorted({t for _, ids in contexts for t in ids})
        payload = self._payload(prompt=[ctx for ctx, _ in contexts], max_tokens=1, temperature=1.0,
                                top_p=1.0,
                                logprobs=1, logprob_token_ids=wanted,
                                return_tokens_as_token_ids=True)
        def parsed(url, choice, index):
            return _parse_top_logprobs(url, choice, contexts[index][1])
        return self._post_indexed("/v1/completions", payload, "choices", len(contexts), parsed)


def _parse_top_logprobs(url: str, choice: dict, wanted: list[int]) -> dict[int, float]:
    """``{token id: logprob}`` of the first generated position, checked to hold every wanted id."""
    try:
        top = choice["logprobs"]["top_logprobs"][0]
        lps = {int(key[len(_TOKEN_KEY):]): value for key, value in top.items()
               if key.startswith(_TOKEN_KEY)}
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        raise _garbage(url, f"no token-id top_logprobs in {choice!r:.200}") from None
    for t in wanted:
        if t not in lps or not _finite(lps[t]) or lps[t] > 1e-6:
            raise _garbage(url, f"no finite logprob <= 0 for token {t} in {top!r:.200}")
    return lps


__all__ = ["RewardModelClient", "JudgeClient"]
