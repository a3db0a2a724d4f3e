"""Checkpoints in the pccx split-`.npy` layout: read lazily, write synthetic, import, verify.

- `int4`: the spec §0 nibble packing and per-row quantisation.
- `checkpoint`: `open_checkpoint(path, config=None) -> Checkpoint`: every header checked on
  open, data memory-mapped and read lazily.
- `synth`: `write_synthetic_checkpoint(config, seed, out)`, deterministic and streamed.
- `hf_import`: `import_safetensors(sources, out)` from Hugging Face shards (F32/F16/BF16).
- `verify`: `verify_checkpoint(path, config=None) -> list[str]` of problems.
"""

from pccx_flow.weights.checkpoint import Checkpoint, open_checkpoint

__all__ = ["Checkpoint", "open_checkpoint"]
