"""How far apart two floating-point computations of the same numbers may land: one rule for the
whole suite.

Two computations that add the same numbers in another order (another layout, kernel or CPU family;
vLLM or transformers against Megatron) round differently: after ``terms`` additions on the path to a
number, about ``u · sqrt(terms)`` apart relative to the size of what is summed (``u``: the dtype's
unit roundoff), and the bound is :data:`SIGMAS` times that. :class:`Net` counts a transformer's
additions. The reasoning, every comparison's bound and the largest difference measured are in
docs/testing.md ("Tolerances"). The same additions in the same order (resume, the same layout on the
same machine) are compared bit for bit instead.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

SIGMAS = 4.0
"""How many random-walk widths apart two orders may land. Blocked and pairwise sums round less than
a random walk: the largest difference measured in the suite is 1.8 widths, 0.44 of its bound
(docs/testing.md). Four leave room for kernels not met yet and still fail real defects (one weight
matrix off by 10⁻³ moves the tiny model's log-probs by 4.5 bounds; a value bias's gradient counted
twice moves a grad norm by 6·10⁻³, 80 bounds; a shard in the wrong place moves log-probs by
10⁻¹)."""

LOG_ENV = "NEMO_CASCADE_TOLERANCE_LOG"
"""A JSONL path: every check appends its name, the largest difference and the bound (to measure the
margins)."""


def unit_roundoff(dtype: torch.dtype) -> float:
    """Half the spacing of ``dtype`` at 1: the largest relative error of one rounding (fp32 6.0e-8,
    bf16 3.9e-3)."""
    return torch.finfo(dtype).eps / 2


def bound(dtype: torch.dtype, terms: int, magnitude: float = 1.0) -> float:
    """``SIGMAS · u · sqrt(terms) · magnitude``: how far two orders of ``terms`` additions of
    numbers of size ``magnitude`` may land apart."""
    return SIGMAS * unit_roundoff(dtype) * math.sqrt(terms) * magnitude


@dataclass(frozen=True)
class Net:
    """The additions a decoder-only transformer puts between its input tokens and its outputs."""

    layers: int
    hidden: int
    ffn: int
    seq: int
    vocab: int

    @classmethod
    def of(cls, model_dir, seq: int) -> "Net":
        """The shape of the HF model folder ``model_dir`` (its config.json) over sequences of
        ``seq`` tokens."""
        c = json.loads((Path(model_dir) / "config.json").read_text())
        return cls(c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], seq,
                   c["vocab_size"])

    def forward_terms(self) -> int:
        """One output logit's path: per layer the QKV projection (hidden), the scores (head dim ≤
        hidden), the weighted values (seq), the output projection (hidden), the two MLP projections
        (hidden, ffn) and the two norms (hidden each); then the final norm, the output layer
        (hidden) and the softmax's sum (vocab)."""
        return self.layers * (6 * self.hidden + self.seq + self.ffn) + 2 * self.hidden + self.vocab

    def roundings(self) -> int:
        """The roundings to a 16-bit dtype on one logit's path where sums accumulate in fp32 (a bf16
        engine): per layer its four weight matrices and ten outputs (norms, projections, attention,
        activation, residual sums), then the final norm, the output layer's weight and the logit."""
        return 14 * self.layers + 3

    def step_terms(self, tokens: int) -> int:
        """One training step: the forward path, the backward path (as long again), and each weight's
        gradient summed over the batch's tokens."""
        return 2 * self.forward_terms() + tokens

    def terms_after(self, steps: int, tokens: int) -> int:
        """A number computed by the forward pass after ``steps`` training steps: every step's
        additions are on its path (the weights it reads carry them)."""
        return steps * self.step_terms(tokens) + self.forward_terms()


def assert_close(actual, expected, dtype: torch.dtype, terms: int, *, relative: bool = False,
                 magnitude: float = 1.0, what: str = "") -> float:
    """``actual`` equals ``expected`` within :func:`bound`. ``relative``: each element against its
    own size (a loss, a norm); otherwise absolute, at ``magnitude``. Returns the largest difference
    as a multiple of the bound (logged to :data:`LOG_ENV` when it is set)."""
    a, e = (np.asarray(x.detach().double().cpu() if torch.is_tensor(x) else x, dtype=np.float64)
            for x in (actual, expected))
    assert a.shape == e.shape, f"{what}: shapes {a.shape} and {e.shape}"
    if relative:
        limit = bound(dtype, terms) * np.abs(e)
    else:
        limit = np.full_like(e, bound(dtype, terms, magnitude))
    diff = np.abs(a - e)
    ratio = float((diff / np.maximum(limit, np.finfo(np.float64).tiny)).max()) if diff.size else 0.0
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a") as f:
            f.write(
                json.dumps({
                    "what": what, "max_diff": float(diff.max()), "bound": float(limit.max()),
                    "relative": relative, "ratio": ratio}) + "\n")
    assert ratio <= 1.0, (
        f"{what}: differs by {float(diff.max()):.3g} (x{ratio:.3g} the bound "
        f"{'relative ' if relative else ''}{float(limit.max()):.3g}: {dtype}, {terms} additions)")
    return ratio


def assert_training_close(got: dict, expected: dict, net: Net, tokens: int, what: str,
                          after: int = 0, dtype: torch.dtype = torch.float32) -> None:
    """Two runs of the same training steps in other layouts (``"loss"`` and ``"grad_norm"``: a
    number or a list, one per step) agree: step k's loss reads weights that ``after + k`` steps of
    ``tokens`` tokens have moved, and its grad norm adds that step's own backward."""
    losses, norms = np.atleast_1d(expected["loss"]), np.atleast_1d(expected["grad_norm"])
    for k, (loss, norm) in enumerate(zip(losses, norms)):
        before = net.terms_after(after + k, tokens)
        assert_close(
            np.atleast_1d(got["loss"])[k], loss, dtype, before, relative=True,
            what=f"{what} loss, step {k}")
        assert_close(
            np.atleast_1d(got["grad_norm"])[k], norm, dtype, before + net.step_terms(tokens),
            relative=True, what=f"{what} grad norm, step {k}")


def assert_step_close(got, expected, net: Net, tokens: int,
                      dtype: torch.dtype = torch.float32) -> None:
    """Two layouts of one training step on the same weights (``StepMetrics``): the loss and grad
    norm as in :func:`assert_training_close`, and the log-prob gap (a mean of differences of
    log-probs, so absolute) when both report it."""
    assert_training_close({"loss": got.loss, "grad_norm": got.grad_norm},
                          {"loss": expected.loss, "grad_norm": expected.grad_norm}, net, tokens,
                          "step", dtype=dtype)
    if "logprob_gap" in expected.metrics:
        assert_close(got.metrics["logprob_gap"], expected.metrics["logprob_gap"], dtype,
                     net.forward_terms(), what="log-prob gap")


def assert_within(difference: float, dtype: torch.dtype, terms: int, magnitude: float = 1.0,
                  what: str = "") -> float:
    """A difference a worker measured (its largest ``|a − b|``) is within :func:`bound`; logged as
    in :func:`assert_close`."""
    return assert_close(difference, 0.0, dtype, terms, magnitude=magnitude, what=what)
