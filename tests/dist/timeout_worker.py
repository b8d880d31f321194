"""torchrun worker for the collective-timeout test (2 gloo processes, no model).

Run: torchrun --nproc_per_node=2 tests/dist/timeout_worker.py OUT.json ``init_distributed(7)`` must
give the default group a 7-minute timeout and reuse it (gloo) for object exchanges; the object group
a GPU run gets (a separate gloo group, made when the default backend is not gloo) must carry the
same timeout and exchange objects; ``ranks``' helpers must work over either.
"""
import json
import sys


def timeout_of(group):
    import torch
    import torch.distributed as dist

    pg = group or dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device("cpu")).options._timeout.total_seconds()


def main():
    out = sys.argv[1]
    import torch.distributed as dist

    from nemo_cascade.runtime import ranks
    from nemo_cascade.actor.process_groups import init_distributed

    init_distributed(7)
    from megatron.core import parallel_state as ps

    from nemo_cascade import config
    from nemo_cascade.actor.process_groups import init_model_parallel

    init_model_parallel(config.Parallel(tp=2, collective_timeout_minutes=7))
    megatron_groups = {
        "tp": ps.get_tensor_model_parallel_group(), "dp": ps.get_data_parallel_group(),
        "dp_gloo": ps.get_data_parallel_group_gloo()}
    rank = dist.get_rank()
    result = {
        "rank": rank, "default_timeout": timeout_of(None), "cpu_object_group": ranks.object_group(),
        "shares": ranks.gather_shares([rank] * (rank + 1)),
        "most": ranks.most_over_ranks(10 + rank), "from_main": ranks.from_main(f"url-of-{rank}"),
        "megatron_timeouts": {name: timeout_of(g) for name, g in megatron_groups.items()}}
    ranks.barrier()
    # The GPU branch, for real: a default group that is not gloo gets a gloo group of its own.
    real = dist.get_backend
    dist.get_backend = lambda group=None: "nccl"
    ranks.init_object_group(ranks.collective_timeout())
    dist.get_backend = real
    group = ranks.object_group()
    result.update(own_group=group is not None, own_timeout=timeout_of(group),
                  own_backend=dist.get_backend(group), own_shares=ranks.gather_shares([f"r{rank}"]))
    ranks.barrier()
    results = ranks.gather_objects(result)
    if rank == 0:
        json.dump(results, open(out, "w"))
    # no rank tears the groups down while another still uses them (gloo aborts at exit otherwise)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
