"""Release conversion, offline: a trainer checkpoint of any TP × PP layout ⇄ an HF folder.

One process, CPU, no process group: the model shards of a checkpoint (``checkpoint/``'s
``model_tp{t}_pp{p}.pt``) are merged over TP with the same declarative table that loads HF
checkpoints into the actor and syncs weights into vLLM (``table.py``), and PP-local layer numbers
become global ones. Shards are memory-mapped, so peak memory is about one output shard plus one
merged tensor, not the model.

- :func:`resolve` finds what to convert from a run directory, a stage directory, a checkpoint folder
  or an HF folder, and the HF folder that supplies config.json and the tokenizer (the run's base
  model).
- :func:`to_hf` writes the release folder: config.json with the right ``architectures`` (and YaRN
  rope scaling when asked, App. B), generation_config.json (the paper's App. B decoding, T = 0.6 and
  top-p 0.95, over the base's), tokenizer files with the chat template the cascade trained with, and
  safetensors shards with an index. The folder appears atomically.
- :func:`from_hf` writes a weights-only checkpoint in a given TP × PP layout (for inspecting a model
  as the actor shards it, and for the round-trip check ``to_hf(from_hf(x)) == x``).
- :func:`verify` loads the folder with transformers and compares its logits with a reference
  folder's.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from nemo_cascade import checkpoint
from nemo_cascade.runtime.files import published_folder
from nemo_cascade.convert import megatron_args, table
from nemo_cascade.convert.hf_config import is_reward_model, reward_model_config, with_yarn
from nemo_cascade.convert.hf_io import (SafetensorsReader, copy_side_files, write_sharded,
                                        write_chat_template)
from nemo_cascade.convert.shape import ModelShape, load_config_json, read_hf_config
from nemo_cascade.errors import CascadeError
from nemo_cascade.actor.megatron import MegatronActor
from nemo_cascade.cascade.lineage import read_manifest
from nemo_cascade.config import ON_POLICY_KINDS, Parallel
from nemo_cascade.data.rm_input import rm_chat_template
from nemo_cascade.data.tokenizer import set_chat_template
from nemo_cascade.tooling import model_card
from nemo_cascade.tooling.report import load_run, render_markdown

GENERATION_DEFAULTS = {"do_sample": True, "temperature": 0.6, "top_p": 0.95}
"""Decoding written into a release's generation_config.json: the paper's evaluation setting
(App. B)."""
_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")


class ConvertError(CascadeError, ValueError):
    """A conversion that cannot be done; the message is one line naming the path and what was
    expected."""


@dataclass(frozen=True)
class Source:
    kind: str
    """``checkpoint`` (a step folder with meta.json) or ``hf`` (a folder with safetensors)."""
    path: Path
    base: Path
    """The HF folder whose config.json and tokenizer describe the weights."""
    chat_style: str = ""
    """The cascade's chat template style (config ``chat_style``); empty: keep the base's
    template."""
    run_dir: Path | None = None
    rm_mode: str = ""
    """A ``reward_model`` stage's mode: its release chats as its pairs were rendered
    (``data.rm_input``, §4.2)."""


# ------------------------------------------------------------------------------------------ resolve
def resolve(path: str | Path, base: str | Path | None = None) -> Source:
    """What to convert. ``path`` is a run (``runs/NAME``: its last finished policy stage), a stage
    (``runs/NAME/stages/K-NAME``: its HF export, else its newest checkpoint), a checkpoint root or
    step folder, or an HF folder. ``base`` overrides the HF folder that supplies config.json and the
    tokenizer."""
    p = Path(path)
    if not p.exists():
        raise ConvertError(f"{p}: no such file or directory")
    run = _run_of(p)
    chat_style = _run_config(run).get("chat_style", "") if run else ""
    rm_mode = _rm_stage_mode(run, p) if run else ""
    if run is not None and p == run:
        p = _last_policy_stage(run)
    if (p / "hf" / "config.json").is_file():  # a finished stage: its export holds the final weights
        p = p / "hf"
    elif (p / "checkpoint").is_dir():
        p = p / "checkpoint"
    if not (p / checkpoint.META).is_file() and p.is_dir() and any(p.glob("step_*")):
        latest = checkpoint.latest(p)
        if latest is None:
            raise ConvertError(
                f"{p}: no complete checkpoint (only .tmp folders: a save was interrupted)")
        p = latest
    if (p / checkpoint.META).is_file():
        kind = "checkpoint"
    elif (p / "config.json").is_file():
        kind = "hf"
    else:
        raise ConvertError(
            f"{p}: not a run, stage, checkpoint or HF folder (expected meta.json, config.json, "
            f"stages/ or checkpoint/)")
    if base is not None:
        base_dir = Path(base)
    elif kind == "hf":
        base_dir = p
    elif run is not None:
        base_dir = _run_base(run)
    else:
        raise ConvertError(
            f"{p}: a checkpoint outside a run directory needs --base HF_FOLDER (config.json and "
            f"tokenizer of the model it was trained from)")
    if not (base_dir / "config.json").is_file():
        raise ConvertError(
            f"{base_dir}: no config.json (expected the HF folder the run started from)")
    return Source(kind, p, base_dir, chat_style, run, rm_mode)


def _run_of(p: Path) -> Path | None:
    for candidate in [p, *p.parents]:
        if (candidate / "config.json").is_file() and (candidate / "stages").is_dir():
            return candidate
    return None


def _run_config(run: Path) -> dict:
    try:
        return json.loads((run / "config.json").read_text())
    except (OSError, ValueError) as e:
        raise ConvertError(f"{run / 'config.json'}: unreadable ({type(e).__name__}: {e})") from None


def _rm_stage_mode(run: Path, p: Path) -> str:
    """The mode of the ``reward_model`` stage ``p`` lies in (its folder, export or checkpoint), else
    empty."""
    for k, s in enumerate(_run_config(run).get("stages", [])):
        folder = run / "stages" / f"{k}-{s.get('name')}"
        if s.get("kind") == "reward_model" and (p == folder or folder in p.parents):
            return s.get("mode", "no_think")
    return ""


def _run_base(run: Path) -> Path:
    model = _run_config(run).get("model", {})
    return Path(model["hf_path"]) if model.get("hf_path") else run / "base_model"


def _last_policy_stage(run: Path) -> Path:
    """The run's newest policy stage with weights to release (an RM stage is never the release)."""
    stages = _run_config(run).get("stages", [])
    for k in reversed(range(len(stages))):
        s = stages[k]
        folder = run / "stages" / f"{k}-{s['name']}"
        if (s.get("kind") != "reward_model"
                and ((folder / "hf" / "config.json").is_file()
                     or checkpoint.latest(folder / "checkpoint") is not None)):
            return folder
    raise ConvertError(f"{run}: no policy stage has an HF export or a checkpoint yet")


# ---------------------------------------------------------------------------------- checkpoint → HF
def checkpoint_tensors(step_dir: str | Path,
                       shape: ModelShape) -> Iterator[tuple[str, torch.Tensor]]:
    """HF-named full tensors from a checkpoint's model shards (memory-mapped, one pipeline stage at
    a time). Every saved parameter must be used by the table (a shard of another architecture is an
    error), except the last pipeline stage's copy of tied embeddings."""
    step_dir = Path(step_dir)
    meta = checkpoint.read_meta(step_dir)
    tp, pp = int(meta["tp"]), int(meta["pp"])
    if shape.num_layers % pp:
        raise ConvertError(
            f"{step_dir}: pp={pp} does not divide the base model's {shape.num_layers} layers "
            f"(is --base the model this checkpoint was trained from?)")
    per_stage = shape.num_layers // pp
    done: set[str] = set()
    for p in range(pp):
        shards = [checkpoint.read_model_shard(step_dir, meta, t, p) for t in range(tp)]
        te = any(name.endswith("layer_norm_weight") for name in shards[0])
        head = "score" if _is_score_head(shards[0]) else "lm"
        conversion = table.table_for(shape, te=te, head=head)
        for entry in conversion.entries:
            local = _local_name(entry, p, per_stage)
            if local is None or entry.megatron in done or local not in shards[0]:
                continue
            missing = [t for t, s in enumerate(shards) if local not in s]
            if missing:
                raise ConvertError(
                    f"{step_dir}: {local} is missing from model_tp{missing[0]:02d}_pp{p:02d}.pt")
            full = table.unshard([s.pop(local) for s in shards], entry.rule.tp)
            done.add(entry.megatron)
            try:
                yield from table.to_hf(entry, full, shape)
            except RuntimeError:  # a reshape that does not fit: the base describes another model
                raise ConvertError(
                    f"{step_dir}: {local} has shape {tuple(full.shape)}, which does not fit the "
                    f"base model's geometry (is --base the model this checkpoint was trained "
                    f"from?)") from None
        leftover = sorted(set(shards[0]) - set(conversion.megatron_copies))
        if leftover:
            raise ConvertError(
                f"{step_dir}/model_tp00_pp{p:02d}.pt: parameters the {shape.arch} table does not "
                f"know: {leftover[:3]} (is --base the model this checkpoint was trained from?)")
    expected = {e.megatron for e in table.table_for(shape).entries}
    if len(done) < len(expected):
        raise ConvertError(
            f"{step_dir}: {len(expected) - len(done)} of the model's {len(expected)} parameters "
            f"are in no shard (incomplete checkpoint, or --base has more layers)")


def _local_name(entry: table.Entry, p: int, per_stage: int) -> str | None:
    """The entry's name in pipeline stage ``p``'s shard (PP-local layer number), None if another
    stage's."""
    if entry.layer is None:
        return entry.megatron
    if entry.layer // per_stage != p:
        return None
    return _LAYER.sub(f"decoder.layers.{entry.layer - p * per_stage}.", entry.megatron)


def _is_score_head(shard: dict[str, torch.Tensor]) -> bool:
    """A reward model's head: one output row (the BT score) instead of the vocabulary."""
    head = shard.get("output_layer.weight")
    return head is not None and head.shape[0] == 1


# ----------------------------------------------------------------------------------------- write HF
def to_hf(source: Source, out_dir: str | Path, dtype: str = "auto", max_shard_bytes: int = 5 << 30,
          yarn_factor: float | None = None, yarn_original: int = 32768) -> Path:
    """Write the release folder ``out_dir`` from ``source`` (see the module docstring). ``dtype``:
    ``auto`` keeps the stored dtype; ``bfloat16`` / ``float32`` cast. ``yarn_factor`` (default: the
    run's ``model.yarn_factor``; 0 = none) writes YaRN rope scaling over ``yarn_original`` positions
    (App. B)."""
    if yarn_factor is None:
        yarn_factor = float(_run_config(source.run_dir).get("model", {}).get("yarn_factor", 0.0)) \
            if source.run_dir else 0.0
    shape = read_hf_config(source.base)
    if source.kind == "checkpoint":
        tensors = checkpoint_tensors(source.path, shape)
    else:
        reader = SafetensorsReader(source.path)
        tensors = ((name, reader.get(name)) for name in reader.names())
    cast = {"auto": None, "bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    first_dtype: list[torch.dtype] = []

    def converted():
        for name, t in tensors:
            t = t.to(cast) if cast is not None and t.is_floating_point() else t
            first_dtype[:1] = first_dtype[:1] or [t.dtype]
            yield name, t

    out = Path(out_dir)
    # a bad shard or a full disk leaves no half-written folder
    with published_folder(out, replace=True) as tmp:
        _write_folder(source, shape, converted(), first_dtype, tmp, max_shard_bytes)
        if yarn_factor:
            config = with_yarn(load_config_json(tmp / "config.json"), yarn_factor, yarn_original)
            (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def _write_folder(source: Source, shape: ModelShape, tensors, first_dtype: list, tmp: Path,
                  max_shard_bytes: int) -> None:
    weight_map = write_sharded(tensors, tmp, max_shard_bytes=max_shard_bytes)
    config_src = source.path if source.kind == "hf" else source.base
    config = load_config_json(config_src / "config.json")
    if any(name == "score.weight" for name in weight_map) and not is_reward_model(shape):
        config = reward_model_config(config, config.get("pad_token_id") or 0)
    if first_dtype:
        config["torch_dtype"] = str(first_dtype[0]).removeprefix("torch.")
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    copy_side_files(source.base, tmp)
    if source.kind == "hf":
        # a stage export's own tokenizer files and chat template win
        copy_side_files(source.path, tmp)
    _write_generation_config(tmp, config)
    if source.chat_style:

        # an RM: its training rendering
        if (tmp / "tokenizer_config.json").is_file() and source.rm_mode:
            write_chat_template(tmp, rm_chat_template(source.rm_mode, source.chat_style))
        elif (tmp / "tokenizer_config.json").is_file():
            set_chat_template(tmp, source.chat_style)


def _write_generation_config(folder: Path, config: dict) -> None:
    path = folder / "generation_config.json"
    generation = load_config_json(path, missing_ok=True)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if config.get(key) is not None:
            generation.setdefault(key, config[key])
    generation.update(GENERATION_DEFAULTS)
    path.write_text(json.dumps(generation, indent=2) + "\n")


def write_model_card(folder: str | Path, source: Source, name: str = "", *,
                     license: str | None = None, base_model: str | None = None,
                     datasets: tuple[str, ...] = ()) -> Path:
    """``README.md`` for a release from a run: hub front matter (``convert/model_card.py``), what
    was trained and how (stages, base, lineage hashes), the paper's numbers beside the run's where
    the benchmarks match, and the evaluation table taken from the run's own report (the forgetting
    matrix after every stage), with its heatmap. Numbers are copied from the run's eval files and
    the paper's tables, never typed in per release."""

    if source.run_dir is None:
        raise ConvertError(
            f"{source.path}: a model card needs the run directory (its report and manifest)")
    folder, run = Path(folder), source.run_dir
    config, manifest = _run_config(run), read_manifest(run / "manifest.json")
    stages = " → ".join(f"{s['name']} ({s.get('kind', '?')}"
                        + (f", {s['domain']}" if s.get("kind") in ON_POLICY_KINDS else "") + ")"
                        for s in config["stages"])
    try:
        metadata = model_card.card_metadata(_run_base(run), license=license, base_model=base_model,
                                            datasets=datasets,
                                            reward_model=_is_reward_model(folder))
    except ValueError as e:
        raise ConvertError(str(e)) from None
    intro = [
        "Post-trained with nemo-cascade by Cascade RL (Nemotron-Cascade, arXiv 2512.13607): "
        "domain-wise RL stages run in sequence, each starting from the previous stage's weights, "
        "with every domain evaluated after every stage.", "",
        f"- base model: `{metadata.get('base_model') or manifest.get('base_model', '?')}`",
        f"- stages: {stages}",
        "- released weights: "
        f"`{source.path.relative_to(run) if source.path.is_relative_to(run) else source.path}`",
        f"- chat template: `{source.chat_style or 'the base model’s'}`; decoding defaults "
        f"(generation_config.json): temperature {GENERATION_DEFAULTS['temperature']}, "
        f"top-p {GENERATION_DEFAULTS['top_p']} (paper App. B)",
        f"- lineage: git `{(manifest.get('git_sha') or 'unknown')[:12]}`, config sha256 "
        f"`{manifest.get('config_sha256', '?')[:16]}`, seed {manifest.get('seed', '?')}"]
    report = load_run(run)
    # drop the report's title
    markdown = render_markdown(report).split("\n", 1)[1].replace("\n## ", "\n### ")
    return model_card.write_model_card(
        folder, title=name or config.get("name", run.name), intro=intro, report_markdown=markdown,
        metadata=metadata,
        comparison=model_card.paper_comparison(config.get("name", ""), report.history),
        report_png=run / "report.png")


def _is_reward_model(folder: Path) -> bool:
    try:
        architectures = load_config_json(folder / "config.json").get("architectures") or []
    except (OSError, ValueError):
        return False
    return any(a.endswith("ForSequenceClassification") for a in architectures)


# ---------------------------------------------------------------------------------------- HF → ckpt
def from_hf(hf_dir: str | Path, out_dir: str | Path, tp: int = 1, pp: int = 1) -> Path:
    """A weights-only checkpoint of the HF folder in the actor's TP × PP layout (local layer spec
    names)."""
    hf_dir = Path(hf_dir)
    shape = read_hf_config(hf_dir)
    megatron_args.check_parallel(shape, tp, pp, where="convert from-hf: --tp/--pp")
    reader = SafetensorsReader(hf_dir)
    head = "score" if is_reward_model(shape) else "lm"
    per_stage = shape.num_layers // pp
    shards: dict[tuple[int, int], dict[str, torch.Tensor]] = {(t, p): {} for t in range(tp)
                                                              for p in range(pp)}
    conversion = table.table_for(shape, head=head)
    conversion.check_known_hf(reader.names(), str(hf_dir))
    for entry in conversion.entries:
        full = table.to_megatron(entry, [reader.get(h) for h in entry.hf], shape)
        p = conversion.owner_stage(entry, pp)
        for t in range(tp):
            shards[(t, p)][_local_name(entry, p, per_stage)] = (
                table.shard(full, entry.rule.tp, t, tp).clone())
    return checkpoint.write_weights(out_dir, shards, tp, pp, state={"converted_from": str(hf_dir)})


# ------------------------------------------------------------------------------------------- verify
MEGATRON_FP32_TOLERANCE = 1e-4
"""Largest per-token |Δ log-prob| between the Megatron actor and transformers on the probe batch,
both fp32. fp32 rounding grows with depth: ≤ 1e-6 for the 2–4-layer test models, 2.9e-5 for
SmolLM2-135M (30 layers); a conversion error (a swapped or mis-split tensor, a wrong rope) moves
log-probs by far more than 1e-4. In bf16 the two differ by up to ~1e-2 per token (measured on an
H200: 6.7e-3–9.6e-3, the size of transformers' own bf16-vs-fp32 difference, 7.9e-3;
docs/performance.md), so the check runs in fp32."""


def verify(folder: str | Path, reference: str | Path | None = None, prompt: str = "What is 2+3?",
           megatron: bool = True) -> dict:
    """Load ``folder`` with transformers (fp32) and run ``prompt`` (greedy); with ``megatron``,
    build the Megatron actor (TP=1, this process) from the folder and compare its per-token
    log-probs on a probe batch with transformers' (≤ :data:`MEGATRON_FP32_TOLERANCE`); with
    ``reference``, also compare every tensor and the logits. Raises ConvertError when the folder
    does not load or a comparison fails."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    folder = Path(folder)
    shape = read_hf_config(folder)
    cls = AutoModelForSequenceClassification if is_reward_model(shape) else AutoModelForCausalLM
    try:
        model = cls.from_pretrained(str(folder), dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except (OSError, ValueError) as e:
        raise ConvertError(f"{folder}: transformers cannot load it ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:200]})") from None
    if tokenizer.chat_template:  # an instruct model answers a chat turn, not raw text
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                            add_generation_prompt=True, return_tensors="pt",
                                            return_dict=True)["input_ids"]
    else:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    report = {"tensors_equal": None, "max_logit_diff": None, "greedy": None,
              "megatron_max_logprob_diff": None}
    if not torch.isfinite(logits).all():
        raise ConvertError(f"{folder}: non-finite logits on {prompt!r}")
    if cls is AutoModelForCausalLM:
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=16, do_sample=False)
        report["greedy"] = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    if megatron and cls is AutoModelForCausalLM:
        report["megatron_max_logprob_diff"] = _megatron_logprob_diff(folder, model, shape)
    if reference is not None:
        a, b = SafetensorsReader(folder), SafetensorsReader(reference)
        if sorted(a.names()) != sorted(b.names()):
            raise ConvertError(f"{folder}: tensor names differ from {reference} "
                               f"({sorted(set(a.names()) ^ set(b.names()))[:3]})")
        differ = [n for n in a.names() if not torch.equal(a.get(n).float(), b.get(n).float())]
        ref = cls.from_pretrained(str(reference), dtype=torch.float32).eval()
        with torch.no_grad():
            report["max_logit_diff"] = float((ref(ids).logits - logits).abs().max())
        report["tensors_equal"] = not differ
        if differ:
            raise ConvertError(
                f"{folder}: {len(differ)} tensors differ from {reference} (first: {differ[0]}); "
                f"max logit difference {report['max_logit_diff']:.2e}")
    return report


def _megatron_logprob_diff(folder: Path, model, shape: ModelShape) -> float:
    """Max |Δ| of per-token log-probs, Megatron actor vs transformers ``model``, on a fixed random
    probe batch."""

    probe = torch.randint(0, shape.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(probe).logits.float()[:, :-1]
    want = torch.log_softmax(logits, -1).gather(-1, probe[:, 1:, None])[..., 0]
    got = MegatronActor(str(folder), Parallel(), "float32").logprobs(probe, temperature=1.0)[:, 1:]
    diff = float((got.float() - want).abs().max())
    if diff > MEGATRON_FP32_TOLERANCE:
        raise ConvertError(
            f"{folder}: Megatron's log-probs differ from transformers' by {diff:.2e} "
            f"(> {MEGATRON_FP32_TOLERANCE:g} in fp32): the conversion table or config is wrong")
    return diff


__all__ = ["Source", "ConvertError", "GENERATION_DEFAULTS", "resolve", "checkpoint_tensors",
           "to_hf", "from_hf", "verify", "write_model_card"]
