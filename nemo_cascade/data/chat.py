"""The chat template: how a conversation and a thinking mode become the prompt string (and back).

Three styles:

- ``cascade1`` (Nemotron-Cascade, paper §3.1.2, Fig. 3; PAPER.md §1 "Mode control"): ChatML, and the
  flag `` /think`` or `` /no_think`` appended to **every** user turn so the mode can switch per turn.
  There is no ``enable_thinking`` switch and **no** empty ``<think></think>`` block in non-thinking mode.
- ``cascade2`` (Nemotron-Cascade 2, [P2] §3.1.2): ChatML without flags; non-thinking mode prepends an
  empty ``<think></think>`` block to the assistant turn (here: to the generation prompt).
- ``chatml``: plain ChatML, the template of instruct models that have no thinking modes (SmolLM2, Qwen2.5
  Instruct): no flags, no think block; the mode changes nothing. For post-training such a model as it was
  trained to chat (recipes/smollm2.py).

:func:`render` is the reference implementation; :data:`JINJA_TEMPLATES` holds each style as a Hugging Face
chat template (saved with the tokenizer of every exported checkpoint) so that ``tokenizer.apply_chat_template``
and vLLM's chat endpoint produce the identical string. :func:`split_thinking` is the inverse view of a response.
"""
from __future__ import annotations

from typing import Any, Literal, Mapping, Optional, Sequence

Style = Literal["cascade1", "cascade2", "chatml"]
STYLES = ("cascade1", "cascade2", "chatml")

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
FLAGS = {"think": " /think", "no_think": " /no_think"}
"""Appended to each user turn in the cascade1 style (paper §3.1.2)."""
EMPTY_THINK = THINK_OPEN + THINK_CLOSE
"""Cascade-2's non-thinking marker, prepended to the assistant turn ([P2] §3.1.2)."""
GENERATION_PROMPT = f"{IM_START}assistant\n"

_ROLES = ("system", "user", "assistant")

# Cascade-1 as a Jinja chat template. `mode` is a template variable (apply_chat_template(..., mode="think"),
# or vLLM's chat_template_kwargs) defaulting to no_think; a user message may carry its own "mode" key, the
# per-turn switch of §3.1.2. Every piece of text is emitted from an expression with whitespace control, so
# the output does not depend on the Jinja environment's trim_blocks/lstrip_blocks settings.
JINJA_TEMPLATE = (
    "{%- set _mode = mode if mode is defined else 'no_think' -%}"
    "{%- for message in messages -%}"
    "{%- set _turn_mode = message['mode'] if message['mode'] is defined else _mode -%}"
    "{%- if message['role'] == 'user' and _turn_mode not in ['think', 'no_think'] -%}"
    "{{- raise_exception('mode must be think or no_think, got ' ~ _turn_mode) -}}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] -}}"
    "{%- if message['role'] == 'user' -%}"
    "{{- ' /think' if _turn_mode == 'think' else ' /no_think' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

# Cascade-2 as a Jinja chat template: no flags; the generation prompt of a non-thinking turn carries the empty
# think block. `mode` as above (the per-turn key does not exist here: the mode is the answer's, not the turn's).
CASCADE2_JINJA_TEMPLATE = (
    "{%- set _mode = mode if mode is defined else 'no_think' -%}"
    "{%- if _mode not in ['think', 'no_think'] -%}"
    "{{- raise_exception('mode must be think or no_think, got ' ~ _mode) -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{{- '<think></think>' if _mode == 'no_think' else '' -}}"
    "{%- endif -%}"
)
# Plain ChatML as a Jinja chat template: `mode` is accepted (callers pass it for every style) and ignored.
CHATML_JINJA_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)
JINJA_TEMPLATES = {"cascade1": JINJA_TEMPLATE, "cascade2": CASCADE2_JINJA_TEMPLATE, "chatml": CHATML_JINJA_TEMPLATE}
"""The HF chat template of each style: an exported checkpoint carries the one its cascade trained with."""


def valid_mode(mode: Any) -> bool:
    """Whether ``mode`` (a render mode, or a user message's own ``"mode"`` key) is ``think`` or ``no_think``."""
    return isinstance(mode, str) and mode in FLAGS


def _check_mode(mode: Any, where: str = "mode") -> None:
    if not valid_mode(mode):
        raise ValueError(f"{where} must be 'think' or 'no_think', got {mode!r:.80}")


def _turn(role: str, content: str) -> str:
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def render(messages: Sequence[dict], mode: str, style: Style = "cascade1",
           add_generation_prompt: bool = True) -> str:
    """The prompt string for ``messages`` (``[{"role": "system"|"user"|"assistant", "content": str}, ...]``).

    cascade1: every user turn gets `` /think`` or `` /no_think`` (a user message's own ``"mode"`` key
    overrides ``mode`` for that turn); the generation prompt is ``<|im_start|>assistant\\n``.
    cascade2: no flags; in no_think mode the generation prompt is followed by ``<think></think>``.
    chatml: no flags, no think block, whatever the mode.
    Earlier assistant turns are rendered verbatim (their thinking, if any, is kept as written).
    """
    _check_mode(mode)
    if style not in STYLES:
        raise ValueError(f"style must be one of {list(STYLES)}, got {style!r:.80}")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ValueError(f"messages: expected a list of {{role, content}} dicts, got {type(messages).__name__}")
    parts = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"messages[{i}]: expected a dict with role and content, got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or role not in _ROLES:
            raise ValueError(f"messages[{i}].role: expected one of {list(_ROLES)}, got {role!r:.80}")
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content: expected a string, got {type(content).__name__}")
        if role == "user" and style == "cascade1":
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

    A response that opens with ``<think>`` (leading whitespace allowed) is a thinking response: ``thinking``
    is the text up to the first ``</think>`` and ``answer`` the text after it. If ``</think>`` is missing the
    thinking never ended: ``(thinking, "", False)`` — verifiers score that 0 (DESIGN.md "Rewards").
    Any other response is a plain answer: ``(None, response, True)``.
    """
    body = response.lstrip()
    if not body.startswith(THINK_OPEN):
        return None, response, True
    body = body[len(THINK_OPEN):]
    end = body.find(THINK_CLOSE)
    if end < 0:
        return body, "", False
    return body[:end], body[end + len(THINK_CLOSE):], True


__all__ = ["JINJA_TEMPLATE", "CASCADE2_JINJA_TEMPLATE", "CHATML_JINJA_TEMPLATE", "JINJA_TEMPLATES", "STYLES", "render", "split_thinking", "FLAGS", "EMPTY_THINK", "GENERATION_PROMPT",
           "IM_START", "IM_END", "THINK_OPEN", "THINK_CLOSE", "Style", "valid_mode"]
