"""Program files: round trip, .memh, and one-line errors for damaged files."""

from __future__ import annotations

import json

import pytest

from pccx_flow.board.isa import KICK_MARKER
from pccx_flow.board.program.files import (
    ProgramFileError,
    check_words,
    read_program,
    write_program,
)
from pccx_flow.cli.main import main


@pytest.fixture
def written(spec_program, tmp_path):
    _, _, _, prog = spec_program
    paths = write_program(prog, tmp_path / "step.prog")
    return prog, paths


def test_round_trip_and_memh(written):
    prog, paths = written
    back = read_program(paths["json"])
    assert back.words == prog.words and back.nodes == prog.nodes
    assert back.steps == prog.steps and back.summary == prog.summary
    lines = paths["memh"].read_text().splitlines()
    assert [int(x, 16) for x in lines] == prog.words
    assert all(len(x) == 16 for x in lines)
    raw = paths["words"].read_bytes()
    assert int.from_bytes(raw[:8], "little") == prog.words[0]
    check_words(back)


def test_truncated_file_is_one_line(written, capsys):
    _, paths = written
    data = paths["words"].read_bytes()
    paths["words"].write_bytes(data[:-3])
    assert main(["disasm", str(paths["words"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a whole number of 64-bit words" in err
    paths["words"].write_bytes(data[:-8])
    assert main(["disasm", str(paths["words"])]) == 2
    assert "truncated" in capsys.readouterr().err


def test_corrupted_word_is_one_line(written, capsys):
    _, paths = written
    data = bytearray(paths["words"].read_bytes())
    data[7] ^= 0x50  # opcode nibble of word 0
    paths["words"].write_bytes(bytes(data))
    assert main(["disasm", str(paths["words"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "corrupted" in err


def test_illegal_word_names_its_index_and_node(written):
    prog = read_program(written[1]["json"])  # a copy: the session's program stays intact
    i = prog.roles.index("node")
    prog.words[i] = 0x7 << 60
    with pytest.raises(ProgramFileError, match=rf"word {i} \({prog.nodes[i]}\): .*reserved opcode"):
        check_words(prog)
    prog.words[i] = KICK_MARKER
    with pytest.raises(ProgramFileError, match="kick marker inside a batch"):
        check_words(prog)


def test_other_format_version_and_missing_sidecar(written, capsys):
    _, paths = written
    side = json.loads(paths["json"].read_text())
    side["version"] = 99
    paths["json"].write_text(json.dumps(side))
    assert main(["disasm", str(paths["words"])]) == 2
    assert "version 99" in capsys.readouterr().err
    paths["json"].unlink()
    assert main(["disasm", str(paths["words"])]) == 2
    assert "no such file" in capsys.readouterr().err


def test_emit_and_disasm_commands(tmp_path, capsys):
    out = tmp_path / "step.prog"
    assert main(["emit", "--preset", "tiny", "--position", "4", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "instructions" in text and "fences" in text and "L2 peak" in text
    assert out.exists() and out.with_suffix(".memh").exists() and out.with_suffix(".json").exists()
    assert main(["disasm", str(out)]) == 0
    listing = capsys.readouterr().out
    assert "GEMV dest=" in listing and "KICK" in listing and "fence" in listing
    assert "host step" in listing


def test_emit_that_does_not_fit_is_one_line(tmp_path, capsys):
    small = tmp_path / "small.toml"
    small.write_text(
        '[profile]\nname = "small-l2"\nextends = "v002-spec"\n\n[memory]\n'
        'l2_bytes = { value = 4096, tag = "assumed", note = "a deliberately small L2" }\n'
    )
    assert main(["emit", "--preset", "tiny", "--position", "3", "--profile", str(small)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    # the L2-aware timeline finds it first (the allocator's own message: test_lower.py)
    assert err.startswith("pccx-flow: error: policy critical-path failed: memory deadlock")
    assert "'l2'" in err and "larger cap" in err


def test_emit_names_the_nodes_it_issued_later_for_a_hole_in_l2(capsys, monkeypatch):
    from ..conftest import refuse_room

    node = "L01.attn.k_read.g0"  # issued long before its first reader (tiny, position 4)

    def refused(lw, n):  # no room until it is issued right before a reader
        return n == node and lw.order[lw.pos[n] + 1] not in set(lw.g.successors(n))

    refuse_room(monkeypatch, refused)
    assert main(["emit", "--preset", "tiny", "--position", "4"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"no room in L2 for {node}: lowering again with small tensors above the CVO window",
        f"no hole in L2 for {node}'s output: lowering again with it issued just before its "
        "first reader (1 of at most 8)",
    ]
    lines = out.splitlines()
    head = "  issued later   1 node just before its first reader, "
    at = next(i for i, x in enumerate(lines) if x.startswith(head))
    assert lines[at + 1].endswith(f"differs from the schedule's there): {node}")


def test_emit_lowers_tiles_of_any_allowed_size_on_the_spec_target(capsys):
    """384 rows a tile split LAuReL's 2048-row up-projection into tiles of 342 rows, which
    do not end on a word of float32 L2, and emit stopped (`graph.ops.WORD_ROWS`)."""
    assert main(["emit", "--tile-rows", "384", "--layers", "0:1"]) == 0
    assert "instructions" in capsys.readouterr().out


def test_emit_of_a_cut_after_layer_0_is_one_line_before_any_schedule(capsys, monkeypatch):
    def no_graph(*_args, **_kwargs):
        raise AssertionError("the graph was built")

    monkeypatch.setattr("pccx_flow.graph.build.build_decode_graph", no_graph)
    assert main(["emit", "--preset", "tiny", "--position", "3", "--layers", "2:4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--layers 2:4 starts after layer 0" in err
    assert err.rstrip().endswith("emit --layers 0:4")


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_set_mixed_from_two_programs_is_one_line(spec_program, tmp_path, capsys):
    from ..conftest import lowered

    other = lowered("v002-spec", "critical-path", position=4)[3]
    paths = write_program(spec_program[3], tmp_path / "step.prog")
    old_json, old_memh = paths["json"].read_bytes(), paths["memh"].read_bytes()
    write_program(other, tmp_path / "step.prog")
    paths["json"].write_bytes(old_json)  # killed after the words and memh of the new emit
    assert main(["disasm", str(paths["words"])]) == 2
    assert "interrupted or concurrent emit" in _one_line(capsys)
    paths["memh"].write_bytes(old_memh)  # words new, memh and sidecar old
    assert main(["disasm", str(paths["words"])]) == 2
    assert "from another emit" in _one_line(capsys)


def test_an_edited_sidecar_field_is_one_line(written, capsys):
    _, paths = written
    side = json.loads(paths["json"].read_text())
    side["meta"]["position"] = 10**9
    paths["json"].write_text(json.dumps(side))
    assert main(["disasm", str(paths["words"])]) == 2
    assert "content hash does not match" in _one_line(capsys)


def test_emit_never_overwrites_files_it_did_not_make(tmp_path, capsys):
    out = tmp_path / "step.prog"
    notes = tmp_path / "step.json"
    notes.write_text('{"my": "notes"}')
    args = ["emit", "--preset", "tiny", "--position", "2", "-o", str(out)]
    assert main(args) == 2
    err = _one_line(capsys)
    assert "not a pccx-flow program sidecar" in err and "--force" in err
    assert notes.read_text() == '{"my": "notes"}' and not out.exists()
    assert main([*args, "--force"]) == 0
    capsys.readouterr()
    assert main(args) == 0  # its own program: replaced without --force
    capsys.readouterr()
    # -o step.bin beside the step.prog program would take its .json and .memh
    assert main([*args[:-1], str(tmp_path / "step.bin")]) == 2
    assert "sidecar of the program 'step.prog'" in _one_line(capsys)
    assert read_program(out).meta["position"] == 2
    (tmp_path / "lone.prog").write_bytes(b"\0" * 8)
    assert main([*args[:-1], str(tmp_path / "lone.prog")]) == 2
    assert "emit did not make it" in _one_line(capsys)
