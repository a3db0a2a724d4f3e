"""The cost model: how many core cycles one DAG node occupies its lane, on one profile.

Every cost is a model estimate: pccx has never measured a per-instruction cycle count on a
board (``pccx-v002.md``). The formulas below are the simplest ones the stated numbers support;
each input comes from the profile, whose TOML file tags it spec / rtl / board / derived /
assumed. All arithmetic is exact (integers and fractions of the profile's decimal numbers)
and rounded up to whole core cycles, so a cost never depends on float rounding and is always
at least one cycle.

``gemv``  A GEMV tile runs on one lane and streams its weights through one weight port::

              max(macs / gemv.macs_per_cycle,
                  weight_bytes / gemv.port_bytes_per_axi_clock * core_hz / axi_hz)
              + gemv.latency_cycles

          The MAC rate (32 MAC/clk, spec) and the port width (128 bit per AXI clock, spec)
          race; for INT4 batch-1 decode the port wins on v002-spec (a byte holds 2 weights, and
          16 B per AXI clock at 250 MHz is 12.8 weights per 400 MHz core clock).
``gemm``  The same with the systolic array's rate and its two ports HP0 + HP1 together.
``sfu``   A CVO node of N elements is ceil(N / sfu.max_elements) instructions (one
          instruction takes at most 2,048 elements; the graph splits longer vectors, and a
          node that did not is costed as the split it stands for). Each instruction costs
          ``rate * n`` (rounded up) plus its function's pipeline latency, where the rate is
          the L2-fed bridge rate (≈ 3.1 cycles per element, REDUCE_SUM ≈ 2.1; derived from
          the RTL).
``dma``   A MEMCPY moves ``act_bytes`` over the ACP port (16 B per AXI clock, spec), converted
          to core cycles, plus a fixed overhead per DataMover descriptor (assumed; one
          descriptor carries < 8 MiB).
``ctrl``  A MEMSET node of ``elements`` 16-bit words is ceil(elements / 3) MEMSET
          instructions (a, b, c per slot; at least one), each ``ctrl.memset_issue_cycles``.
``host``  A host step takes ``elements / host.elements_per_second`` seconds on one A53 core
          plus a fixed per-op overhead (driver call, cache maintenance; both assumed),
          converted to core cycles so every lane shares one time base.

>>> from pccx_flow.hardware.profile import load_profile
>>> node = {"op": "GEMV", "lane_class": "gemv", "macs": 512 * 2048,
...         "weight_bytes": 512 * 2048 // 2 + 4 * 512, "act_bytes": 0, "elements": 0}
>>> node_cycles(node, load_profile("v002-spec"))
52639
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from pccx_flow.errors import GraphError, ProfileError
from pccx_flow.graph.nodes import lane_can_run
from pccx_flow.hardware.profile import Profile


def _exact(x: float) -> Fraction:
    """A profile number as an exact fraction of its decimal text (3.1 is 31/10, not a float)."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(x))


def _int_attr(node: Mapping, name: str) -> int:
    value = node.get(name, 0) or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GraphError(
            f"node {node.get('id', '?')}: attribute {name!r} must be a non-negative int,"
            f" got {value!r}; rebuild the graph"
        )
    return value


def axi_to_core(axi_cycles: Fraction | int, profile: Profile) -> Fraction:
    """AXI clock cycles expressed in core clock cycles (exact)."""
    return Fraction(axi_cycles) * _rates(profile).core_per_axi


@dataclass(frozen=True)
class _Rates:
    """A profile's numbers as exact fractions, computed once per profile object."""

    core_hz: Fraction
    core_per_axi: Fraction
    cvo_rate: dict[str, Fraction]  # CVO function -> cycles per element
    dma_overhead: Fraction  # core cycles per DataMover descriptor
    host_per_element: Fraction  # core cycles per host element
    host_overhead: Fraction  # core cycles per host step
    cycles: dict  # node_cycles answers by cost signature (`_signature`)


_RATES: dict[int, tuple[Profile, _Rates]] = {}


def _rates(p: Profile) -> _Rates:
    # Keyed by identity and holding the profile, so an id is never reused while cached.
    hit = _RATES.get(id(p))
    if hit is not None and hit[0] is p:
        return hit[1]
    core_hz = _exact(p.core_hz)
    rate, reduce_rate = (
        _exact(p.sfu.cycles_per_element),
        _exact(p.sfu.reduce_sum_cycles_per_element),
    )
    rates = _Rates(
        core_hz=core_hz,
        core_per_axi=core_hz / _exact(p.axi_hz),
        cvo_rate={f: reduce_rate if f == "REDUCE_SUM" else rate for f in p.sfu.latency_cycles},
        dma_overhead=_exact(p.dma.descriptor_overhead_seconds) * core_hz,
        host_per_element=core_hz / _exact(p.host.elements_per_second),
        host_overhead=_exact(p.host.op_overhead_seconds) * core_hz,
        cycles={},
    )
    if len(_RATES) > 64:
        _RATES.clear()
    _RATES[id(p)] = (p, rates)
    return rates


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _ceil_sum(a: Fraction, b: Fraction) -> int:
    """ceil(a + b) in integers (cheaper than adding Fractions, and as exact)."""
    return _ceil_div(
        a.numerator * b.denominator + b.numerator * a.denominator, a.denominator * b.denominator
    )


def _stream(macs: int, macs_per_cycle: int, nbytes: int, bytes_per_axi: int, p: Profile) -> int:
    """max(MAC cycles, port cycles) rounded up; the integer latency is added by the caller."""
    c = _rates(p).core_per_axi
    port = _ceil_div(nbytes * c.numerator, bytes_per_axi * c.denominator)
    return max(_ceil_div(macs, macs_per_cycle), port)


def _gemv(node: Mapping, p: Profile) -> int:
    g = p.gemv
    macs, nbytes = _int_attr(node, "macs"), _int_attr(node, "weight_bytes")
    return _stream(macs, g.macs_per_cycle, nbytes, g.port_bytes_per_axi_clock, p) + g.latency_cycles


def _gemm(node: Mapping, p: Profile) -> int:
    g = p.gemm
    macs, nbytes = _int_attr(node, "macs"), _int_attr(node, "weight_bytes")
    per_axi = g.ports * g.port_bytes_per_axi_clock
    return _stream(macs, g.macs_per_cycle, nbytes, per_axi, p) + g.latency_cycles


def cvo_instructions(elements: int, profile: Profile) -> int:
    """How many CVO instructions a CVO node of `elements` elements stands for (at least 1)."""
    return max(1, _ceil_div(elements, profile.sfu.max_elements))


def _cvo(node: Mapping, p: Profile) -> int:
    func = node.get("func")
    if func not in p.sfu.latency_cycles:
        raise GraphError(
            f"node {node.get('id', '?')}: CVO function {func!r} is not one of"
            f" {', '.join(p.sfu.latency_cycles)}; rebuild the graph"
        )
    rate = _rates(p).cvo_rate[func]
    n = _int_attr(node, "elements")
    full, rest = divmod(n, p.sfu.max_elements)
    per_full = _ceil_div(rate.numerator * p.sfu.max_elements, rate.denominator)
    body = full * per_full + _ceil_div(rate.numerator * rest, rate.denominator)
    return body + cvo_instructions(n, p) * p.sfu.latency_cycles[func]


def _memcpy(node: Mapping, p: Profile) -> int:
    nbytes = _int_attr(node, "act_bytes")
    descriptors = max(1, _ceil_div(nbytes, p.dma.max_descriptor_bytes))
    transfer = Fraction(nbytes, p.dma.bytes_per_axi_clock) * _rates(p).core_per_axi
    return _ceil_sum(transfer, descriptors * _rates(p).dma_overhead)


def _memset(node: Mapping, p: Profile) -> int:
    instructions = max(1, _ceil_div(_int_attr(node, "elements"), p.ctrl.words_per_memset))
    return instructions * p.ctrl.memset_issue_cycles


def _host(node: Mapping, p: Profile) -> int:
    r = _rates(p)
    return _ceil_sum(_int_attr(node, "elements") * r.host_per_element, r.host_overhead)


_COSTS = {
    "gemv": _gemv,
    "gemm": _gemm,
    "sfu": _cvo,
    "dma": _memcpy,
    "ctrl": _memset,
    "host": _host,
}


def _signature(node: Mapping) -> tuple | None:
    """Everything a node's cost depends on (its lane class, op, function and sizes), or
    None when a size is not a plain int (then the node is costed, and refused, on its own,
    never answered from the memo)."""
    get = node.get
    key = (get("lane_class"), get("op"), get("func"), get("macs"), get("weight_bytes"),
           get("elements"), get("act_bytes"))  # fmt: skip
    for v in key[3:]:
        if v is not None and type(v) is not int:
            return None
    return key


def node_cycles(node: Mapping, profile: Profile) -> int:
    """Core cycles `node` occupies a lane of its ``lane_class`` on `profile` (at least 1).

    Answers are remembered per profile by the node's cost signature: a decode step has
    tens of thousands of nodes but a few hundred distinct ones (tiles of one matrix), and
    the graph, the problem and the bounds each ask for every node.
    """
    key = _signature(node)
    memo = _rates(profile).cycles
    if key is not None:
        hit = memo.get(key)
        if hit is not None:
            return hit
    cycles = _node_cycles(node, profile)
    if key is not None:
        memo[key] = cycles
    return cycles


def cycles_of(node_id, attrs: Mapping, profile: Profile) -> int:
    """`node_cycles` of a graph node's attribute dict, whose errors name `node_id` (the
    dict is copied with its id only when there is an error to report)."""
    try:
        return node_cycles(attrs, profile)
    except (GraphError, ProfileError):
        if "id" in attrs:
            raise
        return node_cycles({**attrs, "id": node_id}, profile)


def _node_cycles(node: Mapping, profile: Profile) -> int:
    lane_class, op = node.get("lane_class"), node.get("op")
    if lane_class not in _COSTS:
        raise GraphError(
            f"node {node.get('id', '?')}: unknown lane class {lane_class!r}; rebuild the graph"
        )
    if not lane_can_run(lane_class, op):
        raise GraphError(
            f"node {node.get('id', '?')}: a {lane_class} lane cannot run op {op!r}; rebuild"
            " the graph"
        )
    if profile.lanes.get(lane_class, 0) < 1:
        raise ProfileError(
            f"profile {profile.name} has no {lane_class!r} lane for node {node.get('id', '?')}"
            f" (op {op}); use a profile with {lane_class} lanes, e.g. v002-spec"
        )
    return max(1, _COSTS[lane_class](node, profile))


def node_resources(node: Mapping, profile: Profile, node_id=None) -> tuple[str, ...]:
    """Pool names `node` holds for its whole duration (one unit each).

    A GEMV tile holds one weight port while it streams its weights (HP2 or HP3); nothing else
    holds a pool: the GEMM array owns HP0/HP1 and the ACP DMA is the ``dma`` lane itself, so
    their lanes already serialise them. DDR bandwidth is a bound (`pccx_flow.bounds`), not an
    exclusive resource.
    """
    if node.get("lane_class") == "gemv" and (node.get("weight_bytes") or 0) > 0:
        if profile.pools.get("weight_port", 0) < 1:
            raise ProfileError(
                f"profile {profile.name} has no weight_port pool for GEMV node"
                f" {node.get('id', node_id if node_id is not None else '?')};"
                " add [pools] weight_port"
            )
        return ("weight_port",)
    return ()


def cycles_to_seconds(cycles: float, profile: Profile) -> float:
    """Core cycles as seconds on `profile` (a model estimate, not a measurement)."""
    return float(cycles) / float(profile.core_hz)


def annotate_costs(graph, profile: Profile) -> None:
    """Set each node's ``cycles`` (int) and ``resources`` (list of pool names) in place.

    ``resources`` is a list so the graph stays JSON-compatible; the graph records the
    profile's name in ``graph.graph["profile"]`` and, so an exported graph cannot be mistaken
    for a measurement, ``graph.graph["cycles_are"] = "model estimate, profile <name>"``.
    """
    for node_id, attrs in graph.nodes(data=True):
        attrs["cycles"] = cycles_of(node_id, attrs, profile)
        attrs["resources"] = list(node_resources(attrs, profile, node_id))
    graph.graph["profile"] = profile.name
    graph.graph["cycles_are"] = f"model estimate, profile {profile.name}"
