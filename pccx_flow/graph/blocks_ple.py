"""PLE mixing into the shadow streams (spec §4.E step 4, spec 003 §2).

gate_ple = GELU(ple_in · W_ple_gateᵀ) × pli; mapped = RMSNorm(gate_ple · W_ple_proj,
ple_post_ln); xs[k] += mapped for k = 1..S-1 only. The add is one HOST node (``ple_write``,
param ``rows``) whose inputs and outputs are exactly the shadow rows: the mask the spec's
Global Scheduler emits, made checkable.
"""

from __future__ import annotations

from pccx_flow.graph.blocks_altup import lkey
from pccx_flow.graph.emit import Vec
from pccx_flow.graph.ops import SERIAL_MIN_TILES, Ctx, add_vec, cvo_map, gemv_tiles, rmsnorm

BLK = "ple_mix"


def ple_mix(ctx: Ctx, layer: int, rows: list[dict], ple_in: dict, pli: dict) -> list[Vec]:
    """The layer's output stream rows: row 0 as corrected, rows 1.. plus the PLE term."""
    c = ctx.config
    base = f"L{layer:02d}.{BLK}"
    gate = gemv_tiles(
        ctx, f"{base}.gate", layer, BLK, [ple_in],
        key=lkey(layer, "per_layer_input_gate.weight"), n_out=c.ple_dim, n_in=c.hidden,
        storage="int4", min_tiles=SERIAL_MIN_TILES,
    )  # fmt: skip
    act = cvo_map(ctx, f"{base}.gelu", layer, BLK, "cvo_gelu", gate)
    gp = add_vec(ctx, f"{base}.mul_pli", layer, BLK, "mul", act, [pli])
    proj = gemv_tiles(
        ctx, f"{base}.proj", layer, BLK, [gp],
        key=lkey(layer, "per_layer_projection.weight"), n_out=c.hidden, n_in=c.ple_dim,
        storage="float32", layout="in_out",
    )  # fmt: skip
    mapped = rmsnorm(
        ctx, f"{base}.norm", layer, BLK, proj, lkey(layer, "post_per_layer_input_norm.weight")
    )
    shadow = list(range(1, c.altup_streams))
    nid = f"{base}.write"
    outs = ctx.w.add(
        nid,
        kernel="ple_write",
        layer=layer,
        block=BLK,
        inputs=mapped + [rows[k] for k in shadow],
        outputs=[(f"L{layer:02d}.xs.r{k}", (c.hidden,)) for k in shadow],
        params={"rows": shadow, "operands": [len(mapped)] + [1] * len(shadow)},
        func="ple_write",
        elements=c.hidden * len(shadow),
    )
    return [[rows[0]]] + [[o] for o in outs]
