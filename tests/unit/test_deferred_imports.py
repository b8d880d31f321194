"""docs/architecture.md's rule for imports inside functions, enforced: an import sits at the top of
its module unless it defers a package that is slow to import or not always installed (DEFERRED),
which the module itself does not load when it is imported."""
import ast
import sys
from pathlib import Path

import pytest

from tests.unit.test_import_rules import PKG, _module_file, imported_names

DEFERRED = {
    # a fifth of a second or more to import (measured: python -X importtime)
    "torch", "transformers", "vllm", "megatron", "transformer_engine", "nemo_run", "math_verify",
    "latex2sympy2_extended", "sympy", "matplotlib", "nltk", "pyarrow", "reasoning_gym", "wandb",
    # installed only with an extra of setup.py, not with the package itself
    "huggingface_hub", "tokenizers", "psutil",
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _statements(path: Path, pkg: Path):
    """``(lineno, names, inside_a_function)`` for each import statement of a module; those under
    ``if TYPE_CHECKING:`` are left out (they never run)."""
    found = []

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, True)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                continue
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child.lineno, imported_names(child, path, pkg), inside))
            else:
                visit(child, inside)

    visit(ast.parse(path.read_text()), False)
    return found


class ImportCost:
    """Which DEFERRED packages a module loads when it is imported: its top-level imports, followed
    through the package's own modules and the ``__init__`` of every package they sit in."""

    def __init__(self, pkg: Path):
        self.pkg, self._edges, self._direct = pkg, {}, {}
        for path in pkg.rglob("*.py"):
            top = [names for _, names, inside in _statements(path, pkg) if not inside]
            self._direct[path] = {n.split(".")[0] for names in top for n in names} & DEFERRED
            self._edges[path] = set().union(*(self.files(names) for names in top))

    def files(self, names: list[str]) -> set[Path]:
        """The package's files that importing ``names`` runs first-hand."""
        out = set()
        for name in names:
            if name.split(".")[0] == self.pkg.name:
                target = _module_file(name, self.pkg)
                if target is not None:
                    out.add(target)
                    rel = target.relative_to(self.pkg).parts
                    out.update(self.pkg.joinpath(*rel[:i], "__init__.py") for i in range(len(rel)))
        return out

    def of_names(self, names: list[str]) -> set[str]:
        """What importing ``names`` loads."""
        seen, todo = set(), list(self.files(names))
        while todo:
            path = todo.pop()
            if path not in seen:
                seen.add(path)
                todo.extend(self._edges[path])
        direct = {n.split(".")[0] for n in names} & DEFERRED
        return direct.union(*(self._direct[p] for p in seen))

    def of_module(self, path: Path) -> set[str]:
        """What importing the module at ``path`` loads."""
        parts = path.relative_to(self.pkg).with_suffix("").parts
        return self.of_names([".".join((self.pkg.name, *parts))])


def needless_deferrals(pkg: Path = PKG) -> list[str]:
    """Each import inside a function that defers nothing heavy the module does not already load,
    one line each."""
    cost, found = ImportCost(pkg), []
    for path in sorted(pkg.rglob("*.py")):
        loaded = cost.of_module(path)
        for line, names, inside in _statements(path, pkg):
            if not inside:
                continue
            where = f"{path.relative_to(pkg)}:{line} imports {names[0]}"
            if names[0].split(".")[0] in sys.stdlib_module_names:
                found.append(f"{where} (standard library) inside a function: import it at the top")
            elif not cost.of_names(names) - loaded:
                found.append(f"{where} inside a function, deferring nothing slow or optional: "
                             "import it at the top")
    return found


def test_an_import_inside_a_function_defers_something_slow_or_optional():
    assert needless_deferrals() == []


@pytest.mark.parametrize("body, expected", [
    ("def f():\n    import json\n", ["a.py:2 imports json (standard library) inside a function"]),
    ("def f():\n    from nemo_cascade import light\n",
     ["a.py:2 imports nemo_cascade.light inside"]),
    ("def f():\n    from nemo_cascade.heavy import g\n", []),
    ("import torch\n\ndef f():\n    from nemo_cascade import heavy\n", ["a.py:4 imports"]),
    ("def f():\n    import vllm\n", []),
    ("def f():\n    import numpy\n", ["a.py:2 imports numpy inside"]),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n"
     "def f():\n    import torch\n", []),
])
def test_the_rule_can_fail(tmp_path, body, expected):
    """A light module deferred, a heavy one deferred (allowed), one deferred by a module that
    loads its package anyway, the standard library, a third-party package either way."""
    pkg = tmp_path / "nemo_cascade"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "light.py").write_text("import json\n")
    (pkg / "heavy.py").write_text("import json\n\nfrom nemo_cascade import light\nimport torch\n")
    (pkg / "a.py").write_text(body)
    found = needless_deferrals(pkg)
    assert len(found) == len(expected) and all(f.startswith(e) for f, e in zip(found, expected))
