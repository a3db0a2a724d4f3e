"""What a scheduler is asked to solve: a DAG, lanes, costs, communication and shared pools.

`SchedulingProblem` is deliberately generic. It knows nothing about Gemma, pccx or the cost
model: a node may run on any lane that gives it a cost (so processors can be heterogeneous,
as in the HEFT paper), an edge may cost time when its ends sit on different lanes, and a node
may hold one instance of each shared pool it needs (a weight port, say) for its whole run.
`problem_from_graph` is the one place that turns a decode graph plus a hardware profile into
such a problem; every policy, the timeline, the validator and the metrics work on the problem.

>>> import networkx as nx
>>> g = nx.DiGraph([("a", "b")])
>>> p = SchedulingProblem(g, [Lane("cpu0", "cpu")], {"a": {"cpu0": 3}, "b": {"cpu0": 4}})
>>> p.cost("b", "cpu0"), p.cost("b", "gpu0")
(4, None)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from typing import Any, NamedTuple

import networkx as nx

from pccx_flow.errors import GraphError, InputError, ProfileError
from pccx_flow.schedule.model import Lane

Node = Hashable
CommFn = Callable[[Node, Node, str, str], int]


def pool_instance_names(pools: Mapping[str, int]) -> dict[str, str]:
    """Instance name -> pool name: ``weight_port`` with count 2 gives weight_port0, weight_port1.

    Raises `ProfileError` when two pools would produce the same instance name.
    """
    names: dict[str, str] = {}
    for pool, count in pools.items():
        for i in range(int(count)):
            inst = f"{pool}{i}"
            if inst in names:
                raise ProfileError(
                    f"pool instance name {inst!r} is produced by pools {names[inst]!r} and "
                    f"{pool!r}; rename one of the pools"
                )
            names[inst] = pool
    return names


def comm_between_lanes(edge_costs: Mapping[tuple[Node, Node], int]) -> CommFn:
    """A `comm` function that charges an edge's cost only when its ends run on different lanes.

    This is the communication model of the HEFT paper (Topcuoglu, Hariri, Wu 2002).
    """
    costs = {edge: whole_cycles(c, f"the communication cost of edge {edge!r}")
             for edge, c in dict(edge_costs).items()}  # fmt: skip

    def comm(u: Node, v: Node, lane_u: str, lane_v: str) -> int:
        return 0 if lane_u == lane_v else costs.get((u, v), 0)

    return comm


def whole_cycles(value, what: str) -> int:
    """`value` as a whole, non-negative number of cycles, else one `GraphError` line (as the
    DAG file reader refuses fractions: truncating 2.5 to 2 would schedule a different
    problem than the one given)."""
    try:
        whole = int(value)
    except (TypeError, ValueError, OverflowError):
        raise GraphError(f"{what} is {value!r}, not a number of cycles") from None
    if whole != value or whole < 0:
        raise GraphError(
            f"{what} is {value!r}: costs are whole, non-negative cycles (round it up)"
        )
    return whole


class SchedulingProblem:
    """A DAG to place on lanes: costs per (node, lane), optional comm, optional shared pools.

    Node order (`order`) is a fixed topological order (insertion order where the graph's own
    order is topological, else the lexicographic topological order closest to it), so every
    policy that breaks ties by position is deterministic.
    """

    def __init__(
        self,
        graph: nx.DiGraph,
        lanes: Iterable[Lane],
        costs: Mapping[Node, Mapping[str, int]],
        *,
        comm: CommFn | None = None,
        resources: Mapping[Node, Iterable[str]] | None = None,
        pools: Mapping[str, int] | None = None,
        name: str = "",
        source: Any = None,
        capacities: Mapping[str, int] | None = None,
        demands: Mapping[Node, Mapping[str, int]] | None = None,
        holds: Mapping[Node, Iterable[tuple[Iterable[Node], Mapping[str, int]]]] | None = None,
        order_edges: Iterable[tuple[Node, Node]] | None = None,
        admit: Mapping[Node, int] | None = None,
        order_capacities: Iterable[str] = (),
    ) -> None:
        self.graph = graph
        self.name = name
        self.source = source  # the decode graph this came from, when there is one
        self.lanes: tuple[Lane, ...] = tuple(lanes)
        self.lane_by_name: dict[str, Lane] = {}
        self._lane_index: dict[str, int] = {}
        for i, lane in enumerate(self.lanes):
            self._lane_index.setdefault(lane.name, i)
            if lane.name in self.lane_by_name:
                raise ProfileError(f"lane name {lane.name!r} appears twice; lane names are unique")
            self.lane_by_name[lane.name] = lane
        self.pools: dict[str, int] = {str(k): int(v) for k, v in (pools or {}).items()}
        self.pool_of_instance = pool_instance_names(self.pools)
        self._comm = comm

        # Order-only edges (a heuristic's issue order, `pccx_flow.schedule.readahead`) bind the
        # schedule like graph edges but are not data: given apart, so the graph is not copied
        # to hold them, or marked ``order_only=True`` on graph edges.
        # (each node's neighbours as the plain dicts `adjacency` yields: no view per node)
        pred_of, succ_of = dict(nx.reverse_view(graph).adjacency()), dict(graph.adjacency())
        extra: dict[tuple[Node, Node], None] = {}
        for u, v in order_edges or ():
            after = succ_of.get(u)
            if after is None or v not in succ_of:
                raise GraphError(f"order-only edge {u!r} -> {v!r} names a node not in the graph")
            if v not in after:
                extra[(u, v)] = None
        self.order_edges: tuple[tuple[Node, Node], ...] = tuple(extra)
        self.order: tuple[Node, ...] = _program_order(graph, self.order_edges, pred_of, succ_of)
        self.index: dict[Node, int] = {n: i for i, n in enumerate(self.order)}
        key = self.index.__getitem__
        # The graph's own edges (`graph_preds`, `graph_succs`: what the bounds walk, less
        # edges marked order-only, `pccx_flow.schedule.precedence`), then with the
        # order-only edges (`preds`, `succs`: what a schedule obeys), each in program order.
        self.graph_preds: dict[Node, tuple[Node, ...]] = {
            n: _in_order(pred_of[n], key) for n in self.order
        }
        self.graph_succs: dict[Node, tuple[Node, ...]] = {
            n: _in_order(succ_of[n], key) for n in self.order
        }
        self.preds: dict[Node, tuple[Node, ...]] = _with_edges(
            self.graph_preds, ((v, u) for u, v in self.order_edges), key
        )
        self.succs: dict[Node, tuple[Node, ...]] = _with_edges(
            self.graph_succs, self.order_edges, key
        )

        self.costs: dict[Node, dict[str, int]] = {}
        checked: dict[int, dict[str, int]] = {}  # a row object given for many nodes: once
        for n in self.order:
            row = costs.get(n)
            if not row:
                raise GraphError(f"node {n!r} has no lane that can run it; give it a cost")
            same = checked.get(id(row))
            if same is not None:
                self.costs[n] = same
                continue
            clean: dict[str, int] = {}
            for lane_name in sorted(row, key=self._lane_pos):
                c = row[lane_name]
                if c is None:
                    continue
                if lane_name not in self.lane_by_name:
                    raise ProfileError(f"node {n!r} has a cost on unknown lane {lane_name!r}")
                if int(c) != c or c < 0:
                    raise GraphError(
                        f"node {n!r} on lane {lane_name!r}: cost {c!r} is not an int >= 0"
                    )
                clean[lane_name] = int(c)
            if not clean:
                raise GraphError(f"node {n!r} has no lane that can run it; give it a cost")
            self.costs[n] = checked[id(row)] = clean

        # Nodes with equal cost rows share one key (tiles of one matrix, say), so the
        # timeline can recognise look-alike nodes with one dict lookup. The least cost of
        # each node is kept too: every bound asks for it, many times per node.
        interned: dict[tuple, tuple] = {}
        by_row: dict[int, tuple] = {}  # rows shared by many nodes (above) are keyed once
        least: dict[int, int] = {}
        self.cost_key: dict[Node, tuple] = {}
        self._min_cost: dict[Node, int] = {}
        for n in self.order:
            clean = self.costs[n]
            key = by_row.get(id(clean))
            if key is None:
                row = tuple(clean.items())
                key = by_row[id(clean)] = interned.setdefault(row, row)
                least[id(clean)] = min(clean.values())
            self.cost_key[n] = key
            self._min_cost[n] = least[id(clean)]

        self.resources: dict[Node, tuple[str, ...]] = {}
        known: dict[tuple, tuple[str, ...]] = {}  # the few distinct pool lists, checked once
        for n in self.order:
            given = tuple((resources or {}).get(n, ()))
            needed = known.get(given)
            if needed is None:
                needed = tuple(dict.fromkeys(given))
                for pool in needed:
                    if self.pools.get(pool, 0) < 1:
                        raise ProfileError(
                            f"node {n!r} needs pool {pool!r}, which the profile does not "
                            f"provide; add it under [pools]"
                        )
                known[given] = needed
            self.resources[n] = needed

        if holds is not None and demands is not None:
            raise GraphError("give a problem demands or holds, not both")
        if holds is not None:  # checked whole: the demands are their sums, clean as they are
            self.capacities = check_capacities(self.order, capacities, None)[0]
            self.holds: tuple[Hold, ...] = _check_holds(self, holds)
            self.demands: dict[Node, dict[str, int]] = _sum_holds(self.holds)
        else:  # one hold per demanding node (`_check_holds`)
            self.capacities, self.demands = check_capacities(self.order, capacities, demands)
            self.holds = _check_holds(self, None)
        holds_of: dict[Node, tuple[int, ...]] = {}
        read_by: dict[Node, tuple[int, ...]] = {}
        for i, h in enumerate(self.holds):
            holds_of[h.node] = holds_of.get(h.node, ()) + (i,)
            for r in h.readers:
                read_by[r] = read_by.get(r, ()) + (i,)
        self.holds_of, self.holds_read_by = holds_of, read_by
        # Nodes the timeline releases to a policy only once the capacities have room for
        # their demand and this many bytes more beside what placed nodes hold for readers
        # not placed yet (`Timeline.initial_ready`): reads a policy would otherwise issue
        # as early as it can, filling L2 with bytes whose readers come much later.
        self.admit: dict[Node, int] = {}
        for n, reserve in (admit or {}).items():
            if n not in self.index:
                raise GraphError(f"node {n!r} to admit by room is not in the graph")
            if int(reserve) != reserve or reserve < 0:
                raise GraphError(f"node {n!r}: reserve {reserve!r} is not an int >= 0 (bytes)")
            if n in self.demands:
                self.admit[n] = int(reserve)
        # Capacities a heuristic adds to pace issue (the stream rule's KV tile slots,
        # `pccx_flow.schedule.readahead.KV_SLOTS`): they bind the schedule as order-only
        # edges do, but no hardware rule needs them, so the bounds leave them out.
        self.order_capacities: frozenset[str] = frozenset(order_capacities)
        unknown = self.order_capacities - set(self.capacities)
        if unknown:
            raise GraphError(f"order capacity {sorted(unknown)[0]!r} is not a capacity")
        self._groups: tuple[dict, dict] | None = None  # `_node_groups`, found when asked

    @classmethod
    def from_functions(
        cls,
        graph: nx.DiGraph,
        lanes: Iterable[Lane],
        cost: Callable[[Node, Lane], int | None],
        *,
        comm: CommFn | None = None,
        resources: Callable[[Node], Iterable[str]] | None = None,
        pools: Mapping[str, int] | None = None,
        name: str = "",
        capacities: Mapping[str, int] | None = None,
        demand: Callable[[Node], Mapping[str, int]] | None = None,
    ) -> SchedulingProblem:
        """A problem from a ``cost(node, lane) -> int | None`` function (None: cannot run).

        >>> g = nx.DiGraph([("a", "b")])
        >>> lanes = [Lane("big", "cpu"), Lane("small", "cpu")]
        >>> p = SchedulingProblem.from_functions(
        ...     g, lanes, lambda n, lane: 2 if lane.name == "big" else (5 if n == "a" else None))
        >>> p.lanes_for("a"), p.lanes_for("b")
        (('big', 'small'), ('big',))
        """
        lanes = tuple(lanes)
        costs = {n: {ln.name: cost(n, ln) for ln in lanes} for n in graph.nodes}
        res = {n: tuple(resources(n)) for n in graph.nodes} if resources else None
        dem = {n: dict(demand(n)) for n in graph.nodes} if demand else None
        return cls(
            graph, lanes, costs, comm=comm, resources=res, pools=pools, name=name,
            capacities=capacities, demands=dem,
        )  # fmt: skip

    def _lane_pos(self, lane_name: str) -> int:
        return self._lane_index.get(lane_name, len(self.lanes))

    # --- the questions policies ask ---------------------------------------------------------

    @property
    def has_comm(self) -> bool:
        return self._comm is not None

    def cost(self, node: Node, lane: str) -> int | None:
        """Cycles `node` takes on `lane`, or None when that lane cannot run it."""
        return self.costs[node].get(lane)

    def lanes_for(self, node: Node) -> tuple[str, ...]:
        """Names of the lanes that can run `node`, in lane order."""
        return tuple(self.costs[node])

    def comm(self, u: Node, v: Node, lane_u: str, lane_v: str) -> int:
        """Cycles between u finishing on `lane_u` and v being able to start on `lane_v`."""
        if self._comm is None:
            return 0
        c = self._comm(u, v, lane_u, lane_v)
        if type(c) is int and c >= 0:  # the usual answer, without the checks' cost
            return c
        return whole_cycles(c, f"comm({u!r}, {v!r}, {lane_u!r}, {lane_v!r})")

    def mean_cost(self, node: Node) -> float:
        row = self.costs[node]
        return sum(row.values()) / len(row)

    def min_cost(self, node: Node) -> int:
        return self._min_cost[node]

    @property
    def min_costs(self) -> Mapping[Node, int]:
        """Every node's `min_cost`, in program order (read only): the bounds and metrics
        that want them all take this instead of a call per node."""
        return self._min_cost

    def pool_users(self, pool: str) -> list[Node]:
        """The nodes that hold an instance of `pool`, in program order."""
        _, by_pools = self._node_groups()
        return self._in_program_order([ns for key, ns in by_pools.items() if pool in key])

    def confined_to(self, lanes: Iterable[str]) -> list[Node]:
        """The nodes that can run only on `lanes`, in program order."""
        names = set(lanes)
        by_lanes, _ = self._node_groups()
        return self._in_program_order([ns for key, ns in by_lanes.items() if key <= names])

    def _node_groups(self) -> tuple[dict[frozenset, list[Node]], dict[tuple, list[Node]]]:
        """The nodes in program order by the set of lanes that can run them and by the pools
        they hold (a few of each), found once: policies and bounds ask `confined_to` and
        `pool_users` per lane class and pool, each a pass over every node otherwise."""
        groups = self._groups
        if groups is None:
            by_lanes: dict[frozenset, list[Node]] = {}
            by_pools: dict[tuple, list[Node]] = {}
            lane_set: dict[int, frozenset] = {}  # per cost row object (rows are shared)
            for n in self.order:
                row = self.costs[n]
                key = lane_set.get(id(row))
                if key is None:
                    key = lane_set[id(row)] = frozenset(row)
                by_lanes.setdefault(key, []).append(n)
                by_pools.setdefault(self.resources[n], []).append(n)
            groups = self._groups = (by_lanes, by_pools)
        return groups

    def _in_program_order(self, parts: list[list[Node]]) -> list[Node]:
        """The nodes of `parts` (each in program order) in program order."""
        if len(parts) == 1:
            return list(parts[0])
        return list(heapq.merge(*parts, key=self.index.__getitem__))

    def lanes_by_class(self) -> dict[str, set[str]]:
        """Each lane class's lane names."""
        out: dict[str, set[str]] = {}
        for lane in self.lanes:
            out.setdefault(lane.lane_class, set()).add(lane.name)
        return out

    def least_work(self, nodes: Iterable[Node]) -> int:
        """The nodes' costs on their cheapest lanes, summed: a work bound's numerator."""
        return sum(map(self._min_cost.__getitem__, nodes))

    def mean_comm(self, u: Node, v: Node) -> float:
        """Average comm of edge u->v over the pairs of *different* lanes the two can use.

        This is the HEFT paper's mean communication cost: what a transfer costs when one
        happens (the same-lane case is free and is not averaged in).
        """
        if self._comm is None:
            return 0.0
        pairs = [(a, b) for a in self.lanes_for(u) for b in self.lanes_for(v) if a != b]
        if not pairs:
            return 0.0
        return sum(self.comm(u, v, a, b) for a, b in pairs) / len(pairs)

    def hold_end(self, hold: Hold, finish: Mapping[Node, int]) -> int:
        """When `hold` is freed: the last finish of its node and of its readers."""
        end = finish[hold.node]
        for r in hold.readers:
            f = finish[r]
            if f > end:
                end = f
        return end

    def without_order_edges(self) -> SchedulingProblem:
        """The same problem without its order-only edges (``order_edges``): the hardware's.

        Order-only edges are a heuristic's issue order (`pccx_flow.schedule.readahead.
        kv_stream_edges`), not a rule of the hardware, and the lower bounds of
        `pccx_flow.schedule.metrics` ignore them; an exact solver given this problem answers
        the question those bounds are about. Edges marked ``order_only=True`` on the graph
        itself are data of that graph and stay; ``admit`` (the timeline holding KV reads
        back until L2 has room, a heuristic's too) and ``order_capacities`` go. Lanes,
        costs, comm, pools and the other capacities are the same; each hold keeps its
        bytes and those of its readers the graph feeds (a reader only through an order-only
        edge is not a reader of the data). Returns `self` when there are no order-only
        edges or capacities.

        >>> g = nx.DiGraph([("a", "b")]); g.add_node("c")
        >>> p = SchedulingProblem(g, [Lane("x0", "cpu")], {n: {"x0": 1} for n in "abc"},
        ...                       order_edges=[("b", "c")])
        >>> p.succs["b"], p.without_order_edges().succs["b"]
        (('c',), ())
        """
        if not self.order_edges and not self.order_capacities:
            return self
        graph, dropped = self.graph, self.order_capacities
        holds: dict[Node, list[tuple[tuple[Node, ...], dict[str, int]]]] = {}
        for h in self.holds:
            readers = tuple(r for r in h.readers if graph.has_edge(h.node, r))
            row = {c: b for c, b in h.row if c not in dropped}
            holds.setdefault(h.node, []).append((readers, row))
        capacities = {c: b for c, b in self.capacities.items() if c not in dropped}
        return SchedulingProblem(
            graph, self.lanes, self.costs, comm=self._comm, resources=self.resources,
            pools=self.pools, name=self.name, source=self.source,
            capacities=capacities, holds=holds,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.order)

    def __repr__(self) -> str:
        return (
            f"SchedulingProblem({self.name or 'unnamed'}: {len(self.order)} nodes, "
            f"{len(self.lanes)} lanes, pools {self.pools})"
        )


_UNKNOWN_CAPACITY = (
    "node {node!r} has a demand on unknown capacity {cap!r}; declare it in capacities"
)


def check_capacities(
    order: Iterable[Node],
    capacities: Mapping[str, int] | None,
    demands: Mapping[Node, Mapping[str, int]] | None,
) -> tuple[dict[str, int], dict[Node, dict[str, int]]]:
    """Clean capacity resources: ``{name: bytes}`` and ``{node: {name: bytes}}`` (no zeros).

    A capacity resource is memory shared over time (bytes of L2, say), unlike a pool, which
    is held only while a node runs. A node with demand ``d`` on capacity ``c`` allocates
    ``d`` at its start and frees it when the last of itself and its successors finishes: the
    node's output stays resident until every consumer has read it. At every moment the
    allocations alive on ``c`` must sum to at most ``capacities[c]``. A node therefore needs
    its own demand plus its predecessors' while it runs; a demand above the capacity makes
    the problem infeasible, which the timeline reports for the node.
    """
    caps: dict[str, int] = {}
    for cap_name, size in (capacities or {}).items():
        if int(size) != size or size < 0:
            raise ProfileError(f"capacity {cap_name!r} is {size!r}; use an int >= 0 (bytes)")
        caps[str(cap_name)] = int(size)
    dem: dict[Node, dict[str, int]] = {}
    raw = demands or {}
    for n in order:
        row = raw.get(n)
        if not row:
            continue
        clean: dict[str, int] = {}
        for cap_name, d in row.items():
            if cap_name not in caps:
                raise ProfileError(_UNKNOWN_CAPACITY.format(node=n, cap=cap_name))
            if int(d) != d or d < 0:
                raise GraphError(f"node {n!r}: demand {d!r} on {cap_name!r} is not an int >= 0")
            if d:
                clean[str(cap_name)] = int(d)
        if clean:
            dem[n] = clean
    return caps, dem


class Hold(NamedTuple):
    """Bytes a node allocates at its start, freed when it and all of `readers` finished.

    One per output tensor (or per set of outputs with the same readers): a node's scores
    die at their EXP while its 4-byte maximum waits for the end of the head. A named
    tuple, as `pccx_flow.schedule.model.Slot` is: a long-context step has 36k of them.
    """

    node: Node
    readers: tuple[Node, ...]
    row: tuple[tuple[str, int], ...]  # (capacity, bytes), bytes > 0


def _sum_holds(holds: Iterable[Hold]) -> dict[Node, dict[str, int]]:
    """Each node's demand on each capacity: its holds' bytes summed."""
    out: dict[Node, dict[str, int]] = {}
    for h in holds:
        row = out.get(h.node)
        if row is None:
            row = out[h.node] = {}
        for cap, d in h.row:
            row[cap] = row.get(cap, 0) + d
    return out


def _check_holds(problem: SchedulingProblem, holds) -> tuple[Hold, ...]:
    """The problem's holds: as given (readers must be successors), else one per demanding
    node with all its successors as readers (the rule of `check_capacities`)."""
    if holds is None:
        return tuple(
            Hold(n, problem.succs[n], tuple(row.items())) for n, row in problem.demands.items()
        )
    out: list[Hold] = []
    capacities = problem.capacities
    for n in problem.order:
        parts = holds.get(n)
        if not parts:
            continue
        succs = problem.succs[n]
        if len(succs) > 8:  # the final norm's gamma has 513 readers: a set, not a scan per reader
            succs = set(succs)
        for readers, row in parts:
            readers = tuple(readers)
            if len(readers) > 1:
                readers = tuple(dict.fromkeys(readers))
            for r in readers:
                if r not in succs:
                    raise GraphError(f"node {n!r}: hold reader {r!r} is not a successor of it")
            clean = []
            for c, d in row.items():
                if type(d) is not int and int(d) == d:
                    d = int(d)  # a whole float is taken as its int
                if type(d) is not int or d < 0:
                    raise GraphError(f"node {n!r}: hold of {d!r} bytes on {c!r} is not an int >= 0")
                c = c if type(c) is str else str(c)
                if c not in capacities:
                    raise ProfileError(_UNKNOWN_CAPACITY.format(node=n, cap=c))
                if d:
                    clean.append((c, d))
            if clean:
                out.append(Hold(n, readers, tuple(clean)))
    return tuple(out)


def _in_order(nodes: Collection[Node], key: Callable[[Node], int]) -> tuple[Node, ...]:
    """`nodes` sorted by `key` (most nodes have one input or output: no sort)."""
    return tuple(nodes) if len(nodes) < 2 else tuple(sorted(nodes, key=key))


def _with_edges(
    adjacency: dict[Node, tuple[Node, ...]],
    edges: Iterable[tuple[Node, Node]],
    key: Callable[[Node], int],
) -> dict[Node, tuple[Node, ...]]:
    """`adjacency` with ``b`` added to the entry of ``a`` for each edge ``(a, b)``, each
    entry still sorted by `key`; `adjacency` itself when there are none."""
    added: dict[Node, list[Node]] = {}
    for a, b in edges:
        added.setdefault(a, []).append(b)
    if not added:
        return adjacency
    out = dict(adjacency)
    for a, more in added.items():
        out[a] = tuple(sorted((*adjacency[a], *more), key=key))
    return out


def _program_order(
    graph: nx.DiGraph,
    extra: Iterable[tuple[Node, Node]],
    pred_of: Mapping[Node, Collection[Node]],
    succ_of: Mapping[Node, Collection[Node]],
) -> tuple[Node, ...]:
    """The graph's insertion order if it is topological (with the `extra` edges), else the
    closest topological order; `GraphError` naming a node on a cycle if there is none.
    `pred_of` and `succ_of` are the graph's neighbours of each node, in its node order."""
    extra = tuple(extra)
    nodes = list(succ_of)
    pos = {n: i for i, n in enumerate(nodes)}
    at = pos.__getitem__
    succ_pos = [list(map(at, nbrs)) for nbrs in succ_of.values()]
    forward = all(not later or min(later) > i for i, later in enumerate(succ_pos))
    indegree = [len(before) for before in pred_of.values()]
    for u, v in extra:
        i, j = pos[u], pos[v]
        forward = forward and i < j
        succ_pos[i].append(j)
        indegree[j] += 1
    if forward:
        return tuple(nodes)  # every edge points forward: no cycle is possible
    # Kahn's algorithm taking the ready node earliest in insertion order: the same order as
    # nx.lexicographical_topological_sort(graph, key=pos) at a third of its cost
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(nodes[i])
        for j in succ_pos[i]:
            left = indegree[j] - 1
            indegree[j] = left
            if left == 0:
                heapq.heappush(ready, j)
    if len(out) < len(nodes):
        cycle = nx.find_cycle(nx.DiGraph([*graph.edges, *extra]))
        raise GraphError(f"the graph to schedule has a cycle through {cycle[0][0]!r}")
    return tuple(out)


def problem_from_graph(
    graph: nx.DiGraph,
    profile: Any,
    *,
    memory: bool = False,
    read_ahead: Mapping[str, Any] | None = None,
    hardware: bool = False,
) -> SchedulingProblem:
    """The scheduling problem of a decode graph on a hardware profile.

    A node runs on any lane of its ``lane_class`` for `node_cycles` cycles and holds one
    instance of each pool `node_resources` names. Communication is free: every lane reads and
    writes the shared L2, so a value produced on one lane is visible to all. With
    ``memory=True`` the problem also carries the profile's L2 (and SFU reach) as capacities
    and each output tensor's resident bytes as holds (`memory.decode_holds`), the
    order-only edges that issue each stream's KV tile reads one after another
    (`pccx_flow.schedule.readahead.kv_stream_edges`; ``problem.order_edges``, the graph is
    not changed), the reads the timeline holds back until L2 has room
    (``problem.admit``) and a capacity of KV tile slots (`readahead.KV_SLOTS`).
    `read_ahead` names another rule (`readahead.read_ahead_of`;
    `benchmarks/bench_read_ahead.py`, `benchmarks/bench_gap.py`): ``{"rule": "fixed"}``,
    the fixed rules, with their keywords, or the stream rule's keywords. With `hardware`
    no read-ahead rule is applied: the problem `SchedulingProblem.without_order_edges`
    makes of it (the one its lower bounds are about), without building the rule first.
    """
    from pccx_flow.hardware.cost import cycles_of, node_resources

    if hardware and read_ahead is not None:
        raise InputError("a hardware problem has no read-ahead rule: give one or the other")
    if isinstance(profile, str):
        from pccx_flow.hardware.profile import load_profile

        profile = load_profile(profile)
    lanes = [Lane(str(lane_id), str(cls)) for lane_id, cls in profile.lane_ids()]
    by_class: dict[str, list[str]] = {}
    for lane in lanes:
        by_class.setdefault(lane.lane_class, []).append(lane.name)
    costs: dict[Node, dict[str, int]] = {}
    rows: dict[tuple[str, int], dict[str, int]] = {}  # one row object per (class, cycles)
    resources: dict[Node, tuple[str, ...]] = {}
    for n, attrs in graph.nodes(data=True):
        cls = attrs.get("lane_class")
        names = by_class.get(cls)
        if not names:
            raise ProfileError(
                f"node {n!r} needs a {cls!r} lane but profile {profile.name!r} has none; "
                f"add one under [lanes]"
            )
        cycles = cycles_of(n, attrs, profile)
        row = rows.get((cls, cycles))
        if row is None:
            row = rows[(cls, cycles)] = {name: cycles for name in names}
        costs[n] = row
        resources[n] = node_resources(attrs, profile, n)
    capacities = holds = order_edges = admit = slots = None
    if memory:
        from pccx_flow.schedule.memory import L2, decode_capacities, decode_holds
        from pccx_flow.schedule.readahead import KV_SLOTS, read_ahead_of

        capacities = decode_capacities(profile)
        holds = decode_holds(graph, capacities)
        if not hardware:
            order_edges, admit, slots = read_ahead_of(
                graph, read_ahead, l2_bytes=capacities[L2]
            )
        if slots:  # KV tile slots: each read holds one (`readahead.KV_SLOTS`)
            count, nbytes = slots
            capacities[KV_SLOTS] = count * nbytes
            for n in admit or ():  # a read's tile is one tensor: its first (only) hold
                (readers, row), *rest = holds[n]
                holds[n] = [(readers, {**row, KV_SLOTS: nbytes}), *rest]
    return SchedulingProblem(
        graph,
        lanes,
        costs,
        resources=resources,
        pools=dict(profile.pools),
        name=f"{graph.graph.get('config', 'graph')} on {profile.name}",
        source=graph,
        capacities=capacities,
        holds=holds,
        order_edges=order_edges,
        admit=admit,
        order_capacities=(KV_SLOTS,) if slots else (),
    )
