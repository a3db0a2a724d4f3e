"""When KV tile reads are issued (`pccx_flow.schedule.readahead`), on decode graphs."""

from __future__ import annotations

import networkx as nx
import pytest

from pccx_flow.errors import InputError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.memory import occupancy
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.readahead import (
    EXP_LEAD,
    KV_SLOTS,
    READ_AHEAD_RESERVE,
    default_tile_slots,
    kv_prefetch_edges,
    read_order,
)
from pccx_flow.schedule.registry import make_policy, run_on_problem

FIXED = {"rule": "fixed"}  # the fixed rules (`kv_prefetch_edges`)
STREAM = {"rule": "stream"}  # reads as far ahead as L2 has room (`kv_stream_edges`), the default


def _layer_reads(graph, layer, head=0):
    """A layer's KV reads of one KV head (a stream of `kv_prefetch_edges`), by kind and start."""
    reads = sorted(
        (n for n, a in graph.nodes(data=True) if a["kernel"] == "kv_read" and a["layer"] == layer
         and a["params"]["kv_head"] == head),
        key=lambda n: (graph.nodes[n]["params"]["kind"], graph.nodes[n]["params"]["start"]),
    )  # fmt: skip
    k = [n for n in reads if graph.nodes[n]["params"]["kind"] == "k"]
    v = [n for n in reads if graph.nodes[n]["params"]["kind"] == "v"]
    return reads, k, v


def _previous_attention_done(graph, layer, head=0):
    """Every reader of the K and V tiles of KV head `head` read last by the KV-reading layer
    before `layer` (by position the last but one when there are three or more: the last is
    read second), and of the V tile read before its last when it has three or more (double
    buffered)."""
    kv_layers = sorted({a["layer"] for _, a in graph.nodes(data=True) if a["kernel"] == "kv_read"})
    before = kv_layers[kv_layers.index(layer) - 1]
    last = []
    for kind in ("k", "v"):
        tiles = sorted((n for n, a in graph.nodes(data=True) if a["kernel"] == "kv_read"
                        and a["layer"] == before and a["params"]["kind"] == kind
                        and a["params"]["kv_head"] == head),
                       key=lambda n: graph.nodes[n]["params"]["start"])  # fmt: skip
        read_order = [tiles[0], tiles[-1], *tiles[1:-1]] if len(tiles) > 2 else tiles
        last.append(read_order[-1])
        if kind == "v" and len(tiles) > 2:
            last.append(read_order[-2])
    return {r for n in last for r in graph.successors(n)}


@pytest.mark.parametrize("head", [0, 1])
def test_a_short_context_streams_in_during_the_previous_layers_mlp(head):
    """Two key tiles a layer: each KV head's K tiles 0, 1 and V tile 0 wait only for the
    previous KV-reading layer's attention of that head, and V tile 1 for the ·V of V tile 0
    and the scores of K tile 0 (freed first: they need no new K row), not of K tile 1."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=32, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
    _, k, v = _layer_reads(graph, 4, head)
    assert len(k) == len(v) == 2
    done = _previous_attention_done(graph, 4, head)
    assert done and set(problem.preds[k[0]]) == set(problem.preds[k[1]]) == done
    assert all(graph.nodes[r]["params"]["kv_head"] == head for r in done)
    assert set(problem.preds[v[0]]) == done
    assert set(problem.preds[v[1]]) == set(graph.successors(v[0])) | set(graph.successors(k[0]))
    assert not set(problem.preds[v[1]]) & set(graph.successors(k[1]))


def test_a_two_tile_layer_sharing_kv_reads_v_tile_1_during_the_v_of_tile_0():
    """A KV-sharing layer (tiny's global layer 9 reads layer 4's cache) writes no row of its
    own: V tile 1 waits for V tile 0's read and K tile 0's scores, not V tile 0's ·V; an
    own-KV layer's (4) still waits for that ·V. `double_last_v=False` keeps both single."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=32, profile=profile)
    assert "L09.attn.k_write.g0" not in graph and "L04.attn.k_write.g0" in graph
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
    single = problem_from_graph(
        graph, profile, memory=True, read_ahead={**FIXED, "double_last_v": False}
    )
    for layer in (4, 9):
        _, k, v = _layer_reads(graph, layer)
        assert len(k) == len(v) == 2
        after_v0, after_k0 = set(graph.successors(v[0])), set(graph.successors(k[0]))
        assert set(single.preds[v[1]]) == after_v0 | after_k0
        doubled = {v[0]} | after_k0 if layer == 9 else after_v0 | after_k0
        assert set(problem.preds[v[1]]) == doubled


def test_kv_reads_are_issued_just_ahead_of_use_the_tile_with_the_new_row_second():
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
    assert problem.source is graph and not any(
        "order_only" in d for *_, d in graph.edges(data=True)
    )
    reads, k, v = _layer_reads(graph, 4)
    assert len(k) == len(v) == 3  # 40 past rows of a global layer in 16-key tiles
    assert [graph.nodes[n]["params"]["positions"] for n in k] == [[0, 16], [16, 32], [32, 40]]
    # the last tile is one operand with the new row (its scores read both): read second
    for tile, row in ((k[2], "L04.attn.k_write.g0"), (v[2], "L04.attn.v_write.g0")):
        assert set(graph.successors(tile)) <= set(graph.successors(row))  # (and later
        # layers that share this layer's KV read the row too)
    order_k, order_v = [k[0], k[2], k[1]], [v[0], v[2], v[1]]
    pred = {n: set(problem.preds[n]) for n in reads}
    after = {n: set(graph.successors(n)) for n in reads}
    # the first two K tiles and the first V tile stream in during the previous layer's MLP
    done = _previous_attention_done(graph, 4)
    assert done and pred[order_k[0]] == pred[order_k[1]] == pred[order_v[0]] == done
    # two K tiles in flight: the third waits for the first's scores
    assert pred[order_k[2]] == after[order_k[0]]
    # one V tile at a time, after the ·V of the one before and its own K tile's scores ...
    assert pred[order_v[1]] == after[order_v[0]] | after[order_k[1]]
    # ... but the last: after the read before it, the ·V of the one before that and every
    # score (no K tile is held then: two V tiles fit where two K and one V did)
    assert pred[order_v[2]] == (
        {order_v[1]} | after[order_v[0]] | after[order_k[1]] | after[order_k[2]]
    )
    assert all(graph.nodes[s]["kernel"] == "attn_pv" for s in after[v[0]])
    kv_layers = {a["layer"] for _, a in graph.nodes(data=True) if a["kernel"] == "kv_read"}
    first = min(kv_layers)  # nothing before it: its first tiles wait for its own input
    k_first = min((n for n, a in graph.nodes(data=True) if a["kernel"] == "kv_read"
                   and a["layer"] == first and a["params"]["kind"] == "k"),
                  key=lambda n: graph.nodes[n]["params"]["start"])  # fmt: skip
    q0 = f"L{first:02d}.attn.q_proj.h0"
    assert set(problem.preds[k_first]) == set(graph.predecessors(q0))
    assert all(graph.nodes[s]["kernel"] == "attn_scores" for s in after[k[1]])


def _freed_by(graph, k_tile):
    """The readers of the EXPs of a K tile's scores (what frees their exponentials)."""
    exps = {x for sc in graph.successors(k_tile) for x in graph.successors(sc)
            if graph.nodes[x]["func"] == "EXP"}  # fmt: skip
    return {r for x in exps for r in graph.successors(x)}


@pytest.mark.parametrize("position", [40, 60])
def test_the_stream_rule_reads_one_tile_after_another_as_l2_has_room(position):
    """The stream rule (what `schedule` uses): every tile of a stream waits for the previous layer's
    attention of its head and for the read before it in read order (K 0, K 1, V 0, K 2,
    V 1, ..., the tile with the new row second of its kind), K tile t >= 3 also for what
    frees the exponentials of K tile t - 3, the layer's K (V) row write for its tile's
    read; and every read is held back until L2 has room (`problem.admit`)."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=position, tile_rows=16, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=STREAM)
    _, k, v = _layer_reads(graph, 4)
    tiles = len(k)
    assert tiles == len(v) == (3 if position == 40 else 4)
    k = [k[0], k[-1], *k[1:-1]]  # read order: the tile with the new row second
    v = [v[0], v[-1], *v[1:-1]]
    order = [k[0], k[1], v[0], k[2], v[1]] + ([k[3], v[2], v[3]] if tiles == 4 else [v[2]])
    assert read_order(k, v) == order
    done = _previous_attention_done(graph, 4)
    chain = dict(zip(order[1:], order, strict=False))
    for n in order:
        expected = done | ({chain[n]} if n in chain else set())
        if tiles == 4 and n == k[3]:
            expected |= _freed_by(graph, k[0])  # EXP_LEAD tiles ahead
        assert set(problem.preds[n]) == expected, n
    for kind, tile in (("k", k[1]), ("v", v[1])):
        write = f"L04.attn.{kind}_write.g0"
        assert tile in problem.preds[write] and (tile, write) in problem.order_edges
    assert problem.admit == dict.fromkeys(
        (n for n in graph if graph.nodes[n]["kernel"] == "kv_read"), READ_AHEAD_RESERVE
    )
    default = problem_from_graph(graph, profile, memory=True)  # what `schedule` makes
    assert default.admit == problem.admit and default.order_edges == problem.order_edges
    fixed = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
    assert not fixed.admit and set(fixed.preds[k[2]]) == set(graph.successors(k[0]))


def test_a_study_names_a_rule_and_its_keywords_or_gets_one_line():
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    one = {**STREAM, "reserve_bytes": 1}
    other = problem_from_graph(graph, profile, memory=True, read_ahead=one)
    assert set(other.admit.values()) == {1}
    for study, message in (
        ({"rule": "fastest"}, "unknown read-ahead rule 'fastest'; the rules are fixed, stream"),
        ({**STREAM, "reserve_bytes": -1}, "reserve_bytes must be a whole number >= 0"),
        ({**STREAM, "tile_slots": -1}, "tile_slots must be a whole number >= 0, got -1"),
        ({**STREAM, "tile_slots": 1.5}, "tile_slots must be a whole number >= 0, got 1.5"),
        ({**STREAM, "double_last_v": False},
         "read-ahead rule 'stream' takes no keyword 'double_last_v'; it takes: exp_lead, "
         "reserve_bytes, tile_slots"),
        ({**FIXED, "reserve_bytes": 8},
         "read-ahead rule 'fixed' takes no keyword 'reserve_bytes'"),
    ):
        with pytest.raises(InputError, match=message):
            problem_from_graph(graph, profile, memory=True, read_ahead=study)


def test_a_study_may_keep_the_last_v_tile_single_buffered():
    """`double_last_v=False`: the last V tile waits for the ·V of the one before it, as
    every other V tile does, and the next layer for the last tiles' readers only."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    problem = problem_from_graph(
        graph, profile, memory=True, read_ahead={**FIXED, "double_last_v": False}
    )
    _, k, v = _layer_reads(graph, 4)
    order_k, order_v = [k[0], k[2], k[1]], [v[0], v[2], v[1]]
    after = {n: set(graph.successors(n)) for n in (*k, *v)}
    assert set(problem.preds[order_v[2]]) == after[order_v[1]] | after[order_k[2]]
    _, k_next, _ = _layer_reads(graph, 5)
    assert set(problem.preds[k_next[0]]) == after[order_k[2]] | after[order_v[2]]


def test_a_last_tile_read_without_the_new_row_keeps_its_place():
    """At a position that fills its last tile (24 past rows in 8-key tiles) the new row is
    read on its own, so the tiles go in position order: K tile 2 waits for tile 0's scores."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=24, tile_rows=8, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
    _, k, _ = _layer_reads(graph, 4)
    assert len(k) == 3 and not any(
        w == "L04.attn.k_write.g0" for r in graph.successors(k[2]) for w in graph.predecessors(r)
    )
    assert set(problem.preds[k[2]]) == set(graph.successors(k[0]))


def test_a_study_may_keep_long_contexts_from_streaming_in_early():
    """`early_max_tiles` N (a study of the rule before every layer streamed early): a layer
    of more than N key tiles waits for its own attention input, V tile 0 for K tile 0."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    problem = problem_from_graph(
        graph, profile, memory=True, read_ahead={**FIXED, "early_max_tiles": 2}
    )
    _, k, v = _layer_reads(graph, 4)
    q_in = set(graph.predecessors("L04.attn.q_proj.h0"))
    pred = {n: set(problem.preds[n]) for n in (*k, *v)}
    assert q_in and pred[k[0]] == pred[k[2]] == q_in
    assert not (pred[k[0]] & _previous_attention_done(graph, 4))
    assert pred[v[0]] == set(graph.successors(k[0]))


def _per_head_reads(layers: int, heads: int) -> nx.DiGraph:
    """Per layer and KV head one K and one V tile read (``params["kv_head"]``), each read
    by that head's scores or ·V only, after a Q projection fed by ``x``."""
    g = nx.DiGraph()
    g.add_node("x", kernel="host")
    for layer in range(layers):
        q = f"L{layer:02d}.attn.q_proj.h0"
        g.add_node(q, kernel="gemv")
        g.add_edge("x" if not layer else f"L{layer - 1:02d}.o", q)
        g.add_node(f"L{layer:02d}.o", kernel="gemv")
        for h in range(heads):
            for kind, reader in (("k", "scores"), ("v", "pv")):
                read, use = f"L{layer:02d}.{kind}.g{h}", f"L{layer:02d}.{reader}.g{h}"
                params = {"kind": kind, "positions": [0, 8], "kv_head": h}
                g.add_node(read, kernel="kv_read", layer=layer, params=params)
                g.add_node(use, kernel=reader, func=reader)
                g.add_edges_from([(read, use), (q, use), (use, f"L{layer:02d}.o")])
    return g


def test_kv_reads_of_one_head_follow_that_heads_attention_not_the_layers():
    """Tiles read per KV head (the cache is head-major): each head's first tiles wait
    for the previous layer's attention of that head only, so one head's tiles stream in
    while the other head's are still being read by its queries."""
    graph = _per_head_reads(layers=2, heads=2)
    preds: dict = {}
    for u, v in kv_prefetch_edges(graph):
        preds.setdefault(v, set()).add(u)
    for h in (0, 1):
        assert preds[f"L00.k.g{h}"] == preds[f"L00.v.g{h}"] == {"x"}
        done = {f"L00.scores.g{h}", f"L00.pv.g{h}"}
        assert preds[f"L01.k.g{h}"] == preds[f"L01.v.g{h}"] == done


def test_scores_run_three_tiles_ahead_of_the_v_that_frees_their_exponentials():
    """K tile t waits for the scores of tile t-2 and for what frees the EXPs of tile t-3
    (`EXP_LEAD`), not of t-2: the DMA need not wait for tile t-2's ·V, which waits for V
    tile t-2. A study may set another lead (`problem_from_graph(read_ahead=)`)."""
    for name in ("v002-spec", "v002-as-built"):
        profile = load_profile(name)
        graph = build_decode_graph("tiny", position=60, tile_rows=16, profile=profile)
        problem = problem_from_graph(graph, profile, memory=True, read_ahead=FIXED)
        _, k, _ = _layer_reads(graph, 4)
        assert len(k) == 4 and EXP_LEAD == 3  # 60 past rows in 16-key tiles

        def freed_by(tile, g=graph):  # the readers of the EXPs of a K tile's scores
            exps = {x for sc in g.successors(tile) for x in g.successors(sc)
                    if g.nodes[x]["func"] == "EXP"}  # fmt: skip
            return {r for x in exps for r in g.successors(x)}

        k = [k[0], k[3], k[1], k[2]]  # read order: the tile with the new row second
        pred = {n: set(problem.preds[n]) for n in k}
        assert pred[k[2]] == set(graph.successors(k[0]))  # scores only: t - 3 < 0
        assert pred[k[3]] == set(graph.successors(k[1])) | freed_by(k[0])
        two = problem_from_graph(graph, profile, memory=True, read_ahead={**FIXED, "exp_lead": 2})
        assert set(two.preds[k[3]]) == set(graph.successors(k[1])) | freed_by(k[1])
    # a K tile cannot wait for the ·V of its own scores: a lead below 1 is refused
    with pytest.raises(InputError, match="exp_lead must be at least 1"):
        problem_from_graph(graph, profile, memory=True, read_ahead={**FIXED, "exp_lead": 0})


@pytest.mark.parametrize("policy", ["critical-path", "heft", "lookahead"])
def test_reads_released_as_l2_allows_keep_l2_and_wait_for_room(policy):
    """The timeline releases a KV read only once L2 has room for it and the reserve (here
    ``reserve_bytes`` 1 KiB). On tiny with a 6 KiB L2 (its tiles are 256 B at most, no node
    demands more than 1 KiB) every schedule keeps L2 (the validator) and some reads start
    later than with the whole L2, where each goes once the read before it is in."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    rule = {**STREAM, "reserve_bytes": 1024}
    whole = problem_from_graph(graph, profile, memory=True, read_ahead=rule)
    small = problem_from_graph(graph, profile, memory=True, read_ahead=rule)
    reads = [n for n in small.order if graph.nodes[n]["kernel"] == "kv_read"]
    assert set(small.admit) == set(reads) and set(small.admit.values()) == {1024}
    assert max(small.demands[n]["l2"] for n in reads) <= 256
    assert max(d["l2"] for d in small.demands.values()) <= 1024
    small.capacities["l2"] = 6144
    limited = run_on_problem(make_policy(policy), small, label=policy, profile=profile.name)
    free = run_on_problem(make_policy(policy), whole, label=policy, profile=profile.name)
    assert set(limited.slots) == set(small.order)  # validated by run_on_problem
    assert any(limited.slots[n].start > free.slots[n].start for n in reads)


def test_tile_slots_keep_at_most_that_many_kv_tiles_in_l2():
    """``tile_slots``: a `KV_SLOTS` capacity of that many of the largest tile's bytes, one
    slot per read until its readers finish; the validator holds every schedule to it, so
    fewer tiles are read ahead than with the default's (tiny's tiles are 256 B: L2 holds
    thousands)."""
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    two = {**STREAM, "tile_slots": 2}
    slots = problem_from_graph(graph, profile, memory=True, read_ahead=two)
    free = problem_from_graph(graph, profile, memory=True, read_ahead=STREAM)
    reads = [n for n in graph if graph.nodes[n]["kernel"] == "kv_read"]
    tile = max(slots.demands[n]["l2"] for n in reads)
    assert slots.capacities[KV_SLOTS] == 2 * tile
    assert free.capacities[KV_SLOTS] == default_tile_slots(free.capacities["l2"], tile) * tile
    none = problem_from_graph(graph, profile, memory=True, read_ahead={**STREAM, "tile_slots": 0})
    assert KV_SLOTS not in none.capacities and none.admit == free.admit
    assert all(slots.demands[n][KV_SLOTS] == tile for n in reads)
    for policy in ("critical-path", "heft"):
        held = run_on_problem(make_policy(policy), slots, label=policy, profile=profile.name)
        most = max((b for _, b in occupancy(held, slots, KV_SLOTS)), default=0)
        assert tile <= most <= 2 * tile  # validated by run_on_problem too
        ahead = run_on_problem(make_policy(policy), free, label=policy, profile=profile.name)
        assert max(b for _, b in occupancy(ahead, slots, KV_SLOTS)) > 2 * tile


def test_tile_slots_pace_the_schedule_but_bound_nothing():
    """The tile slots are a heuristic's, like the order-only edges: the bounds are those of
    the problem without them (two slots that bind the schedule change none), and the
    hardware's problem (`without_order_edges`) has no such capacity."""
    from pccx_flow.schedule.metrics import step_bounds

    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    two = problem_from_graph(graph, profile, memory=True, read_ahead={**STREAM, "tile_slots": 2})
    none = problem_from_graph(graph, profile, memory=True, read_ahead={**STREAM, "tile_slots": 0})
    assert two.order_capacities == {KV_SLOTS} and not none.order_capacities
    assert step_bounds(two, profile)["bounds_cycles"] == step_bounds(none, profile)["bounds_cycles"]
    hardware = two.without_order_edges()
    assert KV_SLOTS not in hardware.capacities and not hardware.order_capacities
    assert all(KV_SLOTS not in dict(h.row) for h in hardware.holds)


def test_default_tile_slots_leave_one_tile_of_l2_to_the_rest():
    """E4B: 1.75 MiB of L2 holds seven 256 KiB tiles, so six slots; never fewer than one."""
    assert default_tile_slots(1_835_008, 262_144) == 6
    assert default_tile_slots(1_835_008, 300_000) == 5
    assert default_tile_slots(1_835_008, 1_835_008) == 1
    assert default_tile_slots(100, 262_144) == 1
