"""The cascade's own reward models: each ``reward_model`` stage's export, served by rank 0 (vLLM's
pooling runner, on the GPU memory the actor and engine leave: ``rm_server.py``) from its first
use, the stage's gate or the first stage scoring with it, to the cascade's end. Every rank reaches
a served model through its URL file, which carries the server's token (``runtime/server_token.py``).
"""
from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from nemo_cascade import config
from nemo_cascade.runtime import ranks
from nemo_cascade.cascade.rm_server import RMServerSizer, plan_on_this_gpu, server_kwargs
from nemo_cascade.rewards.serve import VLLMServer, is_vllm_cpu

log = logging.getLogger(__name__)


class OwnRewardModels:
    """The reward models the cascade trained, by stage name, and their servers once started."""

    def __init__(self, cfg: config.Cascade, run_dir: Path,
                 size_rm_server: RMServerSizer | None = None, gpu_gib: float | None = None):
        """``size_rm_server``: the planner's sizing of the server on a GPU (of ``gpu_gib``, default
        this machine's); asked here, at the run's start."""
        self.cfg, self.run_dir = cfg, run_dir
        self.plan = plan_on_this_gpu(cfg, size_rm_server, gpu_gib)
        self.exports: dict[str, Path] = {}  # reward_model stage → its HF export
        self.servers: dict[str, object] = {}  # reward_model stage → VLLMServer (rank 0)
        self.urls: dict[str, str] = {}  # reward_model stage → its URL file, as a ``file:`` spec

    def add(self, name: str, export: Path) -> None:
        """Stage ``name`` trained (or, on resume, had trained) the reward model in ``export``."""
        self.exports[name] = export

    @property
    def latest(self) -> str:
        """The last reward-model stage so far; '' before any."""
        return list(self.exports)[-1] if self.exports else ""

    def url(self, name: str) -> str:
        """Where every rank reaches reward model ``name``, serving it (rank 0) on first use."""
        if name not in self.urls:

            url = ""
            if ranks.is_main():
                path = self.exports[name]
                server = VLLMServer(path, runner="pooling", log_path=path.parent / "server.log",
                                    single_engine_process=is_vllm_cpu(),
                                    **server_kwargs(self.cfg.model.dtype, self.plan, str(path)))
                self.servers[name] = server
                # the file, not the URL: it carries the server's token to every rank
                url = server.start().publish(self._url_file(name))
                log.info("serving reward model %s at %s (%.0f s to start; %s)", name, server.url,
                         server.start_seconds, url)
            self.urls[name] = ranks.from_main(url)
        return self.urls[name]

    def served(self, stage: config.Stage) -> config.Stage:
        """``stage`` with the reward model it names (``reward.reward_model_stage``) served and
        its URL in ``reward.reward_model_url``."""
        if not stage.reward.reward_model_stage:
            return stage
        url = self.url(stage.reward.reward_model_stage)
        return replace(stage, reward=replace(stage.reward, reward_model_url=url,
                                             reward_model_stage=""))

    def close(self) -> None:
        for name, server in self.servers.items():
            server.stop()
            self._url_file(name).unlink(missing_ok=True)  # no file names a stopped server

    def _url_file(self, name: str) -> Path:
        return self.run_dir / "servers" / f"{name}.url"


__all__ = ["OwnRewardModels"]
