"""The DDR image's bytes: fill a buffer from a checkpoint and a KV cache, and read it back.

`ddr.ddr_layout` says where each tensor and KV region sits; this module writes the bytes
there (INT4 tensors as their packed nibbles then float32 row scales, float32 tensors as they
are stored, the KV cache as rows of the layout's ``kv_dtype``) and gives views on a filled
buffer: `ImageWeights` answers ``storage`` / ``rows`` / ``tensor`` like a checkpoint but from
the image, so a device model that reads only the image computes with exactly the bytes the
host loaded.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.board.isa import bf16
from pccx_flow.weights.int4 import dequantize_rows


def kv_wire(layout: dict) -> str:
    """The NumPy wire dtype of the layout's KV rows (BF16 as its uint16 bit patterns)."""
    wires = {"float16": "<f2", "float32": "<f4", "bfloat16": "<u2"}
    return wires[layout.get("kv_dtype", "float16")]


def kv_bytes(layout: dict, rows) -> bytes:
    """KV rows (any float array) as the image stores them."""
    if layout.get("kv_dtype") == "bfloat16":
        return bf16.to_wire(np.asarray(rows, dtype=np.float32))
    return np.ascontiguousarray(rows, dtype=kv_wire(layout)).tobytes()


def kv_values(layout: dict, raw) -> np.ndarray:
    """The values of KV rows stored in the image (float16, float32, or BF16 as float32)."""
    if layout.get("kv_dtype") == "bfloat16":
        return bf16.from_wire(bytes(raw))
    return np.frombuffer(raw, kv_wire(layout)).copy()


def load_image(layout: dict, weights, mem: memoryview, k_cache=None, v_cache=None) -> None:
    """Write every tensor of `layout` from `weights` (and the KV cache, if given) into `mem`."""
    for key, e in layout["tensors"].items():
        if e["storage"] == "int4":
            packed, scale = weights.int4(key)
            packed = np.ascontiguousarray(packed, dtype=np.uint8).reshape(-1)
            mem[e["offset"] : e["offset"] + packed.size] = packed.tobytes()
            s = np.ascontiguousarray(scale, dtype="<f4").tobytes()
            mem[e["scale_offset"] : e["scale_offset"] + len(s)] = s
        else:
            data = np.ascontiguousarray(weights.float32(key), dtype="<f4").tobytes()
            mem[e["offset"] : e["offset"] + len(data)] = data
    for cache, kind in ((k_cache, "k"), (v_cache, "v")):
        if cache is None:
            continue
        for layer in range(cache.shape[0]):
            r = layout["kv"][f"{layer}.{kind}"]
            rows = np.asarray(cache[layer])  # [rows, kv_dim], heads side by side
            d = rows.shape[-1] // r["heads"]
            for g in range(r["heads"]):  # head-major (`ddr_layout`): a head's rows in a run
                data = kv_bytes(layout, np.ascontiguousarray(rows[:, g * d : (g + 1) * d]))
                at = r["offset"] + g * r["head_bytes"]
                mem[at : at + len(data)] = data


def kv_views(layout: dict, mem: memoryview, n_layers: int, kv_dim: int) -> tuple[list, list]:
    """Per cache layer, the K and V rows ``[max_seq, heads, head_dim]`` as views on `mem`
    (the image is head-major; in the layout's wire dtype: BF16 rows are uint16 bit
    patterns)."""
    out: dict[str, list] = {"k": [], "v": []}
    wire = kv_wire(layout)
    for layer in range(n_layers):
        for kind in ("k", "v"):
            r = layout["kv"][f"{layer}.{kind}"]
            a = np.frombuffer(mem, dtype=wire, count=r["rows"] * kv_dim, offset=r["offset"])
            out[kind].append(a.reshape(r["heads"], r["rows"], -1).transpose(1, 0, 2))
    return out["k"], out["v"]


class ImageKV:
    """A ``[layers, max_seq, kv_dim]`` cache whose rows are views on the image.

    Indexing (layer, rows[, columns]) gives values: float16 or float32 as stored, BF16 rows
    as float32; the rows of the heads are joined side by side as the cache's rows are."""

    def __init__(self, rows: list[np.ndarray]):
        self._rows = rows  # per layer [max_seq, heads, head_dim] (`kv_views`)
        n, heads, d = rows[0].shape
        self.shape = (len(rows), n, heads * d)
        self.bf16 = rows[0].dtype == np.dtype("<u2")
        self.dtype = np.dtype(np.float32) if self.bf16 else rows[0].dtype

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        layer, rows, cols = (*index, slice(None), slice(None))[:3]
        picked = self._rows[layer][rows]
        picked = picked.reshape(*picked.shape[:-2], self.shape[-1])[..., cols]
        return bf16.from_bits(picked) if self.bf16 else picked


class ImageWeights:
    """Checkpoint-like read access to the tensors of a filled DDR image."""

    def __init__(self, layout: dict, mem: memoryview, config):
        self.layout = layout
        self.mem = mem
        self.config = config

    def _entry(self, key: str) -> dict:
        return self.layout["tensors"][key]

    def storage(self, key: str) -> str:
        return self._entry(key)["storage"]

    def int4(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        e = self._entry(key)
        rows, cols = e["shape"]
        packed = np.frombuffer(self.mem, np.uint8, rows * cols // 2, e["offset"])
        scale = np.frombuffer(self.mem, "<f4", rows, e["scale_offset"])
        return packed.reshape(rows, cols // 2), scale

    def float32(self, key: str) -> np.ndarray:
        e = self._entry(key)
        n = int(np.prod(e["shape"]))
        return np.frombuffer(self.mem, "<f4", n, e["offset"]).reshape(e["shape"])

    def tensor(self, key: str) -> np.ndarray:
        if self.storage(key) == "int4":
            return dequantize_rows(*self.int4(key))
        return np.array(self.float32(key), dtype=np.float32)

    def rows(self, key: str, start: int, stop: int, dtype=np.float32) -> np.ndarray:
        if self.storage(key) == "int4":
            packed, scale = self.int4(key)
            return dequantize_rows(packed[start:stop], scale[start:stop], dtype)
        return np.array(self.float32(key)[start:stop], dtype=dtype)
