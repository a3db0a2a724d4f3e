"""`pccx-flow doctor`: the terminal report, --json, exit codes and refusals."""

from __future__ import annotations

import json

import pytest

from pccx_flow.cli.main import main


def _doctor(capsys, *args):
    capsys.readouterr()
    code = main(["doctor", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_healthy_fake_board_passes_and_says_it_is_not_a_board(capsys, tiny_ckpt_dir):
    code, out, err = _doctor(capsys, "--fake-device", "--weights", str(tiny_ckpt_dir))
    assert code == 0 and err == ""
    assert out.startswith("pccx-flow doctor on a fake board (a register file and the emulator;"
                          " not a board), profile v002-as-built")  # fmt: skip
    assert [line.split(":")[1].strip() for line in out.splitlines() if line.startswith("rung ")] \
        == ["PASS"] * 7  # fmt: skip
    assert out.rstrip().endswith("all 7 rungs passed")
    assert "    UIO <fake board>/dev/uio0 name 'fabric-fake-npu'" in out  # no temporary path


def test_a_fault_stops_with_exit_1_and_the_json_says_the_same(capsys):
    code, out, _ = _doctor(capsys, "--fake-device", "hp-interr", "--timeout", "0.2")
    assert code == 1
    assert "rung 4 DataMover weight channels (HP): FAIL" in out
    assert "  likely cause: INTERR: PG022" in out
    assert out.rstrip().endswith("stopped at rung 4 of 7 (3 passed)")
    code, out, _ = _doctor(capsys, "--fake-device", "hp-interr", "--timeout", "0.2", "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["passed"] is False and doc["device"].endswith("with fault hp-interr")
    assert [r["passed"] for r in doc["rungs"]] == [True, True, True, False]
    last = doc["rungs"][-1]
    assert last["rung"] == 4 and last["likely_causes"] and last["next_step"]
    assert "hp0: status 0: 0x11: tag 1, INTERR, not OKAY" in last["evidence"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["--fake-device", "melted"], "--fake-device 'melted': not a fault of the fake board"),
        (["--fake-device", "--buffers", "udmabuf0"], "--buffers 'udmabuf0': give two"),
        (["--profile", "nope"], "nope"),
    ],
)
def test_bad_input_is_one_line(capsys, args, says):
    code, out, err = _doctor(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and says in err


def test_a_zero_timeout_and_both_device_kinds_are_refused_by_the_parser(capsys):
    for args in (["--timeout", "0"], ["--fake-device", "--uio", "fabric"]):
        with pytest.raises(SystemExit) as exit_:
            _doctor(capsys, *args)
        assert exit_.value.code == 2
        assert len(capsys.readouterr().err.splitlines()) == 1


def test_without_a_board_the_ladder_stops_at_rung_1(capsys):
    code, out, _ = _doctor(capsys, "--uio", "no-such-npu-here")
    assert code == 1
    assert "rung 1 environment: FAIL" in out and "no UIO device named '*no-such-npu-here*'" in out


def test_the_json_lists_every_status_word_decoded(capsys):
    code, out, _ = _doctor(capsys, "--fake-device", "extra-status", "--json")
    assert code == 1
    words = json.loads(out)["rungs"][-1]["status_words"]
    hp0 = [w for w in words if w["page"] == "hp0"]
    assert [(w["raw"], w["okay"], w["expected_tag"]) for w in hp0] == [
        (0x81, True, 1), (0x81, True, None), (0x81, True, None)
    ]  # fmt: skip
    assert hp0[0]["problem"] is None and hp0[0]["errors"] == []


def test_a_bitstream_that_is_not_a_file_stops_rung_1_without_reading_it(capsys, tmp_path):
    import os

    fifo = tmp_path / "bit.fifo"
    os.mkfifo(fifo)  # reading it would block for ever
    code, out, _ = _doctor(capsys, "--fake-device", "--bitstream", str(fifo))
    assert code == 1
    assert f"bitstream {fifo} is not a regular file" in out and "stopped at rung 1" in out
