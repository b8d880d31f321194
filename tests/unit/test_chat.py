"""Chat template (paper §3.1.2): exact strings for both modes and styles, HF template equality,
split_thinking."""
import pytest

from nemo_cascade.data.chat import JINJA_TEMPLATE, JINJA_TEMPLATES, render, split_thinking

CONV = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "And 4 + 4?"},
]


def test_cascade1_no_think_multi_turn_exact():
    assert render(CONV, "no_think") == (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2 + 3? /no_think<|im_end|>\n"
        "<|im_start|>assistant\n5<|im_end|>\n"
        "<|im_start|>user\nAnd 4 + 4? /no_think<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_cascade1_think_multi_turn_exact():
    assert render(CONV, "think") == (
        "<|im_start|>system\nYou are helpful.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2 + 3? /think<|im_end|>\n"
        "<|im_start|>assistant\n5<|im_end|>\n"
        "<|im_start|>user\nAnd 4 + 4? /think<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_cascade1_has_no_empty_think_block_and_per_turn_switch():
    text = render(CONV, "no_think")
    assert "<think>" not in text  # §3.1.2: no empty think block in non-thinking mode
    mixed = [dict(CONV[1], mode="think"), CONV[2], CONV[3]]
    assert render(mixed, "no_think", add_generation_prompt=False) == (
        "<|im_start|>user\nWhat is 2 + 3? /think<|im_end|>\n"
        "<|im_start|>assistant\n5<|im_end|>\n"
        "<|im_start|>user\nAnd 4 + 4? /no_think<|im_end|>\n"
    )


def test_cascade2_style_exact():
    conv = CONV[1:]
    turns = ("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n"
             "<|im_start|>user\nAnd 4 + 4?<|im_end|>\n")
    assert render(conv, "no_think", style="cascade2") == \
        turns + "<|im_start|>assistant\n<think></think>"
    assert render(conv, "think", style="cascade2") == turns + "<|im_start|>assistant\n"


@pytest.mark.parametrize("bad", [
    ([{"role": "user", "content": "x"}], "maybe", "cascade1"),
    ([{"role": "user", "content": "x"}], "think", "cascade3"),
    ([{"role": "robot", "content": "x"}], "think", "cascade1"),
    ([{"role": "user", "content": None}], "think", "cascade1"),
])
def test_render_rejects_bad_input(bad):
    messages, mode, style = bad
    with pytest.raises(ValueError):
        render(messages, mode, style)


def _hf_render(messages, template=JINJA_TEMPLATE, **kwargs):
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[messages], chat_template=template, **kwargs)
    return rendered[0]


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("mode", ["think", "no_think", None])
def test_jinja_template_equals_render(mode, gen):
    kwargs = {} if mode is None else {"mode": mode}
    expected = render(CONV, mode or "no_think", add_generation_prompt=gen)  # default is no_think
    assert _hf_render(CONV, add_generation_prompt=gen, **kwargs) == expected


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("mode", ["think", "no_think", None])
def test_cascade2_jinja_template_equals_render(mode, gen):
    kwargs = {} if mode is None else {"mode": mode}
    expected = render(CONV, mode or "no_think", "cascade2", add_generation_prompt=gen)
    assert _hf_render(CONV, JINJA_TEMPLATES["cascade2"], add_generation_prompt=gen,
                      **kwargs) == expected


def test_set_chat_template_switches_an_exported_folder(tmp_path):
    from transformers import AutoTokenizer

    from nemo_cascade.data.tokenizer import set_chat_template
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    build_tiny_tokenizer(tmp_path)
    set_chat_template(tmp_path, "cascade2")
    tok = AutoTokenizer.from_pretrained(tmp_path)
    got = tok.apply_chat_template(CONV, tokenize=False, add_generation_prompt=True)
    assert got == render(CONV, "no_think", "cascade2") and got.endswith("<think></think>")


def test_jinja_template_per_turn_mode():
    mixed = [dict(CONV[1], mode="think"), CONV[2], CONV[3]]
    assert _hf_render(mixed, add_generation_prompt=True) == render(mixed, "no_think")


@pytest.mark.parametrize("response, expected", [
    ("<think>add them</think>\nThe answer is 5.", ("add them", "\nThe answer is 5.", True)),
    ("\n<think>a</think>b", ("a", "b", True)),
    ("<think>still going", ("still going", "", False)),
    ("The answer is 5.", (None, "The answer is 5.", True)),
    # must *open* with <think>
    ("Answer <think>x</think> y", (None, "Answer <think>x</think> y", True)),
    ("<think></think>5", ("", "5", True)),
    ("", (None, "", True)),
])
def test_split_thinking(response, expected):
    assert split_thinking(response) == expected


TOOLS = [{"type": "function",
          "function": {"name": "get_weather", "description": "Weather in a city (°C)",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                      "required": ["city"]}}},
         {"type": "function",
          "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]
TOOL_CONV = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris and the time?"},
    {"role": "assistant", "content": "<think>two calls</think>",
     "tool_calls": [{"type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"name": "now", "arguments": "{}"}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "tool", "content": "12:00"},
    {"role": "assistant", "content": None, "tool_calls": [{"name": "now", "arguments": {}}]},
    {"role": "tool", "content": "12:01"},
    {"role": "user", "content": "Thanks!"},
]


def test_tool_use_renders_tools_calls_and_results_exactly():
    """§3.1.2: tools in the system prompt inside <tools></tools>, calls in <tool_call>{"name",
    "arguments"}."""
    text = render(TOOL_CONV, "think", tools=TOOLS)
    assert text.startswith("<|im_start|>system\nYou are helpful.\n\n# Tools\n")
    assert ('<tools>\n{"type": "function", "function": {"name": "get_weather", '
            '"description": "Weather in a city (°C)", ' in text
            and text.count("<|im_start|>system") == 1)
    assert ("<|im_start|>assistant\n<think>two calls</think>\n<tool_call>\n"
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call><|im_end|>\n") in text
    assert ("<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n"
            "<tool_response>\n12:00\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n"
            "</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n12:01\n</tool_response><|im_end|>\n"
            "<|im_start|>user\nThanks! /think<|im_end|>\n<|im_start|>assistant\n") in text
    assert text.count(" /think") == 2  # user turns only: a tool result carries no flag
    no_system = render(TOOL_CONV[1:2], "no_think", tools=TOOLS)
    assert no_system.startswith("<|im_start|>system\n# Tools\n\nYou may call")


@pytest.mark.parametrize("style", ["cascade1", "cascade2", "chatml"])
@pytest.mark.parametrize("mode", ["think", "no_think"])
@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("with_tools", [True, False])
def test_tool_conversation_equals_the_jinja_twin(style, mode, gen, with_tools):
    """The export's chat template renders the same tool conversation to the same string as
    render()."""
    kwargs = {"tools": TOOLS} if with_tools else {}
    expected = render(TOOL_CONV, mode, style, add_generation_prompt=gen, **kwargs)
    assert _hf_render(TOOL_CONV, JINJA_TEMPLATES[style], add_generation_prompt=gen, mode=mode,
                      **kwargs) == expected


def test_exported_tokenizer_applies_tools_like_render(tmp_path):
    from transformers import AutoTokenizer

    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    build_tiny_tokenizer(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    got = tok.apply_chat_template(TOOL_CONV, tools=TOOLS, tokenize=False,
                                  add_generation_prompt=True, mode="think")
    assert got == render(TOOL_CONV, "think", tools=TOOLS)


@pytest.mark.parametrize("message, field", [
    ({"role": "user", "content": "x", "tool_calls": [{"name": "f", "arguments": {}}]},
     "messages[0].tool_calls"),
    ({"role": "assistant", "content": None}, "messages[0].content"),
    ({"role": "assistant", "content": "", "tool_calls": [{"name": "", "arguments": {}}]},
     "tool_calls[0]"),
    ({"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": 3}]},
     "tool_calls[0]"),
    ({"role": "assistant", "content": "", "tool_calls": "f()"}, "messages[0].tool_calls"),
    ({"role": "tool", "content": 5}, "messages[0].content"),
])
def test_bad_tool_messages_are_one_line_errors(message, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        render([message], "think")
