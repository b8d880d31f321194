"""torchrun worker for the resume tests: train K steps, save, train M more; a fresh actor loads and
trains M.

Run: torchrun --nproc_per_node=N tests/dist/resume_worker.py MODEL_DIR OUT_DIR TP PP Rank 0 writes
OUT_DIR/result.json: per rank the parameters that differ between the uninterrupted and the resumed
run (must be none), the LRs, the checkpoint's files and sizes, and the error every rank raised when
loading after one rank's file was corrupted.
"""
import json
import sys
import time
from pathlib import Path

import torch

K, M = 3, 3


def make_batches():
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(K + M):
        tokens = torch.randint(0, 200, (6, 20), generator=g)
        mask = torch.zeros(6, 20)
        for b in range(6):
            mask[b, 3 + b:] = 1.0
        out.append({"tokens": tokens, "loss_mask": mask})
    return out


def main():
    model_dir, out, tp, pp = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    import torch.distributed as dist

    from nemo_cascade import checkpoint as ckpt
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import sft
    from nemo_cascade.convert.export import export_hf

    def loss_fn(logprobs, mb):
        num, den = sft.sft_loss_terms(logprobs, mb["loss_mask"])
        return num, den, {}

    cfg = config.Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=2, weight_decay=0.1,
                       clip_grad=1.0)
    # distributed optimizer: the default
    parallel = config.Parallel(tp=tp, pp=pp, micro_batch_size=1)
    batches, root = make_batches(), out / "ckpt"

    def fresh():
        actor = MegatronActor(model_dir, parallel, seed=7)
        actor.configure_optimizer(cfg, total_steps=K + M)
        return actor

    a = fresh()
    for b in batches[:K]:
        a.train_step(b, loss_fn)
    t0 = time.perf_counter()
    path = ckpt.save(root, K, a, {"position": K})
    save_s = time.perf_counter() - t0
    # The actor's own HF export of the saved weights: the offline converter must reproduce it from
    # the shards.
    export_hf(a, out / "hf_at_save", model_dir)
    for b in batches[K:]:
        a.train_step(b, loss_fn)
    want = {n: p.detach().clone() for n, p in a.model.named_parameters()}

    b_actor = fresh()
    t0 = time.perf_counter()
    step, state = ckpt.load(ckpt.latest(root), b_actor)
    load_s = time.perf_counter() - t0
    for b in batches[K:]:
        b_actor.train_step(b, loss_fn)
    differ = [n for n, p in b_actor.model.named_parameters() if not torch.equal(p, want[n])]

    # One rank's file corrupted: every rank must raise the same one-line error, none may hang.
    victim = path / f"train_rank{dist.get_world_size() - 1:05d}.pt"
    dist.barrier()
    if dist.get_rank() == dist.get_world_size() - 1:
        data = bytearray(victim.read_bytes())
        data[100] ^= 0xFF
        victim.write_bytes(bytes(data))
    dist.barrier()
    try:
        ckpt.load(path, b_actor)
        error = None
    except ckpt.CheckpointError as e:
        error = str(e)

    mine = {"rank": dist.get_rank(), "differ": differ, "num_params": len(want), "error": error,
            "lr": [a.optimizer.param_groups[0]["lr"], b_actor.optimizer.param_groups[0]["lr"]],
            "save_s": save_s, "load_s": load_s}
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    if dist.get_rank() == 0:
        files = {p.name: p.stat().st_size for p in sorted(path.iterdir())}
        json.dump({"step": step, "state": state, "ranks": gathered, "files": files},
                  open(out / "result.json", "w"), indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
