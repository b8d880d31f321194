"""Which files each stage's recipes read (docs/recipes.md "## Data"), and from which public sets
they are made."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from nemo_cascade.tooling.prepare import code_sources, helpsteer, released
from nemo_cascade.tooling.prepare.sources import PrepareError, Source, per_row


@dataclass(frozen=True)
class Part:
    """One source of an output file and the converter of its row stream (``(where, row)`` →
    ``(where, row | Drop | Bad)``)."""
    source: Source
    convert: Callable


@dataclass(frozen=True)
class Output:
    path: str
    """Relative to ``--out`` (= ``$NEMO_CASCADE_DATA``), as the recipes name it."""
    kind: str
    """How a written row is checked: ``sft``, ``pairs``, or an RL domain (``math``, ``ifeval``,
    ``code``, ``swe``, ``rlhf``: ``data.schemas.adapt`` then the domain's label validator)."""
    parts: tuple[Part, ...]
    dedup: str = ""
    """``prompt``: one row per prompt text; ``row``: one per (prompt, label); empty: keep repeats
    (SFT sets hold several responses per prompt by design, §3.3)."""


def _sft(path: str, dataset: str, subset: str = "") -> Output:
    return Output(path, "sft", (Part(Source(dataset, subset), per_row(released.sft_row)),))


S1, S2 = "nvidia/Nemotron-Cascade-SFT-Stage-1", "nvidia/Nemotron-Cascade-SFT-Stage-2"
IF_SET, IF_RLVR = ("nvidia/Nemotron-Cascade-RL-Instruction-Following",
                   "allenai/IF_multi_constraints_upto5")
HS2, HS3 = Source("nvidia/HelpSteer2"), Source("nvidia/HelpSteer3", "preference")
CODE_SOURCES = (Source("BAAI/TACO"), Source("codeparrot/apps"),
                Source("agentica-org/DeepCoder-Preview-Dataset", "primeintellect"),
                Source("agentica-org/DeepCoder-Preview-Dataset", "taco"))

STAGES: dict[str, tuple[Output, ...]] = {
    # §3.2–3.3; stage 2 re-uses stage 1's general data (§3.1.1), so it has no general file of its
    # own
    "sft-stage-1": tuple(_sft(f"sft-stage-1/{s}.jsonl", S1, s)
                         for s in ("general", "math", "code", "science")),
    "sft-stage-2": tuple(_sft(f"sft-stage-2/{s}.jsonl", S2, s)
                         for s in ("math", "code", "science", "tool_calling")),
    "sft-swe": (_sft("sft-swe/swe.jsonl", "nvidia/Nemotron-Cascade-SFT-SWE"),),
    # §4.3.1: not released; the RM's preference prompts without math and competitive programming
    "rlhf": (Output("rlhf/prompts.jsonl", "rlhf",
                    (Part(HS2, helpsteer.rlhf_prompts_hs2),
                     Part(HS3, per_row(helpsteer.rlhf_prompt_hs3))), dedup="prompt"),),
    # §4.4.1: IFEval taxonomy first, then IFBench taxonomy (with the IF-RLVR rows)
    "rl-if": (Output("rl-if/ifeval_taxonomy.jsonl", "ifeval",
                     (Part(Source(IF_SET), per_row(released.if_row("ifeval"))),), dedup="row"),
              Output("rl-if/ifbench_taxonomy.jsonl", "ifeval",
                     (Part(Source(IF_SET), per_row(released.if_row("ifbench"))),
                      Part(Source(IF_RLVR), per_row(released.if_row("ifbench")))), dedup="row")),
    "rl-math": (Output("rl-math/train.jsonl", "math",
                       (Part(Source("nvidia/Nemotron-Cascade-RL-Math"),
                             per_row(released.as_released)),), dedup="row"),),
    # §4.6.1: not released; the public sets the AceReason code corpus is built from
    "rl-code": (Output("rl-code/train.jsonl", "code",
                       tuple(Part(s, per_row(code_sources.code_row(s.label)))
                             for s in CODE_SOURCES), dedup="prompt"),),
    "rl-swe": (Output("rl-swe/train.jsonl", "swe",
                      (Part(Source("nvidia/Nemotron-Cascade-RL-SWE"),
                            per_row(released.as_released)),), dedup="row"),),
    # §4.2: HelpSteer2 + HelpSteer3 without ties (+ App. C.1's synthetic pairs, with
    # --generator-url)
    "rm": (Output("rm/preference_pairs.jsonl", "pairs",
                  (Part(HS2, helpsteer.helpsteer2_pairs),
                   Part(HS3, per_row(helpsteer.helpsteer3_pair)))),),
}
"""Stage name (``nemo-cascade data prepare STAGE``) → the files it writes."""


def checked_names(spec: str, known: dict, command: str, what: str) -> list[str]:
    """``NAME``, ``A,B`` or ``all`` → names of ``known``, checked (order kept, repeats dropped); an
    unknown one is one line naming ``command`` and what it expects."""
    names = (list(known) if spec.strip() == "all"
             else [s.strip() for s in spec.split(",") if s.strip()])
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise PrepareError(f"{command} {spec}: unknown {what} {unknown[0] if unknown else spec!r}; "
                           f"expected one of {list(known)} or 'all'")
    return list(dict.fromkeys(names))


def stage_names(spec: str) -> list[str]:
    """``STAGE``, ``A,B`` or ``all`` → stage names, checked."""
    return checked_names(spec, STAGES, "data prepare", "stage")


def with_extra_part(output: Output, part: Optional[Part]) -> Output:
    """``output`` with one more part (the synthetic RM pairs), or unchanged."""
    return (output if part is None
            else Output(output.path, output.kind, output.parts + (part,), output.dedup))


__all__ = ["Part", "Output", "STAGES", "checked_names", "stage_names", "with_extra_part"]
