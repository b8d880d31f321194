"""docs/architecture.md's dependency rules, enforced: who may import megatron / vllm / nemo_run, and nothing imports upward."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "nemo_cascade"

# Third-party packages confined to a few modules (path prefixes relative to nemo_cascade/).
CONFINED = {
    "megatron": ("actor/", "convert/", "checkpoint.py", "weight_sync.py"),
    "vllm": ("rollout/", "weight_sync.py"),
    "nemo_run": ("tooling/launch.py",),
}
# The training core's layers, top to bottom: a module may import only from its own layer or below.
LAYERS = [
    {"cascade", "stage_selection", "base_model", "preflight", "lineage", "forgetting", "plan",
     "plan_rm", "served_rms"},
    {"stage"},
    {"actor", "rollout", "weight_sync", "rewards", "data", "evaluate", "checkpoint", "algorithms", "convert",
     "metrics", "ranks", "provenance", "saves", "step_rollouts", "teachers", "repair",
     "interfaces"},
    {"config", "types", "faults", "files", "stop_request", "parent_death", "console", "errors",
     "cpu_math", "deadline", "server_token", "heartbeat", "process_exit"},
]
# Pairs within a layer that import one way only (importer, imported): docs/architecture.md.
ONE_WAY = {("data", "rewards"), ("rewards", "rollout"), ("convert", "data")}
# The tooling around it (nemo_cascade/tooling/), which may import any core module, never the other way round.
TOOLING_LAYERS = [
    {"cli", "cli_parser", "cli_tools", "job_recipe"}, {"launch", "launch_tasks", "doctor", "dry_run"},
    {"doctor_servers"},
    {"doctor_table"},
    {"plan_table", "plan_time", "release", "model_card", "compare", "standalone", "prepare"}, {"report"},
    {"report_run"},
    # the demo sets, suites and tiny models (they import only the core, whose registries they fill), the launcher's
    # torchrun and run lock, the IFBench tagger's build script, the command line's key=value overrides, where a worker's output goes
    {"demo_data", "torchrun", "run_lock", "ifbench_tagger", "overrides", "worker_log"},
]


def _layer(name: str, layers=LAYERS) -> int:
    for i, layer in enumerate(layers):
        if name in layer:
            return i
    where = "TOOLING_LAYERS" if layers is TOOLING_LAYERS else "LAYERS"
    raise AssertionError(f"{name} is in no layer of the import rules; add it to {where}")


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the module's package
                base = path.relative_to(PKG.parent).with_suffix("").parts[:-node.level]
                yield ".".join(base + ((node.module,) if node.module else ()))
            else:
                yield node.module or ""


MODULES = sorted(p for p in PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PKG)) for p in MODULES])
def test_confined_and_downward_imports(path):
    rel = str(path.relative_to(PKG))
    parts = rel.removesuffix(".py").split("/")
    tooling = parts[0] == "tooling"
    own = parts[1] if tooling and len(parts) > 1 else parts[0]
    if own == "__init__":
        return
    for name in _imports(path):
        top = name.split(".")[0]
        if top in CONFINED:
            assert rel.startswith(CONFINED[top]), f"{rel} imports {name}; {top} is allowed only in {CONFINED[top]}"
        if top != "nemo_cascade" or "." not in name:
            continue
        target = name.split(".")[1:]
        if target[0] == "tooling":
            assert tooling, f"{rel} imports {name}: the training core never imports the tooling"
            if len(target) > 1 and target[1] != own:
                assert _layer(target[1], TOOLING_LAYERS) >= _layer(own, TOOLING_LAYERS), \
                    f"{rel} imports upward: {name}"
        elif not tooling and target[0] != own:
            assert _layer(target[0]) >= _layer(own), f"{rel} imports upward: {name}"
            assert (own, target[0]) not in ONE_WAY, f"{rel} imports {name}: {target[0]} reads {own}"


def test_every_core_module_has_a_layer():
    """A new core module must be placed in LAYERS (else the rule above would not see it import upward)."""
    for path in PKG.iterdir():
        name = path.name.removesuffix(".py")
        if name not in ("__init__", "__pycache__", "tooling") and (path.suffix == ".py" or path.is_dir()):
            _layer(name)
    for path in (PKG / "tooling").iterdir():
        name = path.name.removesuffix(".py")
        if name not in ("__init__", "__pycache__") and (path.suffix == ".py" or path.is_dir()):
            _layer(name, TOOLING_LAYERS)


def test_light_modules_import_without_megatron_or_vllm():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('megatron', 'vllm', 'nemo_run'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import nemo_cascade.config, nemo_cascade.types, nemo_cascade.algorithms.grpo, nemo_cascade.algorithms.sft\n"
        "import nemo_cascade.rewards, nemo_cascade.data.loader, nemo_cascade.data.chat, nemo_cascade.convert.table\n"
        "import nemo_cascade.tooling.cli\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_config_imports_no_torch():
    code = ("import sys; import nemo_cascade.config; "
            "assert 'torch' not in sys.modules, 'nemo_cascade.config must not import torch'")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_core_without_the_demo_data_names_what_registers_it():
    """The core alone knows no generated set, suite or base model; a config naming one ends in one line that says
    what registers them (a process that skipped ``demo_data.register()``), not in a bare "expected one of []"."""
    code = (
        "from nemo_cascade.config import Data\n"
        "from nemo_cascade.data import generated\n"
        "from nemo_cascade.data.rows import DataError\n"
        "from nemo_cascade.evaluate.suites import REGISTERED_SUITES\n"
        "from nemo_cascade.base_model import BUILDERS\n"
        "assert not REGISTERED_SUITES and not BUILDERS\n"
        "for source in ('synthetic:arithmetic', 'benchmark:gsm8k'):\n"
        "    try:\n"
        "        generated.rows(Data(source=source))\n"
        "    except DataError as e:\n"
        "        print(e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all("no " in line and "demo_data.register()" in line for line in lines), lines
