"""The argument parser of the command line (`nemo-cascade`): every command's arguments and help
text. The commands themselves are in ``cli.py`` (run, eval, launch, plan, doctor, report) and
``cli_tools.py`` (convert, data), which also adds its own commands' parsers."""
from __future__ import annotations

import argparse

from nemo_cascade import config
from nemo_cascade.data.chat import STYLES
from nemo_cascade.tooling.cli_tools import add_convert_parser, add_data_parser
from nemo_cascade.evaluate.suites import help_lines
from nemo_cascade.tooling.plan import PRESETS
from nemo_cascade.tooling.launch import add_arguments


def build_parser() -> argparse.ArgumentParser:
    """``nemo-cascade``'s parser: one subcommand per command, in the order ``--help`` lists them."""
    parser = _Parser(prog="nemo-cascade", description="Cascade RL on Megatron-Core + vLLM")
    # One line per command in --help (the details are in each command's own --help).
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    run = sub.add_parser("run", help="run a cascade (or one stage of it)")
    run.add_argument("recipe", help="recipes/NAME.py[:fn] or package.module:fn")
    run.add_argument("overrides", nargs="*",
                     help="KEY=VALUE, e.g. stages.math.steps=5 parallel.tp=2")
    run.add_argument("--stage", help="run only this stage (its earlier stages must be done)")
    run.add_argument("--retrain", action="store_true",
                     help="with --stage: if the stage is done, discard its outputs and those of "
                          "every later stage (their lineage starts from it), then train it again")
    run.add_argument("--dry-run", action="store_true",
                     help="check every input, model, server and each stage's planned GPU memory "
                          "without training: one line per problem, exit 2; nothing is started or "
                          "written")
    run.add_argument("--verbose", action="store_true",
                     help="also show Megatron's, vLLM's and TE's logs and warnings on the console "
                          "(by default they go only to RUN_DIR/logs/rank<R>.log)")
    _add_eval_parser(sub)
    add_convert_parser(sub)
    _add_launch_parser(sub)
    _add_plan_parser(sub)
    _add_doctor_parser(sub)
    add_data_parser(sub)
    report = sub.add_parser("report", help="rebuild a run's report, or compare several runs",
                            description="rebuild a run's report.md / report.png (forgetting "
                                        "matrix, curves), or compare several runs side by side")
    report.add_argument("run_dir", nargs="+",
                        help="a run directory, runs/NAME; several: compare them")
    report.add_argument("--out", help="with several runs: where comparison.md / comparison.png go")
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse with an epilog built only when the help is printed (``epilog_from``): eval's suite
    list reads the suite registry, whose package imports torch — seconds no other command should pay
    at start."""

    def __init__(self, *args, epilog_from=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.epilog_from = epilog_from

    def format_help(self) -> str:
        if self.epilog_from is not None:
            self.epilog = self.epilog_from()
        return super().format_help()


def _suites_epilog() -> str:
    """Every registered suite, one line each (``evaluate.suites.help_lines``): a new suite appears
    by being registered."""
    return ("suites ('all' = those whose data ships in data/: not the tiny-* nor lcb-*, "
            "gpqa-diamond, mmlu-pro, arena-hard, whose data `nemo-cascade data prepare-eval` "
            "downloads; the mode shown is the unified model's, T2: pass --mode think for a "
            "thinking-only model, App. B):\n" + "\n".join(f"  {line}" for line in help_lines()))


def _add_eval_parser(sub) -> None:
    ev = sub.add_parser(
        "eval", help="evaluate a checkpoint on benchmark suites",
        description="evaluate a checkpoint on benchmark suites (paper App. B decoding)",
        epilog_from=_suites_epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("checkpoint",
                    help="HF model folder, or a run's stage directory (runs/NAME/stages/K-STAGE)")
    ev.add_argument("--suite", required=True,
                    help="suite name, comma-separated names, or 'all' (listed below)")
    ev.add_argument("--plugin", action="append", default=[], metavar="FILE.py",
                    help="a Python file of your own that registers a reward domain or suite "
                         "(docs/rewards.md); repeatable")
    ev.add_argument("--limit", help="evaluate only the first N items of each suite")
    ev.add_argument("--samples",
                    help="K samples per item (default: per suite, e.g. AIME 64, IFEval 8)")
    ev.add_argument("--max-tokens",
                    help="response budget per sample (default: per suite, 32K or 64K)")
    ev.add_argument("--temperature", type=float, default=0.6, help="default 0.6 (paper App. B)")
    ev.add_argument("--top-p", type=float, default=0.95, help="default 0.95 (paper App. B)")
    # "suite": the default
    modes = [m for m in config.literal_values(config.Gate, "mode") if m != "suite"]
    ev.add_argument("--mode", choices=modes,
                    help="thinking mode for every suite (default: per suite, the unified model's "
                         "modes of T2: IFEval non-thinking; thinking-only models: think)")
    ev.add_argument("--yarn", action="append", default=[], metavar="SUITE=FACTOR",
                    help="YaRN factor the engine serves the model with for that suite (default: 2 "
                         "for every paper suite, App. B; the 14B's SWE-bench: swe=3; 1 = none); "
                         "suites of different factors get one engine each")
    ev.add_argument("--max-input-tokens", action="append", default=[], metavar="SUITE=TOKENS",
                    help="longest prompt generated for that suite; longer ones score 0 as "
                         "too_long (default: swe 32768, App. B; the 14B's SWE-bench: swe=65536; "
                         "0 = the engine's context only)")
    ev.add_argument(
        "--template", default="cascade1", choices=[*STYLES, "model"],
        help="prompt template: the project's (training) ChatML, or the model's own chat template")
    ev.add_argument("--data", action="append", default=[], metavar="SUITE=PATH",
                    help="use another data file")
    ev.add_argument("--out",
                    help="output folder (default: the stage directory, else runs/eval/<model>)")
    _add_eval_scoring_and_engine_args(ev)


def _add_eval_scoring_and_engine_args(ev) -> None:
    """``eval``'s reward servers and graders, then its engine and processes."""
    ev.add_argument("--reward-model-url",
                    help="served reward model for the rlhf suite (vllm serve --runner pooling)")
    ev.add_argument("--reward-model",
                    help="HF reward-model folder: serve it locally for the rlhf suite")
    ev.add_argument("--judge-url", help="swe: served judge for Eq. 2's partial credit (default: "
                    "lexical grade); arena-hard: the pairwise judge, an OpenAI-compatible chat "
                    "server (required)")
    ev.add_argument("--answer-pattern",
                    help="math suites: answer_is, gsm8k or a regex instead of the last \\boxed{} "
                         "(the training reward's rule)")
    ev.add_argument(
        "--math-grader", default="math_verify",
        choices=config.literal_values(config.Reward, "math_grader"),
        help="math suites: math-verify, or the AceMath-style rule grader the paper used (§4.5)")
    ev.add_argument("--sandbox", default="bwrap",
                    choices=config.literal_values(config.Reward, "sandbox"),
                    help="code suites' sandbox")
    ev.add_argument("--max-model-len", help="cap the engine's context (prompt + response tokens)")
    ev.add_argument("--kv-cache-gib", type=float, default=2.0,
                    help="CPU engines: KV-cache size (GiB)")
    ev.add_argument("--tensor-parallel-size", type=int, default=1,
                    help="GPUs per vLLM engine (default 1)")
    ev.add_argument("--data-parallel", type=int, default=1,
                    help="engines, each evaluating a share of the items: TP × DP processes under "
                         "torchrun, one per GPU (default 1)")
    ev.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                    help="GPU engines: share of each GPU's memory vLLM may take (default 0.9: "
                         "nothing else runs beside it)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--verbose", action="store_true",
                    help="also show vLLM's logs and warnings on the console (by default they go "
                         "only to OUT/logs/rank<R>.log)")


def _add_launch_parser(sub) -> None:
    launch = sub.add_parser(
        "launch", help="run a cascade with nemo-run (local or Slurm)",
        description="run a cascade as a nemo-run experiment (local or Slurm), a task per stage")
    launch.add_argument("recipe", help="recipes/NAME.py[:fn] or package.module:fn")
    launch.add_argument("overrides", nargs="*", help="KEY=VALUE, as for run")
    add_arguments(launch)


def _add_doctor_parser(sub) -> None:
    doc = sub.add_parser(
        "doctor", help="check this node is ready for a recipe (exit 2: not)",
        description="check this node (CUDA, versions, TE/FP8, vLLM, collectives, sandbox, "
                    "servers, disk, memory) for a recipe; exit 2 on any failure")
    doc.add_argument("recipe", nargs="?",
                     help="recipes/NAME.py[:fn] or package.module:fn (optional)")
    doc.add_argument("overrides", nargs="*", help="KEY=VALUE, as for run")
    doc.add_argument("--stage", default="", metavar="NAME",
                     help="the one stage this job runs (as for run): only its servers are waited "
                          "for")
    doc.add_argument("--server-wait", type=float, default=5.0, metavar="SECONDS",
                     help="how long a server this job needs now is waited for (the URL file to "
                          "appear, then /health; default 5; a job's node check: 600)")


def _add_plan_parser(sub) -> None:
    plan = sub.add_parser(
        "plan", help="per-GPU memory and step time of every stage",
        description="per-GPU memory estimate of every stage (actor state, activations, vLLM "
                    "engine), then step times and checkpoint intervals against a time limit")
    plan.add_argument("recipe", help="recipes/NAME.py[:fn] or package.module:fn")
    plan.add_argument("overrides", nargs="*", help="KEY=VALUE, as for run")
    plan.add_argument("--gpu-memory-gib", type=float, default=80.0,
                      help="memory per GPU (default 80: H100-80GB)")
    plan.add_argument("--shape",
                      help=f"model shape preset ({', '.join(PRESETS)}) instead of model.hf_path's "
                           f"config.json (default: that file, else the preset named by the "
                           f"folder's size, e.g. '14B')")
    plan.add_argument("--time-limit", default="04:00:00",
                      help="a job's time limit, [D-]HH:MM:SS, to check each stage's checkpoint "
                           "interval against (default 04:00:00: the sbatch scripts')")
