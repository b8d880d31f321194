"""Loading a recipe: a function that returns a :class:`~.schema.Cascade`, named by ``path.py[:fn]``
or ``package.module:fn``; and a plugin, a file of the user's own that registers what a recipe names
(a reward domain, an evaluation suite: docs/rewards.md). Standard library only, like the rest of
``nemo_cascade.config``: a job's batch shell, outside the container, loads the recipe too
(tooling/job_recipe.py).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
import traceback

from .schema import Cascade, ConfigError


class RecipeImportError(ConfigError):
    """The recipe file imports a module this Python does not have (a batch host without the
    stack)."""


def load_recipe(spec: str) -> Cascade:
    """A recipe is a function returning a Cascade: ``path.py[:fn]`` or ``module:fn`` (default fn:
    recipe)."""
    target, _, fn = spec.partition(":")
    fn = fn or "recipe"
    # errors stay one line
    shown, shown_target = (x if x.isprintable() else repr(x) for x in (spec, target))
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise ConfigError(f"recipe {shown_target}: no such file")
        mod_spec = importlib.util.spec_from_file_location(f"nemo_cascade_recipe_{path.stem}", path)
        module = importlib.util.module_from_spec(mod_spec)
        try:
            mod_spec.loader.exec_module(module)
        except RecipeImportError:
            raise  # a plugin the recipe loads imports what this Python lacks: already one line
        except ImportError as e:
            raise RecipeImportError(f"recipe {shown}: {_raised_where(e)}") from None
        except Exception as e:  # the recipe file's own code (a syntax error): its line, not a trace
            raise ConfigError(f"recipe {shown}: {_raised_where(e)}") from None
    else:
        if not target or target.startswith("."):  # importlib: ValueError / TypeError (relative)
            raise ConfigError(
                f"recipe {shown}: expected recipes/NAME.py[:function] or package.module:function"
            )
        try:
            module = importlib.import_module(target)
        except (ImportError, ValueError) as e:  # ValueError: a name no import hook maps, '/'
            raise ConfigError(
                f"recipe {shown}: cannot import module {target!r} ({_first_line(e)})"
            ) from None
    recipe = getattr(module, fn, None)
    if not callable(recipe):
        raise ConfigError(f"recipe {shown}: no function {fn!r} in {shown_target}")
    try:
        inspect.signature(recipe).bind()
    except TypeError:
        raise ConfigError(
            f"recipe {shown}: {fn}() needs arguments; a recipe is called with none"
        ) from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    try:
        cfg = recipe()
    except ConfigError:
        raise  # already one line (a recipe may check its own inputs)
    except Exception as e:
        raise ConfigError(f"recipe {shown}: {fn}() {_raised_where(e)}") from None
    if not isinstance(cfg, Cascade):
        raise ConfigError(
            f"recipe {shown}: {fn}() returned {type(cfg).__name__}, "
            f"expected nemo_cascade.config.Cascade"
        )
    return cfg


def load_plugin(path: str | Path) -> ModuleType:
    """Import the Python file ``path`` once per process, however often a recipe that names it is
    loaded (each rank loads the recipe; a test may load it twice), so what it registers is
    registered once. A missing file or an error in it is one ConfigError line."""
    file = Path(path).resolve()
    name = "nemo_cascade_plugin_" + hashlib.sha256(str(file).encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name]
    if not file.is_file() or file.suffix != ".py":
        raise ConfigError(f"plugin {path}: no such Python file")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before it runs: a plugin that loads itself again gets this one
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the user's own code: its line, not a trace
        del sys.modules[name]
        # a batch host without the stack (tooling/job_recipe.py): not checked there, not an error
        kind = RecipeImportError if isinstance(e, ImportError) else ConfigError
        raise kind(f"plugin {path}: {_raised_where(e)}") from None
    return module


def _raised_where(e: BaseException) -> str:
    """``raised KeyError: 'x' (recipes/mine.py:12)``: the error and the last line of the user's code
    it came from (a SyntaxError names its own line)."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/importlib/" not in f.filename and "<frozen" not in f.filename]
    where = (
        f"{e.filename}:{e.lineno}"
        if isinstance(e, SyntaxError)
        else f"{ours[-1].filename}:{ours[-1].lineno}" if ours else ""
    )
    message = e.msg if isinstance(e, SyntaxError) else _first_line(e)
    return f"raised {type(e).__name__}: {message}" + (f" ({where})" if where else "")


def _first_line(e: BaseException) -> str:
    lines = str(e).splitlines()
    return lines[0][:200] if lines else type(e).__name__


__all__ = ["load_recipe", "RecipeImportError"]
