"""Instruction-following RL prompts for a real small model: natural requests with IFEval
instructions (``synthetic:if_requests``, ``ifeval`` domain).

The paper's IF-RL trains on "60K custom samples: LMSYS-Chat-1M prompts with IFEval-taxonomy
constraints" (§4.4). LMSYS-Chat-1M is not available offline, so this set stands in for it: short
natural requests made combinatorially from templates × topics written here ("Write a poem about a
fox in a snowy forest.", "Give advice on saving money each month.") with one or two IFEval
instructions appended in the wording IFEval's own prompts use. Requests stay short
(SmolLM2-135M-Instruct's prompts ≤ ~100 tokens) and every kwarg is reachable in ~200 response tokens
("less than 60 words", "at least 5 sentences", never "at least 600 words").
:mod:`.synthetic_domains`' ``if_arithmetic`` is the version for a ~1M-parameter model.

Rows follow :mod:`.synthetic_domains`: ``uid``, ``prompt``, ``instruction_id_list``, ``kwargs``,
``label`` (the ``ifeval`` label) and ``response``, a reference answer composed by simple edits
(:func:`_follow`) that the project's checkers pass on every instruction: it proves each row
satisfiable and serves an SFT warm start. Instructions are grouped by the part of the response they
shape (:data:`GROUPS`); a row's two come from different groups and never form a pair of
:data:`CLASHES`.

Splits: a row is ``test`` iff a hash of its request (the uid before ``#``) falls in the lowest 10 %,
so all instruction variants of one request share a split and a held-out request is never trained on;
size and seed never move a row, the seed only samples and orders. The requests are this module's own
text, so the set is disjoint from IFEval's 541 prompts (data/ifeval, the evaluation; a unit test
checks it); only the instruction ids and their phrasing are shared with it.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
import re

TEST_PERCENT = 10
VARIANTS = 8
"""Instruction variants per request: ~450 requests × 8 = ~3,600 rows."""

SLOTS = {k: v.split("; ") for k, v in {
    "scene": "a lighthouse on a stormy night; a lost kitten finding its way home; a robot learning "
             "to paint; the first snow of winter; a busy market in the morning; an old man feeding "
             "pigeons; a child planting a tree; a train crossing the mountains; a quiet library at "
             "closing time; a fox in a snowy forest; two friends on a fishing trip; a picnic "
             "interrupted by rain; the last day of summer camp; a dragon who is afraid of the "
             "dark; a bakery at dawn; a sailor returning home; a garden after the rain; a city "
             "during a power outage; a dog waiting at the door; a hot air balloon ride; a girl who "
             "finds a secret door; the night before a race; a snowman that comes to life; a cat "
             "watching the birds; a family road trip",
    "subject": "how rainbows form; the water cycle; why leaves change color in autumn; how bees "
               "make honey; photosynthesis; the phases of the moon; how volcanoes erupt; why the "
               "sky is blue; how airplanes fly; recycling; the solar system; how the heart pumps "
               "blood; saving electricity at home; how plants grow from seeds; the life of a "
               "butterfly; how clouds form; why we need sleep; how magnets work; the history of "
               "the bicycle; how bread rises; the value of clean water; how tides work; what makes "
               "a healthy breakfast; how computers store information; why dinosaurs disappeared",
    "product": "a reusable water bottle; a solar-powered lamp; a pair of running shoes; a folding "
               "bicycle; a smart alarm clock; a wooden toy train; a noise-canceling headset; a "
               "cozy wool blanket; a travel backpack; a cookbook for students; a plant that needs "
               "little water; a waterproof phone case; a handmade ceramic mug; a desk lamp with a "
               "timer; a board game for families; an electric kettle; a set of colored pencils; a "
               "portable speaker; a bird feeder; a yoga mat",
    "activity": "starting a vegetable garden; saving money each month; learning a new language; "
                "preparing for a job interview; keeping a tidy room; learning to cook simple "
                "meals; running a first marathon; making new friends at school; studying for an "
                "exam; taking care of a puppy; reading more books; waking up early; planning a "
                "birthday party; learning to play the guitar; staying calm before a test; "
                "traveling on a small budget; drinking more water; starting a journal; riding a "
                "bike in the city; keeping a houseplant alive",
    "event": "a team picnic next week; a delayed package; a broken window; a new project idea; a "
             "schedule change; a lost umbrella; a charity bake sale; a noisy party; a day off on "
             "Friday; a shared parking spot; a school trip; a missed meeting; a book you borrowed; "
             "a community cleanup day; a thank you for their support",
}.items()}
"""What the requests are about, by the kind of request that fits them. Comma-free, so a repeated
request never breaks ``punctuation:no_comma``."""

# (request, the reference response's opening sentence, slot); a question asks yes or no
TEMPLATES = [
    ("Write a short story about {x}.", "This is a short story about {x}.", "scene"),
    ("Write a poem about {x}.", "This is a poem about {x}.", "scene"),
    ("Write a song about {x}.", "This is a song about {x}.", "scene"),
    ("Write a diary entry about {x}.", "This is a diary entry about {x}.", "scene"),
    ("Describe {x}.", "This is a description of {x}.", "scene"),
    ("Explain {x} to a ten-year-old.", "Here is a simple explanation of {x}.", "subject"),
    ("Write a blog post about {x}.", "This blog post is about {x}.", "subject"),
    ("Write a short lesson plan about {x}.", "This lesson plan covers {x}.", "subject"),
    ("Summarize what everyone should know about {x}.", "Here is a summary of {x}.", "subject"),
    ("Would a ten-year-old enjoy learning about {x}?", "Here is my view on learning about {x}.",
     "subject"),
    ("Write a product description for {x}.", "This is a product description for {x}.", "product"),
    ("Write an advertisement for {x}.", "This is an advertisement for {x}.", "product"),
    ("Write a customer review of {x}.", "This is a customer review of {x}.", "product"),
    ("Is {x} a thoughtful gift for a friend?", "Here is my view on {x} as a gift.", "product"),
    ("Give advice on {x}.", "Here is some advice on {x}.", "activity"),
    ("Write a beginner's guide to {x}.", "This is a beginner's guide to {x}.", "activity"),
    ("Is {x} worth the effort?", "Here is my view on {x}.", "activity"),
    ("Write an email to your manager about {x}.", "This is an email to your manager about {x}.",
     "event"),
    ("Write an email to a friend about {x}.", "This is an email to a friend about {x}.", "event"),
    ("Write an email to your neighbor about {x}.", "This is an email to your neighbor about {x}.",
     "event"),
    ("Write a letter to your teacher about {x}.", "This is a letter to your teacher about {x}.",
     "event"),
]

FILLERS = ["It begins with one small moment.", "We can learn something new from it.",
           "Small steps lead to a calm ending.", "There is always more to notice.",
           "The idea is simple to follow.", "It ends on a hopeful note.",
           "The words are plain and friendly.", "Patience makes the whole plan work.",
           "Look closely and the meaning grows.", "You can see how the pieces fit together.",
           "The details make it easy to picture.", "Take your time with each of the steps.",
           "It is worth thinking about for a while.", "With a little care the rest follows.",
           "Each of these ideas builds on the one before it."]
"""Neutral sentences the reference pads with: no commas, no all-capital word, no keyword or
forbidden word, and English to langdetect even in capitals (it calls "EACH PART HAS ITS OWN
PURPOSE." German)."""
KEYWORDS = ["lantern", "compass", "harbor", "ribbon", "pebble", "meadow", "velvet", "thunder",
            "saffron", "maple", "canyon", "beacon", "marble", "feather", "glacier", "whistle",
            "orchard", "violin"]
FORBIDDEN = ["very", "really", "thing", "good", "great", "nice", "important", "just", "actually",
             "stuff", "big", "bad", "love", "best"]
"""Filler words a natural answer reaches for, as IFEval forbids words the answer would naturally
use."""
CAPS = ["CLEAR", "CALM", "BRIGHT", "USEFUL", "KIND"]
PLACEHOLDERS = ["[name]", "[date]", "[place]", "[time]"]
END_PHRASES = ["Is there anything else I can help with?",
               "Let me know if you have additional questions.", "Any other questions?",
               "Hope you agree with me.", "That is all you need to know."]
_COUNTS = {  # id: (its count kwarg, the counts drawn)
    "detectable_format:number_bullet_lists": ("num_bullets", (2, 3, 4, 5)),
    "length_constraints:number_paragraphs": ("num_paragraphs", (2, 3, 4)),
    "detectable_format:number_highlighted_sections": ("num_highlights", (2, 3, 4)),
    "detectable_format:multiple_sections": ("num_sections", (2, 3, 4)),
    "detectable_content:number_placeholders": ("num_placeholders", (2, 3, 4)),
}
# id: (count kwarg, relation kwarg, (relation, count) drawn); all reachable in ~200 tokens
_RELATIONS = {
    "keywords:frequency": ("frequency", "relation", [("at least", 2), ("at least", 3),
                                                     ("less than", 2), ("less than", 3)]),
    "length_constraints:number_words": ("num_words", "relation", [
        ("less than", 60), ("less than", 80), ("at least", 30), ("at least", 50),
        ("at least", 80)]),
    "length_constraints:number_sentences": ("num_sentences", "relation", [
        ("less than", 6), ("less than", 8), ("at least", 3), ("at least", 5)]),
    "change_case:capital_word_frequency": ("capital_frequency", "capital_relation", [
        ("at least", 2), ("at least", 3), ("less than", 3), ("less than", 4)]),
}
_BULLET_EXAMPLE = ('(use "* " to indicate each bullet) such as:\n* This is the first point.\n'
                   "* This is the second point.")
WORDINGS = {
    "keywords:existence": [
        "Include the keywords {words} in the response.",
        "Make sure to include the words {words} in your answer."],
    "keywords:frequency": [
        "The word {word} should appear {rel} {n} times.",
        "Make sure the word {word} appears {rel} {n} times."],
    "keywords:forbidden_words": [
        "Do not include the words {words} in the response.",
        "Avoid using the words {words} in your answer."],
    "length_constraints:number_words": [
        "Your entire response should contain {rel} {n} words.",
        "Answer with {rel} {n} words."],
    "length_constraints:number_sentences": [
        "Your entire response should contain {rel} {n} sentences.",
        "Answer with {rel} {n} sentences."],
    "change_case:capital_word_frequency": [
        "In your response, words with all capital letters should appear {rel} {n} times.",
        "Use words in all capital letters {rel} {n} times."],
    "startend:end_checker": [
        "Finish your response with this exact phrase: {phrase}",
        'End your response with the exact phrase "{phrase}". '
        "No other words should follow this phrase."],
    "detectable_content:postscript": [
        "At the end of your response, please explicitly add a postscript starting with {marker}",
        "Add a postscript to your response that starts with {marker}"],
    "detectable_format:number_bullet_lists": [
        "Your answer must contain exactly {n} bullet points. "
        "Use the markdown bullet points such as:\n* This is point 1.",
        "Your answer must contain exactly {n} bullet points "
        "in the markdown format " + _BULLET_EXAMPLE],
    "length_constraints:number_paragraphs": [
        "There should be exactly {n} paragraphs. "
        "Paragraphs are separated with the markdown divider: ***",
        "Your response should have exactly {n} paragraphs separated by the markdown divider: ***"],
    "detectable_format:number_highlighted_sections": [
        "Highlight at least {n} sections in your answer with markdown, i.e. *highlighted section*.",
        'Highlight at least {n} text sections using "*". For example: *highlighted section*.'],
    "detectable_format:multiple_sections": [
        "Your response must have {n} sections. Mark the beginning of each section with Section X.",
        "Write it in {n} sections and mark the beginning of each section with Section X."],
    "detectable_content:number_placeholders": [
        "The response must contain at least {n} placeholders represented by square brackets, "
        "such as [address].",
        "Make sure to include at least {n} placeholders represented by square brackets, "
        "such as [name]."],
    "change_case:english_lowercase": [
        "Your entire response should be in English, and in all lowercase letters. "
        "No capital letters are allowed.",
        "Please make sure your entire response is in English and in all lowercase letters."],
    "change_case:english_capital": [
        "Your entire response should be in English, and in all capital letters.",
        "Make sure your entire response is in English and in all capital letters."],
    # comma-free: a repeated request holds the wording, and no_comma may be the instruction beside
    # the repeat
    "punctuation:no_comma": [
        "Do not use any commas in your response.",
        "You are not allowed to use any commas in your response."],
    "startend:quotation": [
        "Wrap your entire response with double quotation marks.",
        "Make sure your entire response is wrapped in double quotation marks."],
    "detectable_format:title": [
        "Your answer must contain a title, wrapped in double angular brackets, "
        "such as <<poem of joy>>.",
        "Include a title wrapped in double angular brackets, i.e. <<title>>."],
    "detectable_format:json_format": [
        "Wrap your entire output in JSON format.",
        "Your entire output should be wrapped in JSON format. "
        "You can use markdown ticks such as ```."],
    "combination:two_responses": [
        "Give two different responses. "
        "Responses and only responses should be separated by 6 asterisk symbols: ******.",
        "Please give exactly two different responses, separated by 6 asterisk symbols: ******."],
    "detectable_format:constrained_response": [
        "Answer with one of the following options: "
        "('My answer is yes.', 'My answer is no.', 'My answer is maybe.')",
        "Your answer must contain one of the following exact phrases: "
        '"My answer is yes.", "My answer is no.", "My answer is maybe."'],
    "combination:repeat_prompt": [
        "First repeat the request word for word without change, then give your answer "
        "(1. do not say any words or characters before repeating the request; "
        "2. the request you need to repeat does not include this sentence)"],
}
"""IFEval's own wordings of each instruction (data/ifeval/input_data.jsonl.gz), two per id where it
has them."""


def _make(rng: random.Random, iid: str, request: str) -> tuple[dict, str]:
    """Kwargs and wording of one instruction for ``request``. Keywords are never words the request
    already holds (a repeated request would count them), nor forbidden words it uses (the reference
    repeats topics)."""
    kwargs, fields = {}, {}
    if iid in _COUNTS:
        name, counts = _COUNTS[iid]
        kwargs[name] = fields["n"] = rng.choice(counts)
    if iid in _RELATIONS:
        count, relation, draws = _RELATIONS[iid]
        fields["rel"], fields["n"] = rng.choice(draws)
        kwargs.update({count: fields["n"], relation: fields["rel"]})
    # the checker matches keywords anywhere
    fresh = [k for k in KEYWORDS if k not in request.lower()]
    if iid == "keywords:existence":
        kwargs["keywords"] = rng.sample(fresh, rng.choice((1, 2)))
    elif iid == "keywords:frequency":
        kwargs["keyword"] = fields["word"] = rng.choice(fresh)
    elif iid == "keywords:forbidden_words":
        used = set(re.findall(r"\w+", request.lower()))
        kwargs["forbidden_words"] = rng.sample([w for w in FORBIDDEN if w not in used],
                                               rng.choice((1, 2, 3)))
    elif iid == "startend:end_checker":
        kwargs["end_phrase"] = fields["phrase"] = rng.choice(END_PHRASES)
    elif iid == "detectable_content:postscript":
        kwargs["postscript_marker"] = fields["marker"] = rng.choice(("P.S.", "P.P.S"))
    elif iid == "detectable_format:multiple_sections":
        kwargs["section_spliter"] = "Section"
    fields["words"] = " and ".join(
        f'"{w}"' for w in kwargs.get("keywords", kwargs.get("forbidden_words", [])))
    return kwargs, rng.choice(WORDINGS[iid]).format(**fields)


GROUPS = {
    "content": ["keywords:existence", "keywords:frequency", "keywords:forbidden_words",
                "detectable_content:number_placeholders", "detectable_format:constrained_response"],
    "length": ["length_constraints:number_words", "length_constraints:number_sentences"],
    "layout": ["detectable_format:number_bullet_lists", "length_constraints:number_paragraphs",
               "detectable_format:number_highlighted_sections",
               "detectable_format:multiple_sections", "combination:two_responses",
               "detectable_format:json_format"],
    "ending": ["startend:end_checker", "detectable_content:postscript"],
    "frame": ["detectable_format:title", "startend:quotation", "combination:repeat_prompt"],
    "case": ["change_case:english_lowercase", "change_case:english_capital",
             "change_case:capital_word_frequency"],
    "punctuation": ["punctuation:no_comma"],
}
"""Instruction ids by the part of the response they shape, in the order :func:`_follow` applies them
(the case last, so it covers everything; no_comma needs no edit, as no text here has a comma). A row
takes at most one per group, so two instructions never fight over one part."""
_GROUP_OF = {iid: g for g, ids in GROUPS.items() for iid in ids}

_J, _R = "detectable_format:json_format", "combination:repeat_prompt"
CLASHES = {frozenset(p) for p in [
    # the first bullet line starts with '"'
    ("startend:quotation", "detectable_format:number_bullet_lists"),
    # the quotes make the output a JSON string, not the object asked for
    ("startend:quotation", _J),
    # A JSON document is the whole output: nothing can follow it, no title line precedes it, Punkt's
    # sentences inside its strings are a guess, and upper-casing it breaks true/false/null.
    (_J, "startend:end_checker"), (_J, "detectable_content:postscript"),
    (_J, "detectable_format:title"), (_J, "length_constraints:number_sentences"),
    (_J, "change_case:english_capital"),
    # The checkers match "My answer is yes." and the "Section" marker case-sensitively.
    ("change_case:english_lowercase", "detectable_format:constrained_response"),
    ("change_case:english_capital", "detectable_format:constrained_response"),
    ("change_case:english_lowercase", "detectable_format:multiple_sections"),
    ("change_case:english_capital", "detectable_format:multiple_sections"),
    # the response must start with the request, not '"' or '{'
    (_R, "startend:quotation"), (_R, _J),
    # The repeated request names the forbidden words, or holds an example bullet, the divider, the
    # separator.
    (_R, "keywords:forbidden_words"), (_R, "detectable_format:number_bullet_lists"),
    (_R, "length_constraints:number_paragraphs"), (_R, "combination:two_responses"),
    (_R, "detectable_format:multiple_sections"),
    # The repeated request alone satisfies these (it holds <<title>>, *section*, [name], P.S., the
    # keyword, the phrases): a free pass teaches nothing.
    (_R, "detectable_format:title"), (_R, "detectable_format:number_highlighted_sections"),
    (_R, "detectable_content:number_placeholders"), (_R, "detectable_content:postscript"),
    (_R, "keywords:existence"), (_R, "detectable_format:constrained_response"),
]}
"""Pairs of instructions no row carries together: no response satisfies both, or one is satisfied
for free."""


def _pick(key: str, n: int) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") % n


def _draw(key: str, request: str, yes_no: bool) -> list[tuple[str, dict, str]]:
    """One or two (id, kwargs, wording) fixed by ``key``: from different groups, never a clash;
    ``constrained_response`` only on a yes/no question (and often there, since only those can carry
    it)."""
    rng = random.Random(key)
    pool = [i for i in _GROUP_OF if yes_no or i != "detectable_format:constrained_response"]
    first = ("detectable_format:constrained_response" if yes_no and rng.random() < 0.3
             else rng.choice(pool))
    ids = [first]
    if rng.random() < 0.7:  # most IFEval prompts carry two or more instructions
        ids.append(rng.choice([i for i in pool if _GROUP_OF[i] != _GROUP_OF[first]
                               and frozenset((first, i)) not in CLASHES]))
    return [(iid, *_make(rng, iid, request)) for iid in ids]


def _prompt(request: str, chosen: list) -> tuple[str, list]:
    """The request with its instructions appended, in label order: a wording with an example list
    goes last, and ``repeat_prompt`` after everything, as IFEval places it, repeating all that comes
    before it."""
    chosen = sorted(chosen, key=lambda c: (c[0] == _R, "\n" in c[2]))
    text = request
    for iid, kwargs, wording in chosen:
        if iid == _R:
            kwargs["prompt_to_repeat"] = text
        text += ("\n" if iid == _R else " ") + wording
    return text, chosen


_ECHO = ["The {} stays in the picture.", "Think of the {} once more.",
         "One more {} makes it complete."]


def _content(kw: dict, sents: list[str], variant: int) -> list[str]:
    """Sentences that carry what the content instructions ask for (and the all-capital words)."""
    if "detectable_format:constrained_response" in kw:
        sents = [f"My answer is {('yes', 'no', 'maybe')[variant % 3]}.", *sents]
    if k := kw.get("keywords:existence"):
        sents.append("Words like " + " and ".join(k["keywords"]) + " belong here too.")
    # "less than": leave it out
    if (k := kw.get("keywords:frequency")) and k["relation"] == "at least":
        sents += [_ECHO[i % len(_ECHO)].format(k["keyword"]) for i in range(k["frequency"])]
    if k := kw.get("detectable_content:number_placeholders"):
        sents.append("Fill in " + " and ".join(PLACEHOLDERS[:k["num_placeholders"]])
                     + " before you share it.")
    if (k := kw.get("change_case:capital_word_frequency")) and k["capital_relation"] == "at least":
        sents.append("The key words here are " + " and ".join(CAPS[:k["capital_frequency"]]) + ".")
    return sents


def _split_into(items: list[str], n: int) -> list[str]:
    """``items`` (at least ``n``) as ``n`` consecutive non-empty runs, each joined into one text."""
    bounds = [round(i * len(items) / n) for i in range(n + 1)]
    return [" ".join(items[a:b]) for a, b in zip(bounds, bounds[1:])]


def _layout(kw: dict, sents: list[str], fill) -> str:
    """The sentences laid out as the layout instruction asks (padded with fillers where it needs
    more)."""
    def padded(n: int) -> list[str]:
        return sents + [next(fill) for _ in range(n - len(sents))]

    if k := kw.get("detectable_format:number_bullet_lists"):
        return "\n".join(f"* {item}"
                         for item in _split_into(padded(k["num_bullets"]), k["num_bullets"]))
    if k := kw.get("length_constraints:number_paragraphs"):
        return "\n***\n".join(_split_into(padded(k["num_paragraphs"]), k["num_paragraphs"]))
    # the period stays outside: Punkt needs it
    if k := kw.get("detectable_format:number_highlighted_sections"):
        # not the first sentence: it may be the constrained phrase, which must stay verbatim
        n = k["num_highlights"]
        return " ".join(f"*{s[:-1]}*{s[-1]}" if 1 <= i <= n else s
                        for i, s in enumerate(padded(n + 1)))
    if k := kw.get("detectable_format:multiple_sections"):
        parts = _split_into(padded(k["num_sections"]), k["num_sections"])
        return "\n\n".join(f"Section {i}\n{part}" for i, part in enumerate(parts, 1))
    if "combination:two_responses" in kw:
        return "\n******\n".join(_split_into(padded(2), 2))
    if _J in kw:
        return json.dumps({"answer": " ".join(sents)})
    return " ".join(sents)


def _follow(chosen: list, opener: str, title: str, variant: int) -> str:
    """A response that follows every chosen instruction: the opener and fillers, with content and
    length edits, laid out, then the ending, the frame (title, quotes, repeated request) and the
    case, each a string edit."""
    kw = {iid: k for iid, k, _ in chosen}
    fill = (FILLERS[(variant + i) % len(FILLERS)] for i in itertools.count())
    # One filler under a "less than" length, else two; three in capitals: langdetect misreads short
    # all-caps text.
    short = any(k.get("relation") == "less than" for i, k in kw.items()
                if i.startswith("length_constraints"))
    count = 3 if "change_case:english_capital" in kw else 1 if short else 2
    sents = _content(kw, [opener] + [next(fill) for _ in range(count)], variant)
    if (k := kw.get("length_constraints:number_words")) and k["relation"] == "at least":
        # IFEval's word: a run of \w
        while len(re.findall(r"\w+", " ".join(sents))) < k["num_words"]:
            sents.append(next(fill))
    if (k := kw.get("length_constraints:number_sentences")) and k["relation"] == "at least":
        sents += [next(fill) for _ in range(k["num_sentences"] - len(sents))]
    text = _layout(kw, sents, fill)
    if k := kw.get("startend:end_checker"):
        text += "\n" + k["end_phrase"]
    if k := kw.get("detectable_content:postscript"):
        text += f"\n{k['postscript_marker']} Thank you for reading."
    if "detectable_format:title" in kw:
        text = f"<<{title}>>\n{text}"
    if "startend:quotation" in kw:
        text = f'"{text}"'
    if k := kw.get(_R):
        text = f"{k['prompt_to_repeat']}\n{text}"
    if "change_case:english_lowercase" in kw:
        text = text.lower()
    return text.upper() if "change_case:english_capital" in kw else text


def _base_uid(request: str) -> str:
    return "if_requests:" + hashlib.sha256(request.encode()).hexdigest()[:12]


def split_of(uid: str) -> str:
    """``train`` or ``test`` by a hash of the request part of a uid (all its variants share a
    split)."""
    return "test" if _pick(uid.split("#")[0], 100) < TEST_PERCENT else "train"


def _rows_of(request: str, opener: str, about: str, yes_no: bool) -> list[dict]:
    """The :data:`VARIANTS` rows of one request, each with different instructions (a repeat is
    redrawn)."""
    base, rows, seen = _base_uid(request), [], set()
    for attempt in itertools.count():
        prompt, chosen = _prompt(request, _draw(f"{base}/{attempt}", request, yes_no))
        if prompt in seen:
            continue
        seen.add(prompt)
        ids, kwargs = [c[0] for c in chosen], [c[1] for c in chosen]
        response = _follow(chosen, opener, about[:1].upper() + about[1:],
                           _pick(prompt, len(FILLERS)))
        rows.append({"uid": f"{base}#{len(rows)}", "prompt": prompt, "instruction_id_list": ids,
                     "kwargs": kwargs,
                     "label": {"prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs},
                     "response": response})
        if len(rows) == VARIANTS:
            return rows
    raise AssertionError("unreachable: itertools.count() never ends")


def requests() -> list[tuple[str, str, str, bool]]:
    """Every base request: (request, reference opener, what it is about, is a yes/no question)."""
    return [(req.format(x=x), opener.format(x=x), x, req.endswith("?"))
            for req, opener, slot in TEMPLATES for x in SLOTS[slot]]


def if_requests(split: str, size: int, seed: int) -> list[dict]:
    """``size`` rows of ``split`` ("train" | "test"; ``size <= 0``: all, in a seeded order). More
    rows than the split holds is a ValueError, as in :func:`.arithmetic.arithmetic`."""
    if split not in ("train", "test"):
        raise ValueError(f"if_requests: split must be 'train' or 'test', got {split!r}")
    pool = [row for r in requests() if split_of(_base_uid(r[0])) == split for row in _rows_of(*r)]
    if size > len(pool):
        raise ValueError(f"if_requests: size {size} exceeds the {len(pool)} {split} rows")
    return random.Random(seed).sample(pool, size if size > 0 else len(pool))


__all__ = ["if_requests", "requests", "split_of", "GROUPS", "CLASHES", "TEMPLATES", "SLOTS"]
