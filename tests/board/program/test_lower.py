"""Lowering a scheduled tiny step: one word per NPU node, batches, fences, L2, slots."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from pccx_flow.board.isa import KICK_MARKER, decode, memcpy_length_words
from pccx_flow.board.program.alloc import AllocationError
from pccx_flow.board.program.lower import lower
from pccx_flow.graph.nodes import OP_LANE
from pccx_flow.model.config import get_config

from ..conftest import lowered_graph, refuse_room


def test_one_word_per_npu_node_and_counts_match_the_graph(tiny_program):
    graph, _, _, prog = tiny_program
    npu = {n: d["op"] for n, d in graph.nodes(data=True) if d["op"] != "HOST"}
    words = [(i, prog.nodes[i]) for i, r in enumerate(prog.roles) if r == "node"]
    assert sorted(n for _, n in words) == sorted(npu)
    for i, n in words:
        assert decode(prog.words[i]).op == npu[n]
    assert prog.summary["by_opcode"] == dict(sorted(Counter(npu.values()).items()))
    hosts = [s["node"] for s in prog.steps if s["kind"] == "host"]
    assert sorted(hosts) == sorted(n for n, d in graph.nodes(data=True) if d["op"] == "HOST")


def test_batches_hold_at_most_eight_words_and_end_with_a_kick(tiny_program):
    _, _, profile, prog = tiny_program
    batches = [s for s in prog.steps if s["kind"] == "batch"]
    covered = []
    for b in batches:
        assert prog.words[b["end"] - 1] == KICK_MARKER
        assert 1 <= b["end"] - 1 - b["start"] <= profile.registers.max_batch
        covered.extend(range(b["start"], b["end"]))
    assert covered == list(range(len(prog.words)))
    assert sum(w == KICK_MARKER for w in prog.words) == len(batches)


def _epochs(prog):
    """Fence count before each word and before each host step (independent of the lowering)."""
    fences = 0
    word_epoch, host_epoch = {}, {}
    for s in prog.steps:
        if s["kind"] == "fence":
            fences += 1
        elif s["kind"] == "batch":
            for i in range(s["start"], s["end"]):
                word_epoch[i] = fences
        else:
            host_epoch[s["node"]] = fences
    return word_epoch, host_epoch, fences


def test_every_cross_engine_dependency_is_fenced(tiny_program):
    graph, _, _, prog = tiny_program
    word_of = {prog.nodes[i]: i for i, r in enumerate(prog.roles) if r == "node"}
    word_epoch, host_epoch, total = _epochs(prog)
    for u, v in graph.edges:
        du, dv = graph.nodes[u], graph.nodes[v]
        if du["op"] == "HOST":
            continue  # host steps finish before the driver issues anything after them
        eu = word_epoch[word_of[u]]
        if dv["op"] == "HOST":
            assert host_epoch[v] > eu, (u, v)
        elif OP_LANE[du["op"]] != OP_LANE[dv["op"]]:
            assert word_epoch[word_of[v]] > eu, (u, v)
        else:
            assert word_of[v] > word_of[u], (u, v)  # same engine: in-order issue
    assert prog.steps[-1]["kind"] == "fence" and total == prog.summary["fences"]


def test_l2_regions_of_live_tensors_never_overlap(tiny_program):
    graph, schedule, profile, prog = tiny_program
    order = {s.node: i for i, s in enumerate(schedule.order())}
    born, dies = {}, {}
    for n, d in graph.nodes(data=True):
        for t in d["outputs"]:
            born[t["name"]] = order[n]
            dies.setdefault(t["name"], order[n])
        for t in d["inputs"]:
            dies[t["name"]] = max(dies.get(t["name"], -1), order[n])
    regions = sorted(
        (r["addr"], r["addr"] + r["words"], t) for t, r in prog.l2.items() if "parts" not in r
    )
    total = profile.memory.l2_bytes // 16
    for a, b, _ in regions:
        assert 0 <= a < b <= total
    for i, (_, b, t) in enumerate(regions):
        for a2, _, t2 in regions[i + 1 :]:
            if a2 >= b:
                break
            # overlapping regions: lifetimes must be disjoint, except that a GEMV with accm
            # writes its output into its accumulator's region (same region, back to back)
            same = prog.l2[t] == prog.l2[t2]
            if same and (dies[t] == born[t2] or dies[t2] == born[t]):
                continue
            assert dies[t] < born[t2] or dies[t2] < born[t], (t, t2)


def test_cvo_operands_lie_within_the_sfu_reach(tiny_program):
    graph, _, profile, prog = tiny_program
    reach = profile.sfu.l2_reach_bytes // 16
    for i, ops in prog.operands.items():
        if decode(prog.words[i]).op != "CVO":
            continue
        for addr, words, *_ in list(ops["inputs"].values()) + list(ops["outputs"].values()):
            assert addr + words <= reach, prog.nodes[i]


def test_constant_slots_and_memsets(tiny_program):
    _, _, _, prog = tiny_program
    assert 0 < prog.summary["slots_used"] <= 64
    inserted = [i for i, r in enumerate(prog.roles) if r == "slot"]
    assert len(inserted) == prog.summary["slot_memsets"]
    for i in inserted:
        ins = decode(prog.words[i])
        assert ins.op == "MEMSET"
    # every GEMV points at slots written before it
    written = {}
    for i, w in enumerate(prog.words):
        if w == KICK_MARKER:
            continue
        ins = decode(w)
        if ins.op == "MEMSET":
            written[ins.fields["slot"]] = i
        elif ins.op == "GEMV":
            assert ins.fields["size_ptr"] in written and ins.fields["shape_ptr"] in written


def test_gemv_tiles_stream_from_the_ddr_image(tiny_program):
    graph, _, _, prog = tiny_program
    total = prog.ddr["total_bytes"]
    for i, stream in prog.streams.items():
        node = graph.nodes[prog.nodes[i]]
        if node["weight"] and node["op"] == "GEMV":
            w = stream["weight"]
            assert w["key"] == node["weight"]["key"]
            assert w["offset"] >= 0 and w["offset"] + w["runs"] * w["stride"] <= total


def test_a_program_that_does_not_fit_fails_in_one_line(tiny_program):
    graph, schedule, profile, _ = tiny_program
    small = dataclasses.replace(profile, memory=dataclasses.replace(profile.memory, l2_bytes=2048))
    with pytest.raises(AllocationError) as info:
        lower(graph, schedule, small, get_config("tiny"))
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("does not fit: tensor ") and "instruction" in msg and "peak" in msg


def test_a_cut_that_starts_after_layer_0_is_refused_in_one_line():
    """Its inputs enter from the decode state (state_read MEMCPY nodes, no inputs): the
    lowering read a copy's source off its inputs and raised IndexError."""
    from pccx_flow.errors import InputError
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=5, profile=profile, layers=(2, 4))
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile, "heft")
    with pytest.raises(InputError, match=r"layers 2:4 start after layer 0, .*\(--layers 0:B\)$"):
        lower(graph, schedule, profile, get_config("tiny"))


def test_a_new_kv_row_later_layers_read_is_grouped_with_no_tile():
    """A KV-sharing source layer's new row lives until the step's last layer: grouped with
    its layer's last tile it would stay in the middle of the tile stack. It is a region of
    its own (the operands that read it are split), while a K row only its own layer reads
    stays grouped with its tile (the scores read them as one operand)."""
    graph, _, _, prog = lowered_graph(position=19, tile_rows=16)
    rows = {n: {graph.nodes[r]["layer"] for r in graph.successors(n)}
            for n, a in graph.nodes(data=True) if a["kernel"] == "kv_write"}  # fmt: skip
    shared = [n for n, layers in rows.items() if len(layers) > 1]
    own = [n for n, layers in rows.items() if len(layers) == 1 and ".k_write." in n]
    assert shared and own
    grouped = {p for r in prog.l2.values() for p in r.get("parts", ())}
    assert not grouped & set(shared)
    assert set(own) <= grouped
    assert all("parts" not in prog.l2[n] for n in shared)


def test_host_steps_reach_l2_only_through_memcpy_words(tiny_program):
    """Every L2 tensor a host step reads is copied out (fenced) before it; every result an
    instruction reads is copied in after it; the MEMCPY words name the right L2 words."""
    graph, _, _, prog = tiny_program
    word_epoch, host_epoch, _ = _epochs(prog)
    slots, copy_out, copy_in = {}, {}, {}
    for i, w in enumerate(prog.words):
        if w == KICK_MARKER:
            continue
        ins = decode(w)
        f = ins.fields
        if ins.op == "MEMSET":
            slots[f["slot"]] = (f["a"], f["b"], f["c"])
        if prog.roles[i] != "host_io":
            continue
        assert ins.op == "MEMCPY"
        s = prog.streams[i]
        place = prog.l2[s["tensor"]]
        assert memcpy_length_words(*slots[f["shape_ptr"]]) == place["words"]
        assert s["bytes"] == place["words"] * 16
        if s["kind"] == "host_read":
            assert (f["from_device"], f["to_device"], f["src"]) == (0, 1, place["addr"])
            copy_out.setdefault(s["tensor"], i)
        else:
            assert (f["from_device"], f["to_device"], f["dest"]) == (1, 0, place["addr"])
            copy_in[s["tensor"]] = i
    host_at = {}  # host node -> number of words issued before it
    issued = 0
    for st in prog.steps:
        if st["kind"] == "batch":
            issued = st["end"]
        elif st["kind"] == "host":
            host_at[st["node"]] = issued
            assert "reads" not in st and "writes" not in st  # no direct L2 access
    checked = 0
    for n, d in graph.nodes(data=True):
        if d["op"] != "HOST":
            continue
        for u in graph.predecessors(n):
            du = graph.nodes[u]
            to_host = du["op"] == "MEMCPY" and du.get("func") == "logits_readback"
            if du["op"] in ("HOST", "MEMSET") or to_host:
                continue
            for t in du["outputs"]:
                if any(t["name"] == x["name"] for x in d["inputs"]):
                    assert word_epoch[copy_out[t["name"]]] < host_epoch[n], (u, n)
                    checked += 1
        for v in graph.successors(n):
            if graph.nodes[v]["op"] in ("HOST",):
                continue
            for t in d["outputs"]:
                if any(t["name"] == x["name"] for x in graph.nodes[v]["inputs"]):
                    assert copy_in[t["name"]] >= host_at[n], (n, v)
                    checked += 1
    assert checked > 0 and prog.summary["host_copies_out"] == len(copy_out)


def test_every_batch_ends_with_a_cvo_so_the_rtl_raises_done(tiny_program):
    graph, schedule, profile, prog = tiny_program
    scratch = prog.l2["done.scratch"]["addr"]
    for s in prog.steps:
        if s["kind"] != "batch":
            continue
        body = prog.words[s["start"] : s["end"] - 1]
        assert 0 < len(body) <= profile.registers.max_batch
        assert decode(body[-1]).op == "CVO"
    markers = [i for i, r in enumerate(prog.roles) if r == "done"]
    assert len(markers) == prog.summary["done_markers"] > 0
    for i in markers:
        f = decode(prog.words[i]).fields
        assert (f["src"], f["dst"], f["length"]) == (scratch, scratch, 1)
        assert decode(prog.words[i - 1]).op != "CVO"  # only where the batch lacked one
    bare = lower(graph, schedule, profile, get_config("tiny"), done_markers=False)
    assert "done" not in bare.roles and "done.scratch" not in bare.l2
    assert bare.summary["instructions"] == prog.summary["instructions"]


def test_regions_living_through_the_step_are_placed_ahead_at_the_top():
    """E4B layers 0-2 at position 2047 (four key tiles a layer): the regions that live while
    more than a quarter of the step's KV tiles come and go (PLE inputs, AltUp mixes, RoPE
    tables) get reserved words in the top 1/LONG_LIVED_SHARE of L2 before the linear scan,
    no two of them with overlapping lives share a word, and the program lowers with every
    reservation claimed."""
    from itertools import combinations

    from pccx_flow.board.program.addresses import LONG_LIVED_SHARE
    from pccx_flow.board.program.lower import _Lowering
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile, config = load_profile("v002-spec"), get_config("e4b")
    graph = build_decode_graph(config, position=2047, profile=profile, layers=(0, 3))
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile, "heft")
    lw = _Lowering(graph, [s.node for s in schedule.order()], profile, config)
    total = lw.l2.total_words
    # large regions stack a whole KV tile apart: 512 rows of one head's 256 BF16 keys, 256 KiB
    assert lw.l2.slot_words * 16 == 512 * config.head_dim * 2
    planned = dict(lw.promised)
    assert len(planned) >= 10 and len(lw.l2.reserved) == len(planned)
    assert all(addr >= total - total // LONG_LIVED_SHARE for addr, _ in planned.values())
    # the tiles' slot grid starts right under them, not under the whole top share
    assert lw.l2.ceiling == min(addr for addr, _ in planned.values())
    for (a, (x, w)), (b, (y, v)) in combinations(planned.items(), 2):
        lives_meet = lw.needed_at[a] <= lw.chain_last[b] and lw.needed_at[b] <= lw.chain_last[a]
        assert not (lives_meet and x < y + v and y < x + w), (a, b)
    for n in lw.order:
        lw.node(n)
    assert not lw.promised and not lw.l2.reserved  # every planned region was claimed


def _node_sequence(prog) -> list[str]:
    """The nodes of the program's instruction words, each once, in issue order."""
    nodes = [n for n, role in zip(prog.nodes, prog.roles, strict=True) if role == "node"]
    return list(dict.fromkeys(nodes))


def test_a_node_l2_has_no_hole_for_is_issued_just_before_its_first_reader(tiny_ckpt, monkeypatch):
    """A schedule keeps live bytes within L2, not a hole per tensor: E4B's `random` at 4095
    left no hole for a 256 KiB KV tile read 187 nodes ahead of its reader. The lowering
    then issues that node right before its first reader, and the program still computes
    the step (float64 emulation against the reference decode)."""
    from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference

    graph, schedule, profile, before = lowered_graph("v002-spec", "critical-path")
    node = "L03.attn.k_read.g0"  # read 916 nodes after it is issued (tiny, position 9)
    readers = set(graph.successors(node))

    def refused(lw, n):  # no room until it is issued right before a reader
        return n == node and lw.order[lw.pos[n] + 1] not in readers

    seen, told = refuse_room(monkeypatch, refused), []
    prog = lower(graph, schedule, profile, get_config("tiny"), on_retry=told.append)
    assert seen == [node, node]  # the "bottom" and "above-reach" placements, in the
    assert prog.summary["deferred"] == [node]  # schedule's order; then deferred once
    assert len(told) == 2 and all(node in line and "\n" not in line for line in told)
    assert told[1].endswith("issued just before its first reader (1 of at most 8)")
    assert "deferred" not in before.summary
    order, issued = [s.node for s in schedule.order()], _node_sequence(prog)
    after = issued[issued.index(node) + 1]
    assert after in readers
    assert after == next(n for n in order if n in readers)  # the first reader
    assert [n for n in issued if n != node] == [n for n in _node_sequence(before) if n != node]
    r = emulate_against_reference(prog, tiny_ckpt, default_tokens(10, tiny_ckpt.config.vocab),
                                  precision="float64")  # fmt: skip
    assert r["max_abs_diff"] <= 1e-9 and r["argmax_same"] and r["ok"], r["max_abs_diff"]


def test_placement_gives_up_with_the_first_error_after_max_deferred_nodes(
    tiny_program, monkeypatch
):
    from pccx_flow.board.program.lower import MAX_DEFERRED

    graph, schedule, profile, _ = tiny_program
    seen = refuse_room(monkeypatch, lambda lw, n: n.endswith("k_read.g0"))
    with pytest.raises(AllocationError) as info:
        lower(graph, schedule, profile, get_config("tiny"))
    assert str(info.value).startswith(f"does not fit: tensor {seen[0]} ")  # the first
    # two placements in the schedule's order, then one per node deferred (each a new node)
    assert len(seen) == 2 + MAX_DEFERRED and len(set(seen[2:])) == MAX_DEFERRED


def test_a_node_right_before_its_reader_is_not_deferred(tiny_program, monkeypatch):
    graph, schedule, profile, _ = tiny_program
    order = [s.node for s in schedule.order()]
    node = next(
        n
        for n, m in zip(order, order[1:], strict=False)
        if m in set(graph.successors(n)) and graph.nodes[n]["op"] != "HOST"
    )
    seen = refuse_room(monkeypatch, lambda lw, n: n == node)
    with pytest.raises(AllocationError, match=f"node {node}"):
        lower(graph, schedule, profile, get_config("tiny"))
    assert seen == [node, node]  # no deferral: it is issued right before its reader
