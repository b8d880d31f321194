"""containers/Dockerfile installs exactly the GPU stack setup.py's ``gpu`` extra pins (and the
project's own dependencies), so the image and ``pip install .[gpu]`` cannot drift apart."""
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
    call = next(n for n in ast.walk(tree)
                if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
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
    assert ({canonicalize_name(r.name) for r in pinned}
            >= {"torch", "vllm", "megatron-core", "transformer-engine"})
    docker = _dockerfile_requirements()
    for name, spec in _pins(gpu).items():
        if name == "psutil" and name not in docker:
            continue
        assert name in docker, (
            f"containers/Dockerfile does not install {name} (setup.py gpu extra: {spec})")
        assert (str(docker[name].specifier), sorted(docker[name].extras)) == spec, \
            f"{name}: Dockerfile {docker[name]} != setup.py gpu extra {spec}"


def test_dockerfile_installs_the_project_dependencies():
    """The project goes in with --no-deps (re-resolving could move a pin): its install_requires come
    before."""
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
    # its torch extension compiles against the installed torch
    assert "--no-build-isolation" in te_line
    assert re.search(r"^ARG BASE_IMAGE=nvcr\.io/nvidia/pytorch:\S+-py3$", text, re.M)


def _image_check() -> str:
    """The Python the build runs before the image is done (the heredoc after `RUN python -
    <<'PY'`)."""
    text = DOCKERFILE.read_text()
    return text[text.index("RUN python - <<'PY'"):text.index("\nPY\n")]


def test_the_image_carries_what_the_nodes_run_besides_python():
    """bubblewrap (the code reward's sandbox) and iproute2 (slurm/env.sh's gloo interface), each run
    by the image check; doctor has a row for each (tests/unit/test_doctor.py)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    apt = next(line for line in text.splitlines() if "apt-get install" in line)
    assert "bubblewrap" in apt.split() and "iproute2" in apt.split()
    assert '["bwrap", "--version"]' in _image_check() and '["ip", "-V"]' in _image_check()


def test_apex_is_built_with_its_cuda_extensions_after_torch_and_checked():
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    apex = next(line for line in text.splitlines()
                if "NVIDIA/apex" in line and "pip install" in line)
    assert "APEX_CUDA_EXT=1" in apex and "APEX_CPP_EXT=1" in apex and "--no-build-isolation" in apex
    assert text.index('pip install "torch==') < text.index(apex)
    assert re.search(r"^ARG APEX_REF=[0-9a-f]{40}$", DOCKERFILE.read_text(), re.M), (
        "a pinned commit")
    check = _image_check()
    assert ("import fused_weight_gradient_mlp_cuda" in check
            and "_grad_accum_fusion_available" in check)


def test_the_image_check_loads_transformer_engine_by_itself():
    """megatron imports TE inside try/except ImportError: only a direct import shows a TE that built
    but cannot load, and it must come before megatron's."""
    check = _image_check()
    assert check.index("import transformer_engine.pytorch") < check.index("import megatron.core")


def test_the_build_context_leaves_out_data_caches_and_runs():
    from nemo_cascade.data.sft_cache import CACHE_DIR

    ignored = {line.strip()
               for line in (ROOT / "containers" / "Dockerfile.dockerignore").read_text()
               .splitlines() if line.strip() and not line.startswith("#")}
    env = (ROOT / "slurm" / "env.sh").read_text()
    default_data = re.search(r'NEMO_CASCADE_DATA "\$\{DATA_MOUNT:-/data\}/([\w.-]+)"', env).group(1)
    for folder in (".venv*", "runs", "models", "wandb", default_data, f"**/{CACHE_DIR}", ".cache",
                   "**/*.sqsh"):
        assert folder in ignored, f"containers/Dockerfile.dockerignore should leave out {folder}"
