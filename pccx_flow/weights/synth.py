"""Deterministic synthetic checkpoints of any preset, streamed tensor by tensor.

Every tensor is random, norm gammas and ``altup_scale`` included: all-ones gammas or a
constant ``altup_scale`` would let a decoder that skips a norm, uses ``1 + gamma`` or applies
the AltUp scale in the wrong place give the same answer as a correct one.

Determinism: each row chunk of each tensor draws from its own generator,
``default_rng([seed, crc32(key), chunk])``, with a chunk size that depends only on the tensor's
shape. The same seed gives byte-identical files whatever the write order or memory.

Magnitudes (chosen so a 35-layer E4B step stays finite and well scaled; ``x`` below has
roughly unit RMS, ``D`` is the hidden size):

- Matrices are fan-in scaled: std 1/sqrt(fan_in), so ``x · W`` keeps unit RMS. INT4 matrices
  draw q uniformly from -7..7 (zero mean, std 4.32) with a per-row scale of
  ``1/(4.32 sqrt(fan_in))`` jittered by U(0.75, 1.25), so rows really differ in scale.
- ``W_embed``: std 4/sqrt(D). Then ``x0 = row · sqrt(D)`` has RMS 4 and, since the LM head is
  tied and ``x_final_norm`` has RMS ~1, logits have std ~4: the largest of 262,400 reaches
  ~20, where the 30·tanh(x/30) softcap bends visibly without saturating.
- ``W_ple``: std 1/sqrt(ple_dim), so ``y = row · sqrt(ple_dim)`` has unit RMS like x_proj.
- Norm gammas and ``altup_scale``: U(0.5, 1.5) (mean 1, never zero, real spread).
- ``gamma_q``/``gamma_k``: U(0.5, 1.5) · g with ``g² = 2 / (1.083 sqrt(head_dim))``. Gemma 3N
  has no 1/sqrt(d) attention scaling; after QK-norm a score sums head_dim products of
  unit-RMS values times gamma_q·gamma_k, so its std is ~ sqrt(head_dim) · g² · E[U²] = 2
  (E[U²] = 1.083): a softmax that is peaked but not one-hot (unit gammas would give std 16
  on E4B, a one-hot softmax).
- ``altup_router``: std 0.7·sqrt(D). The router input is RMSNorm(x)/D (RMS 1/D), so the
  pre-tanh modalities get std ~0.7 and tanh stays in its curved range: a wrong 1/D factor
  shows up as saturated or vanishing modalities.
- ``altup_pred``, ``altup_corr``: std 0.1, so coef_mat entries are ~0.1 and the correction
  coefficients 1 ± 0.1: the four streams mix visibly but the product of 35 (I + C) factors
  (independent, zero mean) does not blow up.
- The residual stream stays bounded because every sublayer output is RMS-normalised before
  it is added, and the LAuReL merge divides by sqrt(2). The shadow streams do accumulate one
  innovation per layer (a random walk), so they grow roughly like sqrt(layer).

Checked with the reference decode on the E4B checkpoint of seed 0 (token 2, positions 0 and
1): every value finite; xs[0] RMS 3.5-9.5 across the 35 layers, shadow streams up to RMS ~47;
router modalities spread over -0.97..0.94; logits std 4.1, largest raw logit 21 (18 after
the softcap).
"""

from __future__ import annotations

import math
import operator
import sys
import zlib
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pccx_flow.errors import InputError
from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.model.tensors import TensorSpec, tensor_manifest
from pccx_flow.weights.int4 import pack_int4
from pccx_flow.weights.writer import TensorFileWriter, staged_checkpoint, write_manifest

CHUNK_ELEMENTS = 1 << 22  # values per row chunk: ~4 M (16 MB float32, 2 MB packed INT4)
INT4_LEVEL = 7  # q uniform in -7..7
INT4_STD = math.sqrt(((2 * INT4_LEVEL + 1) ** 2 - 1) / 12)  # std of that uniform, 4.32
EMBED_GAIN = 4.0
GAMMA_LOW, GAMMA_HIGH = 0.5, 1.5
ATTN_SCORE_STD = 2.0
ROUTER_PRE_TANH_STD = 0.7
ALTUP_COEF_STD = 0.1
ROW_SCALE_JITTER = 0.25

GAMMA_NAMES = {
    "norm_ple",
    "W_final_norm",
    "altup_rn",
    "altup_scale",
    "input_ln",
    "laurel_norm",
    "post_attn_ln",
    "pre_ffn_ln",
    "post_ffn_ln",
    "ple_post_ln",
}


def _pair_table() -> np.ndarray:
    """PAIR_TABLE[a] for a in 0..224: one packed byte of two values in -7..7, (a//15, a%15)."""
    a = np.arange(225)
    q = np.stack([a // 15 - INT4_LEVEL, a % 15 - INT4_LEVEL], axis=1).astype(np.int8)
    return pack_int4(q)[:, 0]


PAIR_TABLE = _pair_table()


def chunk_rows(spec: TensorSpec) -> int:
    """Rows per chunk of a tensor: fixed by its shape, so the seeding never depends on order."""
    cols = math.prod(spec.shape[1:])
    return max(1, CHUNK_ELEMENTS // max(cols, 1))


def chunk_rng(seed: int, key: str, chunk: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode()), chunk])


def _gamma_center(config: Gemma3nConfig, spec: TensorSpec) -> float:
    if spec.spec_name in ("gamma_q", "gamma_k"):
        mean_sq = (GAMMA_LOW**2 + GAMMA_LOW * GAMMA_HIGH + GAMMA_HIGH**2) / 3  # 1.083
        return math.sqrt(ATTN_SCORE_STD / (mean_sq * math.sqrt(config.head_dim)))
    return 1.0


def matrix_std(config: Gemma3nConfig, spec: TensorSpec) -> float:
    """Element std of a matrix (see the module docstring for the reasoning)."""
    name = spec.spec_name
    if name == "W_embed":
        return EMBED_GAIN / math.sqrt(config.hidden)
    if name == "W_ple":
        return 1.0 / math.sqrt(config.ple_dim)
    if name == "altup_router":
        return ROUTER_PRE_TANH_STD * math.sqrt(config.hidden)
    if name in ("altup_pred", "altup_corr"):
        return ALTUP_COEF_STD
    # INT4 matrices are [out, in]; float32 ones are stored the way the spec multiplies, x · A.
    fan_in = spec.shape[1] if spec.storage == "int4" else spec.shape[0]
    return 1.0 / math.sqrt(fan_in)


def _int4_chunk(rng: np.random.Generator, rows: int, cols: int, std: float):
    jitter = rng.uniform(1 - ROW_SCALE_JITTER, 1 + ROW_SCALE_JITTER, size=rows)
    scale = (std / INT4_STD * jitter).astype(np.float32)
    packed = PAIR_TABLE[rng.integers(0, 225, size=(rows, cols // 2), dtype=np.uint8)]
    return packed, scale


def _float_chunk(rng, config: Gemma3nConfig, spec: TensorSpec, rows: int) -> np.ndarray:
    shape = (rows, *spec.shape[1:])
    if len(spec.shape) == 1:
        center = _gamma_center(config, spec)
        if spec.spec_name not in GAMMA_NAMES | {"gamma_q", "gamma_k"}:
            raise AssertionError(f"no initialiser for 1-D tensor {spec.spec_name}")
        return (center * rng.uniform(GAMMA_LOW, GAMMA_HIGH, size=shape)).astype(np.float32)
    std = matrix_std(config, spec)
    return (std * rng.standard_normal(size=shape, dtype=np.float32)).astype(np.float32)


def write_tensor(out: Path, config: Gemma3nConfig, spec: TensorSpec, seed: int, bar) -> None:
    """Write one synthetic tensor in its manifest storage, chunk by chunk."""
    writer = TensorFileWriter(out, spec, spec.storage)
    step = chunk_rows(spec)
    rows = spec.shape[0]
    for chunk, start in enumerate(range(0, rows, step)):
        n = min(step, rows - start)
        rng = chunk_rng(seed, spec.key, chunk)
        if spec.storage == "int4":
            packed, scale = _int4_chunk(rng, n, spec.shape[1], matrix_std(config, spec))
            bar.update(writer.write_int4(packed, scale))
        else:
            bar.update(writer.write_float32(_float_chunk(rng, config, spec, n)))
    writer.close()


def write_synthetic_checkpoint(
    config: Gemma3nConfig,
    seed: int,
    out: Path | str,
    *,
    progress: bool = True,
    force: bool = False,
) -> Path:
    """Write a random checkpoint of `config` to `out`; returns the directory.

    Memory stays at one chunk (a few tens of MB) whatever the model size. A non-empty `out`
    is refused unless `force`. The checkpoint is written into a sibling temp folder and
    swapped in when complete (`writer.staged_checkpoint`): an old checkpoint at `out` stays
    intact until then, whatever happens.
    """
    try:
        seed = operator.index(seed)
    except TypeError:
        seed = -1
    if seed < 0:
        raise InputError("the seed must be a non-negative integer, e.g. --seed 0")
    out = Path(out)
    specs = tensor_manifest(config)
    total = sum(t.stored_bytes for t in specs)
    show = progress and sys.stderr.isatty()
    with staged_checkpoint(out, force=force, config=config) as tmp:
        with tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            desc=f"synth {config.name}",
            file=sys.stderr,
            disable=not show,
        ) as bar:
            for spec in specs:
                write_tensor(tmp, config, spec, seed, bar)
        storages = {t.key: t.storage for t in specs}
        write_manifest(tmp, config, "int4", storages, specs, extra={"synthetic": {"seed": seed}})
    return out
