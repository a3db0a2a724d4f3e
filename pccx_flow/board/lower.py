"""Lower a scheduled decode step to a pccx v002 program (words + host steps + sidecar).

Walks the schedule in issue order (`Schedule.order`) and, per node:

- HOST nodes become host steps. pccx v002 gives the host no path into L2 but MEMCPY words
  over the ACP DataMover channels (pccx-v002.md §5; ``mem_dispatcher.sv``: from_host_to_L2,
  from_L2_to_host), so each L2 tensor a host step reads is first copied out by a MEMCPY
  L2->host word into the host I/O area of the activation buffer, then a fence (the host
  waits for DONE), then the host step, which works on host memory only, then a MEMCPY
  host->L2 word for each result an instruction reads. The sidecar records the step's
  operation and where in the host I/O area each copied tensor lies (``host_reads``,
  ``host_writes``: byte offset, bytes, elements, dtype).
- every other node becomes exactly one instruction word (GEMV, CVO, MEMCPY, MEMSET), preceded
  by the MEMSETs that fill the constant slots it points at (shapes and sizes).

Batches hold at most ``registers.max_batch`` words (8: the command FIFO depth); a kick ends
each. The hardware checks no hazards and has no completion IDs, and GEMV, SFU, DMA run
concurrently: only instructions of one engine are ordered by in-order issue. So a fence
(kick, then wait for DONE) is inserted before an instruction that reads a value an unfenced
instruction of *another* engine writes, before a MEMSET evicts a slot an unfenced
instruction points at, before a host step reads anything still in flight, when L2 is full
of regions that only wait for a fence, and at the end of the step. A dead tensor's region
that an unfenced instruction may still read is not reused before the next fence, so no
overwrite needs a fence of its own.

DONE markers: today's RTL raises DONE only when a CVO completes (pccx-v002.md §5), and the
host waits for DONE after every batch, so a batch whose last word is not a CVO would never be
seen to finish. With ``done_markers`` (the default) such a batch ends with a one-element CVO
REDUCE_SUM on a reserved scratch word (role ``done``): the RTL completes load-path
instructions one at a time (``Global_Scheduler.sv``: one ``OUT_LOAD_uop`` register), so the
marker's DONE means the whole batch is done. The marker's value is never read. A bitstream
that raises DONE at the end of every batch needs none (``emit --no-done-markers``).

Addresses: every tensor an instruction touches gets an L2 region (`alloc`); a GEMV with accm
writes into its accumulator's region; MEMSET values (θ) stay in their constant slot. GEMV
weight tiles and KV rows stream from the DDR image (`ddr`), whose address the host programs
into the DataMover: the sidecar's ``streams`` entry of the word.
"""

from __future__ import annotations

import math
import struct
from collections import defaultdict

import networkx as nx

from pccx_flow.board.alloc import AllocationError, L2Allocator, SlotCache, words_for
from pccx_flow.board.ddr import ddr_layout, weight_stream
from pccx_flow.board.isa import (
    FORMATS,
    KICK_MARKER,
    L2_WORD_BYTES,
    IsaError,
    encode,
    flag_bits,
    fmap_shape_fields,
    memcpy_length_fields,
)
from pccx_flow.board.program import Program
from pccx_flow.board.target import Target, target_of
from pccx_flow.execute.state import kv_cache_dtype
from pccx_flow.graph.nodes import OP_LANE
from pccx_flow.schedule.memory import HOST_OUTPUT_COPIES

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


class _Lowering:
    def __init__(self, graph: nx.DiGraph, schedule, profile, config, small: str = "bottom",
                 done_markers: bool = True, target: Target | None = None):  # fmt: skip
        self.g = graph
        self.profile = profile
        self.config = config
        self.t = target or target_of(profile)
        self.order = [slot.node for slot in schedule.order()]
        self.pos = {n: i for i, n in enumerate(self.order)}
        self.prog = Program()
        self.max_batch = profile.registers.max_batch
        total = profile.memory.l2_bytes // 16
        reach = min(total, profile.sfu.l2_reach_bytes // 16, self.t.cvo_reach_words)
        self.l2 = L2Allocator(total, reach, small=small)
        self.done_markers = done_markers
        self.markers = 0
        if done_markers:  # one word of the CVO window, for the whole step
            self.scratch = self.l2.alloc(1, low=True)
        self.slots = SlotCache(profile.memory.const_cache_slots)
        self.slot_users: dict[int, int] = {}  # slot -> last word index that pointed at it
        graph_kv = kv_cache_dtype(graph.graph.get("semantics") or "pccx").name
        self.kv_dtype = self.t.kv_cache_dtype or graph_kv
        self.ddr = ddr_layout(config, kv_dtype=self.kv_dtype)
        self.slot_tensor: dict[str, int] = {}  # MEMSET outputs: tensor -> constant slot
        self.slot_value: dict[str, float] = {}  # ... and its exact value
        self.batch_start: int | None = None
        self.done_upto = 0  # every word below this index has completed (after a fence)
        self.fences = 0
        self.fence_reasons: dict[str, int] = defaultdict(int)
        # the host I/O area: tensor -> (byte offset, bytes), bump-allocated for the whole step
        self.host_io: dict[str, tuple[int, int]] = {}
        self.host_io_bytes = 0
        self.host_copies = {HOST_READ: 0, HOST_WRITE: 0}
        self._tensor_facts()

    # --- tensors ---------------------------------------------------------------------------

    def _tensor_facts(self) -> None:
        g, pos = self.g, self.pos
        self.info: dict[str, dict] = {}
        self.last_use: dict[str, int] = {}
        self.npu: set[str] = set()
        self.low: set[str] = set()
        self.offsets: dict[str, int] = {}  # tensor -> element offset when not 0 (`_offset`)
        self.clean: set[str] = set()  # REDUCE_SUM results: nothing else in their word
        for n in self.order:
            d = g.nodes[n]
            for t in d["outputs"]:
                self.info[t["name"]] = t
                self.last_use.setdefault(t["name"], pos[n])
            for t in d["inputs"]:
                self.info.setdefault(t["name"], t)
                self.last_use[t["name"]] = max(self.last_use.get(t["name"], -1), pos[n])
            if d["op"] == "MEMSET":
                continue  # its value lives in a constant slot, not in L2
            if d["op"] != "HOST":
                # the logits read-back writes host memory only (the scheduler's rule)
                to_host = d["op"] == "MEMCPY" and d.get("func") in HOST_OUTPUT_COPIES
                for t in d["inputs"] + ([] if to_host else d["outputs"]):
                    self.npu.add(t["name"])
                    if d["op"] == "CVO":
                        self.low.add(t["name"])
        # Groups: an operand of several parts is one contiguous region, parts in order.
        self.group_of: dict[str, tuple[str, ...]] = {}
        self.split_operands = 0
        for n in self.order:
            d = g.nodes[n]
            if d["op"] == "HOST":
                continue
            for operand in operand_groups(d):
                if len(operand) < 2:
                    continue
                key = tuple(operand)
                if any(self.group_of.get(p, key) != key for p in key):
                    self.split_operands += 1  # parts already placed in another group
                    continue
                for p in key:
                    self.group_of[p] = key
        # GEMV with accm accumulates into its destination: its accumulator input and its
        # output share one region when nothing else reads the accumulator (a chain of
        # accm GEMVs then lives in the region of its last output).
        n_readers: dict[str, int] = defaultdict(int)
        for n in self.order:
            for t in g.nodes[n]["inputs"]:
                n_readers[t["name"]] += 1
        self.alias: dict[str, str] = {}
        self.accm_copies = 0
        for n in self.order:
            d = g.nodes[n]
            if d["op"] != "GEMV" or not d["flags"].get("accm"):
                continue
            acc = operand_groups(d)[1]
            out = d["outputs"][0]["name"]
            if len(acc) == 1 and n_readers[acc[0]] == 1 and acc[0] not in self.group_of:
                self.alias[acc[0]] = out
            else:
                self.accm_copies += 1
        chain_last: dict[str, int] = {}
        for t in self.last_use:
            r = self.rep(t)
            chain_last[r] = max(chain_last.get(r, -1), self.last_use[t])
        self.chain_last = chain_last
        for t in list(self.low):
            self.low.add(self.rep(t))
        self.region: dict[str, tuple[int, int]] = {}  # tensor -> (addr, words)
        self.group_region: dict[tuple, int] = {}
        self.writer: dict[str, tuple[int, str]] = {}  # tensor -> (word index, engine)
        self.readers: dict[str, dict[str, int]] = defaultdict(dict)  # tensor -> engine -> word
        self.free_at: dict[int, list] = defaultdict(list)  # position -> regions to free
        # Regions whose tensors are dead but may still be read by an unfenced instruction:
        # they go back to the free list at the next fence (so no overwrite needs its own fence).
        self.quarantine: list[tuple[int, int]] = []

    def _l2_bytes(self, name: str) -> int:
        """Bytes tensor `name` takes in L2 on the target (BF16 activations as built)."""
        t = self.info[name]
        return self.t.tensor_bytes(t["shape"], t["dtype"])

    def _offset(self, name: str) -> int:
        """Element of its first word where tensor `name` starts: 0, except a REDUCE_SUM's
        sum (element 7 as built, `Target.scalar_element`) and element-wise CVO results on
        it, which keep its place (set by `_cvo`)."""
        return self.offsets.get(name, 0)

    def rep(self, name: str) -> str:
        """The tensor whose region `name` lives in (itself unless it is an accm accumulator)."""
        while name in self.alias:
            name = self.alias[name]
        return name

    def _alloc(self, name: str, node: str, index: int) -> None:
        if name in self.region or name not in self.npu:
            return
        r = self.rep(name)
        if r != name:
            self._alloc_rep(r, node, index)
            self.region[name] = self.region[r]
            return
        self._alloc_rep(name, node, index)

    def _alloc_rep(self, name: str, node: str, index: int) -> None:
        if name in self.region:
            return
        key = self.group_of.get(name)
        if key is not None:
            if key not in self.group_region:
                for p in key[:-1]:
                    if self._l2_bytes(p) % L2_WORD_BYTES:
                        raise IsaError(
                            f"node {node}: part {p} of a multi-part operand does not fill whole "
                            f"L2 words on target {self.t.name}, so the parts are not contiguous"
                        )
                sizes = [words_for(self._l2_bytes(p)) for p in key]
                low = any(p in self.low for p in key)
                addr = self._take(sum(sizes), low, name, node, index)
                self.group_region[key] = addr
                off = addr
                for p, w in zip(key, sizes, strict=True):
                    self.region[p] = (off, w)
                    # each part's words are freed after that part's own last reader: a KV
                    # tile grouped with the new row dies long before the row, which later
                    # (KV-sharing) layers keep reading
                    self.free_at[self.chain_last.get(p, self.last_use[p])].append((off, w, (p,)))
                    off += w
            return
        w = words_for(self._l2_bytes(name))
        addr = self._take(w, name in self.low, name, node, index)
        self.region[name] = (addr, w)
        self.free_at[self.chain_last[name]].append((addr, w, (name,)))

    def _take(self, words: int, low: bool, name: str, node: str, index: int) -> int:
        addr = self.l2.alloc(words, low=low)
        if addr is None and self.quarantine:
            self._fence("reclaim L2")
            addr = self.l2.alloc(words, low=low)
        if addr is None:
            where = "CVO window" if low else "L2"
            limit = self.l2.reach_words if low else self.l2.total_words
            live = self.l2.live_below(limit)
            raise AllocationError(
                f"does not fit: tensor {name} ({words * 16} B) for instruction {index} "
                f"(node {node}) needs {words} words of {where} but only "
                f"{self.l2.largest_hole(limit)} contiguous of {limit} are free; "
                f"{(live + words) * 16} B would be live there (L2 peak so far "
                f"{self.l2.peak_words * 16} B) of {limit * 16} B on {self.profile.name} "
                "(the schedule's bytes fit, their placement does not: try another policy, "
                "or a larger L2)"
            )
        return addr

    def _release(self, position: int) -> None:
        for addr, w, names in self.free_at.pop(position, []):
            readers: dict[str, int] = {}
            for p in names:
                for eng, word in self.readers.get(p, {}).items():
                    readers[eng] = max(readers.get(eng, -1), word)
            if any(self._pending(r) for r in readers.values()):
                self.quarantine.append((addr, w))  # an engine may still read it
            else:
                self.l2.release(addr, w)

    # --- words, batches, fences ------------------------------------------------------------

    def _close_batch(self) -> None:
        if self.batch_start is None:
            return
        p = self.prog
        if self.done_markers and p.words[-1] >> 60 != FORMATS["CVO"].opcode:
            at = self.t.cvo_field(self.scratch)
            marker = encode("CVO", func="REDUCE_SUM", src=at, dst=at, length=1)
            p.words.append(marker)
            p.nodes.append(DONE_NODE)
            p.roles.append("done")
            self.markers += 1
        p.words.append(KICK_MARKER)
        p.nodes.append(None)
        p.roles.append("kick")
        p.steps.append({"kind": "batch", "start": self.batch_start, "end": len(p.words)})
        self.batch_start = None

    def _fence(self, reason: str) -> None:
        self._close_batch()
        self.prog.steps.append({"kind": "fence", "reason": reason})
        self.done_upto = len(self.prog.words)
        self.fences += 1
        self.fence_reasons[reason] += 1
        for addr, w in self.quarantine:
            self.l2.release(addr, w)
        self.quarantine = []

    def _emit(self, word: int, node: str, role: str) -> int:
        p = self.prog
        room = self.max_batch
        if self.done_markers and word >> 60 != FORMATS["CVO"].opcode:
            room -= 1  # the batch may need its DONE marker after this word
        if self.batch_start is not None and len(p.words) - self.batch_start >= room:
            self._close_batch()
        if self.batch_start is None:
            self.batch_start = len(p.words)
        p.words.append(word)
        p.nodes.append(node)
        p.roles.append(role)
        return len(p.words) - 1

    def _emit_cvo_last(self, index: int) -> None:
        """As built a CVO ends its batch: the bridge drops a CVO that arrives while it is
        busy, and the DONE the host waits for must be this CVO's (`target.RULES`)."""
        if self.t.one_cvo_per_batch and self.prog.words[index] >> 60 == FORMATS["CVO"].opcode:
            self._close_batch()

    def _pending(self, word: int | None) -> bool:
        return word is not None and word >= self.done_upto

    def _needs_raw_fence(self, names: list[str], engine: str | None) -> bool:
        for t in names:
            w = self.writer.get(t)
            if w is not None and self._pending(w[0]) and w[1] != engine:
                return True
        return False

    # --- constant slots --------------------------------------------------------------------

    def _slot(self, cache: str, a: int, b: int, c: int, node: str, meaning: str) -> int:
        for v, what in ((a, "a"), (b, "b"), (c, "c")):
            if not 0 <= v <= 0xFFFF:
                raise IsaError(
                    f"node {node}: {meaning} value {what}={v} does not fit a 16-bit slot field"
                )
        value = (cache, a, b, c)
        now = len(self.prog.words)
        slot, new, evicted = self.slots.lookup(value, now)
        if new:
            if evicted is not None and self._pending(self.slot_users.get(slot)):
                self._fence("slot eviction")
            index = self._emit(
                encode("MEMSET", dest_cache=cache, slot=slot, a=a, b=b, c=c), node, "slot"
            )
            self.prog.slots.append(
                {
                    "word": index,
                    "slot": slot,
                    "value": [a, b, c],
                    "cache": cache,
                    "meaning": meaning,
                }
            )
        return slot

    # --- per node --------------------------------------------------------------------------

    def _addr(self, name: str) -> int:
        return self.region[name][0]

    def node(self, n: str) -> None:
        d = self.g.nodes[n]
        op = d["op"]
        ins = [t["name"] for t in d["inputs"]]
        outs = [t["name"] for t in d["outputs"]]
        if op == "HOST":
            self._host(n, d, ins, outs)
        else:
            engine = OP_LANE[op]
            for t in outs:
                self._alloc(t, n, len(self.prog.words))
            if self._needs_raw_fence(ins, engine):
                self._fence("read after write across engines")
            words, extra = self._instruction(n, d, op)
            for word in words:
                index = self._emit(word, n, "node")
                self._record(index, ins, outs, extra)
                self._emit_cvo_last(index)
            for t in outs:
                self.writer[t] = (index, engine)
            for t in ins:
                self.readers[self.rep(t)][engine] = index
            for slot in extra.get("_slots", []):
                self.slot_users[slot] = index
        self._release(self.pos[n])

    def _record(self, index: int, ins: list[str], outs: list[str], extra: dict) -> None:
        """The sidecar entries of word `index`: where its operands lie, its stream."""
        self.prog.operands[index] = {
            "inputs": {t: self._where(t) for t in ins if t in self.region},
            "outputs": {t: self._where(t) for t in outs if t in self.region},
        }
        stream = {k: v for k, v in extra.items() if k != "_slots"}
        if stream:
            self.prog.streams[index] = stream

    def _where(self, t: str) -> list:
        """``[addr, words, elements, dtype]`` of a tensor in L2."""
        addr, words = self.region[t]
        return self._located([addr, words, math.prod(self.info[t]["shape"])], t)

    def _host(self, n: str, d: dict, ins: list[str], outs: list[str]) -> None:
        copied = False
        for t in ins:
            if t in self.region and t not in self.host_io:
                self._copy(t, n, HOST_READ)
                copied = True
        # a copy out, or a result an instruction sent to host memory (the logits runs), is
        # there only once DONE says so (what the host made itself it has at once)
        sent = [t for t in ins if t in self.writer and t not in self.host_io]
        if copied or any(self._pending(self.writer[t][0]) for t in sent):
            self._fence("host reads an NPU result")
        else:
            self._close_batch()
        self.prog.steps.append(
            {
                "kind": "host",
                "node": n,
                "func": d["func"],
                "kernel": d["kernel"],
                "call": {
                    "params": d["params"],
                    "flags": d["flags"],
                    "weight": d["weight"],
                    "inputs": d["inputs"],
                    "outputs": d["outputs"],
                },
                "host_reads": {t: self._host_where(t) for t in ins if t in self.host_io},
                "host_writes": {t: self._host_where(t) for t in outs if t in self.npu},
                "slot_reads": {
                    t: [self.slot_tensor[t], self.slot_value[t]]
                    for t in ins
                    if t in self.slot_tensor
                },
            }
        )
        for t in outs:
            if t in self.npu:  # an instruction reads it: the host copies it into L2
                self._alloc(t, n, len(self.prog.words))
                self._copy(t, n, HOST_WRITE)

    def _host_where(self, t: str) -> list:
        """``[byte offset, bytes, elements, dtype]`` of a tensor in the host I/O area."""
        if t not in self.host_io:
            nbytes = self.region[t][1] * L2_WORD_BYTES if t in self.region else 0
            nbytes = nbytes or words_for(self._l2_bytes(t)) * L2_WORD_BYTES
            self.host_io[t] = (self.host_io_bytes, nbytes)
            self.host_io_bytes += -(-nbytes // HOST_IO_ALIGN) * HOST_IO_ALIGN
        offset, nbytes = self.host_io[t]
        return self._located([offset, nbytes, math.prod(self.info[t]["shape"])], t)

    def _located(self, head: list, t: str) -> list:
        """`head` + the tensor's L2 dtype, + its element offset when it is not 0."""
        out = [*head, self.t.tensor_dtype(self.info[t]["dtype"])]
        return out + [self._offset(t)] if self._offset(t) else out

    def _copy(self, t: str, n: str, kind: str) -> None:
        """A MEMCPY word moving tensor `t` between its L2 region and the host I/O area."""
        to_host = kind == HOST_READ
        engine = OP_LANE["MEMCPY"]
        if to_host and self._needs_raw_fence([t], engine):
            self._fence("read after write across engines")
        addr, words = self.region[t]
        slot = self._length_slot(words, n)
        word = encode(
            "MEMCPY",
            from_device="npu" if to_host else "host",
            to_device="host" if to_host else "npu",
            dest=0 if to_host else addr,
            src=addr if to_host else 0,
            aux=0,
            shape_ptr=slot,
        )
        where = self._host_where(t)
        index = self._emit(word, n, "host_io")
        self.slot_users[slot] = index
        if to_host:
            self.readers[self.rep(t)][engine] = index
            self.prog.operands[index] = {"inputs": {t: self._where(t)}, "outputs": {}}
        else:
            self.writer[t] = (index, engine)
            self.prog.operands[index] = {"inputs": {}, "outputs": {t: self._where(t)}}
        self.prog.streams[index] = {
            "kind": kind,
            "tensor": t,
            "bytes": where[1],
            "host_offset": where[0],
        }
        self.host_copies[kind] += 1

    def _length_slot(self, words: int, n: str) -> int:
        """The constant slot holding a MEMCPY's length, in the RTL's (X, Y, Z) form."""
        x, y, z = memcpy_length_fields(words)
        return self._slot("fmap_shape", x, y, z, n, "MEMCPY length (X*Y*Z/8 words)")

    def _instruction(self, n: str, d: dict, op: str) -> tuple[list[int], dict]:
        """The words of one node (several for a CVO split at the target's cap) and its
        sidecar extras."""
        outs = d["outputs"]
        if op in ("GEMV", "GEMM"):
            word, extra = self._gemv(n, d, op)
            return [word], extra
        if op == "CVO":
            return self._cvo(n, d)
        if op == "MEMSET":
            hi, lo = f32_halves(d["params"].get("value", 0.0))
            slot, new, evicted = self.slots.lookup(("fmap_shape", hi, lo, 0), len(self.prog.words))
            if evicted is not None and self._pending(self.slot_users.get(slot)):
                self._fence("slot eviction")
            self.prog.slots.append(
                {"word": len(self.prog.words), "slot": slot, "value": [hi, lo, 0],
                 "cache": "fmap_shape", "meaning": f"{d['params'].get('what')} (float32 bits)"}
            )  # fmt: skip
            for t in outs:
                self.slot_tensor[t["name"]] = slot
                self.slot_value[t["name"]] = d["params"].get("value", 0.0)
            self.slot_users[slot] = len(self.prog.words)
            return [encode("MEMSET", dest_cache="fmap_shape", slot=slot, a=hi, b=lo)], {}
        if op == "MEMCPY":
            word, extra = self._memcpy(n, d)
            return [word], extra
        raise IsaError(f"node {n}: op {op} has no instruction")

    def _cvo(self, n: str, d: dict) -> tuple[list[int], dict]:
        """A CVO node's words: addresses in the target's unit, lengths and pieces by its rules.

        As built (`pccx_flow.board.target`): element addresses, whole-word lengths, a scalar
        in element 7 (so a CVO over it covers its word), at most 2,048 results per word."""
        ins, outs = d["inputs"], d["outputs"]
        first, func = ins[0]["name"], d["func"]
        span = d["params"].get("span")
        whole = sum(math.prod(self.info[t]["shape"]) for t in operand_groups(d)[0])
        a, b = span if span else (0, whole)
        per = L2_WORD_BYTES // DTYPE_BYTES[self.t.tensor_dtype(self.info[first]["dtype"])]
        if a % per:
            raise IsaError(f"node {n}: CVO span start {a} is not on a 128-bit word")
        offset = 0 if span else self._offset(first)
        if func == "REDUCE_SUM" and offset and first not in self.clean:
            raise IsaError(
                f"node {n}: REDUCE_SUM over {first}, a CVO result in element {offset} of a word"
                " whose other elements are not zero; the bridge streams from element 0"
            )
        src, dst = self._addr(first) + a // per, self._addr(outs[0]["name"])
        flags = flag_bits(FORMATS["CVO"].field("flags"), d["flags"])
        words = [
            encode(
                "CVO",
                func=func,
                src=self.t.cvo_field(src + start // per),
                dst=self.t.cvo_field(dst + start // per),
                length=length,
                flags=flags,
            )
            for start, length in self.t.cvo_pieces(func, b - a, offset)
        ]
        # where the result lies: a sum in element 7 of an otherwise zero word (the bridge's
        # serialiser starts empty), an element-wise result where its input was
        out = outs[0]["name"]
        if func == "REDUCE_SUM" and self.t.scalar_element:
            self.offsets[out] = self.t.scalar_element
            self.clean.add(out)
        elif offset and b - a == 1:
            self.offsets[out] = offset
        extra = {}
        if d["kernel"] == "cvo_scale_const":
            hi, lo = f32_halves(d["params"]["scale"])
            slot = self._slot("fmap_shape", hi, lo, 0, n, "SCALE constant (float32 bits)")
            # the slot holds float32 bits (the hardware's scalar); the exact value is kept
            # beside it for a float64 check of the program's math
            extra = {"scalar_slot": slot, "scalar": d["params"]["scale"], "_slots": [slot]}
        return words, extra

    def _gemv(self, n: str, d: dict, op: str) -> tuple[int, dict]:
        groups = operand_groups(d)
        x = groups[0]
        out = d["outputs"][0]
        for t in x:
            if self._offset(t):
                raise IsaError(
                    f"node {n}: GEMV input {t} sits at element {self._offset(t)} of its word "
                    f"(a REDUCE_SUM result on target {self.t.name}); a GEMV loads from element 0"
                )
        rows = math.prod(out["shape"])
        cols = sum(math.prod(self.info[p]["shape"]) for p in x)
        extra: dict = {}
        if d["weight"]:
            w = d["weight"]
            cols = (w["cols"][1] - w["cols"][0]) if "cols" in w else cols
            layout = d["params"].get("layout", "out_in")
            extra["weight"] = weight_stream(self.ddr, w, layout)
            extra["weight"].update(rows=w["rows"], cols=w.get("cols"), layout=layout)
        else:
            # attention: the "matrix" is the KV rows in L2 (second operand)
            kv = [t for grp in groups[1:] for t in grp] or x
            extra["matrix_operand"] = list(kv)
            p = d["params"]
            extra["attention"] = {
                k: p[k] for k in ("keys", "kv_head", "head_dim", "has_past") if k in p
            }
            extra["attention"]["kind"] = d["kernel"]
        tile = ("weight_shape", rows, cols & 0xFFFF, cols >> 16, n, "GEMV tile shape")
        if self.t.gemv_length_ptr == "shape_ptr":
            # as built: the L2 load takes its length from the fmap-shape slot at shape_ptr
            # (X*Y*Z BF16 elements); size_ptr goes to the engine (`target.RULES`)
            shape = self._slot(
                "fmap_shape", *fmap_shape_fields(cols), n, "GEMV input length (X*Y*Z elements)"
            )
            size = self._slot(*tile)
        else:
            size = self._slot("fmap_shape", cols & 0xFFFF, cols >> 16, 1, n, "GEMV input length")
            shape = self._slot(*tile)
        extra["_slots"] = [size, shape]
        flags = flag_bits(FORMATS[op].field("flags"), d["flags"])
        word = encode(
            op,
            dest=self._addr(out["name"]),
            src=self._addr(x[0]),
            flags=flags,
            size_ptr=size,
            shape_ptr=shape,
            parallel_lane=1,
        )
        return word, extra

    def _memcpy(self, n: str, d: dict) -> tuple[int, dict]:
        kind = d["func"]
        out = d["outputs"][0]
        to_npu = kind in TO_L2_COPIES
        local = out["name"] if to_npu else d["inputs"][0]["name"]
        parts = self.group_of.get(local, (local,))
        local_words = sum(self.region[p][1] for p in parts)
        nbytes = self._l2_bytes(out["name"]) if to_npu else sum(self._l2_bytes(q) for q in parts)
        slot = self._length_slot(local_words, n)
        word = encode(
            "MEMCPY",
            from_device="host" if to_npu else "npu",
            to_device="npu" if to_npu else "host",
            dest=self._addr(local) if to_npu else 0,
            src=0 if to_npu else self._addr(local),
            aux=0,
            shape_ptr=slot,
        )
        stream: dict = {"kind": kind, "bytes": nbytes, "_slots": [slot]}
        if kind == "logits_readback":
            stream["host_tensor"] = out["name"]  # where the host keeps this run of logits
        p = d["params"]
        if kind in ("kv_read", "kv_write"):
            region = self.ddr["kv"][f"{p['cache_layer']}.{p['kind']}"]
            row = region["row_bytes"]
            first = p["positions"][0] if kind == "kv_read" else p["position"]
            stream["ddr_offset"] = region["offset"] + first * row
            cache_dtype = self.kv_dtype
            stream["kv"] = {
                "layer": p["cache_layer"],
                "kind": p["kind"],
                "first_row": first,
                "dtype": cache_dtype,
            }
            stream["kv"]["rows"] = p["positions"][1] - p["positions"][0] if kind == "kv_read" else 1
            stream["ddr_bytes"] = math.prod(out["shape"]) * DTYPE_BYTES[cache_dtype]
        elif kind == "embed_fetch":
            region = self.ddr["tensors"][d["weight"]["key"]]
            stream["ddr_offset"] = region["offset"]
            stream["embed"] = {
                "key": d["weight"]["key"],
                "id_rule": p.get("id_rule", "none"),
                "id_limit": p.get("id_limit", 0),
            }
            stream["row_rule"] = "the host points this stream at row token_id (after id_rule)"
        return word, stream


def lower(graph: nx.DiGraph, schedule, profile, config, *, done_markers: bool = True,
          target: str | Target | None = None) -> Program:  # fmt: skip
    """The program of one scheduled decode step (see the module docstring).

    `target` (``spec`` or ``as-built``, `pccx_flow.board.target`) is how the hardware reads
    the words; None takes the profile's ``[program] target``. L2 placement is a heuristic
    (the schedule guarantees bytes, not contiguity): when the
    default placement fails, the lowering is retried once with small tensors kept above
    the CVO window; if that fails too, the first error is raised.
    """
    t = target_of(profile, target)
    try:
        lw = _lower_with(graph, schedule, profile, config, "bottom", done_markers, t)
    except AllocationError as first:
        try:
            lw = _lower_with(graph, schedule, profile, config, "above-reach", done_markers, t)
        except AllocationError:
            raise first from None
    prog = lw.prog
    prog.l2 = {t: {"addr": a, "words": w} for t, (a, w) in lw.region.items()}
    # an operand of several parts is one allocation: record it whole as well
    for key, addr in lw.group_region.items():
        words = sum(lw.region[p][1] for p in key)
        prog.l2["+".join(key)] = {"addr": addr, "words": words, "parts": list(key)}
    if lw.done_markers:
        prog.l2[DONE_SCRATCH] = {"addr": lw.scratch, "words": 1}
    prog.ddr = lw.ddr
    prog.meta = {
        "config": config.name,
        "semantics": graph.graph.get("semantics"),
        "position": graph.graph.get("position"),
        "tile_rows": graph.graph.get("tile_rows"),
        "layers": graph.graph.get("layers"),
        "profile": profile.name,
        "policy": schedule.policy,
        "l2_words": lw.l2.total_words,
        "cvo_reach_words": lw.l2.reach_words,
        "host_io_bytes": lw.host_io_bytes,
        "done_markers": lw.done_markers,
        "target": lw.t.name,
        "command_fifo": profile.program.command_fifo,
        "l2_dtype": lw.t.l2_dtype,
        "ddr_kv_dtype": lw.kv_dtype,
        "row_align": graph.graph.get("row_align", 1),
    }
    prog.summary = summarise(lw)
    return prog


def _lower_with(graph: nx.DiGraph, schedule, profile, config, small: str,
                done_markers: bool, target: Target) -> _Lowering:  # fmt: skip
    lw = _Lowering(graph, schedule, profile, config, small, done_markers, target)
    for n in lw.order:
        lw.node(n)
    lw._fence("end of step")
    return lw


def summarise(lw: _Lowering) -> dict:
    prog = lw.prog
    by_op: dict[str, int] = defaultdict(int)
    slot_memsets = 0
    for w, role in zip(prog.words, prog.roles, strict=True):
        if role in ("kick", "host_io", "done"):  # counted in host_copies_*, done_markers
            continue
        op = next(f.name for f in FORMATS.values() if f.opcode == w >> 60)
        if role == "slot":
            slot_memsets += 1
        else:
            by_op[op] += 1
    l2 = lw.l2
    return {
        "instructions": sum(by_op.values()),
        "by_opcode": dict(sorted(by_op.items())),
        "slot_memsets": slot_memsets,
        "words": len(prog.words),
        "batches": sum(1 for s in prog.steps if s["kind"] == "batch"),
        "fences": lw.fences,
        "fence_reasons": dict(lw.fence_reasons),
        "host_steps": sum(1 for s in prog.steps if s["kind"] == "host"),
        "host_copies_out": lw.host_copies[HOST_READ],
        "host_copies_in": lw.host_copies[HOST_WRITE],
        "host_io_bytes": lw.host_io_bytes,
        "done_markers": lw.markers,
        "l2_peak_bytes": l2.peak_words * 16,
        "l2_fragmentation": round(l2.fragmentation_at_peak, 4),
        "l2_bytes": l2.total_words * 16,
        "cvo_window_peak_bytes": l2.high_water * 16,
        "cvo_reach_bytes": l2.reach_words * 16,
        "split_operands": lw.split_operands,
        "accm_copies": lw.accm_copies,
        "slots_used": len(lw.slots.used),
        "slot_hits": lw.slots.hits,
        "slot_evictions": lw.slots.evictions,
        "ddr_image_bytes": lw.ddr["total_bytes"],
    }


def live_demand_peak(graph: nx.DiGraph, schedule) -> tuple[int, str]:
    """Peak bytes of L2 the schedule's order keeps live (NPU tensors only), and where.

    Independent of placement: the sum of the sizes of tensors born and not yet dead, at the
    worst node. A program cannot fit an L2 smaller than this, however it is allocated.
    """
    order = [s.node for s in schedule.order()]
    pos = {n: i for i, n in enumerate(order)}
    born: dict[str, int] = {}
    dies: dict[str, int] = {}
    size: dict[str, int] = {}
    for n in order:
        d = graph.nodes[n]
        npu = d["op"] != "HOST"
        for t in d["outputs"]:
            born.setdefault(t["name"], pos[n])
            dies.setdefault(t["name"], pos[n])
            size[t["name"]] = words_for(tensor_bytes(t)) * 16 if npu else 0
        for t in d["inputs"]:
            dies[t["name"]] = max(dies.get(t["name"], -1), pos[n])
            if npu:
                size[t["name"]] = max(size.get(t["name"], 0), words_for(tensor_bytes(t)) * 16)
    delta = [0] * (len(order) + 1)
    for t, b in born.items():
        delta[b] += size.get(t, 0)
        delta[dies[t] + 1] -= size.get(t, 0)
    live, peak, at = 0, 0, 0
    for i in range(len(order)):
        live += delta[i]
        if live > peak:
            peak, at = live, i
    return peak, order[at] if order else ""
