"""The release's model card: ``README.md`` with the front matter the Hugging Face Hub reads, what
was trained and how, the run's own evaluation table, and the paper's numbers beside it where the
suites are the same benchmark.

Front matter (rendered by ``huggingface_hub.ModelCardData``): ``license`` (given, else the base
folder's card's, else ``unknown``), ``base_model`` (a hub id: given, else what the base folder says
it is), ``datasets`` (given), ``tags``, ``pipeline_tag``, ``library_name``.
:func:`check_release_folder` is the offline check a folder passes before ``hf upload``
(docs/release.md).
"""
from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path
from typing import Optional, Sequence

from nemo_cascade.convert.shape import load_config_json

PAPER_RESULTS: dict[str, tuple[str, dict[str, float]]] = {
    "nemotron-cascade-8b": ("Nemotron-Cascade-8B, T1 / T2 (final row)",
                            {"ifeval": 90.2, "ifbench": 40.8, "aime24": 89.5, "aime25": 80.1}),
    "nemotron-cascade-8b-thinking": (
        "Nemotron-Cascade-8B-Thinking, T8",
        {"ifeval": 83.7, "ifbench": 41.4, "aime24": 88.8, "aime25": 81.4}),
    "nemotron-cascade-14b-thinking": (
        "Nemotron-Cascade-14B-Thinking, T1 / T8 (final row)",
        {"ifeval": 81.9, "ifbench": 41.7, "aime24": 89.7, "aime25": 83.3}),
}
"""Cascade name (the recipes' ``Cascade.name``) → the paper's final scores on the benchmarks a gate
suite here evaluates the same way (avg@k pass@1, App. B): IFEval prompt-strict, IFBench, AIME 2024 /
2025. SWE-bench here is Lite, the paper's Verified, so it is not listed."""

log = logging.getLogger(__name__)

TAGS = ("nemo-cascade", "cascade-rl", "reasoning")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
_CACHE_DIR = re.compile(r"models--([\w.-]+)--([\w.-]+)")
_LICENSE = re.compile(r"[a-z0-9][a-z0-9.+-]*")


def _front_matter(readme: Path) -> dict:
    """A card's YAML front matter as a dict ({} without one)."""
    from huggingface_hub import metadata_load

    try:
        return metadata_load(readme) or {} if readme.is_file() else {}
    except Exception as e:  # noqa: BLE001 — a base folder's malformed card only loses
        # its defaults, said once
        log.warning("%s: front matter unreadable (%s); license and base_model need --license / "
                    "--base-model", readme, str(e).splitlines()[0] if str(e) else type(e).__name__)
        return {}


def base_model_id(base_folder: Path) -> Optional[str]:
    """The hub id the base folder is a copy of: the HF cache's ``models--ORG--NAME`` path, or its
    config's ``_name_or_path`` when that is a hub id; None when neither says."""
    for part in reversed(base_folder.resolve().parts):
        found = _CACHE_DIR.fullmatch(part)
        if found:
            return f"{found.group(1)}/{found.group(2)}"
    config = base_folder / "config.json"
    try:
        name = load_config_json(config, missing_ok=True).get("_name_or_path", "")
    except (OSError, ValueError, AttributeError):
        name = ""
    return (name if isinstance(name, str) and _HUB_ID.fullmatch(name) and not Path(name).exists()
            else None)


def card_metadata(base_folder: Path, *, license: Optional[str] = None,
                  base_model: Optional[str] = None, datasets: Sequence[str] = (),
                  reward_model: bool = False) -> dict:
    """The front matter of a release whose weights were trained from ``base_folder``. ValueError
    (one line) for a base_model or dataset that is not a hub id, or a license that is not a hub
    license id."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    base_card = _front_matter(base_folder / "README.md")
    meta: dict = {"library_name": "transformers",
                  "pipeline_tag": "text-classification" if reward_model else "text-generation",
                  "tags": list(TAGS)}
    license = license or base_card.get("license") or "unknown"
    if not isinstance(license, str) or not _LICENSE.fullmatch(license):
        raise ValueError("--license: expected a hub license id such as apache-2.0 or other, "
                         f"got {license!r:.80}")
    meta["license"] = license
    if license == "other":  # the hub wants the license's name and link with "other"
        meta.update({k: base_card[k] for k in ("license_name", "license_link")
                     if isinstance(base_card.get(k), str)})
    base_model = base_model or base_model_id(base_folder)
    for value, what in [(base_model, "--base-model"), *((d, "--dataset") for d in datasets)]:
        if value is None:
            continue
        try:
            validate_repo_id(value)
            if "/" not in value:
                raise HFValidationError("expected ORG/NAME")
        except HFValidationError as e:
            raise ValueError(f"{what}: expected a hub id ORG/NAME, got {value!r:.80} "
                             f"({str(e).splitlines()[0]})") from None
    if base_model:
        meta["base_model"] = base_model
    if datasets:
        meta["datasets"] = list(dict.fromkeys(datasets))
    return meta


def paper_comparison(cascade_name: str,
                     history: list[tuple[str, dict[str, tuple[float, float]]]]) -> list[str]:
    """Markdown lines: the run's last evaluated row beside the paper's numbers on the same
    benchmarks (empty when the cascade is not one of the paper's models or no suite matches)."""
    # the recipes that start from a released checkpoint (``…-from-rlhf``) end in the same model
    key = cascade_name.split("-from-")[0]
    if key not in PAPER_RESULTS or not history:
        return []
    source, paper = PAPER_RESULTS[key]
    row_name, row = history[-1]
    shared = [s for s in paper if s in row]
    if not shared:
        return []
    lines = ["## Against the paper", "",
             f"The run's last evaluated row (`{row_name}`, the gate's settings) beside the paper's "
             f"reported scores ({source}; App. B settings: 64K thinking budget, T = 0.6, "
             "top-p 0.95, avg@k). Equal numbers need the paper's settings in the gate as well.",
             "", "| benchmark | this run | paper |", "|---|---|---|"]
    lines += [f"| {s} | {row[s][0]:.1f} ± {row[s][1]:.1f} | {paper[s]:.1f} |" for s in shared]
    return lines + [""]


def write_model_card(folder: Path, *, title: str, intro: Sequence[str], report_markdown: str,
                     metadata: dict, comparison: Sequence[str] = (),
                     report_png: Optional[Path] = None) -> Path:
    """Write ``folder/README.md``: front matter, the intro lines, the paper comparison, the run's
    report."""
    from huggingface_hub import ModelCardData

    yaml = ModelCardData(**metadata).to_yaml()
    body = ["---", yaml.rstrip("\n"), "---", "", f"# {title}", "", *intro, "", *comparison,
            "## Evaluation", "", "From the run's report (`nemo-cascade report RUN_DIR`):", ""]
    (folder / "README.md").write_text("\n".join(body) + report_markdown)
    if report_png is not None and report_png.is_file():
        shutil.copy2(report_png, folder / "report.png")
    return folder / "README.md"


MAX_FILE_BYTES = 50 * 10**9
"""The hub refuses a single file over 50 GB; shards are 5 GB by default (``--max-shard-gb``)."""


def check_release_folder(folder: Path) -> list[str]:
    """What would stop or spoil an upload of ``folder``, offline (empty = none): a card the hub
    cannot parse or without license / pipeline_tag, a base_model or dataset that is not a hub id, no
    config.json, no weights (neither model.safetensors nor an index), an index naming a missing
    shard, no tokenizer, a leftover temporary file, a file over the hub's size limit."""
    from huggingface_hub import ModelCard
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    folder, problems = Path(folder), []
    readme = folder / "README.md"
    if not readme.is_file():
        problems.append("README.md: missing (the model card)")
    else:
        try:
            data = ModelCard.load(readme).data.to_dict()
        except Exception as e:  # noqa: BLE001 — reported, not raised:
            # the caller lists every problem
            data = {}
            problems.append(
                f"README.md: the hub cannot parse its front matter ({str(e).splitlines()[0]})")
        for key in ("license", "pipeline_tag", "library_name"):
            if not data.get(key):
                problems.append(f"README.md: front matter without {key!r}")
        for value in [data.get("base_model"), *(data.get("datasets") or [])]:
            if value is None:
                continue
            try:
                validate_repo_id(value)
            except HFValidationError:
                problems.append(f"README.md: {value!r} is not a hub id")
    index = folder / "model.safetensors.index.json"
    if not (folder / "config.json").is_file():
        problems.append("config.json: missing (transformers cannot load the model without it)")
    if not (index.is_file() or (folder / "model.safetensors").is_file()):
        problems.append("no weights: neither model.safetensors nor model.safetensors.index.json")
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        problems.append("no tokenizer: neither tokenizer.json nor tokenizer.model")
    if index.is_file():
        shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        problems += [f"{index.name}: names {s}, which is missing" for s in sorted(shards)
                     if not (folder / s).is_file()]
    for path in sorted(folder.rglob("*")):
        if path.is_file() and (path.name.endswith((".tmp", ".partial"))
                               or path.name.startswith(".")):
            problems.append(f"{path.relative_to(folder)}: a temporary file")
        elif path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
            problems.append(f"{path.relative_to(folder)}: over the hub's 50 GB per-file limit")
    return problems


__all__ = ["PAPER_RESULTS", "card_metadata", "base_model_id", "paper_comparison",
           "write_model_card", "check_release_folder"]
