"""torchrun worker for the parallel-parity tests: 3 training steps on a fixed batch, one parallel
layout.

Run: torchrun --nproc_per_node=N tests/dist/parity_worker.py MODEL_DIR OUT.json TP PP
Rank 0 writes per-step losses and grad norms, the initial log-probs, and whether the weights
exported back to HF names equal the checkpoint bit for bit.
"""
import json
import sys

import torch


def main():
    model_dir, out, tp, pp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import torch.distributed as dist

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo
    from nemo_cascade.convert.hf_io import SafetensorsReader

    actor = MegatronActor(model_dir, config.Parallel(tp=tp, pp=pp, micro_batch_size=2), seed=7)
    reader = SafetensorsReader(model_dir)
    # the whole model in one bucket per pipeline stage, and every tensor in a bucket of its own
    exports = [dict(actor.iter_hf_weights(bucket_bytes=b)) for b in (1 << 40, 1)]
    roundtrip = all(sorted(exported) == sorted(reader.names()) and all(
        torch.equal(exported[n], reader.get(n)) for n in reader.names()) for exported in exports)

    g = torch.Generator().manual_seed(0)
    n, length = 6, 24
    tokens = torch.randint(0, 256, (n, length), generator=g)
    mask = torch.zeros(n, length)
    for b in range(n):  # prompts of different lengths, responses to the end of the row
        mask[b, 4 + b:length - b] = 1.0
    batch = {"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(n, generator=g)}
    cfg = config.GRPO()

    initial_logprobs = actor.logprobs(tokens, temperature=0.7)
    shared, plain = shared_prompt_logprobs(actor, tokens)
    # ratio ≠ 1 from step 2 on, so the clipped path is exercised
    batch["old_logprobs"] = initial_logprobs

    def loss_fn(logprobs, mb):
        return grpo.policy_loss_terms(logprobs, mb["old_logprobs"], mb["advantages"],
                                      mb["loss_mask"], cfg)

    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0), total_steps=3)
    steps = [actor.train_step(batch, loss_fn, temperature=0.7) for _ in range(3)]
    final_logprobs = actor.logprobs(tokens)
    if dist.get_rank() == 0:
        json.dump({"loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
                   "tokens": [s.tokens for s in steps], "roundtrip": roundtrip,
                   "initial_logprobs": initial_logprobs.tolist(),
                   "final_logprobs": final_logprobs.tolist(),
                   "shared_prompt_logprobs": shared, "plain_logprobs": plain},
                  open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()


def shared_prompt_logprobs(actor, tokens):
    """The trained tokens' log-probs of two groups laid out sharing their prompts
    (GRPO.share_prompts: RoPE at positions, per-sample masks, on every shard and stage) and one
    sequence per row, each sorted."""
    from nemo_cascade import config
    from nemo_cascade.algorithms import grpo
    from nemo_cascade.types import Prompt, PromptGroup

    groups = [PromptGroup(Prompt(prompt_tokens=row[:5 + k].tolist(), domain="math", label="1"),
                          [tokens[k + 2 + i, :3 + 2 * i].tolist() for i in range(3)],
                          [[-1.0] * (3 + 2 * i) for i in range(3)], ["stop"] * 3,
                          rewards_G=[1.0, 0.0, 0.5])
              for k, row in enumerate(tokens[:2])]
    out = []
    for cfg in (config.GRPO(), config.GRPO(sequence_packing=False)):
        batch = grpo.make_batch(groups, cfg, pad_id=0)
        lp = actor.logprobs(batch.tokens_B_T, 0.7, batch.layout())
        out.append(lp[batch.loss_mask_B_T > 0].sort().values.tolist())
    return out


if __name__ == "__main__":
    main()
