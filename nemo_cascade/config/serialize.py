"""The JSON form of a config (a run's ``config.json``): written by :func:`dumps`, read back by
:func:`from_dict`."""
from __future__ import annotations

import json
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from .checks import type_problem
from .schema import Cascade, ConfigError
from .versions import SCHEMA_VERSION, schema_version_of


def field_types(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def to_dict(cfg: Any) -> Any:
    if is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in fields(cfg)}
    if isinstance(cfg, tuple):
        return [to_dict(x) for x in cfg]
    return cfg


def from_dict(cls, data: Any, where: str = "") -> Any:
    """Inverse of :func:`to_dict` (used to read a run's config.json): missing keys take their
    defaults; unknown keys, values of the wrong type and missing required fields raise ConfigError
    naming the field. A cascade's ``schema_version`` (:func:`dumps` writes it) is checked and
    dropped: every version's fields read the same."""
    name = where or cls.__name__
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: expected an object of {cls.__name__} fields, got "
                          f"{type(data).__name__}")
    if cls is Cascade and "schema_version" in data:
        schema_version_of(data, where or "config.json")
        data = {k: v for k, v in data.items() if k != "schema_version"}
    types = field_types(cls)
    unknown = set(data) - set(types)
    if unknown:
        raise ConfigError(f"{name}: unknown key(s) {sorted(map(str, unknown))!r:.200}")
    missing = [f.name for f in fields(cls) if f.name not in data
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ConfigError(f"{name}: missing key(s) {missing}")
    kwargs = {}
    for key, value in data.items():
        tp, at = types[key], f"{where}.{key}".strip(".")
        if is_dataclass(tp):
            kwargs[key] = from_dict(tp, value, at)
        elif typing.get_origin(tp) is tuple:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{at}: expected a list, got {type(value).__name__}")
            item = typing.get_args(tp)[0]
            if is_dataclass(item):
                kwargs[key] = tuple(from_dict(item, v, f"{at}.{i}") for i, v in enumerate(value))
            else:
                kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
        problem = type_problem(kwargs[key], tp)
        if problem:
            raise ConfigError(f"{at}: expected {problem}, got {type(value).__name__} {value!r:.80}")
    return cls(**kwargs)


def dumps(cfg: Cascade) -> str:
    """A run's config.json: the resolved config and the schema version it was written with."""
    return json.dumps({"schema_version": SCHEMA_VERSION, **to_dict(cfg)}, indent=2, sort_keys=False)

