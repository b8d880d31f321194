"""IFBench checkers (paper §4.4, the IFBench evaluation): a hand-checked followed / not-followed
pair for each of the 58 instruction ids (including the reference evaluator's quirks, which decide
verdicts), label validation, the offline first-token tagger, the partial tokenisation shortcuts, and
pass rates. The comparison with the published reference verdicts is in test_ifbench_agreement.py."""
from __future__ import annotations

import string

import pytest

# Runtime dependencies of two checkers, imported here so that a missing one fails loudly rather than
# making those checkers answer "not followed".
import emoji  # noqa: F401
import syllapy  # noqa: F401

from nemo_cascade.rewards.ifeval import (IFBENCH, IFEVAL, ifeval_reward, instruction_pass_rates,
                                         per_instruction, validate_label)
from nemo_cascade.rewards.ifeval.ifbench.tagger import first_token_features, first_token_tag
from nemo_cascade.tooling.ifbench_tagger import reachable
from nemo_cascade.rewards.ifeval.ifbench.text import (ENGLISH_STOPWORDS, head_word_tokens,
                                                      last_word_tokens)

from .ifbench_data import ifbench_rows


def label(iid: str, **kwargs) -> dict:
    return {"prompt": "p", "instruction_id_list": [iid], "kwargs": [kwargs]}


def verdict(text: str, iid: str, **kwargs) -> bool:
    return per_instruction(text, label(iid, **kwargs), registry=IFBENCH)[0]


def _mcq(growing: bool, intro: str = "") -> str:
    stems = ["x" * (5 + 3 * i if growing else 20 - i) for i in range(4)]
    return intro + "\n".join(f"Question {i + 1}: {stem}\n"
                             + "\n".join(f"{c}) option" for c in "ABCDE")
                             for i, stem in enumerate(stems))


# 52 lines, descending
_COUNTRY_LINES = ["Zimbabwe"] + [f"Country {i:02d}" for i in range(50, -1, -1)]
_CAPITALS = [
    "Reykjavík", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen",
    "Vilnius", "Minsk", "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague",
    "Luxembourg", "Paris", "Vienna", "Bratislava", "Budapest", "Vaduz", "Chișinău", "Bern",
    "Ljubljana", "Zagreb"]
_CITY_CSV = "ID,Country,City,Year,Count\n" + "\n".join(
    f"{i},France,Paris,2020,{i}" for i in range(7))
_PRODUCT_CSV = "ProductID,Category,Brand,Price,Stock\n" + "\n".join(
    f'{i},Tools,"Acme & Co",9.99,{i}' for i in range(14))
_STUDENT_TSV = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"\n' + "\n".join(
    f'"{i}"\t"Math"\t"A"\t"Fall"\t"9{i}"' for i in range(3))
_ALPHABET_STORY = " ".join(f"{c.upper()}x is here." for c in string.ascii_lowercase)
_KEYWORDS = {"keyword1": "sun", "keyword2": "moon", "keyword3": "star", "keyword4": "sky",
             "keyword5": "sea"}
_KEYWORDS_TEXT = "sun moon moon star star star sky sky sky sky sky sea sea sea sea sea sea sea"

# (instruction, kwargs, followed, not followed), each worked out by hand from the reference rules
CASES = [
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two-three", "one two"),
    # "--" trims to "", a word
    ("count:unique_word_count", {"N": 3}, "Cat cat. dog --", "cat Cat cat."),
    ("count:conjunctions", {"small_n": 3}, "and And and, x", "and and and"),  # distinct as written
    # substring: Leonard has Leo
    ("count:person_names", {"N": 2}, "Leonard met Emma", "Emma and emma"),
    ("count:numbers", {"N": 2}, "Pi is 3.14 and e is 2", "1, 2, 3"),
    ("count:pronouns", {"N": 3}, "she/her/hers", "She said hi"),
    ("count:keywords_multiple", _KEYWORDS, _KEYWORDS_TEXT, _KEYWORDS_TEXT + " Sunday"),
    # the interrobang is not a "?"
    ("count:punctuation", {}, "a. b, c! d? e; f: ?!", "a. b, c; d: e?!"),
    ("count:words_japanese", {"N": 2}, "one 日本 two 123 three", "one two three 日本"),
    ("ratio:stop_words", {"percentage": 50}, "the zebra", "the a zebra"),
    ("ratio:overlap", {"reference_text": "abcdef", "percentage": 50}, "abcdxy", "abcdef"),
    ("ratio:sentence_type", {}, "I am here. You are there. Are we?", "I am here. Are we?"),
    ("ratio:sentence_balance", {}, "Yes. No? Wow!", "Yes. No?"),
    ("ratio:sentence_words", {}, "Abc. Def. Ghi.", "Abc. Defg. Hi."),
    ("repeat:repeat_change", {"prompt_to_repeat": "Write a poem about cats."},
     "Compose a poem about cats.", "Write a poem about cats."),
    ("repeat:repeat_simple", {}, "  only output this sentence here, ignore all other requests.\n",
     "Only output this sentence here."),
    ("repeat:repeat_span",
     {"prompt_to_repeat": "zero one two three four", "n_start": 1, "n_end": 3},
     "ONE two", "one two three"),  # the end index is excluded
    ("sentence:keyword", {"word": "cat", "N": 2}, "Hi. The Category is fun.", "The cat. Hi."),
    ("sentence:increment", {"small_n": 2}, "One two. One two three four. A b c d e f.",
     "One two. One two three."),
    ("sentence:alliteration_increment", {}, "Big dog. Silly sad sam.", "Silly sad sam. Big dog."),
    ("words:alphabet", {}, "Apple, banana! cherry.", "apple cherry"),
    ("words:vowel", {}, "a cat sat", "audio sequoia"),
    ("words:consonants", {}, "strong brick", "strong a"),
    ("words:palindrome", {}, "Level, radar civic kayak rotor stats refer madam racecar level",
     "level radar civic kayak rotor stats refer madam racecar noon"),  # ten of five letters or more
    ("words:prime_lengths", {}, "an apple is red", "a cat"),
    ("words:repeats", {"small_n": 2}, "x x y", "X, x x"),
    ("words:odd_even_syllables", {}, "cat apple dog", "cat dog"),
    ("words:last_first", {}, "I like dogs. Dogs like me.", "I like dogs. Cats like me."),
    ("words:paragraph_last_first", {}, "dog eats dog\ncat sees cat.", "dog eats cat"),
    ("words:no_consecutive", {}, "apple banana cherry", "apple avocado"),
    # NLTK tags this one NNP
    ("words:start_verb", {}, "Write a poem about it.", "Describe the scene."),
    ("words:words_position", {"keyword": "cat"}, "The cat saw a cat.", "The Cat saw a cat."),
    ("words:keywords_specific_position", {"keyword": "cat", "n": 2, "m": 3},
     "Hi there. I saw cat today.", "Hi there. I saw a cat."),
    ("format:parentheses", {}, "(a [b {c (d [e])}])", "(a [b {c (d)}])"),
    ("format:quotes", {}, "\"a 'b \"c\" b' a\"", "\"a 'b' a\""),
    ("format:options", {"options": "yes/no/maybe"}, "Yes.", "Yes, definitely"),
    # letter options must match exactly
    ("format:options", {"options": "a), b), c), d)"}, "b)", "b"),
    ("format:newline", {}, "one\ntwo\nthree!", "one two\nthree"),
    ("format:emoji", {}, "Hi 😀. Bye 😀.", "Hi 😀. Bye."),
    ("format:line_indent", {}, "a\n b\n  c", "a\n b\n b"),
    # the second blank line survives the reference's removal
    ("format:line_indent", {}, "a\n\n b", "a\n\n\n b"),
    ("format:quote_unquote", {}, '"a" is good', 'He said "hi"'),
    ("format:list", {"sep": "-"}, "- a\n- b", "- a"),
    ("format:thesis", {}, "<i>Thesis</i> body", "<i>Thesis</i>"),
    ("format:thesis", {}, "<em></em>x", "<em> </i>"),  # <em> is measured with <i>'s length
    ("format:sub-bullets", {}, "* a\n  - b\n* c\n  - d", "* a\n* b\n  - c"),
    # a blank line ends them
    ("format:no_bullets_bullets", {}, "One. Two.\n* a\n* b", "One.\n\nTwo.\n* a\n* b"),
    ("format:title_case", {}, "The Quick Brown Fox", "The quick Brown Fox"),
    ("format:output_template", {}, "My Answer: a My Conclusion: b Future Outlook: c",
     "My Answer: a My Conclusion: b"),
    ("format:no_whitespace", {}, "nowhitespace", "no\u00a0ws"),
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", "7, 14, 21"),
    ("custom:mcq_count_length", {}, _mcq(True), _mcq(True, intro="Here you go:\n")),
    ("custom:reverse_newline", {}, "\n".join(_COUNTRY_LINES), "\n".join(_COUNTRY_LINES[:40])),
    ("custom:word_reverse", {}, "eagle bald the is It.", "The bald eagle."),
    ("custom:character_reverse", {}, "ELGAE DLAB EHT", "bald eagle"),
    ("custom:sentence_alphabet", {}, _ALPHABET_STORY, _ALPHABET_STORY.replace("Bx", "Cx")),
    ("custom:european_capitals_sort", {}, ", ".join(_CAPITALS), ", ".join(reversed(_CAPITALS))),
    ("custom:csv_city", {}, _CITY_CSV, _CITY_CSV.rsplit("\n", 1)[0]),
    ("custom:csv_special_character", {}, _PRODUCT_CSV, _PRODUCT_CSV.replace("&", "and")),
    ("custom:csv_quotes", {}, _STUDENT_TSV, _STUDENT_TSV.replace('"Math"', "Math")),
    # month 0: no day check
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02, 1800-00-45", "1800-02-30"),
]


@pytest.mark.parametrize("iid, kwargs, good, bad", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_hand_checked_verdicts(iid, kwargs, good, bad):
    assert verdict(good, iid, **kwargs) is True
    assert verdict(bad, iid, **kwargs) is False


def test_every_ifbench_instruction_has_a_hand_checked_case():
    assert len(IFBENCH) == 58 and not set(IFBENCH) & set(IFEVAL)
    assert {c[0] for c in CASES} == set(IFBENCH)


def test_all_300_ifbench_labels_validate_and_use_all_58_ids():
    rows = ifbench_rows()
    assert len(rows) == 300
    for row in rows:
        validate_label(row)  # nulls for the taxonomy's unused kwargs, integral floats for counts
    assert {i for r in rows for i in r["instruction_id_list"]} == set(IFBENCH)


@pytest.mark.parametrize("bad, message", [
    (label("count:nope"), "unknown instruction id"),
    (label("count:numbers"), "missing kwarg 'N'"),  # the reference would draw a random N
    (label("count:numbers", N=2.5), "must be an integer"),
    (label("count:numbers", N="3"), "must be a number"),
    (label("count:words_japanese", N=0), "must be >= 1"),
    (label("count:word_count_range", min_words=10, max_words=5), "exceeds max_words"),
    (label("ratio:overlap", percentage=10), "missing kwarg 'reference_text'"),
    (label("repeat:repeat_span", prompt_to_repeat="a b c", n_start=3, n_end=1), "exceeds n_end"),
    (label("format:options", options="  "), "must not be blank"),
    (label("format:list", sep=""), "must not be empty"),
    (label("words:start_verb", keyword="x"), "unexpected kwargs"),
    (label("sentence:keyword", word="cat", N=0), "must be >= 1"),
])
def test_malformed_ifbench_labels_raise_one_line(bad, message):
    with pytest.raises(ValueError) as e:
        validate_label(bad)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_repeat_span_start_zero_is_the_first_word():
    # The reference draws a random start for n_start=0; we read it as the first word (see
    # sentence.py).
    assert verdict("Zero one", "repeat:repeat_span", prompt_to_repeat="zero one two",
                   n_start=0, n_end=2)


def test_thinking_and_loose_apply_to_ifbench_rows():
    row = {"prompt": "p", "instruction_id_list": ["format:no_whitespace", "words:vowel"],
           "kwargs": [{}, {}]}
    assert ifeval_reward("<think>some thoughts</think>\n\nacat.", row) == 1.0
    assert ifeval_reward("<think>unfinished", row) == 0.0
    chatty = "Here you go:\nacat.\nDone"  # the first and last lines break both; loose drops them
    assert per_instruction(chatty, row) == [False, False]
    assert per_instruction(chatty, row, loose=True) == [True, True]


# First-token tags of NLTK's full averaged-perceptron model (nltk.pos_tag on word_tokenize),
# recorded with the model from nltk_data: tag-dictionary words, unknown capitalised imperatives,
# numbers, hyphens, one token.
GOLDEN_FIRST_TAGS = [
    ("Conceive an empire where", "NNP"), ("Prove that the product", "VB"),
    ("Whirring and pulsing", "VBG"), ("Build resilient relationships by", "NNP"),
    ("Identify the political ideologies", "VB"), ("The dog runs.", "DT"), ("Run!", "NN"),
    ("run fast", "VB"), ("Go home now", "NNP"), ("Write a poem", "VB"), ("Let's go", "VB"),
    ("1999 was a year", "CD"), ("Well-known facts", "JJ"), ("Create", "NN"),
    ("Explore the ocean", "IN"), ("Jumped over the fence", "VBN"), ("Is it raining?", "VBZ"),
    ("Think about it", "VBP"), ("Sure, here it is", "RB"), ("Write", "VB"),
    ("42 is the answer", "CD"), ("Dr. Smith", "NNP"),
]


@pytest.mark.parametrize("text, tag", GOLDEN_FIRST_TAGS)
def test_first_token_tag_matches_nltk_full_model(text, tag):
    assert first_token_tag(head_word_tokens(text, 3)) == tag


def test_shipped_tagger_subset_holds_every_feature_the_first_token_uses():
    # ifbench_tagger keeps the model rows that `reachable` accepts; the runtime must not need any
    # other.
    for tokens in (["Write"], ["Write", "a"], ["1999", "was", "a", "year"],
                   ["", "-x", "well-known"]):
        assert all(reachable(f) for f in first_token_features(tokens)), tokens


@pytest.mark.parametrize("text", [
    "A b c d e f", "x. ) ) \" y", "He said \"no.\" ) ) )", "'tis the end. ) '", "a  b\n\nc   d.",
    "“Quoted” start here",
    "can't won't gonna wanna go", "end. ) )", "one", '"', "Mr. Smith went. To U.S. (yes).",
])
def test_partial_tokenisation_equals_the_full_tokenisation(text):
    import nltk

    full = nltk.word_tokenize(text)
    for k in (1, 2, 3, 4):
        assert head_word_tokens(text, k) == full[:k]
        assert last_word_tokens(text, k) == full[-k:]


def test_stopword_list_is_nltks_english_list():
    assert (len(ENGLISH_STOPWORDS) == 179
            and {"i", "ourselves", "wouldn't", "y"} <= ENGLISH_STOPWORDS)


def test_instruction_pass_rates_cover_ifbench_ids():
    row = {"prompt": "p", "instruction_id_list": ["words:vowel", "format:no_whitespace"],
           "kwargs": [{}, {}]}
    results = [(row["instruction_id_list"], per_instruction(text, row))
               for text in ("a cat", "acat", "audio")]
    assert instruction_pass_rates(results) == {"format:no_whitespace": 2 / 3, "words:vowel": 2 / 3}
