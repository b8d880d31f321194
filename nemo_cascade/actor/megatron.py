"""The actor: a Megatron-Core GPT model over TP × PP × CP × DP that computes log-probs and takes
optimizer steps.

One engine for every stage kind. The stage hands it a whole batch (dict of tensors, leading dim =
sequences) on every rank; the actor takes its data-parallel slice, cuts microbatches, and runs
Megatron's forward/backward schedule (1F1B when PP > 1). Loss functions return ``(sum, count,
metric_sums)`` per microbatch; Megatron (``calculate_per_token_loss``) divides the reduced gradient
by the global count. The layer spec (TE or local), FP8, sequence/context parallelism and recompute
come from ``actor/precision.py``.

Alignment used everywhere: ``logprobs_B_T[b, t] = log p(tokens[b, t] | tokens[b, :t])`` for t ≥ 1, 0
at t = 0.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import torch
import torch.distributed as dist

from nemo_cascade import config
from nemo_cascade.runtime import cpu_math, heartbeat
from nemo_cascade.runtime import ranks
from nemo_cascade.actor import cpu, optimizer
from nemo_cascade.actor.process_groups import init_distributed, init_model_parallel
from nemo_cascade.actor.hf_weights import HFWeights
from nemo_cascade.actor.frozen_weights import FrozenWeights
from nemo_cascade.actor import lm_head
from nemo_cascade.actor import precision
from nemo_cascade.actor.sequence_layout import (RopeAtPositions, cp_inputs, cp_token_logprobs,
                                                pad_rows, pad_seq, pipeline_shape, round_up,
                                                thd_inputs, trimmed)
from nemo_cascade.algorithms.packing import packed_attention
from nemo_cascade.convert import megatron_args, table
from nemo_cascade.convert.hf_config import is_reward_model
from nemo_cascade.convert.shape import ModelFilesError, ModelShape, read_hf_config
from nemo_cascade.runtime.faults import crash_point

# megatron-core 0.16's distributed optimizer calls collectives that torch 2.13 marks deprecated; the
# warning repeats on every step and is megatron's to fix, not the user's.
warnings.filterwarnings(
    "ignore", category=FutureWarning,
    message=r"`torch\.distributed\.(reduce_scatter_tensor|all_gather_into_tensor)` is deprecated")

log = logging.getLogger(__name__)

Batch = dict[str, torch.Tensor]
LossFn = Callable[[torch.Tensor, Batch], tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]]


@dataclass
class StepMetrics:
    loss: float
    grad_norm: float
    lr: float
    tokens: int
    metrics: dict[str, float]
    """The loss function's metrics reduced over microbatches and data-parallel ranks: scalar sums
    stay sums, ``[sum, count]`` pairs become means."""


class MegatronActor:
    """Build from an HF folder, train, and hand out full HF-named weights (for vLLM and exports)."""

    def __init__(self, hf_path: str, parallel: config.Parallel, dtype: str = "float32",
                 seed: int = 1234, *,
                 transformer_impl: str = "auto", fp8: str = "none"):
        """``transformer_impl`` / ``fp8``: ``config.Model``'s fields of those names
        (actor/precision.py)."""
        from megatron.core import parallel_state
        from megatron.core import tensor_parallel

        cpu.enable()
        cpu_math.settle_vector_math()  # before a forward runs MKL's vector math on two threads
        init_distributed(parallel.collective_timeout_minutes)
        self.shape = self._read_shape(hf_path)
        megatron_args.check_parallel(self.shape, parallel.tp, parallel.pp)
        # TE or local spec, FP8, SP, CP, recompute — checked against this machine before any process
        # group work.
        self.plan = precision.plan(config.Model(dtype=dtype, transformer_impl=transformer_impl,
                                                fp8=fp8), parallel,
                                   rope_scaling=self.shape.yarn is not None)
        self._check_sequence_split(parallel)
        world, mp = dist.get_world_size(), parallel.tp * parallel.pp * parallel.cp
        if world % mp:
            raise config.ConfigError("parallel.tp × parallel.pp × parallel.cp = "
                                     f"{parallel.tp}×{parallel.pp}×{parallel.cp} must divide the "
                                     f"world size {world}")
        init_model_parallel(parallel)
        tensor_parallel.model_parallel_cuda_manual_seed(seed)
        self.parallel_state, self.parallel, self.hf_path = parallel_state, parallel, hf_path
        # Batches arrive on the CPU; NCCL collectives need CUDA tensors, gloo CPU ones.
        self.device = (torch.device("cuda", torch.cuda.current_device())
                       if torch.cuda.is_available() else torch.device("cpu"))
        self.bf16 = dtype == "bfloat16"
        # TE's fused norm+linear layers rename two norms per layer (convert.table)
        self.te = self.plan.te
        self.table = self._conversion_table()
        self.entries = list(self.table.entries)
        self.model = self._build()
        self.weights = HFWeights(self.model, self.table, self.shape, parallel, parallel_state,
                                 self.device, self.tconfig.params_dtype, self.finish_param_gather)
        self._gather_sequence_for_head()
        self._head_input = self._select_head_input()
        rope = getattr(self.model, "rotary_pos_emb", None)
        self._rope = RopeAtPositions(rope) if rope is not None and not self.te else None
        self.load_hf(hf_path)
        self.module = self._wrap_ddp()
        # overlap_param_gather: stepped shards not yet all-gathered
        self._params_gather_pending = False
        self.optimizer = None
        self.scheduler = None
        self.frozen = FrozenWeights(self.model)  # the KL reference, a distill stage's teachers

    # ---------------------------------------------------------------------------------------- build
    @property
    def tp_rank(self) -> int:
        return self.parallel_state.get_tensor_model_parallel_rank()

    @property
    def dp_rank(self) -> int:
        return self.parallel_state.get_data_parallel_rank()

    @property
    def dp_size(self) -> int:
        return self.parallel_state.get_data_parallel_world_size()

    def _read_shape(self, hf_path: str) -> ModelShape:
        shape = read_hf_config(hf_path)
        # a policy needs an LM head; a cascade never hands an RM on as policy
        if is_reward_model(shape):
            raise ModelFilesError(f"{hf_path}: {shape.hf_architecture} is a reward model, "
                                  "not a causal LM policy")
        return shape

    def _conversion_table(self) -> table.Table:
        return table.table_for(self.shape, te=self.te)

    def _check_sequence_split(self, parallel: config.Parallel) -> None:
        """CP hands the loss function log-probs reassembled over CP ranks
        (sequence_layout.cp_token_logprobs); a subclass with another head output (the reward model's
        scores) has no such path."""
        if parallel.cp > 1 and type(self)._loss_input is not MegatronActor._loss_input:
            raise config.ConfigError(f"parallel.cp={parallel.cp}: {type(self).__name__} reads "
                                     "whole sequences (its head's output is not per-token "
                                     "log-probs); set parallel.cp=1")

    def _build(self):
        from megatron.core.models.gpt import GPTModel
        from megatron.core.transformer import TransformerConfig

        kwargs = megatron_args.transformer_config_kwargs(self.shape, self.parallel.tp,
                                                         self.parallel.pp, self.bf16)
        self.tconfig = TransformerConfig(activation_func=torch.nn.functional.silu, **kwargs,
                                         **self.plan.config_kwargs)
        # YaRN RoPE (App. B)
        for name, value in megatron_args.yarn_config_attributes(self.shape).items():
            setattr(self.tconfig, name, value)
        model = GPTModel(
            config=self.tconfig, transformer_layer_spec=precision.layer_spec(
                self.te, self.shape.arch, self.shape.num_layers // self.parallel.pp,
                self.plan.fused_attention),
            pre_process=self.parallel_state.is_pipeline_first_stage(),
            post_process=self.parallel_state.is_pipeline_last_stage(),
            **megatron_args.gpt_model_kwargs(self.shape),
        )
        return model.to(self.device)

    def _select_head_input(self) -> "lm_head.HeadInput | None":
        """The LM head runs only at the positions that predict trained tokens (actor/lm_head.py) —
        not with sequence or context parallelism, which split the sequence the head sees."""
        from megatron.core.tensor_parallel import ColumnParallelLinear

        head = getattr(self.model, "output_layer", None)
        if (not isinstance(head, ColumnParallelLinear) or self.parallel.sequence_parallel
                or self.parallel.cp > 1):
            # no head on this pipeline stage, another head (a reward model's), or a split sequence
            return None
        return lm_head.HeadInput(head)

    def _gather_sequence_for_head(self) -> None:
        """With sequence parallelism the final hidden states reach the output layer as this TP
        rank's sequence shard. Megatron's vocab-parallel LM head all-gathers them itself; any other
        head (the reward model's :class:`ScoreHead`) is given the whole sequence here. Its backward
        keeps this rank's shard of the gradient (not a reduce-scatter): every TP rank computes the
        same head output and loss."""
        from megatron.core.tensor_parallel import (ColumnParallelLinear,
                                                   gather_from_sequence_parallel_region)

        head = getattr(self.model, "output_layer", None)
        if (not self.parallel.sequence_parallel or head is None
                or isinstance(head, ColumnParallelLinear)):
            return

        def gather(module, args, kwargs):
            whole = gather_from_sequence_parallel_region(args[0], tensor_parallel_output_grad=False)
            return (whole, *args[1:]), kwargs

        head.register_forward_pre_hook(gather, with_kwargs=True)

    DDP_BUCKET_SIZE: int | None = None
    """Parameters per DDP bucket, the unit of overlapped communication (``overlap_grad_reduce`` /
    ``overlap_param_gather``). None: Megatron's default, max(40M, 1M × dp); tests set it small so
    that a tiny model has several buckets. Without overlap Megatron uses one bucket whatever this
    says."""

    def _wrap_ddp(self):
        from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
        from megatron.core.distributed import finalize_model_grads

        p = self.parallel
        ddp = DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                            overlap_grad_reduce=p.overlap_grad_reduce,
                                            overlap_param_gather=p.overlap_param_gather,
                                            use_distributed_optimizer=p.distributed_optimizer,
                                            bucket_size=self.DDP_BUCKET_SIZE)
        module = DistributedDataParallel(self.tconfig, ddp, self.model)
        # finalize_model_grads runs at the end of every forward/backward schedule:
        # module.finish_grad_sync() (starts the reduce, or with overlap waits for the buckets the
        # backward hooks started), then the SP, embedding and token-count steps.
        self.tconfig.finalize_model_grads_func = finalize_model_grads
        if p.overlap_grad_reduce:
            # As Megatron-LM's training loop (align_grad_reduce on, its default): the schedule runs
            # every microbatch but the last under no_sync, so a bucket's reduce starts only when the
            # last microbatch's backward has produced all of its gradients; with PP, stages after
            # the first start theirs through grad_sync_func after their last backward.
            self.tconfig.no_sync_func = module.no_sync
            self.tconfig.grad_sync_func = module.start_grad_sync
        return module

    def finish_param_gather(self) -> None:
        """Make every rank's parameters whole and current (collective: all ranks call it).

        With ``overlap_param_gather`` the distributed optimizer's step updates only this DP rank's
        shard of each parameter; the all-gather of the rest is started by the next forward pass's
        pre-hooks, bucket by bucket, overlapping that forward. Whatever reads weights outside a
        forward — the weight sync to vLLM and HF export (:meth:`iter_hf_weights`), the KL reference,
        checkpoints — calls this first (Megatron-LM forces the same sync before it saves or
        evaluates). A no-op otherwise, and after a forward pass."""
        if self._params_gather_pending:
            self.module.start_param_sync(force_sync=True)
            self._params_gather_pending = False

    # ------------------------------------------------------------------------------- HF weights
    def load_hf(self, hf_path: str, optional: frozenset[str] = frozenset()) -> None:
        """Copy an HF checkpoint into this rank's shards (:meth:`HFWeights.load`)."""
        self.weights.load(hf_path, optional)

    def iter_hf_weights(self, dtype: torch.dtype | None = None,
                        bucket_bytes: int | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """Every HF-named full tensor, on every rank (collective; :meth:`HFWeights.gathered`)."""
        return self.weights.gathered(dtype, bucket_bytes)

    # ------------------------------------------------------------------------------------ optimizer
    def configure_optimizer(self, actor: config.Actor, total_steps: int,
                            carry: bool = False) -> None:
        """AdamW + this stage's LR schedule (actor/optimizer.py). ``carry``
        (``boundary.optimizer``): keep the existing optimizer — its Adam moments and step count —
        and only start the new schedule; otherwise a fresh one."""
        if not (carry and self.optimizer is not None):
            self.optimizer = optimizer.build(self.module, actor, self.parallel, self.bf16,
                                             self.tconfig.params_dtype)
        self.scheduler = optimizer.lr_scheduler(self.optimizer, actor, total_steps)

    # --------------------------------------------------------------------------------- fwd / bwd
    ROWS_TOGETHER = 1
    """Rows that must stay in one microbatch (a reward model's chosen/rejected pair: 2)."""

    def _microbatches(self, batch: Batch) -> tuple[list[Batch], int]:
        """This DP rank's slice of the batch (DP ranks get equal row counts; empty rows fill up) in
        microbatches of at most ``micro_batch_size`` rows. Pipeline parallelism sends activations of
        one fixed shape between stages, so with PP > 1 the last microbatch is padded to full size
        too; without PP it is not — computing padding rows costs as much as real ones (a 9-row
        packed SFT batch is not run as 64 rows) — and a microbatch is cut to its longest row
        (``sequence_layout.trimmed``): packing lays rows out longest first, so the later
        microbatches' rows are shorter than the batch's widest; rows of one sequence each (GRPO
        without packing, as with context parallelism) are cut after their last trained token, so a
        microbatch of short answers is not run at the batch's longest, attention and LM head
        included."""
        mbs, dp, together = self.parallel.micro_batch_size, self.dp_size, self.ROWS_TOGETHER
        n = batch["tokens"].shape[0]
        per_rank = -(-n // (dp * together)) * together
        if self.parallel.pp > 1:
            per_rank = -(-per_rank // mbs) * mbs
        padded = {k: pad_rows(v, per_rank * dp, fill=-1 if k == "row" else 0)
                  for k, v in batch.items()}
        begin, end = self.dp_rank * per_rank, (self.dp_rank + 1) * per_rank
        mine = {k: v[begin:end] for k, v in padded.items()}
        microbatches = [{k: v[i:i + mbs] for k, v in mine.items()} for i in range(0, per_rank, mbs)]
        if self.parallel.pp == 1 and ("segment_ids" in batch or "loss_mask" in batch):
            microbatches = [trimmed(mb) for mb in microbatches]
        return microbatches, n

    def _forward_step(self, loss_fn: LossFn, temperature: float, data_iterator, model):
        heartbeat.advance()  # a train step of long rows is many microbatches, each a beat
        mb = {k: v.to(self.device) for k, v in next(data_iterator).items()}
        inputs = self._model_inputs(mb)
        cp_labels = inputs.pop("labels", None)
        selection = None
        # the loss reads the trained tokens only
        if self._head_input is not None and "loss_mask" in mb:
            T_pad = round_up(mb["tokens"].shape[1], self.plan.seq_multiple)
            selection = lm_head.select(mb["loss_mask"], T_pad, thd="packed_seq_params" in inputs)
            self._head_input.selection = selection
        # samples sharing a prompt: RoPE at their positions, not their columns
        if "prefix_ids" in mb:
            self._rope.positions = inputs["position_ids"]
        try:
            output = model(**inputs)
        finally:
            if self._rope is not None:
                self._rope.positions = None
            if self._head_input is not None:
                self._head_input.selection = None
        return output, partial(self._loss, loss_fn, temperature, mb, cp_labels, selection)

    def _model_inputs(self, mb: Batch) -> dict:
        """What GPTModel gets for a microbatch: tokens right-padded to the plan's sequence multiple
        (SP, CP and FP8 shard or tile the sequence; the loss sees only the first T positions), with
        their attention layout. Packed rows (packing.pack_sft_batch, packing.pack_sequences) attend
        per sequence (and to a shared prompt, ``prefix_ids``): a block-diagonal mask on the local
        spec, ``thd`` boundaries on TE (whose causal attention ignores masks). CP: this rank's
        chunks and labels."""
        T_pad = round_up(mb["tokens"].shape[1], self.plan.seq_multiple)
        tokens = pad_seq(mb["tokens"], T_pad)
        if "segment_ids" in mb:
            if self.parallel.cp > 1:
                raise config.ConfigError("parallel.cp > 1 cannot split packed rows (per-sequence "
                                         "attention); set parallel.cp=1 for sft stages and "
                                         "grpo.sequence_packing=false")
            segments = pad_seq(mb["segment_ids"], T_pad)
            positions = pad_seq(mb["position_ids"], T_pad)
            shared = pad_seq(mb["prefix_ids"], T_pad) if "prefix_ids" in mb else None
            # its packed attention sees whole sequences: run_grpo keeps prompts unshared there
            if self.te:
                assert shared is None, "Transformer Engine's packed attention cannot share a prompt"
                return thd_inputs(tokens, positions, segments)
            mask = packed_attention(segments, shared, by_block=self.plan.fused_attention)
            return dict(input_ids=tokens, position_ids=positions, attention_mask=mask)
        if self.parallel.cp > 1:
            return cp_inputs(tokens, self.parallel.cp,
                             self.parallel_state.get_context_parallel_rank())
        positions = torch.arange(T_pad, device=tokens.device).unsqueeze(0).expand_as(tokens)
        return dict(input_ids=tokens, position_ids=positions,
                    attention_mask=_cpu_causal_mask(T_pad, tokens.device))

    def _loss(self, loss_fn: LossFn, temperature: float, mb: Batch, cp_labels: torch.Tensor | None,
              selection: "lm_head.Selection | None", output: torch.Tensor):
        B, T = mb["tokens"].shape
        if selection is not None:  # logits of the predicting positions only: [1, N, V]
            x = lm_head.selected_token_logprobs(output, mb["tokens"], selection, temperature)
        elif cp_labels is not None:
            x = cp_token_logprobs(output, cp_labels, T, temperature,
                                  self.parallel_state.get_context_parallel_group())
        else:  # [1, B·T_pad, ·] for thd rows; drop the padded positions
            x = self._loss_input(output.reshape(B, -1, output.shape[-1])[:, :T], mb, temperature)
        num, den, sums = loss_fn(x, mb)
        report = {"num": num.detach().double().reshape(1).cpu(),
                  "den": torch.as_tensor(den).double().reshape(1).cpu(),
                  "computed_tokens": torch.tensor([float(B * T)], dtype=torch.float64)}
        report.update({k: torch.as_tensor(v).detach().double().reshape(-1).cpu()
                       for k, v in sums.items()})
        count = torch.as_tensor(den).to(device=self.device, dtype=torch.int)
        if self.parallel.cp > 1 and self.parallel_state.get_context_parallel_rank() > 0:
            # Every CP rank computes the same whole-sequence loss; Megatron sums token counts over
            # DP × CP ranks to scale the gradients, so only one rank of the CP group may count them.
            count = torch.zeros_like(count)
        return num, count, report

    def _loss_input(self, logits: torch.Tensor, mb: Batch, temperature: float) -> torch.Tensor:
        """What the loss function receives: the policy's per-token log-probs
        (``lm_head.token_logprobs``)."""
        return lm_head.token_logprobs(logits, mb["tokens"], temperature)

    def _run(self, batch: Batch, loss_fn: LossFn, temperature: float, forward_only: bool):
        from megatron.core.pipeline_parallel import get_forward_backward_func

        mbs, _ = self._microbatches(batch)
        # Pipeline stages exchange activations of this (padded) length; Megatron divides it by cp
        # (and tp with SP).
        seq_len, rows = pipeline_shape(round_up(batch["tokens"].shape[1], self.plan.seq_multiple),
                                       self.parallel.micro_batch_size,
                                       thd=self.te and "segment_ids" in batch)
        out = get_forward_backward_func()(
            forward_step_func=partial(self._forward_step, loss_fn, temperature),
            data_iterator=iter(mbs), model=[self.module], num_microbatches=len(mbs),
            seq_length=seq_len, micro_batch_size=rows, forward_only=forward_only,
        )
        # Every module ran its forward, so its pre-hook has waited for (and started) every bucket's
        # gather.
        self._params_gather_pending = False
        return out

    def _reduce(self, reports: list[dict]) -> dict[str, float]:
        """Sum microbatch reports over microbatches and DP ranks; share them from the last PP stage.

        A report value is a scalar sum or a ``[sum, count]`` pair; pairs come back as their mean.
        """
        keys = sorted(reports[0]) if reports else []
        sizes = [reports[0][k].numel() for k in keys]
        flat = [torch.cat([r[k].reshape(-1) for k in keys]) for r in reports]
        vec = torch.stack(flat).sum(0) if flat else torch.zeros(0, dtype=torch.float64)
        vec = vec.to(self.device)
        dist.all_reduce(vec, group=self.parallel_state.get_data_parallel_group())
        if self.parallel.pp > 1:
            group = self.parallel_state.get_pipeline_model_parallel_group()
            last = dist.get_process_group_ranks(group)[-1]
            # The report's layout (names, sizes) is a Python object: it goes over the gloo object
            # group, as every host-side exchange (nemo_cascade.runtime.ranks). Every last stage runs
            # the same loss function.
            mine = (keys, sizes) if self.parallel_state.is_pipeline_last_stage() else None
            keys, sizes = next(m for m in ranks.gather_objects(mine) if m is not None)
            if vec.numel() != sum(sizes):
                vec = torch.zeros(sum(sizes), dtype=torch.float64, device=self.device)
            dist.broadcast(vec, src=last, group=group)
        out, i = {}, 0
        for k, size in zip(keys, sizes):
            part = vec[i:i + size]
            out[k] = float(part[0]) if size == 1 else float(part[0] / part[1].clamp(min=1))
            i += size
        return out

    def train_step(self, batch: Batch, loss_fn: LossFn, temperature: float = 1.0) -> StepMetrics:
        """One optimizer step on the whole batch (every rank passes the same full batch)."""
        assert self.optimizer is not None, "call configure_optimizer() before train_step()"
        self.module.train()
        self.module.zero_grad_buffer()
        self.optimizer.zero_grad()
        reports = self._run(batch, loss_fn, temperature, forward_only=False)
        ok, grad_norm, _ = self.optimizer.step()
        # overlap_param_gather: the optimizer updated this rank's shards only; the next forward
        # gathers them.
        self._params_gather_pending = self.parallel.overlap_param_gather
        if not ok:
            raise FloatingPointError("optimizer step skipped: non-finite gradients")
        self.scheduler.step(increment=1)
        crash_point("train")
        metrics = self._reduce(reports)
        num, den = metrics.pop("num"), metrics.pop("den")
        lr = self.optimizer.param_groups[0]["lr"]
        return StepMetrics(loss=num / max(den, 1.0), grad_norm=float(grad_norm or 0.0), lr=lr,
                           tokens=int(den),
                           metrics=metrics)

    @torch.no_grad()
    def logprobs(self, tokens_B_T: torch.Tensor, temperature: float = 1.0,
                 layout: Batch | None = None) -> torch.Tensor:
        """Per-token fp32 log-probs of `tokens_B_T` under the current weights, on every rank.
        ``layout``: packed rows' ``position_ids`` and ``segment_ids`` (``GRPOBatch.layout()``;
        absent: one sequence per row)."""
        self.module.eval()
        holder: list[tuple[Batch, torch.Tensor]] = []

        def keep(logprobs, mb):
            holder.append((mb, logprobs.float()))
            return logprobs.sum() * 0, torch.tensor(1), {}

        n, T_ = tokens_B_T.shape
        batch = {"tokens": tokens_B_T, "row": torch.arange(n), **(layout or {})}
        self._run(batch, keep, temperature, forward_only=True)
        out = torch.zeros(n, T_, dtype=torch.float32, device=self.device)
        for mb, lp in holder:
            rows = mb["row"]
            valid = rows >= 0
            # a trimmed microbatch is narrower than the batch
            out[rows[valid], :lp.shape[1]] = lp[valid]
        # Each DP rank computed its slice (zeros elsewhere), and only the last PP stage has values.
        # sums disjoint slices; TP and CP ranks hold identical copies, so divide by both
        dist.all_reduce(out)
        copies = self.parallel.tp * self.parallel.cp
        return (out / copies if copies > 1 else out).cpu()

    # ------------------------------------------------------------------------- reference, teachers
    def snapshot_reference(self) -> None:
        """Remember the current weights as the KL reference (the stage's starting policy)."""
        self.finish_param_gather()
        self.frozen.keep("reference")

    def load_teacher(self, name: str, hf_path: str) -> int:
        """Keep an HF folder's weights (the student's shape) as teacher ``name``; returns their
        bytes on this rank."""
        self.finish_param_gather()
        self.frozen.load(name, lambda: self.load_hf(hf_path))
        return self.frozen.bytes_of(name)

    def weights_of(self, name: str):
        """The frozen weights ``name`` (``reference`` or a teacher) swapped in for a ``with``
        block."""
        self.finish_param_gather()  # the weights swapped back must be the whole stepped ones
        return self.frozen.swapped_in(name)

    def reference_weights(self):
        return self.weights_of("reference")


def _cpu_causal_mask(T: int, device: torch.device) -> torch.Tensor | None:
    """On CPU, the causal mask Megatron would otherwise build itself (None elsewhere). Its own
    builder allocates on ``device="cuda"``; the CPU compat mode rewrites that in the forward pass
    but is not active inside ``backward``, where activation recompute re-runs the attention forward.
    Same mask, same math."""
    if not cpu.is_enabled():
        return None
    return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)[None, None]
