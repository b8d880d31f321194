"""The stage loop's typed interfaces (nemo_cascade/interfaces.py) are met by the classes that play
them: every method of the protocol exists on the class with the protocol's parameters (names, kinds
and defaults; the class may add optional ones), and every attribute is set by its constructor."""
from __future__ import annotations

import inspect
import re

import pytest

from nemo_cascade import interfaces
from nemo_cascade.actor.megatron import MegatronActor
from nemo_cascade.rewards import MixedScorer, Scorer
from nemo_cascade.rollout.vllm import RolloutEngine

MEETS = [(interfaces.Actor, MegatronActor), (interfaces.Engine, RolloutEngine),
         (interfaces.GroupScorer, Scorer), (interfaces.GroupScorer, MixedScorer)]


def _members(protocol) -> tuple[list[str], list[str]]:
    """The protocol's methods and its attributes (annotated names)."""
    methods = [n for n, v in vars(protocol).items()
               if inspect.isfunction(v) and not n.startswith("_")]
    return methods, list(protocol.__annotations__)


def _set_in_init(cls, name: str) -> bool:
    """Whether ``self.NAME =`` appears in the constructor of ``cls`` or a base class."""
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None and re.search(rf"\bself\.{name}\s*=", inspect.getsource(init)):
            return True
    return False


@pytest.mark.parametrize("protocol, cls", MEETS, ids=[f"{c.__name__}" for _, c in MEETS])
def test_the_class_meets_its_interface(protocol, cls):
    methods, attributes = _members(protocol)
    assert methods, protocol
    for name in methods:
        assert hasattr(cls, name), f"{cls.__name__} has no {name}()"
        want = inspect.signature(getattr(protocol, name)).parameters
        have = inspect.signature(getattr(cls, name)).parameters
        for param, p in want.items():
            assert param in have, f"{cls.__name__}.{name}() lacks parameter {param!r}"
            q = have[param]
            assert (q.kind, q.default) == (p.kind, p.default), f"{cls.__name__}.{name}({param})"
        extra = [q for n, q in have.items() if n not in want and q.kind not in (q.VAR_KEYWORD,
                                                                               q.VAR_POSITIONAL)]
        assert all(q.default is not q.empty for q in extra), f"{cls.__name__}.{name}(): {extra}"
    for name in attributes:
        assert _set_in_init(cls, name), f"{cls.__name__} never sets self.{name}"


def test_a_class_short_of_its_interface_fails_the_check():
    class HalfEngine:
        def __init__(self):
            self.dtype = "float32"

        def generate(self, prompts, n):
            return []

    short = r"HalfEngine\.generate\(\) lacks parameter 'sampling'"
    with pytest.raises(AssertionError, match=short):
        test_the_class_meets_its_interface(interfaces.Engine, HalfEngine)
    HalfEngine.generate = RolloutEngine.generate
    with pytest.raises(AssertionError, match=r"HalfEngine has no load_weights\(\)"):
        test_the_class_meets_its_interface(interfaces.Engine, HalfEngine)
