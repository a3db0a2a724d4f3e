"""What a node of the decode-step DAG is: plain data, one dict of attributes per node.

A decode graph is a `networkx.DiGraph`. Each node is one pccx v002 instruction (GEMV, GEMM,
CVO, MEMCPY, MEMSET) or one host step (HOST) that has no instruction. Everything a later
stage needs is in the node's attribute dict, as JSON-compatible values, so a graph can be
exported, re-loaded and scheduled or executed without the code that built it:

=============== ===================================================================================
attribute       meaning
=============== ===================================================================================
``layer``       decoder layer index, or -1 for the steps before / after the layer stack
``block``       one of `BLOCKS` (the part of the step it belongs to; used for clusters, colours,
                LAuReL-overlap and PLE-slack metrics)
``op``          one of `OPS`
``func``        CVO function (one of `CVO_FUNCS`) for CVO nodes; the host operation name for
                HOST nodes (e.g. ``"tanh"``, ``"add"``, ``"rope_combine"``, ``"altup_mix"``);
                the transfer kind for MEMCPY (e.g. ``"embed_fetch"``, ``"kv_write"``); else None
``flags``       dict of instruction flags that are set (``findemax``, ``accm``, ``w_scale``,
                ``sub_emax``, ``recip_scale``, ``async``), name -> int
``inputs``      list of tensors read, each ``{"name", "shape", "dtype"}``
``outputs``     list of tensors written, same form; tensor names are unique within one step
``lane_class``  the class of lane that runs it, one of `LANE_CLASSES`; `LANE_OPS` says which
                ops each class can run
``macs``        multiply-accumulates (GEMV/GEMM), else 0
``weight_bytes`` bytes streamed from DDR through a weight port (GEMV weight tiles, as stored)
``act_bytes``   activation / cache bytes moved (MEMCPY payload; L2 reads/writes otherwise)
``elements``    elements processed (CVO and HOST work, MEMSET words)
``weight``      for nodes that read a checkpoint tensor: ``{"key": ..., "rows": [r0, r1]}``
                (``key`` as in `pccx_flow.model.tensors`, rows half-open); else None
``kernel``      name of the numeric kernel that computes it (see `pccx_flow.execute`)
``params``      dict of kernel parameters (constants, axes, slices) - plain data only
=============== ===================================================================================

An edge ``u -> v`` means v reads a tensor that u writes; its attributes are ``tensor`` (the
name) and ``bytes``. The graph's own attributes (``graph.graph``) hold ``config`` (preset
name), ``semantics``, ``position`` and ``tile_rows``.

Node ids are stable and readable: ``<scope>.<block>.<what>[.t<NN>]`` with scope ``pre``,
``L07`` or ``post`` - for example ``L07.ffn.gate.t03``.
"""

from __future__ import annotations

OPS = ("GEMV", "GEMM", "CVO", "MEMCPY", "MEMSET", "HOST")

CVO_FUNCS = ("EXP", "SQRT", "GELU", "SIN", "COS", "REDUCE_SUM", "SCALE", "RECIP")

# CVO function codes in bits [59:56] of a CVO instruction (pccx-v002.md §4).
CVO_CODES = {f: i for i, f in enumerate(CVO_FUNCS)}

LANE_CLASSES = ("gemv", "gemm", "sfu", "dma", "ctrl", "host")

# Which ops a lane of each class can execute. A node is only ever placed on a lane whose
# class can run its op; ops with no pccx instruction are HOST and run on the host CPU.
LANE_OPS = {
    "gemv": ("GEMV",),
    "gemm": ("GEMM",),
    "sfu": ("CVO",),
    "dma": ("MEMCPY",),
    "ctrl": ("MEMSET",),
    "host": ("HOST",),
}

# The lane class that runs each op by default.
OP_LANE = {op: cls for cls, ops in LANE_OPS.items() for op in ops}

BLOCKS = (
    "embed",  # token embedding row fetch and scaling (spec §1)
    "altup_init",  # AltUp initial projections (spec §2)
    "ple_pre",  # PLE pre-compute, pli_all (spec §3)
    "const",  # MEMSET constants (θ, scales) for a layer or the step
    "altup_pred",  # AltUp router and prediction (spec §4.A)
    "attn",  # Q/K/V, QK-norm, RoPE, KV cache, GQA, W_o (spec §4.B)
    "laurel",  # LAuReL branch (spec §4.C)
    "residual",  # post-attention norm, LAuReL merge (spec §4.C)
    "ffn",  # FFN gate/up/down with the sparse gate on early layers (spec §4.D)
    "altup_corr",  # AltUp correction (spec §4.E steps 1-3)
    "ple_mix",  # PLE mixing into shadow rows 1..3 (spec §4.E step 4)
    "final",  # unprojection, final norm, LM head, softcap, logits read-back (spec §5)
)


def lane_can_run(lane_class: str, op: str) -> bool:
    """True when a lane of `lane_class` can execute an `op` node."""
    return op in LANE_OPS.get(lane_class, ())


def tensor(name: str, shape: tuple[int, ...] | list[int], dtype: str) -> dict:
    """A tensor reference as nodes record it: ``{"name", "shape", "dtype"}``."""
    return {"name": name, "shape": [int(d) for d in shape], "dtype": dtype}
