"""Typed configuration for a whole cascade (docs/recipes.md).

- :mod:`.schema`: the frozen dataclasses a recipe builds (``Cascade`` → ``Stage`` → sections) and
  helpers that read them; :mod:`.data` (a stage's sources) and :mod:`.gate` (the forgetting gate)
  are sections with modules of their own;
- :mod:`.checks`: :func:`validate`, the values that types cannot express;
- :mod:`.serialize`: the JSON form written to a run's config.json and read back (the command line's
  ``key=value`` overrides are the CLI's: ``tooling/overrides.py``);
- :mod:`.versions`: the schema version a run records and the fields each version added (its stage
  hashes);
- :mod:`.recipe_file`: loading a recipe, and :func:`load_plugin`, a user's file that registers a
  reward domain or a suite a recipe names.

Nothing here imports torch, megatron or vllm, so configs can be built, validated and printed
anywhere.
"""
from .checks import validate
from .serialize import dumps, from_dict, to_dict
from .schema import (GRPO, ON_POLICY_KINDS, REWARD_DOMAINS, STAGE_KINDS, Actor, Boundary, Cascade,
                     ConfigError, Distill, LengthPhase, Model, Parallel, Reward, Rollout, Stage,
                     literal_values)
from .data import Data
from .gate import Gate, Repair
from .derived import (engine_dtype, engine_eager, epochs_line, frozen_copies, length_phases,
                      longest_response, phase_at, phase_rollout, prompt_sources,
                      samples_on_policy, stage_by_name, stage_domains, teacher_sources, tolerances,
                      with_epoch_steps)
from .versions import FIELDS_ADDED, SCHEMA_VERSION, schema_version_of
from .recipe_file import load_plugin

__all__ = [
    "ConfigError", "Model", "Parallel", "Actor", "Rollout", "GRPO", "Data", "Reward",
    "LengthPhase", "Boundary", "Gate", "Repair", "Distill", "Stage", "Cascade", "STAGE_KINDS",
    "ON_POLICY_KINDS", "REWARD_DOMAINS", "load_plugin", "samples_on_policy", "teacher_sources",
    "frozen_copies", "tolerances", "length_phases", "longest_response", "phase_at",
    "phase_rollout", "with_epoch_steps", "epochs_line", "stage_by_name", "prompt_sources",
    "stage_domains", "validate", "to_dict", "from_dict", "dumps", "literal_values",
    "engine_dtype", "engine_eager", "SCHEMA_VERSION", "FIELDS_ADDED", "schema_version_of",
]
