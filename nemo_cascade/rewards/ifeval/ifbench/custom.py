"""IFBench's ``custom:*`` instructions: one-off tasks whose answer format (and partly content) is
checked — CSV tables, sorted lists, reversed text, counting (paper §4.4, the IFBench evaluation).

Each checker states the rule of the reference evaluator (allenai/IFBench at c94da020); where that
rule is laxer or stricter than the prompt's wording, the rule wins, since it defines the benchmark's
verdicts.
"""
from __future__ import annotations

import csv
import io
import re
import unicodedata

from ..spec import Instruction
from .text import drop_punctuation, rule_sentences, trim_punctuation

_MULTIPLES_OF_7 = [str(n) for n in range(14, 51, 7)]
_EUROPEAN_CAPITALS_BY_LATITUDE = (
    "Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen",
    "Vilnius", "Minsk",
    "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague", "Luxembourg",
    "Paris", "Vienna",
    "Bratislava", "Budapest", "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb")
_MIN_AFRICAN_COUNTRIES = 52
_CITY_HEADER = ["ID", "Country", "City", "Year", "Count"]
_PRODUCT_HEADER = re.compile(r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ '
                             r'\t]*(Brand|"Brand"),'
                             r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$')
_STUDENT_HEADER = re.compile(r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t '
                             r'*(Grade|"Grade")\t *'
                             r'(Semester|"Semester")\t *(Score|"Score")$')
_QUOTED_SPECIAL = re.compile(r'".*[^\d\w\s].*"')
_QUESTION_LABEL = re.compile(r"\n*(?:Question \d+[\.|\):;]?\s*)")
_OPTION_LINE = re.compile(r"^[A-Ea-e][\.|\)]\s*\w+")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DAYS_IN_MONTH = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30,
                  12: 31}


def _ascii_fold(text: str) -> str:
    """Accents removed (NFKD, then non-ASCII dropped): "São Tomé" → "Sao Tome"."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def _csv_rows(text: str, **dialect) -> list[list[str]]:
    """The parsed rows, or no rows when the csv module rejects the text (e.g. a field over its 128
    KiB limit); the reference crashes there, i.e. the instruction is not followed."""
    try:
        return list(csv.reader(io.StringIO(text), **dialect))
    except csv.Error:
        return []


def _multiples(text: str) -> bool:
    """The numbers in the text are exactly 14, 21, 28, 35, 42, 49, in that order."""
    return re.findall(r"\d+", text.replace(",", ", ")) == _MULTIPLES_OF_7


def _mcq_count_length(text: str) -> bool:
    """Four questions labelled "Question N", nothing before the first, five options (``A.`` / ``a)``
    ...) each, and question texts (the lines before the first option) strictly growing in length."""
    if text.find("Question") != 0:
        # The reference compares the text with its slice from "Question" on; a one-character text
        # that lacks "Question" equals its own last-character slice and goes on to fail the count
        # below.
        if not (text.find("Question") == -1 and len(text) == 1):
            return False
    questions = [q.strip() for q in _QUESTION_LABEL.split(text) if q.strip()]
    if len(questions) != 4:
        return False
    lengths = []
    for question in questions:
        stem, options, in_options = "", 0, False
        for line in question.split("\n"):
            if _OPTION_LINE.match(line.strip()):
                options += 1
                in_options = True
            elif not in_options:
                stem += " " + line.strip()
        if options != 5:
            return False
        lengths.append(len(stem.strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:]))


def _reverse_newline(text: str) -> bool:
    """From the first line naming Zimbabwe on, at least 52 non-empty lines in reverse alphabetical
    order (lines trimmed of punctuation, accents folded)."""
    lines = [trim_punctuation(line) for line in text.split("\n") if trim_punctuation(line)]
    start = next((i for i, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < _MIN_AFRICAN_COUNTRIES:
        return False
    folded = [_ascii_fold(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


def _word_reverse(text: str) -> bool:
    """Read backwards word by word (lower-cased, punctuation removed), the text mentions "bald
    eagle" and is a single rule-based sentence."""
    backwards = " ".join(drop_punctuation(text.lower().strip()).split()[::-1])
    return "bald eagle" in backwards and backwards in rule_sentences(backwards)


def _character_reverse(text: str) -> bool:
    return "elgae dlab" in text.lower()


def _sentence_alphabet(text: str) -> bool:
    """26 rule-based sentences whose first words start with a, b, ..., z in order
    (case-insensitively)."""
    sentences = rule_sentences(text)
    if len(sentences) != 26:
        return False
    for letter, sentence in zip("abcdefghijklmnopqrstuvwxyz", sentences):
        words = sentence.split()
        if not words or words[0].lower()[0] != letter:
            return False
    return True


def _european_capitals_sort(text: str) -> bool:
    """Exactly the 27 capitals, comma-separated, from north to south (accents folded)."""
    names = [name.strip() for name in _ascii_fold(text).split(",") if name.strip()]
    return names == list(_EUROPEAN_CAPITALS_BY_LATITUDE)


def _csv_city(text: str) -> bool:
    """A comma-separated table: the given header and 7 rows of 5 fields."""
    rows = _csv_rows(text)
    return len(rows) == 8 and rows[0] == _CITY_HEADER and all(len(row) == 5 for row in rows[1:])


def _csv_special_character(text: str) -> bool:
    """The given header (first line), 14 rows of 5 fields, and a row with a double-quoted field that
    holds a character other than letters, digits and spaces — checked row by row, so a malformed row
    after the first such field is not reached. Quotes are tripled before parsing, so they survive as
    field content."""
    if not _PRODUCT_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(_QUOTED_SPECIAL.match(field) for field in row):
            return True
    return False


def _csv_quotes(text: str) -> bool:
    """The given tab-separated header (first line) and 3 rows, 5 fields each, every field in double
    quotes."""
    if not _STUDENT_HEADER.match(text.split("\n")[0].strip()):
        return False
    rows = _csv_rows(text.replace('"', '"""'), delimiter="\t")
    if len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        for field in row:
            field = field.strip()
            if not field or field[0] != '"' or field[-1] != '"':
                return False
    return True


def _date_format_list(text: str) -> bool:
    """Comma-separated YYYY-MM-DD dates in Napoleon's lifetime (years 1769-1821) with a plausible
    month and day (month 0 and day 0 pass, as in the reference)."""
    for date in text.strip().split(","):
        date = date.strip()
        if not _ISO_DATE.match(date):
            return False
        year, month, day = (int(part) for part in date.split("-"))
        if not 1769 <= year <= 1821 or month > 12 or day > _DAYS_IN_MONTH.get(month, 99):
            return False
    return True


INSTRUCTIONS = (
    Instruction("custom:multiples", _multiples),
    Instruction("custom:mcq_count_length", _mcq_count_length),
    Instruction("custom:reverse_newline", _reverse_newline),
    Instruction("custom:word_reverse", _word_reverse),
    Instruction("custom:character_reverse", _character_reverse),
    Instruction("custom:sentence_alphabet", _sentence_alphabet),
    Instruction("custom:european_capitals_sort", _european_capitals_sort),
    Instruction("custom:csv_city", _csv_city),
    Instruction("custom:csv_special_character", _csv_special_character),
    Instruction("custom:csv_quotes", _csv_quotes),
    Instruction("custom:date_format_list", _date_format_list),
)
