"""What a job's batch shell learns from its recipe before it starts the nodes (slurm/common.sh):

    python3 -m nemo_cascade.tooling.job_recipe RECIPE [KEY=VALUE ...] [--world GPUS]

prints the run's name (``Cascade.name`` after the overrides) and, with ``--world``, refuses in one
line a layout whose tp × pp × cp × dp is not the job's GPU count, before any node starts. Standard
library only (this module, ``tooling.overrides`` and ``nemo_cascade.config``): the batch shell runs
outside the container. Exit codes: 0, 2 for a user mistake (one line), 3 when the recipe imports
what this Python lacks (the demo recipes import the package's data helpers): nothing can be said
here, the nodes check it.
"""

from __future__ import annotations

import sys

from nemo_cascade.config import ConfigError, validate
from nemo_cascade.config.recipe_file import RecipeImportError, load_recipe
from nemo_cascade.tooling.overrides import apply_overrides


def check_layout(cfg, world: str) -> None:
    """The recipe's tp × pp × cp × dp against the job's GPUs, with the dp that fills them when one
    does; then the rest of the config's checks."""
    if not world.isdigit() or int(world) < 1:
        raise ConfigError(f"--world {world}: expected a number of GPUs >= 1")
    p, gpus = cfg.parallel, int(world)
    model_parallel = p.tp * p.pp * p.cp
    if gpus != model_parallel * p.dp:
        fill = (
            f"parallel.dp={gpus // model_parallel} fills them"
            if gpus % model_parallel == 0
            else f"no parallel.dp fills them (tp × pp × cp = {model_parallel} does not divide "
            f"{gpus})"
        )
        raise ConfigError(
            f"parallel: tp × pp × cp × dp = {p.tp}×{p.pp}×{p.cp}×{p.dp} = "
            f"{model_parallel * p.dp} GPUs, but the job has {gpus}; {fill}"
        )
    validate(cfg, world_size=gpus)


def main(argv: list[str]) -> int:
    world = None
    if len(argv) >= 2 and argv[-2] == "--world":
        world, argv = argv[-1], argv[:-2]
    if not argv:
        print(
            "usage: python3 -m nemo_cascade.tooling.job_recipe RECIPE [KEY=VALUE ...] "
            "[--world GPUS]",
            file=sys.stderr,
        )
        return 2
    try:
        cfg = apply_overrides(load_recipe(argv[0]), argv[1:])
        if world is not None:
            check_layout(cfg, world)
    except RecipeImportError as e:
        print(f"nemo-cascade: not checked here: {e}", file=sys.stderr)
        return 3
    except ConfigError as e:
        print(f"nemo-cascade: error: {e}", file=sys.stderr)
        return 2
    print(cfg.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
