"""`nemo-cascade data prepare` at scale: rows per second and peak memory while streaming a large SFT
source through the checks and the 9-gram decontamination index (nemo_cascade/prepare).

Writes ``--rows`` synthetic SFT rows in the released schema (``messages``, a ~60-word question, a
thinking response of ~1 KB; every 1000th row holds a GSM8K test question, which must be dropped) as
``SRC/nvidia/Nemotron-Cascade-SFT-Stage-1/science.jsonl``, then times
``prepare_command("sft-stage-1")`` on the science file only. Prints rows/s, µs per row spent in the
decontamination lookups alone, and the peak RSS over the source file's size (a streaming pipeline
stays far below 1; one that loaded the file would exceed it). Appends to
``bench/results/prepare_stream.jsonl``.

    .venv/bin/python bench/prepare_stream.py                 # 200,000 rows
    .venv/bin/python bench/prepare_stream.py --rows 1000000
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "prepare_stream.jsonl"
WORDS = ("river stone garden market light number window paper orbit signal engine forest cotton "
         "ladder silver harbor planet rhythm canvas mirror").split()


def write_source(path: Path, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    gsm = [json.loads(line)["question"]
           for line in gzip.open(ROOT / "data/gsm8k/test.jsonl.gz", "rt")]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for i in range(rows):
            q = (gsm[i // 1000 % len(gsm)] if i % 1000 == 0
                 else " ".join(rng.choices(WORDS, k=60)) + "?")
            a = "<think>\n" + " ".join(rng.choices(WORDS, k=150)) + "\n</think>\n\nDone."
            f.write(json.dumps({"messages": [{"role": "user", "content": q},
                                             {"role": "assistant", "content": a}],
                                "source": "bench", "generator": "none"}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()

    from nemo_cascade.tooling.prepare import decontam, prepare_command
    from nemo_cascade.tooling.prepare.stages import STAGES

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        source = src / "nvidia/Nemotron-Cascade-SFT-Stage-1/science.jsonl"
        write_source(source, args.rows)
        size = source.stat().st_size
        STAGES["sft-stage-1"] = tuple(o for o in STAGES["sft-stage-1"]
                                      if o.path.endswith("science.jsonl"))
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        start = time.perf_counter()
        manifest, _ = prepare_command("sft-stage-1", Path(tmp) / "out", source_dir=src,
                                      progress=False)
        seconds = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        index = decontam.build_index()
        texts = [json.loads(line)["messages"][0]["content"]
                 for _, line in zip(range(20_000), open(source))]
        t0 = time.perf_counter()
        hits = sum(index.match([t]) is not None for t in texts)
        lookup_us = (time.perf_counter() - t0) / len(texts) * 1e6
    entry = manifest["files"]["sft-stage-1/science.jsonl"]
    result = {"rows": args.rows, "kept": entry["rows"], "dropped": entry["dropped"],
              "seconds": round(seconds, 2), "rows_per_s": round(args.rows / seconds),
              "decontam_us_per_row": round(lookup_us, 1), "source_mib": round(size / 2**20, 1),
              "peak_rss_mib": round(peak / 2**20, 1),
              "rss_growth_over_source": round((peak - rss0) / size, 3), "sample_hits": hits}
    print(f"{args.rows} rows in {seconds:.1f} s: {result['rows_per_s']} rows/s; decontamination "
          f"{lookup_us:.1f} µs/row; dropped {entry['dropped']}; peak RSS {result['peak_rss_mib']} "
          f"MiB for a {result['source_mib']} MiB source "
          f"(RSS growth / source size = {result['rss_growth_over_source']})")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
