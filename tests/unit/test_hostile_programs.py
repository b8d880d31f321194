"""Every hostile program of the corpus (``hostile_programs.CORPUS``: fork and memory bombs, CPU
spin, sleepers, floods, non-UTF-8 output, a 10 MB program, huge argv, writes and reads outside the
work dir, symlink and hard-link escapes, TCP/UDP/DNS/unix-socket egress, killing the parent,
daemons) is contained when scored as code: it scores 0, ends within its wall clock, leaves no
process and changes no host file, and the same Scorer then still scores a correct program 1.

The corpus runs once per module, all programs at once (the sandbox's waits overlap; ~8 s on 2 loaded
cores); each attack is then its own test case so a failure names the attack and what escaped. The
witnesses are shown to work: the attacks that are safe to run unsandboxed do escape there, and the
memory watchdog is checked on its own with limits small enough for any machine.
"""
import pytest

from nemo_cascade.rewards.sandbox import Limits, run_python
from tests.unit.hostile_programs import CORPUS, run_corpus


@pytest.fixture(scope="module")
def corpus_run():
    return run_corpus()


@pytest.mark.parametrize("name", list(CORPUS))
def test_hostile_program_is_contained(corpus_run, name):
    verdicts, _ = corpus_run
    verdict = next(v for v in verdicts if v.name == name)
    assert verdict.contained, f"{name} ({CORPUS[name].escaped}): {verdict.problems}"


def test_controls_pass_and_the_trainer_carries_on(corpus_run):
    """A program printing the expected output scores 1 in the same concurrent run (the 0s above are
    not a broken harness), and after the whole corpus the same Scorer still tells right from
    wrong."""
    _, info = corpus_run
    assert info["controls"] == [1.0, 0.0]
    assert info["after"] == [1.0, 0.0]
    assert run_python("print(6 * 7)", limits=Limits(cpu_s=1, wall_s=20)).stdout == "42\n"


def test_witnesses_see_unsandboxed_escapes():
    """The same attacks without the sandbox: each one's witness fires (a canary changed, a host
    listener got a packet or a connection, a process outlived the run). Only attacks that touch
    nothing but this run's own canaries, listeners and tagged files run here; kill, fork and memory
    attacks never run unsandboxed."""
    expected = {"write_outside": "canary", "read_secrets": "scored 1.0",
                "udp_egress": "UDP listener", "unix_socket": "unix listener",
                "daemon_detached": "outlived the run"}
    assert sorted(expected) == sorted(n for n, a in CORPUS.items() if a.safe_unsandboxed)
    verdicts, info = run_corpus(list(expected), unsafe=True)
    for verdict in verdicts:
        assert any(expected[verdict.name] in p for p in verdict.problems), \
            (verdict.name, verdict.problems)
    assert info["after"] == [1.0, 0.0]


FORKED_HOLD = """\
import os, time
held = 0
for _ in range({children}):
    r, w = os.pipe()
    if os.fork() == 0:
        block = bytearray({mb} << 20)  # zero-filled: every page touched
        os.write(w, b'1')
        time.sleep(60)
        os._exit(0)
    os.close(w)
    held += os.read(r, 1) == b'1'
print(held, flush=True)
time.sleep({hold})  # the parent stays, as a real bomb would: a run that ends at once races the \
watchdog's sampling
"""


def test_memory_watchdog_bounds_forked_children_together():
    """Address-space rlimits are per process: six forked children of 64 MB each would hold 384 MB
    under a 256 MB limit. The watchdog (the sandbox's total PSS) kills the run; three children of 32
    MB, whose copy-on-write pages shared with the parent count once, are left alone."""
    limits = Limits(cpu_s=5, wall_s=60, memory_bytes=256 << 20)
    bomb = run_python(FORKED_HOLD.format(children=6, mb=64, hold=10), limits=limits)
    assert bomb.killed == "memory_limit", bomb
    small = run_python(FORKED_HOLD.format(children=3, mb=32, hold=0.5)
                       .replace("time.sleep(60)", "time.sleep(0.5)"), limits=limits)
    assert small.ok and small.stdout == "3\n", small
