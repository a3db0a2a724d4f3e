"""DataMover status words (PG022) decoded from hand-made words, and judged."""

from __future__ import annotations

import pytest

from pccx_flow.board.device import regmap
from pccx_flow.board.device.dm_status import decode, encode, judge
from pccx_flow.errors import BoardError


@pytest.mark.parametrize(
    "word, fields",
    [
        (0x80, dict(tag=0, okay=True, slverr=False, decerr=False, interr=False)),
        (0x8A, dict(tag=0xA, okay=True, slverr=False, decerr=False, interr=False)),
        (0x10, dict(tag=0, okay=False, slverr=False, decerr=False, interr=True)),
        (0x25, dict(tag=5, okay=False, slverr=False, decerr=True, interr=False)),
        (0x4F, dict(tag=0xF, okay=False, slverr=True, decerr=False, interr=False)),
        (0x70, dict(tag=0, okay=False, slverr=True, decerr=True, interr=True)),
    ],
)
def test_normal_words_decode_bit_by_bit(word, fields):
    s = decode(word)
    assert {k: getattr(s, k) for k in fields} == fields
    assert s.bytes_received is None and s.eop is None
    assert encode(**fields) == word
    # the regmap's 8-bit decoder reads the same layout
    r = regmap.decode_status(word)
    assert (r.tag, r.okay, r.interr) == (s.tag, s.okay, s.interr)


def test_ibtt_words_carry_bytes_received_and_eop():
    s = decode(0x8001_0087, ibtt=True)
    assert (s.tag, s.okay, s.bytes_received, s.eop) == (7, True, 0x100, True)
    assert s.describe() == "0x80010087: tag 7, OKAY, 256 bytes received, EOP"
    z = decode(0x0000_0010, ibtt=True)
    assert z.interr and not z.okay and z.bytes_received == 0 and z.eop is False
    assert encode(tag=7, bytes_received=0x100, eop=True) == 0x8001_0087
    with pytest.raises(BoardError, match="wider than the 8-bit normal status word"):
        decode(0x180)
    with pytest.raises(BoardError, match="wider than the 32-bit IBTT"):
        decode(1 << 32, ibtt=True)


def test_judge_names_the_first_reason_a_word_is_not_success():
    assert judge(decode(0x83), tag=3) is None
    assert judge(decode(0x83), tag=4) == (
        "tag 3, but the command's tag is 4 (a status of another command)"
    )
    assert judge(decode(0x13), tag=3).startswith("INTERR (internal error")
    assert "DECERR" in judge(decode(0x23), tag=3) and "SLVERR" in judge(decode(0x63), tag=3)
    assert judge(decode(0x03), tag=3).startswith("OKAY clear")
    word = decode(encode(tag=1, bytes_received=64, eop=True), ibtt=True)
    assert judge(word, tag=1, nbytes=64) is None
    assert judge(word, tag=1, nbytes=256) == "64 bytes received of the 256 commanded"
    # a normal word carries no byte count: nothing to check it against
    assert judge(decode(0x81), tag=1, nbytes=256) is None


def test_describe_and_json_show_every_field():
    assert decode(0x70).describe() == "0x70: tag 0, SLVERR, DECERR, INTERR, not OKAY"
    assert decode(0x10).to_json() == {"raw": 16, "tag": 0, "okay": False, "errors": ["interr"]}
    j = decode(0x0000_0010, ibtt=True).to_json()
    assert j["bytes_received"] == 0 and j["eop"] is False
