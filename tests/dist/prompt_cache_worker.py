"""torchrun worker for the sharded prompt cache (2 gloo processes, no model).

Run: torchrun --nproc_per_node=2 tests/dist/prompt_cache_worker.py FOLDER Each rank tokenizes its
share of one prompt file into the shared cache (data/prompt_cache.py); both ranks must then load the
same prompts as a rank reading the whole file in memory, bad rows of either share counted once and
named by their line in the file; a second load on both ranks finds the entry.
"""
import json
import sys
from pathlib import Path


def main():
    import torch.distributed as dist

    from nemo_cascade.runtime import ranks
    from nemo_cascade.config import Data
    from nemo_cascade.data import sft_cache
    from nemo_cascade.data.loader import load_prompts
    from nemo_cascade.rewards import get_domain
    from nemo_cascade.tooling.demo_data.tiny_tokenizer import build_tiny_tokenizer

    folder = Path(sys.argv[1])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    # deterministic: the same tokenizer on both ranks
    tok = build_tiny_tokenizer(folder / f"tok{rank}")
    path = folder / "math.jsonl"
    if rank == 0:
        rows = [
            json.dumps({"problem": f"What is {i} * 3?", "answer": str(3 * i)}) for i in range(40)]
        rows.insert(33, json.dumps({"problem": "no answer"}))  # in the second share: line 34
        path.write_text("\n".join(rows) + "\n\n")
    ranks.barrier()
    data = Data(source=str(path), max_bad_rows=1)
    cached = load_prompts(data, tok, "half", get_domain("math"), 512)
    again = load_prompts(data, tok, "half", get_domain("math"), 512)
    plain = load_prompts(Data(source=str(path), max_bad_rows=1, cache=False), tok, "half",
                         get_domain("math"), 512)
    entries = [p for p in (folder / sft_cache.CACHE_DIR).iterdir() if p.name != "sources"]
    manifest = json.loads((entries[0] / "manifest.json").read_text())
    result = {
        "rank": rank, "entries": len(entries), "parts": [p["rows"] for p in manifest["parts"]],
        "first_bad": next(p["first_bad"] for p in manifest["parts"] if p["first_bad"]),
        "same": list(cached) == list(plain) and list(cached.alternate) == list(plain.alternate),
        "again": list(again) == list(plain), "bad_rows": cached.bad_rows,
        "kind": type(cached).__name__}
    results = ranks.gather_objects(result)
    if rank == 0:
        (folder / "result.json").write_text(json.dumps(results))
    # no rank tears the group down while another still uses it (gloo: "connection closed" errors)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    from nemo_cascade.runtime import process_exit

    process_exit.run_and_exit(main)  # as nemo-cascade ends: no teardown for a gloo thread to abort
