"""The Gemma 3N model description: configuration, per-layer rules and tensor manifest."""

from pccx_flow.model.config import (
    PRESETS,
    SEMANTICS,
    Gemma3nConfig,
    check_position,
    check_semantics,
    get_config,
    is_global_layer,
    is_sparse_layer,
    kv_source_layer,
    owns_kv,
    rope_theta,
)
from pccx_flow.model.tensors import TensorSpec, tensor_manifest

__all__ = [
    "PRESETS",
    "SEMANTICS",
    "Gemma3nConfig",
    "TensorSpec",
    "check_position",
    "check_semantics",
    "get_config",
    "is_global_layer",
    "is_sparse_layer",
    "kv_source_layer",
    "owns_kv",
    "rope_theta",
    "tensor_manifest",
]
