"""The demo data beside the training core: the generated prompt sets of the CPU-scale recipes
(recipes/tiny.py, recipes/smollm2*.py), the tiny cascade's eval suites and the base models built
without a download. The core only knows them through its registries; :func:`register` fills those,
and every entry point that reads a config (the ``nemo-cascade`` command, its torchrun workers, the
tests' session) calls it first.
"""
from __future__ import annotations

from . import (arithmetic, benchmark_sets, chat_arithmetic, reasoning_gym, synthetic_domains,
               tiny_models, tiny_suites)
from nemo_cascade.data import generated
from nemo_cascade.evaluate.suites import register_suite


def register() -> None:
    """Register every demo set, suite and base model under its config name (idempotent):
    ``synthetic:arithmetic`` and ``synthetic:chat_arithmetic`` (and their preference pairs), the
    synthetic-domain sets, ``synthetic:rg/TASK``, ``benchmark:gsm8k`` and ``benchmark:mbpp``; the
    tiny-* suites and leg-counting; ``model.build`` tiny-qwen3, tiny-qwen3-cascade,
    smollm2-135m-instruct.
    Idempotent because every registry takes the same function or suite again as a no-op."""
    from nemo_cascade.cascade.base_model import register_builder

    generated.register("synthetic:arithmetic", arithmetic.arithmetic)
    for name, fn in synthetic_domains.DOMAIN_TASKS.items():
        generated.register(f"synthetic:{name}", fn)
    generated.register_family(f"synthetic:{reasoning_gym.RG_PREFIX}", reasoning_gym.rows)
    for name, fn in benchmark_sets.BENCHMARK_SETS.items():
        generated.register(f"benchmark:{name}", fn)
    generated.register_preference("synthetic:arithmetic", arithmetic.arithmetic_pairs)
    generated.register_preference("synthetic:chat_arithmetic", chat_arithmetic.chat_pairs)
    for suite in (*tiny_suites.TINY_SUITES, *tiny_suites.WORD_MATH_SUITES):
        register_suite(suite)
    for name, fn in tiny_models.BUILDERS.items():
        register_builder(name, fn)


__all__ = ["register"]
