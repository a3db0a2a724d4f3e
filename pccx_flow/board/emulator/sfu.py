"""The SFU of the emulated board: a CVO word read as the target reads it, and its function.

`CvoUnit` is a part of `pccx_flow.board.emulator.emulate.Emulator`. On the spec target a CVO
reads and writes float32 at word addresses. As built (`pccx_flow.board.isa.target`) its
fields are BF16 element addresses whose low 3 bits the bridge drops, it streams BF16, writes
whole words through the bridge's serialiser (`L2Access.write_bridge`), and refuses what the
bridge cannot run: length 0, more than 2,048 results, a 13-bit word count overflow.

Numerics: ``spec`` computes each function in the specification's math; ``rtl`` replaces the
functions the RTL approximates (`RTL_APPROXIMATIONS`), and on an as-built program runs the
SFU's own BF16 arithmetic (`RTL_SFU`, `pccx_flow.board.emulator.sfu_rtl`).
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.board.emulator import sfu_rtl
from pccx_flow.board.emulator.l2 import UNITS_PER_WORD, units_of
from pccx_flow.board.isa import CVO_FLAGS, CVO_FUNCS, bf16

NUMERICS = ("spec", "rtl")
_CVO_NAMES = {v: k for k, v in CVO_FUNCS.items()}
# 13-bit word counter of the as-built bridge (mem_CVO_stream_bridge.sv total_words)
BRIDGE_MAX_WORDS = (1 << 13) - 1

RTL_APPROXIMATIONS = {
    "GELU": "x * sigmoid(1.702 x) instead of the tanh form (pccx-v002.md §4)",
    "SIN": "CORDIC input saturates at +-4 rad: sin(clip(x, -4, 4)) (pccx-v002.md §4)",
    "COS": "CORDIC input saturates at +-4 rad: cos(clip(x, -4, 4)) (pccx-v002.md §4)",
}
# On an as-built program ``rtl`` numerics run these CVO functions through the SFU's own BF16
# arithmetic as CVO_sfu_unit.sv computes it (`pccx_flow.board.emulator.sfu_rtl`, checked
# against the RTL under Verilator); SIN and COS (the CORDIC unit) keep the model above.
RTL_SFU = ("EXP", "SQRT", "RECIP", "GELU", "SCALE", "REDUCE_SUM")


class CvoUnit:
    """CVO words on the emulated SFU (see the module docstring)."""

    def cvo(self, i: int, f: dict) -> None:
        F = self.F
        func = _CVO_NAMES[f["func"]]
        flags = {k for k, b in CVO_FLAGS.items() if f["flags"] >> b & 1}
        n = f["length"]
        as_built = self.t.cvo_addresses == "element"
        src, dst = self.t.cvo_word(f["src"]), self.t.cvo_word(f["dst"])
        results = self.t.cvo_results(func, n)
        if as_built:
            self._check_bridge(n, results)
        dtype = self.t.l2_dtype
        per = UNITS_PER_WORD // units_of(dtype)
        for addr, words in ((src, math.ceil(n / per)), (dst, math.ceil(results / per))):
            if addr + words > self.reach_words:
                raise self.fail(f"CVO address {addr} is beyond the SFU's reach")
        x = self.read(src, n, dtype, "sfu").astype(F)
        inputs = list(self.p.operands[i]["inputs"])
        extra = self.p.streams.get(i, {})
        second = None
        if len(inputs) > 1 and func in ("EXP", "SCALE") and "scalar_slot" not in extra:
            second = F(self._read_operand(i, inputs[-1], "sfu")[0])
        # as built the word's padding elements go through the function too (RECIP of a zero)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            if as_built and self.numerics == "rtl" and func in RTL_SFU:
                y = self._sfu_rtl(func, flags, x, second, extra)
            else:
                y = np.asarray(self._function(func, flags, x, second, extra), dtype=F)
        if as_built:
            self.write_bridge(dst, y)
        else:
            self.write(dst, y, dtype)

    def _sfu_rtl(self, func: str, flags: set, x, second, extra: dict) -> np.ndarray:
        """The as-built SFU's own BF16 arithmetic (`pccx_flow.board.emulator.sfu_rtl`).

        Where the RTL takes an operand from somewhere no program controls (EXP's e_max,
        SCALE's scalar: `rtl_rules.GAPS`) the sidecar's value is used, rounded to BF16, and
        each SCALE gets its own scalar."""
        if func == "EXP" and "sub_emax" in flags:
            x = bf16.round_bf16(np.asarray(x, dtype=np.float32) - np.float32(second))
        bits = bf16.to_bits(np.asarray(x, dtype=np.float32))
        scalar = None
        if func == "SCALE":
            if "scalar_slot" in extra:
                value = self._scalar(extra["scalar_slot"], extra["scalar"])
            else:
                value = second
            scalar = int(bf16.to_bits(np.array([value], dtype=np.float32))[0])
        out = sfu_rtl.apply(func, bits, scalar=scalar, recip="recip_scale" in flags)
        return bf16.from_bits(out).astype(self.F)

    def _check_bridge(self, n: int, results: int) -> None:
        """What the as-built bridge cannot run (mem_CVO_stream_bridge.sv)."""
        if n == 0:
            raise self.fail(
                "a CVO of length 0 never finishes on the as-built bridge (ST_WRITE waits for a"
                " result that never comes)"
            )
        if results > (self.t.cvo_max_results or results):
            raise self.fail(
                f"a CVO of {results} results: the as-built bridge's result FIFO holds "
                f"{self.t.cvo_max_results} (ResultFifoDepth); the rest are dropped and the "
                "bridge waits for them forever"
            )
        if math.ceil(n / UNITS_PER_WORD) > BRIDGE_MAX_WORDS:
            raise self.fail(f"a CVO of {n} elements overflows the bridge's 13-bit word count")

    def _function(self, func: str, flags: set, x, second, extra: dict):
        """The CVO function on `x` (the numerics' reading of it)."""
        F = self.F
        if func == "EXP":
            return np.exp(x - second) if "sub_emax" in flags else np.exp(x)
        if func == "SCALE":
            if "scalar_slot" in extra:
                return x * F(self._scalar(extra["scalar_slot"], extra["scalar"]))
            return x / second if "recip_scale" in flags else x * second
        if func == "REDUCE_SUM":
            return np.array([np.sum(x, dtype=F)], dtype=F)
        if func == "SQRT":
            return np.sqrt(x)
        if func == "RECIP":
            return F(1.0) / x
        if func == "GELU":
            if self.numerics == "rtl":
                return x / (F(1.0) + np.exp(np.minimum(F(-1.702) * x, F(80.0))))
            c = F(math.sqrt(2.0 / math.pi))
            inner = c * (x + F(0.044715) * x * x * x)
            return x / (F(1.0) + np.exp(np.minimum(F(-2.0) * inner, F(80.0))))
        if func in ("SIN", "COS"):
            arg = np.clip(x, F(-4.0), F(4.0)) if self.numerics == "rtl" else x
            return np.sin(arg) if func == "SIN" else np.cos(arg)
        raise self.fail(f"CVO function {func} is not emulated")  # pragma: no cover
