"""The chat template of an HF model folder: the one the model was trained with, written in both
places a reader may look (``tokenizer_config.json`` and ``chat_template.jinja``), for the stage
exports and released checkpoints.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..convert.hf_io import write_chat_template
from .chat import JINJA_TEMPLATES


def set_chat_template(folder: str | os.PathLike, style: str) -> None:
    """Make an HF folder's chat template ``style``'s (data.chat.JINJA_TEMPLATES): in
    tokenizer_config.json (older readers only look there) and in ``chat_template.jinja`` (newer
    transformers prefer it), so both hold the template the model was trained with."""
    write_chat_template(folder, JINJA_TEMPLATES[style])


def tokenizer_digest(folder: Path) -> str:
    """sha256 of an HF folder's tokenizer model (tokenizer.json's vocabulary and merges), empty
    without one: two folders with equal digests map text to the same token ids."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return ""
    model = json.loads(path.read_text())["model"]
    return hashlib.sha256(json.dumps(model, sort_keys=True).encode()).hexdigest()


__all__ = ["set_chat_template", "tokenizer_digest"]
