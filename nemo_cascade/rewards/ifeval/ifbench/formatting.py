"""IFBench's ``format:*`` instructions: layout and markup — bullets, indentation, quotes, brackets,
emoji, fixed options and templates, title case (paper §4.4, the IFBench evaluation).

Verdicts follow the reference evaluator (allenai/IFBench at c94da020), including its shortcuts (e.g.
``sub-bullets`` only asks that every ``*`` is followed by a ``-`` somewhere before the next ``*``);
each function's docstring states the rule as the reference applies it.
"""
from __future__ import annotations

import re
import string
from collections import deque

import emoji as emoji_data

from ..spec import Arg, Instruction
from .text import drop_punctuation, rule_sentences, trim_punctuation, word_tokens

_OPENERS = {")": "(", "]": "[", "}": "{"}
_MIN_BRACKET_DEPTH = 5
_MIN_QUOTE_DEPTH = 3
_TEMPLATE_HEADINGS = ("My Answer:", "My Conclusion:", "Future Outlook:")
_QUOTE_TRAILER = string.digits + string.punctuation.replace('"', "")


def _parentheses(text: str) -> bool:
    """Brackets ``()[]{}`` nested at least 5 deep, closed properly at least once from that depth.

    Scanning left to right with a stack: a closing bracket that does not match the innermost open
    one empties the stack and forgets the depth reached so far.
    """
    stack: list[str] = []
    deepest = 0
    for ch in text:
        if ch in "([{":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in _OPENERS:
            if stack and stack[-1] == _OPENERS[ch]:
                stack.pop()
                if deepest >= _MIN_BRACKET_DEPTH:
                    return True
            else:
                stack, deepest = [], 0
    return False


def _quotes(text: str) -> bool:
    """Quotes nested at least 3 deep: a ``"`` or ``'`` equal to the innermost open quote closes it,
    any other opens a new level; passes once the depth reached exceeds the current depth by 3 or
    more after a close."""
    stack: list[str] = []
    reached = 0
    for ch in text:
        if stack and ch == stack[-1]:
            stack.pop()
            if reached - len(stack) >= _MIN_QUOTE_DEPTH:
                return True
        elif ch == '"' or ch == "'":
            stack.append(ch)
            reached = max(reached, len(stack))
    return False


def _parse_options(options: str) -> tuple[bool, list[str]]:
    """``(letters, choices)``: letter choices (``a), b), c)``) must be answered exactly as written;
    the options string is split at ``/``, else at the first-found substring ``or``, else at
    commas."""
    letters = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    separator = "/" if "/" in options else "or" if "or" in options else ","
    return letters, [choice.strip() for choice in options.split(separator)]


def _options(text: str, options: str) -> bool:
    letters, choices = _parse_options(options)
    if letters:
        return text in choices
    answer = trim_punctuation(text).lower()
    return any(trim_punctuation(choice).lower() == answer for choice in choices)


def _newline(text: str) -> bool:
    """Punctuation removed, the stripped text has as many non-empty lines as whitespace-separated
    words."""
    stripped = drop_punctuation(text).strip()
    lines = [line for line in stripped.split("\n") if line != ""]  # a line of spaces still counts
    return len(lines) == len(stripped.split())


def _emoji(text: str) -> bool:
    """Every sentence ends with an emoji, or the next sentence starts with one (the splitter may cut
    an emoji off its sentence). "Ends" looks at the last two characters once punctuation and outer
    whitespace are gone, because an emoji is often followed by a variation selector."""
    sentences = [drop_punctuation(s).strip() for s in rule_sentences(text)]
    for i, sentence in enumerate(sentences):
        if not sentence:
            return False  # a sentence of punctuation only: the reference fails on it
        if (emoji_data.is_emoji(sentence[-1])
                or emoji_data.is_emoji(sentence[-2:-1] or sentence[-1])):
            continue
        if (i == len(sentences) - 1 or not sentences[i + 1]
                or not emoji_data.is_emoji(sentences[i + 1][0])):
            return False
    return True


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _lines_after_blank_removal(text: str) -> list[str]:
    """The lines the reference compares, reproduced in linear time.

    The reference removes blank lines with ``lines.remove(line)`` while iterating over ``lines``:
    each removal takes out the *first* remaining line equal to the current one (possibly an earlier
    blank line that the iteration skipped) and makes the iteration skip the line after the current
    one. Equal blank lines are interchangeable, so it is enough to know, per distinct blank line,
    which positions are still present.
    """
    lines = text.split("\n")
    removed = [False] * len(lines)
    present_blank: dict[str, deque] = {}  # blank line → positions seen and not removed, in order
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            queue = present_blank.setdefault(line, deque())
            queue.append(i)
            removed[queue.popleft()] = True
            # the skipped line stays, for later removals
            if i + 1 < len(lines) and not lines[i + 1].strip():
                present_blank.setdefault(lines[i + 1], deque()).append(i + 1)
            i += 2
        else:
            i += 1
    return [line for line, gone in zip(lines, removed) if not gone]


def _line_indent(text: str) -> bool:
    """Each line (blank lines mostly removed, see above) is indented by more spaces than the one
    before."""
    lines = _lines_after_blank_removal(text)
    return all(_indent(b) > _indent(a) for a, b in zip(lines, lines[1:]))


def _quote_unquote(text: str) -> bool:
    """No two quotation marks are adjacent once whitespace is removed, and the text does not end
    with one (trailing digits and other punctuation ignored): every quote is followed by unquoted
    words."""
    compact = "".join(text.replace("“", '"').replace("”", '"').replace("'\"'", "").split())
    if '""' in compact:
        return False
    tail = compact.strip(_QUOTE_TRAILER)
    return bool(tail) and tail[-1] != '"'


def _list(text: str, sep: str) -> bool:
    """The separator appears at least twice (anywhere, non-overlapping)."""
    return len(re.findall(re.escape(sep), text)) >= 2


def _thesis(text: str) -> bool:
    """An HTML-italic span (``<i>`` or ``<em>``) with non-blank content, followed by more text.

    The reference measures both tags with the lengths of ``<i>``/``</i>``, so after ``<em>`` the
    ``>`` counts as content and after ``</em>`` the ``>`` as following text; kept, since verdicts
    depend on it.
    """
    start = text.find("<i>")
    if start == -1:
        start = text.find("<em>")
        if start == -1:
            return False
    rest = text[start:]
    end = rest.find("</i>")
    if end == -1:
        end = rest.find("</em>")
        if end == -1:
            return False
    return rest[3:end].strip() != "" and rest[end + 4:].strip() != ""


def _sub_bullets(text: str) -> bool:
    """Every ``*`` is followed by a ``-`` before the next ``*`` (or the end)."""
    return all("-" in piece for piece in text.split("*")[1:])


def _no_bullets_bullets(text: str) -> bool:
    """At least two sentences, then at least two lines starting with ``*``, and nothing after the
    bullets.

    Sentences are counted line by line (rule-based splitter) until the first bullet. As in the
    reference, a blank line among the sentences ends the sentence part: a later non-bullet line then
    fails.
    """
    sentences = 0
    bullets = 0
    in_sentences = True
    for line in text.split("\n"):
        if line.strip().startswith("*"):
            in_sentences = False
            if sentences < 2:
                return False
            bullets += 1
        elif in_sentences:
            found = len(rule_sentences(line.strip()))
            sentences += found
            in_sentences = found > 0
        else:
            return False
    return bullets >= 2


def _title_case(text: str) -> bool:
    """No ``word_tokenize`` token is lower-case-initial with the rest all-lower or all-upper
    (``word``, ``wORD``); single characters and tokens without cased letters pass."""
    for token in word_tokens(text):
        if not token:
            # the reference indexes token[0]; the tokenizer does not produce empty tokens
            return False
        head, tail = token[:1], token[1:]
        if head.isupper() and tail.islower():
            continue
        if head.islower() and (tail.isupper() or tail.islower()):
            return False
    return True


def _output_template(text: str) -> bool:
    return all(heading in text for heading in _TEMPLATE_HEADINGS)


def _no_whitespace(text: str) -> bool:
    return not any(ch.isspace() for ch in text)


def _known_options(options: str):
    return None if options.strip() else "options must not be blank"


def _nonempty_separator(sep: str):
    return None if sep else "sep must not be empty"


INSTRUCTIONS = (
    Instruction("format:parentheses", _parentheses),
    Instruction("format:quotes", _quotes),
    Instruction("format:options", _options, {"options": Arg(str)}, validate=_known_options),
    Instruction("format:newline", _newline),
    Instruction("format:emoji", _emoji),
    Instruction("format:line_indent", _line_indent),
    Instruction("format:quote_unquote", _quote_unquote),
    Instruction("format:list", _list, {"sep": Arg(str)}, validate=_nonempty_separator),
    Instruction("format:thesis", _thesis),
    Instruction("format:sub-bullets", _sub_bullets),
    Instruction("format:no_bullets_bullets", _no_bullets_bullets),
    Instruction("format:title_case", _title_case),
    Instruction("format:output_template", _output_template),
    Instruction("format:no_whitespace", _no_whitespace),
)
