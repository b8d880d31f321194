"""Progress on the console (console.progress): a bar on a terminal; in a file (a Slurm log) whole
lines, one per interval and one at the end, with the rate, the time left and the latest metrics,
instead of a bar's carriage-return redraws."""
from __future__ import annotations

import io

from nemo_cascade.runtime import console


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_file_gets_one_plain_line_per_interval_and_one_at_the_end():
    out, clock = io.StringIO(), Clock()
    bar = console.PlainProgress(10, "math", "step", initial=2, file=out, every=60.0, clock=clock)
    for _ in range(3):  # 20 s a step: a line once a minute has passed
        clock.now += 20.0
        bar.update()
    bar.set_postfix({"reward": "0.25", "len": "19"})
    clock.now += 20.0
    bar.update()
    bar.close()
    bar.close()  # once
    assert out.getvalue().splitlines() == [
        "math: 5/10 steps, 20.0 s/step, ~2 min left",
        "math: 6/10 steps, 20.0 s/step, ~80 s left, reward=0.25, len=19",
    ]
    assert "\r" not in out.getvalue()


def test_fast_work_is_shown_per_second_and_long_work_in_hours():
    out, clock = io.StringIO(), Clock()
    bar = console.PlainProgress(100_000, "ifeval K=4", "item", file=out, every=30.0, clock=clock)
    clock.now = 40.0
    bar.update(400)
    clock.now = 80.0
    bar.update(1)  # not yet 30 s since the last line... but 40 s: a line
    unknown = console.PlainProgress(None, "tokenizing part-0", "row", file=out, every=5.0,
                                    clock=clock)
    clock.now += 10.0
    unknown.update(5000)
    lines = out.getvalue().splitlines()
    assert lines[0] == "ifeval K=4: 400/100000 items, 10.0 items/s, ~2 h 46 min left"
    assert lines[1].startswith("ifeval K=4: 401/100000 items, 5.0 items/s")
    assert lines[2] == "tokenizing part-0: 5000 rows, 500.0 rows/s"


def test_a_terminal_keeps_the_bar_and_disabled_progress_shows_nothing(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(console, "stream", lambda: Terminal())
    bar = console.progress(3, "sft", "step")
    assert type(bar).__name__ == "tqdm"
    bar.close()
    monkeypatch.setattr(console, "stream", lambda: io.StringIO())
    assert isinstance(console.progress(3, "sft", "step"), console.PlainProgress)
    silent = console.progress(3, "sft", "step", disable=True)
    silent.update()
    silent.set_postfix({"loss": "1"})
    silent.close()
    monkeypatch.setenv(console.PROGRESS_SECONDS, "5")
    assert console.progress(3, "sft", "step").every == 5.0
