"""A functional emulator of a pccx v002 program: decodes the words and executes them.

It never looks at the decode graph. It runs the program's steps in order on a model of the
board: an L2 of ``l2_bytes`` addressed in 128-bit words (kept at 16-bit granularity: a
float32 value fills two units, a float16 one), the 64-slot constant cache, the DDR image (the
checkpoint's tensors and a float16 KV cache) and the host. What it reads from the sidecar is
what the host would hold besides the words: the DataMover stream of each GEMV and MEMCPY
(which weight rows, which KV rows), the L2 address of operands a word has no field for (the
scalar of SCALE / EXP sub_emax, the second output of findemax, parts of a split operand), and
the plain description of each host step (its kernel and operands). Host steps touch host
memory only: what they read from L2 arrives by a MEMCPY L2->host word and what instructions
read of theirs leaves by a MEMCPY host->L2 word, as on the board.

Checks, each one line naming the word index and its node: an illegal word, an access outside
every allocated L2 region or (CVO) beyond the SFU's reach, a read of L2 that nothing wrote,
and a missing fence (an instruction reading a value another engine wrote since the last
fence, or a host step reading one).

Targets (`pccx_flow.board.target`): the words are read as the program's target's hardware
reads them, not as the lowering meant them. ``spec``: word addresses, float32 activations in
L2. ``as-built``: a CVO's src/dst are BF16 element addresses whose low 3 bits the bridge
drops, it streams BF16 and writes whole words (a partial last word's results in its top
elements, a lone result in element 7), it refuses more than 2,048 results or length 0 (the
bridge would hang), and a CVO must be the last word of its batch; a GEMV takes its input
length from the fmap-shape slot at shape_ptr; every value written to L2 is rounded to BF16.
Where the RTL has no datapath at all (`target.GAPS`) the as-built reading keeps the
documented intent. So a program lowered for one target and run under the other's reading
computes something else (a test shows it).

Numerics: ``spec`` computes what each instruction means in the specification's math (in the
precision the caller chose, float32 by default); ``rtl`` replaces the functions the RTL
approximates, each named in `RTL_APPROXIMATIONS`.
"""

from __future__ import annotations

import bisect
import itertools
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from pccx_flow.board import bf16
from pccx_flow.board.host_side import call_host_kernel
from pccx_flow.board.isa import (
    CVO_FLAGS,
    CVO_FUNCS,
    FORMATS,
    KICK_MARKER,
    L2_WORD_BYTES,
    MEMSET_CACHES,
    IsaError,
    decode,
    memcpy_length_words,
)
from pccx_flow.board.program import Program
from pccx_flow.board.target import BF16, get_target
from pccx_flow.board.wire import entry_fields
from pccx_flow.errors import PccxFlowError
from pccx_flow.graph.blocks_final import LOGITS
from pccx_flow.precision import tensor_dtype

UNITS_PER_WORD = 8  # 16-bit units per 128-bit L2 word
ENGINE = {"GEMV": "gemv", "GEMM": "gemm", "CVO": "sfu", "MEMCPY": "dma", "MEMSET": "ctrl"}
NUMERICS = ("spec", "rtl")
# how each 16-bit unit was last written (Board.stored): 0 never or the second unit of a float32
STORED = {"float16": 1, "float32": 2, BF16: 3}
_CVO_NAMES = {v: k for k, v in CVO_FUNCS.items()}
# 13-bit word counter of the as-built bridge (mem_CVO_stream_bridge.sv total_words)
BRIDGE_MAX_WORDS = (1 << 13) - 1

RTL_APPROXIMATIONS = {
    "GELU": "x * sigmoid(1.702 x) instead of the tanh form (pccx-v002.md §4)",
    "SIN": "CORDIC input saturates at +-4 rad: sin(clip(x, -4, 4)) (pccx-v002.md §4)",
    "COS": "CORDIC input saturates at +-4 rad: cos(clip(x, -4, 4)) (pccx-v002.md §4)",
}


def batch_rule_violation(target, words: list[int]) -> int | None:
    """Index (in `words`) of a CVO that is not the batch's last instruction, on a target
    that allows a CVO only there (`Target.one_cvo_per_batch`); None when the batch is fine.

    As built a second CVO would reach the bridge while it is busy and be dropped, and the
    DONE the host waits for after the batch must be its CVO's (`target.RULES`)."""
    if not target.one_cvo_per_batch:
        return None
    body = [k for k, w in enumerate(words) if w != KICK_MARKER]
    for k in body[:-1]:
        if words[k] >> 60 == FORMATS["CVO"].opcode:
            return k
    return None


class EmulationError(PccxFlowError):
    """A program that the emulated board cannot run: the message names the word and node."""


def _units(dtype: str) -> int:
    return 1 if dtype in ("float16", BF16) else 2


@dataclass
class Board:
    """The emulated state: L2 values, who wrote each unit, constant slots, KV cache."""

    l2: np.ndarray
    written_by: np.ndarray  # word index that last wrote each unit; -2 never
    stored: np.ndarray  # how each unit was last written (`STORED`; 0 never)
    slots: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    # as built the fmap-shape and weight-shape slots are two RAMs (mem_dispatcher.sv
    # u_fmap_shape, u_weight_shape): (cache, slot) -> (a, b, c)
    rams: dict[tuple[int, int], tuple[int, int, int]] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)


class Emulator:
    """Runs one program (one decode step) against a checkpoint and a KV cache."""

    def __init__(self, program: Program, weights, k_cache, v_cache, token_id: int,
                 numerics: str = "spec"):  # fmt: skip
        if numerics not in NUMERICS:
            raise EmulationError(f"unknown numerics {numerics!r}; use one of {NUMERICS}")
        self.p = program
        self.t = get_target(program.meta.get("target", "spec"))
        self.weights = weights
        self.k_cache, self.v_cache = k_cache, v_cache
        self.token_id = token_id
        self.numerics = numerics
        self.F = tensor_dtype()
        n_units = program.meta["l2_words"] * UNITS_PER_WORD
        self.b = Board(
            np.zeros(n_units, dtype=self.F),
            np.full(n_units, -2, dtype=np.int64),
            np.zeros(n_units, dtype=np.int8),
        )
        self.reach_words = program.meta["cvo_reach_words"]
        spans = sorted((r["addr"], r["addr"] + r["words"]) for r in program.l2.values())
        self.region_starts = [a for a, _ in spans]
        # the furthest end of any region starting at or before each start: an access lies
        # inside some region iff that reach covers it (regions nest and reuse addresses)
        self.region_reach = list(itertools.accumulate((b for _, b in spans), max))
        self.engines: dict[int, str] = {}
        self.done_upto = 0
        self.kv_rows: dict[int, dict[str, np.ndarray]] = {}
        self.host_ready: dict[str, int] = {}  # tensor -> the MEMCPY word that copied it out
        self.index = -1
        self.node = ""
        # word index -> [(L2 word address, dtype, bytes written)], for golden vectors
        self.record: dict[int, list] | None = None

    # --- L2 access with the checks -------------------------------------------------------

    def fail(self, what: str) -> EmulationError:
        return EmulationError(f"word {self.index} ({self.node}): {what}")

    def _check_region(self, addr: int, words: int) -> None:
        i = bisect.bisect_right(self.region_starts, addr) - 1
        if i < 0 or self.region_reach[i] < addr + words:
            raise self.fail(
                f"L2 words {addr}..{addr + words - 1} are outside every allocated region"
            )

    def read(self, addr: int, n: int, dtype: str, engine: str | None,
             offset: int = 0) -> np.ndarray:  # fmt: skip
        """`n` values of `dtype` from L2 word `addr`, starting `offset` elements in."""
        step = _units(dtype)
        words = math.ceil((offset + n) * step / UNITS_PER_WORD)
        self._check_region(addr, words)
        start = addr * UNITS_PER_WORD + offset * step
        sl = slice(start, start + n * step, step)
        writers = self.b.written_by[sl]
        if n and writers.min() == -2:
            raise self.fail(f"reads L2 word {addr} that no instruction or host step wrote")
        last = int(writers.max()) if n else -1
        if last >= self.done_upto and self.engines.get(last) != engine:
            raise self.fail(
                f"reads L2 written by word {last} ({self.engines.get(last)}) with no fence "
                "between them (missing fence)"
            )
        return self.b.l2[sl].copy()

    def write(self, addr: int, values: np.ndarray, dtype: str, offset: int = 0,
              whole_words: bool = False) -> None:  # fmt: skip
        """Store `values` as `dtype` at element `offset` of word `addr`.

        BF16 values are rounded as the hardware stores them. With `whole_words` (every
        writer on the as-built target: the bridge, the DMA and the assumed GEMV store move
        128-bit words) the rest of the covered words is written too, as zeros."""
        values = np.asarray(values).reshape(-1)
        step = _units(dtype)
        words = math.ceil((offset + values.size) * step / UNITS_PER_WORD)
        self._check_region(addr, words)
        if dtype == "float16":
            values = values.astype(np.float16)
        elif dtype == BF16:
            values = bf16.round_bf16(values)
        elif self.F is np.float32:
            values = values.astype(np.float32)
        base = addr * UNITS_PER_WORD
        start = base + offset * step
        if whole_words:
            cover = slice(base, base + words * UNITS_PER_WORD)
            self.b.l2[cover] = 0
            self.b.written_by[cover] = self.index
            self.b.stored[cover] = 0
            self.b.stored[cover][::step] = STORED.get(dtype, 2)
        sl = slice(start, start + values.size * step, step)
        self.b.l2[sl] = values.astype(self.F)
        self.b.written_by[sl] = self.index
        self.b.stored[start : start + values.size * step] = 0  # the second unit of a float32
        self.b.stored[sl] = STORED.get(dtype, 2)
        if self.record is not None and self.index >= 0:
            if whole_words or offset or dtype == BF16:  # the words as L2 now holds them
                raw = self.raw_words(addr, words)
            else:
                raw = values.astype(np.float16 if dtype == "float16" else np.float32).tobytes()
            self.record.setdefault(self.index, []).append((addr, dtype, raw))

    def write_bridge(self, addr: int, results: np.ndarray) -> None:
        """Write CVO results as the as-built bridge does: whole BF16 words from `addr`.

        Full words hold 8 results in order; a last word holding k < 8 results has them in
        its top k elements, and below them what its serialiser still held: the previous
        word's last 8 - k results, or zeros when there was none (mem_CVO_stream_bridge.sv,
        ST_WRITE: ``wr_word_data <= {fifo_dout, wr_ser_buf[127:16]}``)."""
        y = bf16.round_bf16(np.asarray(results).reshape(-1))
        full, k = divmod(y.size, UNITS_PER_WORD)
        out = [y[: full * UNITS_PER_WORD]]
        if k:
            prev = y[(full - 1) * UNITS_PER_WORD : full * UNITS_PER_WORD] if full else np.zeros(8)
            out.append(np.concatenate([np.asarray(prev)[k:], y[full * UNITS_PER_WORD :]]))
        self.write(addr, np.concatenate(out), BF16)

    def raw_words(self, addr: int, words: int) -> bytes:
        """L2 words ``addr .. addr + words - 1`` as the bytes a MEMCPY L2->host would move.

        Each value is laid out as it was written (float32: 4 bytes over two units; float16
        and BF16: 2 bytes); bytes nothing wrote read as zero."""
        out = np.zeros(words * L2_WORD_BYTES, dtype=np.uint8)
        units = slice(addr * UNITS_PER_WORD, (addr + words) * UNITS_PER_WORD)
        stored, values = self.b.stored[units], self.b.l2[units]
        for code, wire in ((1, "<f2"), (2, "<f4")):
            u = np.flatnonzero(stored == code)
            raw = values[u].astype(wire).view(np.uint8).reshape(len(u), 2 * code)
            out[2 * u[:, None] + np.arange(raw.shape[1])] = raw
        u = np.flatnonzero(stored == STORED[BF16])
        raw = bf16.to_bits(values[u]).astype("<u2").view(np.uint8).reshape(len(u), 2)
        out[2 * u[:, None] + np.arange(2)] = raw
        return out.tobytes()

    # --- the program -----------------------------------------------------------------------

    def run(
        self, need_logits: bool = True
    ) -> tuple[np.ndarray | None, dict[int, tuple[np.ndarray, np.ndarray]]]:
        """Execute every step; return the logits and the new K, V row of each cache layer.

        A part of a step (an ``emit --bisect`` prefix) reads no logits: pass
        ``need_logits=False`` and the logits are None.
        """
        for step in self.p.steps:
            if step["kind"] == "batch":
                if self.t.one_cvo_per_batch:
                    self._check_batch(step)
                for i in range(step["start"], step["end"]):
                    self.index, self.node = i, self.p.nodes[i] or ""
                    word = self.p.words[i]
                    if word == KICK_MARKER:
                        if i != step["end"] - 1:
                            raise self.fail("kick marker inside a batch")
                        continue
                    self.word(i, word)
            elif step["kind"] == "fence":
                self.done_upto = self.index + 1
            else:
                self.host_step(step)
        logits = self.b.host.get(LOGITS)
        if logits is None:
            if need_logits:
                raise EmulationError("the program never produced the logits in host memory")
        else:
            logits = np.asarray(logits).astype(self.F, copy=False)
        rows = {
            layer: (kv["k"], kv["v"]) for layer, kv in sorted(self.kv_rows.items()) if len(kv) == 2
        }
        return logits, rows

    def word(self, i: int, word: int) -> None:
        try:
            ins = decode(word)
        except IsaError as exc:
            raise self.fail(str(exc)) from None
        self.engines[i] = ENGINE[ins.op]
        f = ins.fields
        if self.p.roles[i] == "done":
            self._done_marker(ins)
        elif ins.op == "MEMSET":
            self.memset(f)
        elif ins.op == "CVO":
            self.cvo(i, f)
        elif ins.op in ("GEMV", "GEMM"):
            self.gemv(i, f, ins.op)
        elif ins.op == "MEMCPY":
            self.memcpy(i, f)

    def memset(self, f: dict) -> None:
        """A MEMSET: one slot of the constant cache (as built: of the RAM dest_cache names)."""
        self.b.slots[f["slot"]] = (f["dest_cache"], f["a"], f["b"], f["c"])
        self.b.rams[(f["dest_cache"], f["slot"])] = (f["a"], f["b"], f["c"])

    def _done_marker(self, ins) -> None:
        """A DONE marker (`pccx_flow.board.lower`): a CVO on the scratch word, value unused.

        Its only effect on the board is the DONE it raises; its arithmetic (on a word nothing
        ever writes) is not run, but its form and addresses are checked."""
        scratch = self.p.l2.get("done.scratch")
        f = ins.fields
        if ins.op != "CVO" or scratch is None or f["length"] != 1:
            raise self.fail("a DONE marker must be a one-element CVO on the scratch word")
        for addr in (f["src"], f["dst"]):
            word = self.t.cvo_word(addr)
            if addr != self.t.cvo_field(scratch["addr"]) or word + 1 > self.reach_words:
                raise self.fail(f"DONE marker address {addr} is not the scratch word in reach")

    def _check_batch(self, step: dict) -> None:
        """As built a CVO must be the last word of its batch (`batch_rule_violation`)."""
        bad = batch_rule_violation(self.t, self.p.words[step["start"] : step["end"]])
        if bad is not None:
            i = step["start"] + bad
            self.index, self.node = i, self.p.nodes[i] or ""
            raise self.fail(
                f"CVO is not the last word of its batch (words {step['start']}.."
                f"{step['end'] - 2}); on target {self.t.name} the bridge drops a CVO that "
                "arrives while it is busy and DONE must be the batch's CVO"
            )

    def _slot(self, slot: int) -> tuple[int, int, int, int]:
        if slot not in self.b.slots:
            raise self.fail(f"points at constant slot {slot}, which no MEMSET wrote")
        return self.b.slots[slot]

    def _scalar(self, slot: int, exact: float) -> float:
        """A float32 scalar from a constant slot (a = high, b = low 16 bits of its bits).

        In a float64 run the exact value the sidecar records beside the slot is used, so the
        check measures the program's math, not the rounding of its constants; it must agree
        with the slot's bits to float32 precision.
        """
        _, hi, lo, _ = self._slot(slot)
        (c,) = struct.unpack("<f", struct.pack("<I", hi << 16 | lo))
        if not math.isclose(c, exact, rel_tol=1e-6, abs_tol=1e-30):
            raise self.fail(f"constant slot {slot} holds {c}, the sidecar says {exact}")
        return exact if self.F is np.float64 else c

    def _operand(self, i: int, name: str, outputs: bool = False) -> tuple[int, int, int, str, int]:
        """``(word, words, elements, dtype, element offset)`` of an operand of word `i`."""
        side = self.p.operands[i]["outputs" if outputs else "inputs"]
        return entry_fields(side[name])

    def _read_operand(self, i: int, name: str, engine: str) -> np.ndarray:
        addr, _, n, dtype, offset = self._operand(i, name)
        return self.read(addr, n, dtype, engine, offset)

    def _write_operand(self, i: int, name: str, values) -> None:
        addr, _, _, dtype, offset = self._operand(i, name, outputs=True)
        self.write(addr, values, dtype, offset, whole_words=self.t.cvo_whole_words)

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
        per = UNITS_PER_WORD // _units(dtype)
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
            y = np.asarray(self._function(func, flags, x, second, extra), dtype=F)
        if as_built:
            self.write_bridge(dst, y)
        else:
            self.write(dst, y, dtype)

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
        as built in BF16, zero-padded to whole words (`target.GAPS`: the RTL has no GEMV
        store, this is the documented intent)."""
        if f["flags"] >> 4 & 1:  # accm: accumulate onto what dest holds
            y = y + self.read(f["dest"], y.size, self.t.l2_dtype, "gemv").astype(self.F)
        self.write(f["dest"], y, self.t.l2_dtype, whole_words=self.t.cvo_whole_words)

    def _matrix(self, i: int, parts: list[str]) -> np.ndarray:
        """The KV rows of an attention GEMV: its parts, read where each lies."""
        kv_dim = self.k_cache.shape[-1]
        return np.concatenate(
            [self._read_operand(i, name, "gemv").reshape(-1, kv_dim) for name in parts], axis=0
        )

    def attention(self, i: int, f: dict, extra: dict) -> None:
        F = self.F
        a = extra["attention"]
        k0, k1 = a["keys"]
        g, d = a["kv_head"], a["head_dim"]
        rows = self._matrix(i, extra["matrix_operand"])[k0:k1, g * d : (g + 1) * d].astype(F)
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

    def memcpy(self, i: int, f: dict) -> None:
        F = self.F
        s = self.p.streams[i]
        if self.t.gemv_length_ptr == "shape_ptr":  # as built: the fmap-shape RAM
            x, y, z = self._ram("fmap_shape", f["shape_ptr"])
        else:
            _, x, y, z = self._slot(f["shape_ptr"])
        words = memcpy_length_words(x, y, z)
        whole = self.t.cvo_whole_words
        if f["from_device"] == 1:  # host -> L2
            if s["kind"] == "kv_read":
                kv = s["kv"]
                cache = self.k_cache if kv["kind"] == "k" else self.v_cache
                r0 = kv["first_row"]
                data = np.asarray(cache[kv["layer"], r0 : r0 + kv["rows"]]).reshape(-1)
                self.write(f["dest"], data, kv["dtype"], whole_words=whole)
            elif s["kind"] == "embed_fetch":
                e = s["embed"]
                t = int(self.token_id)
                if e["id_rule"] == "clip":
                    t = min(t, e["id_limit"] - 1)
                elif e["id_rule"] == "zero_if_oob":
                    t = t if t < e["id_limit"] else 0
                row = self.weights.rows(e["key"], t, t + 1, F).reshape(-1)
                self.write(f["dest"], row, self.t.l2_dtype, whole_words=whole)
            elif s["kind"] == "host_write":  # a host step's result, from the host I/O area
                addr, _, n, dtype, offset = self._operand(i, s["tensor"], outputs=True)
                self._check_length(n + offset, dtype, words)
                if s["tensor"] not in self.b.host:
                    raise self.fail(f"copies {s['tensor']} into L2 before the host made it")
                value = np.asarray(self.b.host[s["tensor"]]).reshape(-1)
                self.write(addr, value, dtype, offset, whole_words=whole)
            else:
                raise self.fail(f"unknown host->L2 stream {s['kind']!r}")
            return
        if s["kind"] == "host_read":  # an L2 tensor a host step reads, into the host I/O area
            name = s["tensor"]
            _, _, n, dtype, offset = self._operand(i, name)
            self._check_length(n + offset, dtype, words)
            data = self._read_operand(i, name, "dma")
            self.b.host[name] = data.astype(np.float16) if dtype == "float16" else data
            self.host_ready[name] = i  # the host may read it after the next fence
            return
        # the operand may be several parts, contiguous from the word's src (one region)
        parts = [self._operand(i, name) for name in self.p.operands[i]["inputs"]]
        n = sum(p[2] for p in parts)
        _, _, _, dtype, offset = parts[0]
        self._check_length(n + offset, dtype, words)
        data = self.read(f["src"], n, dtype, "dma", offset)
        if s["kind"] == "kv_write":
            # The row goes to the DDR cache in the cache's type; pccx-flow's KV-write also
            # leaves that rounded row in L2 (its output region) for this step's attention.
            kv = s["kv"]
            row = (
                bf16.round_bf16(data)
                if kv["dtype"] == BF16
                else data.astype(np.dtype(kv["dtype"]))
            )
            self.kv_rows.setdefault(kv["layer"], {})[kv["kind"]] = row
            for out in self.p.operands[i]["outputs"]:
                self._write_operand(i, out, row)
        elif s["kind"] == "logits_readback":  # a run of logits, into host memory
            self.b.host[s["host_tensor"]] = data.astype(F)
            self.host_ready[s["host_tensor"]] = i
        else:
            raise self.fail(f"unknown L2->host stream {s['kind']!r}")

    def _check_length(self, n: int, dtype: str, words: int) -> None:
        if math.ceil(n * _units(dtype) / UNITS_PER_WORD) > words:
            raise self.fail(f"MEMCPY of {n} {dtype} values but its shape slot moves {words} words")

    def host_step(self, step: dict) -> None:
        self.node = step["node"]
        call_d = step["call"]
        inputs = []
        for t in call_d["inputs"]:
            name = t["name"]
            if name in step.get("slot_reads", {}):
                slot, exact = step["slot_reads"][name]
                c = self._scalar(slot, exact)
                inputs.append(np.array([c], dtype=self.F).reshape(t["shape"]))
            elif name in self.b.host:
                if self.host_ready.get(name, -1) >= self.done_upto:
                    raise self.fail(
                        f"host step reads {name} before the fence after the MEMCPY (word"
                        f" {self.host_ready[name]}) that copies it out (missing fence)"
                    )
                inputs.append(np.asarray(self.b.host[name]).reshape(t["shape"]))
            else:
                raise self.fail(f"host step reads {name}, which is not in host memory")
        outs = call_host_kernel(step, inputs, self.ctx, self.weights)
        for t, value in zip(call_d["outputs"], outs, strict=True):
            self.b.host[t["name"]] = np.asarray(value)


def emulate(program: Program, weights, k_cache, v_cache, token_id: int, *,
            numerics: str = "spec", ctx=None, record: dict | None = None):  # fmt: skip
    """Run `program` (one decode step); return ``(logits, {cache_layer: (k_row, v_row)})``.

    `k_cache`, `v_cache` are the DDR KV cache ``[cache layers, max_seq, kv_dim]`` (float16)
    holding the rows of earlier positions; `ctx` is the `StepContext` host steps see. A dict
    passed as `record` receives, per word index, the L2 writes it made (golden vectors).
    """
    em = Emulator(program, weights, k_cache, v_cache, token_id, numerics)
    em.ctx = ctx
    em.record = record
    return em.run()
