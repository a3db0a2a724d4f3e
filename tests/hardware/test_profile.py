"""Profiles carry the numbers of pccx-v002.md, and bad user files fail with one precise line."""

from __future__ import annotations

import json
import os
import re
import tomllib
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import ProfileError
from pccx_flow.graph.nodes import CVO_FUNCS, LANE_CLASSES
from pccx_flow.hardware.cost import node_cycles
from pccx_flow.hardware.profile import MAX_PROFILE_BYTES, TAGS, list_profiles, load_profile

BUILTINS = ("v002-as-built", "v002-spec")


def _builtin_text(name: str) -> str:
    return (resources.files("pccx_flow.hardware") / "profiles" / f"{name}.toml").read_text()


def test_list_profiles_names_the_two_builtins():
    assert list_profiles() == list(BUILTINS)


def test_spec_profile_numbers_match_pccx_v002_md():
    p = load_profile("v002-spec")
    assert (p.core_hz, p.axi_hz) == (400_000_000, 250_000_000)
    assert p.lanes == {"gemv": 4, "gemm": 1, "sfu": 1, "dma": 1, "ctrl": 1, "host": 1}
    assert p.pools == {"weight_port": 2}
    assert (p.gemv.macs_per_cycle, p.gemv.latency_cycles) == (32, 5)
    assert p.gemv.port_bytes_per_axi_clock == 16
    assert (p.gemm.macs_per_cycle, p.gemm.latency_cycles, p.gemm.ports) == (2048, 64, 2)
    assert p.sfu.latency_cycles["EXP"] == 4
    assert p.sfu.latency_cycles["SQRT"] == 3
    assert p.sfu.latency_cycles["RECIP"] == 4
    assert p.sfu.latency_cycles["SCALE"] == 3
    assert p.sfu.latency_cycles["GELU"] == 12
    assert p.sfu.latency_cycles["SIN"] == p.sfu.latency_cycles["COS"] == 16
    assert set(p.sfu.latency_cycles) == set(CVO_FUNCS)
    assert (p.sfu.cycles_per_element, p.sfu.reduce_sum_cycles_per_element) == (3.1, 2.1)
    assert p.sfu.max_elements == 2048
    assert p.dma.bytes_per_axi_clock == 16 and p.dma.descriptors_in_flight == 1
    assert p.memory.ddr_peak_bytes_per_second == 19.2e9
    assert p.memory.ddr_effective_bytes_per_second == 10e9
    assert p.memory.l2_bytes == 114_688 * 16 == int(1.75 * 2**20)
    assert p.memory.const_cache_slots == 64
    assert (p.host.cores, p.host.clock_hz) == (4, 1_330_000_000)


def test_as_built_profile_numbers_match_pccx_v002_md():
    p = load_profile("v002-as-built")
    assert (p.core_hz, p.axi_hz) == (100_000_000, 100_000_000)
    assert p.lanes["gemv"] == 2 and p.pools["weight_port"] == 2
    assert (p.sfu.cycles_per_element, p.sfu.reduce_sum_cycles_per_element) == (3.1, 2.1)
    assert p.sfu.l2_reach_bytes == 256 * 1024
    assert p.provenance["lanes.gemv"].tag == "rtl"
    assert p.provenance["clocks.core_hz"].tag == "board"


def test_register_map_is_data():
    r = load_profile("v002-as-built").registers
    assert (r.base, r.window_bytes) == (0xA000_0000, 64 * 1024)
    assert (r.instruction_offset, r.kick_offset, r.status_offset) == (0x000, 0x008, 0x010)
    assert sorted(r.status_offset_alternatives) == [0x004, 0x008]
    assert (r.busy_bit, r.done_bit, r.max_batch) == (0, 1, 8)
    assert sorted(r.datamover_pages.values()) == [0xA000_0000 + k * 0x1000 for k in range(1, 7)]


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_number_has_a_provenance_tag_and_a_note(name):
    raw = tomllib.loads(_builtin_text(name))
    assert raw["profile"]["name"] == name

    def leaves(table, prefix):
        for key, value in table.items():
            if isinstance(value, dict) and "value" not in value:
                yield from leaves(value, f"{prefix}{key}.")
            elif isinstance(value, dict):
                yield f"{prefix}{key}", value

    found = dict(leaves({k: v for k, v in raw.items() if k != "profile"}, ""))
    assert len(found) > 50
    for label, entry in found.items():
        assert entry.get("tag") in TAGS and entry["tag"] != "user", label
        assert entry.get("note"), label
    assert set(load_profile(name).provenance) == set(found)


@pytest.mark.parametrize("name", BUILTINS)
def test_lane_ids_are_stable_and_follow_lane_classes(name):
    p = load_profile(name)
    ids = p.lane_ids()
    assert len(ids) == sum(p.lanes.values()) and len({i for i, _ in ids}) == len(ids)
    order = [LANE_CLASSES.index(c) for _, c in ids]
    assert order == sorted(order)
    assert ids[0] == ("gemv0", "gemv") and ids[-1] == ("host0", "host")


def test_to_dict_is_json_and_keeps_provenance():
    d = json.loads(json.dumps(load_profile("v002-spec").to_dict()))
    assert d["name"] == "v002-spec" and d["lanes"]["gemv"] == 4
    assert d["provenance"]["host.op_overhead_seconds"]["tag"] == "assumed"
    assert d["registers"]["datamover_pages"]["hp2"] == 0xA000_3000


def test_user_file_copy_of_a_builtin_loads(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(_builtin_text("v002-spec").replace('"v002-spec"', '"mine"', 1))
    p = load_profile(path)
    assert p.name == "mine" and p.lanes == load_profile("v002-spec").lanes
    assert load_profile(str(path)).name == "mine"


def test_user_file_extends_a_builtin_with_bare_numbers(tmp_path):
    path = tmp_path / "fast-sfu.toml"
    path.write_text(
        '[profile]\nname = "fast-sfu"\nextends = "v002-spec"\n'
        "[sfu]\ncycles_per_element = 1.0\n"
        '[lanes]\nhost = { value = 2, tag = "assumed", note = "two driver threads" }\n'
    )
    p = load_profile(path)
    base = load_profile("v002-spec")
    assert p.sfu.cycles_per_element == 1.0 and p.provenance["sfu.cycles_per_element"].tag == "user"
    assert p.lanes["host"] == 2 and p.lanes["gemv"] == 4
    assert p.sfu.latency_cycles == base.sfu.latency_cycles and p.core_hz == base.core_hz


def _error(tmp_path, text: str) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def _spec_with(old: str, new: str) -> str:
    text = _builtin_text("v002-spec")
    assert old in text
    return text.replace(old, new, 1)


def test_unknown_builtin_lists_the_builtins():
    with pytest.raises(ProfileError, match=r"unknown hardware profile 'v003'.*v002-as-built"):
        load_profile("v003")


def test_unreadable_file(tmp_path):
    with pytest.raises(ProfileError, match=r"cannot read profile file .*nope\.toml"):
        load_profile(tmp_path / "nope.toml")


def test_syntax_error_names_the_line(tmp_path):
    message = _error(tmp_path, '[profile]\nname = "x"\n[clocks\ncore_hz = 1\n')
    assert "TOML syntax error" in message and "line 3" in message


def test_missing_field_names_it(tmp_path):
    text = _spec_with("macs_per_cycle = { value = 32,", "macs_per_cyclez = { value = 32,")
    assert "unknown field 'gemv.macs_per_cyclez'" in _error(tmp_path, text)
    text = "\n".join(
        line for line in _builtin_text("v002-spec").splitlines() if not line.startswith("axi_hz")
    )
    assert "missing field 'clocks.axi_hz'" in _error(tmp_path, text)


def test_missing_table_names_it(tmp_path):
    text = _builtin_text("v002-spec").replace("[registers.datamover_pages]", "[other_pages]")
    assert "unknown table [other_pages]" in _error(tmp_path, text)


def test_negative_clock(tmp_path):
    text = _spec_with("core_hz = { value = 400_000_000,", "core_hz = { value = -400_000_000,")
    assert "field 'clocks.core_hz' must be a positive finite number, got -400000000" in _error(
        tmp_path, text
    )
    text = _spec_with("axi_hz = { value = 250_000_000,", "axi_hz = { value = inf,")
    assert "field 'clocks.axi_hz' must be a positive finite number, got inf" in _error(
        tmp_path, text
    )


def test_zero_lane_count(tmp_path):
    text = _spec_with('gemv = { value = 4, tag = "spec"', 'gemv = { value = 0, tag = "spec"')
    assert "field 'lanes.gemv' must be a positive integer, got 0" in _error(tmp_path, text)


def test_unknown_lane_class(tmp_path):
    text = _spec_with("[lanes]\n", '[lanes]\ntpu = { value = 1, tag = "user" }\n')
    message = _error(tmp_path, text)
    assert "unknown lane class 'lanes.tpu'" in message and "gemv, gemm, sfu" in message


def test_wrong_type(tmp_path):
    text = _spec_with("max_batch = { value = 8,", 'max_batch = { value = "8",')
    assert "field 'registers.max_batch' must be a positive integer, got '8' (str)" in _error(
        tmp_path, text
    )
    text = _spec_with("l1_lanes = { value = 32,", "l1_lanes = { value = true,")
    assert "field 'memory.l1_lanes' must be a positive integer, got True" in _error(tmp_path, text)


def test_bad_provenance_tag(tmp_path):
    text = _spec_with('ports = { value = 2, tag = "spec"', 'ports = { value = 2, tag = "guess"')
    assert "field 'gemm.ports' has tag 'guess'" in _error(tmp_path, text)


def test_missing_cvo_latency(tmp_path):
    text = "\n".join(
        line for line in _builtin_text("v002-spec").splitlines() if not line.startswith("GELU")
    )
    assert "missing field 'sfu.latency_cycles.GELU'" in _error(tmp_path, text)


def test_extends_unknown_base(tmp_path):
    message = _error(tmp_path, '[profile]\nname = "x"\nextends = "v001"\n')
    assert "'profile.extends' = 'v001' is not a built-in" in message


def test_register_offsets_must_lie_in_the_window(tmp_path):
    text = _spec_with("status_offset = { value = 0x010,", "status_offset = { value = 0x1_0000,")
    assert "'registers.status_offset' = 0x10000 lies outside" in _error(tmp_path, text)
    text = _spec_with("done_bit = { value = 1,", "done_bit = { value = 0,")
    assert "must be two different bits" in _error(tmp_path, text)


_LEAF = re.compile(r"^(\w+) = \{ value = ([^,]+),", re.MULTILINE)
_JUNK = st.one_of(
    st.integers(-(2**64), 2**64).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(['"x"', "true", "[]", "[1, -2]", "{}", "-0.0", "1e400", "nan", "inf"]),
    st.sampled_from(["1e-300", "1e300", "5e-324", "1.7e308", "1e-9", "1e15"]),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_any_single_bad_value_loads_or_raises_profile_error(tmp_path_factory, data):
    # Replace one field's value by arbitrary TOML: the loader either accepts it or says which
    # field is wrong, in one line - never another exception.
    text = _builtin_text("v002-spec")
    leaves = list(_LEAF.finditer(text))
    m = data.draw(st.sampled_from(leaves))
    junk = data.draw(_JUNK)
    path = tmp_path_factory.mktemp("fuzz") / "p.toml"
    path.write_text(text[: m.start(2)] + junk + text[m.end(2) :])
    try:
        profile = load_profile(path)
    except ProfileError as exc:
        assert "\n" not in str(exc)
        assert f"'{m.group(1)}" in str(exc) or f".{m.group(1)}'" in str(exc) or "syntax" in str(exc)
    else:
        # A profile that loads can cost every kind of node.
        for node in (
            {"op": "GEMV", "lane_class": "gemv", "macs": 1 << 20, "weight_bytes": 1 << 19},
            {"op": "GEMM", "lane_class": "gemm", "macs": 1 << 22, "weight_bytes": 1 << 20},
            {"op": "CVO", "lane_class": "sfu", "func": "GELU", "elements": 5000},
            {"op": "MEMCPY", "lane_class": "dma", "act_bytes": 1 << 24},
            {"op": "MEMSET", "lane_class": "ctrl", "elements": 7},
            {"op": "HOST", "lane_class": "host", "func": "add", "elements": 2048},
        ):
            if node["lane_class"] in profile.lanes:
                assert node_cycles(node, profile) >= 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('extends = "v002-spec"\n', "'extends' belongs in the \\[profile\\] table"),
        ("[lanes]\ngemv = 1000000\n", "'lanes.gemv' = 1000000 is more lanes than the ISA"),
        ("[pools]\nweight_port = 500\n", "'pools.weight_port' = 500 is not a plausible"),
        ("[clocks]\ncore_hz = 1e-30\n", "'clocks.core_hz' = 1e-30 Hz is not a plausible"),
        ("[clocks]\naxi_hz = 2.5e11\n", "'clocks.axi_hz' = 2.5e\\+11 Hz is not a plausible"),
        (
            "[memory]\nddr_effective_bytes_per_second = 1e-300\n",
            "'memory.ddr_effective_bytes_per_second' = 1e-300 is not plausible; give a value in",
        ),
        ("[host]\nop_overhead_seconds = 1e300\n", "'host.op_overhead_seconds' = 1e\\+300 is not"),
        ("[gemv]\nmacs_per_cycle = 1099511627777\n", "'gemv.macs_per_cycle' = 1099511627777"),
    ],
)
def test_implausible_or_misplaced_values_are_refused(tmp_path, body, message):
    head = '[profile]\nextends = "v002-spec"\nname = "x"\ndescription = "x"\nsource = "x"\n'
    path = tmp_path / "user.toml"
    path.write_text(body if body.startswith("extends") else head + body)
    with pytest.raises(ProfileError, match=message):
        load_profile(path)


def test_fifo_profile_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    with pytest.raises(ProfileError, match="is not a regular file"):
        load_profile(fifo)  # a blocking open would hang here: nobody writes the FIFO


@pytest.mark.parametrize("target", ["/dev/zero", "folder"])
def test_device_or_folder_behind_a_profile_name_is_refused(tmp_path, target):
    link = tmp_path / "p.toml"
    if target == "folder":
        (tmp_path / "d").mkdir()
        link.symlink_to(tmp_path / "d")
    else:
        link.symlink_to(target)
    with pytest.raises(ProfileError, match="is not a regular file"):
        load_profile(link)


def test_huge_profile_file_is_refused(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("# padding\n" * (MAX_PROFILE_BYTES // 10 + 10))
    with pytest.raises(ProfileError, match="is larger than"):
        load_profile(path)


@pytest.mark.parametrize("name", ["v002-spec", "v002-as-built"])
def test_issue_costs_are_tagged_and_optional(name, tmp_path):
    p = load_profile(name)
    assert p.issue is not None and p.issue.decode_cycles == 1
    assert p.provenance["issue.word_write_axi_clocks"].tag == "assumed"
    assert p.provenance["issue.decoupled_queue_depth"].tag == "assumed"
    without = tmp_path / "p.toml"
    without.write_text(_builtin_text(name).split("\n[issue]")[0])
    assert load_profile(without).issue is None  # a profile may leave [issue] out
    bad = tmp_path / "bad.toml"
    bad.write_text(
        f'[profile]\nextends = "{name}"\nname = "x"\n\n[issue]\npoll_read_axi_clocks = 0\n'
    )
    with pytest.raises(ProfileError, match="issue.poll_read_axi_clocks"):
        load_profile(bad)


def test_load_profile_with_replaces_fields_and_checks_them_as_a_file_would():
    from pccx_flow.hardware.profile import load_profile_with

    p = load_profile_with("v002-spec", {"lanes.gemv": 8, "pools.weight_port": 4}, "mine")
    assert (p.name, p.lanes["gemv"], p.pools["weight_port"]) == ("mine", 8, 4)
    assert p.provenance["lanes.gemv"].tag == "user"
    assert load_profile("v002-spec").lanes["gemv"] == 4  # the built-in is untouched
    with pytest.raises(ProfileError, match=r"with lanes\.gemv=40: field 'lanes\.gemv' = 40"):
        load_profile_with("v002-spec", {"lanes.gemv": 40})
    with pytest.raises(ProfileError, match="no field 'lanes.tpu' to set"):
        load_profile_with("v002-spec", {"lanes.tpu": 1})
