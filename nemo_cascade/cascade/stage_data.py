"""What a policy stage trains on: the SFT blend or the GRPO prompts, and the stage with its steps
resolved from them."""
from __future__ import annotations

from nemo_cascade import config
from nemo_cascade.cascade.stage_selection import run_dir
from nemo_cascade.data.loader import PromptList, load_prompts, load_sft_blend, pool_by_share
from nemo_cascade.rewards import get_domain, training_validator
from nemo_cascade.runtime.console import events


def policy_data(cfg: config.Cascade, stage: config.Stage, tokenizer) -> tuple[config.Stage, list]:
    """A policy stage's rows — the SFT blend (``Data.repeat``, §3.3) or the GRPO prompts — and the
    stage with its steps resolved: a stage given in ``epochs`` learns its length from its rows here
    (T14). Prepared data caches are read from the run's ``data_cache`` when the data folders are
    read-only."""
    cache = run_dir(cfg) / "data_cache"
    if stage.kind == "sft":
        examples = load_sft_blend((stage.data, *stage.extra_data), tokenizer, stage.mode,
                                  stage.sft_max_tokens, cfg.chat_style, cache_fallback=cache)
        stage = config.with_epoch_steps(stage, len(examples))
        events.info("%s", config.epochs_line(stage, len(examples)))  # T14: epoch beside steps
        return stage, examples
    sets, names, datas = [], [], (stage.data, *stage.extra_data)
    for j, (data, domain) in enumerate(config.prompt_sources(stage)):  # one or several domains
        names.append(f"stages.{stage.name}." + ("data" if j == 0 else f"extra_data.{j - 1}"))
        sets.append(load_prompts(data, tokenizer, stage.mode, get_domain(domain),
                                 stage.rollout.max_prompt_tokens, cfg.chat_style,
                                 training_validator(domain, data, names[-1]),
                                 cache_fallback=cache))
    if any(d.share for d in datas):  # fixed proportions ([P2]'s multi-domain RL)
        prompts = pool_by_share(sets, [d.share for d in datas],
                                [f"{d.source}:{d.split}:{d.seed}" for d in datas], names)
        events.info("stage %s: a pool of %s prompts: %s", stage.name, f"{len(prompts):,}",
                    ", ".join(f"{d.domain or stage.domain} {d.share:.0%} ({len(part):,} rows)"
                              for d, part in zip(datas, sets)))
        return stage, prompts
    if len(sets) == 1 and stage.data.repeat == 1:
        return stage, sets[0]  # a cached prompt set stays mapped (data/prompt_cache.py)
    prompts = PromptList()  # mixed domains or repeated sources: built and joined in memory
    for part, data in zip(sets, datas):
        prompts.extend_with(part, data.repeat)
    return stage, prompts


__all__ = ["policy_data"]
