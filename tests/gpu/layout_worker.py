"""torchrun worker for the 2-GPU layout tests: the TE actor (bf16) in one layout, 2 GRPO steps on
fixed rows.

Run: torchrun --nproc_per_node=2 tests/gpu/layout_worker.py MODEL_DIR OUT.json TP CP SP
DP fills the rest of the 2 ranks. Rows are 250 tokens (not a multiple of 2·cp or of tp): the actor
pads. Rank 0 writes the initial and final per-token log-probs and each step's loss and grad norm.
"""
import json
import sys

import torch


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    tp, cp, sp = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
    import torch.distributed as dist

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo

    parallel = config.Parallel(tp=tp, cp=cp, dp=2 // (tp * cp), sequence_parallel=sp,
                               micro_batch_size=2)
    actor = MegatronActor(model_dir, parallel, dtype="bfloat16", seed=7,
                          transformer_impl="transformer_engine")
    g = torch.Generator().manual_seed(0)
    n, length = 4, 250
    tokens = torch.randint(0, 512, (n, length), generator=g)
    mask = torch.zeros(n, length)
    for b in range(n):
        mask[b, 10 + 7 * b:length - 3 * b] = 1.0
    batch = {"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(n, generator=g)}
    initial = actor.logprobs(tokens, temperature=0.9)
    batch["old_logprobs"] = initial
    cfg = config.GRPO()

    def loss_fn(logprobs, mb):
        return grpo.policy_loss_terms(logprobs, mb["old_logprobs"], mb["advantages"],
                                      mb["loss_mask"], cfg)

    actor.configure_optimizer(config.Actor(lr=1e-4, clip_grad=1.0), total_steps=2)
    steps = [actor.train_step(batch, loss_fn, temperature=0.9) for _ in range(2)]
    final = actor.logprobs(tokens)
    if dist.get_rank() == 0:
        json.dump({"initial": initial.tolist(), "final": final.tolist(),
                   "loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
                   "tokens": [s.tokens for s in steps]}, open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
