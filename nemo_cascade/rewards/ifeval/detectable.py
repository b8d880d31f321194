"""IFEval's ``detectable_content:*`` and ``detectable_format:*`` instructions: placeholders,
postscripts, bullet lists, fixed answers, highlights, sections, JSON and titles (paper §4.4, IFEval
sub-stage).

The reference checkers express several of these as regular expressions that backtrack quadratically
on hostile input (``^\\s*\\*...`` over a megabyte of newlines, ``<<[^\\n]+>>`` over a line of
``<``). The functions here compute the same counts with single left-to-right scans; the agreement
test compares them with the reference on the IFEval prompts.
"""
from __future__ import annotations

import json
import re

from .spec import Arg, Instruction

_SPACE_RUN = re.compile(r"\s*")
_HIGHLIGHT = re.compile(r"\*[^\n*]*\*")
_BOLD = re.compile(r"\*\*[^\n*]*\*\*")
_CONSTRAINED = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


def count_placeholders(text: str) -> int:
    """Number of ``[...]`` spans within one line, each closed by the first ``]`` after its ``[``."""
    count = 0
    for line in text.split("\n"):
        pos = 0
        while True:
            start = line.find("[", pos)
            end = line.find("]", start + 1) if start >= 0 else -1
            if end < 0:
                break  # no closing bracket left on this line for this or any later '['
            count += 1
            pos = end + 1
    return count


def _postscript(text: str, postscript_marker: str) -> bool:
    lowered = text.lower()
    marker = postscript_marker.strip()
    # The reference's fixed patterns for its two standard markers tolerate a space after each dot.
    if marker == "P.P.S":
        pattern = r"p\.\s?p\.\s?s"
    elif marker == "P.S.":
        pattern = r"p\.\s?s\."
    else:
        pattern = marker.lower()
    return re.search(pattern, lowered, flags=re.MULTILINE) is not None


def count_list_items(text: str, marker: str) -> int:
    """Number of lines that, after leading whitespace (which may span blank lines), start with
    ``marker``.

    ``*`` must be followed by a character that is not ``*`` (a newline counts, and then the item
    runs to the end of the next line), so ``**bold**`` lines are not bullets. Items are counted
    without overlap, scanning from the top: a line consumed by the previous item cannot start a new
    one.
    """
    n, count, start = len(text), 0, 0  # `start` is always the first character of a line
    while start <= n:
        head = _SPACE_RUN.match(text, start).end()
        if marker == "*":
            is_item = text.startswith("*", head) and head + 1 < n and text[head + 1] != "*"
            body = head + 2
        else:
            is_item = text.startswith("-", head)
            body = head + 1
        if is_item:
            count += 1
            end = text.find("\n", body)
            if end < 0:
                break
            start = end if text[end - 1] == "\n" else end + 1
        else:
            # Every line starting inside the same whitespace run reaches the same `head`, and fails
            # the same way.
            newline = text.find("\n", head)
            if newline < 0:
                break
            start = newline + 1
    return count


def _number_bullet_lists(text: str, num_bullets: int) -> bool:
    return count_list_items(text, "*") + count_list_items(text, "-") == num_bullets


def _constrained_response(text: str) -> bool:
    text = text.strip()
    return any(option in text for option in _CONSTRAINED)


def count_highlights(text: str) -> int:
    """``*italic*`` and ``**bold**`` spans within one line with non-blank content; bold also counts
    once as two empty italics, which do not count."""
    single = sum(1 for m in _HIGHLIGHT.finditer(text) if m.group()[1:-1].strip())
    double = sum(1 for m in _BOLD.finditer(text) if m.group()[2:-2].strip())
    return single + double


def _number_highlighted_sections(text: str, num_highlights: int) -> bool:
    return count_highlights(text) >= num_highlights


def _multiple_sections(text: str, section_spliter: str, num_sections: int) -> bool:
    splitter = r"\s?" + section_spliter.strip() + r"\s?\d+\s?"
    return len(re.split(splitter, text)) - 1 >= num_sections


def _json_format(text: str) -> bool:
    text = text.strip()
    for fence in ("```json", "```Json", "```JSON", "```"):  # applied in turn, as the reference does
        text = text.removeprefix(fence)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: thousands of nested brackets
        return False
    return True


def has_title(text: str) -> bool:
    """A line holds ``<<title>>`` with a non-blank title.

    Per line, the reference pattern ``<<[^\\n]+>>`` can only match from the first ``<<`` to the last
    ``>>`` (greedy), and only if at least one character lies between them; the title is that span
    with the angle brackets at both ends stripped.
    """
    for line in text.split("\n"):
        start = line.find("<<")
        if start < 0:
            continue
        end = line.rfind(">>")
        if end >= start + 3 and line[start:end + 2].lstrip("<").rstrip(">").strip():
            return True
    return False


INSTRUCTIONS = (
    Instruction("detectable_content:number_placeholders",
                lambda text, num_placeholders: count_placeholders(text) >= num_placeholders,
                {"num_placeholders": Arg(int, minimum=0)}),
    Instruction("detectable_content:postscript", _postscript, {"postscript_marker": Arg("regex")}),
    Instruction("detectable_format:number_bullet_lists", _number_bullet_lists,
                {"num_bullets": Arg(int, minimum=0)}),
    Instruction("detectable_format:constrained_response", _constrained_response),
    Instruction("detectable_format:number_highlighted_sections", _number_highlighted_sections,
                {"num_highlights": Arg(int, minimum=0)}),
    Instruction("detectable_format:multiple_sections", _multiple_sections,
                {"section_spliter": Arg("regex"), "num_sections": Arg(int, minimum=0)}),
    Instruction("detectable_format:json_format", _json_format),
    Instruction("detectable_format:title", has_title),
)
