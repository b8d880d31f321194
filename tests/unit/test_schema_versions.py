"""The config schema version (config/versions.py) and the stage hashes computed under it
(lineage.config_hash): a manifest without a version (every one written before versions were
recorded) hashes exactly as before, so its running stages still resume; a new manifest records
config.SCHEMA_VERSION and hashes every field; a manifest or config.json of a newer version is
refused in one line; and a new config field must come with a new version (docs/cascade.md, "Adding a
config field")."""
import hashlib
import json
import shutil
import typing
from dataclasses import MISSING, fields, is_dataclass, replace
from pathlib import Path

import pytest

from nemo_cascade import config
from nemo_cascade.cascade import lineage
from nemo_cascade.config.versions import added_after
from nemo_cascade.cascade.lineage import Manifest, _canonical, config_hash
from nemo_cascade.tooling.cli import load_recipe

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "docs" / "results" / "smollm2"
RECIPES = [
    "tiny.py", "tiny.py:math_only", "smollm2.py", "smollm2_mixed.py", "nemotron_cascade_8b.py",
    "nemotron_cascade_8b.py:with_sft", "nemotron_cascade_8b_thinking.py",
    "nemotron_cascade_14b_thinking.py", "reward_model_72b.py"]
NOT_HASHED = lineage.ENDPOINTS + lineage.AFTER_TRAINING + lineage.PATIENCE + lineage.HOW_READ


# The rule as cascade/lineage.py stated it before schema versions (its ADDED_LATER after its last
# addition), kept here to check that a version-1 manifest hashes exactly as every manifest written
# so far did.
OLD_ADDED_LATER = {
    "Rollout": ("tensor_parallel_size", "dtype"),
    "LengthPhase": ("temperature", "until_clip_ratio"),
    "Data": ("min_prompt_tokens", "repeat", "domain", "allow_eval_instructions", "swe_max_files",
             "swe_min_noisy_files", "math_instruction"),
    "Stage": ("epochs",), "GRPO": ("sequence_packing", "pack_tokens", "overlong_filter_stats"),
    "Reward": ("score_while_generating", "judge_reasoning_tokens", "math_grader",
               "code_switch_rule", "code_switch_script"),
    "Actor": ("lr_decay_steps",), "Gate": ("mode", "yarn", "max_input_tokens")}


def _old_canonical(obj):
    """lineage's old rule; a field added after version 6 did not exist then, so at its default it is
    absent."""
    if is_dataclass(obj):
        name = type(obj).__name__
        later = (*OLD_ADDED_LATER.get(name, ()), *added_after(6).get(name, ()))
        return {f.name: _old_canonical(getattr(obj, f.name)) for f in fields(obj)
                if f.name not in NOT_HASHED
                and not (f.name in later and getattr(obj, f.name) == _default(f))}
    if isinstance(obj, tuple):
        return [_old_canonical(v) for v in obj]
    return obj


def _default(f):
    # a section (Stage.distill) has a factory, not a default
    return f.default_factory() if f.default_factory is not MISSING else f.default


def _old_hash(obj) -> str:
    return hashlib.sha256(json.dumps(_old_canonical(obj), sort_keys=True).encode()).hexdigest()


def _with_newer_fields_set(stage: config.Stage) -> config.Stage:
    """The stage with a field of each later version set away from its default."""
    return replace(stage, epochs=stage.epochs + 1.0,
                   rollout=replace(stage.rollout, dtype="bfloat16"),
                   reward=replace(stage.reward, code_switch_rule="fixed_script"),
                   actor=replace(stage.actor, lr_decay_steps=7))


# ------------------------------------------------------------------------------------- the versions

def test_version_one_leaves_out_exactly_what_added_later_did():
    """Versions 2–6 together are the old rule (versions were introduced at 6); later ones only add
    to it."""
    since_six = added_after(6)
    assert ({cls: set(names) - since_six.get(cls, set()) for cls, names in added_after(1).items()}
            == {cls: set(names) for cls, names in OLD_ADDED_LATER.items()})
    assert added_after(config.SCHEMA_VERSION) == {}


@pytest.mark.parametrize("recipe", RECIPES)
def test_a_version_one_hash_is_the_hash_every_manifest_so_far_recorded(recipe):
    cfg = load_recipe(str(ROOT / "recipes" / recipe))
    assert config_hash(cfg, schema_version=1) == _old_hash(cfg)
    for stage in cfg.stages:
        assert config_hash(stage, schema_version=1) == _old_hash(stage)
        changed = _with_newer_fields_set(stage)  # set fields are hashed under either rule
        assert config_hash(changed, schema_version=1) == _old_hash(changed) != _old_hash(stage)


def test_the_kept_runs_manifest_hashes_are_version_one_hashes():
    for folder in ("cascade", "mixed"):
        recorded = config.from_dict(config.Cascade,
                                    json.loads((KEPT / folder / "config.json").read_text()))
        manifest = json.loads((KEPT / folder / "manifest.json").read_text())
        assert "schema_version" not in manifest  # written before versions were recorded: version 1
        assert config_hash(recorded, schema_version=1) == manifest["config_sha256"]
        assert [config_hash(s, schema_version=1) for s in recorded.stages] == \
            [manifest["stages"][s.name]["config_sha256"] for s in recorded.stages]


@pytest.mark.parametrize("version", range(1, config.SCHEMA_VERSION + 1))
def test_a_field_at_its_default_is_hashed_from_the_version_that_added_it(version):
    stage = config.Stage(name="math", data=config.Data(source="x.jsonl"),
                         length_curriculum=(config.LengthPhase(5, 24, "filter"),))
    sections = {"Stage": _canonical(stage, version), "Rollout": _canonical(stage.rollout, version),
                "Data": _canonical(stage.data, version), "GRPO": _canonical(stage.grpo, version),
                "Reward": _canonical(stage.reward, version),
                "Actor": _canonical(stage.actor, version),
                "LengthPhase": _canonical(stage.length_curriculum[0], version),
                "Gate": _canonical(config.Gate(), version)}
    for added, classes in config.FIELDS_ADDED.items():
        for cls, names in classes.items():
            for name in names:
                assert (name in sections[cls]) == (added <= version), (cls, name, added, version)


def test_a_current_manifest_hashes_a_field_at_its_default():
    stage = config.Stage(name="math", data=config.Data(source="x.jsonl"))
    assert ("dtype" in _canonical(stage)["rollout"]
            and "dtype" not in _canonical(stage, 5)["rollout"])
    assert config_hash(stage) == config_hash(stage, config.SCHEMA_VERSION) != config_hash(stage, 1)


# ---------------------------------------------------------------------------------------- manifests

@pytest.fixture
def tiny():
    return load_recipe(str(ROOT / "recipes" / "tiny.py") + ":math_only")


def _one_line(fn) -> str:
    with pytest.raises(config.ConfigError) as e:
        fn()
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_new_run_records_the_current_version_and_a_rewrite_keeps_it(tiny, tmp_path):
    path = tmp_path / "manifest.json"
    m = Manifest(tiny, path, "base", {})
    assert m.schema_version == config.SCHEMA_VERSION
    assert json.loads(path.read_text())["schema_version"] == config.SCHEMA_VERSION
    math = config.stage_by_name(tiny, "math")
    assert m.config_hash(math) == config_hash(math)
    m.update("math", status="running", config_sha256=m.config_hash(math))
    again = Manifest(tiny, path, "base", {})
    again.check_resumable(math)
    newer = replace(math, rollout=replace(math.rollout, dtype="bfloat16"))
    assert "its config changed" in _one_line(lambda: again.check_resumable(newer))


def test_a_running_stage_of_a_version_one_manifest_resumes_across_the_change(tiny, tmp_path):
    """A manifest as the code before schema versions wrote it: no version, the stage hashed by the
    old rule."""
    path = tmp_path / "manifest.json"
    math = config.stage_by_name(tiny, "math")
    stages = {s.name: {"status": "pending", "kind": s.kind, "config_sha256": "", "data_sha256": []}
              for s in tiny.stages}
    stages["math"].update(status="running", config_sha256=_old_hash(math))
    path.write_text(
        json.dumps({"name": tiny.name, "config_sha256": _old_hash(tiny), "stages": stages}))
    m = Manifest(tiny, path, "base", {})
    assert m.schema_version == 1
    m.check_resumable(math)  # resumes under the same config
    # what the resumed stage records
    m.update("math", status="running", config_sha256=m.config_hash(math))
    written = json.loads(path.read_text())
    assert written["schema_version"] == 1  # not bumped: its hashes are version-1 hashes
    assert written["stages"]["math"]["config_sha256"] == _old_hash(math)
    assert written["config_sha256"] == _old_hash(tiny)
    Manifest(tiny, path, "base", {}).check_resumable(math)  # and again after the rewrite
    changed = replace(math, rollout=replace(math.rollout, dtype="bfloat16"))
    assert "its config changed" in _one_line(
        lambda: Manifest(tiny, path, "base", {}).check_resumable(changed))


def test_the_kept_runs_manifests_read_back_as_version_one(tmp_path):
    for folder in ("cascade", "mixed"):
        run = tmp_path / folder
        shutil.copytree(KEPT / folder, run)
        cfg = config.from_dict(config.Cascade, json.loads((run / "config.json").read_text()))
        m = Manifest(cfg, run / "manifest.json", "base", {})
        assert (m.schema_version == 1
                and json.loads((run / "manifest.json").read_text())["schema_version"] == 1)
        for stage in cfg.stages:
            m.update(stage.name, status="running")  # as if interrupted: the strict check applies
            m.check_resumable(stage)


def test_a_manifest_of_a_newer_version_is_refused_in_one_line(tiny, tmp_path):
    path = tmp_path / "runs" / "x" / "manifest.json"
    path.parent.mkdir(parents=True)
    newer = config.SCHEMA_VERSION + 3
    path.write_text(json.dumps({"schema_version": newer, "stages": {}}))
    assert _one_line(lambda: Manifest(tiny, path, "base", {})) == (
        f"{path}: schema version {newer} is newer than this nemo-cascade's "
        f"({config.SCHEMA_VERSION}); update nemo-cascade")
    for bad in ("6", 0, True, None):
        path.write_text(json.dumps({"schema_version": bad, "stages": {}}))
        assert _one_line(lambda: Manifest(tiny, path, "base", {})).startswith(
            f"{path}: schema_version: expected an integer >= 1")
    path.write_text("[]")
    assert ("expected the run's manifest (a JSON object), got a JSON array; restore or delete it"
            in _one_line(lambda: Manifest(tiny, path, "b", {})))


# -------------------------------------------------------------------------------------- config.json

def test_config_json_records_the_version_and_reads_back(tiny):
    doc = json.loads(config.dumps(tiny))
    assert doc["schema_version"] == config.SCHEMA_VERSION
    assert config.from_dict(config.Cascade, doc) == tiny
    # a config.json written before versions
    old = {k: v for k, v in doc.items() if k != "schema_version"}
    assert config.from_dict(config.Cascade, old) == tiny


def test_a_config_json_of_a_newer_version_is_refused_in_one_line(tiny):
    doc = {**json.loads(config.dumps(tiny)), "schema_version": config.SCHEMA_VERSION + 1}
    assert _one_line(lambda: config.from_dict(config.Cascade, doc)) == (
        f"config.json: schema version {config.SCHEMA_VERSION + 1} is newer than "
        f"this nemo-cascade's ({config.SCHEMA_VERSION}); update nemo-cascade")
    stage = config.to_dict(tiny.stages[0])
    # only the cascade has one
    assert "unknown key(s) ['schema_version']" in _one_line(
        lambda: config.from_dict(config.Stage, {**stage, "schema_version": 1}))


# --------------------------------------------------------------------------------------- new fields

SNAPSHOT_VERSION = 13
SNAPSHOT = {  # every config field at schema version SNAPSHOT_VERSION
    "Cascade": "name model parallel stages run_root seed gate keep_checkpoints "
               "checkpoint_every_minutes chat_style wandb",
    "Model": "hf_path build dtype transformer_impl yarn_factor fp8",
    "Parallel": "tp pp dp cp micro_batch_size distributed_optimizer sequence_parallel recompute "
                "overlap_grad_reduce overlap_param_gather collective_timeout_minutes",
    "Stage": "name kind domain data steps epochs mode actor rollout grpo reward length_curriculum "
             "sft_batch_size sft_max_tokens rm_batch_size rm_max_tokens extra_data boundary "
             "distill checkpoint_every evaluate released_after",
    "Distill": "teachers reward_weight ratio_low ratio_high",
    "Data": "source size split seed max_bad_rows min_prompt_tokens repeat share keep_mode "
            "sft_turns swe_max_files swe_min_noisy_files swe_truth_only_share domain "
            "allow_eval_instructions cache math_instruction",
    "Actor": "lr min_lr lr_schedule warmup_steps lr_decay_steps weight_decay adam_beta1 "
             "adam_beta2 adam_eps clip_grad seed",
    "Rollout": "temperature top_p top_k max_prompt_tokens max_response_tokens stop kv_cache_gib "
               "gpu_memory_utilization tensor_parallel_size seed dtype compile",
    "GRPO": "group_size prompts_per_step adv_eps loss_aggregation clip_eps_low clip_eps_high "
            "kl_coef reward_shaping drop_zero_variance_groups overlong overlong_filter_stats "
            "refill_max_rounds epoch_filter readmit_unsolved readmit_solved sequence_packing "
            "pack_tokens share_prompts",
    "Reward": "code_switch_penalty code_switch_rule code_switch_script answer_pattern "
              "verify_timeout_s math_grader workers score_while_generating sandbox "
              "reward_model_url reward_model_stage judge_url judge_reasoning_tokens if_rm_bonus",
    "LengthPhase": "steps max_response_tokens overlong temperature until_clip_ratio",
    "Boundary": "optimizer data",
    "Gate": "suites samples max_tokens limit temperature top_p evaluate_base min_drop rule alpha "
            "sigmas tolerance on_regression repair mode yarn max_input_tokens chunk_items",
    "Repair": "steps lr reward_weight",
}


def _config_fields() -> dict[str, set[str]]:
    """Every config class reachable from Cascade, with its field names."""
    found, todo = {}, [config.Cascade]
    while todo:
        cls = todo.pop()
        if cls.__name__ in found:
            continue
        found[cls.__name__] = {f.name for f in fields(cls)}
        for tp in typing.get_type_hints(cls).values():
            todo += [arg for arg in (tp, *typing.get_args(tp)) if is_dataclass(arg)]
    return found


def _unregistered(now: dict[str, set[str]], snapshot: dict[str, str], snapshot_version: int,
                  added: dict[int, dict[str, tuple[str, ...]]], version: int) -> list[str]:
    """What a developer must fix for the config fields ``now`` to be versioned: each problem one
    line."""
    known = {cls: set(names.split()) for cls, names in snapshot.items()}
    problems = [] if snapshot_version == version else [
        f"SNAPSHOT is at schema version {snapshot_version} but SCHEMA_VERSION is {version}: add "
        f"FIELDS_ADDED[{snapshot_version + 1}..{version}]'s fields to SNAPSHOT and set "
        f"SNAPSHOT_VERSION = {version}"]
    later = {(cls, name) for v, classes in added.items() if v > snapshot_version
             for cls, names in classes.items() for name in names}
    for cls, names in sorted(now.items()):
        for name in sorted(names - known.get(cls, set())):
            if name not in NOT_HASHED and (cls, name) not in later:
                problems.append(
                    f"{cls}.{name}: a new config field that no schema version added: add it to "
                    f"FIELDS_ADDED[SCHEMA_VERSION + 1] in nemo_cascade/config/versions.py and bump "
                    f"SCHEMA_VERSION (or, if it changes nothing a stage trains, list it in "
                    f"lineage's ENDPOINTS / AFTER_TRAINING / PATIENCE / HOW_READ)")
    for v, classes in added.items():
        for cls, names in classes.items():
            for name in names:
                if name not in now.get(cls, set()):
                    problems.append(
                        f"FIELDS_ADDED[{v}] names {cls}.{name}, which is no config field")
                elif v <= snapshot_version and name not in known.get(cls, set()):
                    problems.append(
                        f"FIELDS_ADDED[{v}] gained {cls}.{name}: a version's fields never change "
                        f"(its manifests hash it); add it to FIELDS_ADDED[SCHEMA_VERSION + 1] and "
                        f"bump SCHEMA_VERSION")
    for cls, names in known.items():
        for name in sorted(names - now.get(cls, set())):
            problems.append(f"{cls}.{name}: removed from the config, which changes every stage "
                            "hash recorded with it")
    return problems


def test_every_config_field_belongs_to_a_schema_version():
    problems = _unregistered(_config_fields(), SNAPSHOT, SNAPSHOT_VERSION, config.FIELDS_ADDED,
                             config.SCHEMA_VERSION)
    assert not problems, "\n".join(problems)


def test_versions_are_numbered_from_two_and_name_each_field_once():
    assert sorted(config.FIELDS_ADDED) == list(range(2, config.SCHEMA_VERSION + 1))
    named = [(cls, name) for classes in config.FIELDS_ADDED.values()
             for cls, names in classes.items() for name in names]
    assert len(named) == len(set(named))
    # a left-out field needs no version
    assert not [name for _, name in named if name in NOT_HASHED]


def test_a_new_field_without_a_version_is_named_with_what_to_do():
    now = _config_fields()
    rollout = {**now, "Rollout": now["Rollout"] | {"prefix_caching"}}
    problems = _unregistered(rollout, SNAPSHOT, SNAPSHOT_VERSION, config.FIELDS_ADDED,
                             config.SCHEMA_VERSION)
    assert (len(problems) == 1
            and problems[0].startswith("Rollout.prefix_caching: a new config field"))
    assert ("add it to FIELDS_ADDED[SCHEMA_VERSION + 1]" in problems[0]
            and "bump SCHEMA_VERSION" in problems[0])
    # put into an existing version instead of a new one
    v = config.SCHEMA_VERSION
    newest = config.FIELDS_ADDED[v]
    sneaked = {**config.FIELDS_ADDED,
               v: {**newest, "Rollout": (*newest.get("Rollout", ()), "prefix_caching")}}
    problems = _unregistered(rollout, SNAPSHOT, SNAPSHOT_VERSION, sneaked, v)
    assert any(p.startswith(f"FIELDS_ADDED[{v}] gained Rollout.prefix_caching") for p in problems)
    # the right way: a new version, and the snapshot catches up
    bumped = {**config.FIELDS_ADDED, v + 1: {"Rollout": ("prefix_caching",)}}
    problems = _unregistered(rollout, SNAPSHOT, SNAPSHOT_VERSION, bumped, v + 1)
    assert len(problems) == 1 and problems[0].startswith(
        f"SNAPSHOT is at schema version {v} but SCHEMA_VERSION is {v + 1}")
    caught_up = {**SNAPSHOT, "Rollout": SNAPSHOT["Rollout"] + " prefix_caching"}
    assert _unregistered(rollout, caught_up, v + 1, bumped, v + 1) == []
    # a field that changes nothing a stage trains needs no version
    assert _unregistered({**now, "Cascade": now["Cascade"] | {"evaluate"}}, SNAPSHOT,
                         SNAPSHOT_VERSION, config.FIELDS_ADDED, config.SCHEMA_VERSION) == []
