"""The release's model card: hub front matter, the paper's numbers beside the run's, and the offline
upload check."""
import json

import pytest
from huggingface_hub import ModelCard

from nemo_cascade.tooling import model_card


def _base(tmp_path, card: str = "", config: dict | None = None, name: str = "base"):
    base = tmp_path / name
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps(config or {"architectures": ["Qwen3ForCausalLM"]}))
    if card:
        (base / "README.md").write_text(card)
    return base


def test_license_and_base_model_come_from_the_base_folder(tmp_path):
    base = _base(tmp_path,
                 "---\nlicense: apache-2.0\npipeline_tag: text-generation\n---\n# Qwen3\n",
                 name="hub/models--Qwen--Qwen3-8B-Base/snapshots/abc")
    meta = model_card.card_metadata(base, datasets=["nvidia/Nemotron-Cascade-RL-Math"])
    assert meta["license"] == "apache-2.0" and meta["base_model"] == "Qwen/Qwen3-8B-Base"
    assert (meta["datasets"] == ["nvidia/Nemotron-Cascade-RL-Math"]
            and meta["pipeline_tag"] == "text-generation")
    other = _base(tmp_path, "---\nlicense: other\nlicense_name: nvidia-open-model-license\n"
                            "license_link: https://example.com/l\n---\n",
                  {"_name_or_path": "nvidia/Nemotron-Cascade-8B"}, "o")
    meta = model_card.card_metadata(other)
    assert meta["base_model"] == "nvidia/Nemotron-Cascade-8B"
    assert (meta["license"], meta["license_name"]) == ("other", "nvidia-open-model-license")


def test_defaults_and_overrides(tmp_path):
    base = _base(tmp_path)  # a built model: no card, no hub id
    meta = model_card.card_metadata(base)
    assert meta["license"] == "unknown" and "base_model" not in meta and "datasets" not in meta
    meta = model_card.card_metadata(base, license="mit",
                                    base_model="HuggingFaceTB/SmolLM2-135M-Instruct",
                                    reward_model=True)
    assert meta["license"] == "mit" and meta["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert meta["pipeline_tag"] == "text-classification"


@pytest.mark.parametrize("kwargs,field", [({"base_model": "Qwen3-8B-Base"}, "--base-model"),
                                          ({"datasets": ["nvidia//x"]}, "--dataset"),
                                          ({"license": "Apache 2.0"}, "--license")])
def test_bad_ids_are_one_line(tmp_path, kwargs, field):
    with pytest.raises(ValueError) as e:
        model_card.card_metadata(_base(tmp_path), **kwargs)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_the_paper_comparison_shows_matching_benchmarks_only():
    history = [("base", {"ifeval": (70.0, 1.0)}),
               ("swe", {"ifeval": (88.5, 1.2), "aime25": (79.0, 2.0), "mbpp": (60.0, 2.0)})]
    lines = model_card.paper_comparison("nemotron-cascade-8b", history)
    assert "| ifeval | 88.5 ± 1.2 | 90.2 |" in lines and "| aime25 | 79.0 ± 2.0 | 80.1 |" in lines
    assert not any("mbpp" in line for line in lines)
    assert model_card.paper_comparison("nemotron-cascade-8b-from-rlhf", history) == lines
    assert (model_card.paper_comparison("tiny", history) == []
            and model_card.paper_comparison("nemotron-cascade-8b", []) == [])


def test_a_written_card_passes_the_offline_check_and_problems_are_named(tmp_path):
    folder = tmp_path / "release"
    folder.mkdir()
    meta = model_card.card_metadata(_base(tmp_path), license="apache-2.0",
                                    base_model="Qwen/Qwen3-8B-Base",
                                    datasets=["nvidia/Nemotron-Cascade-RL-Math"])
    model_card.write_model_card(folder, title="x", intro=["trained"], report_markdown="| a | b |\n",
                                metadata=meta)
    assert set(model_card.check_release_folder(folder)) == {
        "config.json: missing (transformers cannot load the model without it)",
        "no weights: neither model.safetensors nor model.safetensors.index.json",
        "no tokenizer: neither tokenizer.json nor tokenizer.model"}
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model-00001-of-00001.safetensors").write_bytes(b"x")
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "model-00001-of-00001.safetensors"}}))
    card = ModelCard.load(folder / "README.md")
    assert card.data.base_model == "Qwen/Qwen3-8B-Base" and card.data.license == "apache-2.0"
    assert model_card.check_release_folder(folder) == []
    (folder / "model-00001-of-00001.safetensors").unlink()
    (folder / "shard.tmp").write_bytes(b"")
    (folder / "README.md").write_text("# no front matter\n")
    problems = model_card.check_release_folder(folder)
    assert any("without 'license'" in p for p in problems)
    assert any("names model-00001-of-00001.safetensors, which is missing" in p for p in problems)
    assert any(p.startswith("shard.tmp") for p in problems)
