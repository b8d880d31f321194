"""SFT learns every assistant turn of a multi-turn row (paper §3: the tool-calling set's turns are
its targets), each after exactly the prompt the served template gives that turn; released
tool-calling rows keep their tool turns so they render as served."""

import json
from pathlib import Path

import pytest
import torch

from nemo_cascade.algorithms.packing import pack_sft_batch
from nemo_cascade.config import Data
from nemo_cascade.data.chat import render
from nemo_cascade.data.loader import DataError, load_sft_examples
from nemo_cascade.data.sft_rows import RowShapeError, parse_sft_row, sft_segments
from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer
from nemo_cascade.tooling.prepare import released

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _call(city):
    return [
        {
            "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": city})},
        }
    ]


ROW = {
    "tools": TOOLS,
    "messages": [  # three assistant turns: two calls, then the answer
        {"role": "system", "content": "You help travellers."},
        {"role": "user", "content": "Is it warmer in Oslo or Rome?", "mode": "think"},
        {
            "role": "assistant",
            "content": "<think>Ask for Oslo.</think>",
            "tool_calls": _call("Oslo"),
        },
        {"role": "tool", "content": "4 C"},
        {"role": "assistant", "content": None, "tool_calls": _call("Rome")},
        {"role": "tool", "content": "19 C"},
        {"role": "assistant", "content": "<think>19 > 4</think>Rome is warmer."},
    ],
}
ASSISTANT = [2, 4, 6]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    folder = tmp_path_factory.mktemp("tok")
    build_tiny_tokenizer(folder)
    return AutoTokenizer.from_pretrained(folder)


def _learned(segments):
    return segments[1::2]


def test_every_assistant_turn_is_learned_after_its_served_prompt(tok):
    messages, tools = parse_sft_row(ROW, "row")
    segments = sft_segments(messages, tools, "think", "cascade1")
    assert len(segments) == 6
    for k, i in enumerate(ASSISTANT):
        served = tok.apply_chat_template(
            messages[:i], tools=TOOLS, tokenize=False, add_generation_prompt=True, mode="think"
        )  # the exported template, as vLLM serves it
        assert (
            "".join(segments[: 2 * k + 1]) == served == render(messages[:i], "think", tools=TOOLS)
        )
    assert _learned(segments)[0] == (
        '<think>Ask for Oslo.</think>\n<tool_call>\n{"name": "weather", '
        '"arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>'
    )
    assert _learned(segments)[2] == "<think>19 > 4</think>Rome is warmer.<|im_end|>"
    assert " /think" not in segments[2] and "<tool_response>\n4 C\n</tool_response>" in segments[2]


@pytest.mark.parametrize("cache", [False, True])
def test_the_loss_covers_every_assistant_turn_and_no_tool_result(tok, tmp_path, cache):
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    (example,) = load_sft_examples(Data(source=str(path), cache=cache), tok, "think", 4096)
    messages, _ = parse_sft_row(ROW, "row")
    expected = sft_segments(messages, TOOLS, "think", "cascade1")
    assert [tok.decode(ids) for ids in example] == expected
    batch = pack_sft_batch([example], 4096, 0)
    learned = batch.tokens_B_T[batch.loss_mask_B_T > 0].tolist()
    assert learned == [t for ids in _learned(example) for t in ids]
    (last,) = load_sft_examples(
        Data(source=str(path), cache=cache, sft_turns="last"), tok, "think", 4096
    )
    assert len(last) == 2 and last[1] == example[-1]
    assert int(batch.loss_mask_B_T.sum()) > 2 * len(last[1])


def test_truncation_keeps_the_mask_of_the_segments_it_keeps():
    example = ([1, 2, 3], [4, 5], [6, 7, 8], [9, 10, 11])
    for limit, mask in (
        (12, [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1]),
        (9, [0, 0, 0, 1, 1, 0, 0, 0, 1]),
        (7, [0, 0, 0, 1, 1, 0, 0]),
    ):
        batch = pack_sft_batch([example], limit, 0)
        assert batch.loss_mask_B_T[0, : len(mask)].tolist() == mask
    two = pack_sft_batch([([1, 2], [3, 4]), example], 16, 0)  # packed after another example
    assert two.loss_mask_B_T[0].tolist() == [0, 0, 1, 1] + [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1]
    assert torch.equal(two.tokens_B_T[0, 4:15], torch.arange(1, 12))


def test_a_turn_the_template_shows_otherwise_in_history_stays_context():
    """cascade2 no_think generates after an empty think block the history does not show: only the
    last turn's served prompt is exact, so the earlier answers are context (docs/recipes.md,
    decided)."""
    chat = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    segments = sft_segments(chat, None, "no_think", "cascade2")
    assert len(segments) == 2 and segments[0] == render(chat[:3], "no_think", "cascade2")
    assert len(sft_segments(chat, None, "think", "cascade2")) == 4
    assert len(sft_segments(chat, None, "no_think", "cascade1")) == 4


def test_released_tool_rows_render_as_served(tok):
    raw = {
        "tools": json.dumps(TOOLS),
        "messages": [
            {"role": "user", "content": "Weather in Oslo? /think"},
            {"role": "assistant", "content": "", "tool_calls": _call("Oslo")},
            {"role": "tool", "content": "4 C"},
            {"role": "assistant", "content": "<think>ok</think>4 C."},
        ],
    }
    row = released.sft_row(raw, "r")
    assert row["tools"] == TOOLS and row["messages"][2] == {"role": "tool", "content": "4 C"}
    messages, tools = parse_sft_row(row, "r")
    text = "".join(sft_segments(messages, tools, "no_think", "cascade1"))
    assert text.count(" /think") == 1 and " /no_think" not in text  # the user's flag only
    served = tok.apply_chat_template(
        messages[:3], tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert text == served + "<think>ok</think>4 C.<|im_end|>"
    assert "# Tools\n\nYou may call one or more functions" in text


@pytest.mark.parametrize(
    "messages, message",
    [
        (
            [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}],
            "field 'messages[1].role' must be one of system, user, assistant, tool, got 'robot'",
        ),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "tool", "content": "1"},
                {"role": "assistant", "content": "y"},
            ],
            None,
        ),
    ],
)
def test_released_bad_tool_rows_are_one_line(messages, message):
    if (
        message is None
    ):  # converts, then the loader's own check refuses it (a counted bad row at prepare)
        row = released.sft_row({"messages": messages}, "r")
        with pytest.raises(
            RowShapeError, match=r"^r: field 'messages\[1\]' is a tool result that follows no "
        ):
            parse_sft_row(row, "r")
        return
    with pytest.raises(ValueError) as e:
        released.sft_row({"messages": messages}, "r")
    assert str(e.value) == message


def test_a_tool_result_without_its_call_names_the_row(tok, tmp_path):
    path = tmp_path / "sft.jsonl"
    bad = {
        "messages": [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "calling"},
            {"role": "tool", "content": "1"},
            {"role": "assistant", "content": "y"},
        ]
    }
    path.write_text(json.dumps(ROW) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(
        DataError,
        match=rf"^{path}:2: field 'messages\[2\]' is a tool result that follows no "
        "assistant turn with tool_calls$",
    ):
        load_sft_examples(Data(source=str(path)), tok, "think", 4096)


@pytest.mark.parametrize("cache", [False, True])
def test_keep_mode_keeps_the_rows_answered_in_that_mode_and_counts_the_rest(tok, tmp_path, cache):
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"q{i}", **({"mode": m} if m else {})},
                {"role": "assistant", "content": f"a{i}"},
            ]
        }
        for i, m in enumerate(["think", "no_think", None, "no_think"])
    ]
    path = tmp_path / "sft.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    everything = load_sft_examples(Data(source=str(path), cache=cache), tok, "think", 4096)
    kept = load_sft_examples(
        Data(source=str(path), cache=cache, keep_mode="think"), tok, "think", 4096
    )
    assert len(everything) == 4 and list(kept) == [
        everything[0],
        everything[2],
    ]  # no key: the stage's mode
    assert kept.dropped_other_mode == 2
    with pytest.raises(
        DataError, match=r"no usable rows \(.*; 1 not in data.keep_mode=no_think\)$"
    ):
        load_sft_examples(
            Data(source=str(path), cache=cache, keep_mode="no_think", size=1), tok, "think", 4096
        )


def test_the_thinking_recipes_learn_the_thinking_answers_only():
    from nemo_cascade.tooling.cli import load_recipe

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    for name in ("nemotron_cascade_8b_thinking.py", "nemotron_cascade_14b_thinking.py"):
        sft = [s for s in load_recipe(f"{recipes / name}:with_sft").stages if s.kind == "sft"]
        assert len(sft) == 2 and all(s.data.keep_mode == "think" for s in sft), name
    unified = [
        s
        for s in load_recipe(f"{recipes / 'nemotron_cascade_8b.py'}:with_sft").stages
        if s.kind == "sft"
    ]
    assert all(s.data.keep_mode == "" for s in unified)


def test_the_committed_multi_turn_blend_is_what_the_tool_writes():
    """data/smollm2/sft_multiturn.jsonl (recipes/smollm2.py:sft_turns): every row of the SFT blend,
    joined into conversations of one to three turns, regenerated here byte for byte."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "make_multiturn_sft.py"
    spec = importlib.util.spec_from_file_location("make_multiturn_sft", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    pairs = tool.blend_pairs()
    chats = tool.conversations(pairs)
    assert tool.OUT.read_text() == "".join(
        json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in chats
    )
    assert {len(c["messages"]) // 2 for c in chats} == {1, 2, 3}
    assert sum(len(c["messages"]) // 2 for c in chats) == len(pairs) == 854
