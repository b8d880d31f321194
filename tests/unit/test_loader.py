"""Data loading: templating + tokenisation, one-line errors for bad rows (the prompt stream:
test_prompt_stream.py)."""
import json

import pytest

from nemo_cascade.config import Data
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_prompts, load_sft_examples
from nemo_cascade.rewards import get_domain
from nemo_cascade.tooling.demo_data.arithmetic import arithmetic
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _jsonl(tmp_path, lines, name="rows.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    return path


def test_synthetic_prompts_are_templated_without_extra_specials(tok):
    data = Data(source="synthetic:arithmetic", size=8, split="test", seed=5)
    prompts = load_prompts(data, tok, "think", get_domain("math"), 512)
    rows = arithmetic("test", 8, seed=5)
    assert len(prompts) == 8 and prompts.dropped_too_long == 0
    for p, row in zip(prompts, rows):
        text = render([{"role": "user", "content": row["question"]}], "think")
        assert p.prompt_tokens == tok.encode(text, add_special_tokens=False)
        assert tok.decode(p.prompt_tokens) == text
        assert (p.mode, p.domain, p.uid, p.label) == ("think", "math", row["uid"], row["answer"])
        assert p.prompt_tokens[0] == tok.convert_tokens_to_ids("<|im_start|>")
        assert p.prompt_tokens.count(tok.eos_token_id) == 1  # only the user turn's <|im_end|>


def test_jsonl_prompt_shapes(tok, tmp_path):
    path = _jsonl(tmp_path, [
        {"question": "What is 1 + 1?", "answer": "2", "uid": "a"},
        {"prompt": "What is 2 + 2?", "answer": 4},
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
         "label": {"tests": []}},
        "",
    ])
    # the rows' own text (the math request is test_math_prompt.py's subject)
    prompts = load_prompts(Data(source=str(path), math_instruction=""), tok, "no_think",
                           get_domain("math"), 512)
    assert [p.uid for p in prompts] == ["a", f"{path}:2", f"{path}:3"]
    assert [p.label for p in prompts] == ["2", "4", {"tests": []}]
    assert tok.decode(prompts[0].prompt_tokens) == render(
        [{"role": "user", "content": "What is 1 + 1?"}], "no_think")
    assert tok.decode(prompts[2].prompt_tokens).startswith("<|im_start|>system\ns<|im_end|>\n")
    assert len(load_prompts(Data(source=str(path), size=1), tok, "no_think", get_domain("math"),
                            512)) == 1


def test_long_prompts_are_dropped_and_counted(tok, tmp_path):
    path = _jsonl(tmp_path, [{"question": "short", "answer": "1"},
                             {"question": "long " * 200, "answer": "1"}])
    prompts = load_prompts(Data(source=str(path)), tok, "no_think", get_domain("math"), 64)
    assert len(prompts) == 1 and prompts.dropped_too_long == 1
    with pytest.raises(DataError, match="no usable rows"):
        load_prompts(Data(source=str(path)), tok, "no_think", get_domain("math"), 4)


@pytest.mark.parametrize("line, field", [
    ('{"question": "q", "answer": "1"', "invalid JSON"),
    ('[1, 2]', "JSON object"),
    ('{"answer": "1"}', "expected one of ['prompt', 'question', 'problem', 'messages']"),
    ('{"question": 5, "answer": "1"}', "'question'"),
    ('{"question": "q"}', "expected field 'answer'"),
    ('{"question": "q", "answer": ["1"]}', "'answer'"),
    ('{"question": "q", "answer": "1", "uid": 1.5}', "'uid'"),
    ('{"messages": "hi", "answer": "1"}', "'messages'"),
    ('{"messages": [{"role": "bot", "content": "x"}], "answer": "1"}', "'messages[0]'"),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], '
     '"answer": "1"}', "'messages'"),
])
def test_malformed_rows_give_one_line_naming_line_and_field(tok, tmp_path, line, field):
    path = _jsonl(tmp_path, ['{"question": "ok", "answer": "1"}', line])
    with pytest.raises(DataError) as err:
        load_prompts(Data(source=str(path)), tok, "no_think", get_domain("math"), 512)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:2: ") and field in msg


def test_missing_file_and_unknown_synthetic(tok, tmp_path):
    with pytest.raises(DataError, match=f"^data file not found: {tmp_path / 'nope.jsonl'}$"):
        load_prompts(Data(source=str(tmp_path / "nope.jsonl")), tok, "no_think",
                     get_domain("math"), 512)
    with pytest.raises(DataError, match="unknown synthetic set 'nope'"):
        load_prompts(Data(source="synthetic:nope"), tok, "no_think", get_domain("math"), 512)
    with pytest.raises(DataError, match="exceeds"):
        load_prompts(Data(source="synthetic:arithmetic", size=10**6), tok, "no_think",
                     get_domain("math"), 512)


@pytest.mark.parametrize("mode", ["no_think", "think"])
def test_sft_examples_synthetic(tok, mode):
    examples = load_sft_examples(Data(source="synthetic:arithmetic", size=4), tok, mode, 512)
    assert len(examples) == 4
    for prompt_ids, response_ids in examples:
        assert response_ids[-1] == tok.eos_token_id and response_ids.count(tok.eos_token_id) == 1
        text = tok.decode(response_ids)
        assert "\\boxed{" in text and text.startswith("<think>") == (mode == "think")
        assert tok.decode(prompt_ids).endswith(f"/{mode}<|im_end|>\n<|im_start|>assistant\n")


def test_sft_examples_jsonl(tok, tmp_path):
    path = _jsonl(tmp_path, [
        {"question": "q1", "response": "r1"},
        {"messages": [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "r2"}]},
        {"question": "q3"},
    ])
    with pytest.raises(DataError, match=f"{path}:3: expected field 'response'"):
        load_sft_examples(Data(source=str(path)), tok, "no_think", 512)
    examples = load_sft_examples(Data(source=str(path), size=2), tok, "no_think", 512)
    assert [tok.decode(r) for _, r in examples] == ["r1<|im_end|>", "r2<|im_end|>"]
    assert tok.decode(examples[1][0]) == render([{"role": "user", "content": "q2"}], "no_think")


# ---------------------------------------------------- half-half modes (§4.3.2), chat style (§3.1.2)

@pytest.mark.parametrize("style", ["cascade1", "cascade2"])
def test_half_mode_templates_every_row_in_both_modes(tok, style):
    data = Data(source="synthetic:arithmetic", size=6, split="test", seed=5)
    prompts = load_prompts(data, tok, "half", get_domain("math"), 512, style)
    rows = arithmetic("test", 6, seed=5)
    assert len(prompts) == len(prompts.alternate) == 6
    for think, no_think, row in zip(prompts, prompts.alternate, rows):
        msgs = [{"role": "user", "content": row["question"]}]
        assert ((think.mode, no_think.mode) == ("think", "no_think")
                and think.uid == no_think.uid == row["uid"])
        assert tok.decode(think.prompt_tokens) == render(msgs, "think", style)
        assert tok.decode(no_think.prompt_tokens) == render(msgs, "no_think", style)
    text = tok.decode(prompts.alternate[0].prompt_tokens)
    if style == "cascade1":  # flags on the user turn, no empty think block (§3.1.2)
        assert (text.endswith(" /no_think<|im_end|>\n<|im_start|>assistant\n")
                and "<think>" not in text)
    else:  # Cascade 2: no flags, an empty think block opens a non-thinking answer ([P2] §3.1.2)
        assert text.endswith("<|im_start|>assistant\n<think></think>") and "/no_think" not in text
        assert "/think" not in tok.decode(prompts[0].prompt_tokens)
    assert load_prompts(data, tok, "think", get_domain("math"), 512).alternate is None


def test_chatml_style_is_plain_chatml_in_every_mode(tok):
    """chatml: an instruct model's own ChatML (SmolLM2): no mode flag, no think block, the mode
    changes nothing."""
    data = Data(source="synthetic:arithmetic", size=2, split="test", seed=5)
    row = arithmetic("test", 2, seed=5)[0]
    expected = f"<|im_start|>user\n{row['question']}<|im_end|>\n<|im_start|>assistant\n"
    for mode in ("think", "no_think"):
        assert tok.decode(load_prompts(data, tok, mode, get_domain("math"), 512,
                                       "chatml")[0].prompt_tokens) == expected


def test_half_mode_drops_a_row_when_either_templating_is_too_long(tok, tmp_path):
    path = _jsonl(tmp_path,
                  [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "q", "answer": "1"}])
    think_len = len(load_prompts(Data(source=str(path)), tok, "think", get_domain("math"),
                                 512)[0].prompt_tokens)
    no_think_len = len(load_prompts(Data(source=str(path)), tok, "no_think", get_domain("math"),
                                    512)[0].prompt_tokens)
    assert no_think_len > think_len  # " /no_think" is longer than " /think"
    assert len(load_prompts(Data(source=str(path)), tok, "think", get_domain("math"),
                            think_len)) == 2
    half = load_prompts(Data(source=str(path)), tok, "half", get_domain("math"), think_len)
    assert ([p.uid for p in half] == [p.uid for p in half.alternate] == [f"{path}:2"]
            and half.dropped_too_long == 1)


def test_bad_rows_are_skipped_and_counted_up_to_the_limit(tok, tmp_path, caplog):
    path = _jsonl(tmp_path, ['{"question": "ok", "answer": "1"}', '{"question": "no answer"}',
                             '{"problem": "fine too", "answer": 2}', '{"answer": "no prompt"}'])
    with pytest.raises(DataError,
                       match=r"rows.jsonl:2: expected field 'answer' "
                             r".*\(2 bad rows; data.max_bad_rows=1\)"):
        load_prompts(Data(source=str(path), max_bad_rows=1), tok, "no_think", get_domain("math"),
                     512)
    prompts = load_prompts(Data(source=str(path), max_bad_rows=2), tok, "no_think",
                           get_domain("math"), 512)
    assert [p.label for p in prompts] == ["1", "2"] and prompts.bad_rows == 2
    assert "skipped 2 bad rows" in caplog.text


def test_domain_synthetic_sets_load_with_their_labels(tok):
    from nemo_cascade.data.loader import load_sft_examples
    from nemo_cascade.rewards import VALIDATORS

    for name, domain in (("if_arithmetic", "ifeval"), ("code_arithmetic", "code"),
                         ("bugfix_arithmetic", "swe")):
        prompts = load_prompts(Data(source=f"synthetic:{name}", size=4), tok, "no_think",
                               get_domain(domain), 512,
                               validate_label=VALIDATORS[domain])
        assert len(prompts) == 4 and all(p.domain == domain for p in prompts)
        assert len(load_sft_examples(Data(source=f"synthetic:{name}", size=4), tok, "think",
                                     512)) == 4


def test_parquet_sources_read_like_jsonl(tok, tmp_path):
    """The released datasets ship parquet: a Nemotron-Cascade-RL-Math-shaped file (problem, answer)
    loads as math prompts; ``size`` limits the rows; a corrupt file is one line naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "math.parquet"
    pq.write_table(pa.table({"problem": ["What is 2 + 3?", "What is 7 - 4?", "What is 1 + 1?"],
                             "answer": ["5", "3", "2"]}), path)
    prompts = load_prompts(Data(source=str(path)), tok, "no_think", get_domain("math"), 256)
    assert [p.label for p in prompts] == ["5", "3", "2"] and prompts[0].uid == f"{path}:1"
    assert len(load_prompts(Data(source=str(path), size=2), tok, "no_think", get_domain("math"),
                            256)) == 2
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(DataError, match=r"bad.parquet: cannot read as parquet") as e:
        load_prompts(Data(source=str(bad)), tok, "no_think", get_domain("math"), 256)
    assert "\n" not in str(e.value)
