"""Synthetic off-topic preference pairs (paper §4.2, App. C.1): the chosen response answers the
prompt; the rejected one is a good answer to a *slightly off-topic rewrite* of it, so the RM learns
to reward answering what was asked, not fluent text near the subject. The paper's models:
DeepSeek-V3 rewrites the prompts, DeepSeek-V3-0324 writes the chosen answers and DeepSeek-V3 the
rejected ones; here any OpenAI-compatible server (``--generator-url``, e.g. ``vllm serve``) with
``--generator-model`` and optionally ``--rewriter-model`` / ``--weak-model`` (default: the generator
model).

The prompts are the single-turn RM prompts of HelpSteer2/3 (each once), in a seeded order;
``--synthetic-pairs N`` takes the first N (default 36,000: §4.2's 82K pairs less HelpSteer2's 10K
and HelpSteer3's 36K). Three requests per pair go through the project's HTTP client
(``rewards.http_endpoint.HttpEndpoint``: timeouts, retries, one-line errors), several pairs at a
time. Every finished pair is appended to ``OUT/.work/rm-offtopic.jsonl`` at once, so a stopped run
resumes without asking again; the output file is then written from it as one more source.
"""
from __future__ import annotations

import hashlib
import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from nemo_cascade.tooling.prepare.helpsteer import hs2_prompt
from nemo_cascade.tooling.prepare.sources import Bad, Drop, PrepareError, Source, locate, stream
from nemo_cascade.rewards.http_endpoint import RewardServerError, HttpEndpoint
from nemo_cascade.runtime import console

DEFAULT_PAIRS = 36_000
REWRITE_INSTRUCTION = (
    "Rewrite the user request below into a new request on a slightly different, related "
    "topic. Keep its "
    "language, style, length and format, but change what it asks for, so that a good answer to "
    "the new request "
    "would not answer the original one. Reply with the new request only, without any comment.")


@dataclass(frozen=True)
class GeneratorSettings:
    url: str
    model: str
    rewriter_model: str = ""
    weak_model: str = ""
    pairs: int = DEFAULT_PAIRS
    workers: int = 8
    max_tokens: int = 4096
    temperature: float = 0.7
    seed: int = 0

    @property
    def revision(self) -> str:
        return (
            f"rewriter={self.rewriter_model or self.model} chosen={self.model} rejected="
            f"{self.weak_model or self.model} pairs={self.pairs} seed={self.seed} "
            f"max_tokens={self.max_tokens} "
            f"temperature={self.temperature}")


def rewrite_request(prompt: str) -> list[dict]:
    """The chat messages asking the rewriter for an off-topic version of ``prompt``."""
    return [{"role": "user", "content": f"{REWRITE_INSTRUCTION}\n\nRequest:\n{prompt}"}]


def answer_request(prompt: str) -> list[dict]:
    """The chat messages asking a model to answer ``prompt`` (the original, or its rewrite)."""
    return [{"role": "user", "content": prompt}]


def final_answer(text: str) -> str:
    """A response without a reasoning block: the text after ``</think>`` when the model thought
    aloud; empty when its thinking never ended (the answer was cut off)."""
    if "</think>" in text:
        return text.split("</think>", 1)[1].strip()
    return "" if text.lstrip().startswith("<think>") else text.strip()


def pair_row(prompt: str, rewritten: str, chosen: str, rejected: str):
    """The preference row of one generated pair, or a Drop when a generation is unusable."""
    rewritten, chosen, rejected = (final_answer(t) for t in (rewritten, chosen, rejected))
    if not (rewritten and chosen and rejected):
        return Drop("empty_generation")
    if " ".join(rewritten.split()) == " ".join(prompt.split()):
        return Drop("rewrite_unchanged")
    return {
        "prompt": prompt, "chosen": chosen, "rejected": rejected, "source": "synthetic:off-topic",
        "rewritten_prompt": rewritten}


def _key(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:20]


def rm_prompts(source_dir: Optional[Path]) -> list[str]:
    """The distinct single-turn RM prompts of HelpSteer2/3 (malformed rows are the pairs' business:
    skipped)."""
    seen, out = set(), []
    for source, field in ((Source("nvidia/HelpSteer2"), "prompt"),
                          (Source("nvidia/HelpSteer3", "preference"), "context")):
        files, _ = locate(source, source_dir)
        for _, row in stream(files):
            if isinstance(row, Bad):
                continue
            value = row.get(field)
            if isinstance(value, str) and field == "prompt":
                value = hs2_prompt(value)
            if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
                value = value[0].get("content") if value[0].get("role") == "user" else None
            if isinstance(value, str) and value.strip() and value not in seen:
                seen.add(value)
                out.append(value)
    return out


class OffTopicPairs:
    """Generates (or reads back) the pairs; :meth:`rows` is the ``(where, row)`` stream of a run
    source."""

    def __init__(self, settings: GeneratorSettings, source_dir: Optional[Path], work: Path):
        if settings.pairs < 1 or settings.workers < 1 or settings.max_tokens < 1:
            raise PrepareError(
                "--synthetic-pairs, --generator-workers and --generator-max-tokens "
                "must be >= 1, got "
                f"{settings.pairs}, {settings.workers}, {settings.max_tokens}")
        self.settings, self.source_dir, self.work = settings, source_dir, work

    def _chat(self, endpoint, model: str, messages: list[dict]) -> str:
        s = self.settings
        # Seeded per request: a pair generated again (a lost work file) is the same pair.
        answer = endpoint.post(
            "/v1/chat/completions", {
                "model": model, "messages": messages, "seed": s.seed, "max_tokens": s.max_tokens,
                "temperature": s.temperature})
        try:
            return answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise RewardServerError(
                f"{endpoint.base_url}/v1/chat/completions: expected choices[0].message.content "
                f"in the answer, got {json.dumps(answer)[:120]}") from None

    def _generate(self, endpoint, prompt: str) -> dict:
        s = self.settings
        rewritten = final_answer(
            self._chat(endpoint, s.rewriter_model or s.model, rewrite_request(prompt)))
        chosen = self._chat(endpoint, s.model, answer_request(prompt))
        rejected = self._chat(endpoint, s.weak_model or s.model,
                              answer_request(rewritten)) if rewritten else ""
        return {"key": _key(prompt), "prompt": prompt, "rewritten": rewritten, "chosen": chosen,
                "rejected": rejected, "models": s.revision}

    def _done(self) -> dict[str, dict]:
        done = {}
        if self.work.is_file():
            for line in self.work.read_text().splitlines():
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by a kill: generated again
                    continue
                if isinstance(item, dict) and item.get("models") == self.settings.revision:
                    done[item["key"]] = item
        return done

    def ensure(self) -> list[dict]:
        """Every selected pair's generations, generating the missing ones (appended as they
        finish)."""

        s = self.settings
        prompts = rm_prompts(self.source_dir)
        random.Random(s.seed).shuffle(prompts)
        prompts = prompts[:s.pairs]
        done = self._done()
        todo = [p for p in prompts if _key(p) not in done]
        if todo:
            endpoint = HttpEndpoint(s.url,
                                    expect="an OpenAI-compatible chat server (vllm serve MODEL)",
                                    timeout=600.0)
            self.work.parent.mkdir(parents=True, exist_ok=True)
            lock = threading.Lock()
            bar = console.progress(len(todo), "rm off-topic pairs", "pair")
            with open(self.work, "a") as f, ThreadPoolExecutor(s.workers) as pool:
                for item in pool.map(lambda p: self._generate(endpoint, p), todo):
                    with lock:
                        f.write(json.dumps(item, ensure_ascii=False) + "\n")
                        f.flush()
                    done[item["key"]] = item
                    bar.update(1)
            bar.close()
        return [done[_key(p)] for p in prompts]

    def rows(self) -> Iterator:
        for i, item in enumerate(self.ensure(), 1):
            yield f"{self.work}:{i}", pair_row(item["prompt"], item["rewritten"], item["chosen"],
                                               item["rejected"])


__all__ = [
    "GeneratorSettings", "OffTopicPairs", "rewrite_request", "answer_request", "pair_row",
    "final_answer", "rm_prompts", "DEFAULT_PAIRS", "REWRITE_INSTRUCTION"]
