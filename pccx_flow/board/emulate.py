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

Numerics: ``spec`` computes what each instruction means in the specification's math (in the
precision the caller chose, float32 by default); ``rtl`` replaces the functions the RTL
approximates, each named in `RTL_APPROXIMATIONS`.
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from pccx_flow.board.host_side import call_host_kernel
from pccx_flow.board.isa import (
    KICK_MARKER,
    L2_WORD_BYTES,
    IsaError,
    decode,
    memcpy_length_words,
)
from pccx_flow.board.program import Program
from pccx_flow.errors import PccxFlowError
from pccx_flow.graph.blocks_final import LOGITS
from pccx_flow.precision import tensor_dtype

UNITS_PER_WORD = 8  # 16-bit units per 128-bit L2 word
ENGINE = {"GEMV": "gemv", "GEMM": "gemm", "CVO": "sfu", "MEMCPY": "dma", "MEMSET": "ctrl"}
NUMERICS = ("spec", "rtl")

RTL_APPROXIMATIONS = {
    "GELU": "x * sigmoid(1.702 x) instead of the tanh form (pccx-v002.md §4)",
    "SIN": "CORDIC input saturates at +-4 rad: sin(clip(x, -4, 4)) (pccx-v002.md §4)",
    "COS": "CORDIC input saturates at +-4 rad: cos(clip(x, -4, 4)) (pccx-v002.md §4)",
}


class EmulationError(PccxFlowError):
    """A program that the emulated board cannot run: the message names the word and node."""


def _units(dtype: str) -> int:
    return 1 if dtype == "float16" else 2


@dataclass
class Board:
    """The emulated state: L2 values, who wrote each unit, constant slots, KV cache."""

    l2: np.ndarray
    written_by: np.ndarray  # word index that last wrote each unit; -2 never
    stored: np.ndarray  # how each unit was last written: 0 never, 1 float16, 2 float32
    slots: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)


class Emulator:
    """Runs one program (one decode step) against a checkpoint and a KV cache."""

    def __init__(self, program: Program, weights, k_cache, v_cache, token_id: int,
                 numerics: str = "spec"):  # fmt: skip
        if numerics not in NUMERICS:
            raise EmulationError(f"unknown numerics {numerics!r}; use one of {NUMERICS}")
        self.p = program
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
        self.region_ends = [b for _, b in spans]
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
        # regions may nest (an accumulator shares its output's region): look back a little
        for j in range(i, max(-1, i - 64), -1):
            if self.region_starts[j] <= addr and addr + words <= self.region_ends[j]:
                return
        raise self.fail(f"L2 words {addr}..{addr + words - 1} are outside every allocated region")

    def read(self, addr: int, n: int, dtype: str, engine: str | None) -> np.ndarray:
        step = _units(dtype)
        words = math.ceil(n * step / UNITS_PER_WORD)
        self._check_region(addr, words)
        start = addr * UNITS_PER_WORD
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

    def write(self, addr: int, values: np.ndarray, dtype: str) -> None:
        values = np.asarray(values).reshape(-1)
        step = _units(dtype)
        self._check_region(addr, math.ceil(values.size * step / UNITS_PER_WORD))
        if dtype == "float16":
            values = values.astype(np.float16)
        elif self.F is np.float32:
            values = values.astype(np.float32)
        start = addr * UNITS_PER_WORD
        sl = slice(start, start + values.size * step, step)
        self.b.l2[sl] = values.astype(self.F)
        self.b.written_by[sl] = self.index
        self.b.stored[start : start + values.size * step] = 0  # the second unit of a float32
        self.b.stored[sl] = step
        if self.record is not None and self.index >= 0:
            raw = values.astype(np.float16 if dtype == "float16" else np.float32).tobytes()
            self.record.setdefault(self.index, []).append((addr, dtype, raw))

    def raw_words(self, addr: int, words: int) -> bytes:
        """L2 words ``addr .. addr + words - 1`` as the bytes a MEMCPY L2->host would move.

        Each value is laid out as it was written (float32: 4 bytes over two units; float16:
        2 bytes); bytes nothing wrote read as zero."""
        out = np.zeros(words * L2_WORD_BYTES, dtype=np.uint8)
        units = slice(addr * UNITS_PER_WORD, (addr + words) * UNITS_PER_WORD)
        stored, values = self.b.stored[units], self.b.l2[units]
        for code, wire in ((1, "<f2"), (2, "<f4")):
            u = np.flatnonzero(stored == code)
            raw = values[u].astype(wire).view(np.uint8).reshape(len(u), 2 * code)
            out[2 * u[:, None] + np.arange(raw.shape[1])] = raw
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
            self.b.slots[f["slot"]] = (f["dest_cache"], f["a"], f["b"], f["c"])
        elif ins.op == "CVO":
            self.cvo(i, f)
        elif ins.op in ("GEMV", "GEMM"):
            self.gemv(i, f, ins.op)
        elif ins.op == "MEMCPY":
            self.memcpy(i, f)

    def _done_marker(self, ins) -> None:
        """A DONE marker (`pccx_flow.board.lower`): a CVO on the scratch word, value unused.

        Its only effect on the board is the DONE it raises; its arithmetic (on a word nothing
        ever writes) is not run, but its form and addresses are checked."""
        scratch = self.p.l2.get("done.scratch")
        f = ins.fields
        if ins.op != "CVO" or scratch is None or f["length"] != 1:
            raise self.fail("a DONE marker must be a one-element CVO on the scratch word")
        for addr in (f["src"], f["dst"]):
            if addr != scratch["addr"] or addr + 1 > self.reach_words:
                raise self.fail(f"DONE marker address {addr} is not the scratch word in reach")

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

    def _operand_addr(self, i: int, name: str, outputs: bool = False) -> int:
        side = self.p.operands[i]["outputs" if outputs else "inputs"]
        return side[name][0]

    def cvo(self, i: int, f: dict) -> None:
        from pccx_flow.board.isa import CVO_FLAGS, CVO_FUNCS

        F = self.F
        func = {v: k for k, v in CVO_FUNCS.items()}[f["func"]]
        flags = {k for k, b in CVO_FLAGS.items() if f["flags"] >> b & 1}
        n = f["length"]
        for addr, words in ((f["src"], math.ceil(n / 4)), (f["dst"], 1)):
            if addr + words > self.reach_words:
                raise self.fail(f"CVO address {addr} is beyond the SFU's reach")
        x = self.read(f["src"], n, "float32", "sfu").astype(F)
        inputs = list(self.p.operands[i]["inputs"])
        extra = self.p.streams.get(i, {})
        second = None
        if len(inputs) > 1 and func in ("EXP", "SCALE") and "scalar_slot" not in extra:
            addr = self._operand_addr(i, inputs[-1])
            second = F(self.read(addr, 1, "float32", "sfu")[0])
        if func == "EXP":
            y = np.exp(x - second) if "sub_emax" in flags else np.exp(x)
        elif func == "SCALE":
            if "scalar_slot" in extra:
                y = x * F(self._scalar(extra["scalar_slot"], extra["scalar"]))
            elif "recip_scale" in flags:
                y = x / second
            else:
                y = x * second
        elif func == "REDUCE_SUM":
            y = np.array([np.sum(x, dtype=F)], dtype=F)
        elif func == "SQRT":
            y = np.sqrt(x)
        elif func == "RECIP":
            y = F(1.0) / x
        elif func == "GELU":
            if self.numerics == "rtl":
                y = x / (F(1.0) + np.exp(np.minimum(F(-1.702) * x, F(80.0))))
            else:
                c = F(math.sqrt(2.0 / math.pi))
                inner = c * (x + F(0.044715) * x * x * x)
                y = x / (F(1.0) + np.exp(np.minimum(F(-2.0) * inner, F(80.0))))
        elif func in ("SIN", "COS"):
            arg = np.clip(x, F(-4.0), F(4.0)) if self.numerics == "rtl" else x
            y = np.sin(arg) if func == "SIN" else np.cos(arg)
        else:  # pragma: no cover - decode() accepts only the eight codes
            raise self.fail(f"CVO function {func} is not emulated")
        self.write(f["dst"], np.asarray(y, dtype=F), "float32")

    def gemv(self, i: int, f: dict, op: str) -> None:
        F = self.F
        _, c_lo, c_hi, _ = self._slot(f["size_ptr"])
        _, rows, _, _ = self._slot(f["shape_ptr"])
        cols = c_lo | c_hi << 16
        extra = self.p.streams.get(i, {})
        if "attention" in extra:
            self.attention(i, f, extra)
            return
        x = self.read(f["src"], cols, "float32", "gemv").astype(F)
        w = extra["weight"]
        r0, r1 = w["rows"]
        if r1 - r0 != rows:
            raise self.fail(f"shape slot says {rows} rows, the weight stream carries {r1 - r0}")
        key, layout = w["key"], w["layout"]
        if self.weights.storage(key) == "int4":
            m = self.weights.rows(key, r0, r1, F)
            c0, c1 = w["cols"] or (0, m.shape[1])
            y = m[:, c0:c1] @ x
        else:
            t = self.weights.tensor(key)
            if layout == "in_out":
                c0, c1 = w["cols"] or (0, t.shape[0])
                y = x @ np.asarray(t[c0:c1, r0:r1], dtype=F)
            else:
                c0, c1 = w["cols"] or (0, t.shape[1])
                y = np.asarray(t[r0:r1, c0:c1], dtype=F) @ x
        if c1 - c0 != cols:
            raise self.fail(f"size slot says {cols} inputs, the weight stream carries {c1 - c0}")
        if f["flags"] >> 4 & 1:  # accm: accumulate onto what dest holds
            y = y + self.read(f["dest"], rows, "float32", "gemv").astype(F)
        self.write(f["dest"], np.asarray(y, dtype=F), "float32")

    def _matrix(self, i: int, parts: list[str]) -> np.ndarray:
        """The KV rows of an attention GEMV: its parts, read where each lies (float16)."""
        out = []
        kv_dim = self.k_cache.shape[-1]
        for name in parts:
            addr, _, n, dtype = self.p.operands[i]["inputs"][name]
            out.append(self.read(addr, n, dtype, "gemv").reshape(-1, kv_dim))
        return np.concatenate(out, axis=0)

    def attention(self, i: int, f: dict, extra: dict) -> None:
        F = self.F
        a = extra["attention"]
        k0, k1 = a["keys"]
        g, d = a["kv_head"], a["head_dim"]
        rows = self._matrix(i, extra["matrix_operand"])[k0:k1, g * d : (g + 1) * d].astype(F)
        if a["kind"] == "attn_scores":
            q = self.read(f["src"], d, "float32", "gemv").astype(F)
            scores = (rows @ q).astype(F)
            self.write(f["dest"], scores, "float32")
            outs = list(self.p.operands[i]["outputs"])
            if f["flags"] >> 5 & 1 and len(outs) > 1:  # findemax
                self.write(
                    self._operand_addr(i, outs[1], True), np.array([scores.max()]), "float32"
                )
        else:
            p = self.read(f["src"], k1 - k0, "float32", "gemv").astype(F)
            self.write(f["dest"], (p @ rows).astype(F), "float32")

    def memcpy(self, i: int, f: dict) -> None:
        F = self.F
        s = self.p.streams[i]
        _, x, y, z = self._slot(f["shape_ptr"])
        words = memcpy_length_words(x, y, z)
        if f["from_device"] == 1:  # host -> L2
            if s["kind"] == "kv_read":
                kv = s["kv"]
                cache = self.k_cache if kv["kind"] == "k" else self.v_cache
                r0 = kv["first_row"]
                data = np.asarray(cache[kv["layer"], r0 : r0 + kv["rows"]]).reshape(-1)
                self.write(f["dest"], data, kv["dtype"])
            elif s["kind"] == "embed_fetch":
                e = s["embed"]
                t = int(self.token_id)
                if e["id_rule"] == "clip":
                    t = min(t, e["id_limit"] - 1)
                elif e["id_rule"] == "zero_if_oob":
                    t = t if t < e["id_limit"] else 0
                row = self.weights.rows(e["key"], t, t + 1, F).reshape(-1)
                self.write(f["dest"], row, "float32")
            elif s["kind"] == "host_write":  # a host step's result, from the host I/O area
                addr, _, n, dtype = self.p.operands[i]["outputs"][s["tensor"]]
                self._check_length(n, dtype, words)
                if s["tensor"] not in self.b.host:
                    raise self.fail(f"copies {s['tensor']} into L2 before the host made it")
                self.write(addr, np.asarray(self.b.host[s["tensor"]]).reshape(-1), dtype)
            else:
                raise self.fail(f"unknown host->L2 stream {s['kind']!r}")
            return
        if s["kind"] == "host_read":  # an L2 tensor a host step reads, into the host I/O area
            name = s["tensor"]
            _, _, n, dtype = self.p.operands[i]["inputs"][name]
            self._check_length(n, dtype, words)
            data = self.read(f["src"], n, dtype, "dma")
            self.b.host[name] = data.astype(np.float16) if dtype == "float16" else data
            self.host_ready[name] = i  # the host may read it after the next fence
            return
        n = s["bytes"] // 4
        self._check_length(n, "float32", words)
        data = self.read(f["src"], n, "float32", "dma")
        if s["kind"] == "kv_write":
            # The row goes to the DDR cache in float16; pccx-flow's KV-write also leaves that
            # rounded row in L2 (its output region) for this step's attention to read.
            kv = s["kv"]
            row = data.astype(np.dtype(kv["dtype"]))  # the cache's storage dtype
            self.kv_rows.setdefault(kv["layer"], {})[kv["kind"]] = row
            for addr, _, _, dtype in self.p.operands[i]["outputs"].values():
                self.write(addr, row, dtype)
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
