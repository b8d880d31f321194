"""The config schema's version: which fields each version added (docs/cascade.md, "Adding a config
field").

A run's ``manifest.json`` records the schema version the run was created with, and its stage hashes
(``lineage.config_hash``) are computed under it: a field that version did not have is left out of a
hash while it holds its default — the value every config written before the field existed means — so
a stage interrupted before the field existed still resumes, and its hash changes only when the field
is set. A manifest written without a version is version 1 (every manifest written before versions
were recorded). A new run records :data:`SCHEMA_VERSION`, so its hashes cover every field.
"""
from __future__ import annotations

from functools import lru_cache

from .schema import ConfigError

SCHEMA_VERSION = 13
"""The newest version: the one a new run's manifest.json and every config.json record."""

FIELDS_ADDED: dict[int, dict[str, tuple[str, ...]]] = {
    # Fields added after runs had recorded stage hashes in their manifests. GRPO.sequence_packing
    # and Reward.score_while_generating default to on although runs before them did neither: they
    # change how rows are laid out and when rewards are computed, not what is trained.
    # Data.math_instruction is the exception that changes prompts: a math file of bare problems,
    # interrupted before it existed, resumes asking for the boxed answer its reward always needed;
    # every generated math set already asked.
    2: {"Rollout": ("tensor_parallel_size",), "LengthPhase": ("temperature",),
        "Data": ("min_prompt_tokens", "repeat", "domain", "allow_eval_instructions",
                 "swe_max_files",
                 "swe_min_noisy_files", "math_instruction"),
        "Stage": ("epochs",),
        "GRPO": ("sequence_packing", "pack_tokens"),
        "Reward": ("score_while_generating", "judge_reasoning_tokens", "math_grader")},
    # The code-switch rule's default (auto: the paper's rule per stage, §4.3.2, §4.5.2) replaced a
    # fixed Latin test that was a bug against the paper, as a verifier fix is: a stage resumed
    # across it keeps its hash.
    3: {"Reward": ("code_switch_rule", "code_switch_script")},
    # An explicit LR decay length, the filter's statistics over kept or all groups, a length phase
    # that ends at a clip ratio: each default is what every stage did before it existed.
    4: {"Actor": ("lr_decay_steps",), "GRPO": ("overlong_filter_stats",),
        "LengthPhase": ("until_clip_ratio",)},
    # The gate's thinking mode and App. B's YaRN / input limit: at their defaults the gate evaluates
    # as before.
    5: {"Gate": ("mode", "yarn", "max_input_tokens")},
    # The engine's dtype changes what is sampled, so it is hashed once set; at its default (auto:
    # the actor's dtype, what every engine ran in before it existed) a stage interrupted before it
    # existed resumes.
    6: {"Rollout": ("dtype",)},
    # Compiled or eager engine: once set it is hashed (compiled kernels may round differently, so
    # samples can differ); at its default (auto: eager on CPU, compiled on GPU, how every engine ran
    # before it existed) a stage interrupted before it existed resumes.
    7: {"Rollout": ("compile",)},
    # Samples sharing their prompt's tokens in a packed row change how rows are laid out, not what
    # is trained (as sequence packing in version 2).
    8: {"GRPO": ("share_prompts",)},
    # How many of a gate suite's items are generated together: at its default (64) the gate
    # samples as before.
    9: {"Gate": ("chunk_items",)},
    # Every assistant turn of a multi-turn SFT row learned: a fix, as the code-switch rule was
    # (version 3); a stage resumed across it keeps its hash and learns every turn of the rows it
    # has not seen yet.
    # §4.7.1's ground-truth-only SWE prompts: the default (half the instances) changes the prompts
    # of a swe source with localized files, as math_instruction did (version 2), so a stage resumed
    # across it trains on the paper's two variants; built prompts (the released set) read as before.
    # A thinking-only SFT's rows (keep_mode): at its default every row is kept, as before.
    10: {"Data": ("sft_turns", "swe_truth_only_share", "keep_mode")},
    # The gate's paired rule judges the rows and trains nothing: a run created before it keeps its
    # hash and is judged by the paired rule from then on.
    11: {"Gate": ("rule", "alpha"),
         # A distill stage's teachers (the section, with all its fields): unused by every
         # other kind, left out of a hash at its default.
         "Stage": ("distill",)},
    # What the gate does about a regression it flags: at its default (warn) nothing is inserted.
    12: {"Gate": ("repair",)},
    # A source's fixed share of a GRPO prompt pool: at its default (0: by row count) the pool is
    # what it was.
    13: {"Data": ("share",)},
}
"""Per schema version, per config class, the fields that version added; version 1 is every field not
named here. A new field goes into ``FIELDS_ADDED[SCHEMA_VERSION + 1]`` with ``SCHEMA_VERSION``
bumped (tests/unit/test_schema_versions.py checks)."""


@lru_cache(maxsize=None)
def added_after(version: int) -> dict[str, frozenset[str]]:
    """Per config class, the fields added after schema ``version``: the ones a hash under that
    version leaves out while they hold their defaults."""
    out: dict[str, set[str]] = {}
    for added, classes in FIELDS_ADDED.items():
        if added > version:
            for cls, names in classes.items():
                out.setdefault(cls, set()).update(names)
    return {cls: frozenset(names) for cls, names in out.items()}


def schema_version_of(data: dict, where: str) -> int:
    """The ``schema_version`` a manifest.json or config.json (``data``, read from ``where``)
    records; 1 when it records none. One ConfigError line for a version this code does not know: its
    hashes and fields mean something this code cannot reproduce."""
    version = data.get("schema_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError(f"{where}: schema_version: expected an integer >= 1, got {version!r:.40}")
    if version > SCHEMA_VERSION:
        raise ConfigError(f"{where}: schema version {version} is newer than this nemo-cascade's "
                          f"({SCHEMA_VERSION}); update nemo-cascade")
    return version


__all__ = ["SCHEMA_VERSION", "FIELDS_ADDED", "added_after", "schema_version_of"]
