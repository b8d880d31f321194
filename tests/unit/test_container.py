"""containers/Dockerfile installs exactly the GPU stack setup.py's ``gpu`` extra pins (and the project's own
dependencies), so the image and ``pip install .[gpu]`` cannot drift apart."""
import ast
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "containers" / "Dockerfile"
_QUOTED = re.compile(r'"([A-Za-z0-9][A-Za-z0-9._\-\[\],]*(?:[=<>!~]=?[^"\s]*)?)"')


def _setup_kwargs() -> dict:
    """setup()'s keyword arguments, read from setup.py's source (literals only)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords
            if kw.arg in ("extras_require", "install_requires")}


def _dockerfile_requirements() -> dict:
    """Every quoted requirement of the Dockerfile's ``pip install`` lines, by canonical name."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())  # join continued lines
    reqs = {}
    for line in text.splitlines():
        if "pip install" in line and not line.lstrip().startswith("#"):
            for spec in _QUOTED.findall(line):
                r = Requirement(spec)
                reqs[canonicalize_name(r.name)] = r
    return reqs


def _pins(reqs) -> dict:
    return {canonicalize_name(r.name): (str(r.specifier), sorted(r.extras)) for r in reqs}


def test_dockerfile_pins_the_gpu_extra():
    gpu = [Requirement(s) for s in _setup_kwargs()["extras_require"]["gpu"]]
    pinned = {r for r in gpu if any(s.operator == "==" for s in r.specifier)}
    assert {canonicalize_name(r.name) for r in pinned} >= {"torch", "vllm", "megatron-core", "transformer-engine"}
    docker = _dockerfile_requirements()
    for name, spec in _pins(gpu).items():
        if name == "psutil" and name not in docker:
            continue
        assert name in docker, f"containers/Dockerfile does not install {name} (setup.py gpu extra: {spec})"
        assert (str(docker[name].specifier), sorted(docker[name].extras)) == spec, \
            f"{name}: Dockerfile {docker[name]} != setup.py gpu extra {spec}"


def test_dockerfile_installs_the_project_dependencies():
    """The project goes in with --no-deps (re-resolving could move a pin): its install_requires come before."""
    docker = _dockerfile_requirements()
    for spec in _setup_kwargs()["install_requires"]:
        r = Requirement(spec)
        name = canonicalize_name(r.name)
        assert name in docker and docker[name].specifier == r.specifier, \
            f"containers/Dockerfile should install {spec} before `pip install --no-deps -e`"
    assert re.search(r"pip install --no-deps -e /opt/nemo-cascade", DOCKERFILE.read_text())


def test_dockerfile_installs_torch_before_the_rest_and_te_without_isolation():
    text = DOCKERFILE.read_text()
    torch_at = text.index('pip install "torch==')
    assert torch_at < text.index('"vllm==') < text.index('"transformer-engine[')
    te_line = next(line for line in text.splitlines() if '"transformer-engine[' in line)
    assert "--no-build-isolation" in te_line  # its torch extension compiles against the installed torch
    assert re.search(r"^ARG BASE_IMAGE=nvcr\.io/nvidia/pytorch:\S+-py3$", text, re.M)
