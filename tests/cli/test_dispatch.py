"""`pccx-flow dispatch` end to end on the fake device, and every fault as one line."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.board.program.files import read_program, write_program
from pccx_flow.cli.main import main

PREFIX = "pccx-flow: error: "


@pytest.fixture(scope="module")
def emitted(tmp_path_factory, tiny_ckpt_dir):
    d = tmp_path_factory.mktemp("dispatch")
    prog = d / "t.prog"
    args = ["emit", "--preset", "tiny", "--position", "3", "-o", str(prog)]
    assert main([*args, "--golden", str(d / "gold"), "--weights", str(tiny_ckpt_dir)]) == 0
    return prog, d / "gold", tiny_ckpt_dir


def _dispatch(capsys, prog, ckpt, *extra):
    capsys.readouterr()
    code = main(["dispatch", str(prog), "--weights", str(ckpt), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), err
    return lines[0]


def test_fake_device_run_prints_argmax_top_k_and_the_golden_verdict(emitted, capsys, tiny_ckpt):
    prog, gold, ckpt = emitted
    code, out, err = _dispatch(
        capsys, prog, ckpt, "--fake-device", "--check-golden", str(gold), "--top-k", "3"
    )
    assert code == 0 and err == ""
    from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference

    program = read_program(prog)
    want = emulate_against_reference(program, tiny_ckpt, default_tokens(4, tiny_ckpt.config.vocab))
    top = np.argsort(-want["logits"], kind="stable")[:3]
    assert f"argmax {int(top[0])}; top-3: {int(top[0])} (" in out
    assert "fake device" in out and "not a board" in out and "not an NPU time" in out
    assert "L2 matched the golden words after every one of" in out


@pytest.mark.parametrize(
    "fault, pattern",
    [
        ("never-done", r"batch 0 \(instruction \d+, node [\w.]+\): DONE not seen within 0.3 s"),
        (
            "dma-error",
            r"batch 0 \(instruction \d+, node [\w.]+\): sticky DMA error 0x2 on"
            r" DataMover page \w+; device reset",
        ),
        ("disappear", r"batch 0 \(instruction \d+, node [\w.]+\): device .* disappeared"),
        ("silent@2", r"batch 2 \(instruction \d+, node [\w.]+\): .*did not answer|DONE not seen"),
    ],
)
def test_device_faults_are_one_line_naming_batch_instruction_and_node(
    emitted, capsys, fault, pattern
):
    prog, _, ckpt = emitted
    code, out, err = _dispatch(
        capsys, prog, ckpt, "--fake-device", "--fake-fault", fault, "--timeout", "0.3"
    )
    assert code == 2 and out == ""
    line = _one_error_line(err)
    import re

    assert re.search(pattern, line), line


def test_a_ninth_word_in_one_batch_is_refused_before_anything_is_written(emitted, capsys, tmp_path):
    prog, _, ckpt = emitted
    p = read_program(prog)
    batches = [k for k, s in enumerate(p.steps) if s["kind"] == "batch"]
    # two batches in a row whose words add up to more than 8: drop the kick between them
    k = next(
        a
        for a, b in zip(batches, batches[1:], strict=False)
        if b == a + 1 and p.steps[b]["end"] - p.steps[a]["start"] - 2 > 8
    )
    kick = p.steps[k]["end"] - 1
    del p.words[kick], p.nodes[kick], p.roles[kick]
    p.steps[k + 1]["start"] = p.steps[k]["start"]
    p.steps[k + 1]["end"] -= 1
    del p.steps[k]
    for s in p.steps[k + 1 :]:
        if s["kind"] == "batch":
            s["start"] -= 1
            s["end"] -= 1
    # records of the words after the kick move down with them (the reader checks the links)
    p.operands = {i - (i > kick): v for i, v in p.operands.items()}
    p.streams = {i - (i > kick): v for i, v in p.streams.items()}
    write_program(p, tmp_path / "deep.prog")
    code, _, err = _dispatch(capsys, tmp_path / "deep.prog", ckpt, "--fake-device")
    assert code == 2
    line = _one_error_line(err)
    assert "overflow the 8-deep command FIFO" in line and "nothing was written" in line


def test_a_corrupted_l2_value_is_named_by_check_golden(emitted, capsys):
    prog, gold, ckpt = emitted
    program = read_program(prog)
    # the first GEMV at or after word 40 (a word that writes L2)
    at = next(i for i in range(40, len(program.words)) if "weight" in program.streams.get(i, {}))
    code, _, err = _dispatch(
        capsys,
        prog,
        ckpt,
        "--fake-device",
        "--check-golden",
        str(gold),
        "--fake-fault",
        f"corrupt@{at}",
    )
    assert code == 2
    assert f"first divergence at instruction {at} (node " in _one_error_line(err)


@pytest.fixture(scope="module")
def unmarked(tmp_path_factory, tiny_ckpt_dir):
    """The same step emitted without DONE markers."""
    prog = tmp_path_factory.mktemp("unmarked") / "u.prog"
    args = ["emit", "--preset", "tiny", "--position", "3", "-o", str(prog), "--no-done-markers"]
    assert main(args) == 0
    return prog


def test_done_markers_let_every_batch_finish_when_done_comes_only_from_cvo(
    emitted, unmarked, capsys
):
    prog, _, ckpt = emitted
    # the default fake rule is today's RTL: DONE only for a batch with a CVO
    code, out, _ = _dispatch(capsys, prog, ckpt, "--fake-device", "--timeout", "0.2")
    assert code == 0 and "argmax" in out
    code, _, err = _dispatch(capsys, unmarked, ckpt, "--fake-device", "--timeout", "0.2")
    assert code == 2 and "DONE not seen within 0.2 s (status 0x00000000" in _one_error_line(err)
    # a bitstream that raised DONE at every batch's end would need no markers
    args = ("--fake-device", "--fake-done-rule", "every-batch", "--timeout", "0.2")
    code, out, _ = _dispatch(capsys, unmarked, ckpt, *args)
    assert code == 0 and "argmax" in out


def test_real_device_refusals_are_one_line(emitted, capsys, tmp_path):
    prog, gold, ckpt = emitted
    # --check-golden works on a board too now: the run gets as far as finding the device
    code, _, err = _dispatch(capsys, prog, ckpt, "--check-golden", str(gold))
    assert code == 2 and "no UIO device named" in _one_error_line(err)
    # host steps no longer stop a board run: it gets as far as opening the device
    code, _, err = _dispatch(capsys, prog, ckpt, "--device", str(tmp_path / "uio9"))
    assert code == 2 and "uio9: No such file" in _one_error_line(err)
    code, _, err = _dispatch(capsys, prog, ckpt, "--fake-fault", "never-done")
    assert code == 2 and "need --fake-device" in _one_error_line(err)
    code, _, err = _dispatch(capsys, prog, ckpt, "--fake-done-rule", "cvo")
    assert code == 2 and "need --fake-device" in _one_error_line(err)
    code, _, err = _dispatch(capsys, prog, ckpt, "--fake-device", "--fake-fault", "boom")
    assert code == 2 and "--fake-fault 'boom'" in _one_error_line(err)


def test_a_board_run_warns_about_batches_without_cvo_before_opening_the_device(
    emitted, unmarked, capsys, tmp_path
):
    from pccx_flow.board.emulator.bisect import bisect_programs

    _, _, ckpt = emitted
    memcpy = next(s for s in bisect_programs(read_program(unmarked)) if s.name == "memcpy")
    write_program(memcpy.program, tmp_path / "memcpy.prog")
    code, _, err = _dispatch(
        capsys, tmp_path / "memcpy.prog", ckpt, "--device", str(tmp_path / "uio9")
    )
    warning, error = err.splitlines()
    assert code == 2
    assert warning.startswith("pccx-flow: warning: 1 of the program's batches (first: batch 0)")
    assert "raises DONE only when a CVO completes" in warning
    assert error.startswith(PREFIX + f"cannot open {tmp_path / 'uio9'}")


@pytest.fixture(scope="module")
def as_built_program(tmp_path_factory, tiny_ckpt_dir):
    d = tmp_path_factory.mktemp("as-built")
    prog = d / "a.prog"
    base = ["emit", "--preset", "tiny", "--position", "3", "--profile", "v002-as-built"]
    assert main([*base, "-o", str(prog), "--golden", str(d / "gold"),
                 "--weights", str(tiny_ckpt_dir)]) == 0  # fmt: skip
    assert main([*base, "--target", "spec", "-o", str(d / "s.prog")]) == 0
    return prog, d / "s.prog", d / "gold", tiny_ckpt_dir


def test_an_as_built_program_runs_on_the_as_built_fake_device(as_built_program, capsys):
    prog, _, gold, ckpt = as_built_program
    assert read_program(prog).meta["target"] == "as-built"
    code, out, err = _dispatch(capsys, prog, ckpt, "--fake-device", "--check-golden", str(gold))
    assert code == 0 and err == "", err
    assert "L2 matched the golden words after every one of" in out


def test_a_program_for_another_target_is_refused_in_one_line(as_built_program, capsys):
    _, spec_prog, _, ckpt = as_built_program
    code, out, err = _dispatch(capsys, spec_prog, ckpt, "--fake-device")
    assert code == 2 and out == ""
    line = _one_error_line(err)
    assert "emitted for target 'spec'" in line and "v002-as-built" in line


def test_a_reissuing_command_fifo_gets_a_marker_after_every_word(tmp_path, tiny_ckpt):
    """The public AXIL_CMD_IN decodes the last word again until the next write: dispatch
    follows every word with a kick-marker word, and the fake device (modelling that FIFO)
    sees no word written while another is still being re-decoded."""
    from pccx_flow.board.device.cma import FileSource
    from pccx_flow.board.device.device_model import DeviceModel
    from pccx_flow.board.device.fake_device import FakeDevice
    from pccx_flow.board.device.host_side import HostSide
    from pccx_flow.board.device.regmap import board_registers
    from pccx_flow.board.device.run_step import host_buffers, run_step
    from pccx_flow.board.emulator.check import default_tokens, reference_prefix
    from pccx_flow.board.emulator.emulate import emulate
    from pccx_flow.execute.runtime import StepContext
    from pccx_flow.hardware.profile import load_profile
    from tests.board.conftest import lowered

    f = tmp_path / "public.toml"
    f.write_text('[profile]\nextends = "v002-as-built"\nname = "public"\n\n'
                 '[program]\ncommand_fifo = "reissue"\n')  # fmt: skip
    profile = load_profile(f)
    program = lowered("v002-as-built", "heft", position=2)[3]
    tokens = default_tokens(3, tiny_ckpt.config.vocab)
    k, v, _ = reference_prefix(program, tiny_ckpt, tokens)
    ctx = StepContext(tiny_ckpt.config, "pccx", 2, tokens[-1], "float32")
    want, _ = emulate(program, tiny_ckpt, k.copy(), v.copy(), tokens[-1], ctx=ctx)

    def run(regs):
        buffers = host_buffers(program, FileSource(tmp_path / f"b{id(regs)}"), tiny_ckpt, k, v)
        dev = FakeDevice(tmp_path / f"d{id(regs)}", board_registers(profile), answer_timeout=5.0)
        DeviceModel(program, buffers, tiny_ckpt.config).attach(dev)
        with dev:
            npu = dev.open(by_name=True)
            npu.regs = regs
            try:
                r = run_step(program, npu, buffers, tokens[-1], timeout=5.0,
                             host=HostSide(program, buffers["act"], tiny_ckpt, ctx))  # fmt: skip
            finally:
                npu.window.close()
        return r, dev

    paced = board_registers(profile)
    assert paced.command_fifo == "reissue"
    r, dev = run(paced)
    assert dev.faults == [] and dev.reissued == [] and np.array_equal(r.logits, want)
    words = sum(1 for role in program.roles if role != "kick")
    batches = sum(1 for s in program.steps if s["kind"] == "batch")
    assert r.report.pacing_words == words - batches  # the kick ends each batch's last word
    # a host that writes words back to back: the device sees the re-decoded words
    import dataclasses

    from pccx_flow.errors import BoardError

    with pytest.raises(BoardError, match="ERROR bit"):
        run(dataclasses.replace(paced, command_fifo="paced"))


@pytest.mark.parametrize("fault", ["never-done@99999", "dma-error@5000", "silent@4096"])
def test_a_fault_at_a_kick_the_program_never_reaches_is_refused(emitted, capsys, fault):
    prog, _, ckpt = emitted
    batches = sum(1 for s in read_program(prog).steps if s["kind"] == "batch")
    code, out, err = _dispatch(capsys, prog, ckpt, "--fake-device", "--fake-fault", fault)
    assert code == 2 and out == ""
    line = _one_error_line(err)
    assert f"--fake-fault {fault}: the program has {batches} kicks" in line


def test_corrupting_a_word_that_writes_no_l2_is_refused(emitted, capsys):
    prog, _, ckpt = emitted
    program = read_program(prog)
    memset = next(i for i, r in enumerate(program.roles) if r == "slot")
    kick = program.words.index(0x8000_0000_0000_0000)
    for at, says in ((memset, "(MEMSET, node"), (kick, "not an instruction"),
                     (len(program.words), "not an instruction")):  # fmt: skip
        code, _, err = _dispatch(
            capsys, prog, ckpt, "--fake-device", "--fake-fault", f"corrupt@{at}"
        )
        assert code == 2
        line = _one_error_line(err)
        assert f"--fake-fault corrupt@{at}" in line and says in line


def test_a_zero_timeout_is_refused_when_the_command_line_is_read(emitted, capsys):
    prog, _, ckpt = emitted
    with pytest.raises(SystemExit) as exit_:
        _dispatch(capsys, prog, ckpt, "--fake-device", "--timeout", "0")
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert "--timeout: 0 is out of range; give 0.001..3600" in err
    assert len(err.splitlines()) == 1


def test_an_image_above_4_gib_is_refused_before_the_weights_are_read(emitted, capsys, tmp_path):
    prog, _, _ = emitted
    program = read_program(prog)
    program.ddr["total_bytes"] = 3 << 30  # with the fake's base at 1 GiB it ends at 4 GiB + 1
    program.ddr["total_bytes"] += 1
    write_program(program, tmp_path / "big.prog")
    # the weights folder does not exist: the size check comes first, so that is not reported
    code, _, err = _dispatch(capsys, tmp_path / "big.prog", tmp_path / "no-ckpt", "--fake-device")
    assert code == 2
    line = _one_error_line(err)
    assert "buffer image at 0x40000000+0xc0000001 ends above 4 GiB" in line
    # the same before any worker of a fake cluster starts
    big = str(tmp_path / "big.prog")
    capsys.readouterr()
    code = main(["dispatch", big, big, "--weights", str(emitted[2]), "--fake-cluster", "1"])
    assert code == 2 and "ends above 4 GiB" in _one_error_line(capsys.readouterr().err)
