"""Reading and writing HF safetensors checkpoints, one tensor at a time (peak memory ≈ one
shard)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterable

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from nemo_cascade.convert.shape import ModelFilesError
from nemo_cascade.convert.shape import load_config_json

# Non-weight files an HF folder carries over unchanged on export.
SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
              "merges.txt", "generation_config.json", "chat_template.jinja", "added_tokens.json")


class SafetensorsReader:
    """Lazy access to the tensors of an HF folder (single file or sharded with an index)."""

    def __init__(self, model_dir: str | Path):
        self.dir = Path(model_dir)
        index = self.dir / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text())["weight_map"]
            files = sorted(set(weight_map.values()))
        elif (self.dir / "model.safetensors").is_file():
            files, weight_map = ["model.safetensors"], None
        else:
            raise ModelFilesError(f"{self.dir}: no model.safetensors or "
                                  "model.safetensors.index.json")
        self._handles = {}
        for f in files:
            try:
                self._handles[f] = safe_open(str(self.dir / f), framework="pt")
            except Exception as e:  # a truncated or corrupt file: name it, don't dump a traceback
                raise ModelFilesError(f"{self.dir / f}: unreadable safetensors file "
                                      f"({e})") from None
        if weight_map is None:
            weight_map = {k: "model.safetensors" for k in self._handles["model.safetensors"].keys()}
        self.weight_map = weight_map

    def names(self) -> list[str]:
        return list(self.weight_map)

    def __contains__(self, name: str) -> bool:
        return name in self.weight_map

    def get(self, name: str) -> torch.Tensor:
        if name not in self.weight_map:
            raise ModelFilesError(f"{self.dir}: tensor {name!r} missing from the checkpoint")
        return self._handles[self.weight_map[name]].get_tensor(name)


def write_sharded(tensors: Iterable[tuple[str, torch.Tensor]], out_dir: str | Path,
                  max_shard_bytes: int = 2 << 30) -> dict[str, str]:
    """Stream (name, tensor) pairs into ``model-0000k-of-0000n.safetensors`` shards plus an index.

    Only one shard is held in memory. Files are written under temporary names and renamed at the
    end.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shard: dict[str, torch.Tensor] = {}
    size, shard_files, weight_map, total = 0, [], {}, 0

    def write_shard():
        nonlocal shard, size
        if shard:
            tmp = out / f".shard-{len(shard_files):05d}.tmp"
            save_file(shard, str(tmp), metadata={"format": "pt"})
            shard_files.append((tmp, list(shard)))
            shard, size = {}, 0

    for name, t in tensors:
        nbytes = t.numel() * t.element_size()
        if shard and size + nbytes > max_shard_bytes:
            write_shard()
        shard[name] = t.detach().contiguous().cpu()
        size += nbytes
        total += nbytes
    write_shard()
    n = len(shard_files)
    for k, (tmp, names) in enumerate(shard_files):
        final = "model.safetensors" if n == 1 else f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        os.replace(tmp, out / final)
        weight_map.update({name: final for name in names})
    if n > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return weight_map


def write_chat_template(folder: str | os.PathLike, template: str) -> None:
    """Make ``template`` an HF folder's chat template, in both places a reader may look
    (``data.tokenizer.set_chat_template`` says why); a reward model's is its training rendering
    (``data.rm_input.rm_chat_template``)."""
    out = Path(folder)
    cfg_path = out / "tokenizer_config.json"
    cfg = load_config_json(cfg_path)
    cfg["chat_template"] = template
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").write_text(template)


def copy_side_files(src_dir: str | Path, out_dir: str | Path) -> None:
    for name in SIDE_FILES:
        src = Path(src_dir) / name
        if src.is_file():
            shutil.copy2(src, Path(out_dir) / name)


def linked_with_config(src_dir: str | Path, out_dir: str | Path, config: dict) -> None:
    """Fill ``out_dir`` with symlinks to every file of the HF folder ``src_dir`` but its
    config.json, and ``config`` as config.json: the same weights and tokenizer read with another
    config (no copy of the weights)."""
    src, out = Path(src_dir).resolve(), Path(out_dir)
    for entry in src.iterdir():
        if entry.name != "config.json":
            (out / entry.name).symlink_to(entry)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
