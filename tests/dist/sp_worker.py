"""torchrun worker for the sequence-parallel test: the same work at TP=2 with and without sequence
parallelism.

Run: torchrun --nproc_per_node=2 tests/dist/sp_worker.py MODEL_DIR OUT.json
For each of sequence_parallel False / True (in that order, in one process), rank 0 records:
- policy: initial per-token log-probs, 3 GRPO steps (loss, grad norm), final log-probs — on rows of
  odd length (23), so SP's padding to a multiple of TP is exercised;
- packed SFT: one train step on packed rows (block-diagonal attention mask through the SP path);
- reward model: scores, then 2 Bradley–Terry steps (its head is not Megatron's LM head and
  needs the gather).
"""
import json
import sys

import torch


def policy_run(model_dir, parallel):
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo, packing, sft

    # TE's SP: tests/gpu
    actor = MegatronActor(model_dir, parallel, seed=7, transformer_impl="local")
    norms = [n for n, p in actor.model.named_parameters() if getattr(p, "sequence_parallel", False)]
    g = torch.Generator().manual_seed(0)
    n, length = 6, 23
    tokens = torch.randint(0, 256, (n, length), generator=g)
    mask = torch.zeros(n, length)
    for b in range(n):
        mask[b, 4 + b:length - b] = 1.0
    batch = {"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(n, generator=g)}
    cfg = config.GRPO()
    initial = actor.logprobs(tokens, temperature=0.7)
    batch["old_logprobs"] = initial

    def loss_fn(logprobs, mb):
        return grpo.policy_loss_terms(logprobs, mb["old_logprobs"], mb["advantages"],
                                      mb["loss_mask"], cfg)

    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0), total_steps=4)
    steps = [actor.train_step(batch, loss_fn, temperature=0.7) for _ in range(3)]
    final = actor.logprobs(tokens)
    examples = [(torch.randint(1, 256, (3 + i,), generator=g).tolist(),
                 torch.randint(1, 256, (5 + 2 * i,), generator=g).tolist()) for i in range(5)]
    # rows of 8+11, 14, 17, 19 (cut)
    packed = packing.pack_sft_batch(examples, max_tokens=19, pad_id=0)
    sft_step = actor.train_step(packed.tensors(),
                                lambda lp, mb: (*sft.sft_loss_terms(lp, mb["loss_mask"]), {}))
    return {"sp_params": norms, "initial": initial.tolist(), "final": final.tolist(),
            "loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
            "sft_loss": sft_step.loss, "sft_grad_norm": sft_step.grad_norm,
            "sft_T": packed.tokens_B_T.shape[1]}


def reward_model_run(model_dir, parallel):
    from nemo_cascade import config
    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.algorithms.reward_model import bt_loss_terms, make_pair_batch

    # local spec on CPU ("auto" takes TE only with CUDA)
    actor = RewardModelActor(model_dir, parallel, seed=7)
    g = torch.Generator().manual_seed(1)
    pairs = [(torch.randint(1, 256, (7 + 2 * i,), generator=g).tolist(),
              torch.randint(1, 256, (15 - i,), generator=g).tolist()) for i in range(4)]
    batch = make_pair_batch(pairs, max_tokens=15, pad_id=0)
    scores = actor.scores(batch.tokens_B_T, batch.last_B)
    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0, adam_eps=1e-4), total_steps=2)
    steps = [actor.train_step(batch.tensors(),
                              lambda s, mb: bt_loss_terms(s, mb["last"], mb["pair_valid"]))
             for _ in range(2)]
    return {"scores": scores.tolist(), "loss": [s.loss for s in steps],
            "grad_norm": [s.grad_norm for s in steps]}


def main():
    model_dir, out = sys.argv[1], sys.argv[2]
    import torch.distributed as dist

    from nemo_cascade import config

    result = {}
    for sp in (False, True):
        parallel = config.Parallel(tp=2, micro_batch_size=2, sequence_parallel=sp)
        result[f"sp={sp}"] = {"policy": policy_run(model_dir, parallel),
                              "rm": reward_model_run(model_dir, parallel)}
    if dist.get_rank() == 0:
        json.dump(result, open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
