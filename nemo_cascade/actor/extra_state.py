"""The actor's module extra state: what ``state_dict()`` stores under ``<module>._extra_state``
besides parameters and buffers, and what a checkpoint must therefore carry besides the weights.

Transformer Engine keeps its FP8 scaling state there — for delayed scaling the scales and amax
history of every FP8 GEMM, and the recipe — as a serialized uint8 tensor (empty when a module holds
none). Without it a resumed FP8 run would start from fresh scales and quantize differently from the
run it continues. On the local (CPU) spec only megatron's linear layers have the hook, and they
answer None.
"""
from __future__ import annotations

import logging

import torch
from torch.nn.modules.module import _EXTRA_STATE_KEY_SUFFIX

log = logging.getLogger(__name__)


def _has_extra_state(module: torch.nn.Module) -> bool:
    # The test Module.state_dict applies before it stores ``_extra_state``.
    return type(module).get_extra_state is not torch.nn.Module.get_extra_state


def key(module_name: str) -> str:
    """The state-dict key of a module's extra state (the root module's is the bare suffix)."""
    return f"{module_name}.{_EXTRA_STATE_KEY_SUFFIX}" if module_name else _EXTRA_STATE_KEY_SUFFIX


def keys(model: torch.nn.Module) -> list[str]:
    """The keys :func:`collect` returns, without serializing anything."""
    return [key(name) for name, module in model.named_modules() if _has_extra_state(module)]


def collect(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``{state-dict key: extra state}`` of every module of ``model`` that has one (TE copies its
    FP8 state to the CPU here; megatron's own linear layers answer None, for state-dict
    compatibility with TE). Any other type is refused: TE's pre-2023 ``io.BytesIO`` form needs an
    unsafe unpickle to load (TE itself refuses it by default), and the checkpoint files load with
    ``weights_only``."""
    out = {}
    for name, module in model.named_modules():
        if _has_extra_state(module):
            value = module.get_extra_state()
            if value is not None and not isinstance(value, torch.Tensor):
                raise ValueError(f"{name}.get_extra_state() returned {type(value).__name__}, "
                                 "expected a tensor (update transformer_engine)")
            out[key(name)] = value
    return out


def check(model: torch.nn.Module, saved: dict | None) -> str | None:
    """What makes ``saved`` (a checkpoint's extra state, None if it has none) unfit for ``model``,
    or None. A checkpoint written before extra state was kept is accepted with one warning: its
    weights resume, FP8 scaling starts afresh."""
    want = set(keys(model))
    if saved is None:
        if any(v is not None and v.numel() for v in collect(model).values()):
            log.warning("checkpoint has no module extra state (FP8 scaling state): %d modules "
                        "start from fresh scaling state", len(want))
        return None
    names = set(saved) if isinstance(saved, dict) else set()
    if not isinstance(saved, dict) or names != want:
        return (f"module extra state differs from the model (missing {sorted(want - names)[:5]}, "
                f"unexpected {sorted(names - want)[:5]}; saved with another model.fp8 or "
                "model.transformer_impl?)")
    return None


def restore(model: torch.nn.Module, saved: dict | None) -> None:
    """Give every module its saved extra state (``set_extra_state``); keys as :func:`check` accepted
    them."""
    if not saved:
        return
    for name, module in model.named_modules():
        if key(name) in saved and saved[key(name)] is not None:
            module.set_extra_state(saved[key(name)])


__all__ = ["key", "keys", "collect", "check", "restore"]
