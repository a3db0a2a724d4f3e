"""The decode-step DAG: structure per layer kind, attributes, tiling, bytes, both semantics.

Expected node counts are derived here from the model's structure (tiles = ceil(rows /
tile_rows), CVO runs of at most 2,048 elements, the RMSNorm instruction sequence), not from
the builder's helpers.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest

from pccx_flow.errors import ConfigError, InputError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.graph.nodes import BLOCKS, LANE_CLASSES, OPS, lane_can_run
from pccx_flow.model.config import (
    get_config,
    is_global_layer,
    is_sparse_layer,
    kv_source_layer,
    owns_kv,
    rope_theta,
)
from pccx_flow.model.tensors import tensor_manifest

ATTRS = [
    "layer", "block", "op", "func", "flags", "inputs", "outputs", "lane_class", "macs",
    "weight_bytes", "act_bytes", "elements", "weight", "kernel", "params",
]  # fmt: skip

CVO_MAX = 2048
# RMSNorm of a vector of <= 2,048 elements: square, REDUCE_SUM, mean+eps, SQRT, RECIP,
# SCALE, ×γ (one each); without γ one fewer.
NORM = 7
NORM_NO_GAMMA = 6


def tiles(n: int, t: int) -> int:
    return math.ceil(n / t)


def serial_tiles(n: int, t: int) -> int:
    """Small matrices on the serial path use at least one tile per weight port (2)."""
    return max(tiles(n, t), min(2, n))


def expected_layer_counts(cfg, layer: int, semantics: str, position: int, t: int) -> dict:
    """Nodes per block of one layer, from the spec's structure."""
    g3 = semantics == "gemma3n"
    D, F, S = cfg.hidden, cfg.ffn, cfg.altup_streams
    assert D <= CVO_MAX  # one CVO run per D-vector on both presets
    start = 0
    if g3 and not is_global_layer(cfg, layer):
        start = max(0, position - cfg.sliding_window + 1)
    n_keys = position + 1 - start
    kt = tiles(n_keys, t)
    # exp, rsum per key tile, then SCALE (one tile) or the host's split-K combine (several)
    softmax = 2 * kt + 1
    per_q_head = 1 + NORM + 1 + kt + softmax + kt  # proj, norm, rope, scores, softmax, ·V
    attn = 3 + cfg.n_q_heads * per_q_head  # rope phase, sin, cos
    if owns_kv(cfg, layer):
        attn += cfg.n_kv_heads * (1 + NORM + 1)  # K proj, norm, rope
        attn += cfg.n_kv_heads * (1 + (NORM_NO_GAMMA if g3 else 0))  # V proj (+ V norm)
        attn += 2 * cfg.n_kv_heads  # K and V cache writes, one per KV head
    # K and V reads of earlier rows, one per key tile and KV head
    attn += 2 * cfg.n_kv_heads * tiles(position - start, t)
    attn += tiles(D, t) * cfg.n_kv_heads  # W_o row tiles × one input chunk per KV group
    ffn_runs = tiles(F, t * (CVO_MAX // t))  # gate/up tiles taken in 2,048-output runs
    ffn = NORM + 2 * tiles(F, t) + 2 * ffn_runs + tiles(D, t) * ffn_runs + NORM + 1
    if is_sparse_layer(cfg, layer):
        two_sums = 2 if ffn_runs > 1 else 0
        # mean: rsum per run (+Σ), SCALE; var: (g-μ)² per run, rsum per run (+Σ), SCALE, SQRT;
        # cutoff; max(g - c, 0) per run
        ffn += ffn_runs + 1 + ffn_runs + ffn_runs + 1 + 1 + 1 + ffn_runs + two_sums
    return {
        "const": 1,
        # router norm, router GEMV tiles, tanh, coef GEMV, S mix rows
        "altup_pred": NORM + serial_tiles(S, t) + 2 + S,
        "residual": NORM + NORM + 3,  # input norm, post-attn norm, add, merge, ×1/√2
        "laurel": serial_tiles(cfg.laurel_rank, t) + tiles(D, t) + NORM + 1,
        "attn": attn,
        "ffn": ffn,
        # scale (pccx: activated / gemma3n: corrected row 0 × altup_scale), innovation,
        # router norm, router tiles, tanh, coefs, +1, S corrected rows
        "altup_corr": 2 + NORM + serial_tiles(S, t) + 3 + S,
        "ple_mix": serial_tiles(cfg.ple_dim, t) + 1 + 1 + tiles(D, t) + NORM + 1,
    }


def layer_counts(graph) -> dict[int, Counter]:
    out: dict[int, Counter] = defaultdict(Counter)
    for _, a in graph.nodes(data=True):
        out[a["layer"]][a["block"]] += 1
    return out


@pytest.fixture(scope="module")
def e4b_1023():
    return build_decode_graph("e4b", position=1023)


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
@pytest.mark.parametrize(("position", "tile_rows"), [(0, 512), (5, 512), (9, 16), (20, 8)])
def test_tiny_layer_counts_follow_the_structure(semantics, position, tile_rows):
    cfg = get_config("tiny")
    g = build_decode_graph(cfg, semantics=semantics, position=position, tile_rows=tile_rows)
    counts = layer_counts(g)
    for i in range(cfg.n_layers):
        want = expected_layer_counts(cfg, i, semantics, position, tile_rows)
        assert dict(counts[i]) == want, f"layer {i}"


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_e4b_layer_kinds_follow_the_structure(semantics):
    cfg = get_config("e4b")
    g = build_decode_graph(cfg, semantics=semantics, position=700)
    counts = layer_counts(g)
    # sparse local own-KV, sparse global, dense local own, dense global own,
    # shared local (source 18), shared global (source 19)
    for i in (0, 4, 10, 19, 25, 34):
        assert dict(counts[i]) == expected_layer_counts(cfg, i, semantics, 700, 512), i


def test_e4b_node_count_is_in_budget(e4b_1023):
    assert 3_000 <= e4b_1023.number_of_nodes() <= 16_000


def test_graph_attributes(e4b_1023):
    g = e4b_1023.graph
    assert g["config"] == "e4b" and g["semantics"] == "pccx"
    assert g["position"] == 1023 and g["tile_rows"] == 512 and g["layers"] == [0, 35]
    assert g["config_dict"] == get_config("e4b").to_dict()
    assert g["outputs"] == ["logits"]
    commits = {(c["cache_layer"], c["kind"]) for c in g["kv_commits"]}
    assert commits == {(i, k) for i in range(20) for k in "kv"}


def test_every_node_has_the_contract_attributes(e4b_1023):
    for n, a in e4b_1023.nodes(data=True):
        assert set(ATTRS) <= set(a), n
        assert a["op"] in OPS and a["block"] in BLOCKS and a["lane_class"] in LANE_CLASSES
        assert lane_can_run(a["lane_class"], a["op"]), n
        assert isinstance(a["params"], dict) and isinstance(a["flags"], dict)


def test_edges_carry_the_tensors_they_move(e4b_1023):
    g = e4b_1023
    for u, v, e in g.edges(data=True):
        written = {t["name"]: t for t in g.nodes[u]["outputs"]}
        read = {t["name"] for t in g.nodes[v]["inputs"]}
        assert e["tensor"] in written and set(e["tensors"]) <= read & set(written)
        sizes = {"float32": 4, "float16": 2}
        want = sum(
            math.prod(written[n]["shape"]) * sizes[written[n]["dtype"]] for n in e["tensors"]
        )
        assert e["bytes"] == want


def test_ops_without_an_instruction_are_host_nodes():
    g = build_decode_graph("tiny", position=2)
    host_funcs = {a["func"] for _, a in g.nodes(data=True) if a["op"] == "HOST"}
    for f in ("tanh", "softcap", "add", "sub", "mul", "square", "rope_combine", "altup_mix",
              "altup_correct", "sub_relu", "ple_write"):  # fmt: skip
        assert f in host_funcs, f
    # every tanh-containing, element-wise two-operand or mixing step is on the host lane
    for _, a in g.nodes(data=True):
        if a["kernel"] in ("tanh", "softcap", "add", "sub", "mul", "altup_mix", "rope_combine"):
            assert a["op"] == "HOST" and a["lane_class"] == "host"
    funcs = {a["func"] for _, a in g.nodes(data=True) if a["op"] == "CVO"}
    assert funcs == {"EXP", "SQRT", "GELU", "SIN", "COS", "REDUCE_SUM", "SCALE", "RECIP"}


def test_instruction_limits(e4b_1023):
    for n, a in e4b_1023.nodes(data=True):
        if a["op"] == "CVO":
            assert a["elements"] <= CVO_MAX, n
            assert all(math.prod(t["shape"]) <= CVO_MAX for t in a["outputs"]), n
        if a["op"] == "GEMV":
            assert all(math.prod(t["shape"]) <= 512 for t in a["outputs"]), n


def test_gemv_tiles_stream_every_used_matrix_exactly_once(e4b_1023):
    """Per matrix: tiles cover rows × cols once; bytes and MACs add up to the stored tensor."""
    cfg = get_config("e4b")
    specs = {s.key: s for s in tensor_manifest(cfg)}
    covered: dict[str, int] = Counter()
    wbytes: dict[str, int] = Counter()
    for n, a in e4b_1023.nodes(data=True):
        if a["op"] != "GEMV" or not a["weight"]:
            continue
        w = a["weight"]
        spec = specs[w["key"]]
        out_dim, in_dim = spec.shape if a["params"]["layout"] == "out_in" else spec.shape[::-1]
        r0, r1 = w["rows"]
        c0, c1 = w.get("cols", [0, in_dim])
        assert 0 <= r0 < r1 <= out_dim and 0 <= c0 < c1 <= in_dim, n
        assert r1 - r0 <= 512 and a["macs"] == (r1 - r0) * (c1 - c0), n
        per = (r1 - r0) * (c1 - c0)
        assert a["weight_bytes"] == (
            per // 2 + 4 * (r1 - r0) if spec.storage == "int4" else 4 * per
        )
        covered[w["key"]] += per
        wbytes[w["key"]] += a["weight_bytes"] - (4 * (r1 - r0) if spec.storage == "int4" else 0)
    for key, spec in specs.items():
        n = math.prod(spec.shape)
        if key.endswith(("k_proj.weight", "v_proj.weight")) and not spec.used:
            assert key not in covered
        elif len(spec.shape) == 2 and key != "embed_tokens_per_layer.weight":
            # the W_ple table is a row fetch, not a GEMV; the AltUp router is read twice per
            # layer (prediction §4.A and correction §4.E)
            times = 2 if key.endswith("altup.modality_router.weight") else 1
            assert covered[key] == times * n, key
            assert wbytes[key] == times * (n // 2 if spec.storage == "int4" else 4 * n), key


@pytest.mark.parametrize(
    ("tile_rows", "row_align"),
    [(264, 1), (320, 1), (384, 1), (448, 1), (512, 1), (301, 1), (300, 8), (333, 8)],
)
def test_tiles_end_on_whole_l2_words(tile_rows, row_align):
    """A program reads the tiles of a matrix, of a chain of accumulating GEMVs or of a
    head's keys as one operand of contiguous parts, so every tile but the last ends on a
    16-byte word: 4 float32 rows on the spec target, 8 BF16 as built (`row_align` 8). Split
    evenly, 2048 rows in tiles of at most 384 came in 342; tiles of 300 rows as built ended
    mid-word; `emit` stopped on both. Rounding never costs a split matrix a tile (AltUp's
    4-row router stays in two tiles of 2 rows, on both weight ports), no tile holds more
    than `tile_rows`, and the graph records `tile_rows` as asked."""
    align = math.lcm(row_align, 4)
    g = build_decode_graph("e4b", position=700, tile_rows=tile_rows, row_align=row_align,
                           layers=(0, 1))  # fmt: skip
    assert g.graph["tile_rows"] == tile_rows
    tiles: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for n, a in g.nodes(data=True):
        if a["op"] == "GEMV" and a["weight"] and ".t" in n:
            tiles[n.split(".t", 1)[0]].add(tuple(a["weight"]["rows"]))
        elif ".scores." in n and ".t" in n:  # one score per key of the tile
            r = math.prod(a["outputs"][0]["shape"])
            tiles[n.rsplit(".t", 1)[0]].add((int(n.rsplit(".t", 1)[1]), r))
    split = {m: sorted(rows) for m, rows in tiles.items() if len(rows) > 1}
    assert any(m.endswith("laurel.right") for m in split) and any("o_proj" in m for m in split)
    assert any(".scores." in m for m in split)
    for m, ranges in split.items():
        sizes = [b - a for a, b in ranges] if ".scores." not in m else [r for _, r in ranges]
        assert max(sizes) <= tile_rows, m
        if sum(sizes) >= align * len(sizes):  # room for whole words in every tile
            assert all(r % align == 0 for r in sizes[:-1]), (m, sizes)
        else:
            assert m.endswith("router") and row_align == 1, (m, sizes)


def test_sparse_down_records_density_and_both_byte_figures(e4b_1023):
    down = [a for n, a in e4b_1023.nodes(data=True) if ".ffn.down." in n]
    sparse = [a for a in down if a["layer"] < 10]
    dense = [a for a in down if a["layer"] >= 10]
    assert sparse and dense
    assert all(a["params"]["expected_density"] == 0.05 for a in sparse)
    assert all("expected_density" not in a["params"] for a in dense)
    for a in sparse:
        rows = a["weight"]["rows"][1] - a["weight"]["rows"][0]
        assert a["params"]["sparse_weight_bytes"] < a["weight_bytes"]
        assert a["params"]["sparse_weight_bytes"] >= 4 * rows


def test_rope_theta_cycle_and_attention_flags(e4b_1023):
    g = e4b_1023
    for i in range(35):
        a = g.nodes[f"L{i:02d}.const.theta"]
        assert a["op"] == "MEMSET" and a["params"]["value"] == rope_theta(get_config("e4b"), i)
        assert a["params"]["value"] == (1e6 if i % 5 == 4 else 1e4)
    scores = [a for _, a in g.nodes(data=True) if a["kernel"] == "attn_scores"]
    assert scores and all(a["flags"] == {"findemax": 1} and a["op"] == "GEMV" for a in scores)
    exps = [a for _, a in g.nodes(data=True) if a["func"] == "EXP"]
    assert exps and all(a["flags"] == {"sub_emax": 1} for a in exps)
    # no 1/sqrt(d) anywhere between the scores and the softmax: EXP reads the scores directly
    for n, a in g.nodes(data=True):
        if a["func"] == "EXP":
            assert g.nodes[next(iter(g.predecessors(n)))]["kernel"] in ("attn_scores", "max")


def test_kv_sharing_and_kv_bytes(e4b_1023):
    g, cfg = e4b_1023, get_config("e4b")
    for i in range(35):
        nodes = [a for _, a in g.nodes(data=True) if a["layer"] == i]
        kinds = Counter(a["kernel"] for a in nodes)
        keys = {(a["weight"] or {}).get("key", "") for a in nodes}
        if owns_kv(cfg, i):
            # one K and one V row per KV head
            assert kinds["kv_write"] == 2 * cfg.n_kv_heads
            assert f"layers.{i}.self_attn.k_proj.weight" in keys
        else:
            assert kinds["kv_write"] == 0
            assert not any(k.endswith(("k_proj.weight", "v_proj.weight")) for k in keys)
        reads = [a for a in nodes if a["kernel"] == "kv_read"]
        for kind in ("k", "v"):  # the 1,023 past rows in two 512-key tiles per KV head
            for head in range(cfg.n_kv_heads):
                spans = [
                    a["params"]["positions"] for a in reads
                    if (a["params"]["kind"], a["params"]["kv_head"]) == (kind, head)
                ]  # fmt: skip
                assert spans == [[0, 512], [512, 1023]]
        for a in reads:
            assert a["params"]["cache_layer"] == kv_source_layer(cfg, i)
            a0, a1 = a["params"]["positions"]
            assert a["act_bytes"] == (a1 - a0) * cfg.head_dim * 2  # one head's past rows, f16
            assert a["outputs"][0]["dtype"] == "float16"
    assert kv_source_layer(cfg, 25) == 18 and kv_source_layer(cfg, 24) == 19


def test_ple_writes_only_shadow_rows():
    g = build_decode_graph("tiny", position=1)
    writes = [(n, a) for n, a in g.nodes(data=True) if a["kernel"] == "ple_write"]
    assert len(writes) == 10
    for n, a in writes:
        assert a["params"]["rows"] == [1, 2, 3] and len(a["outputs"]) == 3
        srcs = [g.nodes[p] for p in g.predecessors(n) if g.nodes[p]["kernel"] == "altup_correct"]
        assert sorted(s["params"]["row"] for s in srcs) == [1, 2, 3]


def test_gemma3n_has_the_extra_nodes():
    cfg = get_config("tiny")
    p = build_decode_graph(cfg, semantics="pccx", position=6)
    q = build_decode_graph(cfg, semantics="gemma3n", position=6)
    pk = Counter(a["kernel"] for _, a in p.nodes(data=True))
    qk = Counter(a["kernel"] for _, a in q.nodes(data=True))
    # V norm (no γ) per KV head of each own-KV layer, the AltUp init rescale and the floors
    assert pk["max_const"] == 0 and qk["max_const"] == 6  # 3 init rescales + 3 final matches
    v_norms = [n for n in q if ".v_norm." in n]
    assert len(v_norms) == cfg.first_kv_shared_layer * cfg.n_kv_heads * NORM_NO_GAMMA
    assert any(n.startswith("pre.altup_init.rescale") for n in q)
    assert not any(n.startswith("pre.altup_init.rescale") for n in p)
    ropes = {a["params"]["pairing"] for _, a in q.nodes(data=True) if a["kernel"] == "rope_combine"}
    assert ropes == {"split_half"}
    assert {
        a["params"]["pairing"] for _, a in p.nodes(data=True) if a["kernel"] == "rope_combine"
    } == {"interleaved"}
    # float32 KV, and the sliding window (tiny: 4) on local layers only
    reads = {
        a["layer"]: a
        for _, a in q.nodes(data=True)
        if a["kernel"] == "kv_read" and a["params"]["kind"] == "k"
    }
    assert reads[0]["outputs"][0]["dtype"] == "float32"
    assert reads[0]["params"]["positions"] == [3, 6]  # keys 3..6: the last 4 positions
    assert reads[4]["params"]["positions"] == [0, 6]  # global layer: every position
    assert reads[8]["params"]["positions"] == [3, 6]  # KV-sharing local layer too

    # ids: pccx clips both tables, gemma3n leaves the main id and zeroes an out-of-range PLE id
    def rules(g):
        return {
            n: a["params"]["id_rule"] for n, a in g.nodes(data=True) if a["kernel"] == "embed_row"
        }

    assert rules(p) == {"pre.embed.fetch": "clip", "pre.ple_pre.fetch": "clip"}
    assert rules(q) == {"pre.embed.fetch": "none", "pre.ple_pre.fetch": "zero_if_oob"}

    # both semantics divide the gate's variance by N (population std, spec 002 §4)
    def var_scale(g):
        return {a["params"]["scale"] for n, a in g.nodes(data=True) if n.endswith("ffn.var")}

    assert var_scale(p) == var_scale(q) == {1.0 / cfg.ffn}


def test_cut_graph_reads_crossing_values_from_the_state():
    cfg = get_config("tiny")
    g = build_decode_graph(cfg, position=4, layers=(6, 9))
    reads = {n: a["params"] for n, a in g.nodes(data=True) if a["kernel"] == "state_read"}
    assert {p["field"] for p in reads.values()} == {"xs", "pli", "kv_new"}
    assert sorted(p["row"] for p in reads.values() if p["field"] == "xs") == [0, 1, 2, 3]
    assert sorted(p["layer"] for p in reads.values() if p["field"] == "pli") == [6, 7, 8]
    # layers 6..8 are local KV-sharing layers: they read layer 3's new row, once per kind
    # and KV head
    kv = [(p["cache_layer"], p["kind"], p["kv_head"])
          for p in reads.values() if p["field"] == "kv_new"]  # fmt: skip
    assert sorted(kv) == [(3, "k", 0), (3, "k", 1), (3, "v", 0), (3, "v", 1)]
    assert not any(a["block"] in ("embed", "final") for _, a in g.nodes(data=True))
    assert g.graph["outputs"] == [
        "L08.altup_corr.correct.r0",
        "L08.xs.r1",
        "L08.xs.r2",
        "L08.xs.r3",
    ]
    assert g.graph["kv_commits"] == []
    head = build_decode_graph(cfg, position=4, layers=(0, 2))
    assert {a["layer"] for _, a in head.nodes(data=True)} == {-1, 0, 1}
    assert not any(a["block"] == "final" for _, a in head.nodes(data=True))


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"position": 64}, InputError, "position 64 out of range"),
        ({"position": -1}, InputError, "out of range"),
        ({"semantics": "hf"}, ConfigError, "unknown semantics"),
        ({"tile_rows": 4}, InputError, "tile_rows 4 out of range"),
        ({"tile_rows": 1024}, InputError, "out of range"),
        ({"layers": (3, 3)}, InputError, "layers (3, 3) out of range"),
        ({"layers": (0, 11)}, InputError, "out of range"),
        ({"layers": "all"}, InputError, "must be a pair"),
    ],
)
def test_bad_arguments_raise_typed_errors(kwargs, error, text):
    with pytest.raises(error, match=None) as info:
        build_decode_graph("tiny", **kwargs)
    assert text in str(info.value) and "\n" not in str(info.value)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset"):
        build_decode_graph("e2b")


def test_profile_annotation_sets_cycles():
    from pccx_flow.hardware.profile import load_profile

    g = build_decode_graph("tiny", position=1, profile=load_profile("v002-spec"))
    assert g.graph["profile"] == "v002-spec"
    assert all(isinstance(a["cycles"], int) and a["cycles"] >= 1 for _, a in g.nodes(data=True))
