"""The RLHF reward model of Nemotron-Cascade (§4.2): a Bradley–Terry RM on Qwen2.5-72B-Instruct (a
linear head on the last hidden state), trained for one epoch on 82K preference pairs. Its HF export
(``runs/reward-model-72b/stages/0-rm/hf``, a ``*ForSequenceClassification`` folder) is what the
policy recipes score RLHF with and the thinking models' IF-RL bonus: serve it with ``vllm serve
EXPORT --runner pooling`` and set ``NEMO_CASCADE_RM_URL`` (recipes/nemotron_cascade_*.py). The
policy cascades cannot train it themselves: a ``reward_model`` stage starts from the policy's
weights, and this RM has its own 72B base. The export's chat template is the rendering its pairs
were trained with (cascade1, `` /no_think`` flags; ``data/rm_input.py``), not
Qwen2.5-72B-Instruct's, and the client renders with it too (§4.3: the RM scores what it learned).

Environment: ``NEMO_CASCADE_MODELS`` (default ``models``) holds ``Qwen2.5-72B-Instruct``;
``NEMO_CASCADE_DATA`` (default ``data/nemotron-cascade``) holds ``rm/preference_pairs.jsonl`` (rows
``{"prompt", "chosen", "rejected"}``; docs/recipes.md says how to build it from HelpSteer2/3 and the
synthetic pairs of §4.2).
"""
from __future__ import annotations

import os

from nemo_cascade.config import Actor, Cascade, Data, Model, Parallel, Stage

PAIRS = 82_000
"""§4.2: HelpSteer2 (10K) + HelpSteer3 without ties (36K) + synthetic off-topic pairs = 82K. The
stage's length is one epoch over the pairs the file holds (``epochs=1``): ⌈82,000 / 256⌉ = 321
steps, resolved when the stage starts (its last batch is the 80 pairs left and 176 of the next
shuffle)."""

BATCH = 256
"""§4.2: 256 pairs per step."""

PARALLEL = Parallel(tp=8, pp=4, dp=2, micro_batch_size=2, sequence_parallel=True, recompute="full")
"""Eight 8×H100-80GB nodes (64 GPUs); the paper reports no layout (§3): ours. TP 8 inside a node (64
query / 8 KV heads), PP 4 (80 layers → 20 per stage), DP 2. Per GPU ≈ 27 GB of state (bf16 weights
4.5 GB, fp32 grads 9 GB, Adam sharded over DP 13.6 GB) plus the 1F1B schedule's in-flight
microbatches. A microbatch is one pair (chosen + rejected must share it for the Bradley–Terry loss).
Full recompute: with selective recompute the first pipeline rank holds 4 microbatches × 20 layers of
activations, ≈ 137 GiB per GPU by `nemo-cascade plan`; full recompute brings it to ≈ 46 GiB."""


def recipe() -> Cascade:
    models = os.environ.get("NEMO_CASCADE_MODELS", "models")
    data = os.environ.get("NEMO_CASCADE_DATA", "data/nemotron-cascade")
    rm = Stage(
        name="rm", kind="reward_model",
        # §4.2: HelpSteer2 + HelpSteer3 + synthetic
        data=Data(source=f"{data}/rm/preference_pairs.jsonl"),
        # §4.2: 1 epoch (longer was worse); steps = ⌈pairs / 256⌉ (82K pairs: 321) at the start
        epochs=1.0, steps=0,
        rm_batch_size=BATCH,
        rm_max_tokens=8192,  # not reported: ours (longer conversations keep their last tokens)
        # §4.2: LR 2e-6, AdamW (β = (0.9, 0.95) as in every stage, §3.1.1); schedule, warm-up and
        # weight decay are not reported (ours: the defaults, constant LR without decay)
        actor=Actor(lr=2e-6),
        # ours: the RM scores the answer after </think> (§4.3.2), so pairs are templated without
        # thinking
        mode="no_think",
        checkpoint_every=50,  # ours: a 72B checkpoint with Adam state is ~1 TB
    )
    return Cascade(
        name="reward-model-72b",
        # §4.2, T3: the best backbone (RewardBench 95.15)
        model=Model(hf_path=f"{models}/Qwen2.5-72B-Instruct",
                    dtype="bfloat16", transformer_impl="auto"),  # precision not reported: bf16
        parallel=PARALLEL, stages=(rm,),
        chat_style="cascade1",  # the policies' template (§3.1.2): the RM reads what RLHF shows it
    )


# docs/recipes.md (tools/recipe_docs.py): where each field's value comes from, one table row per
# field
CASCADE_SOURCES = {
    "name": "",
    "model.hf_path": "§4.2, T3: Qwen2.5-72B-Instruct (RewardBench 95.15)",
    "model.dtype": "not reported: bf16",
    "model.transformer_impl": "ours",
    "model.fp8": "not reported: no FP8",
    "parallel.tp": "not reported: ours (64 query / 8 KV heads)",
    "parallel.pp": "ours (80 layers, 20 per stage)",
    "parallel.cp": "the RM reads whole sequences",
    "parallel.dp": "ours",
    "parallel.micro_batch_size": "one pair (chosen + rejected) per microbatch",
    "parallel.sequence_parallel": "ours",
    "parallel.recompute": "ours (`nemo-cascade plan`: selective needs ≈ 137 GiB per "
                          "GPU, full ≈ 46 GiB)",
    "parallel.distributed_optimizer": "ours (the default)",
    "chat_style": "the policies' template (§3.1.2): the RM reads what RLHF shows it", }
STAGE_SOURCES = {
    "mode": "ours: the RM scores the answer after `</think>` (§4.3.2), so pairs carry no thinking",
    "steps": "0: the length is `epochs` (steps = ⌈pairs ÷ 256⌉ when the stage starts: "
             "321 for 82K pairs)",
    "epochs": "§4.2: 1 epoch of 82K pairs at 256 (longer training was worse)",
    "actor.lr": "§4.2",
    "actor.lr_schedule": "not reported: ours (constant)",
    "actor.warmup_steps": "not reported: ours",
    "actor.weight_decay": "not reported: ours",
    "rm_batch_size": "§4.2: 256 pairs",
    "rm_max_tokens": "not reported: ours (longer conversations keep their last tokens)",
    "checkpoint_every": "ours: a 72B checkpoint with Adam state is ~1 TB", }
