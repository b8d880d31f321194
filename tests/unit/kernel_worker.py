"""Worker for test_tolerance.py: the tiny actor's numbers under the kernels this process's
environment allows.

Run: python tests/unit/kernel_worker.py MODEL_DIR OUT.json Writes the log-probs before training, two
GRPO steps' losses and grad norms, and the log-probs after them.
"""
import json
import sys

import torch

ROWS, LENGTH = 4, 24


def main():
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo

    model_dir, out = sys.argv[1], sys.argv[2]
    actor = MegatronActor(model_dir, config.Parallel(micro_batch_size=ROWS), seed=7)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (ROWS, LENGTH), generator=g)
    mask = torch.zeros(ROWS, LENGTH)
    mask[:, 6:] = 1.0
    batch = {"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(ROWS, generator=g)}
    initial = actor.logprobs(tokens, temperature=0.7)
    batch["old_logprobs"] = initial - 0.05  # ratio ≠ 1: the clipped objective's whole path

    def loss_fn(logprobs, mb):
        return grpo.policy_loss_terms(logprobs, mb["old_logprobs"], mb["advantages"],
                                      mb["loss_mask"], config.GRPO())

    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0), total_steps=2)
    steps = [actor.train_step(batch, loss_fn, temperature=0.7) for _ in range(2)]
    json.dump({"initial": initial.tolist(), "loss": [s.loss for s in steps],
               "grad_norm": [s.grad_norm for s in steps], "final": actor.logprobs(tokens).tolist()},
              open(out, "w"))


if __name__ == "__main__":
    main()
