"""A corpus of varied responses to the 541 IFEval prompts, for the agreement tests (tests only).

Each prompt gets GPT-4's reference response (data/ifeval, Zhou et al. 2023) plus deterministic
mutations of it: a few generic ones (case changes, quotes, commas, a chatty first and last line)
and, for each of the prompt's instructions, edits that aim to flip that instruction's verdict in
both directions (drop or add a keyword, a section, a bullet, a postscript, cut to a threshold, ...).
Which verdicts actually flip is measured by the tests, not assumed here.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data" / "ifeval"
ENGLISH = (
    "The committee met on Tuesday to review the budget. Everyone agreed that the new plan was "
    "better than the old one, and the vote passed without objection.")


def load_rows() -> list[tuple[dict, str]]:
    """(IFEval row, GPT-4 response) pairs, in file order (both files list the 541 prompts in one
    order)."""
    rows = read_jsonl_gz(DATA / "input_data.jsonl.gz")
    answers = [r["response"]
               for r in read_jsonl_gz(DATA / "input_response_data_gpt4_20231107_145030.jsonl.gz")]
    assert len(rows) == len(answers) == 541
    return list(zip(rows, answers))


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _cut_words(text: str, n: int) -> str:
    """``text`` up to the end of its n-th ``\\w+`` word."""
    ends = [m.end() for m in re.finditer(r"\w+", text)]
    return text[:ends[n - 1]] if 0 < n <= len(ends) else text


def _cut_sentences(text: str, n: int) -> str:
    parts = re.split(r"(?<=[.!?])\s+", text)
    return " ".join(parts[:max(n, 1)])


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text) if p.strip()] or [text]


def generic(base: str) -> list[str]:
    return [base.upper(), base.lower(), '"' + base.strip() + '"', base.replace(",", ""),
            "Sure, here it is:\n" + base + "\nHope this helps!", base.replace("*", ""),
            "\n".join(base.split("\n")[: max(1, base.count("\n") // 2)])]


def targeted(iid: str, kw: dict, base: str,
             prompt: str) -> list[str]:  # noqa: C901 — one branch per instruction
    kind = iid.split(":")[1]
    paras = _paragraphs(base)
    if kind in ("existence", "forbidden_words"):
        words = kw.get("keywords") or kw.get("forbidden_words")
        stripped = base
        for w in words:
            stripped = re.sub(w, "", stripped, flags=re.IGNORECASE)
        return [stripped, stripped + " " + " ".join(words), base + " " + words[0].upper() + "s"]
    if kind == "frequency":
        k, f = kw["keyword"], kw["frequency"]
        stripped = re.sub(k, "", base, flags=re.IGNORECASE)
        return [stripped, stripped + (" " + k) * f, stripped + (" " + k) * max(f - 1, 0),
                base + " " + k]
    if kind == "letter_frequency":
        letter, f = kw["letter"], kw["let_frequency"]
        stripped = base.replace(letter.lower(), "").replace(letter.upper(), "")
        return [stripped, stripped + " " + letter * f,
                stripped + " " + letter.upper() * max(f - 1, 0)]
    if kind == "response_language":
        return [ENGLISH, base + "\n\n" + ENGLISH]
    if kind == "number_sentences":
        n = kw["num_sentences"]
        return [_cut_sentences(base, n - 1), _cut_sentences(base, n),
                base + " Extra words here." * n]
    if kind == "number_paragraphs":
        n = kw["num_paragraphs"]
        out = ["\n***\n".join((paras * n)[:k]) for k in (n - 1, n, n + 1) if k > 0]
        return out + ["\n\n***\n\n".join((paras * n)[:n]) + "\n***",
                      "***\n" + " *** ".join((paras * n)[:n]),
                      "\n***\n".join(((paras * n)[:n - 1]) + ["", "x"])]
    if kind == "number_words":
        n = kw["num_words"]
        return [_cut_words(base, n - 1), _cut_words(base, n), base + " word" * n]
    if kind == "nth_paragraph_first_word":
        n, nth, word = kw["num_paragraphs"], kw["nth_paragraph"], kw["first_word"]
        ps = (paras * n)[:n]
        fixed = ps[:nth - 1] + [word.capitalize() + ", " + ps[nth - 1]] + ps[nth:]
        quoted = ps[:nth - 1] + ['"' + word.upper() + '." ' + ps[nth - 1]] + ps[nth:]
        return ["\n\n".join(fixed), "\n\n".join(fixed[:-1]) if n > 1 else word, "\n\n".join(quoted),
                "\n\n".join(fixed) + "\n\n\n\nmore", "\n\n" + "\n\n".join(fixed)]
    if kind == "number_placeholders":
        n = kw["num_placeholders"]
        stripped = base.replace("[", "(").replace("]", ")")
        return [stripped, stripped + " [name]" * n, stripped + " [x]" * (n - 1) + " [broken\n]",
                base + " [[a]"]
    if kind == "postscript":
        m = kw["postscript_marker"]
        cut = re.split(r"(?i)p\.\s?p?\.?\s?s", base)[0]
        return [cut, cut + "\n\n" + m + " extra note", cut + "\np. s. lower note",
                cut + "\nP.P.S. both"]
    if kind == "number_bullet_lists":
        n = kw["num_bullets"]
        items = "\n".join(f"* point {i}" for i in range(n))
        return [items, items + "\n- one more",
                "Intro\n" + items.replace("* ", "- ") + "\n**bold** line",
                "\n\n\n   * spaced\n*\nnext line", base + "\n* extra"]
    if kind == "constrained_response":
        return ["My answer is yes.", "my answer is no.", base + "\nMy answer is maybe."]
    if kind == "number_highlighted_sections":
        n = kw["num_highlights"]
        return [base.replace("*", ""), base.replace("*", "") + " *hl*" * n,
                base.replace("*", "") + " **bold**" * (n - 1) + " * *", "*a\nb* **c** ***d***"]
    if kind == "multiple_sections":
        s, n = kw["section_spliter"], kw["num_sections"]
        secs = "\n".join(f"{s} {i}\ncontent {i}" for i in range(1, n + 1))
        return [secs, "\n".join(secs.split("\n")[:-2]), secs.lower(), secs.replace(f"{s} ", s)]
    if kind == "json_format":
        doc = json.dumps({"answer": base})
        return [doc, "```json\n" + doc + "\n```", "```JSON" + doc + "```", doc + "}",
                "[" * 50 + "]" * 50]
    if kind == "title":
        return ["<<A Title>>\n" + base, base.replace("<<", "<"), "<< >>\n" + base,
                "<<<a>>> and <<b>>", "<<\n>>" + base]
    if kind == "two_responses":
        other = base.upper()
        return [base + "\n******\n" + other, base + "******" + base,
                "******" + base + "******" + other, base + "\n******\n\n******\n" + other,
                base + "*******" + other]
    if kind == "repeat_prompt":
        p = kw["prompt_to_repeat"]
        return [p + "\n" + base, p.lower() + " " + base, p[:-3] + "\n" + base, "  " + p]
    if kind == "end_checker":
        e = kw["end_phrase"]
        return [base + "\n" + e, base + " " + e + '"', base + " " + e + " Bye.", e.upper()]
    if kind == "capital_word_frequency":
        n = kw["capital_frequency"]
        return [base.lower(), base.lower() + " WORD" * n, base.lower() + " DON'T" * (n // 2 + 1),
                base.lower() + " I" * (n - 1)]
    if kind in ("english_capital", "english_lowercase"):
        return [base.upper() + " x", base.lower() + " X", "123 !!!"]
    if kind == "quotation":
        return ['"' + base, '"' + base + '"\n', '"']
    return []  # no_comma: the generic comma edits cover it


def corpus() -> list[tuple[dict, list[str], list[list[str]]]]:
    """Per IFEval row: all its distinct responses (GPT-4's first, then the generic and the targeted
    edits), and per instruction of the row the targeted edits made for it."""
    out = []
    for row, base in load_rows():
        own = [targeted(iid, kw, base, row["prompt"])
               for iid, kw in zip(row["instruction_id_list"], row["kwargs"])]
        texts = [base, *generic(base), *(t for edits in own for t in edits)]
        out.append((row, list(dict.fromkeys(texts)), own))
    return out
