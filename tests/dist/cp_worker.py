"""torchrun worker for the context-parallel layout test (2 processes = one CP group of 2, gloo, no
model).

Run: torchrun --nproc_per_node=2 tests/dist/cp_worker.py OUT.json
Megatron's CP attention needs Transformer Engine (GPU only), so this drives the actor's own CP
code — the microbatch split (``_model_inputs``), the log-prob reassembly
(``sequence_layout.cp_token_logprobs``) and the loss bookkeeping (``_loss``) — with a stand-in
model whose logits depend only on each position's token (logits = W[token]), against the
whole-sequence computation. The real model's CP path is tests/gpu/test_context_parallel.py.
"""
import json
import sys

import torch


def main():
    out = sys.argv[1]
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from nemo_cascade import config
    from nemo_cascade.actor import cpu
    from nemo_cascade.actor import precision, sequence_layout
    from nemo_cascade.actor.lm_head import token_logprobs
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.actor.process_groups import init_distributed

    cpu.enable()
    init_distributed()
    ps.initialize_model_parallel(context_parallel_size=2)

    class Actor:  # the actor's CP methods on a stand-in: no GPTModel (its CP attention is TE's)
        parallel, te, device = config.Parallel(cp=2), True, torch.device("cpu")
        plan = precision.Plan(
            te=True, config_kwargs={},
            seq_multiple=precision.seq_multiple(config.Model(), config.Parallel(cp=2)))
        _model_inputs = MegatronActor._model_inputs
        _loss = MegatronActor._loss

    Actor.parallel_state = ps
    actor = Actor()
    g = torch.Generator().manual_seed(0)
    V, B, T = 11, 3, 13  # T is not a multiple of 2·cp: the actor pads to 16, then 4 chunks of 4
    tokens = torch.randint(0, V, (B, T), generator=g)
    weights = torch.randn(B, T, generator=g)
    W = torch.randn(V, V, generator=g).requires_grad_()

    # whole sequence, one process: the reference
    ref = token_logprobs(W[tokens], tokens, temperature=0.7)
    (ref * weights).sum().backward()
    ref_grad, W.grad = W.grad.clone(), None

    mb = {"tokens": tokens, "weights": weights}
    inputs = actor._model_inputs(mb)
    labels = inputs.pop("labels")
    logits = W[inputs["input_ids"]]  # the stand-in model on this rank's two chunks

    def loss_fn(lp, mb):
        return (lp * mb["weights"]).sum(), torch.tensor(T), {}

    num, count, report = actor._loss(loss_fn, 0.7, mb, labels, None, logits)
    num.backward()
    local_grad = W.grad.clone()
    dist.all_reduce(W.grad)  # Megatron's DDP sums gradients over the data-parallel × CP group
    packed_error = ""
    try:
        actor._model_inputs({
            "tokens": tokens, "segment_ids": torch.ones_like(tokens), "position_ids": tokens})
    except config.ConfigError as e:
        packed_error = str(e)
    result = {
        "rank": ps.get_context_parallel_rank(),
        "input_ids": inputs["input_ids"].tolist(), "positions": inputs["position_ids"][0].tolist(),
        "labels": labels.tolist(), "tokens": tokens.tolist(),
        # fresh logits: the log-prob path consumes its input in place (as the model's output, which
        # nothing reuses)
        "logprobs_error": (sequence_layout.cp_token_logprobs(
            W[inputs["input_ids"]].detach(), labels, T, 0.7, ps.get_context_parallel_group())
            - ref.detach()).abs().max().item(),
        "consumed": not torch.equal(logits, W[inputs["input_ids"]]),
        "loss": num.item(), "ref_loss": (ref * weights).sum().item(),
        "logprob_max": ref.abs().max().item(),
        "loss_scale": (ref * weights).abs().sum().item(),
        "count": int(count), "report_den": float(report["den"][0]),
        "grad_error": (W.grad - ref_grad).abs().max().item(), "grad_norm": ref_grad.norm().item(),
        "local_grad_error": (local_grad - ref_grad).abs().max().item(),
        "packed_error": packed_error,
    }
    results = [None, None]
    dist.all_gather_object(results, result)
    if dist.get_rank() == 0:
        json.dump(results, open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
