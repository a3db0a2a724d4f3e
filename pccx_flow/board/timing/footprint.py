"""What each word of an emitted program does, read from the words: engine, cycles, L2 traffic.

The timing replay works on the program, not on the graph it came from, so everything here is
taken from what the host would write to the NPU and program into the DataMover:

- the opcode, addresses and lengths come from the decoded word (`isa.decode`) and from the
  constant slots the program's MEMSETs set before it (a GEMV's size slot holds its input
  length, its shape slot its rows; a MEMCPY's shape slot (X, Y, Z) its length,
  ceil(X*Y*Z / 8) 128-bit words as the RTL computes it);
- the bytes a GEMV streams from DDR come from its weight-stream DataMover descriptor
  (``streams``: runs x run bytes + row scales), a MEMCPY's from its DMA descriptor;
- operands the word has no field for come from the sidecar's operand table, exactly as the
  emulator reads them: the KV rows of an attention GEMV, the running max a ``findemax`` GEMV
  writes and an ``EXP sub_emax`` reads, a SCALE's divisor, the parts of a split operand.

Words are read as the program's target reads them (`pccx_flow.board.isa.target`): on the spec
target L2 data is float32 and every address a word address; as built it is BF16, CVO
addresses count elements and a GEMV's input length is in the fmap-shape slot shape_ptr
names. Regions are half-open ranges of 128-bit L2 words. Cycles reuse the scheduler's cost functions
(`pccx_flow.hardware.cost.node_cycles`) on a node built from these sizes, so an instruction
costs what the list schedule charged its node whenever the sizes agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pccx_flow.board.isa import (
    CVO_FLAGS,
    CVO_FUNCS,
    KICK_MARKER,
    MAC_FLAGS,
    IsaError,
    decode,
    memcpy_length_words,
)
from pccx_flow.board.isa.target import get_target
from pccx_flow.board.program.files import Program, ProgramFileError
from pccx_flow.hardware.cost import node_cycles
from pccx_flow.hardware.profile import Profile
from pccx_flow.traces.timeline import DMA_READ, DMA_WRITE, MAC_COMPUTE, UNKNOWN

L2_WORD_BYTES = 16
FLOAT32_BYTES = 4
_CVO_NAMES = {v: k for k, v in CVO_FUNCS.items()}
_ENGINE = {"GEMV": "gemv", "GEMM": "gemm", "CVO": "sfu", "MEMCPY": "dma", "MEMSET": "ctrl"}
# Global_Scheduler.sv (pccxai/pccx-v002): one OUT_LOAD_uop register serves GEMM, GEMV,
# MEMCPY and CVO; one OUT_STORE_uop register is latched for GEMM, GEMV and CVO.
LOAD_PATH_OPS = frozenset({"GEMM", "GEMV", "MEMCPY", "CVO"})
STORE_PATH_OPS = frozenset({"GEMM", "GEMV", "CVO"})

Region = tuple[int, int]  # [first, end) in 128-bit L2 words


@dataclass(frozen=True)
class Footprint:
    """One instruction word: what runs it, for how long, what it reads and writes."""

    index: int  # word index in the program
    op: str
    node: str
    role: str  # "node" (the node's instruction) or "slot" (a MEMSET filling a slot)
    engine: str  # lane class: gemv, gemm, sfu, dma, ctrl
    cycles: int  # model estimate, core cycles
    reads: tuple[Region, ...]
    writes: tuple[Region, ...]
    slots_read: tuple[int, ...]
    slots_written: tuple[int, ...]
    weight_port: bool  # streams weights through a weight port (HP2/HP3)
    kind: int  # pccx-lab event type
    detail: str

    @property
    def name(self) -> str:
        """The event name in traces: the graph node, marked when the word only fills a slot."""
        return self.node if self.role == "node" else f"{self.node} [slot@{self.index}]"

    @property
    def load_path(self) -> bool:
        return self.op in LOAD_PATH_OPS

    @property
    def store_path(self) -> bool:
        return self.op in STORE_PATH_OPS


def _words(nbytes: int) -> int:
    return max(1, math.ceil(nbytes / L2_WORD_BYTES))


def _span(addr: int, elements: int, element_bytes: int = FLOAT32_BYTES) -> Region:
    return (addr, addr + _words(elements * element_bytes))


def _operand_regions(entries: dict) -> list[Region]:
    return [(int(v[0]), int(v[0]) + int(v[1])) for v in entries.values()]


# The host I/O area (`pccx_flow.board.program.lower`: tensors copied between L2 and host steps) as
# regions past the 17-bit L2 word space, so the same hazard rules order the MEMCPY words that
# fill or drain it and the host steps that use it.
HOST_AREA_BASE = 1 << 17


def _host_area_regions(entries: dict) -> list[Region]:
    """Regions of ``[byte offset, bytes, ...]`` host I/O entries."""
    out = []
    for v in entries.values():
        start = HOST_AREA_BASE + int(v[0]) // L2_WORD_BYTES
        out.append((start, start + _words(int(v[1]))))
    return out


def _merge(regions: list[Region]) -> tuple[Region, ...]:
    out: list[list[int]] = []
    for a, b in sorted(r for r in regions if r[1] > r[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def footprints(program: Program, profile: Profile) -> list[Footprint | None]:
    """One footprint per word (None for kick markers), in program order.

    A word that does not decode, or that points at a constant slot no earlier MEMSET set,
    raises `ProgramFileError` naming the word and its node.
    """
    slots: dict[int, tuple[int, int, int]] = {}
    out: list[Footprint | None] = []
    target = get_target(program.meta.get("target", "spec"))
    for i, word in enumerate(program.words):
        if word == KICK_MARKER:
            out.append(None)
            continue
        node = program.nodes[i] if i < len(program.nodes) else None
        try:
            ins = decode(word)
        except IsaError as exc:  # a corrupted word
            raise ProgramFileError(f"word {i} ({node}): {exc}") from None
        out.append(_footprint(program, profile, i, ins, slots, target))
    return out


def _slot(slots: dict, slot: int, i: int, node: str | None, why: str) -> tuple[int, int, int]:
    if slot not in slots:
        raise ProgramFileError(
            f"word {i} ({node}): reads constant slot {slot} ({why}) before any MEMSET set it; "
            "the program is damaged or out of order, re-run emit"
        )
    return slots[slot]


def _footprint(program: Program, profile: Profile, i: int, ins, slots: dict,
               target=None) -> Footprint:  # fmt: skip
    target = target or get_target("spec")
    eb = target.element_bytes
    f = ins.fields
    op = ins.op
    node = program.nodes[i] or f"word{i}"
    role = program.roles[i] if i < len(program.roles) else "node"
    stream = program.streams.get(i, {})
    operands = program.operands.get(i, {"inputs": {}, "outputs": {}})
    reads = _operand_regions(operands.get("inputs", {}))
    writes = _operand_regions(operands.get("outputs", {}))
    slots_read: list[int] = []
    slots_written: list[int] = []
    weight_port = False
    kind = UNKNOWN
    attrs: dict = {"id": node, "op": op, "lane_class": _ENGINE[op]}
    if op in ("GEMV", "GEMM"):
        if target.gemv_length_ptr == "shape_ptr":  # as built: Global_Scheduler.sv
            length = _slot(slots, f["shape_ptr"], i, node, "input length")
            engine = _slot(slots, f["size_ptr"], i, node, "tile shape")
            cols, rows = (length[0] * length[1] * length[2]) & ((1 << 20) - 1), engine[0]
        else:
            size = _slot(slots, f["size_ptr"], i, node, "input length")
            shape = _slot(slots, f["shape_ptr"], i, node, "tile shape")
            cols, rows = size[0] | size[1] << 16, shape[0]
        slots_read += [f["size_ptr"], f["shape_ptr"]]
        reads.append(_span(f["src"], cols, eb))
        writes.append(_span(f["dest"], rows, eb))
        if f["flags"] >> MAC_FLAGS["accm"] & 1:
            reads.append(_span(f["dest"], rows, eb))
        w = stream.get("weight")
        wbytes = int(w["runs"]) * int(w["run_bytes"]) + int(w.get("scale_bytes", 0)) if w else 0
        weight_port = wbytes > 0
        attrs.update(macs=rows * cols, weight_bytes=wbytes)
        kind = MAC_COMPUTE
        detail = f"{rows}x{cols}" + (f", {wbytes:,} B weights" if wbytes else ", L2 operand")
    elif op == "CVO":
        func = _CVO_NAMES[f["func"]]
        n = f["length"]
        out_n = 1 if func == "REDUCE_SUM" else n  # a sum writes one element
        src, dst = target.cvo_word(f["src"]), target.cvo_word(f["dst"])
        reads.append(_span(src, n, eb))
        writes.append(_span(dst, out_n, eb))
        if f["flags"] >> CVO_FLAGS["accm"] & 1:
            reads.append(_span(dst, out_n, eb))
        if "scalar_slot" in stream:
            slots_read.append(int(stream["scalar_slot"]))
        attrs.update(func=func, elements=n)
        detail = f"{func} x{n}"
    elif op == "MEMCPY":
        words = memcpy_length_words(*_slot(slots, f["shape_ptr"], i, node, "copy length"))
        slots_read.append(f["shape_ptr"])
        to_npu = f["from_device"] == 1
        if to_npu:
            writes.append((f["dest"], f["dest"] + words))
        else:
            reads.append((f["src"], f["src"] + words))
        if stream.get("kind") in ("host_read", "host_write"):  # the host I/O area side
            area = _host_area_regions({0: [stream["host_offset"], stream["bytes"]]})
            (writes if stream["kind"] == "host_read" else reads).extend(area)
        nbytes = int(stream.get("ddr_bytes", stream.get("bytes", words * L2_WORD_BYTES)))
        attrs.update(act_bytes=nbytes)
        kind = DMA_READ if to_npu else DMA_WRITE
        detail = f"{nbytes:,} B {'host->L2' if to_npu else 'L2->host'}"
    else:  # MEMSET
        slots[f["slot"]] = (f["a"], f["b"], f["c"])
        slots_written.append(f["slot"])
        attrs.update(elements=profile.ctrl.words_per_memset)
        detail = f"slot {f['slot']}"
    return Footprint(
        index=i,
        op=op,
        node=node,
        role=role,
        engine=_ENGINE[op],
        cycles=node_cycles(attrs, profile),
        reads=_merge(reads),
        writes=_merge(writes),
        slots_read=tuple(slots_read),
        slots_written=tuple(slots_written),
        weight_port=weight_port,
        kind=kind,
        detail=detail,
    )


def host_step_elements(step: dict) -> int:
    """Elements a host step processes: its largest output or operand, from the call the
    program records. This is the graph's default count for host work; the few host kernels
    whose count the graph sets by hand (e.g. the attention bookkeeping) differ slightly."""
    call = step.get("call", {})
    outs = [math.prod(t["shape"]) for t in call.get("outputs", [])]
    ins = [math.prod(t["shape"]) for t in call.get("inputs", [])]
    counts = (call.get("params") or {}).get("operands")
    groups, k = [], 0
    for c in counts or [1] * len(ins):
        groups.append(sum(ins[k : k + c]))
        k += c
    return max([0, *outs, *groups])


def host_step_cycles(step: dict, profile: Profile) -> int:
    """Core cycles of one host step on `profile` (the scheduler's host cost, model estimate)."""
    attrs = {
        "id": step.get("node", "host"),
        "op": "HOST",
        "lane_class": "host",
        "elements": host_step_elements(step),
    }
    return node_cycles(attrs, profile)


def host_step_regions(step: dict) -> tuple[tuple[Region, ...], tuple[Region, ...]]:
    """Host I/O area regions a host step reads and writes (it never touches L2 itself)."""
    return (
        _merge(_host_area_regions(step.get("host_reads", {}))),
        _merge(_host_area_regions(step.get("host_writes", {}))),
    )
