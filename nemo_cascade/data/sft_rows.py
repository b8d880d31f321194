"""SFT rows: a jsonl/parquet row as ``(prompt messages, response text, tools)``, validated with one-line errors.

Shapes (the loader's module docstring lists the RL ones):

- the conversation as ``"question"`` / ``"prompt"`` (one user turn) or ``"messages"``, plus ``"response"``
  (a string); or ``"messages"`` ending with the assistant turn to learn;
- tool use (paper §3.1.2, the stage-2 tool-calling data, §3.2): ``"messages"`` may hold ``tool`` turns (tool
  results) and assistant turns with ``"tool_calls"`` (``[{"name", "arguments"}]`` or OpenAI's
  ``[{"type": "function", "function": {"name", "arguments"}}]``, ``arguments`` an object or a JSON string;
  ``content`` may then be null); ``"tools"`` (a list of JSON-schema tool definitions, or that list as a JSON
  string, as some released sets store it) are listed in the system turn. The learned response of a final
  assistant turn with tool calls is its content followed by its ``<tool_call>`` blocks
  (:func:`~nemo_cascade.data.chat.assistant_text`).
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
        raise RowShapeError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects")
    for j, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            raise RowShapeError(f"{where}: field 'messages[{j}]' must be an object with role {_ROLES} and string "
                                "content")
        try:
            check_message(j, m)
        except ValueError as e:  # "messages[j].field: what was expected"
            raise RowShapeError(f"{where}: field '{str(e).split(':', 1)[0]}' {str(e).split(':', 1)[1].strip()}") \
                from None
        if "mode" in m and not valid_mode(m["mode"]):  # a per-turn switch (§3.1.2); render would reject it
            raise RowShapeError(f"{where}: field 'messages[{j}].mode' must be 'think' or 'no_think'")
    if not for_sft and msgs[-1]["role"] == "assistant":
        raise RowShapeError(f"{where}: field 'messages' must not end with an assistant turn in a prompt set")
    return [{k: m[k] for k in _KEYS if k in m} for m in msgs]


def tools_of(row: dict, where: str) -> Optional[list]:
    """The row's tool definitions (``"tools"``: a list of objects or that list as a JSON string), or None."""
    tools = row.get("tools")
    if tools is None:
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except (ValueError, RecursionError):
            raise RowShapeError(f"{where}: field 'tools' is a string but not JSON") from None
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise RowShapeError(f"{where}: field 'tools' must be a list of tool definitions (JSON objects)")
    return tools or None


def parse_sft_row(row: dict, where: str) -> tuple[list[dict], str, Optional[list]]:
    """``(prompt messages, response, tools)`` of one SFT row; RowShapeError (one line) if it has none."""
    messages = conversation(row, where, True)
    tools = tools_of(row, where)
    if "response" in row:
        if not isinstance(row["response"], str):
            raise RowShapeError(f"{where}: field 'response' must be a string")
        return messages, row["response"], tools
    if messages[-1]["role"] == "assistant" and len(messages) > 1:
        return messages[:-1], assistant_text(messages[-1]), tools
    raise RowShapeError(f"{where}: expected field 'response' or 'messages' ending with an assistant turn")


def sft_texts(messages: list[dict], response: str, tools: Optional[list], mode: str, style: str) -> tuple[str, str]:
    """The prompt string (generation prompt included) and the response string (ending with ``<|im_end|>``, the
    EOS the model must learn) of one SFT example; tokenised separately, exactly as a rollout sees them."""
    return render(messages, mode, style, tools=tools), response + IM_END


__all__ = ["RowShapeError", "conversation", "tools_of", "parse_sft_row", "sft_texts"]
