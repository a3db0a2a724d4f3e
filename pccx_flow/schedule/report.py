"""The short summary `pccx-flow schedule` prints: fits an 80-column terminal (a longer line
is wrapped, never cut).

Every time and token rate in it is a model estimate on the named hardware profile, and the
text says so on each line that carries one; no pccx board has ever been timed.
"""

from __future__ import annotations

from pccx_flow.schedule.chains import LANES_SUFFIX, lane_resource

WIDTH = 80
LABEL = 10  # the label column of "size      ...", "makespan  ...", "crit path ..."


def _us(cycles: float, core_hz: float | None) -> str:
    if not core_hz:
        return ""
    us = cycles / core_hz * 1e6
    return f"{us / 1000:,.3f} ms" if us >= 1000 else f"{us:,.2f} µs"


def _rate(tps: float) -> str:
    return f"{tps:,.2f}" if tps < 1e4 else f"{tps:.3g}"


def _gap(x: float) -> str:
    return f"{100 * x:+.1f} %" if abs(x) < 100 else f"x{x + 1:,.0f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _layers(layers: list) -> str:
    """Layer numbers as compact ranges: [0, 1, 2, 5] -> "0-2, 5"."""
    from pccx_flow.graph.check import layer_ranges

    return layer_ranges(layers)


def format_summary(metrics: dict, context: dict | None = None, *, top_lanes: int = 5) -> str:
    """The summary table of one schedule (`metrics` from `schedule_metrics`)."""
    ctx = context or {}
    hz = metrics.get("core_hz")
    est = metrics.get("estimate", "model estimate")
    span = metrics["makespan_cycles"]
    source = "DAG" if "dag" in ctx else "profile"  # `schedule --dag`: the file's own lanes
    lines = [f"pccx-flow schedule: policy {metrics['policy']}, {source} {metrics['profile']}"]
    keys = ("preset", "semantics", "position", "layers")  # "partial": only some layers
    graph_bits = [f"{k} {ctx[k]}" for k in keys if ctx.get(k) is not None]
    if graph_bits:
        lines.append(f"graph     {', '.join(graph_bits)}")
    extra = metrics.get("order_only_edges") or 0
    edges = f"{metrics['edges'] - extra:,} edges"
    if extra:  # `check` counts the graph's edges; these come from the L2 model
        edges += f" + {extra:,} order-only (L2 read-ahead)"
    lines.append(f"size      {metrics['nodes']:,} nodes, {edges}, {metrics['lanes']} lanes")
    if hz and ctx.get("partial"):
        lines.append(f"makespan  {span:,} cycles = {_us(span, hz)} for layers {ctx.get('layers')}")
        lines.append(f"          ({est}, {hz / 1e6:g} MHz core)")
        lines.append("          part of a step only: no tok/s")
    elif hz:
        tps = metrics.get("tokens_per_second")
        lines.append(f"makespan  {span:,} cycles = {_us(span, hz)}/token = {tps:.2f} tok/s")
        lines.append(f"          ({est}, {hz / 1e6:g} MHz core)")
    else:
        lines.append(f"makespan  {span:,} cycles")
    lines.append("")
    bound_head = f"lower bound ({'model estimate' if hz else 'cycles'})"
    lines.append(f"{bound_head:<28}{'cycles':>14}{'tok/s max':>11}  makespan vs bound")
    bounds = metrics["bounds_cycles"]
    for name in sorted(bounds, key=lambda k: -bounds[k]):
        c = bounds[name]
        tps = _rate(hz / c) if hz and c and not ctx.get("partial") else "-"
        gap = _gap(span / c - 1) if c else "-"
        mark = "  <- largest" if name == metrics["largest_bound"] else ""
        lines.append(f"  {name[:26]:<26}{c:>14,}{tps:>11}  {gap}{mark}")
    if any(name.startswith("pool_chain:") for name in bounds):
        lines.append("  (pool_chain: pool work plus the chains around it; see chains.py)")
    if any(name.startswith("capacity_chain:") for name in bounds):
        lines.append("  (capacity_chain: pool_chain plus KV reads L2 cannot hold ahead of use)")
    for name in sorted(bounds):
        if name.startswith("pool_chain:") and name.endswith(LANES_SUFFIX):
            resource = name.removeprefix("pool_chain:")
            cls = resource.removesuffix(LANES_SUFFIX)
            note = f"the {cls} lanes as a resource, as a pool of their number"
            lines.append(f"  ({resource}: {note})")
    lines += gap_split_lines(bounds, span)
    if metrics.get("below_bounds"):
        lines.append(
            f"  note: makespan is below {', '.join(metrics['below_bounds'])}: the scheduler"
        )
        lines.append("  does not serialise those (they are bounds only in the cost model)")
    slr = metrics.get("schedule_length_ratio")
    if slr is not None:
        lines.append(f"  schedule length ratio {slr:.2f} (makespan / min-cost critical path)")
    lines.append("")
    util = sorted(metrics["utilisation"].items(), key=lambda kv: -kv[1])[:top_lanes]
    lines.append("busiest   " + "  ".join(f"{lane} {_pct(u)}" for lane, u in util))
    for pool, cycles in (metrics.get("pool_occupancy") or {}).items():
        if span and any(cycles.values()):
            full = max(cycles)
            lines.append(
                f"{pool}: all {full} busy {_pct(cycles[full] / span)}, "
                f"none busy {_pct(cycles[0] / span)} of the makespan"
            )
    for cap in ("l2", "l2_reach"):
        size = metrics.get(f"{cap}_bytes")
        if size:
            peak, mean = metrics[f"{cap}_peak_bytes"], metrics[f"{cap}_mean_bytes"]
            lines.append(
                f"{cap:<9} peak {peak / 1024:,.1f} KiB ({_pct(peak / size)} of "
                f"{size / 1024:,.0f} KiB), mean {mean / 1024:,.1f} KiB"
            )
    if metrics.get("l2_bytes"):
        wait = metrics.get("memory_wait_cycles", 0)
        extra = f" = {_us(wait, hz)}" if hz and wait else ""
        lines.append(
            f"          {metrics.get('memory_wait_nodes', 0):,} nodes waited for memory, "
            f"{wait:,} cycles in all{extra}"
        )
        held = metrics.get("memory_wait_admitted", 0)
        if held:
            lines.append(f"          ({held:,} of them KV reads held back until L2 had room)")
    cp = metrics.get("critical_path") or {}
    if cp.get("nodes"):
        lane_part = ", ".join(list(cp["lanes"])[:3])
        blocked = cp.get("blocked_cycles") or {}
        # causes under 0.05 % of the makespan print as 0.0 %: left out, the line stays whole
        shares = {k: _pct(v / span) for k, v in sorted(blocked.items()) if span}
        text = ", ".join(
            f"{k if k == 'memory' else k + 's'} {p}" for k, p in shares.items() if p != _pct(0)
        )
        lines.append(f"crit path {len(cp['nodes']):,} nodes, mostly on {lane_part}")
        lines.append(f"          ready but blocked by: {text or 'nothing'} (of the makespan)")
        room = [
            st["cause"].removeprefix("memory:")
            for st in cp.get("steps", ())
            if st["cause"].startswith("memory:")
        ]
        if room:
            caps = ", ".join(sorted(set(room)))
            lines.append(f"          {len(room):,} of them waited until room on {caps} was freed")
    lo = metrics.get("laurel_overlap")
    if lo and lo.get("mean") is not None:
        worst = min(lo["per_layer"], key=lambda k: lo["per_layer"][k])
        lines.append(
            f"LAuReL    runs beside attention {_pct(lo['mean'])} of its time "
            f"(worst layer {worst}: {_pct(lo['min'])})"
        )
    ps = metrics.get("ple_slack")
    if ps and ps.get("min") is not None:
        extra = f" = {_us(ps['min'], hz)}" if hz else ""
        lines.append(
            f"PLE slack min {ps['min']:,} cycles{extra}; zero on layers: "
            f"{_layers(ps['zero_layers'])}"
        )
        if ps.get("dag_zero_layers"):
            lines.append(
                "          (on the graph's own critical path in layers "
                f"{_layers(ps['dag_zero_layers'])})"
            )
    if hz:
        lines.append("")
        lines.append(f"All times are model estimates on profile {metrics['profile']};")
        lines.append("no pccx board has been timed.")
    return "\n".join(_fit(line) for line in lines)


def _fit(line: str) -> str:
    """`line` as lines of at most `WIDTH` columns, broken after a comma where it can be,
    else between two columns (two spaces), else at a space; what follows is indented under
    the value column (a line that starts with a `LABEL`-wide label) or two columns past the
    line's own indent. Nothing is cut: a word longer than the room stays whole (a cut line
    once read "9 l..." for "9 lanes")."""
    if len(line) <= WIDTH:
        return line
    lead = len(line) - len(line.lstrip(" "))
    indent = " " * (lead + 2 if lead else LABEL)
    out, rest, floor = [], line, lead or LABEL
    while len(rest) > WIDTH:
        comma = rest.rfind(", ", floor, WIDTH + 1)  # the comma ends the line
        if comma > floor:
            out.append(rest[: comma + 1])
            rest = indent + rest[comma + 2 :]
        else:  # between two columns ("gemv0 94.8 %  gemv1 ..."), else between two words
            space = rest.rfind("  ", floor + 1, WIDTH)
            if space < 0:
                space = rest.rfind(" ", floor + 1, WIDTH + 1)
            if space < 0:  # a word longer than the room: whole, the rest wrapped after it
                space = rest.find(" ", WIDTH + 1)
                if space < 0:
                    break
            out.append(rest[:space].rstrip())
            rest = indent + rest[space + 1 :].lstrip()
        floor = len(indent)
    return "\n".join([*out, rest])


def format_policy_list(rows: list[tuple[str, str, str]], default: str) -> str:
    """One line per policy for ``--list``: name, description, a mark for plugins."""
    width = max((len(r[0]) for r in rows), default=0)
    out = []
    for name, origin, desc in rows:
        tag = "" if origin == "built-in" else " [plugin]"
        mark = " (default)" if name == default and "(default)" not in desc else ""
        room = WIDTH - width - 2 - len(tag) - len(mark)
        if len(desc) > room:
            desc = desc[: max(room - 3, 0)] + "..."
        out.append(f"{name:<{width}}  {desc}{mark}{tag}")
    return "\n".join(out)


def gap_split_lines(bounds: dict[str, int], span: int) -> list[str]:
    """How the makespan's gap to each pool's work bound (and each lane class's that has
    chain bounds) splits: the idle time `pool_chain` proves every schedule must leave in
    that resource (chains of other work between its users), the further idle time
    `capacity_chain` proves (reads L2 cannot hold ahead of use), what a larger bound of
    another resource proves (the largest bound the makespan is not below: on
    `v002-as-built` the GEMV lanes' chain is above the weight ports'), and the rest, which
    no bound explains (the policy's choices)."""
    valid = {k: v for k, v in bounds.items() if v <= span}  # a bound this schedule keeps
    top = max(valid, key=valid.__getitem__, default=None)  # the first of equal ones
    out = []
    for name, work in sorted(bounds.items()):
        kind, _, what = name.partition(":")
        if kind not in ("pool", "lane_class") or not work:
            continue
        # a lane class's chains are named after it as a resource (`chains.chain_resources`)
        pool = what if kind == "pool" else lane_resource(what)
        chain = bounds.get(f"pool_chain:{pool}")
        if chain is None or span <= work:
            continue
        forced = max(0, min(chain, span) - work)
        own = max(work, min(chain, span))
        capacity = max(0, min(bounds.get(f"capacity_chain:{pool}", 0), span) - own)
        own += capacity
        other = valid[top] - own if top is not None and valid[top] > own else 0
        parts = [(capacity, "forced by L2 capacity", "capacity_chain"),
                 (other, "forced by a larger bound", top)]  # fmt: skip
        out.append(f"  gap to {name} {span - work:,} cycles = {forced:,} forced idle")
        proof = "pool_chain"
        for cycles, what_forced, by in parts:
            if cycles:
                out.append(f"    ({proof} proves it) + {cycles:,} {what_forced}")
                proof = by
        rest = f"{span - own - other:,} no bound explains"
        out.append(f"    ({proof} proves it) + {rest}{'' if capacity else ' (policy, L2)'}")
    return out
