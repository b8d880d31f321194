"""Rollout: the colocated vLLM engine (``vllm.py``). Importing this package does not import vLLM."""
from .vllm import RolloutEngine

__all__ = ["RolloutEngine"]
