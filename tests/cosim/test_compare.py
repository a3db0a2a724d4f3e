"""Matching the RTL's decodes to the program's words, without the RTL: the logs here are
built from the program's own words, then damaged the ways a controller could damage them."""

from __future__ import annotations

from pccx_flow.board.isa import KICK_MARKER
from pccx_flow.cosim.compare import (
    BODY_BITS,
    Decoded,
    SimLog,
    gap_table,
    match_decodes,
    parse_log,
)
from tests.board.conftest import lowered


def _program():
    return lowered("v002-spec", "critical-path", position=1)[3]


def _words(program):
    return [i for i, w in enumerate(program.words) if w != KICK_MARKER]


def _decoded(word: int, cycle: int) -> Decoded:
    return Decoded(cycle, word >> BODY_BITS, word & ((1 << BODY_BITS) - 1))


def _clean_log(program, repeats: int = 0) -> SimLog:
    log = SimLog()
    for k, i in enumerate(_words(program)):
        for r in range(1 + repeats):
            log.decodes.append(_decoded(program.words[i], 10 * k + r))
    return log


def test_every_word_decoded_once_or_repeated_matches_and_repeats_are_counted():
    program = _program()
    n = len(_words(program))
    once = match_decodes(program, _clean_log(program))
    assert once.mismatch is None and len(once.issued) == n and once.reissues == 0
    written = {i: 10 * k for k, i in enumerate(_words(program))}
    again = match_decodes(program, _clean_log(program, repeats=3), written)
    assert again.mismatch is None and again.reissues == 3 * n
    assert again.issued == once.issued  # the first decode is the issue


def test_a_flipped_bit_is_named_by_word_node_and_field():
    program = _program()
    log = _clean_log(program)
    k = 40
    i = _words(program)[k]
    d = log.decodes[k]
    log.decodes[k] = Decoded(d.cycle, d.opcode, d.body ^ (1 << 20))
    out = match_decodes(program, log)
    assert out.mismatch.startswith(f"word {i} (node {program.nodes[i]}), cycle {d.cycle}: ")
    assert "field" in out.mismatch and len(out.issued) == k


def test_a_wrong_opcode_and_lost_words_are_caught():
    program = _program()
    log = _clean_log(program)
    d = log.decodes[5]
    log.decodes[5] = Decoded(d.cycle, (d.opcode + 1) % 5, d.body)
    assert "opcode" in match_decodes(program, log).mismatch
    short = SimLog(decodes=_clean_log(program).decodes[:-3])
    assert "were never decoded" in match_decodes(program, short).mismatch


def test_equal_words_in_a_row_are_told_apart_from_repeats_by_their_write_cycle():
    program = _program()
    words = _words(program)
    same = next(k for k in range(1, len(words))
                if program.words[words[k]] == program.words[words[k - 1]])  # fmt: skip
    log = SimLog()
    written = {}
    for k, i in enumerate(words):
        written[i] = 10 * k
        log.decodes.append(_decoded(program.words[i], 10 * k + 5))
        log.decodes.append(_decoded(program.words[i], 10 * k + 6))  # a repeat
    out = match_decodes(program, log, written)
    assert out.mismatch is None
    assert out.issued[words[same]] == 10 * same + 5  # not the repeat of the word before


def test_the_log_format_and_the_gap_table():
    log = parse_log("W 0 3\nD 12 4 00000000000000a\nW 1 9\nE 99\n")
    assert log.writes == {0: 3, 1: 9} and log.end == 99
    assert log.decodes == [Decoded(12, 4, 0xA)]
    g = gap_table({1: 10, 2: 20, 3: 30}, {1: 10, 2: 25, 3: 60, 4: 1})
    assert g == {"words": 3, "min": 0, "median": 5, "p90": 30, "max": 30}
    assert gap_table({}, {}) == {"words": 0}
