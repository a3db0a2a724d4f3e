"""Physical lower bounds on one decode step: no schedule on a profile can finish faster.

Three kinds of bound, each a number of core cycles, and the largest of them is the one that
binds:

- the **critical path**: the longest dependency chain with every node at its own cost and no
  contention for lanes or ports;
- per **lane class**: the total work of the class divided by its lane count (``ceil``): even
  perfectly packed, the lanes of that class are busy that long;
- per **resource pool**: the total duration of the nodes that hold a unit of the pool divided by
  its unit count (``ceil``); a GEMV tile holds a weight port for all of its cycles, latency
  included, so this is at least the pure weight-port bandwidth bound;
- per **bandwidth**: bytes over the path's bandwidth. ``weight_ports`` is every GEMV weight
  byte over the GEMV weight ports (ports x bytes per AXI clock, converted to core cycles);
  ``gemm_ports`` the same for GEMM weights over HP0/HP1 (only when the graph has any);
  ``ddr`` is all DDR traffic (every weight byte plus every MEMCPY payload) over the effective
  DDR4 bandwidth. DDR bandwidth is modelled as a bound, not as an exclusive resource.

All of these are model estimates on a profile, never measurements: the printed table says so
with the profile's name. pccx-v002.md §3 derives the same weight-port ceiling (≈ 3.6 tok/s
on HP2 + HP3 at 250 MHz) from the checkpoint's byte count.

>>> import networkx as nx
>>> from pccx_flow.hardware.profile import load_profile
>>> g = nx.DiGraph()
>>> g.add_node("a", op="MEMSET", lane_class="ctrl", elements=6)
>>> g.add_node("b", op="MEMSET", lane_class="ctrl", elements=3)
>>> g.add_edge("a", "b")
>>> lb = lower_bounds(g, load_profile("v002-spec"))
>>> lb.critical_path, lb.critical_path_cycles
(['a', 'b'], 3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from math import ceil

import networkx as nx

from pccx_flow.errors import GraphError, InputError
from pccx_flow.hardware.cost import axi_to_core, cycles_of, cycles_to_seconds, node_resources
from pccx_flow.hardware.profile import Profile


@dataclass(frozen=True)
class LowerBounds:
    """Lower bounds of one decode graph on one profile, in core cycles."""

    profile: str
    critical_path_cycles: int
    critical_path: list[str]  # node ids, first to last
    lane_class_cycles: dict[str, int]  # class -> ceil(total work / lane count)
    lane_class_work: dict[str, int]  # class -> total cycles of its nodes
    pool_cycles: dict[str, int]  # pool -> ceil(total cycles of its holders / units)
    bandwidth_cycles: dict[str, int]  # "weight_ports", "ddr" (and "gemm_ports")
    gemv_weight_bytes: int
    ddr_bytes: int
    largest_name: str  # "critical_path", "lane_class:<cls>", "pool:<name>", "bandwidth:<name>"
    largest_cycles: int

    def to_dict(self) -> dict:
        """JSON-compatible plain data."""
        return asdict(self)


def _critical_path(
    graph: nx.DiGraph, cost: dict, order: Sequence | None = None
) -> tuple[int, list]:
    """Longest node-weighted path by a DP over a topological order (`order`, if given)."""
    if order is None:
        try:
            order = list(nx.topological_sort(graph))
        except nx.NetworkXUnfeasible:
            raise GraphError(
                "decode graph has a dependency cycle; rebuild it (every edge must point forward)"
            ) from None
    finish: dict = {}
    best_pred: dict = {}
    for v in order:
        start, pred = 0, None
        for u in graph.predecessors(v):
            if finish[u] > start:
                start, pred = finish[u], u
        finish[v] = start + cost[v]
        best_pred[v] = pred
    end = max(order, key=lambda v: finish[v])
    path = [end]
    while best_pred[path[-1]] is not None:
        path.append(best_pred[path[-1]])
    return finish[end], path[::-1]


def lower_bounds(
    graph: nx.DiGraph,
    profile: Profile,
    *,
    cycles: Mapping[str, int] | None = None,
    order: Sequence | None = None,
) -> LowerBounds:
    """Every lower bound of `graph` on `profile` (costs from `pccx_flow.hardware.cost`).

    A caller that has the nodes' cycles on `profile` already (a scheduling problem built
    from the graph) passes them as `cycles`, and a topological order of the graph as
    `order`; both are computed here otherwise."""
    if graph.number_of_nodes() == 0:
        raise GraphError("decode graph has no nodes; build one before asking for its bounds")
    cost: dict = {}
    work: dict[str, int] = {}
    pool_work: dict[str, int] = {}
    gemv_bytes = gemm_bytes = memcpy_bytes = 0
    for node_id, attrs in graph.nodes(data=True):
        c = cycles_of(node_id, attrs, profile) if cycles is None else cycles[node_id]
        cost[node_id] = c
        cls = attrs["lane_class"]
        work[cls] = work.get(cls, 0) + c
        for pool in node_resources(attrs, profile):
            pool_work[pool] = pool_work.get(pool, 0) + c
        if cls == "gemv":
            gemv_bytes += attrs.get("weight_bytes") or 0
        elif cls == "gemm":
            gemm_bytes += attrs.get("weight_bytes") or 0
        elif cls == "dma":
            memcpy_bytes += attrs.get("act_bytes") or 0

    cp_cycles, cp = _critical_path(graph, cost, order)
    lane_cycles = {cls: -(-w // profile.lanes[cls]) for cls, w in work.items()}
    pool_cycles = {pool: -(-w // profile.pools[pool]) for pool, w in pool_work.items()}

    ports = profile.pools["weight_port"] * profile.gemv.port_bytes_per_axi_clock
    bandwidth = {"weight_ports": ceil(axi_to_core(Fraction(gemv_bytes, ports), profile))}
    if gemm_bytes:
        per_axi = profile.gemm.ports * profile.gemm.port_bytes_per_axi_clock
        bandwidth["gemm_ports"] = ceil(axi_to_core(Fraction(gemm_bytes, per_axi), profile))
    ddr_bytes = gemv_bytes + gemm_bytes + memcpy_bytes
    ddr_rate = Fraction(repr(profile.memory.ddr_effective_bytes_per_second))
    bandwidth["ddr"] = ceil(Fraction(ddr_bytes) / ddr_rate * Fraction(repr(profile.core_hz)))

    candidates = {"critical_path": cp_cycles}
    candidates.update({f"lane_class:{k}": v for k, v in lane_cycles.items()})
    candidates.update({f"pool:{k}": v for k, v in pool_cycles.items()})
    candidates.update({f"bandwidth:{k}": v for k, v in bandwidth.items()})
    largest = max(candidates, key=lambda k: candidates[k])  # first of equals, stable order
    return LowerBounds(
        profile=profile.name,
        critical_path_cycles=cp_cycles,
        critical_path=list(cp),
        lane_class_cycles=lane_cycles,
        lane_class_work=work,
        pool_cycles=pool_cycles,
        bandwidth_cycles=bandwidth,
        gemv_weight_bytes=gemv_bytes,
        ddr_bytes=ddr_bytes,
        largest_name=largest,
        largest_cycles=candidates[largest],
    )


def tokens_per_second(cycles: float, profile: Profile) -> float:
    """The token rate a step of `cycles` core cycles implies (a model estimate on `profile`)."""
    if not cycles > 0:
        raise InputError(f"cycles per token must be positive, got {cycles!r}")
    return float(profile.core_hz) / float(cycles)


def format_bounds(bounds: LowerBounds, profile: Profile) -> str:
    """A small table of the bounds; every time and tok/s is labelled as a model estimate."""
    label = f"model estimate, profile {profile.name}"
    rows = [("critical path", bounds.critical_path_cycles)]
    for cls, c in bounds.lane_class_cycles.items():
        n = profile.lanes[cls]
        rows.append((f"{cls} lanes ({n})", c))
    for pool, c in bounds.pool_cycles.items():
        rows.append((f"{pool} pool ({profile.pools[pool]})", c))
    for name, c in bounds.bandwidth_cycles.items():
        rows.append((f"bandwidth {name}", c))
    clock = f"{profile.core_hz / 1e6:g} MHz core"
    lines = [
        f"Lower bounds of one decode step on {profile.name} ({clock}); times are {label}",
        f"{'bound':<26}{'cycles':>14} {'ms/token':>12} {'tok/s max':>16}  {label}",
    ]
    for name, c in rows:
        if c > 0:
            ms = f"{cycles_to_seconds(c, profile) * 1e3:.3f}"
            tps = f"{tokens_per_second(c, profile):,.2f}"
        else:
            ms = tps = "-"
        lines.append(f"{name:<26}{c:>14,} {ms:>12} {tps:>16}  {label}")
    if bounds.largest_cycles > 0:
        ceiling = tokens_per_second(bounds.largest_cycles, profile)
        ms = cycles_to_seconds(bounds.largest_cycles, profile) * 1e3
        lines.append(
            f"binding bound: {bounds.largest_name} = {bounds.largest_cycles:,} cycles"
            f" = {ms:.3f} ms/token -> at most {ceiling:.2f} tok/s ({label})"
        )
    return "\n".join(lines)
