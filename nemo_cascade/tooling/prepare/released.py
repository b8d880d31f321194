"""Rows of the released Nemotron-Cascade sets (and the IF-RLVR set) in the shapes the recipes read.

- SFT (``nvidia/Nemotron-Cascade-SFT-Stage-1``, ``-Stage-2``, ``-SFT-SWE``; §3.2–3.3): ``messages``.
  Each user turn gets ``"mode"``: the `` /think`` / `` /no_think`` flag it ends with (removed from
  the text: the template adds it back, §3.1.2), else the row's ``reasoning`` field (``on``/``off``),
  else whether the assistant turn answering it opens with a ``<think>`` block — thinking responses
  are R1's, non-thinking ones V3's (§3.2). Tool-calling rows (§3.3) keep their ``tools``,
  ``tool_calls`` and ``tool`` turns, so the chat template renders them exactly as a served model
  sees them (tools listed with the template's preamble, results in ``<tool_response>`` blocks
  carrying no mode flag; data/chat.py); an unknown role is a bad row.
- IF-RL (§4.4.1): ``nvidia/Nemotron-Cascade-RL-Instruction-Following`` rows (``prompt`` as text or
  messages, ``instruction_id_list``, ``kwargs``) split by taxonomy: every id IFEval's →
  ``ifeval_taxonomy.jsonl``, otherwise ``ifbench_taxonomy.jsonl``; the IF-RLVR rows of Pyatkin et
  al. (``allenai/IF_multi_constraints_upto5``: ``messages``, ``ground_truth`` =
  ``[{"instruction_id": [...], "kwargs": [...]}]`` as a Python literal) go to the second sub-stage's
  file (IFEval and IFBench-Train ids). A row naming an IFBench *test* id is dropped
  (``evaluation_only_instruction``: training on it would leak into the IFBench evaluation, §4.4.2),
  and one naming an instruction no checker here implements (``unsupported_instruction``): it could
  never be rewarded.
- Math (``nvidia/Nemotron-Cascade-RL-Math``) and SWE (``nvidia/Nemotron-Cascade-RL-SWE``) rows are
  kept as released; the schema check is the loader's.
"""
from __future__ import annotations

import json
import re
from typing import Any, Union

from nemo_cascade.data.schemas import SchemaError, if_rlvr_constraints
from nemo_cascade.tooling.prepare.sources import Drop
from nemo_cascade.rewards.ifeval.taxonomy import EVALUATION_ONLY, IFEVAL, TRAINING

_FLAG = re.compile(r"\s*/(no_think|think)\s*$")


# ---------------------------------------------------------------------------------------------- SFT

_ROLES = ("system", "user", "assistant", "tool")


def _tool_call(call: Any, where: str) -> dict:
    """A released tool call as ``{"name", "arguments"}`` (OpenAI's ``{"function": {...}}``
    unwrapped); arguments kept as released, an object or a JSON string, which the template writes
    verbatim."""
    fn = call.get("function", call) if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise SchemaError(f"field '{where}' must name a function")
    return {"name": fn["name"], "arguments": fn.get("arguments", {})}


def _json_field(row: dict, key: str) -> Any:
    value = row.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else None
        except json.JSONDecodeError:
            raise SchemaError(f"field {key!r} is a string but not JSON") from None
    return value


def _chat_turns(row: dict) -> list[dict]:
    """The row's turns as the chat template takes them: tool results stay ``tool`` turns (rendered
    in the served template's ``<tool_response>`` blocks, with no mode flag) and tool calls stay
    ``tool_calls``."""
    msgs = _json_field(row, "messages")
    if not isinstance(msgs, list) or not msgs:
        raise SchemaError("expected field 'messages' (a non-empty list of {role, content})")
    out = []
    for j, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            role = m.get("role") if isinstance(m, dict) else None
            raise SchemaError(f"field 'messages[{j}].role' must be one of {', '.join(_ROLES)}, "
                              f"got {role!r:.40}")
        content = m.get("content") or ""
        if not isinstance(content, str):
            raise SchemaError(f"field 'messages[{j}].content' must be a string")
        turn = {"role": m["role"], "content": content}
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = m["tool_calls"]
            if not isinstance(calls, list):
                raise SchemaError(f"field 'messages[{j}].tool_calls' must be a list")
            turn["tool_calls"] = [_tool_call(c, f"messages[{j}].tool_calls[{i}]")
                                  for i, c in enumerate(calls)]
        out.append(turn)
    return out


def sft_row(row: dict, where: str) -> dict:
    """A released SFT row as ``{"messages": [...], "source"?, "generator"?}`` with each user turn's
    mode."""
    turns = _chat_turns(row)
    reasoning = row.get("reasoning")
    for i, turn in enumerate(turns):
        if turn["role"] != "user":
            continue
        flag = _FLAG.search(turn["content"])
        if flag:
            turn["content"], turn["mode"] = turn["content"][:flag.start()], flag.group(1)
        elif reasoning in ("on", "off"):
            turn["mode"] = "think" if reasoning == "on" else "no_think"
        else:
            reply = next((t["content"] for t in turns[i + 1:] if t["role"] == "assistant"), "")
            turn["mode"] = "think" if reply.lstrip().startswith("<think>") else "no_think"
    out: dict = {"messages": turns}
    tools = _json_field(row, "tools")
    if tools:
        out["tools"] = tools
    out.update({k: row[k] for k in ("source", "generator", "category")
                if isinstance(row.get(k), str)})
    return out


def sft_mode(row: dict) -> str:
    """The mode of the response an SFT row teaches (its last user turn's), for the manifest's split
    counts."""
    return next((t.get("mode", "think") for t in reversed(row["messages"])
                 if t["role"] == "user"), "think")


# -------------------------------------------------------------------------------------------- IF-RL

def _instruction_registries():
    return IFEVAL, TRAINING, EVALUATION_ONLY


def _if_label(row: dict, where: str) -> tuple[Union[str, list], list, list]:
    """``(prompt text or messages, instruction ids, kwargs)`` of a Cascade IF row or an IF-RLVR
    row."""
    # IF-RLVR: messages + a Python-literal ground truth, read as the loader reads it
    if "ground_truth" in row:
        truth = if_rlvr_constraints(row, where)
        ids, kwargs = (truth["instruction_id"],
                       truth["kwargs"] or [None] * len(truth["instruction_id"]))
        prompt = row.get("messages", row.get("prompt"))
    else:
        for key in ("prompt", "instruction_id_list", "kwargs"):
            if key not in row:
                raise SchemaError(f"{where}: expected field {key!r}")
        prompt, ids, kwargs = row["prompt"], row["instruction_id_list"], row["kwargs"]
    if isinstance(ids, str):
        ids = json.loads(ids)
    if isinstance(kwargs, str):
        kwargs = json.loads(kwargs)
    if not isinstance(ids, list) or not isinstance(kwargs, list) or len(ids) != len(kwargs):
        raise SchemaError(f"{where}: instruction ids and kwargs must be lists of equal length")
    return prompt, ids, [{k: v for k, v in kw.items() if v is not None}
                         if isinstance(kw, dict) else {} for kw in kwargs]


def if_row(taxonomy: str):
    """Converter for one IF file: ``ifeval`` keeps rows whose ids are all IFEval's, ``ifbench`` the
    others (and every IF-RLVR row)."""
    def convert(row: dict, where: str):
        prompt, ids, kwargs = _if_label(row, where)
        ifeval_ids, known, evaluation_only = _instruction_registries()
        if any(i in evaluation_only for i in ids):
            # IFBench test ids: training on them leaks (§4.4.2)
            return Drop("evaluation_only_instruction")
        if any(i not in known for i in ids):
            return Drop("unsupported_instruction")
        in_ifeval = all(i in ifeval_ids for i in ids) and "ground_truth" not in row
        if in_ifeval != (taxonomy == "ifeval"):
            return Drop("other_taxonomy")
        out: dict = {"instruction_id_list": ids, "kwargs": kwargs}
        if isinstance(prompt, list):
            out["messages"] = [{"role": m.get("role"), "content": m.get("content")} for m in prompt
                               if isinstance(m, dict)]
            if out["messages"] and out["messages"][-1]["role"] == "assistant":
                # an SFT-style row: the prompt is what precedes the answer
                out["messages"] = out["messages"][:-1]
        else:
            out["prompt"] = prompt
        return out
    return convert


def as_released(row: dict, where: str) -> dict:
    """Math / SWE rows: kept as released (the loader reads these fields)."""
    return row


__all__ = ["sft_row", "sft_mode", "if_row", "as_released"]
