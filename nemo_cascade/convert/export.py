"""HF export of the actor's current weights: a folder transformers and vLLM load as they are.

All ranks take part (the weights are gathered over TP/PP); rank 0 writes. The folder appears
atomically: it is written under a temporary name and renamed, so an interrupted export never leaves
a half-written checkpoint that looks complete.
"""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Callable

import torch

from nemo_cascade.runtime import ranks
from nemo_cascade.convert.hf_config import reward_model_config
from nemo_cascade.convert.hf_io import copy_side_files, write_chat_template, write_sharded
from nemo_cascade.convert.shape import load_config_json
from nemo_cascade.runtime.files import published_folder


def export_hf(actor, out_dir: str | Path, base_dir: str | Path, dtype: torch.dtype | None = None,
              max_shard_bytes: int = 2 << 30, config_fn: Callable[[dict], dict] | None = None,
              chat_template: str | None = None) -> Path | None:
    """Write ``out_dir`` (config.json, safetensors shards + index, tokenizer files). Returns the
    path on rank 0.

    ``config_fn`` maps the base folder's config to the exported one (the reward model's
    ``*ForSequenceClassification`` config, ``hf_config.reward_model_config``); default: unchanged.
    ``chat_template``: replaces the base's chat template in the exported tokenizer files (written
    before the folder is published, so it never appears with the base's); default: the base's,
    copied."""
    out = Path(out_dir)
    tensors = actor.iter_hf_weights(dtype=dtype)
    if not ranks.is_main():
        for _ in tensors:  # collective: every rank must walk the gather
            pass
        ranks.barrier()
        return None
    with published_folder(out, replace=True) as tmp:
        write_sharded(tensors, tmp, max_shard_bytes=max_shard_bytes)
        config = load_config_json(Path(base_dir) / "config.json")
        if config_fn is not None:
            config = config_fn(config)
        if dtype is not None:
            config["torch_dtype"] = str(dtype).removeprefix("torch.")
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        copy_side_files(base_dir, tmp)
        if chat_template is not None:
            write_chat_template(tmp, chat_template)
    ranks.barrier()
    return out


def export_reward_model(actor, out_dir: str | Path, base_dir: str | Path, pad_token_id: int,
                        chat_template: str) -> Path | None:
    """Export a Bradley–Terry RM (§4.2) as a ``*ForSequenceClassification`` folder whose chat
    template (``chat_template``: ``data.rm_input.rm_chat_template`` of the stage's style and mode)
    renders conversations exactly as its training pairs were rendered, not the base model's
    template: any server of the folder then shows the RM the format it learned (§4.3)."""
    return export_hf(actor, out_dir, base_dir,
                     config_fn=partial(reward_model_config, pad_token_id=pad_token_id),
                     chat_template=chat_template)
