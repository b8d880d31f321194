"""docs/architecture.md's dependency rules, enforced: who may import megatron / vllm / nemo_run,
nothing imports upward, and no module imports itself through others (an import circle)."""
import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "nemo_cascade"

# Third-party packages confined to a few modules (path prefixes relative to nemo_cascade/).
CONFINED = {
    "megatron": ("actor/", "convert/", "checkpoint/", "weight_sync.py"),
    "vllm": ("rollout/", "weight_sync.py"),
    "nemo_run": ("tooling/launch.py",),
}
# Packages whose modules are placed one by one (the others are placed whole).
GROUPED = ("cascade", "runtime")
RUNTIME = sorted(f"runtime/{p.stem}" for p in (PKG / "runtime").glob("*.py")
                 if p.stem != "__init__")
# The training core's layers, top to bottom: a module may import only from its own layer or below.
LAYERS = [
    {"cascade/driver", "cascade/stage_selection", "cascade/base_model", "cascade/preflight",
     "cascade/lineage", "cascade/forgetting", "cascade/served_rms", "cascade/stage_data"},
    {"cascade/stage"},
    {"actor", "rollout", "weight_sync", "rewards", "data", "evaluate", "checkpoint", "algorithms",
     "convert", "interfaces", "cascade/metrics", "cascade/saves", "cascade/teachers",
     "cascade/repair", "cascade/rm_server"},
    {"config", "types", "errors", *RUNTIME},
]
# Pairs within a layer that import one way only (importer, imported): docs/architecture.md.
ONE_WAY = {("data", "rewards"), ("rewards", "rollout"), ("convert", "data")}
# The tooling around it (nemo_cascade/tooling/), which may import any core module, never the other
# way round.
TOOLING_LAYERS = [
    {"cli", "cli_parser", "cli_tools", "job_recipe"},
    {"launch", "launch_tasks", "doctor", "dry_run"},
    {"doctor_servers"},
    {"doctor_table"},
    {"plan_table", "plan_time", "release", "model_card", "compare", "standalone", "prepare"},
    {"report"},
    {"report_run"},
    # the demo sets, suites and tiny models (they import only the core, whose registries they fill),
    # the launcher's torchrun and run lock, the IFBench tagger's build script, the command line's
    # key=value overrides, where a worker's output goes, the memory plan
    {"demo_data", "torchrun", "run_lock", "ifbench_tagger", "overrides", "worker_log", "plan"},
]


def _layer(name: str, layers=LAYERS) -> int:
    for i, layer in enumerate(layers):
        if name in layer:
            return i
    where = "TOOLING_LAYERS" if layers is TOOLING_LAYERS else "LAYERS"
    raise AssertionError(f"{name} is in no layer of the import rules; add it to {where}")


def _unit(parts: list[str]) -> str:
    """What LAYERS places for a module path under the package (``["cascade", "stage"]``): a grouped
    package's module, or a top-level module or package."""
    if parts[0] in GROUPED and len(parts) > 1 and parts[1] != "__init__":
        return f"{parts[0]}/{parts[1]}"
    return parts[0]


def _is_ours(dotted: str, pkg: Path) -> bool:
    """Whether ``nemo_cascade.a.b`` names a module or package of ``pkg``."""
    where = pkg.joinpath(*dotted.split(".")[1:])
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imported_names(node: ast.Import | ast.ImportFrom, path: Path, pkg: Path = PKG) -> list[str]:
    """The names one import statement of the module at ``path`` imports: ``from P import m``
    counts as ``P.m`` where ``m`` is a module of ours, so that ``from nemo_cascade import config``
    is seen as an import of config."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:  # relative import: resolve against the module's package
        base = path.relative_to(pkg.parent).with_suffix("").parts[:-node.level]
        module = ".".join(base + ((node.module,) if node.module else ()))
    else:
        module = node.module or ""
    subs = [f"{module}.{a.name}" for a in node.names
            if module.split(".")[0] == "nemo_cascade" and _is_ours(f"{module}.{a.name}", pkg)]
    return subs or [module]


def _imports(path: Path, pkg: Path = PKG):
    """Every name a module imports, anywhere in it (:func:`imported_names`)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield from imported_names(node, path, pkg)


def layer_violations(path: Path, pkg: Path = PKG) -> list[str]:
    """What the module at ``path`` imports against the rules, one line each."""
    rel = str(path.relative_to(pkg))
    parts = rel.removesuffix(".py").split("/")
    tooling = parts[0] == "tooling"
    own = parts[1] if tooling and len(parts) > 1 else _unit(parts)
    if own == "__init__":
        return []
    found = []
    for name in _imports(path, pkg):
        top = name.split(".")[0]
        if top in CONFINED and not rel.startswith(CONFINED[top]):
            found.append(f"{rel} imports {name}; {top} is allowed only in {CONFINED[top]}")
        if top != "nemo_cascade" or "." not in name:
            continue
        target = name.split(".")[1:]
        if target[0] == "tooling":
            if not tooling:
                found.append(f"{rel} imports {name}: the training core never imports the tooling")
            elif len(target) > 1 and target[1] != own and \
                    _layer(target[1], TOOLING_LAYERS) < _layer(own, TOOLING_LAYERS):
                found.append(f"{rel} imports upward: {name}")
        elif not tooling and _unit(target) not in (own, *GROUPED):
            if _layer(_unit(target)) < _layer(own):
                found.append(f"{rel} imports upward: {name}")
            if (own, _unit(target)) in ONE_WAY:
                found.append(f"{rel} imports {name}: {_unit(target)} reads {own}")
    return found


def _module_file(dotted: str, pkg: Path) -> Path | None:
    """The file of ``nemo_cascade.a.b`` (or of its nearest module, for ``a.b.attribute``)."""
    parts = dotted.split(".")[1:]
    while parts:
        where = pkg.joinpath(*parts)
        for candidate in (where.with_suffix(".py"), where / "__init__.py"):
            if candidate.is_file():
                return candidate
        parts = parts[:-1]
    return None


def import_circles(pkg: Path = PKG) -> list[list[str]]:
    """Groups of modules that import each other through a chain (imports inside functions
    included), each as sorted paths: Tarjan's strongly connected components of more than one module.
    A package's ``__init__`` reached only as the parent of an imported submodule is not an edge."""
    modules = sorted(pkg.rglob("*.py"))
    edges = {m: set() for m in modules}
    for m in modules:
        for name in _imports(m, pkg):
            if name.split(".")[0] == "nemo_cascade":
                target = _module_file(name, pkg)
                if target is not None and target != m:
                    edges[m].add(target)
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(str(c.relative_to(pkg)) for c in component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(modules)))
    try:
        for v in modules:
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def layers_picture() -> str:
    """The layers as docs/architecture.md draws them, top to bottom."""
    rows = ["tooling/ (imports any core module; the core never imports it)"]
    for layer in LAYERS:
        rows.append("  ↓")
        rows.extend(textwrap.wrap("  ".join(sorted(layer)), 96))
    return "\n".join(rows)


MODULES = sorted(p for p in PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(PKG)) for p in MODULES])
def test_confined_and_downward_imports(path):
    assert layer_violations(path) == []


def test_no_import_circles():
    assert import_circles() == []


def test_the_docs_picture_is_the_rule():
    doc = (PKG.parent / "docs" / "architecture.md").read_text()
    assert layers_picture() in doc, (
        f"docs/architecture.md should draw the layers as:\n{layers_picture()}")


def test_a_circle_and_an_upward_import_fail_the_rules(tmp_path):
    """The checks above can fail: a package whose config imports the stage loop (upward) and whose
    two runtime modules import each other (a circle, one import inside a function)."""
    pkg = tmp_path / "nemo_cascade"
    for folder in (pkg, pkg / "config", pkg / "cascade", pkg / "runtime"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (pkg / "config" / "checks.py").write_text("from nemo_cascade.cascade.stage import run_sft\n")
    (pkg / "cascade" / "stage.py").write_text("from nemo_cascade.config import checks\n")
    (pkg / "runtime" / "files.py").write_text("from nemo_cascade.runtime import heartbeat\n")
    (pkg / "runtime" / "heartbeat.py").write_text("def f():\n    from . import files\n")
    assert layer_violations(pkg / "config" / "checks.py", pkg) == [
        "config/checks.py imports upward: nemo_cascade.cascade.stage"]
    assert layer_violations(pkg / "runtime" / "files.py", pkg) == []  # one layer: allowed, but...
    circles = import_circles(pkg)
    assert ["runtime/files.py", "runtime/heartbeat.py"] in circles
    assert ["cascade/stage.py", "config/checks.py"] in circles


def test_every_core_module_has_a_layer():
    """A new core module must be placed in LAYERS (else the rule above would not see it import
    upward)."""
    for path in [*PKG.iterdir(), *(p for group in GROUPED for p in (PKG / group).iterdir())]:
        name = path.name.removesuffix(".py")
        if name in ("__init__", "__pycache__", "tooling", *GROUPED):
            continue
        if path.suffix == ".py" or path.is_dir():
            _layer(_unit(list(path.relative_to(PKG).with_suffix("").parts)))
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
        "import nemo_cascade.config, nemo_cascade.types, nemo_cascade.algorithms.grpo, "
        "nemo_cascade.algorithms.sft\n"
        "import nemo_cascade.rewards, nemo_cascade.data.loader, nemo_cascade.data.chat, "
        "nemo_cascade.convert.table\n"
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
    """The core alone knows no generated set, suite or base model; a config naming one ends in one
    line that says what registers them (a process that skipped ``demo_data.register()``), not in a
    bare "expected one of []"."""
    code = (
        "from nemo_cascade.config import Data\n"
        "from nemo_cascade.data import generated\n"
        "from nemo_cascade.data.rows import DataError\n"
        "from nemo_cascade.evaluate.suites import REGISTERED_SUITES\n"
        "from nemo_cascade.cascade.base_model import BUILDERS\n"
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
    assert len(lines) == 2 and all("no " in line and "demo_data.register()" in line
                                   for line in lines), lines
