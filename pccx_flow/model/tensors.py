"""The checkpoint's tensor manifest: every tensor a config needs, by checkpoint key.

One entry per tensor with its specification name, its key (the Hugging Face key under
``model.language_model.``), the logical shape the specification multiplies with, and its
storage kind: ``int4`` (packed ``uint8`` ``[rows, cols/2]`` plus ``<key>.scale.npy`` with one
float32 scale per row) or ``float32``. The storage kinds follow the specification's datatype
tables exactly (spec 000): INT4 for W_embed, W_ple, the model-level W_ple_proj, Q/K/V/O,
LAuReL, FFN and W_ple_gate; float32 for everything else.

Orientation (``gemma3n-semantics.md``): an INT4 matrix is stored ``[out, in]`` (the Hugging
Face weight, quantised per output row); a float32 matrix is stored the way the specification
multiplies it. ``hf_transposed`` marks the tensors whose stored form is the transpose of the
Hugging Face ``[out, in]`` weight, which a converter must transpose.

>>> from pccx_flow.model.config import get_config
>>> specs = {t.key: t for t in tensor_manifest(get_config("e4b"))}
>>> specs["layers.0.mlp.gate_proj.weight"].shape, specs["layers.0.mlp.gate_proj.weight"].storage
((16384, 2048), 'int4')
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.model.config import Gemma3nConfig, owns_kv

KEY_PREFIX = "model.language_model."


@dataclass(frozen=True)
class TensorSpec:
    """One checkpoint tensor as the specification uses it."""

    key: str  # without KEY_PREFIX, e.g. "layers.3.self_attn.q_proj.weight"
    spec_name: str  # the specification's name, e.g. "W_q"
    shape: tuple[int, ...]  # logical (unpacked) shape, in the orientation the spec multiplies
    storage: str  # "int4" or "float32"
    layer: int | None = None
    hf_transposed: bool = False  # stored form is the transpose of the HF [out, in] weight
    used: bool = True  # False for K/V weights of KV-sharing layers (present, never read)

    @property
    def full_key(self) -> str:
        return KEY_PREFIX + self.key

    @property
    def stored_bytes(self) -> int:
        """Bytes of the stored tensor (INT4: packed nibbles plus one float32 scale per row)."""
        n = 1
        for d in self.shape:
            n *= d
        if self.storage == "int4":
            return n // 2 + 4 * self.shape[0]
        return 4 * n


def _t(key, spec_name, shape, storage, layer=None, hf_transposed=False, used=True) -> TensorSpec:
    return TensorSpec(key, spec_name, tuple(shape), storage, layer, hf_transposed, used)


def model_tensors(config: Gemma3nConfig) -> list[TensorSpec]:
    """Tensors outside the layer stack (spec 000 §1-§3 and §5)."""
    c = config
    out = [
        _t("embed_tokens.weight", "W_embed", (c.vocab, c.hidden), "int4"),
        _t("embed_tokens_per_layer.weight", "W_ple", (c.vocab_per_layer, c.ple_total), "int4"),
        _t("per_layer_model_projection.weight", "W_ple_proj", (c.ple_total, c.hidden), "int4"),
        _t("per_layer_projection_norm.weight", "norm_ple", (c.ple_dim,), "float32"),
        _t("norm.weight", "W_final_norm", (c.hidden,), "float32"),
    ]
    for k in range(c.altup_streams - 1):
        out.append(
            _t(
                f"altup_projections.{k}.weight",
                f"altup_projs[{k}]",
                (c.hidden, c.hidden),
                "float32",
                hf_transposed=True,
            )
        )
        out.append(
            _t(
                f"altup_unembed_projections.{k}.weight",
                f"altup_unprojs[{k}]",
                (c.hidden, c.hidden),
                "float32",
                hf_transposed=True,
            )
        )
    return out


def layer_tensors(config: Gemma3nConfig, layer: int) -> list[TensorSpec]:
    """Tensors of one decoder layer (spec 000 §4.A-§4.E)."""
    c, i = config, layer
    p = f"layers.{i}."
    S = c.altup_streams
    own = owns_kv(c, i)
    return [
        _t(p + "altup.router_norm.weight", "altup_rn", (c.hidden,), "float32", i),
        _t(
            p + "altup.modality_router.weight",
            "altup_router",
            (c.hidden, S),
            "float32",
            i,
            hf_transposed=True,
        ),
        _t(p + "altup.prediction_coefs.weight", "altup_pred", (S * S, S), "float32", i),
        _t(p + "altup.correction_coefs.weight", "altup_corr", (S, S), "float32", i),
        _t(p + "altup.correct_output_scale", "altup_scale", (c.hidden,), "float32", i),
        _t(p + "input_layernorm.weight", "input_ln", (c.hidden,), "float32", i),
        _t(p + "self_attn.q_proj.weight", "W_q", (c.q_dim, c.hidden), "int4", i),
        _t(p + "self_attn.k_proj.weight", "W_k", (c.kv_dim, c.hidden), "int4", i, used=own),
        _t(p + "self_attn.v_proj.weight", "W_v", (c.kv_dim, c.hidden), "int4", i, used=own),
        _t(p + "self_attn.q_norm.weight", "gamma_q", (c.head_dim,), "float32", i),
        _t(p + "self_attn.k_norm.weight", "gamma_k", (c.head_dim,), "float32", i, used=own),
        _t(p + "self_attn.o_proj.weight", "W_o", (c.hidden, c.q_dim), "int4", i),
        _t(p + "laurel.linear_left.weight", "laurel_left", (c.laurel_rank, c.hidden), "int4", i),
        _t(p + "laurel.linear_right.weight", "laurel_right", (c.hidden, c.laurel_rank), "int4", i),
        _t(p + "laurel.post_laurel_norm.weight", "laurel_norm", (c.hidden,), "float32", i),
        _t(p + "post_attention_layernorm.weight", "post_attn_ln", (c.hidden,), "float32", i),
        _t(p + "pre_feedforward_layernorm.weight", "pre_ffn_ln", (c.hidden,), "float32", i),
        _t(p + "mlp.gate_proj.weight", "W_gate", (c.ffn, c.hidden), "int4", i),
        _t(p + "mlp.up_proj.weight", "W_up", (c.ffn, c.hidden), "int4", i),
        _t(p + "mlp.down_proj.weight", "W_down", (c.hidden, c.ffn), "int4", i),
        _t(p + "post_feedforward_layernorm.weight", "post_ffn_ln", (c.hidden,), "float32", i),
        _t(p + "per_layer_input_gate.weight", "W_ple_gate", (c.ple_dim, c.hidden), "int4", i),
        _t(
            p + "per_layer_projection.weight",
            "W_ple_proj",
            (c.ple_dim, c.hidden),
            "float32",
            i,
            hf_transposed=True,
        ),
        _t(p + "post_per_layer_input_norm.weight", "ple_post_ln", (c.hidden,), "float32", i),
    ]


def tensor_manifest(config: Gemma3nConfig) -> list[TensorSpec]:
    """Every tensor of the checkpoint, model-level first, then layer by layer."""
    out = model_tensors(config)
    for i in range(config.n_layers):
        out.extend(layer_tensors(config, i))
    return out
