"""slurm/cascade_8b.sh and cascade_14b.sh with stand-ins for the Slurm commands: what a real cluster
here cannot show (tests/slurm runs them on a real one). pyxis/enroot cannot be had on this machine,
so the container path's srun options are checked here as the scripts write them; so are
self-submission, DRY_RUN and the batch shell's handling of signals in the orders a real cluster
rarely produces on cue.

`srun`, `scontrol`, `sbatch` and `torchrun` are shell stubs on PATH that append their argv (and
torchrun its environment) to files; the stub srun then runs its command as srun would on each node —
here once, on this machine — so the path sbatch script → srun → slurm/node.sh → torchrun is
exercised as written. With FAKE_SRUN_SLEEP the stub srun instead waits (a long training step), so
the requeue trap can be signalled."""
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "slurm"
SCRIPTS = {
    "cascade_8b.sh": (1, "recipes/nemotron_cascade_8b.py", "nemotron-cascade-8b"),
    "reward_model_72b.sh": (8, "recipes/reward_model_72b.py", "reward-model-72b"),
    "cascade_14b.sh": (2, "recipes/nemotron_cascade_14b_thinking.py",
                       "nemotron-cascade-14b-thinking")}
HOSTS = ("gpu-node-001", "gpu-node-002", "gpu-node-003")

STUBS = {
    "srun": r"""#!/bin/bash
if [[ -n ${FAKE_SRUN_SLEEP:-} ]]; then  # the trap first: the test signals once srun.argv exists
  trap 'echo "srun got TERM" >> "$FAKE_LOG/calls"; kill $child 2>/dev/null; exit 143' TERM
fi
printf '%s\n' "$@" > "$FAKE_LOG/srun.argv"
echo "srun $*" >> "$FAKE_LOG/calls"
# the srun options (all --opt=value): the rest is the command
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
if [[ -n ${FAKE_SRUN_SLEEP:-} ]]; then
  sleep "$FAKE_SRUN_SLEEP" & child=$!
  wait $child
  exit 0
fi
exec "$@"
""",
    "scontrol": r"""#!/bin/bash
echo "scontrol $*" >> "$FAKE_LOG/calls"
if [[ $1 == show && $2 == hostnames ]]; then printf '%s\n' """ + " ".join(HOSTS) + r"""; fi
""",
    "sbatch": r"""#!/bin/bash
printf '%s\n' "$@" > "$FAKE_LOG/sbatch.argv"
echo "sbatch $*" >> "$FAKE_LOG/calls"
echo "Submitted batch job 4242"
""",
    "torchrun": r"""#!/bin/bash
printf '%s\n' "$@" > "$FAKE_LOG/torchrun.argv"
env > "$FAKE_LOG/torchrun.env"
echo "torchrun $*" >> "$FAKE_LOG/calls"
""",
}


@pytest.fixture
def harness(tmp_path):
    """(run, log): run(script, *args, env=..., ...) starts a job script under the stubs; log holds
    their records."""
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    prefixes = ("SLURM_", "NCCL_", "WANDB_", "TORCH", "VLLM_", "HF_", "CUDA_", "NEMO_CASCADE_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    (tmp_path / "models").mkdir()
    (tmp_path / "image.sqsh").write_bytes(b"")
    base.update(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        FAKE_LOG=str(log),
        RUN_DIR=str(tmp_path / "runs"),
        # the container path of the checkout = the checkout: the stub srun runs it
        REPO_MOUNT=str(ROOT),
        MODELS_DIR=str(tmp_path / "models"),
        TORCHRUN="torchrun",
        STOP_GRACE="1",
        DOCTOR="0",
        CONTAINER_IMAGE=str(tmp_path / "image.sqsh"))
    for k in ("CONTAINER", "RUN_NAME", "RECIPE", "REPO_DIR", "DATA_DIR", "NODES", "ACCOUNT",
              "PARTITION", "DRY_RUN", "MAX_REQUEUES", "REQUEUE_ON_TERM", "MASTER_ADDR", "CACHE_DIR",
              "GPUS_PER_NODE", "MASTER_PORT", "NODE_SETUP", "EXTRA_MOUNTS", "WANDB", "TIME", "QOS"):
        base.pop(k, None)

    def start(script, *args, job=True, nodes=None, env=None, script_path=None):
        """A job on the nodes the script asks for (its recipe fills them) unless told."""
        e = dict(base)
        nodes = nodes or SCRIPTS.get(script, (1,))[0]
        if job:
            e.update(SLURM_JOB_ID="777", SLURM_NNODES=str(nodes),
                     SLURM_JOB_NODELIST="gpu-node-[001-004]", SLURM_SUBMIT_DIR=str(ROOT))
        e.update(env or {})
        return subprocess.Popen(["bash", str(script_path or SLURM / script), *args], env=e,
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(script, *args, **kw):
        proc = start(script, *args, **kw)
        out, err = proc.communicate(timeout=60)
        return proc.returncode, out, err

    run.start = start
    return run, log


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _sbatch_options(script: str) -> dict[str, str]:
    opts = {}
    for line in (SLURM / script).read_text().splitlines():
        if line.startswith("#SBATCH --"):
            key, _, value = line[len("#SBATCH --"):].partition("=")
            opts[key] = value
    return opts


@pytest.mark.parametrize("script", sorted(p.name for p in SLURM.glob("*.sh")))
def test_bash_syntax(script):
    proc = subprocess.run(["bash", "-n", str(SLURM / script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_sbatch_header(script):
    opts = _sbatch_options(script)
    assert opts["nodes"] == str(SCRIPTS[script][0]) and opts["gpus-per-node"] == "8"
    assert opts["ntasks-per-node"] == "1", (
        "one srun task per node: torchrun starts the node's 8 ranks")
    assert opts["signal"] == "B:USR1@120", (
        "USR1 to the batch shell only (torchrun would die of it), 2 min ahead")
    assert "requeue" in opts and opts["open-mode"] == "append" and opts["time"] and opts["job-name"]
    assert opts["output"]
    assert os.access(SLURM / script, os.X_OK)


def test_scripts_state_only_their_deltas():
    """The shared parts live in common.sh: the two job scripts differ only in their own settings."""
    a, b = ((SLURM / s).read_text().splitlines() for s in ("cascade_8b.sh", "cascade_14b.sh"))
    differing = [x for x in set(a) ^ set(b) if not x.startswith("#") or x.startswith("#SBATCH")]
    assert sorted(differing) == sorted([
        "#SBATCH --job-name=nemo-cascade-8b", "#SBATCH --job-name=nemo-cascade-14b",
        "#SBATCH --nodes=1", "#SBATCH --nodes=2",
        ': "${RECIPE:=recipes/nemotron_cascade_8b.py}"',
        ': "${RECIPE:=recipes/nemotron_cascade_14b_thinking.py}"'])
    for s in SCRIPTS:
        code = [x for x in (SLURM / s).read_text().splitlines() if not x.startswith("#")]
        assert not [x for x in code if "srun" in x or "torchrun" in x]


@pytest.mark.parametrize("script", SCRIPTS)
def test_job_runs_torchrun_on_every_node(harness, script, tmp_path):
    run, log = harness
    nodes, recipe, name = SCRIPTS[script]
    code, out, err = run(script, "checkpoint_every_minutes=20", nodes=nodes)
    assert code == 0, err
    srun = _lines(log / "srun.argv")
    cut = srun.index("bash")
    opts, cmd = srun[:cut], srun[cut:]
    assert (f"--nodes={nodes}" in opts and "--ntasks-per-node=1" in opts
            and "--kill-on-bad-exit=1" in opts)
    assert f"--container-image={tmp_path}/image.sqsh" in opts
    mounts = next(o for o in opts
                  if o.startswith("--container-mounts=")).split("=", 1)[1].split(",")
    assert mounts == [f"{ROOT}:{ROOT}", f"{tmp_path}/runs:/runs", f"{ROOT}/data:/data",
                      f"{tmp_path}/models:/models"]
    assert f"--container-workdir={ROOT}" in opts
    assert cmd == ["bash", f"{ROOT}/slurm/node.sh", recipe, "run_root=/runs", f"name={name}",
                   "wandb=true", "checkpoint_every_minutes=20"]
    assert _lines(log / "torchrun.argv") == [
        f"--nnodes={nodes}", "--nproc_per_node=8", "--rdzv_backend=c10d",
        f"--rdzv_endpoint={HOSTS[0]}:29500", "--rdzv_id=777", "--max_restarts=0", "-m",
        "nemo_cascade.tooling.cli", "run", recipe, "run_root=/runs", f"name={name}", "wandb=true",
        "checkpoint_every_minutes=20"]
    env = _env(log / "torchrun.env")
    assert env["MASTER_ADDR"] == HOSTS[0] and env["MASTER_PORT"] == "29500"
    assert (env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
            and env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1")
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker" and env["NCCL_IB_DISABLE"] == "0"
    assert "GLOO_SOCKET_IFNAME" not in env, (
        "no ^exclusions for gloo; no route to the made-up first node")
    assert env["WANDB_MODE"] == "offline" and env["WANDB_PROJECT"] == "nemo-cascade"
    assert env["WANDB_RUN_GROUP"] == name and env["WANDB_RESUME"] == "allow"
    assert env["WANDB_DIR"] == f"/runs/{name}"
    assert env["HF_HOME"] == "/runs/.cache/huggingface", "downloads shared by the nodes"
    local = env["NODE_CACHE_DIR"]
    assert (local.startswith("/tmp/") and (env["VLLM_CACHE_ROOT"], env["TORCHINDUCTOR_CACHE_DIR"])
            == (f"{local}/vllm", f"{local}/inductor")), \
        "compile caches node-local: their file locks and NFS"
    assert env["PYTHONPATH"].split(":")[0] == str(ROOT)
    assert (env["NEMO_CASCADE_MODELS"] == "/models"
            and env["NEMO_CASCADE_DATA"] == "/data/nemotron-cascade")
    assert (tmp_path / "runs").is_dir()


def test_the_run_name_is_the_recipe_s_own(harness, tmp_path):
    """Unset RUN_NAME: the recipe function's Cascade.name, read by the batch shell (no
    container)."""
    run, log = harness
    code, _, err = run("cascade_8b.sh", env={"RECIPE": "recipes/nemotron_cascade_8b.py:from_rlhf"})
    assert code == 0, err
    assert "name=nemotron-cascade-8b-from-rlhf" in _lines(log / "torchrun.argv")
    assert (tmp_path / "runs" / "nemotron-cascade-8b-from-rlhf").is_dir()
    (log / "srun.argv").unlink()
    code, _, err = run("cascade_8b.sh", env={"RECIPE": "recipes/nemotron_cascade_8b.py:nope"})
    assert code == 2 and err.strip().endswith(
        "error: recipe recipes/nemotron_cascade_8b.py:nope: no function "
        "'nope' in recipes/nemotron_cascade_8b.py"), err
    assert len(err.strip().splitlines()) == 1
    assert not (log / "srun.argv").exists()


def test_a_layout_that_does_not_fill_the_nodes_is_refused_before_any_node_starts(harness, tmp_path):
    """The docs' `NODES=4 bash slurm/cascade_14b.sh` without parallel.dp: one line at submit time,
    and the same in a job submitted with plain sbatch, before srun."""
    run, log = harness
    code, _, err = run("cascade_14b.sh", job=False, env={"NODES": "4"})
    assert code == 2 and not (log / "sbatch.argv").exists()
    assert err.strip().splitlines() == [err.strip()] and err.strip().endswith(
        "error: parallel: tp × pp × cp × dp = 8×1×2×1 = 16 GPUs, but the job has 32; "
        "parallel.dp=2 fills them")
    code, _, err = run("cascade_14b.sh", "parallel.dp=2", job=False, env={"NODES": "4"})
    assert code == 0 and "--nodes=4" in _lines(log / "sbatch.argv"), err
    code, _, err = run("cascade_8b.sh", nodes=3)
    assert code == 2 and "= 8 GPUs, but the job has 24; parallel.dp=6 fills them" in err
    assert not (log / "srun.argv").exists()


def test_a_recipe_this_python_cannot_load_is_left_to_the_nodes(harness, tmp_path):
    """A recipe that imports what the batch host lacks: its name must be given, its layout is not
    checked here (the nodes check it)."""
    run, log = harness
    recipe = tmp_path / "needs_more.py"
    recipe.write_text("import a_module_no_batch_host_has\n")
    code, _, err = run("cascade_8b.sh", env={"RECIPE": str(recipe)})
    assert code == 2 and "RUN_NAME is unset and the recipe's name cannot be read here" in err
    assert ("No module named 'a_module_no_batch_host_has'" in err
            and len(err.strip().splitlines()) == 1)
    code, _, err = run("cascade_8b.sh", env={"RECIPE": str(recipe), "RUN_NAME": "mine"})
    assert code == 0 and "layout not checked before the job" in err, err
    assert "name=mine" in _lines(log / "torchrun.argv")


def test_a_recipe_s_name_is_read_with_the_standard_library_only():
    """`python -S` (no site-packages: no torch, no vLLM) loads the paper recipes."""
    for recipe, name in (("recipes/nemotron_cascade_8b.py", "nemotron-cascade-8b"),
                         ("recipes/nemotron_cascade_14b_thinking.py:single_node",
                          "nemotron-cascade-14b-thinking")):
        proc = subprocess.run(
            [sys.executable, "-S", "-m", "nemo_cascade.tooling.job_recipe", recipe],
            capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0 and proc.stdout.strip() == name, proc.stderr
        assert proc.stdout.strip().startswith("nemotron-cascade-")


def test_default_image_must_be_built_first(harness):
    run, log = harness
    code, _, err = run("cascade_8b.sh", env={"CONTAINER_IMAGE": ""})
    assert code == 2 and not (log / "srun.argv").exists()
    assert err.strip().endswith(
        f"error: CONTAINER_IMAGE={ROOT}/containers/nemo-cascade.sqsh: no such image file; "
        "build it (docs/launch.md, The container), name a registry image, or set "
        "CONTAINER_IMAGE=none"), err


def test_settings_by_environment(harness, tmp_path):
    run, log = harness
    code, _, err = run("cascade_14b.sh", "parallel.dp=8", nodes=2, env={
        "CONTAINER_IMAGE": "", "CONTAINER": "registry.example/cascade:1", "RUN_NAME": "my-run",
        "DATA_DIR": str(tmp_path), "MODELS_DIR": str(tmp_path / "models"),
        "EXTRA_MOUNTS": "/scratch:/scratch", "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_IB_HCA": "mlx5_0,mlx5_3", "WANDB_API_KEY": "k", "WANDB": "0", "GPUS_PER_NODE": "4",
        "MASTER_PORT": "31000", "RECIPE": "recipes/tiny.py:math_only",
        "NODE_SETUP": "export FROM_SETUP=yes"})
    assert code == 0, err
    opts = _lines(log / "srun.argv")
    assert "--container-image=registry.example/cascade:1" in opts
    mounts = next(o for o in opts if o.startswith("--container-mounts="))
    assert f"{tmp_path}:/data" in mounts and f"{tmp_path}/models:/models" in mounts
    assert mounts.endswith(",/scratch:/scratch")
    torchrun = _lines(log / "torchrun.argv")
    assert "--nproc_per_node=4" in torchrun and "--nnodes=2" in torchrun
    assert f"--rdzv_endpoint={HOSTS[0]}:31000" in torchrun
    assert torchrun[-4:] == ["recipes/tiny.py:math_only", "run_root=/runs", "name=my-run",
                             "parallel.dp=8"], "WANDB=0: no wandb=true"
    env = _env(log / "torchrun.env")
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["NCCL_IB_HCA"] == "mlx5_0,mlx5_3"
    assert env["GLOO_SOCKET_IFNAME"] == "ib0", (
        "gloo groups cross nodes on the interface NCCL is given")
    assert env["WANDB_MODE"] == "online" and env["WANDB_RUN_GROUP"] == "my-run"
    assert env["FROM_SETUP"] == "yes", "NODE_SETUP runs on the node before torchrun"


def test_an_apptainer_image_runs_under_apptainer_exec(harness, tmp_path):
    """A *.sif image: srun starts `apptainer exec --nv` with the binds pyxis would mount."""
    run, log = harness
    image = tmp_path / "image.sif"
    if shutil.which("apptainer") is None and shutil.which("singularity") is None:
        image.write_bytes(b"")
        code, _, err = run("cascade_8b.sh", env={"CONTAINER_IMAGE": str(image)})
        assert code == 2 and "neither is on PATH here" in err and len(err.strip().splitlines()) == 1
        assert not (log / "srun.argv").exists()
    stub = tmp_path / "bin" / "apptainer"  # records its argv, then runs the command after the image
    stub.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$FAKE_LOG/apptainer.argv"\n'
                    'shift; while [[ $1 == -* ]]; do shift; done; shift; exec "$@"\n')
    stub.chmod(0o755)
    missing = run("cascade_8b.sh", env={"CONTAINER_IMAGE": str(tmp_path / "other.sif")})
    assert missing[0] == 2 and "other.sif: no such image file" in missing[2]
    image.write_bytes(b"")
    code, _, err = run("cascade_8b.sh", env={"CONTAINER_IMAGE": str(image)})
    assert code == 0, err
    assert not any(o.startswith("--container") for o in _lines(log / "srun.argv"))
    argv = _lines(log / "apptainer.argv")
    assert argv[:3] == ["exec", "--nv", "--no-home"]
    assert (argv[3].startswith(f"--bind={ROOT}:{ROOT},")
            and f",{tmp_path / 'models'}:/models" in argv[3])
    assert argv[4:7] == [f"--pwd={ROOT}", str(image), "bash"] and argv[7] == f"{ROOT}/slurm/node.sh"
    assert (log / "torchrun.argv").exists(), "node.sh ran inside"


def _interface_with_ipv4() -> tuple[str, str] | None:
    """A non-loopback interface of this machine and its IPv4 address (``ip -o -4 addr show``)."""
    if not shutil.which("ip"):
        return None
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True).stdout
    found = [(f[1], f[3].split("/")[0]) for f in (line.split() for line in out.splitlines())
             if len(f) > 3 and f[1] != "lo"]
    return found[0] if found else None


def _gloo_ifname(env: dict[str, str]) -> str:
    kept = {k: v for k, v in os.environ.items()
            if k not in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "MASTER_ADDR")}
    proc = subprocess.run(
        ["bash", "-c", 'source slurm/env.sh; echo "${GLOO_SOCKET_IFNAME-(unset)}"'],
        capture_output=True, text=True, cwd=ROOT, env={**kept, **env}, check=True)
    return proc.stdout.strip()


def test_gloo_takes_the_interface_that_reaches_the_first_node():
    """Not the host name's address (127.0.x.1 on many images): the interface of the route to
    MASTER_ADDR, or the one holding it on the first node itself."""
    found = _interface_with_ipv4()
    if found is None:
        pytest.skip("no `ip` command or no non-loopback IPv4 interface on this machine")
    name, address = found
    assert _gloo_ifname({"MASTER_ADDR": address}) == name, (
        "the first node: the interface holding it")
    neighbour = address.rsplit(".", 1)[0] + (".77" if not address.endswith(".77") else ".78")
    assert _gloo_ifname({"MASTER_ADDR": neighbour}) == name, "another node: the route's interface"
    assert _gloo_ifname({"MASTER_ADDR": address, "NCCL_SOCKET_IFNAME": "ib0"}) == "ib0"
    assert _gloo_ifname({"MASTER_ADDR": address, "GLOO_SOCKET_IFNAME": "bond0"}) == "bond0"
    assert _gloo_ifname({"MASTER_ADDR": "no-such-node.invalid"}) == "(unset)"
    assert _gloo_ifname({}) == "(unset)", "the batch step, before MASTER_ADDR is known"


def test_host_paths_exported_for_data_preparation_become_container_paths(harness, tmp_path):
    """NEMO_CASCADE_DATA exported on the login node for `data prepare` reaches the job: under
    DATA_DIR it becomes its path in the container; elsewhere the job stops in one line."""
    run, log = harness
    data = tmp_path / "data"
    (data / "nemotron-cascade").mkdir(parents=True)
    code, _, err = run("cascade_8b.sh", env={"DATA_DIR": str(data),
                                              "NEMO_CASCADE_DATA": str(data / "nemotron-cascade"),
                                              "NEMO_CASCADE_MODELS": "/models/mine"})
    assert code == 0, err
    env = _env(log / "torchrun.env")
    assert env["NEMO_CASCADE_DATA"] == "/data/nemotron-cascade", "the host path, translated"
    assert env["NEMO_CASCADE_MODELS"] == "/models/mine", "a container path already"
    (log / "srun.argv").unlink()
    code, _, err = run("cascade_8b.sh",
                       env={"DATA_DIR": str(data), "NEMO_CASCADE_DATA": "/lustre/elsewhere"})
    assert code == 2 and not (log / "srun.argv").exists()
    assert err.strip().endswith(
        "error: NEMO_CASCADE_DATA=/lustre/elsewhere: a host path the container does "
        "not mount; unset it (the recipes then read /data and /models), point "
        "DATA_DIR / MODELS_DIR at its folder, or add it to EXTRA_MOUNTS"), err


def test_the_tool_script_runs_one_command_in_the_container(harness, tmp_path):
    """slurm/tool.sh: `nemo-cascade COMMAND ARGS` once, on one node, with the cascade jobs' image
    and mounts; outside a job it submits itself; without a command it says what it expects."""
    run, log = harness
    stub = tmp_path / "bin" / "python"  # the container's python: records what it is asked to run
    stub.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$FAKE_LOG/python.argv"\n'
                    'env > "$FAKE_LOG/python.env"\n')
    stub.chmod(0o755)
    args = ("eval", "/runs/r/stages/4-math", "--suite", "aime25")
    code, _, err = run("tool.sh", *args)
    assert code == 0, err
    srun = _lines(log / "srun.argv")
    assert srun[:3] == ["--nodes=1", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    assert (f"--container-image={tmp_path}/image.sqsh" in srun
            and f"--container-workdir={ROOT}" in srun)
    assert any(o.startswith("--container-mounts=") and f"{tmp_path}/runs:/runs" in o for o in srun)
    assert srun[srun.index("env"):] == [
        "env", f"PYTHONPATH={ROOT}", "python", "-m", "nemo_cascade.tooling.cli", *args]
    assert _lines(log / "python.argv") == ["-m", "nemo_cascade.tooling.cli", *args]
    assert _env(log / "python.env")["NCCL_SOCKET_IFNAME"] == "^lo,docker", "the nodes' environment"
    code, _, err = run("tool.sh", "convert", "check", "/runs/release", job=False,
                       env={"ACCOUNT": "a"})
    assert code == 0 and _lines(log / "sbatch.argv")[-4:] == [
        str(SLURM / "tool.sh"), "convert", "check", "/runs/release"], err
    code, _, err = run("tool.sh")
    assert code == 2 and "expected a nemo-cascade command and its arguments" in err


def test_without_container(harness, tmp_path):
    run, log = harness
    code, _, err = run("cascade_8b.sh", env={"CONTAINER_IMAGE": "none", "REPO_MOUNT": ""})
    assert code == 0, err
    opts = _lines(log / "srun.argv")
    assert not [o for o in opts if o.startswith("--container")]
    assert opts[opts.index("bash") + 1] == f"{ROOT}/slurm/node.sh"
    assert f"run_root={tmp_path}/runs" in _lines(log / "torchrun.argv"), (
        "no container: the host's runs folder")


def test_slurm_runs_a_spooled_copy(harness, tmp_path):
    """sbatch runs a copy of the script from slurmd's spool folder: common.sh is found via
    SLURM_SUBMIT_DIR."""
    run, log = harness
    spool = tmp_path / "spool" / "job777"
    spool.mkdir(parents=True)
    shutil.copy(SLURM / "cascade_8b.sh", spool / "slurm_script")
    code, _, err = run(None, script_path=spool / "slurm_script")
    assert code == 0, err
    assert (log / "torchrun.argv").is_file()


def test_outside_a_job_the_script_submits_itself(harness, tmp_path):
    run, log = harness
    code, _, err = run(
        "cascade_14b.sh", "stages.rlhf.steps=1", job=False,
        env={"ACCOUNT": "acct", "PARTITION": "batch", "NODES": "2", "TIME": "01:00:00"})
    assert code == 0, err
    argv = _lines(log / "sbatch.argv")
    assert argv == [
        f"--chdir={ROOT}", f"--output={tmp_path}/runs/slurm-logs/%x-%j.log", "--account=acct",
        "--partition=batch", "--nodes=2", "--time=01:00:00",
        str(SLURM / "cascade_14b.sh"), "stages.rlhf.steps=1"]
    assert (tmp_path / "runs" / "slurm-logs").is_dir(), (
        "Slurm cannot create the log file's folder itself")
    assert not (log / "srun.argv").exists()


def test_dry_run_prints_and_runs_nothing(harness):
    run, log = harness
    code, out, err = run("cascade_14b.sh", "stages.rlhf.steps=1", env={"DRY_RUN": "1"})
    assert code == 0, err
    assert out.startswith("+ srun --nodes=2 --ntasks-per-node=1")
    assert out.rstrip().endswith("wandb=true stages.rlhf.steps=1")
    assert not (log / "srun.argv").exists()
    code, out, _ = run("cascade_14b.sh", job=False, env={"DRY_RUN": "1", "ACCOUNT": "a"})
    assert (code == 0 and out.startswith("+ sbatch ") and "--account=a" in out
            and not (log / "sbatch.argv").exists())


def test_restart_is_idempotent(harness, tmp_path):
    """A requeued job runs the same command on the same run folder and leaves the run's files
    alone."""
    run, log = harness
    run_dir = tmp_path / "runs" / "nemotron-cascade-8b"
    (run_dir / "stages" / "0-sft" / "checkpoint" / "step_000010").mkdir(parents=True)
    (run_dir / "manifest.json").write_text('{"stages": {"sft": {"status": "running"}}}')
    before = sorted(str(p) for p in run_dir.rglob("*"))
    code, _, err = run("cascade_8b.sh")
    first = _lines(log / "torchrun.argv")
    code2, _, err2 = run("cascade_8b.sh", env={"SLURM_RESTART_COUNT": "1"})
    assert code == code2 == 0, err + err2
    assert _lines(log / "torchrun.argv") == first
    # the batch shell's own note of what the folder held (slurm/progress.sh) is all it adds
    assert sorted(str(p) for p in run_dir.rglob("*") if p.name != ".requeue_progress") == before
    assert "continuing the existing run" in err2


def _start_and_signal(harness, sig, env):
    run, log = harness
    proc = run.start("cascade_8b.sh", env={"FAKE_SRUN_SLEEP": "60", **env})
    deadline = time.monotonic() + 30
    while not (log / "srun.argv").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.2)  # the batch shell is in `wait` by now
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    calls = _lines(log / "calls")
    return proc.returncode, [c for c in calls if c.startswith("scontrol requeue")], calls, err


def test_usr1_requeues_once(harness):
    code, requeues, calls, err = _start_and_signal(harness, signal.SIGUSR1,
                                                   {"SLURM_RESTART_COUNT": "2"})
    assert requeues == ["scontrol requeue 777"], calls
    assert "srun got TERM" in calls, (
        "the running step is stopped (its last checkpoint is where the job resumes)")
    assert code == 0 and "requeueing job 777 (restart 3 of at most 2000)" in err


def test_usr1_then_the_requeues_term_requeues_once(harness):
    """scontrol requeue makes Slurm SIGTERM the batch shell: that must not requeue again
    (REQUEUE_ON_TERM=1)."""
    run, log = harness
    proc = run.start("cascade_8b.sh", env={"FAKE_SRUN_SLEEP": "60", "REQUEUE_ON_TERM": "1"})
    while not (log / "srun.argv").exists():
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGUSR1)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert [c for c in _lines(log / "calls")
            if c.startswith("scontrol requeue")] == ["scontrol requeue 777"]


def test_no_requeue_past_the_maximum(harness):
    code, requeues, calls, err = _start_and_signal(
        harness, signal.SIGUSR1, {"SLURM_RESTART_COUNT": "3", "MAX_REQUEUES": "3"})
    assert requeues == [], calls
    assert "srun got TERM" in calls and code != 0
    assert "not requeueing: job 777 was restarted 3 times (MAX_REQUEUES=3)" in err


def test_term_requeues_only_when_asked(harness):
    code, requeues, calls, _ = _start_and_signal(harness, signal.SIGTERM, {})
    assert requeues == [] and "srun got TERM" in calls and code != 0, "scancel must stop the job"


def test_term_requeues_with_requeue_on_term(harness):
    code, requeues, _, _ = _start_and_signal(harness, signal.SIGTERM, {"REQUEUE_ON_TERM": "1"})
    assert requeues == ["scontrol requeue 777"] and code == 0


def test_a_run_that_stops_itself_before_the_job_s_end_is_requeued(harness, tmp_path):
    """The run saves and stops by itself when only its save still fits before the job's end
    (runtime/deadline.py, exit 75): the batch shell requeues the job as on the time-limit signal."""
    run, log = harness
    stops = tmp_path / "bin" / "torchrun-stops"
    stops.write_text('#!/bin/bash\necho "torchrun $*" >> "$FAKE_LOG/calls"\nexit 75\n')
    stops.chmod(0o755)
    code, _, err = run("cascade_8b.sh", env={"TORCHRUN": str(stops), "SLURM_RESTART_COUNT": "4"})
    assert code == 0, err
    assert ("the run stopped before the job's end (exit 75): "
            "requeueing job 777 (restart 5 of at most 2000)") in err
    assert [c for c in _lines(log / "calls")
            if c.startswith("scontrol requeue")] == ["scontrol requeue 777"]
    code, _, err = run("cascade_8b.sh", env={"TORCHRUN": str(stops), "SLURM_RESTART_COUNT": "4",
                                             "MAX_REQUEUES": "4"})
    assert code == 75 and "not requeued: job 777 was restarted 4 times (MAX_REQUEUES=4)" in err


def _guard(run_dir: Path, restart: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"source {SLURM}/progress.sh && nc_requeue_guard {run_dir} 3"],
        env={**os.environ, "SLURM_RESTART_COUNT": str(restart), "SLURM_JOB_ID": "777"},
        capture_output=True, text=True)


def test_requeues_that_save_nothing_stop_after_max_stalled(tmp_path):
    run_dir = tmp_path / "run"
    assert _guard(run_dir, 0).returncode == 0  # the first job records what the folder holds
    # two jobs saved nothing: still allowed
    assert [_guard(run_dir, k).returncode for k in (1, 2)] == [0, 0]
    ckpt = run_dir / "stages/1-math/checkpoint/step_000004"
    ckpt.mkdir(parents=True)
    # the third job saved a checkpoint: progress, the count starts over
    (ckpt / "meta.json").write_text("{}")
    assert [_guard(run_dir, k).returncode for k in (3, 4, 5)] == [0, 0, 0]
    (run_dir / "stages/1-math/metrics.jsonl").write_text("{}\n")  # logs alone are no progress
    stalled = _guard(run_dir, 6)
    assert stalled.returncode == 1 and stalled.stderr.strip() == (
        f"nemo-cascade: error: job 777: the last 3 jobs saved nothing in {run_dir} "
        "(MAX_STALLED_REQUEUES=3): not running again; see the job log above for why")
    part = run_dir / "stages/1-math/rollouts/step_000005/rank00000-round00-00000.jsonl"
    part.parent.mkdir(parents=True)
    part.write_text("{}\n")  # a rollout checkpoint of a step longer than the job is progress too
    assert _guard(run_dir, 7).returncode == 0


@pytest.mark.parametrize("prints, expected",
                         [("2026-12-05T14:59:30", "2026-12-05 14:59:30"), ("N/A", "")])
def test_the_job_s_end_is_handed_to_the_run(tmp_path, prints, expected):
    squeue = tmp_path / "squeue"
    squeue.write_text(f"#!/bin/bash\n[[ $3 == 777 && $5 == %e ]] && echo '{prints}'\n")
    squeue.chmod(0o755)
    proc = subprocess.run(
        ["bash", "-c", f"source {SLURM}/progress.sh && nc_job_end && "
         'echo "${NEMO_CASCADE_JOB_END:+$(date -d @$NEMO_CASCADE_JOB_END "+%F %T")}"'],
        env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "SLURM_JOB_ID": "777"},
        capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == expected, proc.stderr
