"""How good a schedule is, and where its time goes.

Everything here reads a validated `Schedule` and its `SchedulingProblem` and returns plain
data (dicts of numbers and names) that the report, the JSON output and the benchmark share:

- makespan in cycles, and in µs and tok/s at the profile's clock: **model estimates** on the
  named profile, never measurements;
- every lower bound (`pccx_flow.bounds` for a decode graph, the problem's own otherwise,
  plus the chain bounds of `pccx_flow.schedule.chains`), the largest one, and the gap of
  the makespan to it; the gap to the largest bound without pool_chain is kept too
  (``reference_bound``);
- the schedule length ratio: makespan over the min-cost critical path;
- per-lane utilisation, and per pool the cycles with 0, 1, ... instances busy;
- the schedule's own critical path, walked back from the last node to finish through whatever
  fixed each start (an input arriving, the lane or a pool instance freeing up), with the
  cycles spent waiting for lanes and pools rather than for data;
- LAuReL overlap: per layer, the share of the ``laurel`` block's busy time that runs while the
  same layer's ``attn`` block is running (spec 003 §1: LAuReL runs in parallel to attention);
- PLE slack: per ``ple_mix`` node, how much later it could start without growing the makespan,
  keeping every lane's and pool instance's order (spec 003 §2: PLE is off the critical path).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from math import ceil
from operator import attrgetter
from typing import Any

from pccx_flow.schedule.chains import POOL_CHAIN_HOPS, chain_bounds
from pccx_flow.schedule.model import Schedule, Slot
from pccx_flow.schedule.precedence import Node, hardware_precedence, order_only_edges
from pccx_flow.schedule.problem import SchedulingProblem, pool_instance_names


def estimate_label(profile: Any) -> str:
    """The words every printed time carries."""
    name = getattr(profile, "name", profile)
    return f"model estimate, profile {name}"


# --- bounds --------------------------------------------------------------------------------


def least_finishes(problem: SchedulingProblem) -> dict[Node, int]:
    """Each node's earliest finish over the data edges (`hardware_precedence`) with every
    node at its cheapest lane and free communication; kept on the problem (the critical
    path bound and the DAG's slack both walk it)."""
    cached = getattr(problem, "_least_finishes", None)
    if cached is None:
        preds, _ = hardware_precedence(problem)
        cached = problem._least_finishes = {}
        cost = problem.min_cost
        for n in problem.order:
            start = 0
            for p in preds[n]:
                if cached[p] > start:
                    start = cached[p]
            cached[n] = start + cost(n)
    return cached


def min_cost_critical_path(problem: SchedulingProblem) -> int:
    """Longest path over the data edges (`hardware_precedence`) with every node at its
    cheapest lane and free communication."""
    return max(least_finishes(problem).values(), default=0)


def problem_bounds(problem: SchedulingProblem) -> dict[str, int]:
    """Lower bounds any problem has: critical path, lane-set work, pool work.

    For each distinct set S of lanes some node can use, every node confined to S must run on
    S, so ceil(sum of their min costs / |S|) bounds the makespan; a pool with k instances
    likewise bounds by the work of its users over k.
    """
    bounds = {"critical_path": min_cost_critical_path(problem)}
    lane_sets = {frozenset(problem.costs[n]) for n in problem.order}
    for lanes in sorted(lane_sets, key=lambda s: sorted(s)):
        work = problem.least_work(problem.confined_to(lanes))
        classes = sorted({problem.lane_by_name[ln].lane_class for ln in lanes})
        name = f"lanes:{'+'.join(classes)}" + (f"[{len(lanes)}]" if len(lanes) > 1 else "")
        if len(classes) == 1 and lanes == {
            ln.name for ln in problem.lanes if ln.lane_class == classes[0]
        }:
            name = f"lane_class:{classes[0]}"
        bounds[name] = max(bounds.get(name, 0), ceil(work / len(lanes)))
    for pool, count in problem.pools.items():
        work = problem.least_work(problem.pool_users(pool))
        if work:
            bounds[f"pool:{pool}"] = ceil(work / count)
    return bounds


def residency_bounds(problem: SchedulingProblem) -> dict[str, int]:
    """A lower bound per capacity from the byte-cycles its demands must spend resident.

    Claim: for every valid schedule of length T and each capacity c of size C,
    ``T >= ceil(sum_h d_h * (m_n + max_{s in readers(h)} m_s) / C)`` over the holds h of
    the problem (`SchedulingProblem.holds`: bytes d_h of node n freed when n and the hold's
    readers, all successors of n, finished), m_x the least cost of x on any lane (the max
    over no readers is 0).

    Proof: h's bytes are resident from start(n) to the last finish of n and its readers
    (the problem's rule, checked by the validator). n runs at least m_n, and every reader
    s starts no earlier than finish(n) and runs at least m_s, so each finishes no earlier
    than start(n) + m_n + m_s: h is resident for at least m_n + max_s m_s cycles, all
    within [0, T]. The occupancy of c is at most C at every moment, so its integral over
    [0, T] - the sum of d_h times h's residency - is at most C * T. Dividing by C gives
    the claim (T is an integer, hence the ceiling).

    It adds a constraint to the problem and removes none, so every bound without memory
    stays valid; this one binds when the capacity is small against long-lived bytes (KV
    tiles that stream in while their scores run). A capacity a heuristic adds
    (``problem.order_capacities``: the KV tile slots) has none: it is not the hardware's.
    """
    out: dict[str, int] = {}
    for cap, size in problem.capacities.items():
        if cap in problem.order_capacities:  # a heuristic's, not the hardware's
            continue
        total = 0
        for hold in problem.holds:
            d = dict(hold.row).get(cap, 0)
            if d:
                after = max((problem.min_cost(s) for s in hold.readers), default=0)
                total += d * (problem.min_cost(hold.node) + after)
        if total and size:
            out[f"residency:{cap}"] = ceil(total / size)
    return out


def graph_bounds(problem: SchedulingProblem, profile: Any) -> dict[str, int] | None:
    """`pccx_flow.bounds.lower_bounds` of the decode graph behind `problem`, flattened."""
    if problem.source is None or profile is None or isinstance(profile, str):
        return None
    from pccx_flow.bounds import lower_bounds

    # the problem's costs are the graph's cycles on this profile (`problem_from_graph`)
    # and its order is topological: neither is computed twice
    cycles = problem.min_costs
    lb = lower_bounds(problem.source, profile, cycles=cycles, order=problem.order)
    out = {"critical_path": int(lb.critical_path_cycles)}
    for field, value in lb.to_dict().items():  # lane_class_cycles, pool_cycles, ...
        if field.endswith("_cycles") and isinstance(value, dict):
            prefix = field[: -len("_cycles")]
            out.update({f"{prefix}:{k}": int(v) for k, v in value.items()})
    out.setdefault(lb.largest_name, int(lb.largest_cycles))
    return out


# --- the schedule's own critical path --------------------------------------------------------


def schedule_critical_path(schedule: Schedule, problem: SchedulingProblem) -> dict:
    """Walk back from the last node to finish through whatever determined each start.

    At each node the cause of its start time is, in this order of preference: an input from a
    predecessor that arrived exactly then (``data``), the previous node on the same lane
    finishing exactly then (``lane``), the previous holder of one of its pool instances
    (``pool:<instance>``), or one node that was both (``lane+pool:<instance>``: a queue of
    port-bound GEMVs, where a free lane alone would not have helped), or, for a node the
    timeline held back until a capacity had room for it (``schedule.memory_wait``), the
    node whose finish then freed a hold on a capacity it demands, the hold's last reader or
    its holder (``memory:<capacities>``: at long context much of a step's path runs through
    such waits for L2). A node of no length holds no lane or pool, so it is never the
    ``lane`` or ``pool`` cause. A start with no such cause (time 0, or a policy's own delay
    such as in-order issue) ends the walk.

    ``waited_cycles`` of a step is the time between its inputs being ready and its start.
    Those waits overlap one another along a chain of nodes queued on one lane, so the totals
    in ``blocked_cycles`` count only the part of the path's own timeline during which the
    next node was ready but blocked: the overlap of its wait with the node it waited for (by
    cause: ``lane``, ``pool``, ``lane+pool``, ``memory``, and ``delay`` before the first
    node). Their sum is at most the makespan.
    """
    slots = schedule.slots
    if not slots:
        return {"nodes": [], "steps": [], "lanes": {}, "blocked_cycles": {}}
    ends_on_lane: dict[tuple[str, int], list[Node]] = defaultdict(list)
    ends_on_inst: dict[tuple[str, int], list[Node]] = defaultdict(list)
    for n, s in slots.items():
        ends_on_lane[(s.lane, s.finish)].append(n)
        for inst in s.resources:
            ends_on_inst[(inst, s.finish)].append(n)
    index = problem.index
    held_back = getattr(schedule, "memory_wait", None) or {}
    lanes = [lane.name for lane in schedule.lanes]
    last = max(slots.values(), key=lambda s: (s.finish, index[s.node])).node
    comm = problem.comm if problem.has_comm else None
    steps, seen = [], set()
    node: Node | None = last
    while node is not None and node not in seen:
        seen.add(node)
        s = slots[node]
        data_ready, from_pred = 0, None
        for p in problem.preds[node]:
            ps = slots[p]
            t = ps.finish if comm is None else ps.finish + comm(p, node, ps.lane, s.lane)
            if t > data_ready or (t == data_ready and from_pred is None):
                data_ready, from_pred = t, p
        cause, prev = "start", None
        if s.start > 0:
            if from_pred is not None and data_ready == s.start:
                cause, prev = "data", from_pred
            else:
                # a node of no length blocks no lane or pool (`BusyIntervals`), and one at
                # this start may come after this node (its successor, say): not a cause
                start = s.start
                on_lane = [
                    m for m in ends_on_lane.get((s.lane, start), ()) if slots[m].start < start
                ]
                lane_prev = min(on_lane, key=index.__getitem__) if on_lane else None
                pool_prev, pool_inst = None, ""
                for inst in s.resources:
                    holders = [
                        m for m in ends_on_inst.get((inst, start), ()) if slots[m].start < start
                    ]
                    if holders:
                        pool_prev, pool_inst = min(holders, key=index.__getitem__), inst
                        break
                if lane_prev is not None and lane_prev == pool_prev:
                    # the node before it on its lane also held its pool instance: both bind
                    cause, prev = f"lane+pool:{pool_inst}", lane_prev
                elif lane_prev is not None:
                    cause, prev = "lane", lane_prev
                elif pool_prev is not None:
                    cause, prev = f"pool:{pool_inst}", pool_prev
                elif node in held_back:
                    done = [m for lane in lanes for m in ends_on_lane.get((lane, start), ())]
                    cause, prev = _room_made(node, start, done, slots, problem)
                else:
                    cause = "delay"
        wait = s.start - data_ready
        steps.append(
            {
                "node": node,
                "lane": s.lane,
                "start": s.start,
                "finish": s.finish,
                "cause": cause,
                "waited_cycles": wait,
            }
        )
        node = prev
    steps.reverse()
    blocked: dict[str, int] = defaultdict(int)
    lanes: dict[str, int] = defaultdict(int)
    for k, st in enumerate(steps):
        lanes[st["lane"]] += st["finish"] - st["start"]
        kind = st["cause"].split(":")[0]
        if st["waited_cycles"] <= 0 or kind in ("data", "start"):
            continue
        if k == 0:
            blocked[kind] += min(st["waited_cycles"], st["start"])
        else:
            before = steps[k - 1]
            blocked[kind] += min(st["waited_cycles"], before["finish"] - before["start"])
    return {
        "nodes": [st["node"] for st in steps],
        "steps": steps,
        "lanes": dict(sorted(lanes.items(), key=lambda kv: -kv[1])),
        "blocked_cycles": dict(blocked),
    }


def _room_made(
    node: Node,
    start: int,
    done: Iterable[Node],
    slots: Mapping[Node, Slot],
    problem: SchedulingProblem,
) -> tuple[str, Node | None]:
    """(cause, previous node) of a start the timeline held back for room: a hold on
    capacities `node` demands (all of them named: which one bound is not recorded) freed at
    `start` by the last of its node and readers to finish, one of `done` (the nodes that
    finish then; the earliest in program order of several), or ``("delay", None)``."""
    wants = problem.demands.get(node, {})
    index, holds = problem.index, problem.holds
    # `node` itself, and when it has no length its successors may be among `done` too: the
    # nodes of no length at `start` are then left out (a node with a length has none there)
    no_length = slots[node].finish == start
    best: tuple[int, str, Node] | None = None
    for m in done:
        if m == node or (no_length and slots[m].start >= start):
            continue
        if best is not None and index[m] >= best[0]:
            continue
        for i in (*problem.holds_of.get(m, ()), *problem.holds_read_by.get(m, ())):
            h = holds[i]
            caps = "+".join(c for c, _ in h.row if c in wants)
            if caps and all(slots[r].finish <= start for r in (h.node, *h.readers)):
                best = (index[m], caps, m)  # m finishes at `start`: it freed the hold
                break
    return ("delay", None) if best is None else (f"memory:{best[1]}", best[2])


# --- LAuReL overlap and PLE slack ------------------------------------------------------------


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, f in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], f)
        else:
            out.append([s, f])
    return [(s, f) for s, f in out]


def _intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _by_layer_block(schedule: Schedule, problem: SchedulingProblem, block: str) -> dict:
    """The slots of `block`'s nodes, by layer (-1: none given)."""
    by_block = getattr(problem, "_nodes_by_block", None)
    if by_block is None:  # one pass over the graph's nodes for every block asked (three)
        by_block = defaultdict(list)
        for n, a in problem.graph.nodes(data=True):
            by_block[a.get("block")].append((n, a.get("layer", -1)))
        problem._nodes_by_block = by_block
    out: dict[int, list[Slot]] = defaultdict(list)
    slots = schedule.slots
    for n, layer in by_block.get(block, ()):
        if n in slots:
            out[layer].append(slots[n])
    return out


def laurel_overlap(schedule: Schedule, problem: SchedulingProblem) -> dict:
    """Per layer, the share of LAuReL busy time that overlaps the layer's attention block."""
    laurel = _by_layer_block(schedule, problem, "laurel")
    attn = _by_layer_block(schedule, problem, "attn")
    per_layer = {}
    for layer in sorted(laurel):
        busy = _union([(s.start, s.finish) for s in laurel[layer]])
        total = sum(f - s for s, f in busy)
        if total == 0:
            continue
        attn_busy = _union([(s.start, s.finish) for s in attn.get(layer, [])])
        both = _intersection_length(busy, attn_busy)
        per_layer[layer] = both / total
    shares = list(per_layer.values())
    return {
        "per_layer": per_layer,
        "mean": sum(shares) / len(shares) if shares else None,
        "min": min(shares) if shares else None,
    }


def latest_starts(schedule: Schedule, problem: SchedulingProblem) -> dict[Node, int]:
    """Latest start of every node that keeps the makespan, the lane orders and pool orders.

    The schedule's own order on each lane and pool instance is kept as extra edges; the latest
    finish of a node is the earliest latest start among its successors (minus comm) and among
    the next node on its lane and on each pool instance it holds.
    """
    slots = schedule.slots
    # by start and finish, ties in program order (a stable sort of the program order)
    order = sorted(map(slots.__getitem__, problem.order), key=attrgetter("start", "finish"))
    # the next node on the same lane and on each pool instance held (lanes and instances
    # have distinct names on a problem, but are kept apart anyway)
    next_on: dict[Node, list[Node]] = defaultdict(list)
    last_on_lane: dict[str, Node] = {}
    last_on_inst: dict[str, Node] = {}
    for s in order:
        n = s.node
        prev = last_on_lane.get(s.lane)
        if prev is not None:
            next_on[prev].append(n)
        last_on_lane[s.lane] = n
        for inst in s.resources:
            prev = last_on_inst.get(inst)
            if prev is not None:
                next_on[prev].append(n)
            last_on_inst[inst] = n
    makespan = schedule.makespan
    comm = problem.comm if problem.has_comm else None
    succs = problem.succs
    latest: dict[Node, int] = {}
    for s in reversed(order):
        n = s.node
        lf = makespan
        for succ in succs[n]:
            t = latest[succ]
            if comm is not None:
                t -= comm(n, succ, s.lane, slots[succ].lane)
            if t < lf:
                lf = t
        for succ in next_on.get(n, ()):
            if latest[succ] < lf:
                lf = latest[succ]
        latest[n] = lf - (s.finish - s.start)
    return latest


def dag_slack(problem: SchedulingProblem) -> dict[Node, int]:
    """Slack of every node in the DAG alone: unlimited lanes, cheapest costs, free comm.

    Zero means the node is on a min-cost critical path of the graph itself, so no schedule on
    any number of lanes can give it room; compare with the schedule's own slack. The graph
    is its data edges (`hardware_precedence`), as for `min_cost_critical_path`: an L2
    heuristic's order-only edge is a choice of the schedule, not of the graph.
    """
    _, succs = hardware_precedence(problem)
    cost = problem.min_costs
    finish = least_finishes(problem)  # earliest
    end = max(finish.values(), default=0)
    start: dict[Node, int] = {}  # latest
    for n in reversed(problem.order):
        t = end
        for q in succs[n]:
            if start[q] < t:
                t = start[q]
        start[n] = t - cost[n]
    return {n: start[n] - finish[n] + cost[n] for n in problem.order}


def ple_slack(schedule: Schedule, problem: SchedulingProblem, latest: dict | None = None) -> dict:
    """Slack of the ``ple_mix`` nodes: per layer the minimum, overall minimum, zero layers.

    ``per_layer`` keeps the schedule's lane and pool orders (`latest_starts`); ``dag_per_layer``
    is the same minimum in the graph alone (`dag_slack`), which says whether the graph or the
    schedule put PLE on the critical path.
    """
    mix = _by_layer_block(schedule, problem, "ple_mix")
    if not mix:
        return {"per_layer": {}, "min": None, "zero_layers": [], "dag_per_layer": {}}
    latest = latest if latest is not None else latest_starts(schedule, problem)
    in_dag = dag_slack(problem)
    layers = sorted(mix.items())
    per_layer = {layer: min(latest[s.node] - s.start for s in slots) for layer, slots in layers}
    dag_per_layer = {layer: min(in_dag[s.node] for s in slots) for layer, slots in layers}
    return {
        "per_layer": per_layer,
        "min": min(per_layer.values()),
        "zero_layers": [layer for layer, v in per_layer.items() if v <= 0],
        "dag_per_layer": dag_per_layer,
        "dag_zero_layers": [layer for layer, v in dag_per_layer.items() if v <= 0],
    }


def pool_busy(schedule: Schedule, pools: Mapping[str, int]) -> dict[str, list[tuple[int, int]]]:
    """Per pool, how many of its instances are busy over time: ``[(t, busy from t on), ...]``.

    The series starts at cycle 0 and lists only the times where the count changes (the
    Gantt chart's weight-port row draws it). `pools` maps pool name to instance count, as
    `SchedulingProblem.pools` and `Profile.pools` do; slots name the instances they hold.
    """
    of_instance = pool_instance_names(pools)
    out = {}
    for pool in pools:
        delta: dict[int, int] = defaultdict(int)
        for slot in schedule.slots.values():
            held = sum(of_instance.get(i) == pool for i in slot.resources)
            if held and slot.finish > slot.start:
                delta[slot.start] += held
                delta[slot.finish] -= held
        series = [(0, 0)]
        for t in sorted(delta):
            if delta[t]:
                busy = series[-1][1] + delta[t]
                series[-1:] = [(t, busy)] if t == series[-1][0] else [series[-1], (t, busy)]
        out[pool] = series
    return out


def pool_occupancy(schedule: Schedule, problem: SchedulingProblem) -> dict[str, dict[int, int]]:
    """Per pool, cycles of the makespan with 0, 1, ..., count instances busy.

    When the largest bound is a pool's (the weight ports on pccx), the cycles with fewer than
    all instances busy are exactly where the makespan loses to that bound.
    """
    out = {}
    span = schedule.makespan
    for pool, series in pool_busy(schedule, problem.pools).items():
        count = problem.pools[pool]
        cycles = dict.fromkeys(range(count + 1), 0)
        for (t, busy), (end, _) in zip(series, [*series[1:], (span, 0)], strict=True):
            cycles[min(busy, count)] += end - t
        out[pool] = cycles
    return out


# --- everything together ---------------------------------------------------------------------


def utilisation(schedule: Schedule) -> dict[str, float]:
    """Busy share of the makespan per lane, in lane order."""
    span = schedule.makespan
    busy: dict[str, int] = {lane.name: 0 for lane in schedule.lanes}
    for s in schedule.slots.values():
        busy[s.lane] = busy.get(s.lane, 0) + s.finish - s.start
    return {lane: (b / span if span else 0.0) for lane, b in busy.items()}


def memory_metrics(schedule: Schedule, problem: SchedulingProblem) -> dict[str, Any]:
    """Per capacity (``l2``, ``l2_reach``): size, peak and time-mean bytes; memory waits.

    Keys are ``<capacity>_bytes``, ``<capacity>_peak_bytes``, ``<capacity>_mean_bytes``
    (over the makespan), plus ``memory_wait_cycles`` (sum over nodes of the cycles a node
    waited for room after its inputs were ready, as the timeline recorded),
    ``memory_wait_nodes`` and ``memory_wait_admitted``, how many of those are nodes the
    timeline holds back until there is room (``problem.admit``: KV reads issued as far
    ahead as L2 allows, whose waits are the rule at work). Empty when the problem models
    no capacity.
    """
    from pccx_flow.schedule.memory import occupancies, occupancy_stats

    if not problem.capacities:
        return {}
    out: dict[str, Any] = {}
    series = occupancies(schedule, problem, problem.capacities, reuse=True)  # validated
    span = schedule.makespan  # a pass over every slot: asked once
    for cap, size in problem.capacities.items():
        stats = occupancy_stats(series[cap], span)
        out[f"{cap}_bytes"] = size
        out[f"{cap}_peak_bytes"] = stats["peak_bytes"]
        out[f"{cap}_mean_bytes"] = stats["mean_bytes"]
    out["memory_wait_cycles"] = sum(schedule.memory_wait.values())
    out["memory_wait_nodes"] = len(schedule.memory_wait)
    out["memory_wait_admitted"] = sum(n in problem.admit for n in schedule.memory_wait)
    return out


def step_chain_bounds(problem: SchedulingProblem) -> dict[str, int]:
    """The chain bounds `step_bounds` reports (`chain_bounds`, with the capacity variant
    when the problem has capacities): most of its time on a long-context step."""
    return chain_bounds(problem, POOL_CHAIN_HOPS, capacity=bool(problem.capacities))


def step_other_bounds(problem: SchedulingProblem, profile: Any = None) -> dict[str, Any]:
    """The rest of `step_bounds`, as plain JSON-able data: the graph's bounds
    (`pccx_flow.bounds`, or the problem's when there is no graph behind it), which of them
    they came from, and the residency bounds."""
    bounds = graph_bounds(problem, profile)
    source = "pccx_flow.bounds"
    if bounds is None:
        bounds, source = problem_bounds(problem), "problem"
    return {"bounds": bounds, "source": source, "residency": residency_bounds(problem)}


def step_bounds(
    problem: SchedulingProblem,
    profile: Any = None,
    *,
    chains: dict[str, int] | None = None,
    others: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every lower bound of a problem, the largest, and the largest of `pccx_flow.bounds`.

    One function for `schedule`'s summary and `check`, so both name the same binding bound.
    `chains` (`step_chain_bounds`) and `others` (`step_other_bounds`) of the same problem
    and profile are taken as given when computed elsewhere
    (`pccx_flow.schedule.bounds_beside`).
    """
    if others is None:
        others = step_other_bounds(problem, profile)
    if chains is None:
        chains = step_chain_bounds(problem)
    own = others["bounds"]
    bounds = {**own, **chains, **others["residency"]}
    return {
        "bounds_cycles": bounds,
        "bounds_source": others["source"],
        "largest_bound": max(bounds, key=lambda k: bounds[k]),
        "reference_bound": max(own, key=lambda k: own[k]),
    }


def schedule_metrics(
    schedule: Schedule,
    problem: SchedulingProblem,
    profile: Any = None,
    *,
    bounds: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
) -> dict:
    """Every metric of the module docstring as plain, JSON-compatible data.

    `bounds` is `step_bounds` of the same problem and profile when the caller has it
    already, or a function returning it: called last, after every other metric, so bounds
    computed in another process while the policy ran (`pccx_flow.schedule.bounds_beside`)
    have the time these metrics take to arrive."""
    span = schedule.makespan
    cp_min = min_cost_critical_path(problem)
    busy, pools = utilisation(schedule), pool_occupancy(schedule, problem)
    memory = memory_metrics(schedule, problem)
    critical = schedule_critical_path(schedule, problem)
    blocks = {}
    if any("block" in a for _, a in problem.graph.nodes(data=True)):
        blocks = {
            "laurel_overlap": laurel_overlap(schedule, problem),
            "ple_slack": ple_slack(schedule, problem),
        }
    sb = bounds() if callable(bounds) else bounds
    if sb is None:
        sb = step_bounds(problem, profile)
    bounds, bound_source = sb["bounds_cycles"], sb["bounds_source"]
    reference_name, largest_name = sb["reference_bound"], sb["largest_bound"]
    reference = bounds[reference_name]
    largest = bounds[largest_name]
    out: dict[str, Any] = {
        "policy": schedule.policy,
        "profile": schedule.profile,
        "nodes": len(problem),
        # the graph's edges counted from the problem's lists (networkx sums every degree)
        "edges": sum(map(len, problem.graph_succs.values())) + len(problem.order_edges),
        # edges the scheduler added for L2 (KV read-ahead), not data: `check` counts none
        "order_only_edges": len(order_only_edges(problem)),
        "lanes": len(problem.lanes),
        "makespan_cycles": span,
        "bounds_cycles": bounds,
        "bounds_source": bound_source,
        "largest_bound": largest_name,
        "largest_bound_cycles": largest,
        "gap_to_largest_bound": (span / largest - 1.0) if largest else None,
        # the largest of the bounds from `bounds_source` alone (without pool_chain)
        "reference_bound": reference_name,
        "reference_bound_cycles": reference,
        "gap_to_reference_bound": (span / reference - 1.0) if reference else None,
        "below_bounds": sorted(k for k, v in bounds.items() if span < v),
        "schedule_length_ratio": span / cp_min if cp_min else None,
        "utilisation": busy,
        "pool_occupancy": pools,
        **memory,
    }
    core_hz = getattr(profile, "core_hz", None)
    if core_hz:
        out["estimate"] = estimate_label(profile)
        out["core_hz"] = float(core_hz)
        out["makespan_us"] = span / core_hz * 1e6
        out["tokens_per_second"] = core_hz / span if span else None
        out["largest_bound_tokens_per_second"] = core_hz / largest if largest else None
    out["critical_path"] = critical
    out.update(blocks)
    return out
