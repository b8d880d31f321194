"""lm-eval's IFEval checkers, loaded as the reference the agreement tests compare against (tests
only).

``lm_eval.tasks`` imports the whole evaluation stack (datasets, ...) on import, which the IFEval
checkers do not need, so their three modules are loaded by file path under light stand-in parent
packages. lm-eval's ``instructions_util`` downloads NLTK's Punkt model on import when it is missing;
pointing NLTK at the model this project ships (the same English model) keeps that offline.
langdetect is seeded so that both sides see the same language guesses.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path


def load_lm_eval_ifeval():
    """``(instructions_registry, utils)`` of lm-eval's IFEval task.

    Raises ImportError when lm-eval (``tools/setup_venv.sh`` installs it) is missing: the agreement
    tests must fail loudly rather than be skipped.
    """
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "lm-eval is not installed (tools/setup_venv.sh installs lm-eval==0.4.13 --no-deps)")
    root = Path(list(spec.submodule_search_locations)[0])
    ifeval_dir = root / "tasks" / "ifeval"
    if not (ifeval_dir / "instructions_registry.py").is_file():
        raise ImportError(f"lm-eval at {root} has no IFEval task")

    from langdetect import DetectorFactory

    from nemo_cascade.rewards.ifeval.punkt import register_nltk_data

    register_nltk_data()
    DetectorFactory.seed = 0
    importlib.import_module("lm_eval")  # light: its heavy parts load lazily
    added = []
    for name, path in (("lm_eval.tasks", root / "tasks"), ("lm_eval.tasks.ifeval", ifeval_dir)):
        if name not in sys.modules:
            stand_in = types.ModuleType(name)
            stand_in.__path__ = [str(path)]
            sys.modules[name] = stand_in
            added.append(name)
    try:
        registry = importlib.import_module("lm_eval.tasks.ifeval.instructions_registry")
        utils = importlib.import_module("lm_eval.tasks.ifeval.utils")
    finally:
        for name in added:  # leave no half-imported lm_eval package behind for other tests
            sys.modules.pop(name, None)
    return registry, utils
