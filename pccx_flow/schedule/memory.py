"""On-chip memory as a scheduling resource: what a decode node keeps in L2, and occupancy.

Two jobs, both on plain data:

- `decode_demands` says how many bytes of L2 (and of the SFU's reach, where the profile
  limits it) each node of a decode graph allocates. A node that runs on the NPU writes its
  outputs to L2; they stay there from the node's start until its last consumer finishes
  (`SchedulingProblem` defines that lifetime for every capacity). Tensors that do not live
  in L2 allocate nothing: MEMSET writes the constant cache, and the logits read-back
  writes host memory. A HOST node writes host memory, except what an NPU node reads next:
  the host puts that into L2 over the ACP (the lowering gives it an L2 region), so it
  counts. KV rows of earlier positions enter L2 through their ``kv_read`` MEMCPY, so they
  count from that copy's start until their last reader finishes.
  On a profile whose SFU (CVO) addresses only the first ``l2_reach_bytes`` of L2, every
  tensor a CVO node reads or writes must also sit in that window: such tensors demand the
  ``l2_reach`` capacity as well.
- when each KV tile read may be issued, so that no policy hoists a layer's whole cache
  into L2 and then finds no room for the work that frees it, is `pccx_flow.schedule.
  readahead`'s job.
- `occupancy` / `l2_occupancy` turn a finished schedule into the step function of bytes
  allocated over time, for metrics and the Gantt chart's L2 row.

>>> import networkx as nx
>>> from pccx_flow.schedule.model import Lane, Schedule, Slot
>>> from pccx_flow.schedule.problem import SchedulingProblem
>>> g = nx.DiGraph([("load", "use")])
>>> p = SchedulingProblem(g, [Lane("x0", "cpu")], {"load": {"x0": 3}, "use": {"x0": 2}},
...                       capacities={"l2": 100}, demands={"load": {"l2": 64}})
>>> s = Schedule("demo", "none", p.lanes, {"load": Slot("load", "x0", 0, 3),
...                                          "use": Slot("use", "x0", 3, 5)})
>>> l2_occupancy(s, p)
[(0, 64), (5, 0)]
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable
from operator import is_
from typing import Any

import networkx as nx

L2 = "l2"
L2_REACH = "l2_reach"

# MEMCPY transfers whose output is not in L2 but in host memory (the lowering allocates by
# the same rule). The KV write's output is in L2: it leaves the rounded row there for this
# step's attention.
HOST_OUTPUT_COPIES = ("logits_readback",)

Node = Hashable


def decode_capacities(profile: Any) -> dict[str, int]:
    """``{"l2": bytes}``, plus ``"l2_reach"`` when the SFU reaches less than all of L2."""
    caps = {L2: int(profile.memory.l2_bytes)}
    reach = int(profile.sfu.l2_reach_bytes)
    if reach < caps[L2]:
        caps[L2_REACH] = reach
    return caps


def decode_holds(
    graph: nx.DiGraph, capacities: dict[str, int]
) -> dict[Node, list[tuple[tuple[Node, ...], dict[str, int]]]]:
    """Per node, ``(readers, {capacity: bytes})`` for each set of outputs with the same readers.

    Each tensor stays resident until its own readers finished (module doc): a scores
    GEMV's 2 KiB of scores die at their EXP while its 4-byte maximum waits for the host's
    combine at the end of the head, so the two are separate holds.
    """
    out: dict[Node, list[tuple[tuple[Node, ...], dict[str, int]]]] = {}
    reach = L2_REACH in capacities
    from pccx_flow.graph.emit import tensor_bytes

    nodes = graph.nodes
    op_of = {n: attrs.get("op") for n, attrs in graph.nodes(data=True)}
    succ_of = dict(graph.adjacency())  # each node's successors, as edge data by successor
    for n, attrs in graph.nodes(data=True):
        op = op_of[n]
        if op == "MEMSET" or (op == "MEMCPY" and attrs.get("func") in HOST_OUTPUT_COPIES):
            continue
        outputs = attrs.get("outputs", ())
        # each tensor's readers, in successor order: the tensors a reader takes from n are
        # on the edge (`GraphWriter.add` puts them there), else among the reader's inputs
        succ = succ_of[n]
        if len(outputs) == 1:  # most nodes: the readers are the successors that name it
            name = outputs[0]["name"]
            readers_of = {
                name: [
                    s
                    for s, d in succ.items()
                    if name in (d["tensors"] if "tensors" in d else _input_names(nodes[s]))
                ]
            }
        else:
            readers_of = {}
            for s, d in succ.items():
                for name in d["tensors"] if "tensors" in d else _input_names(nodes[s]):
                    got = readers_of.get(name)
                    if got is None:
                        readers_of[name] = [s]
                    elif got[-1] != s:  # a name listed twice on one edge reads once
                        got.append(s)
        by_readers: dict[tuple[Node, ...], dict[str, int]] = {}
        for t in outputs:
            readers = tuple(readers_of.get(t["name"], ()))
            if op == "HOST" and all(op_of[r] == "HOST" for r in readers):
                continue  # host memory: no NPU node reads it
            nbytes = tensor_bytes(t)
            if not nbytes:
                continue
            row = by_readers.setdefault(readers, {})
            row[L2] = row.get(L2, 0) + nbytes
            if reach and (op == "CVO" or any(op_of[r] == "CVO" for r in readers)):
                row[L2_REACH] = row.get(L2_REACH, 0) + nbytes
        if by_readers:
            out[n] = list(by_readers.items())
    return out


def _input_names(attrs: dict) -> set[str]:
    """The names of a node's input tensors (for an edge that does not list them)."""
    return {i["name"] for i in attrs["inputs"]}


def decode_demands(graph: nx.DiGraph, capacities: dict[str, int]) -> dict[Node, dict[str, int]]:
    """Bytes each node of a decode graph allocates in each capacity: its holds summed."""
    out: dict[Node, dict[str, int]] = {}
    for n, parts in decode_holds(graph, capacities).items():
        row = out.setdefault(n, {})
        for _, part in parts:
            for cap, nbytes in part.items():
                row[cap] = row.get(cap, 0) + nbytes
    return out


def occupancy(schedule: Any, problem: Any, capacity: str) -> list[tuple[int, int]]:
    """Bytes allocated on `capacity` over time: ``[(t, bytes from t on), ...]``.

    Each hold (`SchedulingProblem.holds`) keeps its bytes from its node's start until the
    last finish of the node and the hold's readers. Only the times where the total changes
    are listed; the last entry is the drop to 0. An empty list means nothing demands this capacity.
    """
    return occupancies(schedule, problem, (capacity,))[capacity]


# The last answer `occupancies(..., keep=True)` gave, with what it was computed from: the
# schedule (weakly), the holds, the capacities, and its nodes and slots as objects (`_kept`).
_last_kept: tuple | None = None


def occupancies(
    schedule: Any,
    problem: Any,
    capacities: Iterable[str],
    *,
    keep: bool = False,
    reuse: bool = False,
) -> dict[str, list[tuple[int, int]]]:
    """`occupancy` of each of `capacities`, in one pass over the holds.

    `run_on_problem`'s validation asks with `keep` and the memory metrics of the same
    schedule next with `reuse` (the pass is a fifth of the metrics at 8191): a kept
    answer is reused only for the same schedule object that still maps the same nodes
    to the very same slot objects (slots are immutable named tuples, so a schedule whose
    slots changed has others), in the same order, against the same holds and
    capacities (the slots are read before the answer is computed); else it is computed
    again. The validator itself never reuses one. One answer is kept at most, and let go
    at the next ask with `reuse` (reused or not), when another is kept, or when its
    schedule is freed: kept past its schedule in a long-running process, it pinned the
    memory of a whole step (the next step's heft ran 1.08x in `bench_speed.py`). A
    schedule that cannot be weakly referenced keeps nothing. Treat the answer as
    read-only.
    """
    global _last_kept
    capacities = tuple(capacities)
    if reuse:
        kept, _last_kept = _last_kept, None
        if kept is not None and _kept(kept, schedule, problem, capacities):
            return kept[-1]
    if not keep:
        return _occupancies(schedule, problem, capacities)
    try:
        ref = weakref.ref(schedule)
    except TypeError:  # a duck-typed or slotted schedule: nothing to tie the answer to
        return _occupancies(schedule, problem, capacities)
    slots = schedule.slots
    seen = (ref, problem.holds, capacities, tuple(slots), tuple(slots.values()))
    kept = _last_kept = (*seen, _occupancies(schedule, problem, capacities))
    weakref.finalize(schedule, _let_go, id(kept))
    return kept[-1]


def _let_go(kept_id: int) -> None:
    """Forget the kept answer if it is still the one of the schedule just freed (an id
    reused since can only make a later reuse compute again)."""
    global _last_kept
    if id(_last_kept) == kept_id:
        _last_kept = None


def _kept(kept: tuple, schedule: Any, problem: Any, capacities: tuple[str, ...]) -> bool:
    """Whether `kept` (`_last_kept`) was computed from this schedule's slots, these holds
    and these capacities."""
    ref, holds, caps, nodes, slots, _ = kept
    now = schedule.slots
    return (
        ref() is schedule
        and holds is problem.holds
        and caps == capacities
        and len(nodes) == len(now)
        and all(map(is_, nodes, now))
        and all(map(is_, slots, now.values()))
    )


def _occupancies(
    schedule: Any, problem: Any, capacities: tuple[str, ...]
) -> dict[str, list[tuple[int, int]]]:
    finish = {n: s.finish for n, s in schedule.slots.items()}
    deltas: dict[str, dict[int, int]] = {cap: {} for cap in capacities}
    for hold in problem.holds:
        start = schedule.slots[hold.node].start
        end = problem.hold_end(hold, finish)
        if end <= start:
            continue
        for cap, d in hold.row:
            delta = deltas.get(cap)
            if delta is not None and d:
                delta[start] = delta.get(start, 0) + d
                delta[end] = delta.get(end, 0) - d
    out = {}
    for cap, delta in deltas.items():
        series: list[tuple[int, int]] = []
        level = 0
        for t in sorted(delta):
            if not delta[t]:
                continue
            level += delta[t]
            series.append((t, level))
        out[cap] = series
    return out


def l2_occupancy(schedule: Any, problem: Any) -> list[tuple[int, int]]:
    """`occupancy` of the ``l2`` capacity (empty when the problem models no L2)."""
    return occupancy(schedule, problem, L2)


def occupancy_stats(series: list[tuple[int, int]], span: int) -> dict[str, float]:
    """Peak bytes and time-weighted mean bytes over [0, span) of an `occupancy` series."""
    peak = max((b for _, b in series), default=0)
    area = 0
    for (t0, b), (t1, _) in zip(series, series[1:], strict=False):
        area += b * (min(t1, span) - min(t0, span))
    return {"peak_bytes": peak, "mean_bytes": area / span if span > 0 else 0.0}
