"""nemo-cascade: Cascade RL on Megatron-Core + vLLM."""
