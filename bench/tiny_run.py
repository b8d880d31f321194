"""A finished tiny cascade as a bench input: real policies, prompts and rollout lengths instead of a
random model's.

Benches that measure a stage's work (bench/grpo_packing.py, bench/async_rewards.py) load the run's
resolved config, a stage's exported policy and its prompts from here; ``ensure_run`` makes the run
first when it is missing (``make run``'s job, about 16 minutes on 2 cores).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN = ROOT / "runs" / "tiny"


def ensure_run(run: Path):
    """The run's resolved config (``config.Cascade``); runs the tiny cascade into ``run`` first if
    it has none."""
    from nemo_cascade import config

    if not (run / "manifest.json").is_file():
        print(f"{run} holds no finished run: running the tiny cascade first (about 16 min)",
              flush=True)
        subprocess.run([
            str(ROOT / ".venv" / "bin" / "nemo-cascade"), "run",
            str(ROOT / "recipes" / "tiny.py"), f"run_root={run.parent}"], check=True, cwd=ROOT)
    return config.from_dict(config.Cascade, json.loads((run / "config.json").read_text()))


def stage_folder(run: Path, cfg, k: int) -> Path:
    return run / "stages" / f"{k}-{cfg.stages[k].name}"


def policy_before(run: Path, cfg, k: int) -> Path:
    """The HF export stage ``k`` started from: the last policy stage before it (reward models are
    not policies)."""
    previous = [j for j in range(k) if cfg.stages[j].kind != "reward_model"]
    if not previous:
        raise SystemExit(
            f"stage {cfg.stages[k].name} starts from the base model; pick a later stage")
    return stage_folder(run, cfg, previous[-1]) / "hf"


def stage_prompts(cfg, stage, tokenizer) -> list:
    """A GRPO stage's prompts, loaded as the cascade loads them."""
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.rewards import training_validator
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    return load_prompts(stage.data, tokenizer, stage.mode, get_domain(stage.domain),
                        stage.rollout.max_prompt_tokens, cfg.chat_style,
                        training_validator(stage.domain, stage.data, f"stages.{stage.name}.data"))
