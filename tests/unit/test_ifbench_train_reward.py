"""IFBench-Train checkers (paper §4.4.2: the second IF-RL sub-stage trains on the IFBench-Train
taxonomy): a hand-checked followed / not-followed pair for each of the 29 instruction ids (including
the reference's quirks, which decide verdicts), label validation where the reference would draw a
random kwarg, the one-pass phrase search against the regular expression it replaces, and the
registries. The comparison with the reference verifier's verdicts is in
test_ifbench_train_agreement.py."""
from __future__ import annotations

import random
import re

import pytest

from nemo_cascade.rewards.ifeval import (ALL, EVALUATION_ONLY, IFBENCH, IFBENCH_TRAIN, IFEVAL,
                                         TRAINING, ifeval_reward, per_instruction, validate_label)
from nemo_cascade.rewards.ifeval.ifbench_train.copying import phrase_spans


def label(iid: str, **kwargs) -> dict:
    return {"prompt": "p", "instruction_id_list": [iid], "kwargs": [kwargs]}


def verdict(text: str, iid: str, **kwargs) -> bool:
    return per_instruction(text, label(iid, **kwargs), registry=IFBENCH_TRAIN)[0]


_REQUEST = "Write a poem. Keep it short."
_PHRASE = "Dance like nobody is watching you"
_COMPOSITION = "\n***\n".join(["One two three. Four five six."] * 3)

# (instruction, kwargs, followed, not followed), each worked out by hand from the reference's
# definitions
CASES = [
    # the second is unchanged
    ("copy:repeat_phrase", {"phrase": _PHRASE, "small_n": 2},
     "Dance like everybody is watching you. Dance like nobody was watching you.",
     "Dance like everybody is watching you. Dance like nobody is watching you."),
    # a span stays on its line
    ("copy:repeat_phrase", {"phrase": _PHRASE, "small_n": 1},
     "Dance like somebody is watching you", "Dance like somebody is\nwatching you"),
    # two words changed
    ("copy:repeat_phrase", {"phrase": _PHRASE, "small_n": 1},
     "Dance like somebody is watching you", "Dance like somebody was watching you"),
    ("copy:copy", {"prompt_to_repeat": _REQUEST}, "  write a poem. keep it short.\n",
     "Write a poem."),
    ("copy:copying_simple", {"prompt_to_repeat": _REQUEST}, _REQUEST.upper(), _REQUEST + " Sure!"),
    ("copy:copying_multiple", {"prompt_to_repeat": _REQUEST, "N": 2},
     f"{_REQUEST}\n******\n{_REQUEST}",
     f"{_REQUEST}\n*******\n{_REQUEST}"),  # a seventh asterisk spoils the second copy
    ("new:copy_span_idx", {"prompt_to_repeat": "zero one two", "n_start": 5, "n_end": 8},
     " ONE ", "one two"),
    ("new:copy_span_idx", {"prompt_to_repeat": "zero one two", "n_start": 5, "n_end": 8},
     "one", "one t"),
    ("detectable_format:sentence_hyphens", {}, "I came.-I saw.-I won.", "I came. -I saw.-I won."),
    # "saw it." is one sentence
    ("detectable_format:sentence_hyphens", {}, "I came.-I saw.", "I came.-I saw-it."),
    ("keywords:no_adjacent_consecutive", {}, "apple cat egg", "apple banana"),
    ("keywords:no_adjacent_consecutive", {}, "1 3 5", "1 2"),  # any characters, not only letters
    ("detectable_format:square_brackets", {}, "[one] [two,] [three]", "[one] two"),
    # substrings count
    ("keywords:word_once", {"keyword": "cat"}, "A Cat sat.", "A category of cats."),
    ("keywords:word_count_different_numbers",
     {"keyword": "sun", "frequency": 2, "relation": "less than"}, "sun", "Sun and sunshine"),
    ("keywords:word_count_different_numbers",
     {"keyword": "sun", "frequency": 0, "relation": "at least"},
     "no such word", None),  # at least 0: always followed
    ("keywords:exclude_word_harder", {"keyword": "cat"}, "cat sat. A cat, a cat.", "the cat sat"),
    ("paragraphs:paragraphs", {}, "First part.\n***\nSecond part.", "First.\n***\n\n***\nSecond."),
    ("paragraphs:paragraphs", {}, "***\nFirst.\n***\nSecond.\n***",
     "First. *** Second. *** Third."),
    ("paragraphs:paragraphs2", {}, "First part.\n\nSecond part.",
     "First part.\n\n\n\nSecond part."),
    # a third newline is content
    ("paragraphs:paragraphs2", {}, "\n\nFirst.\n\n\nSecond.", "First.\nSecond."),
    ("first_word:first_word_sent", {"first_word": "The"}, "the cat sat. THE dog ran!",
     "The cat sat. A dog ran."),
    # punctuation stays
    ("first_word:first_word_sent", {"first_word": "yes"}, "Yes it is.", "Yes, it is."),
    ("first_word:first_word_answer", {"first_word": "Hello"}, "\n hello world", "Hello, world"),
    ("last_word:last_word_sent", {"last_word": "home"}, "I went home. She came HOME!",
     "I went home. Then out."),
    ("last_word:last_word_answer", {"last_word": "brief"}, "Be it *brief*!", "brief but long"),
    # the apostrophe goes
    ("last_word:last_word_answer", {"last_word": "dont"}, "I don't", "I do not"),
    ("detectable_format:bigram_wrapping", {}, "<<I am>> <<at home>> alone", "<<I am>> at <<home>>"),
    ("punctuation:punctuation_dot", {}, "No dots here!", "A dot."),
    ("punctuation:punctuation_exclamation", {}, "Calm.", "Wow!"),
    # "café": none
    ("count:lowercase_counting", {"N": 2}, "Two lower WORDS here café", "three lower words"),
    ("letters:letter_counting", {"N": 5, "relation": "less than"}, "abcd é 123", "abcde"),
    ("letters:letter_counting", {"N": 5, "relation": "at least"}, "ABCDE", "abcd"),
    ("letters:letter_counting2", {"letter": "R", "let_frequency": 2, "let_relation": "at least"},
     "Rarely", "Ran"),
    ("count:counting_composition", {"n_sent": 2, "n_words": 4}, _COMPOSITION,
     _COMPOSITION + "\n***"),
    ("count:counting_composition", {"n_sent": 2, "n_words": 4}, _COMPOSITION,
     _COMPOSITION.replace("six.", "six")),
    ("count:count_unique", {}, "One two, three.", "One two, three, four."),  # "," is a token, twice
    ("count:count_unique", {}, "The the", "the the"),  # case-sensitive
    ("count:count_increment_word", {"keyword1": "sun", "keyword2": "moon"}, "Sun, moon and MOON.",
     "sun moon moon moonlight"),
    ("keywords:palindrome", {}, "I saw it", "no such words"),  # "I" reads the same backwards
    ("keywords:keyword_specific_position", {"keyword": "cat", "n": 2, "m": 3},
     "Hi. I saw cat today.", "Hi. I saw a cat."),
    # the final period is the last token
    ("keywords:start_end", {}, "Yes, I said yes", "Yes, I said yes."),
]


@pytest.mark.parametrize("iid, kwargs, good, bad", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_hand_checked_verdicts(iid, kwargs, good, bad):
    assert verdict(good, iid, **kwargs) is True
    if bad is not None:
        assert verdict(bad, iid, **kwargs) is False


def test_repeat_phrase_words_are_whitespace_split():
    # The span keeps the double space; its words are compared after str.split(), so it still has one
    # change.
    assert verdict("Dance  like somebody is watching you", "copy:repeat_phrase", phrase=_PHRASE,
                   small_n=1)


def test_every_ifbench_train_instruction_has_a_hand_checked_case():
    assert {c[0] for c in CASES} == set(IFBENCH_TRAIN)


def test_registries_keep_training_and_evaluation_taxonomies_apart():
    assert (len(IFEVAL), len(IFBENCH), len(IFBENCH_TRAIN)) == (25, 58, 29)
    assert not set(IFBENCH_TRAIN) & set(IFBENCH) and not set(IFBENCH_TRAIN) & set(IFEVAL)
    assert set(TRAINING) == set(IFEVAL) | set(IFBENCH_TRAIN)
    assert EVALUATION_ONLY == set(IFBENCH) and not EVALUATION_ONLY & set(TRAINING)
    assert set(ALL) == set(TRAINING) | EVALUATION_ONLY
    # The test taxonomy's keyword-at-a-position check has the same definition under another id.
    text = "Hi. I saw cat today."
    assert (per_instruction(text, label("words:keywords_specific_position", keyword="cat",
                                        n=2, m=3))
            == per_instruction(text, label("keywords:keyword_specific_position", keyword="cat",
                                           n=2, m=3)))


def test_the_reward_is_all_or_nothing_over_mixed_ifeval_and_ifbench_train_ids():
    row = {"prompt": "p",
           "instruction_id_list": ["punctuation:no_comma", "last_word:last_word_answer"],
           "kwargs": [{}, {"last_word": "brief"}]}
    assert ifeval_reward("Keep it brief", row) == 1.0
    # one of two followed: 0, not the reference's 0.5
    assert ifeval_reward("Keep it, brief", row) == 0.0
    assert per_instruction("Keep it, brief", row) == [False, True]


@pytest.mark.parametrize("iid, kwargs, message", [
    ("copy:repeat_phrase", {"phrase": _PHRASE}, "missing kwarg 'small_n'"),
    ("copy:repeat_phrase", {"phrase": _PHRASE, "small_n": 0}, "'small_n'=0 must be >= 1"),
    ("copy:repeat_phrase", {"phrase": "  ", "small_n": 1}, "must not be blank"),
    ("copy:repeat_phrase", {"phrase": "What is (this)", "small_n": 1}, "holds regex syntax"),
    ("copy:copy", {}, "missing kwarg 'prompt_to_repeat'"),
    ("copy:copying_multiple", {"prompt_to_repeat": "x", "N": 0}, "'N'=0 must be >= 1"),
    ("new:copy_span_idx", {"prompt_to_repeat": "abc", "n_start": 2, "n_end": 2}, "an empty span"),
    ("new:copy_span_idx", {"prompt_to_repeat": "abc", "n_start": 1, "n_end": 0},
     "'n_end'=0 must be >= 1"),
    ("keywords:word_once", {"keyword": "(a+)+"}, "regex quantifiers"),
    ("keywords:word_once", {"keyword": ""}, "must not be blank"),
    ("keywords:word_count_different_numbers", {"keyword": "a", "frequency": 2},
     "missing kwarg 'relation'"),
    ("keywords:word_count_different_numbers",
     {"keyword": "a", "frequency": 2, "relation": "exactly"}, "must be one of"),
    ("keywords:exclude_word_harder", {"keyword": " "}, "must not be blank"),
    ("first_word:first_word_sent", {}, "missing kwarg 'first_word'"),
    ("last_word:last_word_answer", {"last_word": ""}, "must not be blank"),
    ("count:lowercase_counting", {"N": 0}, "'N'=0 must be >= 1"),
    ("letters:letter_counting", {"N": 3}, "missing kwarg 'relation'"),
    ("letters:letter_counting2", {"letter": "ab", "let_frequency": 1, "let_relation": "at least"},
     "must be one letter a-z"),
    ("letters:letter_counting2", {"letter": "é", "let_frequency": 1, "let_relation": "at least"},
     "must be one letter a-z"),
    ("letters:letter_counting2", {"letter": "a", "let_frequency": -1, "let_relation": "at least"},
     "must be >= 0"),
    ("count:counting_composition", {"n_sent": 2}, "missing kwarg 'n_words'"),
    ("count:count_increment_word", {"keyword1": "sun"}, "missing kwarg 'keyword2'"),
    ("keywords:keyword_specific_position", {"keyword": "cat", "n": 0, "m": 1},
     "'n'=0 must be >= 1"),
    ("keywords:palindrome", {"word": "x"}, "unexpected kwargs ['word']"),
])
def test_labels_the_reference_would_randomise_are_refused_in_one_line(iid, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        validate_label(label(iid, **kwargs))
    assert "\n" not in str(e.value) and iid in str(e.value)


def test_copy_span_start_zero_is_the_first_character():
    # The reference reads n_start 0 as "not given" and draws one; the label's 0 is what the prompt
    # says.
    assert verdict("zero", "new:copy_span_idx", prompt_to_repeat="zero one", n_start=0, n_end=4)


def test_phrase_search_equals_the_reference_regular_expression():
    rng = random.Random(0)
    pieces = ["a", "b", "ab", "c", " ", " ", " ", "\n", "\r", "a b", "b a"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 25)))
        first, last = rng.choice(["a", "b", "ab"]), rng.choice(["a", "b", "ab"])
        assert phrase_spans(text, first, last) == re.findall(rf"{first} .*? {last}", text), \
            (text, first, last)


def test_checkers_do_not_raise_on_odd_responses():
    kwargs = {"copy:repeat_phrase": {"phrase": _PHRASE, "small_n": 1},
              "copy:copy": {"prompt_to_repeat": "x"},
              "copy:copying_simple": {"prompt_to_repeat": "x"},
              "copy:copying_multiple": {"prompt_to_repeat": "x", "N": 2},
              "new:copy_span_idx": {"prompt_to_repeat": "x", "n_start": 0, "n_end": 1},
              "keywords:word_once": {"keyword": "x"},
              "keywords:word_count_different_numbers": {"keyword": "x", "frequency": 1,
                                                        "relation": "at least"},
              "keywords:exclude_word_harder": {"keyword": "x"},
              "first_word:first_word_sent": {"first_word": "x"},
              "first_word:first_word_answer": {"first_word": "x"},
              "last_word:last_word_sent": {"last_word": "x"},
              "last_word:last_word_answer": {"last_word": "x"},
              "count:lowercase_counting": {"N": 1},
              "letters:letter_counting": {"N": 1, "relation": "at least"},
              "letters:letter_counting2": {"letter": "x", "let_frequency": 1,
                                           "let_relation": "at least"},
              "count:counting_composition": {"n_sent": 1, "n_words": 1},
              "count:count_increment_word": {"keyword1": "x", "keyword2": "y"},
              "keywords:keyword_specific_position": {"keyword": "x", "n": 1, "m": 1}}
    from nemo_cascade.rewards.ifeval.spec import bind
    for text in ["x", "İ İ", ".", "-", "***", "\n\n", "******", "Mr. X. Dr.", "😀 😀", "- . -",
                 "\t\x0b\x0c", "<<", ">>", "[", "x" * 5000, "x. " * 2000]:
        for iid, instruction in IFBENCH_TRAIN.items():
            assert isinstance(instruction.check(text, **bind(instruction, kwargs.get(iid, {}))),
                              bool), (iid, text)
