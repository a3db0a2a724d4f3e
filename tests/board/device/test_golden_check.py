"""Reading golden folders back and naming the first divergent instruction."""

from __future__ import annotations

import pytest

from pccx_flow.board.device.golden_check import check_batch, read_golden
from pccx_flow.board.emulator.golden import write_golden
from pccx_flow.board.program.files import Program
from pccx_flow.errors import InputError

MEMSET = 0x3 << 60


class L2:
    def __init__(self, data: dict[int, bytes]):
        self.data = data

    def read_l2(self, addr, dtype, nbytes):
        return self.data.get(addr, b"")[:nbytes].ljust(nbytes, b"\0")


def _golden(tmp_path):
    program = Program(words=[MEMSET] * 3, nodes=["a", "b", "c"])
    record = {
        0: [(10, "float32", bytes(range(20)))],
        1: [(10, "float16", bytes(4))],  # overwrites the start of word 0's range
        2: [(40, "float32", b"\x01\x02\x03\x04")],
    }
    write_golden(program, record, tmp_path)
    return program, read_golden(tmp_path)


def test_first_divergence_names_instruction_node_address_and_words(tmp_path):
    program, golden = _golden(tmp_path)
    assert golden[0][0].data == bytes(range(20)) and golden[2][0].addr == 40
    ok = L2({10: bytes(4) + bytes(range(4, 20)), 40: b"\x01\x02\x03\x04"})
    assert check_batch(golden, 0, 2, program.nodes, ok) is None
    bad = L2({10: bytes(4) + bytes(range(4, 20)), 40: b"\x01\x02\x03\x05"})
    line = check_batch(golden, 0, 2, program.nodes, bad)
    assert line == (
        "first divergence at instruction 2 (node c): L2 word 0x00028 expected "
        + "04030201".rjust(32, "0")
        + " got "
        + "05030201".rjust(32, "0")
    )
    # instruction 0 alone (no later writer in the batch) is checked over all its bytes
    assert "instruction 0" in check_batch(golden, 0, 0, program.nodes, ok)


def test_a_folder_that_is_not_golden_is_one_line(tmp_path):
    with pytest.raises(InputError, match="not a golden folder"):
        read_golden(tmp_path)
