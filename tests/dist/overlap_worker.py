"""torchrun worker for the overlapped-communication tests: the same 4 training steps under several
DDP settings.

Run: torchrun --nproc_per_node=2 tests/dist/overlap_worker.py MODEL_DIR OUT_DIR [PP]
     (PP=2: 4 processes)
Modes (DP=2, several small DDP buckets): plain / overlap_grad_reduce with the plain optimizer, and
plain / overlap_grad_reduce / overlap_grad_reduce + overlap_param_gather with the distributed
optimizer. Each mode trains 4 GRPO steps on batches of 6, 8, 10 and 7 rows (2, 2, 3 and 2
microbatches per rank; the count changes, as with dynamic sampling). After step 1 the KL reference
is swapped in and out, after step 3 the weights are exported to HF names, after step 4 a checkpoint
is written — each right after an optimizer step, where a deferred parameter all-gather would leave
stale weights; after step 2 the next forward does the gather. Rank 0 writes OUT_DIR/MODE.pt: losses,
grad norms, log-probs, the exports, the checkpoint's model file, and per step Megatron's
bucket-group collective calls (evidence that they overlapped).
"""
import sys
from pathlib import Path

import torch

MODES = {
    "plain": dict(distributed_optimizer=False),
    "grad": dict(distributed_optimizer=False, overlap_grad_reduce=True),
    "plain_do": dict(distributed_optimizer=True),
    "grad_do": dict(distributed_optimizer=True, overlap_grad_reduce=True),
    "grad_gather_do": dict(distributed_optimizer=True, overlap_grad_reduce=True,
                           overlap_param_gather=True),
}
BUCKET_SIZE = 20_000  # parameters per bucket: the tiny model (~60K parameters) gets several


def batches():
    g = torch.Generator().manual_seed(0)
    out = []
    for n in (6, 8, 10, 7):
        length = 20
        tokens = torch.randint(0, 256, (n, length), generator=g)
        mask = torch.zeros(n, length)
        for b in range(n):  # prompts of different lengths, responses to the end of the row
            mask[b, 3 + b % 5:length - b % 3] = 1.0
        out.append({"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(n, generator=g)})
    return out


class Trace:
    """Records Megatron's bucket-group collective calls as (what, id(bucket group), an async handle
    is outstanding afterwards, called from inside autograd's backward)."""

    def __init__(self):
        from megatron.core.distributed.param_and_grad_buffer import _ParamAndGradBucketGroup

        self.events: list[tuple[str, int, bool, bool]] = []
        for name in ("start_grad_sync", "finish_grad_sync", "start_param_sync",
                     "finish_param_sync"):
            self._wrap(_ParamAndGradBucketGroup, name)

    def _wrap(self, cls, name):
        original = getattr(cls, name)
        events = self.events

        def wrapped(group, *args, **kwargs):
            out = original(group, *args, **kwargs)
            pending = group.grad_reduce_handle if "grad" in name else group.param_gather_handle
            events.append((name + ("(force_sync)" if kwargs.get("force_sync") else ""), id(group),
                           pending is not None, torch._C._current_graph_task_id() != -1))
            return out

        setattr(cls, name, wrapped)


def main():
    model_dir, out = sys.argv[1], Path(sys.argv[2])
    pp = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    import torch.distributed as dist

    from nemo_cascade import checkpoint as ckpt
    from nemo_cascade import config
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.algorithms import grpo

    MegatronActor.DDP_BUCKET_SIZE = BUCKET_SIZE
    trace = Trace()
    cfg = config.GRPO()

    def loss_fn(logprobs, mb):
        return grpo.policy_loss_terms(logprobs, mb["old_logprobs"], mb["advantages"],
                                      mb["loss_mask"], cfg)

    for mode, fields in MODES.items():
        actor = MegatronActor(model_dir, config.Parallel(pp=pp, micro_batch_size=2, **fields),
                              seed=7)
        actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=1.0, weight_decay=0.01),
                                  total_steps=4)
        actor.snapshot_reference()
        trace.events.clear()
        steps, logprobs, events = [], {}, []
        for k, batch in enumerate(batches()):
            batch["old_logprobs"] = actor.logprobs(batch["tokens"], temperature=0.7)
            logprobs[f"old_{k}"] = batch["old_logprobs"]
            steps.append(actor.train_step(batch, loss_fn, temperature=0.7))
            if k == 0:  # right after a step: swap the reference in and out, then read it
                with actor.reference_weights():
                    logprobs["reference"] = actor.logprobs(batch["tokens"], temperature=0.7)
            if k == 2:  # right after a step: the weight sync / HF export path
                export_step3 = {n: t.clone() for n, t in actor.iter_hf_weights()}
            if k == 3:  # right after a step: the checkpoint
                path = ckpt.save(out / f"ckpt_{mode}", 4, actor, {})
            events.append(list(trace.events))
            trace.events.clear()
        logprobs["final"] = actor.logprobs(batches()[2]["tokens"])
        events.append(list(trace.events))
        export_final = dict(actor.iter_hf_weights())
        if dist.get_rank() == 0:
            torch.save({"loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps],
                        "tokens": [s.tokens for s in steps], "logprobs": logprobs,
                        "export_step3": export_step3, "export_final": export_final,
                        "checkpoint": torch.load(path / "model_tp00_pp00.pt"),
                        "bucket_groups": len(actor.module.bucket_groups), "events": events},
                       out / f"{mode}.pt")
        dist.barrier()
        del actor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
