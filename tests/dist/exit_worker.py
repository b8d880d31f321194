"""One gloo rank that gathers Python objects, tears its group down and ends as ``nemo-cascade`` does
(process_exit.py); ``plain`` ends it by the interpreter's own exit instead, the abort's window.

Run by tests/dist/test_process_exit.py:
``RANK=r WORLD_SIZE=2 MASTER_ADDR=... MASTER_PORT=... python exit_worker.py [plain]``.
"""
import sys


def gather_and_leave() -> int:
    import torch.distributed as dist

    from nemo_cascade.runtime import ranks

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for i in range(30):  # all_gather_object: byte tensors made in Python, freed by gloo's thread
        ranks.gather_objects({"round": i, "pad": "x" * 4000})
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} done")  # not flushed: the end must keep it
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["plain"]:
        sys.exit(gather_and_leave())
    from nemo_cascade.runtime import process_exit

    process_exit.run_and_exit(gather_and_leave)
