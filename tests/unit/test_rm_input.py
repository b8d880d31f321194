"""The one rendering a reward model reads (data/rm_input.py, paper §4.2–4.3): the RM stage's pairs,
the exported RM's chat template and the served RM's client all give the same text for a
conversation."""
import pytest

from nemo_cascade.data.chat import FLAGS, JINJA_TEMPLATES, STYLES, render
from nemo_cascade.data.rm_input import (PROBE, RM_RENDERINGS, canonical, render_rm_input,
                                        rm_chat_template)

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."},
     {"role": "assistant", "content": "<think>2 is prime</think>\n\n2"}],
    [{"role": "system", "content": "You add."},
     {"role": "user", "content": "1 + 1?", "mode": "think"},
     {"role": "assistant", "content": "<think>one and one</think>2"},
     {"role": "user", "content": "And 2 + 2?"},
     {"role": "assistant", "content": "<think>unfinished"}],
    [{"role": "user", "content": "Hi {{ not jinja }} <|im_end|>"},
     {"role": "assistant", "content": ""}],
]
"""System prompts, thinking answers (closed and not), a per-turn mode switch (§3.1.2),
control tokens in text."""

# ChatML with a default system prompt, like Qwen2.5-Instruct's (the paper's RM base, §4.2)
INSTRUCT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
ALL = [(s, m) for s in STYLES for m in FLAGS]


def _jinja(template, conversation, **kwargs):
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(conversations=[conversation], chat_template=template,
                                        **kwargs)
    return rendered[0]


def test_rm_input_is_the_chat_template_without_a_generation_prompt():
    conv = CONVERSATIONS[1]
    assert render_rm_input(conv, "no_think", "cascade1") == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nName a prime. /no_think<|im_end|>\n"
        "<|im_start|>assistant\n<think>2 is prime</think>\n\n2<|im_end|>\n")
    for style, mode in ALL:
        for c in CONVERSATIONS:
            assert (render_rm_input(c, mode, style)
                    == render(c, mode, style, add_generation_prompt=False))


@pytest.mark.parametrize("style,mode", ALL)
def test_rm_chat_template_renders_the_rm_input_without_arguments(style, mode):
    """What a server's /tokenize of messages gives (no template arguments) is the training text."""
    template = rm_chat_template(mode, style)
    for c in CONVERSATIONS:
        assert _jinja(template, c) == render_rm_input(c, mode, style)
        other = "think" if mode == "no_think" else "no_think"  # an explicit mode still wins
        assert (_jinja(template, c, mode=other)
                == render(c, other, style, add_generation_prompt=False))
    assert _jinja(template, CONVERSATIONS[0][:1], add_generation_prompt=True) == \
        render(CONVERSATIONS[0][:1], mode, style)


@pytest.mark.parametrize("style,mode", ALL)
def test_every_style_and_mode_is_one_of_three_renderings_the_probe_tells_apart(style, mode):
    assert canonical(style, mode) in RM_RENDERINGS
    for c in CONVERSATIONS:
        assert render_rm_input(c, mode, style) == render_rm_input(c, *canonical(style, mode)[::-1])
    probes = [render_rm_input(PROBE, m, s) for s, m in RM_RENDERINGS]
    assert len(set(probes)) == len(RM_RENDERINGS)
    # an instruct base's template is none of them
    assert _jinja(INSTRUCT_TEMPLATE, list(PROBE)) not in probes


@pytest.mark.parametrize("conversation,field", [
    ([{"role": "user", "content": "q"}], "conversation[0].role"),
    ([], "conversation"),
    ("text", "conversation"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": None}],
     "messages[1].content"),
])
def test_a_bad_conversation_is_one_line_naming_the_field(conversation, field):
    with pytest.raises(ValueError) as err:
        render_rm_input(conversation, "no_think", "cascade1")
    assert str(err.value).startswith(field) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="RM rendering"):
        rm_chat_template("half", "cascade1")


def test_the_exported_rm_carries_the_training_rendering_not_the_bases_template(tmp_path):
    """The real export path (convert.export.export_reward_model, as the cascade's RM stage calls it)
    from a base with an instruct template: transformers' apply_chat_template on the exported folder
    gives exactly the text and the token ids the RM stage trained on (data.preference)."""
    import json

    import transformers

    from nemo_cascade import config
    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.convert.export import export_reward_model
    from nemo_cascade.tooling.demo_data.tiny_models import build_tiny_qwen3
    from nemo_cascade.data.preference import load_preference_pairs
    from nemo_cascade.convert.hf_io import write_chat_template

    base = build_tiny_qwen3(tmp_path / "base")
    write_chat_template(base, INSTRUCT_TEMPLATE)
    base_tok = transformers.AutoTokenizer.from_pretrained(base)
    mode, style = "think", "cascade1"
    actor = RewardModelActor(str(base), config.Parallel(micro_batch_size=2), seed=1)
    export_reward_model(actor, tmp_path / "rm", base, 0, rm_chat_template(mode, style))
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "rm")
    rows = tmp_path / "pairs.jsonl"
    rows.write_text("".join(
        json.dumps({"prompt": c[:-1], "chosen": c[-1]["content"], "rejected": "x\x00"}) + "\n"
        for c in CONVERSATIONS))
    trained = [chosen for chosen, _ in load_preference_pairs(config.Data(source=str(rows)),
                                                             base_tok, mode, style)]
    for c, ids in zip(CONVERSATIONS, trained):
        text = render_rm_input(c, mode, style)
        # the base's template differs
        assert base_tok.apply_chat_template(c, tokenize=False) != text
        assert tok.apply_chat_template(c, tokenize=False) == text
        assert tok.apply_chat_template(c, tokenize=True, return_dict=False) == ids
    assert (tmp_path / "rm" / "chat_template.jinja").read_text() == rm_chat_template(mode, style)
    exported = json.loads((tmp_path / "rm" / "tokenizer_config.json").read_text())["chat_template"]
    assert exported == rm_chat_template(mode, style) and JINJA_TEMPLATES[style] in exported
