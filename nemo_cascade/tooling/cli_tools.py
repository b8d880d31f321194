"""The tooling commands of the command line, beside the training ones in ``cli.py``: ``nemo-cascade
convert`` (release conversion, verification, the offline upload check) and ``nemo-cascade data
prepare`` (the recipes' data files from the released and public sets)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.tooling.model_card import check_release_folder


def cmd_convert(args) -> int:
    """``to-hf``: a run / stage / checkpoint (any TP × PP) → an HF release folder (+ model card from
    a run); ``from-hf``: an HF folder → a weights-only checkpoint in a TP × PP layout; ``verify``:
    load with transformers and compare with a reference folder."""
    from nemo_cascade.tooling import release

    if args.action == "to-hf":
        source = release.resolve(args.source, base=args.base)
        out = release.to_hf(source, args.out, dtype=args.dtype,
                            max_shard_bytes=int(args.max_shard_gb * (1 << 30)),
                            yarn_factor=args.yarn_factor, yarn_original=args.yarn_original)
        print(f"wrote {out} from {source.kind} {source.path}")
        if source.run_dir is not None and not args.no_card:
            card = release.write_model_card(out, source, license=args.license,
                                            base_model=args.base_model,
                                            datasets=tuple(args.dataset))
            print(f"wrote {card}")
        if args.verify:
            reference = source.path if source.kind == "hf" else None
            print(json.dumps(release.verify(out, reference)))
    elif args.action == "check":
        problems = check_release_folder(Path(args.folder))
        for problem in problems:
            print(f"{args.folder}/{problem}", file=sys.stderr)
        print(
            f"{args.folder}: {'ready to upload' if not problems else f'{len(problems)} problem(s)'}"
        )
        return 1 if problems else 0
    elif args.action == "from-hf":
        out = release.from_hf(args.source, args.out, tp=args.tp, pp=args.pp)
        print(f"wrote {out} (weights only, tp={args.tp} pp={args.pp})")
    else:
        print(json.dumps(release.verify(args.source, args.reference)))
    return 0


def add_convert_parser(sub) -> None:
    conv = sub.add_parser("convert", help="Megatron checkpoint ⇄ HF folder, release checks",
                          description="checkpoint ⇄ HF conversion for release (any TP × PP layout)")
    actions = conv.add_subparsers(dest="action", required=True)
    to_hf = actions.add_parser(
        "to-hf", help="run / stage / checkpoint → HF folder (config, generation config, "
        "tokenizer + chat template, sharded safetensors, model card)")
    to_hf.add_argument(
        "source", help="runs/NAME (its last policy stage), runs/NAME/stages/K-NAME, a checkpoint "
        "folder (step_XXXXXX), or an HF folder")
    to_hf.add_argument("out", help="output folder (written atomically)")
    to_hf.add_argument(
        "--base", help="HF folder with the config.json / tokenizer the weights belong to "
        "(default: the run's base model)")
    to_hf.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"])
    to_hf.add_argument("--max-shard-gb", type=float, default=5.0,
                       help="safetensors shard size (default 5 GB)")
    to_hf.add_argument("--no-card", action="store_true",
                       help="do not write README.md (the model card)")
    to_hf.add_argument(
        "--yarn-factor", type=float, help="YaRN rope scaling in config.json (paper App. B: 2; "
        "default: the run's model.yarn_factor, 0 = none)")
    to_hf.add_argument("--yarn-original", type=int, default=32768,
                       help="positions YaRN scales from (32768)")
    to_hf.add_argument("--verify", action="store_true",
                       help="load the result with transformers and generate")
    to_hf.add_argument(
        "--license",
        help="the card's hub license id (default: the base model card's, else unknown)")
    to_hf.add_argument(
        "--base-model", help="the card's base_model, a hub id ORG/NAME (default: what the base "
        "folder says it is: its HF cache path or config _name_or_path)")
    to_hf.add_argument(
        "--dataset", action="append", default=[],
        help="a hub dataset id the run trained on, for the "
        "card's datasets (repeat for several)")
    check = actions.add_parser(
        "check", help="offline checks a release folder passes before `hf upload`: the card's "
        "front matter, hub ids, shards named by the index, no temporary or oversized files")
    check.add_argument("folder")
    from_hf = actions.add_parser("from-hf",
                                 help="HF folder → weights-only checkpoint in a TP × PP layout")
    from_hf.add_argument("source", help="HF folder")
    from_hf.add_argument("out", help="output checkpoint folder")
    from_hf.add_argument("--tp", type=int, default=1)
    from_hf.add_argument("--pp", type=int, default=1)
    verify = actions.add_parser(
        "verify", help="load an HF folder with transformers; compare with --reference")
    verify.add_argument("source", help="HF folder")
    verify.add_argument("--reference", help="HF folder the weights must equal")


def cmd_data(args) -> int:
    """``data prepare``: the recipes' data files from the released and public sets
    (nemo_cascade/prepare); ``data prepare-eval``: the paper's benchmarks the repository does not
    ship (prepare/benchmarks.py)."""
    if args.action == "prepare-eval":
        return _prepare_eval(args)
    from nemo_cascade.tooling.prepare import prepare_command, summary

    generator = None
    if args.generator_url:
        from nemo_cascade.tooling.prepare.offtopic import DEFAULT_PAIRS, GeneratorSettings

        if not args.generator_model:
            raise config.ConfigError(
                "--generator-url: also give --generator-model (the model the server serves)")
        generator = GeneratorSettings(
            args.generator_url, args.generator_model, args.rewriter_model or "", args.weak_model
            or "", DEFAULT_PAIRS if args.synthetic_pairs is None else args.synthetic_pairs,
            args.generator_workers, args.generator_max_tokens)
    manifest, paths = prepare_command(args.stage, Path(args.out), source_dir=args.source_dir,
                                      max_bad_rows=args.max_bad_rows, force=args.force,
                                      generator=generator,
                                      always_solved=args.drop_always_solved,
                                      never_solved=args.drop_never_solved)
    print(summary(manifest, paths))
    print(f"wrote {Path(args.out) / 'manifest.json'}")
    return 0


def _prepare_eval(args) -> int:
    from nemo_cascade.tooling.prepare.benchmarks import prepare_benchmarks
    from nemo_cascade.tooling.prepare.run import summary

    manifest, paths = prepare_benchmarks(args.benchmark, Path(args.out),
                                         source_dir=args.source_dir, max_bad_rows=args.max_bad_rows)
    print(summary(manifest, paths))
    print(f"wrote {Path(args.out) / 'manifest.json'}")
    return 0


def _prepare_parser(actions, action: str, what: str, helps: tuple[str, str, str]):
    """A ``data`` action that writes files from Hub datasets: ``what`` to prepare, ``--out``,
    ``--source-dir``, ``--max-bad-rows`` (``helps``: the action's, ``what``'s and ``--out``'s)."""
    parser = actions.add_parser(action, help=helps[0])
    parser.add_argument(what, help=helps[1])
    parser.add_argument("--out", required=True, help=helps[2])
    parser.add_argument("--source-dir", help="already downloaded datasets as DIR/ORG/NAME/... "
                        "(huggingface-cli download ORG/NAME --repo-type dataset --local-dir "
                        "DIR/ORG/NAME); default: download")
    parser.add_argument("--max-bad-rows", type=int, default=0, help="skip and count up to N "
                        "malformed source rows per file (default 0: the first one stops with its "
                        "file and line)")
    return parser


def add_data_parser(sub) -> None:
    data = sub.add_parser("data", help="prepare the recipes' data files (data prepare)",
                          description="prepare the recipes' data files (docs/recipes.md \"Data\")")
    actions = data.add_subparsers(dest="action", required=True)
    _prepare_parser(actions, "prepare-eval", "benchmark", (
        "download and check the paper's benchmarks the repository does not ship "
        "(docs/evaluation.md)",
        "livecodebench, gpqa-diamond, mmlu-pro, arena-hard, a comma-separated list, or all",
        "where the suites read them: data/benchmarks"))
    prep = _prepare_parser(actions, "prepare", "stage", (
        "download, convert, check and decontaminate a stage's files, with a manifest (sha256 per "
        "file); resumable",
        "sft-stage-1, sft-stage-2, sft-swe, rlhf, rl-if, rl-math, rl-code, rl-swe, rm, a "
        "comma-separated list, or all",
        "the data folder the recipes read ($NEMO_CASCADE_DATA)"))
    prep.add_argument("--force", action="store_true",
                      help="write every file again, even those up to date")
    prep.add_argument(
        "--generator-url", help="rm: an OpenAI-compatible server for the synthetic off-topic pairs "
        "(paper App. C.1); without it the RM file holds the HelpSteer pairs only")
    prep.add_argument("--generator-model", help="rm: the model answering the prompts (chosen)")
    prep.add_argument("--rewriter-model",
                      help="rm: the model rewriting prompts off-topic (default: generator)")
    prep.add_argument("--weak-model",
                      help="rm: the model answering the rewrites (rejected; default: generator)")
    prep.add_argument(
        "--synthetic-pairs", type=int,
        help="rm: how many synthetic pairs (default 36000: §4.2's 82K "
        "less the HelpSteer pairs)")
    prep.add_argument("--generator-workers", type=int, default=8,
                      help="rm: pairs generated at a time (default 8)")
    prep.add_argument("--generator-max-tokens", type=int, default=4096,
                      help="rm: the longest generation the server is asked for (default 4096)")
    prep.add_argument("--drop-always-solved", metavar="FILE",
                      help="rl-code: pass rates of the weaker reference model (jsonl: prompt, "
                      "solved, samples; §4.6.1: AceReason-Nemotron-7B, 8 samples); the problems it "
                      "solved in every sample are left out")
    prep.add_argument("--drop-never-solved", metavar="FILE",
                      help="rl-code: pass rates of the stronger reference model (§4.6.1: "
                      "DeepSeek-R1-0528); the problems it solved in no sample are left out")


__all__ = ["cmd_convert", "cmd_data", "add_convert_parser", "add_data_parser"]
