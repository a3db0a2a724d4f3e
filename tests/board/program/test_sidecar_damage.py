"""Damaged program sidecars × the commands that read them: one line, never a traceback.

Each kind of damage is tried twice: as it lands on disk (the content hash no longer matches,
so the set is refused before any field is used) and with the hash recomputed (a forged or
hand-fixed sidecar, which the schema in `board/program/schema.py` must stop before a reader
indexes a list or sizes a buffer with it). The commands fail at reading the program, before
any work, so a position of 1e9 cannot hang them.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pccx_flow.board.program.files import ProgramFileError, content_hash, read_program
from pccx_flow.cli.main import main
from pccx_flow.errors import PccxFlowError


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    out = tmp_path_factory.mktemp("prog") / "step.prog"
    argv = ["emit", "--preset", "tiny", "--position", "3", "--layers", "0:1", "-o", str(out)]
    assert main(argv) == 0
    return out


def _set(path: str, value):
    def damage(side):
        *head, last = path.split(".")
        d = side
        for k in head:
            d = d[int(k)] if isinstance(d, list) else d[k]
        if isinstance(d, list):
            d[int(last)] = value
        else:
            d[last] = value

    return damage


def _drop(key: str):
    return lambda side: side.pop(key)


def _first_batch_end(side):
    next(s for s in side["steps"] if s["kind"] == "batch")["end"] -= 1


def _first_stream(value):
    def damage(side):
        side["streams"][next(iter(side["streams"]))] = value

    return damage


DAMAGE = {
    "position 1e9": _set("meta.position", 10**9),
    "position float": _set("meta.position", 3.5),
    "position negative": _set("meta.position", -1),
    "position string": _set("meta.position", "3"),
    "unknown preset": _set("meta.config", "e9b"),
    "unknown semantics": _set("meta.semantics", "llama"),
    "unknown target": _set("meta.target", "fpga"),
    "unknown read rule": _set("meta.read_ahead", "sideways"),
    "layers reversed": _set("meta.layers", [5, 2]),
    "l2 words zero": _set("meta.l2_words", 0),
    "no meta": _drop("meta"),
    "no steps": _drop("steps"),
    "no nodes": _drop("nodes"),
    "no streams": _drop("streams"),
    "n_words huge": _set("n_words", 10**12),
    "nodes short": lambda side: side["nodes"].pop(),
    "role unknown": _set("roles.0", "magic"),
    "step kind unknown": _set("steps.0.kind", "warp"),
    "step not an object": _set("steps.0", 7),
    "batch end moved": _first_batch_end,
    "batch end beyond": _set("steps.0.end", 10**9),
    "l2 region beyond": lambda side: side["l2"].update({"x": {"addr": 10**9, "words": 4}}),
    "operand key not an index": lambda side: side["operands"].update({"abc": {}}),
    "stream not an object": _first_stream([1, 2]),
    "stream size huge": _first_stream({"kind": "weight", "bytes": 10**15}),
    "ddr total negative": _set("ddr.total_bytes", -5),
    "ddr kv dtype unknown": _set("ddr.kv_dtype", 1e300),
    "operand record dropped": lambda side: side["operands"].pop(next(iter(side["operands"]))),
    "gemv stream dropped": lambda side: side["streams"].pop(
        next(k for k, v in side["streams"].items() if "weight" in v)
    ),
    "matrix input dropped": lambda side: side["operands"][
        next(k for k, v in side["streams"].items() if "matrix_operand" in v)
    ]["inputs"].clear(),
    "kv head beyond its region": lambda side: next(
        s for s in side["streams"].values() if "kv" in s
    )["kv"].update({"head": 9}),
    "host step read not a location": lambda side: next(
        s for s in side["steps"] if s["kind"] == "host"
    )["host_reads"].update({"x": [1, 2]}),
    "sidecar a list": None,
}

COMMANDS = {
    "disasm": lambda p, ck: ["disasm", str(p)],
    "replay": lambda p, ck: ["replay", str(p), "--no-list-schedule"],
    "emulate": lambda p, ck: ["emulate", str(p), "--weights", str(ck)],
    "dispatch": lambda p, ck: ["dispatch", str(p), "--weights", str(ck), "--fake-device"],
}


def _write_damaged(prog, tmp_path, kind: str, rehash: bool):
    side = json.loads(prog.with_suffix(".json").read_text())
    out = tmp_path / "bad.prog"
    out.write_bytes(prog.read_bytes())
    out.with_suffix(".memh").write_bytes(prog.with_suffix(".memh").read_bytes())
    if DAMAGE[kind] is None:
        side = [side]
    else:
        DAMAGE[kind](side)
        side["files"]["words"] = out.name
        if rehash:
            side["sidecar_sha256"] = content_hash(side)
    out.with_suffix(".json").write_text(json.dumps(side))
    return out


@pytest.mark.parametrize("rehash", [False, True], ids=["as-damaged", "rehashed"])
@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_every_reader_refuses_a_damaged_sidecar_in_one_line(prog, tmp_path, tiny_ckpt_dir,
                                                            capsys, kind, rehash):  # fmt: skip
    if DAMAGE[kind] is None and rehash:
        pytest.skip("a list has no hash field to recompute")
    bad = _write_damaged(prog, tmp_path, kind, rehash)
    for name, argv in COMMANDS.items():
        assert main(argv(bad, tiny_ckpt_dir)) == 2, (kind, name)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("pccx-flow: error: "), (kind, name, err)
        assert "bad.json" in err or "bad.prog" in err, (kind, name, err)


scalars = st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.floats()
json_values = st.recursive(
    scalars | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data())
def test_random_rehashed_edits_are_read_or_refused_in_one_line(prog, tmp_path, data):
    """A random field anywhere in the sidecar replaced by random JSON, hash recomputed: the
    program is read and listed, or refused with a one-line `PccxFlowError`."""
    from pccx_flow.board.program.files import check_words, listing

    base = json.loads(prog.with_suffix(".json").read_text())
    side = copy.deepcopy(base)
    node, key = side, data.draw(st.sampled_from(sorted(k for k in side if k != "sidecar_sha256")))
    for _ in range(data.draw(st.integers(0, 2))):
        child = node[key]
        if isinstance(child, dict) and child:
            node, key = child, data.draw(st.sampled_from(sorted(child)))
        elif isinstance(child, list) and child:
            node, key = child, data.draw(st.integers(0, len(child) - 1))
    node[key] = data.draw(json_values)
    side["sidecar_sha256"] = content_hash(side) if _hashable(side) else "x"
    bad = tmp_path / "fz.prog"
    bad.write_bytes(prog.read_bytes())
    bad.with_suffix(".json").write_text(json.dumps(side))
    try:
        program = read_program(bad)
        check_words(program)
        listing(program)
    except PccxFlowError as exc:
        assert "\n" not in str(exc)


def _hashable(side) -> bool:
    try:
        content_hash(side)
    except ValueError:
        return False
    return True


def test_an_intact_program_still_reads(prog):
    assert read_program(prog).meta["position"] == 3
    with pytest.raises(ProgramFileError):
        read_program(prog.with_name("nothing.prog"))
