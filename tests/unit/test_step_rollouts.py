"""Rollout checkpoints (runtime/step_rollouts.py): a step's groups written as they finish, read back
exactly, and every kind of file that does not belong set aside with a log line instead of mixing
into the batch."""
import json
import logging
import time

import pytest

from nemo_cascade.runtime.step_rollouts import StepRollouts
from nemo_cascade.types import Prompt, PromptGroup

G = 2


def prompts(n=4, shift=0):
    return [Prompt([1 + k + shift, 2, 3], "math", str(k), uid=f"p{k}") for k in range(n)]


def scored(prompt, k, rewards=True):
    return PromptGroup(prompt, [[k, 7, 8], [k]], [[-0.1 * k, -1 / 3, -2e-9], [-0.7]],
                       ["stop", "length"], [f"answer {k} ✓", ""], [1.0, 0.0] if rewards else [],
                       [{"ok": True}, {"ok": False}] if rewards else [])


def same(a: PromptGroup, b: PromptGroup) -> bool:
    return (a.prompt is b.prompt and a.response_tokens_G_T == b.response_tokens_G_T
            and a.rollout_logprobs_G_T == b.rollout_logprobs_G_T
            and a.finish_reason_G == b.finish_reason_G and a.response_text_G == b.response_text_G
            and a.rewards_G == b.rewards_G and a.reward_details_G == b.reward_details_G)


def test_groups_written_as_they_finish_read_back_bit_for_bit(tmp_path):
    ps = prompts()
    saver = StepRollouts(tmp_path, "cfg/seed1", flush_seconds=0)
    assert saver.saved(3, 0, ps, G) == {}
    saver.keep(2, scored(ps[2], 2))
    saver.keep(0, scored(ps[0], 0))
    assert len(list((tmp_path / "step_000003").glob("*.jsonl"))) == 2, (
        "flush_seconds=0: one part per group")
    back = StepRollouts(tmp_path, "cfg/seed1", 0).saved(3, 0, ps, G)
    assert (sorted(back) == [0, 2] and same(back[2], scored(ps[2], 2))
            and same(back[0], scored(ps[0], 0)))
    assert back[2].rollout_logprobs_G_T[0][1] == -1 / 3, "floats round-trip exactly"


def test_groups_wait_for_the_flush_interval_and_a_round_end_writes_them_all(tmp_path):
    ps = prompts()
    saver = StepRollouts(tmp_path, "x", flush_seconds=3600)
    saver.saved(0, 1, ps, G)
    saver.keep(1, scored(ps[1], 1))
    assert not (tmp_path / "step_000000").exists(), "within the interval nothing is written"
    saver.flush()  # a stop
    assert sorted(StepRollouts(tmp_path, "x", 0).saved(0, 1, ps, G)) == [1]
    saver.end_round({k: scored(p, k) for k, p in enumerate(ps)})
    assert sorted(StepRollouts(tmp_path, "x", 0).saved(0, 1, ps, G)) == [0, 1, 2, 3]
    assert StepRollouts(tmp_path, "x", 0).saved(0, 0, ps, G) == {}, (
        "another round's groups are its own")


def test_an_unscored_group_is_written_again_once_scored(tmp_path):
    ps = prompts(2)
    saver = StepRollouts(tmp_path, "x", 0)
    saver.saved(5, 0, ps, G)
    first = scored(ps[0], 0, rewards=False)
    saver.keep(0, first)
    assert StepRollouts(tmp_path, "x", 0).saved(5, 0, ps, G)[0].rewards_G == []
    first.rewards_G, first.reward_details_G = [1.0, 0.0], [{"ok": True}, {"ok": False}]
    saver.end_round({0: first, 1: scored(ps[1], 1)})
    back = StepRollouts(tmp_path, "x", 0).saved(5, 0, ps, G)
    assert same(back[0], scored(ps[0], 0)) and same(back[1], scored(ps[1], 1))


def _one_part(tmp_path, identity="x", step=2):
    ps = prompts()
    saver = StepRollouts(tmp_path, identity, 0)
    saver.saved(step, 0, ps, G)
    saver.keep(1, scored(ps[1], 1))
    (part,) = (tmp_path / f"step_{step:06d}").glob("*.jsonl")
    return ps, part


@pytest.mark.parametrize("damage, why", [
    (lambda text: text[:-20], "damaged: its groups do not match the sha256"),
    (lambda text: "{not json\n" + text, "Expecting property name"),
    (lambda text: "", "Expecting value"),
])
def test_a_damaged_part_is_set_aside_with_one_log_line(tmp_path, caplog, damage, why):
    ps, part = _one_part(tmp_path)
    part.write_text(damage(part.read_text()))
    with caplog.at_level(logging.WARNING):
        assert StepRollouts(tmp_path, "x", 0).saved(2, 0, ps, G) == {}
    (line,) = [r.getMessage() for r in caplog.records]
    assert (line.startswith(f"rollouts: not using {part}: ") and why in line
            and line.endswith("generated again"))
    assert (not part.exists()
            and part.with_name(part.name + ".unused").exists()), "kept for a look, never read"


def test_parts_of_another_config_seed_step_or_data_order_are_not_used(tmp_path, caplog):
    ps, part = _one_part(tmp_path, identity="cfgA/seed1")
    with caplog.at_level(logging.WARNING):
        assert StepRollouts(tmp_path, "cfgA/seed2", 0).saved(2, 0, ps, G) == {}
    assert ("written with identity='cfgA/seed1', this run has 'cfgA/seed2'"
            in caplog.records[-1].getMessage())

    ps, part = _one_part(tmp_path / "b")
    (tmp_path / "b/step_000002").rename(tmp_path / "b/step_000004")  # a folder renamed by hand
    with caplog.at_level(logging.WARNING):
        assert StepRollouts(tmp_path / "b", "x", 0).saved(4, 0, ps, G) == {}
    assert "written with step=2, this run has 4" in caplog.records[-1].getMessage()

    ps, part = _one_part(tmp_path / "c")
    with caplog.at_level(logging.WARNING):  # the same place now holds another prompt
        assert StepRollouts(tmp_path / "c", "x", 0).saved(2, 0, prompts(shift=1), G) == {}
    assert ("group 1 ('p1') is not the prompt at that place of this round"
            in caplog.records[-1].getMessage())


def test_resume_keeps_only_the_step_it_resumes_at_and_a_checkpoint_removes_the_rest(tmp_path):
    for step in (3, 4, 5):
        _one_part(tmp_path, step=step)
    saver = StepRollouts(tmp_path, "x", 0)
    # the checkpoint after step 3: step 5's groups came from weights to be computed again
    saver.begin(4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000004"]
    saver.remove_through(4)
    assert list(tmp_path.iterdir()) == []


def test_parts_are_whole_json_lines_with_a_header(tmp_path):
    _, part = _one_part(tmp_path)
    header, *rows = part.read_text().splitlines()
    head = json.loads(header)
    assert ({k: head[k] for k in ("format", "step", "round", "rank", "world", "identity", "groups")}
            == {"format": 1, "step": 2, "round": 0, "rank": 0, "world": 1, "identity": "x",
                "groups": 1})
    assert [json.loads(r)["index"] for r in rows] == [1]
    assert not list(part.parent.glob(".*")), "no temporary file is left"
    assert time.time() - part.stat().st_mtime < 60


def test_a_gate_chunk_of_another_model_or_settings_is_evaluated_again(tmp_path, caplog):
    """evaluate/row_progress.py: a chunk's groups name the model's weight files and the suite's
    settings."""
    from nemo_cascade.evaluate.row_progress import RowProgress

    model, other = tmp_path / "model", tmp_path / "other"
    for folder, data in ((model, b"a"), (other, b"b")):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(data)
    ps = prompts(2)
    row = tmp_path / "row"
    store = RowProgress(row, model, 0).chunks("gsm8k", {"t": 0.6})
    store.saved(64, 0, ps, G)
    store.keep(1, scored(ps[1], 1))
    back = RowProgress(row, model, 0).chunks("gsm8k", {"t": 0.6}).saved(64, 0, ps, G)
    assert list(back) == [1] and same(back[1], scored(ps[1], 1))
    with caplog.at_level(logging.WARNING):
        assert RowProgress(row, model, 0).chunks("gsm8k", {"t": 0.7}).saved(64, 0, ps, G) == {}
    assert "written with identity=" in caplog.records[-1].getMessage()
    store = RowProgress(row, model, 0).chunks("gsm8k", {"t": 0.6})
    store.saved(64, 0, ps, G)
    store.keep(1, scored(ps[1], 1))
    with caplog.at_level(logging.WARNING):
        assert RowProgress(row, other, 0).chunks("gsm8k", {"t": 0.6}).saved(64, 0, ps, G) == {}
    RowProgress(row, model).save_suite("gsm8k", {"t": 0.6}, {"metrics": {"avg@1": 0.5}})
    assert RowProgress(row, model).suite("gsm8k", {"t": 0.6}) == {"metrics": {"avg@1": 0.5}}
    assert RowProgress(row, other).suite("gsm8k", {"t": 0.6}) is None
    (row / "eval_partial/gsm8k.json").write_text("{trunc")
    assert RowProgress(row, model).suite("gsm8k", {"t": 0.6}) is None
    RowProgress(row, model).remove()
    assert not (row / "eval_partial").exists()


def test_a_group_waits_at_most_the_flush_interval_even_when_no_other_group_comes(tmp_path):
    ps = prompts(2)
    saver = StepRollouts(tmp_path, "x", flush_seconds=1.0)
    saver.saved(1, 0, ps, G)
    saver.keep(0, scored(ps[0], 0))  # within the interval of the round's start: it waits
    parts = tmp_path / "step_000001"
    assert not parts.exists()
    # the part itself, not its folder: the folder is made before the part is renamed into it
    deadline = time.monotonic() + 10
    while not list(parts.glob("*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(StepRollouts(tmp_path, "x", 0).saved(1, 0, ps, G)) == [0], "the timer wrote it"


def test_a_failed_write_on_a_scoring_thread_is_met_again_by_the_rounds_end(tmp_path, monkeypatch):
    """A scoring thread's write that fails (a full disk) raises nothing there, where it would only
    be logged; its groups stay pending, and the round's end, on the main thread, writes them again
    or raises what it meets."""
    import errno

    from nemo_cascade.runtime import step_rollouts

    ps = prompts(2)
    saver = StepRollouts(tmp_path, "x", 0)
    saver.saved(0, 0, ps, G)
    write = step_rollouts.write_part

    def full(*_args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(step_rollouts, "write_part", full)
    saver.keep(0, scored(ps[0], 0))  # as a scoring thread's callback: no exception
    with pytest.raises(OSError, match="No space left"):
        saver.end_round({1: scored(ps[1], 1)})
    monkeypatch.setattr(step_rollouts, "write_part", write)  # space again
    saver.end_round({1: scored(ps[1], 1)})
    assert sorted(StepRollouts(tmp_path, "x", 0).saved(0, 0, ps, G)) == [0, 1]
