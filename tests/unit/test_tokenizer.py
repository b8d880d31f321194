"""Tiny tokenizer: offline, deterministic, loadable by AutoTokenizer, lossless, ChatML specials
atomic."""
import json

import pytest

from nemo_cascade.data.chat import render
from nemo_cascade.data.generated import sft_pairs
from nemo_cascade.tooling.demo_data.arithmetic import arithmetic
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer, default_corpus


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_tok")
    build_tiny_tokenizer(out)
    return out


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tok_dir))


def test_saved_folder_is_an_hf_tokenizer(tok_dir, tok):
    cfg = json.loads((tok_dir / "tokenizer_config.json").read_text())
    assert cfg["eos_token"] == "<|im_end|>" and cfg["pad_token"] == "<|endoftext|>"
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.eos_token_id != tok.pad_token_id
    assert len(tok) <= 512


def test_build_is_deterministic(tmp_path, tok_dir):
    build_tiny_tokenizer(tmp_path)
    assert (tmp_path / "tokenizer.json").read_bytes() == (tok_dir / "tokenizer.json").read_bytes()


def test_round_trip_every_synthetic_text(tok):
    texts = default_corpus() + ["", "  leading and trailing  ", "ünïcödé ≠ ∑ 😀", "tab\tand\r\nCRLF",
                                "<think>\nx\n</think>\n\ny", "a<|im_end|>b"]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text, text


@pytest.mark.parametrize("special",
                         ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"])
def test_specials_are_single_tokens(tok, special):
    ids = tok.encode(f"x{special}y", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(ids).count(special) == 1


def test_think_markers_survive_skip_special_tokens(tok):
    # vLLM detokenises with skip_special_tokens=True; the verifiers still need <think>/</think>.
    ids = tok.encode("<think>a</think>b<|im_end|>", add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == "<think>a</think>b"


def test_digits_are_single_tokens(tok):
    pieces = tok.convert_ids_to_tokens(tok.encode("12345 + 678", add_special_tokens=False))
    digits = [p for p in pieces if any(c.isdigit() for c in p)]
    assert digits == list("12345678")


def test_no_special_tokens_added_by_encode(tok):
    text = render([{"role": "user", "content": "hi"}], "think")
    ids = tok.encode(text, add_special_tokens=False)
    assert ids == tok.encode(text)  # nothing prepended/appended by a post-processor
    assert tok.convert_ids_to_tokens(ids)[0] == "<|im_start|>"


@pytest.mark.parametrize("mode", ["think", "no_think"])
def test_apply_chat_template_equals_render(tok, mode):
    rows = arithmetic("train", 3, seed=1)
    messages = [{"role": "system", "content": "Be brief."}]
    for (user, response) in sft_pairs(rows):
        messages += user + [{"role": "assistant", "content": response}]
    messages = messages[:-1]  # end on a user turn
    got = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, mode=mode)
    assert got == render(messages, mode)
    default = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert default == render(messages, "no_think", add_generation_prompt=False)


def test_rejects_tiny_vocab(tmp_path):
    with pytest.raises(ValueError):
        build_tiny_tokenizer(tmp_path, vocab_size=100)


def test_custom_corpus_and_vocab(tmp_path):
    hf = build_tiny_tokenizer(tmp_path, corpus_texts=["hello world"] * 50 + ["goodbye world"] * 50,
                              vocab_size=300)
    assert len(hf) <= 300
    assert len(hf.encode("hello world", add_special_tokens=False)) < len("hello world")
