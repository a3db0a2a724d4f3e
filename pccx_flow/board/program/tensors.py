"""What the parts of the lowering agree on: tensor sizes, operand groups, special names.

`lower` builds a program in several jobs (`addresses`, `batches`, `host_steps`, `words`);
the names and small helpers they all use live here so no job imports another.
"""

from __future__ import annotations

import math
import struct

# MEMCPY kinds whose destination is L2 (the others copy L2 to the host or DDR)
TO_L2_COPIES = ("kv_read", "embed_fetch")
DONE_SCRATCH = "done.scratch"  # the L2 word DONE markers read and write
DONE_NODE = "done-marker"  # the node name of a DONE marker word
# MEMCPY words the lowering adds around host steps (sidecar stream kinds)
HOST_READ, HOST_WRITE = "host_read", "host_write"
HOST_IO_ALIGN = 64  # bytes: each copied tensor starts a cache line of the host I/O area

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4}


def tensor_bytes(t: dict) -> int:
    """Bytes of a tensor in its graph dtype (what the scheduler charges)."""
    return math.prod(t["shape"]) * DTYPE_BYTES.get(t["dtype"], 4)


def operand_groups(data: dict) -> list[list[str]]:
    """The node's inputs as operands: lists of tensor names one instruction reads contiguously.

    ``params.operands`` gives the part count of each operand; attention GEMVs (no such
    param) read the query, then the cache rows [past rows, the new row] as one operand.
    """
    names = [t["name"] for t in data["inputs"]]
    counts = data["params"].get("operands")
    if counts:
        out, i = [], 0
        for c in counts:
            out.append(names[i : i + c])
            i += c
        if i < len(names):
            out.extend([n] for n in names[i:])
        return out
    if data["kernel"] in ("attn_scores", "attn_pv") and len(names) > 2:
        return [[names[0]], names[1:]]
    return [[n] for n in names]


def f32_halves(value: float) -> tuple[int, int]:
    """A float32's bit pattern as (high 16 bits, low 16 bits), for a MEMSET slot."""
    (bits,) = struct.unpack("<I", struct.pack("<f", float(value)))
    return bits >> 16, bits & 0xFFFF
