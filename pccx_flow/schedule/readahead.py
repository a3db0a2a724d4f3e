"""When each KV tile read of a decode step may be issued: order-only edges for the timeline.

A ``kv_read`` MEMCPY has no inputs, so a list scheduler may place it at any time, and
priority policies place long DMA reads early: the whole context of every layer would be
resident in L2 at once. The edges here (``problem.order_edges``; the decode graph is not
changed) bound how far ahead each stream of tiles (a layer's rows of one KV head) is read.

- `kv_stream_edges`, what `schedule` uses: a stream's tiles are read one after another,
  each as soon as L2 has room for it (the timeline decides: `problem.admit`,
  `READ_AHEAD_RESERVE`), never more of them resident than L2 holds tiles less one
  (`default_tile_slots`), the key tiles never more than `EXP_LEAD` ahead of the work that
  frees their scores' exponentials.
- `kv_prefetch_edges`, the fixed rules (``read_ahead={"rule": "fixed"}`` in
  `pccx_flow.schedule.problem.problem_from_graph`, for comparison): each tile issued just
  ahead of its use, at most two K tiles and one V tile of a stream in flight, whatever L2
  holds.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

import networkx as nx

from pccx_flow.errors import InputError
from pccx_flow.graph.emit import tensor_bytes

Node = Hashable

# Every layer streams its first KV tiles in during the previous layer's MLP, at any context
# length. It once did only up to two key tiles (E4B below 2,048 tokens): beside the previous
# layer's own tiles the early ones left L2 in holes too small for a tile, and some programs
# did not lower. Two lowering rules made room (a tile fences for the top of L2, the tile
# read with the new row comes second, `kv_prefetch_edges`): heft within L2 on v002-spec
# went from 4.97 / 4.59 / 4.02 % over the largest bound at 2047 / 4095 / 8191 to 3.72 /
# 3.46 / 3.08 %, critical-path from 7.29 / 6.50 / 5.61 % to 5.78 / 5.15 / 4.48 %.
# `kv_prefetch_edges(early_max_tiles=N)` keeps the old rule for a study.

# How many key tiles a layer's scores may run ahead of the work that frees their
# exponentials (REDUCE_SUM and ·V): K tile t waits for that work of tile t - EXP_LEAD. With
# 2 the DMA waited for tile t-2's ·V, which waits for V tile t-2, at every tile: heft's step
# at position 8191 was 2.0 % longer on v002-spec and 6.5 % on v002-as-built than with 3.
# (With 3, programs fit L2's holes since the allocator places long-lived regions ahead.)
EXP_LEAD = 3


# In a layer of at most this many key tiles (E4B below 2,048 tokens), V tile t waits for
# the scores of K tile t-1, not t. With two tiles V tile 1 is the only tile not streamed in
# early, so it waits for the first tile L2 frees: K tile 0's, whose scores need only the Q
# projections, where tile 1's also need the new K row (the K projection, its norm and
# RoPE). Waiting for tile 1 put those on the path to V tile 1's 52 k-cycle read, and the
# weight ports idled behind it: heft and critical-path within L2 at position 1023 went from
# 3.07 % to 2.80 % over the largest bound on v002-spec (4.56 % to 4.09 % over the ports'
# chain on v002-as-built).
# With more tiles the same rule shortened the step too (2.86 % for both at 4095, 2.58 % at
# 8191 on v002-spec) but at 2047 their programs no longer fit L2's holes (a 512 KiB K tile).
V_AFTER_EARLIER_K_MAX_TILES = 2

# In a layer of three or more tiles the last V tile is read as soon as the one before it is
# in (double buffering at the end only): it waits for the ·V of the tile two before and for
# every K tile's scores, not for the ·V of the tile just before. By then no K tile is held,
# so two V tiles take less L2 than the two K tiles and one V tile held earlier in the layer.
# Single-buffered, the DMA idled while the ·V of the tile before ran and the GEMV lanes then
# idled a whole tile read before the last ·V (E4B at 2047 on v002-as-built: 16 k cycles a
# layer): within L2, critical-path+improve went from 3.40 % to 2.70 % over the largest bound
# there, and from 3.29 % to 2.66 % at 4095 (v002-spec 2.81 / 2.65 / 2.50 % at 2047 / 4095
# / 8191 to 2.59 / 2.45 / 2.34 %). Double buffering every V tile made the steps longer
# (the V reads then took L2 and the DMA from the K reads): `double_last_v=False` keeps the
# single-buffered rule for a study.
# A layer of two tiles that reads another layer's KV (E4B's layers 20-34 below 2,048
# tokens) double buffers its V tile 1 as well: it waits for V tile 0's read and K tile 0's
# scores, not for V tile 0's ·V. Its tiles hold no new row of its own, so V tile 1 is a
# tile's room the DMA can fill while V tile 0's ·V runs; single-buffered, the GEMV lanes
# idled a tile read per layer (~12 k cycles) before the last ·V. At 1023, within L2:
# critical-path+improve 1.12 % -> 0.92 % over the largest bound on v002-as-built (critical-
# path 1.41 -> 1.20 %, heft 1.50 -> 1.26 %), 2.27 -> 2.21 % on v002-spec (critical-path
# 2.48 -> 2.41 %, heft 2.80 -> 2.73 %). The same for every two-tile layer was worse
# (v002-as-built critical-path+improve 1.11 %, v002-spec 2.34 %). Its programs lower
# because the allocator stacks tiles a whole tile apart (`L2Allocator.slot_words`) and
# keeps what lives through the step in the top sixteenth of L2 (`LONG_LIVED_SHARE`).
DOUBLE_LAST_V = True


Stream = tuple[int, int]  # (layer, KV head); a read without a head (a hand-made graph's): -1


def _check_lead(exp_lead: int) -> None:
    if exp_lead < 1:
        raise InputError(
            f"exp_lead must be at least 1 (a K tile cannot wait for the ·V of its own "
            f"scores), got {exp_lead}"
        )


def _after(graph: nx.DiGraph, node: Node) -> list[Node]:
    return sorted(graph.successors(node), key=str)


def _with_new_row(graph: nx.DiGraph, tile: Node) -> bool:
    """Whether the tile's readers also read this step's K or V row (one operand with it)."""
    return any(graph.nodes[w]["kernel"] == "kv_write"
               for r in graph.successors(tile) for w in graph.predecessors(r))  # fmt: skip


def stream_reads(graph: nx.DiGraph) -> tuple[dict[tuple[Stream, str], list[Node]], set[int]]:
    """Each stream's K and V tile reads in *read order* (`kv_prefetch_edges`: by position,
    the tile read with the new row second when there are three or more), keyed by
    ``(stream, kind)``, and the layers that write this step's K/V row (own KV cache)."""
    reads: dict[tuple[Stream, str], list[Node]] = {}
    own_rows: set[int] = set()
    for n, a in graph.nodes(data=True):
        if a.get("kernel") == "kv_read":
            stream = (int(a["layer"]), int(a["params"].get("kv_head", -1)))
            reads.setdefault((stream, a["params"]["kind"]), []).append(n)
        elif a.get("kernel") == "kv_write":
            own_rows.add(int(a["layer"]))
    for nodes in reads.values():
        nodes.sort(key=lambda n: graph.nodes[n]["params"]["positions"][0])
        if len(nodes) > 2 and _with_new_row(graph, nodes[-1]):  # read second
            nodes.insert(1, nodes.pop())
    return reads, own_rows


def _doubled(reads: dict, own_rows: set[int], stream: Stream, double_last_v: bool) -> int:
    """Tiles of a stream whose last V tile is double buffered (0: none; `DOUBLE_LAST_V`)."""
    k_tiles, v_tiles = reads.get((stream, "k"), ()), reads.get((stream, "v"), ())
    if not double_last_v or len(k_tiles) != len(v_tiles):
        return 0
    if len(v_tiles) >= 3 or (len(v_tiles) == 2 and stream[0] not in own_rows):
        return len(v_tiles)
    return 0


def _anchors(
    graph: nx.DiGraph, reads: dict, own_rows: set[int], double_last_v: bool,
    early_max_tiles: int | None,
) -> dict[Stream, list[Node]]:  # fmt: skip
    """Where a stream's first tiles may be issued: once the previous layer's stream of the
    same head has finished its attention (every reader of its last K and V tiles in read
    order, and of the V tile before the last when that is double buffered), so they stream
    in during that layer's MLP instead of after this layer's projections; a head's first
    stream, or with `early_max_tiles` N a stream of more than N key tiles, waits for its
    layer's attention input."""
    streams = sorted({stream for stream, _ in reads})
    done: dict[Stream, list[Node]] = {}
    for stream in streams:
        last = [reads[(stream, kind)][-1] for kind in ("k", "v") if (stream, kind) in reads]
        if _doubled(reads, own_rows, stream, double_last_v) >= 3:
            last.append(reads[(stream, "v")][-2])  # the tile before the last V may end last
        done[stream] = sorted({r for n in last for r in _after(graph, n)}, key=str)
    anchor: dict[Stream, list[Node]] = {}
    previous: dict[int, Stream] = {}  # per head, its last stream so far
    for stream in streams:
        layer, head = stream
        if head in previous and _streams_early(reads, stream, early_max_tiles):
            anchor[stream] = done[previous[head]]
        else:
            q0 = f"L{layer:02d}.attn.q_proj.h0"  # node ids are stable (graph.nodes)
            anchor[stream] = sorted(graph.predecessors(q0), key=str) if q0 in graph else []
        previous[head] = stream
    return anchor


def _streams_early(reads: dict, stream: Stream, early_max_tiles: int | None) -> bool:
    """Whether a stream's first tiles come in during the previous layer's MLP."""
    return early_max_tiles is None or len(reads.get((stream, "k"), ())) <= early_max_tiles


def _exp_readers(graph: nx.DiGraph, k_tile: Node) -> list[Node]:
    """What frees the exponentials of a K tile's scores: every reader of their EXPs."""
    exps = [x for sc in _after(graph, k_tile) for x in _after(graph, sc)
            if graph.nodes[x]["func"] == "EXP"]  # fmt: skip
    return [r for x in exps for r in _after(graph, x)]


# How many bytes beside a KV read the timeline wants free before it releases the read
# (`problem.admit`, the stream rule): one E4B tile. With 512 or 768 KiB critical-path's and
# heft's steps at 520-1400 tokens moved by at most 0.4 points either way, and the same
# programs failed to lower (`benchmarks/bench_read_ahead.py --reserves`, before the rule
# had tile slots).
READ_AHEAD_RESERVE = 256 * 1024


def read_order(k_tiles: list[Node], v_tiles: list[Node]) -> list[Node]:
    """A stream's reads as `kv_stream_edges` issues them: K tiles 0 and 1, V tile 0, then
    K tile t and V tile t - 1 for t = 2, 3, ..., then the last V tile (each list in read
    order, `stream_reads`). A V tile's ·V needs its own K tile's scores first, so the next
    K tile is the more urgent read."""
    order: list[Node] = []
    for t in range(max(len(k_tiles), len(v_tiles)) + 1):
        order += k_tiles[t : t + 1]
        if t >= 1:
            order += v_tiles[t - 1 : t]
    return order


def kv_stream_edges(graph: nx.DiGraph, exp_lead: int = EXP_LEAD) -> list[tuple[Node, Node]]:
    """Order-only edges that issue a stream's KV tile reads one after another, as far
    ahead as L2 has room (what `schedule` uses; `kv_prefetch_edges` are the fixed rules).

    Per stream (a layer's tiles of one KV head; tiles in read order, `stream_reads`):

    - every tile waits for the previous layer's attention of that head (its first stream:
      the layer's attention input), as the first tiles of `kv_prefetch_edges` do;
    - each read waits for the read before it in `read_order` (K 0, K 1, V 0, K 2, V 1, ...);
    - K tile t >= `exp_lead` waits for the work that frees the exponentials of K tile
      t - `exp_lead` (its REDUCE_SUM and ·V, `EXP_LEAD`): scores never run more than that
      many tiles ahead, so they cannot fill the SFU's window (``l2_reach``) ahead of the
      work that empties it;
    - the layer's write of this step's K (V) row waits for the read of the tile it is
      written into: the program keeps a tile and its new row in one L2 region, placed when
      its first part is produced (`pccx_flow.board.program.addresses`), so the region is
      placed with the read and not, after the K projection, where a fragmented L2 may have
      no tile-sized hole left (E4B at 2047 on `v002-as-built` did not lower without it).

    How far ahead the chain runs is left to the timeline: a read is released to the policy
    only once L2 has room for it and `READ_AHEAD_RESERVE` bytes beside what placed nodes
    hold and earlier released reads will take (`problem.admit`, set by
    `pccx_flow.schedule.problem.problem_from_graph`). Without that the chain alone would let
    a policy read a whole layer ahead. The edges within a stream join nodes of one lane
    (the DMA's): critical-path leaves them out of its levels (`pccx_flow.schedule.policies.
    critical_path.issue_order_edges`).

    Against the fixed rules, E4B within L2 (largest bound; model estimates; with
    `default_tile_slots`): critical-path at 700 / 1023 / 1400 / 2047 / 4095 / 8191 was
    0.75 / 1.14 / 2.29 / 1.31 / 1.49 / 1.44 % over it under them and 0.79 / 0.74 / 2.06 /
    1.41 / 1.55 / 1.32 % under this rule on `v002-spec`, 0.69 / 0.69 / 0.55 / 1.44 / 2.93 /
    2.49 % and 0.66 / 0.72 / 0.78 / 1.35 / 2.42 / 1.81 % on `v002-as-built`; heft at 4095
    and 8191 went from 1.93 / 1.80 to 1.53 / 1.47 % and from 3.03 / 2.57 to 1.98 / 1.68 %,
    cpop at 8191 on `v002-as-built` from 10.27 to 3.83 % (`benchmarks/bench_read_ahead.py`).
    Without the tile slots, where a stream's last tile is short the programs often did not
    lower (the allocator found no contiguous hole for a tile: at 520-1000 tokens every 48,
    `critical-path`'s lowered at 7 of 11 positions on `v002-spec`); with them every
    `critical-path` and `heft` program lowers at 16 positions from 520 to 8191 on both
    profiles.
    """
    _check_lead(exp_lead)
    reads, own_rows = stream_reads(graph)
    anchor = _anchors(graph, reads, own_rows, DOUBLE_LAST_V, None)
    edges: list[tuple[Node, Node]] = []
    for stream in sorted({stream for stream, _ in reads}):
        k_tiles, v_tiles = reads.get((stream, "k"), []), reads.get((stream, "v"), [])
        order = read_order(k_tiles, v_tiles)
        edges.extend((u, n) for n in order for u in anchor[stream] if u != n)
        edges.extend(zip(order, order[1:], strict=False))
        for t in range(exp_lead, len(k_tiles)):
            edges.extend((r, k_tiles[t]) for r in _exp_readers(graph, k_tiles[t - exp_lead]))
        for tile in order:  # the tiles read with this layer's new row: their row writes
            writes = {w for r in graph.successors(tile) for w in graph.predecessors(r)
                      if graph.nodes[w]["kernel"] == "kv_write"
                      and graph.nodes[w]["layer"] == stream[0]}  # fmt: skip
            edges.extend((tile, w) for w in sorted(writes, key=str))
    return edges


def kv_prefetch_edges(
    graph: nx.DiGraph,
    exp_lead: int = EXP_LEAD,
    early_max_tiles: int | None = None,
    double_last_v: bool = DOUBLE_LAST_V,
) -> list[tuple[Node, Node]]:
    """Order-only edges that issue each layer's KV tile reads just ahead of their use.

    A ``kv_read`` has no inputs, so a list scheduler may place it at any time, and priority
    policies place long DMA reads early: the whole context of every layer would be
    resident at once. With these edges (per layer, tiles counted in *read order*: by
    position, except that the last tile, when the scores and ·V read it together with the
    new row as one operand, is read second when there are three or more; at a position
    that fills its last tile the row is a tile of its own and the order is by position):

    - K tiles 0 and 1 and V tile 0 wait until the previous layer that reads KV has finished
      its attention (every reader of its last K and V tiles): they stream in during that
      layer's MLP, while its own tiles are freed, instead of after this layer's Q
      projection, where V tile 0 would sit on the critical path of every layer (E4B at
      position 1023, one tile each: heft within L2 went from 5.0 % to 3.8 % over the
      largest bound). The first such layer waits for its own attention input (the
      producers of the first Q projection's input); with `early_max_tiles` N, a layer of
      more than N key tiles (0: every layer) does too, and V tile 0 waits for K tile 0's
      scores (the rule before every layer streamed early: a study);
    - K tile t >= 2 waits for every reader of K tile t-2 (its scores) and, from t =
      `exp_lead` on, every reader of the EXPs of tile t - `exp_lead` (REDUCE_SUM and ·V):
      the scores never run more than `exp_lead` tiles ahead of the work that frees their
      exponentials (`EXP_LEAD`);
    - V tile t >= 1 waits for every reader of K tile t (the scores of that tile are done:
      with the key-split softmax of `graph.blocks_attention`, its ·V can start right away)
      and for every reader of V tile t-1 (single buffering). In a layer of at most
      `V_AFTER_EARLIER_K_MAX_TILES` key tiles it waits for K tile t-1 instead (see there).
      In a layer of three or more, the last V tile waits instead for V tile t-1 itself
      (the read before it), every reader of V tile t-2 and every reader of the last two K
      tiles (every score is done): double buffered at the end (`DOUBLE_LAST_V`). In a
      layer of two that reads another layer's KV (it writes no row of its own), V tile 1
      waits for V tile 0 itself and every reader of K tile 0 (`DOUBLE_LAST_V` too).

    A tile holds one KV head's rows (``params["kv_head"]``, `graph.blocks_attention.kv_tiles`),
    so each layer and head is a stream of its own: the rules above apply per stream ("a
    layer" reading "a layer's stream of one head"), and a stream's first tiles wait for the
    previous layer's attention of that head only. One head group's tiles are freed once
    its queries are done with them, while the other group's are still read: E4B at 1023
    on v002-spec, critical-path+improve within L2 went from 128.61 M to 126.99 M cycles
    (tiles of both heads, freed only after all eight queries), -1.9 to -2.5 % at 2047-8191,
    v002-as-built -0.8 to -1.7 % at 2047-8191 and +0.02 to +0.27 % at 1023.

    So, whatever the policy, a stream holds at most two K tiles and one V tile, or two V
    tiles and at most one K tile at its end, and the next layer's first two K tiles and
    first V tile once this layer's attention is done (every reader of its last K tile and
    its last two V tiles; in a two-tile KV-sharing layer, its last V tile: its V tile 0's
    ·V may still run then, and waiting for it too took E4B's 1023 step on v002-as-built
    from 0.92 % to 1.10 % over the largest bound, critical-path+improve).

    Why the last tile second: the program keeps an operand's parts in one contiguous L2
    region (`pccx_flow.board.program.addresses`), placed when its first part is produced.
    Read last, the tile's region is placed when the new row is written, after the K (V)
    projection, and must then find a whole tile's room beside the three streamed in early;
    with min-min, cpop or random it did not at 2047 and more. Read second, the region is
    placed with the tile, during the previous MLP, and the row's words wait reserved in it.
    The edges carry no tensor: they go into the scheduling problem
    (`problem_from_graph(memory=True, read_ahead={"rule": "fixed"})`; the default is
    `kv_stream_edges`), not into the decode graph, and they free no memory (a hold's
    readers are the nodes that read its tensor).
    """
    _check_lead(exp_lead)
    reads, own_rows = stream_reads(graph)
    anchor = _anchors(graph, reads, own_rows, double_last_v, early_max_tiles)
    edges: list[tuple[Node, Node]] = []

    def after(node: Node) -> list[Node]:
        return _after(graph, node)

    def doubled(stream: Stream) -> int:
        return _doubled(reads, own_rows, stream, double_last_v)

    def streams_early(stream: Stream) -> bool:
        return _streams_early(reads, stream, early_max_tiles)

    for (stream, kind), nodes in sorted(reads.items()):
        if kind == "k":
            for t, n in enumerate(nodes):
                sources = anchor[stream]
                if t >= 2:
                    sources = after(nodes[t - 2])
                if t >= exp_lead:
                    sources = sources + _exp_readers(graph, nodes[t - exp_lead])
                edges.extend((u, n) for u in sources if u != n)
            continue
        k_reads = reads.get((stream, "k"), [])
        for t, n in enumerate(nodes):
            if t == 0 and streams_early(stream):
                sources = list(anchor[stream])
            elif t == len(nodes) - 1 and doubled(stream) == 2:
                sources = [nodes[0], *after(k_reads[0])]
            elif t == len(nodes) - 1 and doubled(stream):
                sources = [nodes[t - 1], *after(nodes[t - 2])]
                sources += [r for k_tile in k_reads[-2:] for r in after(k_tile)]
            else:
                sources = after(nodes[t - 1]) if t >= 1 else []
                # the K tile whose scores it waits for (docstring): t, or t - 1 in a layer
                # of few key tiles
                k = t - 1 if t >= 1 and len(k_reads) <= V_AFTER_EARLIER_K_MAX_TILES else t
                if k < len(k_reads):
                    sources += after(k_reads[k])
            edges.extend((u, n) for u in sources if u != n)
    return edges


READ_AHEAD_RULES = ("fixed", "stream")
DEFAULT_READ_AHEAD = "stream"  # the rule a problem within L2 gets unless told

# A capacity the stream rule may add (``tile_slots``): KV tiles resident in L2 at once.
KV_SLOTS = "kv_slots"


class ReadAhead(NamedTuple):
    """What a read-ahead rule adds to a decode step's problem within L2 (`read_ahead_of`):
    order-only edges, the reads the timeline holds back (with their reserves) or None, and
    for ``tile_slots`` the ``(slots, bytes per slot)`` of a `KV_SLOTS` capacity or None."""

    edges: list[tuple[Node, Node]]
    admit: dict[Node, int] | None
    slots: tuple[int, int] | None


def default_tile_slots(l2_bytes: int, tile_bytes: int) -> int:
    """How many KV tiles the stream rule lets L2 hold at once by default: as many as fit
    less one, at least one. The read's hold-back asks for a slot beside its own (its
    reserve), so at most one fewer are read ahead. E4B's 1.75 MiB holds seven 256 KiB
    tiles: six slots, at most five tiles read ahead, the sixth's room left to the layer's
    other tensors. Without the slots the stream rule's schedules often did not lower where
    a stream's last tile is short (`kv_stream_edges`), nor with seven at 856 and 1400
    tokens on `v002-spec` (`critical-path` and `heft`, a sweep of the release before); with
    six every `critical-path` and `heft` program lowers at 16 positions from 520 to 8191 on
    both profiles."""
    return max(1, l2_bytes // tile_bytes - 1)


def read_ahead_of(
    graph: nx.DiGraph, study: Mapping[str, Any] | None = None, *, l2_bytes: int | None = None
) -> ReadAhead:
    """What the read-ahead rule adds to a decode graph's problem within L2 of `l2_bytes`:
    by default `kv_stream_edges` with every KV read held back until L2 has room for it and
    `READ_AHEAD_RESERVE` bytes more and a `KV_SLOTS` capacity of `default_tile_slots`
    slots of the largest tile's bytes, one per read (none without `l2_bytes`). `study`
    names another: ``{"rule": "fixed", ...}``, `kv_prefetch_edges` with that function's
    keywords (nothing held back), or ``{"rule": "stream", "reserve_bytes": N, "exp_lead":
    N, "tile_slots": S}`` with another reserve, lead or number of slots (the hold-back
    asks for the reserve in slots too: one slot, with a 256 KiB reserve and 256 KiB
    tiles; 0: no slots, only L2's room).
    """
    keywords = dict(study or {})
    rule = keywords.pop("rule", DEFAULT_READ_AHEAD)
    if rule not in READ_AHEAD_RULES:
        raise InputError(
            f"unknown read-ahead rule {rule!r}; the rules are {', '.join(READ_AHEAD_RULES)}"
        )
    edges_of = kv_prefetch_edges if rule == "fixed" else kv_stream_edges
    takes = [k for k in inspect.signature(edges_of).parameters if k != "graph"]
    takes += ["reserve_bytes", "tile_slots"] if rule == "stream" else []
    unknown = sorted(set(keywords) - set(takes))
    if unknown:
        raise InputError(
            f"read-ahead rule {rule!r} takes no keyword {unknown[0]!r}; it takes: "
            f"{', '.join(takes)}"
        )
    if rule == "fixed":
        return ReadAhead(kv_prefetch_edges(graph, **keywords), None, None)
    reserve = keywords.pop("reserve_bytes", READ_AHEAD_RESERVE)
    slots = keywords.pop("tile_slots", None)
    for name, value, least in (("reserve_bytes", reserve, 0), ("tile_slots", slots, 0)):
        if value is not None and (type(value) is not int or value < least):
            raise InputError(f"{name} must be a whole number >= {least}, got {value!r}")
    edges = kv_stream_edges(graph, **keywords)
    reads = [n for n, a in graph.nodes(data=True) if a.get("kernel") == "kv_read"]
    slot = max((tensor_bytes(t) for n in reads for t in graph.nodes[n]["outputs"]), default=0)
    if slots is None and l2_bytes and slot:
        slots = default_tile_slots(l2_bytes, slot)
    return ReadAhead(
        edges, dict.fromkeys(reads, reserve), (slots, slot) if slots and slot else None
    )
