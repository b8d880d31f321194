"""torchrun worker for the stall test (2 gloo processes, no model).

Run: python -m nemo_cascade.tooling.torchrun --nproc_per_node=2 tests/dist/stall_worker.py RUN_DIR
with ``NEMO_CASCADE_STALL_AT=generate@1``: rank 1 hangs as it starts generating; rank 0 generates,
then waits for rank 1 in the scoring exchange (a gloo barrier, with a collective timeout far beyond
the test). Both watchdogs must stop: rank 1 stalled, rank 0 waiting for it."""
import sys
import time
from pathlib import Path


def main():
    run_dir = Path(sys.argv[1])
    from nemo_cascade.runtime import heartbeat, ranks
    from nemo_cascade.actor.process_groups import init_distributed
    from nemo_cascade.cascade.metrics import PhaseTimer

    init_distributed(30)
    rank = ranks.world()[0]
    ranks.barrier()  # both start their phases together
    with heartbeat.watching(run_dir, rank, stall_minutes=3 / 60):
        heartbeat.where("stage math, step 1 of 2")
        timer = PhaseTimer()
        with timer("generate"):
            time.sleep(1.0)  # rank 0's generation takes a second; rank 1's never returns
        with timer("score"):
            ranks.barrier()
    sys.exit(1)  # not reached: the watchdog ends the process


if __name__ == "__main__":
    main()
