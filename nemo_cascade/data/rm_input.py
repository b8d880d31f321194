"""What a reward model reads: the one rendering shared by RM training, the exported RM and its
client.

A Bradley–Terry RM (paper §4.2) is trained on conversations rendered one way; at RLHF time (§4.3) it
must be given the same text, or it scores a format it never saw. That text is
:func:`render_rm_input`: the conversation, ending with the assistant turn being judged, rendered by
the cascade's chat template (:func:`nemo_cascade.data.chat.render`) in the RM stage's style and
mode, without a generation prompt. It is used in three places:

- training: ``data.preference`` tokenises both sides of every pair with it;
- the export: the RM's HF folder carries :func:`rm_chat_template` (the style's Jinja twin with the
  stage's mode as its default) as its chat template, instead of the base model's — so
  ``apply_chat_template`` on the folder, and any ``vllm serve`` of it, render exactly the training
  text;
- the client: ``rewards.remote.RewardModelClient`` renders each conversation itself with it and has
  the server only tokenise the text (the folder's tokenizer is the training one). Which rendering
  (style, mode) the served RM was trained with is read once from the server: it renders
  :data:`PROBE` with its chat template, and that must be exactly one of :data:`RM_RENDERINGS` — an
  RM folder exported with another template is refused.

Without a generation prompt the three styles give only three different texts
(:data:`RM_RENDERINGS`): cascade1 with `` /think`` flags, cascade1 with `` /no_think`` flags, and
plain ChatML — cascade2 differs from chatml only in its generation prompt, and neither has flags, so
their mode changes nothing (:func:`canonical`).
"""
from __future__ import annotations

from typing import Sequence

from .chat import FLAGS, JINJA_TEMPLATES, STYLES, render

RM_RENDERINGS = (("cascade1", "think"), ("cascade1", "no_think"), ("chatml", "no_think"))
"""The distinct RM renderings as ``(style, mode)``; every (style, mode) renders RM inputs as one of
them."""

PROBE = ({"role": "user", "content": "Which chat template?"},
         {"role": "assistant", "content": "This one."})
"""The conversation a served RM is asked to render to tell its rendering. No system turn on purpose:
base instruct templates (Qwen2.5-Instruct, SmolLM2) add a default system prompt when there is none,
and must not pass for plain ChatML."""


def render_rm_input(conversation: Sequence[dict], mode: str, style: str) -> str:
    """The text a reward model scores: ``conversation`` (``[{"role", "content"}, ...]``, its last
    turn the assistant answer being judged) rendered by ``style``'s chat template in ``mode``, no
    generation prompt. A one-line ValueError for a conversation that does not end with an assistant
    turn (render's own checks cover roles, contents and modes)."""
    if (isinstance(conversation, (str, bytes)) or not isinstance(conversation, Sequence)
            or not conversation):
        raise ValueError("conversation: expected a non-empty list of {role, content} dicts ending "
                         "with the assistant turn to score")
    last = conversation[-1]
    role = last.get("role") if isinstance(last, dict) else None
    if role != "assistant":
        raise ValueError(f"conversation[{len(conversation) - 1}].role: a reward model scores the "
                         f"final assistant turn; got {role!r:.40}")
    return render(list(conversation), mode, style, add_generation_prompt=False)


def canonical(style: str, mode: str) -> tuple[str, str]:
    """The member of :data:`RM_RENDERINGS` that renders every RM input like ``(style, mode)``."""
    if style not in STYLES or mode not in FLAGS:
        raise ValueError(f"RM rendering: expected a style in {list(STYLES)} and a mode in "
                         f"{list(FLAGS)}, got {style!r:.40}, {mode!r:.40}")
    return (style, mode) if style == "cascade1" else ("chatml", "no_think")


def rm_chat_template(mode: str, style: str) -> str:
    """The Jinja chat template of an exported RM: ``style``'s (``data.chat.JINJA_TEMPLATES``) with
    ``mode`` as the default mode, so rendering without template arguments (a server's ``/tokenize``,
    vLLM's chat routes) gives :func:`render_rm_input`'s text. The templates read ``mode`` when it is
    defined: setting it at the top changes only the default (an explicit ``mode`` argument still
    wins)."""
    canonical(style, mode)  # validates both
    return f"{{%- set mode = mode if mode is defined else '{mode}' -%}}" + JINJA_TEMPLATES[style]


__all__ = ["render_rm_input", "rm_chat_template", "canonical", "RM_RENDERINGS", "PROBE"]
