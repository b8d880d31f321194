"""HF export of the actor's current weights: a folder transformers and vLLM load as they are.

All ranks take part (the weights are gathered over TP/PP); rank 0 writes. The folder appears atomically:
it is written under a temporary name and renamed, so an interrupted export never leaves a half-written
checkpoint that looks complete.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch

from nemo_cascade import ranks
from nemo_cascade.convert.hf_io import copy_side_files, write_sharded
from nemo_cascade.files import published_folder


def export_hf(actor, out_dir: str | Path, base_dir: str | Path, dtype: torch.dtype | None = None,
              max_shard_bytes: int = 2 << 30, config_fn: Callable[[dict], dict] | None = None) -> Path | None:
    """Write ``out_dir`` (config.json, safetensors shards + index, tokenizer files). Returns the path on rank 0.

    ``config_fn`` maps the base folder's config to the exported one (the reward model's
    ``*ForSequenceClassification`` config, ``arch.reward_model_config``); default: unchanged."""
    out = Path(out_dir)
    tensors = actor.iter_hf_weights(dtype=dtype)
    if not ranks.is_main():
        for _ in tensors:  # collective: every rank must walk the gather
            pass
        ranks.barrier()
        return None
    with published_folder(out, replace=True) as tmp:
        write_sharded(tensors, tmp, max_shard_bytes=max_shard_bytes)
        config = json.loads((Path(base_dir) / "config.json").read_text())
        if config_fn is not None:
            config = config_fn(config)
        if dtype is not None:
            config["torch_dtype"] = str(dtype).removeprefix("torch.")
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        copy_side_files(base_dir, tmp)
    ranks.barrier()
    return out
