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
into the DataMover: the sidecar's ``streams`` entry of the word. How a word's fields are
read (word or element addresses, float32 or BF16 in L2, CVO caps, slot pointers) is the
target's (`pccx_flow.board.isa.target`).

The jobs above live in modules of their own, mixed into `_Lowering`, which holds the state
they share: `addresses` (regions, groups, aliases, release), `batches` (batches, fences, DONE
markers, constant slots), `host_steps` (host steps and their copies), `words` (one node's
words); `summary` counts the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import networkx as nx

from pccx_flow.board.isa.target import Target, target_of
from pccx_flow.board.program.addresses import Addresses
from pccx_flow.board.program.alloc import AllocationError, L2Allocator, SlotCache
from pccx_flow.board.program.batches import Batches
from pccx_flow.board.program.ddr import check_ddr_capacity
from pccx_flow.board.program.files import Program
from pccx_flow.board.program.host_steps import HostSteps
from pccx_flow.board.program.summary import live_demand_peak, summarise
from pccx_flow.board.program.tensors import DONE_NODE, DONE_SCRATCH, HOST_READ, HOST_WRITE
from pccx_flow.board.program.words import Words
from pccx_flow.errors import InputError
from pccx_flow.graph.nodes import OP_LANE
from pccx_flow.precision import kv_cache_dtype

__all__ = ["DONE_NODE", "DONE_SCRATCH", "live_demand_peak", "lower"]


class _Lowering(Addresses, Batches, HostSteps, Words):
    """The state of one lowering; its jobs are the mixed-in classes (module docstring)."""

    def __init__(self, graph: nx.DiGraph, order: list[str], profile, config,
                 small: str = "bottom", done_markers: bool = True,
                 target: Target | None = None):  # fmt: skip
        self.g = graph
        self.profile = profile
        self.config = config
        self.t = target or target_of(profile)
        self.order = order  # issue order: the schedule's, or with nodes `deferred` (`lower`)
        self.pos = {n: i for i, n in enumerate(self.order)}
        self.deferred: tuple[str, ...] = ()
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
        self.ddr = check_ddr_capacity(config, profile, kv_dtype=self.kv_dtype)
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


def lower(graph: nx.DiGraph, schedule, profile, config, *, done_markers: bool = True,
          target: str | Target | None = None,
          on_retry: Callable[[str], None] | None = None) -> Program:  # fmt: skip
    """The program of one scheduled decode step (see the module docstring).

    `target` (``spec`` or ``as-built``, `pccx_flow.board.isa.target`) is how the hardware reads
    the words; None takes the profile's ``[program] target``. L2 placement is a heuristic
    (the schedule guarantees bytes, not contiguity): when the default placement fails, the
    lowering is retried with small tensors kept above the CVO window, then with the node
    whose output found no room issued later than scheduled (`_placed`); if none fits, the
    first error is raised; `on_retry` is told of each new attempt in one line (a lowering
    of E4B takes seconds). A cut of the step that starts after layer 0 is refused: its
    inputs enter from the decode state (``state_read`` nodes), and a program has no words
    that load them.
    """
    entering = [n for n, d in graph.nodes(data=True) if d.get("kernel") == "state_read"]
    if entering:
        layers = graph.graph.get("layers") or ("?", "?")
        raise InputError(
            f"the step's layers {layers[0]}:{layers[1]} start after layer 0, so {len(entering)} "
            f"values enter from the decode state ({entering[0]}, ...), which a program has no "
            "words to load; lower a step that starts at layer 0 (--layers 0:B)"
        )
    t = target_of(profile, target)
    order = [slot.node for slot in schedule.order()]
    lw = _placed(graph, order, profile, config, done_markers, t, on_retry or _quiet)
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


# Nodes the lowering may issue later than the schedule says, to find room in L2 (`_placed`).
MAX_DEFERRED = 8


def _quiet(message: str) -> None:
    """`lower`'s default `on_retry`: say nothing."""


def _placed(graph: nx.DiGraph, order: list[str], profile, config, done_markers: bool,
            target: Target, on_retry: Callable[[str], None]) -> _Lowering:  # fmt: skip
    """The first lowering that finds every tensor a place in L2: in the schedule's issue
    order with small tensors at the bottom of L2, then above the CVO window; then, while a
    node's output finds no contiguous room, with that node issued just before its first
    reader (`_deferred`), up to `MAX_DEFERRED` nodes. Raises the first error if none fits.

    The schedule keeps the live bytes within L2, not a hole for each tensor: a policy that
    fills L2 to the brim (`random` at position 4095 on v002-spec: with a 256 KiB KV tile,
    1,822,816 of 1,835,008 bytes would be live) can leave no hole of a tile's size. A
    tensor made later holds its words for less of the step, and its maker's inputs are
    all made before it and its readers after it, so the program computes the same values;
    its timing differs from the schedule's by that node (the summary names it)."""
    try:
        return _lower_with(graph, order, profile, config, "bottom", done_markers, target)
    except AllocationError as e:
        first = error = e
    on_retry(
        f"no room in L2 for {first.node or 'a tensor'}: lowering again with small tensors "
        "above the CVO window"
    )
    try:
        return _lower_with(graph, order, profile, config, "above-reach", done_markers, target)
    except AllocationError:
        pass
    deferred: list[str] = []
    while len(deferred) < MAX_DEFERRED:
        later = _deferred(graph, order, error.node)
        if later is None:
            break
        order = later
        deferred.append(error.node)
        on_retry(
            f"no hole in L2 for {error.node}'s output: lowering again with it issued just "
            f"before its first reader ({len(deferred)} of at most {MAX_DEFERRED})"
        )
        try:
            lw = _lower_with(graph, order, profile, config, "bottom", done_markers, target)
        except AllocationError as again:
            error = again
            continue
        lw.deferred = tuple(deferred)
        return lw
    raise first from None


def _deferred(graph: nx.DiGraph, order: list[str], node: str | None) -> list[str] | None:
    """`order` with `node` moved to just before its first reader, or None when it has no
    reader or is right before it already (nothing to gain)."""
    if node is None or node not in order:
        return None
    i = order.index(node)
    readers = set(graph.successors(node))
    first = next((j for j in range(i + 1, len(order)) if order[j] in readers), None)
    if first is None or first == i + 1:
        return None
    return order[:i] + order[i + 1 : first] + [node] + order[first:]


def _lower_with(graph: nx.DiGraph, order: list[str], profile, config, small: str,
                done_markers: bool, target: Target) -> _Lowering:  # fmt: skip
    lw = _Lowering(graph, order, profile, config, small, done_markers, target)
    for n in lw.order:
        lw.node(n)
    lw._fence("end of step")
    return lw
