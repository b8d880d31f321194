"""Data loading: templating + tokenisation, one-line errors for bad rows, resumable prompt stream."""
import json

import pytest

from nemo_cascade.config import Data
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, PromptStream, load_prompts, load_sft_examples
from nemo_cascade.data.synthetic import arithmetic
from nemo_cascade.data.tokenizer import build_tiny_tokenizer
from nemo_cascade.types import Prompt


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def _jsonl(tmp_path, lines, name="rows.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    return path


def test_synthetic_prompts_are_templated_without_extra_specials(tok):
    data = Data(source="synthetic:arithmetic", size=8, split="test", seed=5)
    prompts = load_prompts(data, tok, "think", "math", 512)
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
    prompts = load_prompts(Data(source=str(path)), tok, "no_think", "math", 512)
    assert [p.uid for p in prompts] == ["a", f"{path}:2", f"{path}:3"]
    assert [p.label for p in prompts] == ["2", "4", {"tests": []}]
    assert tok.decode(prompts[0].prompt_tokens) == render([{"role": "user", "content": "What is 1 + 1?"}],
                                                          "no_think")
    assert tok.decode(prompts[2].prompt_tokens).startswith("<|im_start|>system\ns<|im_end|>\n")
    assert len(load_prompts(Data(source=str(path), size=1), tok, "no_think", "math", 512)) == 1


def test_long_prompts_are_dropped_and_counted(tok, tmp_path):
    path = _jsonl(tmp_path, [{"question": "short", "answer": "1"}, {"question": "long " * 200, "answer": "1"}])
    prompts = load_prompts(Data(source=str(path)), tok, "no_think", "math", 64)
    assert len(prompts) == 1 and prompts.dropped_too_long == 1
    with pytest.raises(DataError, match="no usable rows"):
        load_prompts(Data(source=str(path)), tok, "no_think", "math", 4)


@pytest.mark.parametrize("line, field", [
    ('{"question": "q", "answer": "1"', "invalid JSON"),
    ('[1, 2]', "JSON object"),
    ('{"answer": "1"}', "'question', 'prompt' or 'messages'"),
    ('{"question": 5, "answer": "1"}', "'question'"),
    ('{"question": "q"}', "'answer' or 'label'"),
    ('{"question": "q", "answer": ["1"]}', "'answer'"),
    ('{"question": "q", "answer": "1", "uid": 1.5}', "'uid'"),
    ('{"messages": "hi", "answer": "1"}', "'messages'"),
    ('{"messages": [{"role": "bot", "content": "x"}], "answer": "1"}', "'messages[0]'"),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "answer": "1"}',
     "'messages'"),
])
def test_malformed_rows_give_one_line_naming_line_and_field(tok, tmp_path, line, field):
    path = _jsonl(tmp_path, ['{"question": "ok", "answer": "1"}', line])
    with pytest.raises(DataError) as err:
        load_prompts(Data(source=str(path)), tok, "no_think", "math", 512)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:2: ") and field in msg


def test_missing_file_and_unknown_synthetic(tok, tmp_path):
    with pytest.raises(DataError, match=f"^data file not found: {tmp_path / 'nope.jsonl'}$"):
        load_prompts(Data(source=str(tmp_path / "nope.jsonl")), tok, "no_think", "math", 512)
    with pytest.raises(DataError, match="unknown synthetic set 'nope'"):
        load_prompts(Data(source="synthetic:nope"), tok, "no_think", "math", 512)
    with pytest.raises(DataError, match="exceeds"):
        load_prompts(Data(source="synthetic:arithmetic", size=10**6), tok, "no_think", "math", 512)


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


def _prompts(n):
    return [Prompt(prompt_tokens=[i], domain="math", label=str(i), uid=f"u{i}") for i in range(n)]


def test_stream_visits_every_prompt_once_per_epoch():
    stream = PromptStream(_prompts(10), seed=3)
    first, second = stream.next_batch(10), stream.next_batch(10)
    assert sorted(p.uid for p in first) == sorted(p.uid for p in second) == sorted(f"u{i}" for i in range(10))
    assert [p.uid for p in first] != [p.uid for p in second]  # reshuffled per epoch (seed + epoch)
    assert stream.epoch == 1
    assert [p.uid for p in PromptStream(_prompts(10), seed=3).next_batch(10)] == [p.uid for p in first]
    assert [p.uid for p in PromptStream(_prompts(10), seed=4).next_batch(10)] != [p.uid for p in first]


def test_stream_resume_draws_the_same_batches():
    prompts = _prompts(7)  # batches of 3 cross epoch boundaries
    ref = PromptStream(prompts, seed=11)
    batches = [[p.uid for p in ref.next_batch(3)] for _ in range(5)]
    run = PromptStream(prompts, seed=11)
    run.next_batch(3), run.next_batch(3)
    state = json.loads(json.dumps(run.state_dict()))  # survives a checkpoint round trip
    resumed = PromptStream(prompts, seed=11)
    resumed.load_state_dict(state)
    assert [[p.uid for p in resumed.next_batch(3)] for _ in range(3)] == batches[2:]


def test_stream_refuses_other_data():
    state = PromptStream(_prompts(7), seed=0).state_dict()
    with pytest.raises(DataError, match="resume"):
        PromptStream(_prompts(8), seed=0).load_state_dict(state)
    with pytest.raises(DataError, match="no prompts"):
        PromptStream([], seed=0)
