"""The baseline for recipes/smollm2.py: the same RL steps, prompts and settings with every domain
mixed in one run.

The paper argues that domain-wise stages train better than one RL run over a mixture of domains
(§4.1, §7) but reports no such comparison (no cascade-vs-joint ablation in arXiv 2512.13607 v2).
This recipe is that run on CPU: one GRPO policy trained for ``sum(STEPS)`` steps on the union of the
three domains' prompts (``Stage.extra_data`` with ``Data.domain``: each group scored by its own
domain's verifier and code-switch penalty), shuffled together, so every batch mixes IF, math and
code prompts in about equal shares.

To compare the two at equal compute, the run is cut into as many segments as the cascade has stages,
of the same lengths, each evaluated by the same gate. The segments are one run: the optimizer (Adam
moments, step count) and the prompt stream carry over from segment to segment
(``Boundary(optimizer="carry", data="continue")``), and only the first warms the learning rate up.

    .venv/bin/nemo-cascade run recipes/smollm2_mixed.py  # about 2 h on 2 cores; resumes if stopped
"""
from __future__ import annotations

import runpy
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from nemo_cascade.config import Boundary, Cascade

# recipes/ is not a package (the CLI loads recipes by path): the cascade's settings, as a namespace
cascade = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("smollm2.py"))))

ONE_RUN = Boundary(optimizer="carry", data="continue")
"""Segments after the first continue the same run."""


def recipe(name: str = "smollm2-mixed", sources: dict | None = None,
           extra: dict | None = None) -> Cascade:
    """The cascade's stages as segments of one run over all of ``sources`` (domain → its first
    prompt source) and ``extra`` (domain → further sources of that domain); the defaults are
    recipes/smollm2.py:recipe's."""
    sources, extra = sources or cascade.SOURCES, extra or {}
    # the stage's own domain, then the others as extra sources with their domains
    first, *rest = sources
    others = tuple(replace(sources[domain], domain=domain) for domain in rest)
    extras = tuple(replace(d, domain=domain) for domain, more in extra.items() for d in more)
    later = dict(boundary=ONE_RUN, actor=replace(cascade.ACTOR, warmup_steps=0))
    segments = [cascade.rl_stage(f"mixed{k + 1}", first, steps, sources[first],
                                 extra_data=(*others, *extras), **(later if k else {}))
                for k, steps in enumerate(cascade.STEPS.values())]
    return cascade.base(name, tuple(segments))


def with_sft() -> Cascade:
    """The twin of recipes/smollm2.py:with_sft: the same SFT stage, prompts and gate, then the mixed
    segments."""
    return cascade.sft_first(
        recipe("smollm2-mixed-sft", cascade.SFT_RL_SOURCES, cascade.SFT_RL_EXTRA),
        "smollm2-mixed-sft")


def filtered() -> Cascade:
    """The twin of recipes/smollm2.py:filtered: from the same SFT model, on the same filtered
    prompts and gate."""
    return cascade.from_sft_export(recipe("smollm2-mixed-filtered", cascade.FILTERED_RL_SOURCES))
