"""Fuzz tier, chat template: random message lists (unknown roles, None or non-string contents,
non-dict messages, bad and unhashable modes, control tokens and separators inside contents) end as a
one-line ValueError naming ``messages[i]``, ``mode`` or ``style``, or as the prompt string — the
same one the Jinja template gives (the exported tokenizer's and vLLM's); ``split_thinking`` is an
exact split of any string."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from nemo_cascade.data.chat import (EMPTY_THINK, GENERATION_PROMPT, IM_END, IM_START,
                                    JINJA_TEMPLATES, THINK_CLOSE, THINK_OPEN, render,
                                    split_thinking)

from .fuzz_budget import fuzz, one_line, ran

CONTROL = [IM_START, IM_END, THINK_OPEN, THINK_CLOSE, EMPTY_THINK, " /think", " /no_think",
           "<|endoftext|>", "\n", "\r", "\u2028", "\x00", "{{", "}}", "{%", "%}"]
contents = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(st.sampled_from(CONTROL), st.text(max_size=4)), max_size=6).map("".join))
roles = st.sampled_from(["system", "user", "assistant"])
odd = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5),
                st.lists(st.integers(), max_size=2))
good_messages = st.lists(st.one_of(
    st.fixed_dictionaries({"role": roles, "content": contents}),
    st.fixed_dictionaries({"role": st.just("user"), "content": contents,
                           "mode": st.sampled_from(["think", "no_think"])})), max_size=5)
any_messages = st.lists(st.one_of(
    st.fixed_dictionaries({"role": roles, "content": contents}),
    st.fixed_dictionaries({}, optional={
        "role": st.one_of(roles, odd), "content": st.one_of(contents, odd),
        "mode": st.one_of(st.sampled_from(["think", "no_think"]), odd)}),
    odd), max_size=5)
modes = st.one_of(st.sampled_from(["think", "no_think"]), odd, st.just({"a": 1}))
styles = st.one_of(st.sampled_from(["cascade1", "cascade2"]), odd)


@fuzz("chat.render")
@given(messages=st.one_of(any_messages, odd), mode=modes, style=styles, gen=st.booleans())
def test_render_is_a_prompt_or_one_line_naming_the_input(messages, mode, style, gen):
    ran("chat.render")
    try:
        text = render(messages, mode, style, add_generation_prompt=gen)
    except ValueError as e:
        message = str(e)
        assert (one_line(message)
                and message.split(" ")[0].split(":")[0].split(".")[0].split("[")[0]
                in ("mode", "style", "messages")), message
        return
    assert isinstance(text, str) and text.endswith(
        GENERATION_PROMPT + (EMPTY_THINK if style == "cascade2" and mode == "no_think" else "")
        if gen else "")
    for m in messages:
        assert m["content"] in text
    if not any(tok in m["content"] for m in messages for tok in (IM_START, IM_END)):
        assert text.count(IM_START) == len(messages) + gen and text.count(IM_END) == len(messages)


def _jinja(messages, style, mode, gen):
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[messages],
                                        chat_template=JINJA_TEMPLATES[style],
                                        add_generation_prompt=gen, mode=mode)
    return rendered[0]


@fuzz("chat.render_vs_jinja")
@given(messages=good_messages, mode=st.sampled_from(["think", "no_think"]),
       style=st.sampled_from(["cascade1", "cascade2", "chatml"]), gen=st.booleans())
def test_render_equals_the_jinja_template_on_any_contents(messages, mode, style, gen):
    """Contents holding control tokens, Jinja delimiters or separators are emitted verbatim by
    both."""
    ran("chat.render_vs_jinja")
    assert render(messages, mode, style, add_generation_prompt=gen) == \
        _jinja(messages, style, mode, gen)


def test_render_fixes_found_by_fuzzing():
    """A non-dict message raised AttributeError and an unhashable mode TypeError; now one-line
    ValueErrors."""
    for messages, mode, message in [
        ([None], "think", "messages[0]: expected a dict with role and content, got NoneType"),
        (["user: hi"], "think", "messages[0]: expected a dict with role and content, got str"),
        ([{"role": "user", "content": "x", "mode": ["think"]}], "think",
         "messages[0].mode must be 'think' or"),
        ([{"role": "user", "content": "x"}], ["think"],
         "mode must be 'think' or 'no_think', got ['think']"),
        ([{"role": ["user"], "content": "x"}], "think", "messages[0].role: expected one of"),
        (None, "think", "messages: expected a list of {role, content} dicts, got NoneType"),
        ("hello", "think", "messages: expected a list"),
    ]:
        ran("chat.render")
        with pytest.raises(ValueError) as e:
            render(messages, mode)
        assert str(e.value).startswith(message) and one_line(str(e.value)), str(e.value)


@fuzz("chat.split_thinking")
@given(
    st.one_of(
        st.text(max_size=40),
        st.lists(st.sampled_from([THINK_OPEN, THINK_CLOSE, " ", "\n", "a", "<", "think>", "</"]),
                 max_size=10).map("".join)))
def test_split_thinking_is_an_exact_split(response):
    ran("chat.split_thinking")
    thinking, answer, closed = split_thinking(response)
    body = response.lstrip()
    if thinking is None:
        assert (answer, closed) == (response, True) and not body.startswith(THINK_OPEN)
    elif closed:
        assert THINK_CLOSE not in thinking and body == THINK_OPEN + thinking + THINK_CLOSE + answer
    else:
        assert answer == "" and THINK_CLOSE not in thinking and body == THINK_OPEN + thinking
