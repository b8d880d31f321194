"""torchrun worker for the reward-model tests: a Bradley–Terry actor trained 3 steps on fixed pairs, its
scores, and its HF export, in one parallel layout.

Run: torchrun --nproc_per_node=N tests/dist/rm_worker.py MODEL_DIR OUT_DIR TP PP
Writes OUT_DIR/rm (the exported *ForSequenceClassification folder) and, on rank 0, OUT_DIR/result.json with
per-step losses / grad norms / metrics, the scores before and after training of fixed evaluation sequences,
and those sequences.
"""
import json
import sys
from pathlib import Path

import torch


def main():
    model_dir, out, tp, pp = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    import torch.distributed as dist

    from nemo_cascade import config as C
    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.algorithms.reward_model import bt_loss_terms, make_pair_batch
    from nemo_cascade.convert.arch import read_hf_config, reward_model_config
    from nemo_cascade.convert.export import export_hf

    pad = 0
    vocab = read_hf_config(model_dir).vocab_size
    actor = RewardModelActor(model_dir, C.Parallel(tp=tp, pp=pp, micro_batch_size=2), seed=7)
    g = torch.Generator().manual_seed(0)

    def seq(n):  # no pad id inside a sequence: transformers reads the score at the last non-pad token
        return torch.randint(1, vocab, (n,), generator=g).tolist()

    # 5 pairs of different lengths: with micro_batch_size 2 each microbatch is one pair, and DP/PP padding
    # adds empty rows that must not count.
    pairs = [(seq(6 + 3 * i), seq(20 - 2 * i)) for i in range(5)]
    batch = make_pair_batch(pairs, max_tokens=18, pad_id=pad)  # the 20-token one keeps its last 18
    eval_rows = [seq(n) for n in (3, 11, 24, 7, 16, 1)]
    ev = make_pair_batch([(eval_rows[i], eval_rows[i + 1]) for i in range(0, 6, 2)], max_tokens=64, pad_id=pad)

    initial = actor.scores(ev.tokens_B_T, ev.last_B)

    def loss_fn(scores_B_T, mb):
        return bt_loss_terms(scores_B_T, mb["last"], mb["pair_valid"])

    # adam_eps well above float noise: Adam's first steps move every weight by ~lr·sign(g), so a weight whose
    # gradient is 0 up to rounding (which differs between layouts) would otherwise move by ±lr at random.
    actor.configure_optimizer(C.Actor(lr=1e-3, clip_grad=1.0, adam_eps=1e-4), total_steps=3)
    steps = [actor.train_step(batch.tensors(), loss_fn) for _ in range(3)]
    final = actor.scores(ev.tokens_B_T, ev.last_B)
    export_hf(actor, out / "rm", model_dir, config_fn=lambda c: reward_model_config(c, pad))
    if dist.get_rank() == 0:
        json.dump({"loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
                   "pairs": [s.tokens for s in steps], "accuracy": [s.metrics["accuracy"] for s in steps],
                   "margin": [s.metrics["margin"] for s in steps], "truncated": batch.num_truncated,
                   "initial_scores": initial.tolist(), "final_scores": final.tolist(), "eval_rows": eval_rows},
                  open(out / "result.json", "w"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
