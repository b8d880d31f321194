"""The HF folder a cascade starts from: the recipe's model folder as it is, a view of it whose
config.json adds the recipe's YaRN scaling (App. B), or a tiny model built once into the run
directory (docs/architecture.md, "Run directory"). The named models ``Model.build`` may ask for are
registered here (:func:`register_builder`; the demo models by
``nemo_cascade.tooling.demo_data.register()``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from nemo_cascade import config
from nemo_cascade.runtime import ranks
from nemo_cascade.convert.shape import load_config_json
from nemo_cascade.runtime.files import published_folder
from nemo_cascade.convert.hf_config import with_recipe_yarn
from nemo_cascade.convert.hf_io import linked_with_config

BUILDERS: dict[str, Callable[..., Path]] = {}
"""``Model.build`` name → ``fn(out_dir, seed=...)`` that writes an HF model folder there (no
download)."""


def register_builder(name: str, fn: Callable[..., Path]) -> None:
    """Make ``name`` a ``Model.build`` value building its model with ``fn(out_dir, seed=seed)``.
    Registering the same function again is a no-op; another under a taken name is a ValueError (the
    base model would depend on import order)."""
    if BUILDERS.get(name, fn) is not fn:
        raise ValueError(f"model builder {name!r} is already registered to another function")
    BUILDERS[name] = fn


def prepare_base_model(cfg: config.Cascade, run_dir: Path) -> str:
    """The HF folder the cascade with run directory ``run_dir`` starts from: the given one, or a
    tiny model built once into the run dir; with ``model.yarn_factor``, a view of it in
    ``<run>/base_model`` whose config.json adds that YaRN scaling (links to the same weights and
    tokenizer), so the actor, the engine and every stage export use it (App. B)."""

    out = run_dir / "base_model"
    if cfg.model.hf_path:
        raw = load_config_json(Path(cfg.model.hf_path) / "config.json")
        hf_config = with_recipe_yarn(raw, cfg.model.yarn_factor)
        if hf_config == raw:
            return cfg.model.hf_path
        if ranks.is_main() and not _same_config(out, hf_config):
            with published_folder(out, replace=True) as tmp:
                linked_with_config(cfg.model.hf_path, tmp, hf_config)
        ranks.barrier()
        return str(out)
    if ranks.is_main() and not (out / "config.json").is_file():
        # a folder without config.json is an interrupted build
        with published_folder(out, replace=True) as tmp:
            BUILDERS[cfg.model.build](tmp, seed=cfg.seed)
            if cfg.model.yarn_factor:
                raw = load_config_json(tmp / "config.json")
                scaled = with_recipe_yarn(raw, cfg.model.yarn_factor)
                (tmp / "config.json").write_text(json.dumps(scaled, indent=2))
    ranks.barrier()
    return str(out)


def _same_config(folder: Path, hf_config: dict) -> bool:
    try:
        return load_config_json(folder / "config.json") == hf_config
    except (OSError, ValueError):
        return False


__all__ = ["prepare_base_model", "register_builder", "BUILDERS"]
