"""What a lowered program holds, in numbers (`emit` prints it), and the L2 a schedule needs.
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx

from pccx_flow.board.isa import FORMATS
from pccx_flow.board.program.alloc import words_for
from pccx_flow.board.program.tensors import HOST_READ, HOST_WRITE, tensor_bytes


def summarise(lw) -> dict:
    """The program's counts (`emit` prints them, benchmarks quote them)."""
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
        # nodes issued later than the schedule placed them, to find room in L2 (`lower`);
        # left out when there are none, so such a program's sidecar is what it was before
        **({"deferred": list(lw.deferred)} if lw.deferred else {}),
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
