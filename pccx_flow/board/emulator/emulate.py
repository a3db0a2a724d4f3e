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

Targets (`pccx_flow.board.isa.target`): the words are read as the program's target's hardware
reads them, not as the lowering meant them. ``spec``: word addresses, float32 activations in
L2. ``as-built``: a CVO's src/dst are BF16 element addresses whose low 3 bits the bridge
drops, it streams BF16 and writes whole words (a partial last word's results in its top
elements, a lone result in element 7), it refuses more than 2,048 results or length 0 (the
bridge would hang), and a CVO must be the last word of its batch; a GEMV takes its input
length from the fmap-shape slot at shape_ptr; every value written to L2 is rounded to BF16.
Where the RTL has no datapath at all (`rtl_rules.GAPS`) the as-built reading keeps the
documented intent. So a program lowered for one target and run under the other's reading
computes something else (a test shows it).

Numerics: ``spec`` computes what each instruction means in the specification's math (in the
precision the caller chose, float32 by default); ``rtl`` replaces the functions the RTL
approximates, each named in `RTL_APPROXIMATIONS`.

The units live in modules of their own, mixed into `Emulator`: `l2` (the checked L2 model),
`sfu` (CVO words), `gemv` (GEMV and attention words); this module runs the steps, MEMSET,
MEMCPY, DONE markers and host steps.
"""

from __future__ import annotations

import itertools
import math
import struct

import numpy as np

from pccx_flow.board.emulator.gemv import GemvUnit
from pccx_flow.board.emulator.host_kernels import call_host_kernel
from pccx_flow.board.emulator.l2 import UNITS_PER_WORD, Board, L2Access, units_of
from pccx_flow.board.emulator.sfu import NUMERICS, RTL_APPROXIMATIONS, CvoUnit
from pccx_flow.board.isa import (
    FORMATS,
    KICK_MARKER,
    IsaError,
    bf16,
    decode,
    memcpy_length_words,
)
from pccx_flow.board.isa.target import BF16, get_target
from pccx_flow.board.isa.wire import entry_fields
from pccx_flow.board.program.ddr import join_kv_layers
from pccx_flow.board.program.files import Program
from pccx_flow.errors import PccxFlowError
from pccx_flow.graph.blocks_final import LOGITS
from pccx_flow.precision import tensor_dtype

ENGINE = {"GEMV": "gemv", "GEMM": "gemm", "CVO": "sfu", "MEMCPY": "dma", "MEMSET": "ctrl"}
__all__ = ["RTL_APPROXIMATIONS", "UNITS_PER_WORD", "EmulationError", "Emulator",
           "batch_rule_violation", "emulate"]  # fmt: skip


def batch_rule_violation(target, words: list[int]) -> int | None:
    """Index (in `words`) of a CVO that is not the batch's last instruction, on a target
    that allows a CVO only there (`Target.one_cvo_per_batch`); None when the batch is fine.

    As built a second CVO would reach the bridge while it is busy and be dropped, and the
    DONE the host waits for after the batch must be its CVO's (`rtl_rules.RULES`)."""
    if not target.one_cvo_per_batch:
        return None
    body = [k for k, w in enumerate(words) if w != KICK_MARKER]
    for k in body[:-1]:
        if words[k] >> 60 == FORMATS["CVO"].opcode:
            return k
    return None


class EmulationError(PccxFlowError):
    """A program that the emulated board cannot run: the message names the word and node."""


class Emulator(L2Access, CvoUnit, GemvUnit):
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
        # per cache layer, kind and KV head: the row part this step wrote
        self.kv_rows: dict[int, dict[str, dict[int, np.ndarray]]] = {}
        self.host_ready: dict[str, int] = {}  # tensor -> the MEMCPY word that copied it out
        self.index = -1
        self.node = ""
        # word index -> [(L2 word address, dtype, bytes written)], for golden vectors
        self.record: dict[int, list] | None = None

    # --- L2 access with the checks -------------------------------------------------------

    def fail(self, what: str) -> EmulationError:
        return EmulationError(f"word {self.index} ({self.node}): {what}")

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
        return logits, join_kv_layers(self.kv_rows, self.p.ddr)

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
        """A DONE marker (`pccx_flow.board.program.lower`): a CVO on the scratch word, value unused.

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
                heads = self.p.ddr["kv"][f"{kv['layer']}.{kv['kind']}"]["heads"]
                r0, d = kv["first_row"], cache.shape[-1] // heads
                cols = slice(kv["head"] * d, (kv["head"] + 1) * d)  # the cache is per head
                data = np.asarray(cache[kv["layer"], r0 : r0 + kv["rows"], cols]).reshape(-1)
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
            self.kv_rows.setdefault(kv["layer"], {}).setdefault(kv["kind"], {})[kv["head"]] = row
            for out in self.p.operands[i]["outputs"]:
                self._write_operand(i, out, row)
        elif s["kind"] == "logits_readback":  # a run of logits, into host memory
            self.b.host[s["host_tensor"]] = data.astype(F)
            self.host_ready[s["host_tensor"]] = i
        else:
            raise self.fail(f"unknown L2->host stream {s['kind']!r}")

    def _check_length(self, n: int, dtype: str, words: int) -> None:
        if math.ceil(n * units_of(dtype) / UNITS_PER_WORD) > words:
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
