"""The reward-model actor: the policy's Megatron GPT backbone with a scalar head in place of the LM
head.

Paper §4.2: the RM is a language model "with a linear head on the last hidden state", trained with
the Bradley–Terry loss. Here the GPTModel is built as for the policy (same layer spec, same TP × PP
× DP layout, same conversion table for the backbone), and on the last pipeline stage its
``output_layer`` — the vocab-parallel LM head — is replaced by :class:`ScoreHead`, a ``hidden → 1``
linear map on the final-norm hidden state at every position. The loss reads it at each sequence's
last real token (``algorithms.reward_model``); causal attention means right padding never changes
that value.

Tensor parallelism: the final hidden states are whole (not sharded) on every TP rank, so the head is
a plain replicated ``[1, hidden]`` parameter. Every TP rank computes the same output and the same
head gradient, so no TP collective is needed; Megatron counts a parameter without
``tensor_model_parallel`` once (TP rank 0) in the gradient norm. Pipeline parallelism: only the last
stage has the head.

Start: the backbone comes from a causal-LM folder (the SFT policy — its LM head is ignored) or from
a reward-model folder (head included); a head absent from the folder is drawn N(0,
initializer_range²) from a generator seeded with the actor's seed, identically on every TP rank.
Export: an HF ``*ForSequenceClassification`` folder (``score.weight``, ``num_labels=1``) that
transformers and vLLM's pooling runner load (``convert.hf_config.reward_model_config``).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from nemo_cascade import config
from nemo_cascade.actor.megatron import Batch, MegatronActor
from nemo_cascade.convert import table
from nemo_cascade.convert.shape import ModelShape, read_hf_config


class ScoreHead(torch.nn.Module):
    """``scores[s, b, 0] = hidden[s, b, :] · weight[0, :]`` — no bias, like HF's ``score`` layer.

    Called where GPTModel calls its output layer: ``(hidden, weight=...,
    runtime_gather_output=...)`` → ``(output, bias)``; the LM-head keyword arguments do not apply
    and are ignored."""

    def __init__(self, hidden_size: int, dtype: torch.dtype, device: torch.device, std: float,
                 seed: int):
        super().__init__()
        init = torch.empty(1, hidden_size, dtype=torch.float32)
        # same on every TP rank
        init.normal_(0.0, std, generator=torch.Generator().manual_seed(seed))
        self.weight = torch.nn.Parameter(init.to(device=device, dtype=dtype))

    def forward(self, hidden_S_B_H: torch.Tensor, weight=None, runtime_gather_output=None):
        return torch.matmul(hidden_S_B_H, self.weight.t()), None


class RewardModelActor(MegatronActor):
    """:class:`MegatronActor` with a scalar head: ``train_step`` loss functions receive per-position
    scores ``[B, T]`` (float32) instead of log-probs; :meth:`scores` reads them at given
    positions."""

    HEAD = "score.weight"
    ROWS_TOGETHER = 2  # a pair's chosen and rejected rows meet in one microbatch for the BT loss

    def __init__(self, hf_path: str, parallel: config.Parallel, dtype: str = "float32",
                 seed: int = 1234, *,
                 transformer_impl: str = "auto", fp8: str = "none"):
        self._seed = seed
        super().__init__(hf_path, parallel, dtype, seed, transformer_impl=transformer_impl, fp8=fp8)

    def _read_shape(self, hf_path: str) -> ModelShape:
        # No LM head, so nothing to tie: the GPTModel is built untied and the table has no lm_head
        # rule.
        return dataclasses.replace(read_hf_config(hf_path), tied_embeddings=False)

    def _conversion_table(self) -> table.Table:
        return table.table_for(self.shape, te=self.te, head="score")

    def _build(self):
        model = super()._build()
        if model.post_process:
            # The vocab-sized LM head is built by GPTModel and dropped here (its memory is freed at
            # once).
            std = float(self.shape.raw.get("initializer_range", 0.02))
            model.output_layer = ScoreHead(self.shape.hidden_size, self.tconfig.params_dtype,
                                           self.device, std,
                                           seed=self._seed)
        return model

    def load_hf(self, hf_path: str, optional: frozenset[str] = frozenset({HEAD})) -> None:
        """Backbone from any Qwen3/Qwen2/Llama folder; the head too when the folder is a reward
        model."""
        super().load_hf(hf_path, optional)

    def _loss_input(self, logits: torch.Tensor, mb: Batch, temperature: float) -> torch.Tensor:
        """GPTModel returns the head's output as ``[B, T, 1]``: the loss gets the scores ``[B,
        T]``."""
        return logits[..., 0].float()

    @torch.no_grad()
    def scores(self, tokens_B_T: torch.Tensor, last_B: torch.Tensor) -> torch.Tensor:
        """fp32 ``[B]``: each row's score at position ``last_B[b]`` under the current weights, on
        every rank."""
        self.module.eval()
        holder: list[tuple[Batch, torch.Tensor]] = []

        def keep(scores_B_T, mb):
            holder.append((mb, scores_B_T.gather(1, mb["last"].long().unsqueeze(1)).squeeze(1)))
            return scores_B_T.sum() * 0, torch.tensor(1), {}

        n = tokens_B_T.shape[0]
        self._run({"tokens": tokens_B_T, "last": last_B, "row": torch.arange(n)}, keep, 1.0,
                  forward_only=True)
        out = torch.zeros(n, dtype=torch.float32, device=self.device)
        for mb, s in holder:
            rows = mb["row"]
            valid = rows >= 0
            out[rows[valid]] = s[valid]
        # DP ranks hold disjoint rows and only the last PP stage has values; TP ranks hold identical
        # copies.
        dist.all_reduce(out)
        return (out / self.parallel.tp if self.parallel.tp > 1 else out).cpu()


__all__ = ["RewardModelActor", "ScoreHead"]
