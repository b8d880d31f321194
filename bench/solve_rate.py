"""How often a model solves an RL stage's prompts: does the stage have a signal before it runs?

GRPO learns only from groups whose rewards differ (§4.4.2): a prompt the model never solves, or
always solves, gives a zero-variance group that is dropped. This samples G responses for each of N
prompts of a stage's data source with the stage's sampling settings, scores them with the domain's
verifier, and prints the mean reward, the share of prompts solved at least once / every time, and
the share of *informative* groups (unequal rewards). A stage is worth running when the mean is
roughly 10–60 % and at least a third of its groups are informative. Results are appended to
``bench/results/solve_rate.jsonl``.

    .venv/bin/python bench/solve_rate.py --model smollm2 --source benchmark:gsm8k --domain math
    .venv/bin/python bench/solve_rate.py --model runs/smollm2-sft/stages/0-sft/hf \\
        --source benchmark:mbpp --domain code --prompts 64 --samples 4 --max-tokens 224
    .venv/bin/python bench/solve_rate.py --model smollm2 --recipe recipes/smollm2.py --stage math

``--recipe/--stage`` take the sources, domains, sampling and prompt limit from a recipe's stage (the
values the run will use), one result row per source (the stage's ``data``, then each ``extra_data``
source); the other flags override them, and ``--source`` measures that one source instead.

``--pass-rates FILE`` writes each prompt's solved count (jsonl: ``prompt``, ``solved``,
``samples``), the file ``nemo-cascade data prepare rl-code --drop-always-solved /
--drop-never-solved`` reads for the code RL set's difficulty filter (§4.6.1: AceReason-Nemotron-7B's
and DeepSeek-R1-0528's 8 samples per problem):

    .venv/bin/python bench/solve_rate.py --model /models/AceReason-Nemotron-7B --domain code \\
        --source $DATA/rl-code/train.jsonl --prompts 0 --samples 8 \\
        --pass-rates $DATA/rl-code/pass_rates_weak.jsonl

``--keep FILE`` turns the measurement into the paper's offline difficulty filter (§4.6): the
source's rows whose prompt was solved by at least one sample and not by all of them (``--keep-solved
LOW HIGH`` to choose) are written to FILE, a jsonl prompt source of their own for a recipe's
``Data.source``:

    .venv/bin/python bench/solve_rate.py --model runs/smollm2-sft/stages/0-sft/hf \\
        --source benchmark:mbpp --domain code --prompts 374 --samples 8 \\
        --keep data/smollm2/mbpp_train_solvable.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "solve_rate.jsonl"

from eval_speed import model_dir  # noqa: E402  (bench/ is the script's own folder on sys.path)


def stage_settings(args):
    """``([(Data, domain), ...], Rollout, group size, chat style, mode)``: every prompt source of
    the recipe's stage (its ``data``, then each ``extra_data`` source with its own domain), or the
    one source the flags name."""
    from nemo_cascade import config

    if args.recipe:
        from nemo_cascade.tooling.cli import load_recipe

        cascade = load_recipe(args.recipe)
        stage = next((s for s in cascade.stages if s.name == args.stage), None)
        if stage is None or stage.kind != "grpo":
            raise SystemExit(f"--stage: expected a GRPO stage of {args.recipe}, one of "
                             f"{[s.name for s in cascade.stages if s.kind == 'grpo']}")
        sources = [(stage.data, stage.domain),
                   *((d, d.domain or stage.domain) for d in stage.extra_data)]
        rollout, group, style, mode = (stage.rollout, stage.grpo.group_size, cascade.chat_style,
                                       stage.mode)
    else:
        sources = [(config.Data(), "math")]
        rollout, group, style, mode = config.Rollout(), 4, "chatml", "no_think"
    # one source instead of the stage's: its first source's settings, the flag's file
    if args.source:
        sources = [(replace(sources[0][0], source=args.source), sources[0][1])]
    sources = [(replace(data, split=args.split or data.split, seed=args.seed, size=args.prompts),
                args.domain or domain) for data, domain in sources]
    rollout = replace(rollout, **{k: v for k, v in (("max_response_tokens", args.max_tokens),
                                                    ("temperature", args.temperature))
                                  if v is not None})
    return sources, rollout, args.samples or group, args.style or style, args.mode or mode


def measure(args) -> list[dict]:
    """One result row per prompt source, all sampled from one engine; with ``--keep``, also writes
    the source's rows whose solved count lies in ``--keep-solved``."""
    from nemo_cascade.tooling.standalone import build_engine, load_tokenizer
    from nemo_cascade.tooling import demo_data

    demo_data.register()  # the synthetic:/benchmark: sets and tiny models this reads

    sources, rollout, group, style, mode = stage_settings(args)
    if (args.keep or args.pass_rates) and len(sources) > 1:
        raise SystemExit(f"--keep / --pass-rates: the stage has {len(sources)} prompt sources; "
                         f"name one with --source")
    path = model_dir(args.model)
    tokenizer = load_tokenizer(path)
    engine = build_engine(path, rollout.max_prompt_tokens + rollout.max_response_tokens, args.seed)
    try:
        return [measure_source(args, engine, tokenizer, data, domain, rollout, group, style, mode)
                for data, domain in sources]
    finally:
        engine.shutdown()


def measure_source(args, engine, tokenizer, data, domain, rollout, group, style, mode) -> dict:
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.runtime.files import write_text_atomically
    from nemo_cascade.rewards import stage_scorer

    prompts = list(load_prompts(data, tokenizer, mode, get_domain(domain),
                                rollout.max_prompt_tokens, style=style))
    t0 = time.perf_counter()
    groups = engine.generate(prompts, group, rollout, step=0)
    generate_s = time.perf_counter() - t0
    stage_scorer([domain]).score(groups)
    rewards = [g.rewards_G for g in groups]
    solved = [[r >= args.solved_at for r in rs] for rs in rewards]
    informative = sum(len(set(rs)) > 1 for rs in rewards)
    kept = {}
    if args.pass_rates:
        write_text_atomically(Path(args.pass_rates), "".join(
            json.dumps({"prompt": g.prompt.user_text, "solved": sum(s), "samples": len(s)}) + "\n"
            for g, s in zip(groups, solved)))
    if args.keep:
        low, high = args.keep_solved or (1, group - 1)
        rows = kept_rows(data, {g.prompt.uid: sum(s) for g, s in zip(groups, solved)}, low, high)
        write_text_atomically(Path(args.keep), "".join(json.dumps(row) + "\n" for row in rows))
        kept = {"kept": len(rows), "kept_solved": [low, high], "kept_file": args.keep}
    return {"model": str(args.model), "source": data.source, "split": data.split, "domain": domain,
            "prompts": len(groups), "samples": group, "max_tokens": rollout.max_response_tokens,
            "temperature": rollout.temperature,
            "mean_reward": round(sum(map(sum, rewards)) / max(1, sum(map(len, rewards))), 4),
            "solved_share": round(sum(map(sum, solved)) / max(1, sum(map(len, solved))), 4),
            "solved_once": round(sum(any(s) for s in solved) / max(1, len(solved)), 4),
            "solved_always": round(sum(all(s) for s in solved) / max(1, len(solved)), 4),
            "informative_groups": round(informative / max(1, len(groups)), 4),
            "truncated": round(sum(f == "length" for g in groups for f in g.finish_reason_G)
                               / max(1, group * len(groups)), 4),
            "generate_s": round(generate_s, 1), "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **kept}


def source_rows(data) -> list[dict]:
    """The source's rows as the loader reads them (the same size and seed), each with the uid its
    prompt gets."""
    from nemo_cascade.data.generated import is_generated, rows as generated_rows
    from nemo_cascade.data.rows import read_jsonl

    if is_generated(data.source):
        return [{**row, "uid": str(row.get("uid", f"{data.source}#{i}"))}
                for i, row in enumerate(generated_rows(data))]
    path = Path(data.source)
    return [{**row, "uid": str(row.get("uid", f"{path}:{n}"))}
            for n, row in read_jsonl(path, data.size)]


def kept_rows(data, solved: dict[str, int], low: int, high: int) -> list[dict]:
    """The offline difficulty filter of the paper's code RL data (§4.6: problems every sample of a
    weaker model solves, and problems no sample of a stronger one solves, are removed): the rows of
    ``data`` whose prompt was solved by between ``low`` and ``high`` of its samples, in source
    order. Rows that were not sampled (too long for the prompt limit) are left out."""
    return [row for row in source_rows(data) if low <= solved.get(row["uid"], -1) <= high]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2",
                   help="a HF model folder (a stage's export) or 'smollm2'")
    p.add_argument("--recipe",
                   help="take the stage's source, domain and sampling from this recipe ...")
    p.add_argument("--stage", help="... and this GRPO stage of it")
    p.add_argument("--source", help="a Data source: benchmark:NAME, synthetic:NAME or a jsonl file")
    p.add_argument("--split", help="train or test (generated sources)")
    p.add_argument("--domain", help="the reward domain (math, ifeval, code, ...)")
    p.add_argument("--prompts", type=int, default=64,
                   help="prompts drawn from the source (default 64)")
    p.add_argument("--samples", type=int,
                   help="samples per prompt (default: the stage's group size, or 4)")
    p.add_argument("--max-tokens", type=int, help="response budget (default: the stage's)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the stage's)")
    p.add_argument("--style", help="chat template style (default: the recipe's, or chatml)")
    p.add_argument("--mode", help="think or no_think (default: the stage's, or no_think)")
    p.add_argument("--seed", type=int, default=0, help="which prompts are drawn (default 0)")
    p.add_argument("--solved-at", type=float, default=1.0,
                   help="a sample counts as solved at this reward")
    p.add_argument("--pass-rates", metavar="FILE", help="write each prompt's solved count to this "
                   "jsonl file (prompt, solved, samples: data prepare's --drop-always-solved / "
                   "--drop-never-solved, §4.6.1)")
    p.add_argument("--keep", metavar="FILE", help="write the source's rows solved by --keep-solved "
                   "samples to this jsonl file (a prompt source of their own: the difficulty "
                   "filter of §4.6)")
    p.add_argument("--keep-solved", type=int, nargs=2, metavar=("LOW", "HIGH"),
                   help="with --keep: solved by at least LOW and at most HIGH samples (default 1 "
                   "and samples - 1: the prompts whose groups train)")
    args = p.parse_args(argv)
    if bool(args.recipe) != bool(args.stage):
        p.error("--recipe and --stage go together")
    if args.keep_solved and not args.keep:
        p.error("--keep-solved goes with --keep")
    rows = measure(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    for row in rows:
        print(f"{row['source']} ({row['domain']}) on {row['model']}: mean reward "
              f"{row['mean_reward']:.3f}, solved {100 * row['solved_share']:.0f} % of samples, "
              f"{100 * row['solved_once']:.0f} % of prompts at least once, "
              f"{100 * row['solved_always']:.0f} % every time; informative groups "
              f"{100 * row['informative_groups']:.0f} % (want >= 33 %); truncated "
              f"{100 * row['truncated']:.0f} %"
              + (f"; kept {row['kept']} rows in {row['kept_file']}" if "kept" in row else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
