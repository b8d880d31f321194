"""One model shape (convert/shape.py) for conversion, planner and engine start; one naming authority
(convert/table.Table) for every parameter name, tied embeddings included."""
import math
from dataclasses import replace

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.tooling import plan
from nemo_cascade.convert import table
from nemo_cascade.convert.shape import ModelFilesError, read_hf_config
from nemo_cascade.convert.hf_io import SafetensorsReader
from nemo_cascade.convert.shape import ModelShape
from nemo_cascade.rollout import engine_start as ES


def _numel(folder) -> int:
    reader = SafetensorsReader(folder)
    return sum(math.prod(reader.get(n).shape) for n in reader.names())


def _one_shape_everywhere(folder) -> ModelShape:
    """The actor's, the planner's and the engine's reading of one folder: one type, one geometry,
    and the parameter count of the tensors actually in it."""
    actor = read_hf_config(folder)
    planned, _ = plan.resolve_shape(config.Model(hf_path=str(folder)))
    served = ES.read_served_shape(str(folder))
    assert type(actor) is type(planned) is type(served) is ModelShape
    assert actor == planned == served
    assert ES.model_positions(served) == actor.max_position_embeddings
    assert actor.params() == _numel(folder)
    return actor


def test_named_shape_is_the_type_read_from_config_json(tmp_path):
    """The planner's tiny-qwen3 preset is what demo_data/tiny_models.py builds: same type, equal
    (its vocabulary is the tokenizer's upper bound), and its parameter count is the real folder's
    (tied: no lm_head.weight in it)."""
    from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3_cascade

    folder = build_tiny_qwen3_cascade(tmp_path / "tiny", seed=0)
    read = _one_shape_everywhere(folder)
    preset = plan.PRESETS["tiny-qwen3"]
    assert (isinstance(preset, ModelShape) and read.tied_embeddings
            and read.vocab_size <= preset.vocab_size)
    same_vocab = replace(preset, vocab_size=read.vocab_size)
    assert read == same_vocab, "the preset describes the model demo_data/tiny_models.py builds"
    assert same_vocab.params() == _numel(folder)


@pytest.mark.slow
def test_smollm2_shape_counts_its_real_parameters(tmp_path):
    """SmolLM2-135M (Llama, tied, 30 layers): every reader agrees and counts the file's 134.5M
    parameters."""
    from nemo_cascade.tooling.demo_data.packaged import extract_smollm2

    shape = _one_shape_everywhere(extract_smollm2(tmp_path / "smollm2"))
    assert (shape.arch, shape.tied_embeddings, shape.num_layers) == ("llama", True, 30)


def _shape(tied: bool) -> ModelShape:
    return ModelShape("t", vocab_size=32, hidden_size=8, ffn_hidden_size=16, num_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=4,
                      tied_embeddings=tied)


def test_tied_embeddings_are_decided_by_the_table():
    tied, untied = table.table_for(_shape(True)), table.table_for(_shape(False))
    assert "lm_head.weight" not in tied.by_hf and "lm_head.weight" in untied.by_hf
    assert (tied.engine_aliases == {"lm_head.weight": "model.embed_tokens.weight"}
            and untied.engine_aliases == {})
    assert tied.megatron_copies == {"output_layer.weight": "embedding.word_embeddings.weight"}
    assert untied.megatron_copies == {}
    rm = table.table_for(_shape(True), head="score")  # a reward model's head is never the embedding
    assert rm.engine_aliases == {} and rm.megatron_copies == {} and "score.weight" in rm.by_hf
    # a tied checkpoint that carries lm_head.weight anyway, and saved rotary buffers, are known, not
    # read
    tied.check_known_hf(
        list(tied.by_hf) + ["lm_head.weight", "model.layers.1.self_attn.rotary_emb.inv_freq"], "m")


def test_full_shapes_and_stages_come_from_the_table():
    conversion = table.table_for(_shape(False))
    shapes = {e.megatron: conversion.full_shape(e) for e in conversion.entries}
    assert shapes["embedding.word_embeddings.weight"] == (32, 8) == shapes["output_layer.weight"]
    assert shapes["decoder.layers.1.self_attention.linear_qkv.weight"] == ((2 + 2) * 4, 8)
    assert shapes["decoder.layers.0.mlp.linear_fc1.weight"] == (32, 8)
    assert shapes["decoder.layers.0.self_attention.q_layernorm.weight"] == (4,)
    stages = {e.megatron: conversion.owner_stage(e, 2) for e in conversion.entries}
    assert stages["embedding.word_embeddings.weight"] == 0 and stages["output_layer.weight"] == 1
    assert (stages["decoder.final_layernorm.weight"] == 1
            and stages["decoder.layers.1.mlp.linear_fc2.weight"] == 1)


def test_unknown_tensor_is_refused_in_one_line():
    conversion = table.table_for(_shape(False))
    names = list(conversion.by_hf) + ["model.layers.0.self_attn.o_proj.bias"]
    with pytest.raises(table.UnknownTensorError) as err:
        conversion.check_known_hf(names, "m/model.safetensors")
    msg = str(err.value)
    assert (msg.startswith("m/model.safetensors: tensor 'model.layers.0.self_attn.o_proj.bias'")
            and "\n" not in msg)


def test_actor_loads_names_only_through_the_table(tmp_path):
    """An extra tensor in the folder whose name merely contains a known one
    (``…o_proj.weight_scale``) is refused with one line naming it, instead of being ignored or
    matched by substring."""
    from safetensors.torch import load_file, save_file

    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=64, arch="llama", tie_word_embeddings=False, seed=1)
    file = next(tmp_path.glob("*.safetensors"))
    tensors = load_file(str(file))
    tensors["model.layers.0.self_attn.o_proj.weight_scale"] = torch.ones(1)
    save_file(tensors, str(file), metadata={"format": "pt"})
    with pytest.raises(ModelFilesError) as err:
        MegatronActor(str(tmp_path), config.Parallel())
    assert ("'model.layers.0.self_attn.o_proj.weight_scale'" in str(err.value)
            and "\n" not in str(err.value))
