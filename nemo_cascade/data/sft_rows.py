"""SFT rows: a jsonl/parquet row as ``(messages, tools)`` and the text segments it trains, with
one-line errors.

Shapes (the loader's module docstring lists the RL ones):

- the conversation as ``"question"`` / ``"prompt"`` (one user turn) or ``"messages"``, plus
  ``"response"`` (a string); or ``"messages"`` ending with the assistant turn to learn;
- tool use (paper §3.1.2, the stage-2 tool-calling data, §3.2): ``"messages"`` may hold ``tool``
  turns (tool results) and assistant turns with ``"tool_calls"`` (``[{"name", "arguments"}]`` or
  OpenAI's ``[{"type": "function", "function": {"name", "arguments"}}]``, ``arguments`` an object or
  a JSON string; ``content`` may then be null); ``"tools"`` (a list of JSON-schema tool definitions,
  or that list as a JSON string, as some released sets store it) are listed in the system turn; a
  tool result must answer an assistant turn's calls. An assistant turn with tool calls is learned as
  its content followed by its ``<tool_call>`` blocks
  (:func:`~nemo_cascade.data.chat.assistant_text`).

Every assistant turn of a row is learned (:func:`sft_segments`), not only the last:
``Data.sft_turns``.
"""
from __future__ import annotations

import json
from typing import Optional

from .rows import DataError
from .chat import IM_END, assistant_text, check_message, render, valid_mode


class RowShapeError(DataError):
    """A row of the wrong shape; the message is one line naming ``where`` and the field."""


_KEYS = ("role", "content", "mode", "tool_calls")
_ROLES = "system|user|assistant|tool"


def conversation(row: dict, where: str, for_sft: bool) -> list[dict]:
    """The conversation of a row as chat messages (validated)."""
    for key in ("question", "prompt"):
        if key in row:
            if not isinstance(row[key], str) or not row[key]:
                raise RowShapeError(f"{where}: field {key!r} must be a non-empty string")
            return [{"role": "user", "content": row[key]}]
    if "messages" not in row:
        raise RowShapeError(f"{where}: expected field 'question', 'prompt' or 'messages'")
    msgs = row["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise RowShapeError(f"{where}: field 'messages' must be a non-empty list of {{role, "
                            f"content}} objects")
    for j, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            raise RowShapeError(f"{where}: field 'messages[{j}]' must be an object with role "
                                f"{_ROLES} and string content")
        try:
            check_message(j, m)
        except ValueError as e:  # "messages[j].field: what was expected"
            field, expected = str(e).split(":", 1)
            raise RowShapeError(f"{where}: field '{field}' {expected.strip()}") from None
        # a per-turn switch (§3.1.2); render would reject it
        if "mode" in m and not valid_mode(m["mode"]):
            raise RowShapeError(f"{where}: field 'messages[{j}].mode' must be 'think' or "
                                "'no_think'")
        if m["role"] == "tool" and not _answers_a_call(msgs, j):
            raise RowShapeError(f"{where}: field 'messages[{j}]' is a tool result that follows no "
                                "assistant turn with tool_calls")
    if not for_sft and msgs[-1]["role"] == "assistant":
        raise RowShapeError(f"{where}: field 'messages' must not end with an assistant turn in a "
                            "prompt set")
    return [{k: m[k] for k in _KEYS if k in m} for m in msgs]


def _answers_a_call(msgs: list, j: int) -> bool:
    """Whether the tool result ``msgs[j]`` follows an assistant turn that called tools (other
    results of the same calls may come between)."""
    while j > 0 and msgs[j - 1].get("role") == "tool":
        j -= 1
    return j > 0 and msgs[j - 1].get("role") == "assistant" and bool(msgs[j - 1].get("tool_calls"))


def tools_of(row: dict, where: str) -> Optional[list]:
    """The row's tool definitions (``"tools"``: a list of objects or that list as a JSON string), or
    None."""
    tools = row.get("tools")
    if tools is None:
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except (ValueError, RecursionError):
            raise RowShapeError(f"{where}: field 'tools' is a string but not JSON") from None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RowShapeError(f"{where}: field 'tools' must be a list of tool definitions (JSON "
                            "objects)")
    return tools or None


def parse_sft_row(row: dict, where: str) -> tuple[list[dict], Optional[list]]:
    """``(messages, tools)`` of one SFT row, the messages ending with the assistant turn to learn (a
    ``"response"`` field becomes that turn); RowShapeError (one line) if it has none."""
    messages = conversation(row, where, True)
    tools = tools_of(row, where)
    if "response" in row:
        if not isinstance(row["response"], str):
            raise RowShapeError(f"{where}: field 'response' must be a string")
        return messages + [{"role": "assistant", "content": row["response"]}], tools
    if messages[-1]["role"] == "assistant" and len(messages) > 1:
        return messages, tools
    raise RowShapeError(f"{where}: expected field 'response' or 'messages' ending with an "
                        "assistant turn")


def answer_mode(messages: list[dict], mode: str) -> str:
    """The mode a row's learned answer is in: the ``mode`` key of the user turn it answers, else
    ``mode`` (the stage's)."""
    asked = next((m for m in reversed(messages) if m["role"] == "user"), {})
    return asked.get("mode", mode)


def sft_segments(messages: list[dict], tools: Optional[list], mode: str, style: str,
                 turns: str = "all") -> list[str]:
    """One SFT example's text as segments that alternate context and learned text, starting with
    context: ``[prompt, answer]`` for one learned turn, ``[prompt, answer 1, context, answer 2,
    ...]`` for several.

    The text is the last assistant turn's served prompt (generation prompt included) and its answer
    with the ``<|im_end|>`` the model must learn to emit; each segment is tokenized alone, as a
    rollout tokenizes its prompt apart from what it generates. ``turns="all"`` also learns each
    earlier assistant turn whose own served prompt and answer begin the text (a multi-turn or
    tool-calling row, paper §3: every assistant turn is a training target); a turn the template
    shows otherwise in the history than at generation (cascade2's empty think block in no_think
    mode) stays context. ``"last"``: only the final turn is learned."""
    last = len(messages) - 1
    prompt = render(messages[:last], mode, style, tools=tools)
    text = prompt + assistant_text(messages[last]) + IM_END
    spans = []
    for i in range(1, last) if turns == "all" else ():
        if messages[i]["role"] == "assistant":
            served = render(messages[:i], mode, style, tools=tools)
            answer = assistant_text(messages[i]) + IM_END
            if text.startswith(answer, len(served)) and text.startswith(served):
                spans.append((len(served), len(served) + len(answer)))
    spans.append((len(prompt), len(text)))
    segments, at = [], 0
    for begin, end in spans:
        segments += [text[at:begin], text[begin:end]]
        at = end
    return segments


__all__ = ["RowShapeError", "conversation", "tools_of", "parse_sft_row", "sft_segments",
           "answer_mode"]
