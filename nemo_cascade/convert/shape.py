"""The model's shape: one frozen type, read from an HF ``config.json`` by one reader, used by
conversion (convert/table.py, convert/megatron_args.py), the actor, the planner (plan/: its named
shapes are instances of it) and engine start (rollout/engine_start.py).

Two readings of the same file, both here so a field is parsed in one place:

- :func:`shape_from_dict` — strict: an architecture the actor loads (Qwen3 dense, the paper's bases
  Qwen3-8B/14B; Qwen2 / Qwen2.5, the reward model's base Qwen2.5-72B-Instruct, §4.2; Llama, SmolLM2)
  and nothing it would silently compute differently (sliding windows, rope scalings other than YaRN,
  App. B);
- :func:`any_shape_from_dict` — any architecture, the standard fields (a nested ``text_config``
  too): what the planner estimates and what an evaluation engine serves.

No torch, megatron or vllm: the planner and the config tooling import it on any machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from nemo_cascade.errors import CascadeError
from nemo_cascade.runtime.files import read_json


@dataclass(frozen=True)
class ArchFacts:
    """What one architecture's attention looks like beyond the shared dense RMSNorm / SwiGLU / RoPE
    decoder."""

    causal_lm: str
    sequence_classification: str
    """The HF class of a reward model (paper §4.2: backbone + linear head on the last token)."""
    qk_norm: bool
    """Per-head RMSNorm on q and k before RoPE (Qwen3)."""
    qkv_bias: bool
    """Biases on the q, k and v projections, none on o_proj (Qwen2: transformers' Qwen2Attention
    builds them with ``bias=True`` whatever the config says; vLLM's qwen2 loads them)."""


ARCHS = {
    "qwen3": ArchFacts("Qwen3ForCausalLM", "Qwen3ForSequenceClassification", qk_norm=True,
                       qkv_bias=False),
    # §4.2: the RM's base is Qwen2.5-72B-Instruct, whose config.json says Qwen2ForCausalLM.
    "qwen2": ArchFacts("Qwen2ForCausalLM", "Qwen2ForSequenceClassification", qk_norm=False,
                       qkv_bias=True),
    "llama": ArchFacts("LlamaForCausalLM", "LlamaForSequenceClassification", qk_norm=False,
                       qkv_bias=False),
}
SEQUENCE_CLASSIFICATION = {arch: f.sequence_classification for arch, f in ARCHS.items()}
ARCHITECTURES = {**{f.causal_lm: arch for arch, f in ARCHS.items()},
                 **{cls: arch for arch, cls in SEQUENCE_CLASSIFICATION.items()}}
DEFAULT_POSITIONS = 4096
"""The positions the actor builds for a config.json that names none."""
YARN_DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0}
"""The YaRN constants transformers and Megatron share by default; other values have no Megatron
field here."""


class ModelFilesError(CascadeError, ValueError):
    """A model folder that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class ModelShape:
    """An HF decoder-only model's shape: the dimensions every conversion reshape, parameter count
    and memory estimate depends on, and the facts the actor and the engine start from (positions,
    RoPE, tied head).

    Equality compares the parameters' geometry (architecture, dimensions, norms, biases, tied head):
    a shape read from a config.json equals the planner's named shape of the same model whatever its
    name or RoPE."""

    name: str = field(compare=False)
    vocab_size: int
    hidden_size: int
    ffn_hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tied_embeddings: bool = False
    """``tie_word_embeddings``: the LM head is the embedding (convert/table.py decides what that
    means for parameter names)."""
    hf_architecture: str = "Qwen3ForCausalLM"
    qk_norm: bool = True
    """Per-head q/k RMSNorm (Qwen3)."""
    qkv_bias: bool = False
    """Biases on q, k, v (Qwen2 / Qwen2.5)."""
    rms_norm_eps: float = field(default=1e-6, compare=False)
    rope_theta: float = field(default=10000.0, compare=False)
    max_position_embeddings: int | None = field(default=None, compare=False)
    """config.json's (already scaled for YaRN configs); None when it names none (the actor then
    builds :data:`DEFAULT_POSITIONS`)."""
    rope_type: str = field(default="default", compare=False)
    """``default`` (plain RoPE), ``yarn``, or another scaling an engine may serve but the actor
    refuses."""
    yarn: tuple[float, int] | None = field(default=None, compare=False)
    """YaRN rope scaling as ``(factor, original_max_position_embeddings)`` (paper App. B: factor 2
    or 3 over Qwen3's 32768; the original is 0 when config.json names no positions), None
    otherwise."""
    raw: dict = field(default_factory=dict, compare=False, repr=False)
    """The config.json it was read from (empty for the planner's named shapes); kept to write
    overrides."""

    @property
    def arch(self) -> str:
        """The conversion table's architecture key (``qwen3``/``qwen2``/``llama``); "" for one the
        actor does not load."""
        return ARCHITECTURES.get(self.hf_architecture, "")

    @property
    def attention_bias(self) -> bool:
        return bool(self.raw.get("attention_bias", False))

    # ----------------------------------------------------------------------------- parameter counts
    def layer_params(self) -> tuple[int, int]:
        """``(split over TP, replicated)`` parameters of one decoder layer."""
        h, q = self.hidden_size, self.head_dim
        qkv = (self.num_attention_heads + 2 * self.num_key_value_heads) * q
        split = h * qkv + self.num_attention_heads * q * h + 3 * h * self.ffn_hidden_size
        return split + (qkv if self.qkv_bias else 0), 2 * h + (2 * q if self.qk_norm else 0)

    def params(self, layers: int | None = None, lm_head: bool = True) -> int:
        """All parameters (``layers`` of them; with the LM head, or a reward model's 1×hidden score
        head)."""
        n_layers = self.num_layers if layers is None else layers
        split, rep = self.layer_params()
        embedding = self.vocab_size * self.hidden_size
        head = (0 if self.tied_embeddings else embedding) if lm_head else self.hidden_size
        return n_layers * (split + rep) + embedding + head + self.hidden_size

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.num_layers * self.num_key_value_heads * self.head_dim * dtype_bytes


# ------------------------------------------------------------------------------------------ reading

def load_config_json(path: str | Path, *, missing_ok: bool = False) -> dict:
    """The one reader of an HF model folder's JSON configs (config.json, and the same for its
    tokenizer_config.json and generation_config.json): a dict, ``{}`` for a missing file if
    ``missing_ok``; one ModelFilesError line when it is missing, not JSON or not an object."""
    path = Path(path)
    return read_json(path, f"an HF model folder with {path.name}", missing_ok=missing_ok,
                     error=ModelFilesError)


def read_hf_config(model_dir: str | Path) -> ModelShape:
    """The strict shape of an HF model folder (:func:`shape_from_dict`)."""
    path = Path(model_dir) / "config.json"
    return shape_from_dict(load_config_json(path), str(path))


def _name(where: str, fallback: str) -> str:
    return Path(where).parent.name or fallback


def _rope(cfg: dict) -> tuple[str, dict]:
    """``(rope type, its parameters)``: ``rope_scaling`` (transformers 4) or ``rope_parameters``
    (transformers 5); ``default`` for plain RoPE."""
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    return str(scaling.get("rope_type") or scaling.get("type") or "default"), dict(scaling)


def _yarn(cfg: dict, kind: str, scaling: dict) -> tuple[float, int] | None:
    if kind != "yarn":
        return None
    original = scaling.get("original_max_position_embeddings") or cfg.get("max_position_embeddings")
    return float(scaling.get("factor") or 1.0), int(original or 0)


def _positions(cfg: dict) -> int | None:
    n = cfg.get("max_position_embeddings")
    return int(n) if n else None


def shape_from_dict(raw: dict, where: str = "config.json") -> ModelShape:
    """The shape of a config.json the actor loads; ModelFilesError (one line naming ``where``) for
    an architecture it does not, a missing field, or attention it would compute differently from
    transformers."""
    archs = raw.get("architectures") or []
    known = [a for a in archs if a in ARCHITECTURES]
    if not known:
        raise ModelFilesError(f"{where}: architectures {archs} not supported; expected one of "
                              f"{sorted(ARCHITECTURES)}")
    facts = ARCHS[ARCHITECTURES[known[0]]]
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        kind, scaling = _rope(raw)
        _check_yarn(kind, scaling, where)
        shape = ModelShape(
            name=_name(where, known[0]), hf_architecture=known[0],
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            ffn_hidden_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            tied_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qk_norm=facts.qk_norm, qkv_bias=facts.qkv_bias,
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=float(raw.get("rope_theta", scaling.get("rope_theta", 10000.0))),
            max_position_embeddings=_positions(raw),
            rope_type=kind, yarn=_yarn(raw, kind, scaling), raw=raw,
        )
    except KeyError as e:
        raise ModelFilesError(f"{where}: missing field {e.args[0]!r}") from None
    # Qwen2 ignores the field (its biases are fixed, see ARCHS)
    if shape.attention_bias and shape.arch != "qwen2":
        raise ModelFilesError(f"{where}: attention_bias=true is not supported for "
                              f"{shape.hf_architecture} (it adds q/k/v and o_proj biases; only "
                              "Qwen2's q/k/v biases are implemented)")
    _refuse_sliding_window(raw, shape.num_layers, where)
    if shape.num_attention_heads % shape.num_key_value_heads:
        raise ModelFilesError(f"{where}: num_attention_heads must be a multiple of "
                              "num_key_value_heads")
    return shape


def any_shape_from_dict(raw: dict, where: str = "config.json", dims: bool = True) -> ModelShape:
    """The standard fields of any architecture's config.json (its ``text_config`` when nested).
    ``dims``: the dimensions are required (ModelFilesError naming the field); without, an absent one
    reads 0 (an engine serving the model needs only its positions, RoPE and tied head)."""
    text = raw.get("text_config") or raw
    archs = raw.get("architectures") or ["?"]
    kind, scaling = _rope(text)

    def dim(key: str, default: int | None = None) -> int:
        value = text.get(key) or default
        if value is None and dims:
            raise KeyError(key)
        return int(value or 0)

    try:
        heads, hidden = dim("num_attention_heads"), dim("hidden_size")
        return ModelShape(
            name=_name(where, "model"), hf_architecture=archs[0],
            vocab_size=dim("vocab_size"), hidden_size=hidden,
            ffn_hidden_size=dim("intermediate_size"),
            num_layers=dim("num_hidden_layers"), num_attention_heads=heads,
            num_key_value_heads=dim("num_key_value_heads", heads),
            head_dim=dim("head_dim", hidden // heads if heads else 0),
            tied_embeddings=bool(text.get("tie_word_embeddings",
                                          raw.get("tie_word_embeddings", False))),
            qk_norm=text.get("model_type") == "qwen3",
            qkv_bias=bool(text.get("attention_bias", text.get("model_type") == "qwen2")),
            rms_norm_eps=float(text.get("rms_norm_eps", 1e-6)),
            rope_theta=float(text.get("rope_theta", scaling.get("rope_theta", 10000.0))),
            max_position_embeddings=_positions(text), rope_type=kind,
            yarn=_yarn(text, kind, scaling), raw=raw)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelFilesError(f"{where}: missing or bad field "
                              f"{e.args[0] if e.args else e!s}") from None


def _check_yarn(kind: str, scaling: dict, where: str) -> None:
    """Plain RoPE or YaRN with the shared constants: any other scaling would make the actor silently
    compute other positions than transformers and vLLM."""
    if kind == "default":
        return
    if kind != "yarn":
        raise ModelFilesError(f"{where}: rope scaling {kind!r} is not supported (plain RoPE or "
                              "yarn)")
    odd = {k: scaling[k] for k, v in YARN_DEFAULTS.items() if k in scaling
           and float(scaling[k]) != v}
    if odd or scaling.get("attention_factor") is not None or scaling.get("truncate") is False:
        raise ModelFilesError(f"{where}: yarn settings {odd or 'attention_factor/truncate'} are "
                              "not supported (only factor and original_max_position_embeddings)")
    scaling["factor"]  # KeyError → "missing field 'factor'", as for any required field


def _refuse_sliding_window(raw: dict, num_layers: int, where: str) -> None:
    """Qwen2/Qwen3 configs may ask for sliding-window attention; the actor computes full causal
    attention only, so such a model would silently get other outputs than transformers and vLLM.
    transformers' rule (Qwen2Config/Qwen3Config ``__post_init__``): ``layer_types`` when given, else
    layer i slides iff ``use_sliding_window`` and ``sliding_window`` is set and ``i >=
    max_window_layers``. Qwen2.5-72B-Instruct has ``use_sliding_window: false``, so it passes."""
    types = raw.get("layer_types")
    if types is not None:
        field_ = "layer_types"
        sliding = [i for i, t in enumerate(types) if t == "sliding_attention"]
    elif raw.get("use_sliding_window") and raw.get("sliding_window") is not None:
        # 28: max_window_layers' default in both config classes
        field_ = "use_sliding_window=true"
        sliding = list(range(int(raw.get("max_window_layers", 28)), num_layers))
    else:
        field_, sliding = "", []
    if sliding:
        raise ModelFilesError(f"{where}: {field_} asks for sliding-window attention on "
                              f"{len(sliding)} of {num_layers} layers, which is not supported "
                              "(only full causal attention)")


__all__ = ["ModelShape", "ModelFilesError", "ARCHS", "ARCHITECTURES", "SEQUENCE_CLASSIFICATION",
           "ArchFacts",
           "DEFAULT_POSITIONS", "YARN_DEFAULTS", "load_config_json", "read_hf_config",
           "shape_from_dict",
           "any_shape_from_dict"]
