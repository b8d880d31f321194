"""The chat template: how a conversation and a thinking mode become the prompt string (and back).

Three styles:

- ``cascade1`` (Nemotron-Cascade, paper §3.1.2, Fig. 3): ChatML, and the flag `` /think`` or ``
  /no_think`` appended to **every** user turn so the mode can switch per turn. There is no
  ``enable_thinking`` switch and **no** empty ``<think></think>`` block in non-thinking mode.
- ``cascade2`` (Nemotron-Cascade 2, [P2] §3.1.2): ChatML without flags; non-thinking mode prepends
  an empty ``<think></think>`` block to the assistant turn (here: to the generation prompt).
- ``chatml``: plain ChatML, the template of instruct models that have no thinking modes (SmolLM2,
  Qwen2.5 Instruct): no flags, no think block; the mode changes nothing. For post-training such a
  model as it was trained to chat (recipes/smollm2.py).

:func:`render` is the reference implementation; :data:`JINJA_TEMPLATES` holds each style as a
Hugging Face chat template (saved with the tokenizer of every exported checkpoint) so that
``tokenizer.apply_chat_template`` and vLLM's chat endpoint produce the identical string.
:func:`split_thinking` is the inverse view of a response.
"""
from __future__ import annotations

import json
import typing
from typing import Any, Literal, Mapping, Optional, Sequence

Style = Literal["cascade1", "cascade2", "chatml"]
STYLES: tuple[str, ...] = typing.get_args(Style)
"""The styles, from :data:`Style` (``Cascade.chat_style`` declares the same;
tests/unit/test_literal_enums.py)."""

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
FLAGS = {"think": " /think", "no_think": " /no_think"}
"""Appended to each user turn in the cascade1 style (paper §3.1.2)."""
EMPTY_THINK = THINK_OPEN + THINK_CLOSE
"""Cascade-2's non-thinking marker, prepended to the assistant turn ([P2] §3.1.2)."""
GENERATION_PROMPT = f"{IM_START}assistant\n"

_ROLES = ("system", "user", "assistant", "tool")

# Tool use (paper §3.1.2: tools listed in the system prompt inside <tools></tools>, calls in
# <tool_call>{"name": ..., "arguments": ...}</tool_call>). The wording around them is Qwen3's (the
# 8B/14B's base family), so a tool-calling client's parser (vLLM's hermes parser) reads the calls;
# tool results go back in a user turn, each in <tool_response> tags, consecutive results sharing the
# turn.
TOOLS_PREAMBLE = ("# Tools\n\nYou may call one or more functions to assist with the user "
                  "query.\n\nYou are provided with function signatures within <tools></tools> XML "
                  "tags:\n<tools>")
TOOLS_POSTAMBLE = ("\n</tools>\n\nFor each function call, return a json object with function name "
                   "and arguments within <tool_call></tool_call> XML "
                   "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                   "<args-json-object>}\n</tool_call>")

# The three styles as Jinja chat templates, assembled from shared pieces so that tool use renders
# alike in all of them. `mode` is a template variable (apply_chat_template(..., mode="think"), or
# vLLM's chat_template_kwargs) defaulting to no_think; in cascade1 a user message may carry its own
# "mode" key, the per-turn switch of §3.1.2. `tools` is apply_chat_template's tools argument. Every
# piece of text is emitted from an expression with whitespace control, so the output does not depend
# on the Jinja environment's trim_blocks/lstrip_blocks settings.
# the system turn with the tool list (§3.1.2), merged into the conversation's own system turn
_J_TOOLS = (
    "{%- set _skip_first = false -%}"
    "{%- if tools is defined and tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{{- messages[0]['content'] + '\\n\\n' -}}"
    "{%- set _skip_first = true -%}"
    "{%- endif -%}"
    "{{- " + repr(TOOLS_PREAMBLE) + " -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- " + repr(TOOLS_POSTAMBLE) + " + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
)
_J_TOOL_TURN = (  # consecutive tool results share one user turn, each in <tool_response> tags
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' "
    "-}}{%- endif -%}{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' "
    "-}}{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' "
    "-}}{%- endif -%}"
)
_J_ASSISTANT = (  # the answer text, then each call in <tool_call> tags (§3.1.2)
    "{%- set _content = message['content'] if message['content'] is string else '' -%}"
    "{{- '<|im_start|>assistant\\n' + _content -}}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set call = call['function'] if call['function'] is defined else call -%}"
    "{%- if not loop.first or _content -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + call['name'] + '\", \"arguments\": ' -}}"
    "{{- call['arguments'] if call['arguments'] is string else (call['arguments'] | tojson) -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
)


def _jinja(head: str, user_suffix: str, generation: str) -> str:
    """One style's template: ``head`` (mode set-up), the tools' system turn, the turns
    (``user_suffix`` after a user turn's content), then the generation prompt followed by
    ``generation``."""
    return (
        head + _J_TOOLS
        + "{%- for message in messages -%}"
        "{%- if loop.first and _skip_first -%}"
        "{%- elif message['role'] == 'tool' -%}" + _J_TOOL_TURN
        + "{%- elif message['role'] == 'assistant' -%}" + _J_ASSISTANT
        + "{%- else -%}"
        "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] -}}"
        "{%- if message['role'] == 'user' -%}" + user_suffix + "{%- endif -%}"
        "{{- '<|im_end|>\\n' -}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- if add_generation_prompt -%}"
        "{{- '<|im_start|>assistant\\n' -}}" + generation
        + "{%- endif -%}"
    )


_J_MODE = "{%- set _mode = mode if mode is defined else 'no_think' -%}"
# Cascade-1: the flag after every user turn (a turn's own "mode" key wins); tool results carry none.
JINJA_TEMPLATE = _jinja(
    _J_MODE,
    "{%- set _turn_mode = message['mode'] if message['mode'] is defined else _mode -%}"
    "{%- if _turn_mode not in ['think', 'no_think'] -%}"
    "{{- raise_exception('mode must be think or no_think, got ' ~ _turn_mode) -}}"
    "{%- endif -%}"
    "{{- ' /think' if _turn_mode == 'think' else ' /no_think' -}}",
    "")
# Cascade-2: no flags; the generation prompt of a non-thinking turn carries the empty think block
# (the per-turn key does not exist here: the mode is the answer's, not the turn's).
CASCADE2_JINJA_TEMPLATE = _jinja(
    _J_MODE + "{%- if _mode not in ['think', 'no_think'] -%}"
    "{{- raise_exception('mode must be think or no_think, got ' ~ _mode) -}}"
    "{%- endif -%}",
    "",
    "{{- '<think></think>' if _mode == 'no_think' else '' -}}")
# Plain ChatML: `mode` is accepted (callers pass it for every style) and ignored.
CHATML_JINJA_TEMPLATE = _jinja("", "", "")
JINJA_TEMPLATES = {"cascade1": JINJA_TEMPLATE, "cascade2": CASCADE2_JINJA_TEMPLATE,
                   "chatml": CHATML_JINJA_TEMPLATE}
"""The HF chat template of each style: an exported checkpoint carries the one its cascade trained
with."""


def valid_mode(mode: Any) -> bool:
    """Whether ``mode`` (a render mode, or a user message's own ``"mode"`` key) is ``think`` or
    ``no_think``."""
    return isinstance(mode, str) and mode in FLAGS


def _check_mode(mode: Any, where: str = "mode") -> None:
    if not valid_mode(mode):
        raise ValueError(f"{where} must be 'think' or 'no_think', got {mode!r:.80}")


def _turn(role: str, content: str) -> str:
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def _tojson(value: Any) -> str:
    """Jinja's ``tojson`` as Hugging Face's chat-template environment defines it (and vLLM uses
    it)."""
    return json.dumps(value, ensure_ascii=False)


def tool_calls_text(calls: Sequence[Mapping], after_content: bool) -> str:
    """The ``<tool_call>`` blocks of an assistant turn: each call ``{"name", "arguments"}`` (or
    OpenAI's ``{"type": "function", "function": {...}}``); ``arguments`` a JSON object, or a string
    emitted verbatim (OpenAI sends them encoded). A newline separates the blocks, and the first from
    any text before it."""
    parts = []
    for j, call in enumerate(calls):
        fn = call["function"] if "function" in call else call
        args = fn["arguments"]
        sep = "\n" if j or after_content else ""
        parts.append(f'{sep}<tool_call>\n{{"name": "{fn["name"]}", "arguments": '
                     f'{args if isinstance(args, str) else _tojson(args)}}}\n</tool_call>')
    return "".join(parts)


def assistant_text(message: Mapping) -> str:
    """What an assistant turn holds between ``<|im_start|>assistant\\n`` and ``<|im_end|>``: its
    content, then its tool calls (the text an SFT example trains on)."""
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    return content + tool_calls_text(message.get("tool_calls") or (), bool(content))


def check_message(i: int, message: Any) -> None:
    """A one-line ValueError naming ``messages[i]`` (and its field) unless ``message`` is a
    well-formed turn."""
    if not isinstance(message, Mapping):
        raise ValueError(f"messages[{i}]: expected a dict with role and content, got "
                         f"{type(message).__name__}")
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or role not in _ROLES:
        raise ValueError(f"messages[{i}].role: expected one of {list(_ROLES)}, got {role!r:.80}")
    calls = message.get("tool_calls")
    if calls and role != "assistant":
        raise ValueError(f"messages[{i}].tool_calls: only an assistant turn calls tools")
    if not isinstance(content, str) and not (calls and content is None):
        raise ValueError(f"messages[{i}].content: expected a string, got {type(content).__name__}")
    if calls is not None:
        if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)):
            raise ValueError(f"messages[{i}].tool_calls: expected a list of {{name, arguments}} "
                             "objects")
        for j, call in enumerate(calls):
            fn = call.get("function", call) if isinstance(call, Mapping) else None
            if not (isinstance(fn, Mapping) and isinstance(fn.get("name"), str) and fn["name"]
                    and isinstance(fn.get("arguments"), (str, Mapping))):
                raise ValueError(f"messages[{i}].tool_calls[{j}]: expected {{name: str, arguments: "
                                 f"object or JSON string}}}}")


def _tools_turn(messages: Sequence[dict], tools: Sequence) -> str:
    """The system turn listing ``tools``, after the conversation's own system prompt if it has
    one."""
    head = messages[0]["content"] + "\n\n" if messages and messages[0]["role"] == "system" else ""
    listed = "".join("\n" + _tojson(t) for t in tools)
    return _turn("system", head + TOOLS_PREAMBLE + listed + TOOLS_POSTAMBLE)


def render(messages: Sequence[dict], mode: str, style: Style = "cascade1",
           add_generation_prompt: bool = True, tools: Optional[Sequence] = None) -> str:
    """The prompt string for ``messages`` (``[{"role": "system"|"user"|"assistant"|"tool",
    "content": str},
    ...]``), identical to the style's Jinja twin (:data:`JINJA_TEMPLATES`) given the same arguments.

    cascade1: every user turn gets `` /think`` or `` /no_think`` (a user message's own ``"mode"``
    key overrides ``mode`` for that turn); the generation prompt is ``<|im_start|>assistant\\n``.
    cascade2: no flags; in no_think mode the generation prompt is followed by ``<think></think>``.
    chatml: no flags, no think block, whatever the mode. Earlier assistant turns are rendered
    verbatim (their thinking, if any, is kept as written).

    Tool use (§3.1.2), alike in every style: ``tools`` (JSON-schema objects) are listed in the
    system turn inside ``<tools></tools>``; an assistant turn's ``tool_calls`` follow its content as
    ``<tool_call>`` blocks (:func:`assistant_text`; its content may then be None); ``tool`` messages
    (results) go back in a user turn, each inside ``<tool_response>`` tags, consecutive ones sharing
    the turn. A tool result carries no mode flag: the flag is the user's switch, and the mode of the
    user turn that led to the call goes on.
    """
    _check_mode(mode)
    if style not in STYLES:
        raise ValueError(f"style must be one of {list(STYLES)}, got {style!r:.80}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError(f"messages: expected a list of {{role, content}} dicts, got "
                         f"{type(messages).__name__}")
    for i, message in enumerate(messages):
        check_message(i, message)
    if tools is not None and (isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence)):
        raise ValueError(f"tools: expected a list of tool definitions, got {type(tools).__name__}")
    parts, skip_first = [], False
    if tools:
        parts.append(_tools_turn(messages, tools))
        skip_first = bool(messages) and messages[0]["role"] == "system"
    for i, message in enumerate(messages):
        role, content = message["role"], message.get("content")
        if i == 0 and skip_first:
            continue
        if role == "tool":
            first = i == 0 or messages[i - 1]["role"] != "tool"
            last = i == len(messages) - 1 or messages[i + 1]["role"] != "tool"
            parts.append((f"{IM_START}user" if first else "")
                         + f"\n<tool_response>\n{content}\n</tool_response>"
                         + (f"{IM_END}\n" if last else ""))
            continue
        if role == "assistant":
            content = assistant_text(message)
        elif role == "user" and style == "cascade1":
            turn_mode = message.get("mode", mode)
            _check_mode(turn_mode, f"messages[{i}].mode")
            content = content + FLAGS[turn_mode]
        parts.append(_turn(role, content))
    if add_generation_prompt:
        parts.append(GENERATION_PROMPT)
        if style == "cascade2" and mode == "no_think":
            parts.append(EMPTY_THINK)
    return "".join(parts)


def split_thinking(response: str) -> tuple[Optional[str], str, bool]:
    """Split a response into ``(thinking, answer, terminated)``.

    A response that opens with ``<think>`` (leading whitespace allowed) is a thinking response:
    ``thinking`` is the text up to the first ``</think>`` and ``answer`` the text after it. If
    ``</think>`` is missing the thinking never ended: ``(thinking, "", False)`` — verifiers score
    that 0 (docs/rewards.md). Any other response is a plain answer: ``(None, response, True)``.
    """
    body = response.lstrip()
    if not body.startswith(THINK_OPEN):
        return None, response, True
    body = body[len(THINK_OPEN):]
    end = body.find(THINK_CLOSE)
    if end < 0:
        return body, "", False
    return body[:end], body[end + len(THINK_CLOSE):], True


__all__ = ["JINJA_TEMPLATE", "CASCADE2_JINJA_TEMPLATE", "CHATML_JINJA_TEMPLATE", "JINJA_TEMPLATES",
           "STYLES", "render", "split_thinking", "FLAGS", "EMPTY_THINK", "GENERATION_PROMPT",
           "IM_START", "IM_END", "THINK_OPEN", "THINK_CLOSE", "Style", "valid_mode",
           "assistant_text",
           "tool_calls_text", "check_message", "TOOLS_PREAMBLE", "TOOLS_POSTAMBLE"]
