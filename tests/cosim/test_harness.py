"""Port discovery, the testbench writer and the stimulus, without any RTL.

The JSON trees here are written by hand in the shape Verilator's ``--json-only`` gives (a
MODULE node whose ``stmtsp`` holds VAR nodes with a direction, or ``IFACEREF`` for an
interface port); no pccx-v002 file is used.
"""

from __future__ import annotations

import pytest

from pccx_flow.board.isa import KICK_MARKER
from pccx_flow.board.timing.issue import RTL_WRITE_TO_DECODE
from pccx_flow.board.timing.replay import replay
from pccx_flow.cosim.harness import bench_text
from pccx_flow.cosim.ports import REQUIRED, VALIDS, Port, check_ports, ports_from_tree
from pccx_flow.cosim.rtl_files import checkout_files, verilator_version
from pccx_flow.cosim.stimulus import INSTRUCTION, KICK, PACING, host_writes, stimulus_text
from pccx_flow.errors import InputError
from tests.board.conftest import lowered


def _var(name, direction, dtype="logic"):
    return {"type": "VAR", "name": name, "direction": direction, "varType": "PORT",
            "dtypeName": dtype}  # fmt: skip


def tree(extra=(), drop=()):
    names = [("clk", "INPUT"), ("rst_n", "INPUT"), ("i_clear", "INPUT"), *extra,
             *((v, "OUTPUT") for v in VALIDS), ("OUT_op_x64", "OUTPUT")]  # fmt: skip
    stmts = [_var(n, d) for n, d in names if n not in drop]
    stmts.insert(3, {"type": "VAR", "name": "S_AXIL_CTRL", "varType": "IFACEREF",
                     "dtypeName": "axil_if"})  # fmt: skip
    stmts.append({"type": "VAR", "name": "raw_instruction", "direction": "NONE"})  # internal
    module = {"type": "MODULE", "name": "npu_controller_top", "stmtsp": stmts}
    return {"type": "NETLIST", "modulesp": [{"type": "MODULE", "name": "other"}, module]}


def test_ports_are_read_from_the_json_tree_in_order():
    ports = ports_from_tree(tree())
    assert [p.name for p in ports][:4] == ["clk", "rst_n", "i_clear", "S_AXIL_CTRL"]
    assert ports[3].direction == "IFACE" and "raw_instruction" not in {p.name for p in ports}
    check_ports(ports)


def test_a_checkout_with_extra_inputs_gets_them_tied_to_zero():
    extra = (("IN_enc_stat", "INPUT"), ("IN_enc_valid", "INPUT"))
    text = bench_text(ports_from_tree(tree(extra)))
    assert ".IN_enc_stat('0)" in text and ".IN_enc_valid('0)" in text
    assert ".S_AXIL_CTRL(axil.slave)" in text and ".i_clear(1'b0)" in text
    for name, k in VALIDS.items():
        assert f".{name}(valid[{k}])" in text and f"if (valid[{k}])" in text


@pytest.mark.parametrize("missing", [*REQUIRED[:2], "OUT_cvo_op_x64_valid", "OUT_op_x64"])
def test_a_missing_port_is_named_in_one_line(missing):
    with pytest.raises(InputError, match=f"no port {missing};"):
        check_ports(ports_from_tree(tree(drop=(missing,))))
    with pytest.raises(InputError, match="no module npu_controller_top"):
        ports_from_tree({"type": "NETLIST", "modulesp": []})


def test_the_testbench_is_ours_not_the_rtl():
    text = bench_text([Port("clk", "INPUT", "logic")])
    assert text.startswith("// written by pccx-flow") and "module pccx_flow_cosim_tb" in text


@pytest.mark.parametrize("profile", ["v002-spec", "v002-as-built"])
def test_stimulus_follows_dispatch_and_the_rtl_model_releases_each_word_at_its_write(profile):
    _, _, prof, program = lowered(profile, "critical-path", position=2)
    r = replay(program, prof, "rtl")
    writes = host_writes(program, prof, r)
    words = [i for i, w in enumerate(program.words) if w != KICK_MARKER]
    assert [w.word for w in writes if w.kind == INSTRUCTION] == words
    batches = sum(1 for s in program.steps if s["kind"] == "batch")
    assert sum(w.kind == KICK for w in writes) == batches
    paced = prof.program.command_fifo == "reissue"
    assert sum(w.kind == PACING for w in writes) == (len(words) - batches if paced else 0)
    assert all(writes[k].cycle < writes[k + 1].cycle for k in range(len(writes) - 1))
    at = {w.word: w.cycle for w in writes if w.kind == INSTRUCTION}
    assert all(p.release == at[p.fp.index] + RTL_WRITE_TO_DECODE for p in r.placed)
    assert all(p.start >= p.release for p in r.placed)
    line = stimulus_text(writes[:1])
    assert line == f"{writes[0].cycle} {prof.registers.instruction_offset:x} " \
        f"{program.words[words[0]]:016x}\n"  # fmt: skip


def test_a_folder_that_is_no_checkout_and_an_old_verilator_are_one_line(tmp_path):
    with pytest.raises(InputError, match="not a folder"):
        checkout_files(tmp_path / "none")
    with pytest.raises(InputError, match="no LLM/rtl/packages/isa/isa_pkg.sv"):
        checkout_files(tmp_path)
    old = tmp_path / "verilator"
    old.write_text("#!/bin/sh\necho 'Verilator 5.006 2023-01-22 rev (Debian 5.006-3)'\n")
    old.chmod(0o755)
    with pytest.raises(InputError, match="5.006 cannot build pccx-v002's QUEUE.sv"):
        verilator_version(str(old))
