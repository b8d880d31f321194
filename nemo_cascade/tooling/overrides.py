"""``a.b.c=value`` command-line overrides of a recipe (``nemo-cascade run RECIPE key=value ...``):
each string is parsed as its field's type and the result validated; a bad key or value is one
ConfigError line naming it."""
from __future__ import annotations

import re
import typing
from dataclasses import is_dataclass, replace
from typing import Any, Literal

from nemo_cascade.config import Cascade, ConfigError, LengthPhase, validate
from nemo_cascade.config.serialize import field_types


def _coerce(value: str, tp: Any, where: str) -> Any:
    """Parse a command-line string as `tp`; raise ConfigError naming `where` on failure."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{where}: expected one of {list(choices)}, got {value!r:.80}")
        return value
    if origin is typing.Union:  # Optional[X]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value.lower() in ("none", "null"):
            return None
        return _coerce(value, args[0], where)
    if origin is tuple and typing.get_args(tp)[0] is LengthPhase:
        return tuple(_length_phase(item, where) for item in value.split(",") if item)
    if origin is tuple and is_dataclass(typing.get_args(tp)[0]):
        raise ConfigError(
            f"{where}: a list of {typing.get_args(tp)[0].__name__} sections; set it in a recipe")
    if origin is tuple:
        return tuple(s for s in value.split(",") if s) if value else ()
    try:
        if tp is bool:
            if value.lower() in ("1", "true", "yes", "on"):
                return True
            if value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if tp is int:
            return int(value)
        if tp is float:
            return float(value)
        if tp is str:
            return value
    except ValueError:
        pass
    raise ConfigError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {value!r:.80}")


def _length_phase(item: str, where: str) -> LengthPhase:
    """``STEPS:TOKENS[:OVERLONG][:T<temperature>][:C<clip ratio>]`` → LengthPhase (OVERLONG default
    none, temperature default the stage's, no clip-ratio end): ``70:40960:zero:T0.8``,
    ``190:24576:filter:C0.1``. The ``T`` / ``C`` mark the numbers, so each optional field may come
    alone and older command lines read as before."""
    expected = "STEPS:TOKENS[:OVERLONG][:T<temperature>][:C<clip ratio>]"
    parts = item.split(":")
    if not 2 <= len(parts) <= 5:
        raise ConfigError(f"{where}: expected {expected},..., got {item!r:.80}")
    # ``C`` marks a number only (``C0.1``), so a misspelt OVERLONG such as ``clip`` is named as one.
    marks = {x: ("C" if x[:1] in "Cc" and re.fullmatch(r"[0-9.]+", x[1:])
                 else "T" if x[:1] in "Tt" else "")
             for x in parts[2:]}
    marked = {m: [x[1:] for x in parts[2:] if marks[x] == m] for m in ("T", "C")}
    overlongs = [x for x in parts[2:] if not marks[x]]
    if len(marked["T"]) > 1 or len(marked["C"]) > 1 or len(overlongs) > 1:
        raise ConfigError(
            f"{where}: expected at most one OVERLONG, one T<temperature> and one C<clip ratio> per "
            f"phase, got {item!r:.80}")
    overlong = _coerce(overlongs[0] if overlongs else "none",
                       typing.get_type_hints(LengthPhase)["overlong"], where)
    temperature = (_coerce(marked["T"][0], float, f"{where} (T<temperature>)") if marked["T"]
                   else None)
    clip = _coerce(marked["C"][0], float, f"{where} (C<clip ratio>)") if marked["C"] else 0.0
    return LengthPhase(_coerce(parts[0], int, where), _coerce(parts[1], int, where), overlong,
                       temperature, clip)


def _stage_index(cfg: Cascade, key: str, where: str) -> int:
    names = [s.name for s in cfg.stages]
    if key in names:
        return names.index(key)
    # isdigit() would admit '²', which int() refuses
    if key.isdecimal() and int(key) < len(cfg.stages):
        return int(key)
    raise ConfigError(f"{where}: no stage {key!r}; stages are {names}")


def _set(obj: Any, path: list[str], value: str, where: str, root: Cascade) -> Any:
    if isinstance(obj, tuple):  # stages.<name|index>.…
        idx = _stage_index(root, path[0], where)
        items = list(obj)
        items[idx] = _set(items[idx], path[1:], value, where, root)
        return tuple(items)
    if not is_dataclass(obj):
        raise ConfigError(f"{where}: {type(obj).__name__} has no sub-fields")
    types = field_types(type(obj))
    name = path[0]
    if name not in types:
        raise ConfigError(f"{where}: unknown key {name!r}; expected one of {sorted(types)}")
    if len(path) > 1 and isinstance(getattr(obj, name), tuple) and name != "stages":
        raise ConfigError(
            f"{where}: set {name!r} as a whole ({'.'.join(where.split('.')[:-len(path) + 1])}=...)")
    if len(path) == 1:
        if (is_dataclass(getattr(obj, name))
                or isinstance(getattr(obj, name), tuple) and name == "stages"):
            raise ConfigError(
                f"{where}: {name!r} is a section; set one of its fields ({where}.FIELD=VALUE)")
        return replace(obj, **{name: _coerce(value, types[name], where)})
    return replace(obj, **{name: _set(getattr(obj, name), path[1:], value, where, root)})


def apply_overrides(cfg: Cascade, overrides: list[str]) -> Cascade:
    """Apply ``a.b.c=value`` strings. ``stages.NAME.…`` (or an index) addresses one stage;
    ``stages.*.…`` addresses every stage."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r:.200}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        path = key.split(".")
        # the error stays one line
        where = key if key.isprintable() and len(key) <= 200 else f"{key!r:.200}"
        if path[0] == "stages" and len(path) > 2 and path[1] == "*":
            for s in cfg.stages:
                cfg = _set(cfg, ["stages", s.name, *path[2:]], value, where, cfg)
        else:
            cfg = _set(cfg, path, value, where, cfg)
    return validate(cfg)


__all__ = ["apply_overrides"]
