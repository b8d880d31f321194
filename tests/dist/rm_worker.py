"""torchrun worker for the reward-model tests: a Bradley–Terry actor trained 3 steps on fixed pairs,
its scores, and its HF export, in one parallel layout.

Run: torchrun --nproc_per_node=N tests/dist/rm_worker.py MODEL_DIR OUT_DIR TP PP [MODE STYLE]
Writes OUT_DIR/rm (the exported *ForSequenceClassification folder, its chat template the RM
rendering of STYLE in MODE, default cascade1 / no_think) and, on rank 0, OUT_DIR/result.json with
per-step losses / grad norms / metrics, the scores before and after training of fixed evaluation
sequences, and those sequences. If OUT_DIR/conversations.json exists (a list of conversations, each
ending with an assistant turn), the trained actor also scores them as the RM stage reads its pairs
— ``data.preference.load_preference_pairs``, then the batch builder and the forward — into
``conversation_scores``.
"""
import json
import sys
from pathlib import Path

import torch


def main():
    model_dir, out, tp, pp = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    mode, style = sys.argv[5:7] if len(sys.argv) > 5 else ("no_think", "cascade1")
    import torch.distributed as dist

    from nemo_cascade import config
    from nemo_cascade.actor.reward_model import RewardModelActor
    from nemo_cascade.algorithms.reward_model import bt_loss_terms, make_pair_batch
    from nemo_cascade.convert.shape import read_hf_config
    from nemo_cascade.convert.export import export_reward_model
    from nemo_cascade.data.rm_input import rm_chat_template

    pad = 0
    vocab = read_hf_config(model_dir).vocab_size
    actor = RewardModelActor(model_dir, config.Parallel(tp=tp, pp=pp, micro_batch_size=2), seed=7)
    g = torch.Generator().manual_seed(0)

    # no pad id inside a sequence: transformers reads the score at the last non-pad token
    def seq(n):
        return torch.randint(1, vocab, (n,), generator=g).tolist()

    # 5 pairs of different lengths: with micro_batch_size 2 each microbatch is one pair, and DP/PP
    # padding adds empty rows that must not count.
    pairs = [(seq(6 + 3 * i), seq(20 - 2 * i)) for i in range(5)]
    batch = make_pair_batch(pairs, max_tokens=18, pad_id=pad)  # the 20-token one keeps its last 18
    eval_rows = [seq(n) for n in (3, 11, 24, 7, 16, 1)]
    ev = make_pair_batch([(eval_rows[i], eval_rows[i + 1]) for i in range(0, 6, 2)],
                         max_tokens=64, pad_id=pad)

    initial = actor.scores(ev.tokens_B_T, ev.last_B)

    def loss_fn(scores_B_T, mb):
        return bt_loss_terms(scores_B_T, mb["last"], mb["pair_valid"])

    # adam_eps well above float noise: Adam's first steps move every weight by ~lr·sign(g), so a
    # weight whose gradient is 0 up to rounding (which differs between layouts) would otherwise move
    # by ±lr at random.
    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0, adam_eps=1e-4), total_steps=3)
    steps = [actor.train_step(batch.tensors(), loss_fn) for _ in range(3)]
    final = actor.scores(ev.tokens_B_T, ev.last_B)
    conversation_scores = _conversation_scores(actor, model_dir, out, mode, style, pad)
    export_reward_model(actor, out / "rm", model_dir, pad, rm_chat_template(mode, style))
    if dist.get_rank() == 0:
        json.dump({"loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
                   "pairs": [s.tokens for s in steps],
                   "accuracy": [s.metrics["accuracy"] for s in steps],
                   "margin": [s.metrics["margin"] for s in steps], "truncated": batch.num_truncated,
                   "initial_scores": initial.tolist(), "final_scores": final.tolist(),
                   "eval_rows": eval_rows, "conversation_scores": conversation_scores},
                  open(out / "result.json", "w"))
    dist.barrier()
    dist.destroy_process_group()


def _conversation_scores(actor, model_dir, out, mode, style, pad):
    """The actor's scores of OUT_DIR/conversations.json read as preference rows (each conversation's
    last turn the chosen response, a fixed rejected one), through the RM stage's own loading and
    batching; None without the file."""
    path = out / "conversations.json"
    if not path.is_file():
        return None
    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.algorithms.reward_model import make_pair_batch
    from nemo_cascade.data.preference import load_preference_pairs

    import torch.distributed as dist

    rows = out / f"conversation_pairs.rank{dist.get_rank()}.jsonl"
    rows.write_text("".join(
        json.dumps({"prompt": c[:-1], "chosen": c[-1]["content"], "rejected": "\x00"}) + "\n"
        for c in json.loads(path.read_text())))
    pairs = load_preference_pairs(config.Data(source=str(rows)),
                                  AutoTokenizer.from_pretrained(model_dir), mode, style)
    batch = make_pair_batch(pairs, max_tokens=10_000, pad_id=pad)
    return actor.scores(batch.tokens_B_T, batch.last_B)[0::2].tolist()  # the chosen rows


if __name__ == "__main__":
    main()
