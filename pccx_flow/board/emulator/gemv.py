"""The GEMV lanes of the emulated board: a GEMV word read as the target reads it.

`GemvUnit` is a part of `pccx_flow.board.emulator.emulate.Emulator`. A GEMV's input length and
rows come from the constant slots its pointers name: on the spec target ``size_ptr`` holds
the input length and ``shape_ptr`` the tile shape; as built the L2 load takes its length
from the fmap-shape RAM at ``shape_ptr`` (X*Y*Z BF16 elements, ``Global_Scheduler.sv``) and
``size_ptr`` names the weight-shape RAM slot the engine uses. Weights come from the DataMover
stream the sidecar records; an attention GEMV's matrix is its K/V rows in L2 (as built a
path the RTL lacks, `pccx_flow.board.isa.rtl_rules.GAPS`).
"""

from __future__ import annotations

import numpy as np

from pccx_flow.board.isa import MEMSET_CACHES


class GemvUnit:
    """GEMV and attention words (see the module docstring)."""

    def _ram(self, cache: str, slot: int) -> tuple[int, int, int]:
        """(a, b, c) of slot `slot` of the as-built fmap-shape or weight-shape RAM."""
        key = (MEMSET_CACHES[cache], slot)
        if key not in self.b.rams:
            raise self.fail(f"points at {cache} slot {slot}, which no MEMSET wrote")
        return self.b.rams[key]

    def _gemv_shape(self, f: dict) -> tuple[int, int]:
        """(input length, rows) of a GEMV, from the slots its pointers name on the target."""
        if self.t.gemv_length_ptr == "shape_ptr":  # as built (Global_Scheduler.sv)
            x, y, z = self._ram("fmap_shape", f["shape_ptr"])
            rows, _, _ = self._ram("weight_shape", f["size_ptr"])
            return (x * y * z) & ((1 << 20) - 1), rows
        _, c_lo, c_hi, _ = self._slot(f["size_ptr"])
        _, rows, _, _ = self._slot(f["shape_ptr"])
        return c_lo | c_hi << 16, rows

    def gemv(self, i: int, f: dict, op: str) -> None:
        F = self.F
        cols, rows = self._gemv_shape(f)
        extra = self.p.streams.get(i, {})
        if "attention" in extra:
            self.attention(i, f, extra)
            return
        x = self.read(f["src"], cols, self.t.l2_dtype, "gemv").astype(F)
        w = extra["weight"]
        r0, r1 = w["rows"]
        if r1 - r0 != rows:
            raise self.fail(f"shape slot says {rows} rows, the weight stream carries {r1 - r0}")
        key, layout = w["key"], w["layout"]
        if self.weights.storage(key) == "int4":
            m = self.weights.rows(key, r0, r1, F)
            full = m.shape[1]
        else:
            t = self.weights.tensor(key)
            full = t.shape[0] if layout == "in_out" else t.shape[1]
        c0, c1 = w["cols"] or (0, full)
        if c1 - c0 != cols:
            raise self.fail(
                f"the length slot says {cols} inputs, the weight stream carries {c1 - c0}"
            )
        if self.weights.storage(key) == "int4":
            y = m[:, c0:c1] @ x
        elif layout == "in_out":
            y = x @ np.asarray(t[c0:c1, r0:r1], dtype=F)
        else:
            y = np.asarray(t[r0:r1, c0:c1], dtype=F) @ x
        self._gemv_out(f, np.asarray(y, dtype=F))

    def _gemv_out(self, f: dict, y: np.ndarray) -> None:
        """Write a GEMV's result from the start of word dest (accm: onto what dest holds);
        as built in BF16, zero-padded to whole words (`rtl_rules.GAPS`: the RTL has no GEMV
        store, this is the documented intent)."""
        if f["flags"] >> 4 & 1:  # accm: accumulate onto what dest holds
            y = y + self.read(f["dest"], y.size, self.t.l2_dtype, "gemv").astype(self.F)
        self.write(f["dest"], y, self.t.l2_dtype, whole_words=self.t.cvo_whole_words)

    def _matrix(self, i: int, parts: list[str], head_dim: int) -> np.ndarray:
        """The KV rows of an attention GEMV (one KV head's): its parts, read where each lies."""
        return np.concatenate(
            [self._read_operand(i, name, "gemv").reshape(-1, head_dim) for name in parts], axis=0
        )

    def attention(self, i: int, f: dict, extra: dict) -> None:
        F = self.F
        a = extra["attention"]
        k0, k1 = a["keys"]
        d, off = a["head_dim"], a["row_offset"]  # keys of the tile's rows start at off
        rows = self._matrix(i, extra["matrix_operand"], d)[k0 - off : k1 - off].astype(F)
        if a["kind"] == "attn_scores":
            q = self.read(f["src"], d, self.t.l2_dtype, "gemv").astype(F)
            scores = (rows @ q).astype(F)
            self._gemv_out({**f, "flags": 0}, scores)
            outs = list(self.p.operands[i]["outputs"])
            if f["flags"] >> 5 & 1 and len(outs) > 1:  # findemax
                self._write_operand(i, outs[1], np.array([scores.max()]))
        else:
            p = self.read(f["src"], k1 - k0, self.t.l2_dtype, "gemv").astype(F)
            self._gemv_out({**f, "flags": 0}, (p @ rows).astype(F))
