"""AXI DataMover status words, decoded field by field and judged against their command.

A DataMover answers each command with one status word on its status stream, which pccx's
helper page hands to the host through STS_POP (``pccxai/pccx-FPGA-NPU-LLM-kv260``
``sw/runtime/npu/README.md``, "Command/Status AXIL FIFO Layout"). The layout is Xilinx's,
AXI DataMover product guide PG022 (v5.1), sections "Status Interface" (table "Status Word
Details") and "S2MM Status Format in Indeterminate BTT Mode (IBTT)":

- the normal word, 8 bits, the same for MM2S and S2MM: bit 7 OKAY (every transfer of the
  command got an OKAY response), bit 6 SLVERR (a slave answered with an error), bit 5 DECERR
  (address decode error: no slave at the address), bit 4 INTERR (internal error: PG022 names
  a command with BTT = 0 as a cause), bits 3:0 the command's TAG;
- an S2MM built with indeterminate BTT adds, in a 32-bit word, bits 30:8 BRCVD (bytes
  actually received on the stream up to TLAST) and bit 31 EOP (TLAST was received). PG022
  says this format never applies to MM2S.

Why decode every word: pccx's bring-up record (``pccxai/v002-kv260-deploy-20260527``
``debug/results/RESULTS.md``, step 05) first counted a non-empty status FIFO as success; only
decoding the words showed what came back. A word is judged by `judge`: OKAY set, no error
bit, the tag of the command it answers, and (IBTT) the bytes asked for.

>>> decode(0x80).describe()
'0x80: tag 0, OKAY'
>>> decode(0x13).describe()
'0x13: tag 3, INTERR, not OKAY'
>>> decode(0x8000_4083, ibtt=True).describe()
'0x80004083: tag 3, OKAY, 64 bytes received, EOP'
>>> judge(decode(0x13), tag=3)
'INTERR (internal error: the DataMover could not run the command, e.g. a byte count of 0)'
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.errors import BoardError

NORMAL_BITS = 8
IBTT_BITS = 32
_ERRORS = ("slverr", "decerr", "interr")
MEANING = {
    "slverr": "SLVERR (the slave answered the DataMover's access with an error)",
    "decerr": "DECERR (address decode error: no slave answers at the command's address)",
    "interr": "INTERR (internal error: the DataMover could not run the command, e.g. a"
    " byte count of 0)",
}


@dataclass(frozen=True)
class StatusWord:
    """One decoded status word; `bytes_received` and `eop` exist only in the IBTT form."""

    raw: int
    tag: int
    okay: bool
    slverr: bool
    decerr: bool
    interr: bool
    bytes_received: int | None = None
    eop: bool | None = None

    @property
    def errors(self) -> list[str]:
        """The error bits set, as names (``slverr``, ``decerr``, ``interr``)."""
        return [n for n in _ERRORS if getattr(self, n)]

    def describe(self) -> str:
        """The word and every field, one phrase: ``0x13: tag 3, INTERR, not OKAY``."""
        width = 8 if self.bytes_received is not None else 2
        parts = [f"tag {self.tag}"]
        parts += [n.upper() for n in self.errors]
        parts.append("OKAY" if self.okay else "not OKAY")
        if self.bytes_received is not None:
            parts.append(f"{self.bytes_received} bytes received")
            parts.append("EOP" if self.eop else "no EOP")
        return f"{self.raw:#0{width + 2}x}: " + ", ".join(parts)

    def to_json(self) -> dict:
        out = {"raw": self.raw, "tag": self.tag, "okay": self.okay, "errors": self.errors}
        if self.bytes_received is not None:
            out |= {"bytes_received": self.bytes_received, "eop": self.eop}
        return out


def decode(word: int, *, ibtt: bool = False) -> StatusWord:
    """The fields of a status word: 8-bit normal form, or the 32-bit S2MM IBTT form.

    A normal word with bits above 7 set is refused (one line): it is either an IBTT word
    (decode with ``ibtt=True``) or not a status word at all.
    """
    bits = IBTT_BITS if ibtt else NORMAL_BITS
    if not 0 <= word < 1 << bits:
        raise BoardError(
            f"DataMover status {word:#x} is wider than the {bits}-bit"
            f" {'IBTT' if ibtt else 'normal'} status word (PG022)"
        )
    return StatusWord(
        raw=word,
        tag=word & 0xF,
        okay=bool(word >> 7 & 1),
        slverr=bool(word >> 6 & 1),
        decerr=bool(word >> 5 & 1),
        interr=bool(word >> 4 & 1),
        bytes_received=(word >> 8) & ((1 << 23) - 1) if ibtt else None,
        eop=bool(word >> 31 & 1) if ibtt else None,
    )


def encode(*, tag: int, okay: bool = True, slverr: bool = False, decerr: bool = False,
           interr: bool = False, bytes_received: int | None = None,
           eop: bool = False) -> int:  # fmt: skip
    """A status word from its fields (the IBTT form when `bytes_received` is given)."""
    if not 0 <= tag <= 0xF:
        raise BoardError(f"DataMover tag {tag} does not fit in 4 bits")
    word = tag | int(interr) << 4 | int(decerr) << 5 | int(slverr) << 6 | int(okay) << 7
    if bytes_received is not None:
        if not 0 <= bytes_received < 1 << 23:
            raise BoardError(f"bytes received {bytes_received} does not fit in 23 bits")
        word |= bytes_received << 8 | int(eop) << 31
    return word


def judge(status: StatusWord, *, tag: int, nbytes: int | None = None) -> str | None:
    """None when `status` says its command finished as asked, else the first reason why not.

    `tag` is the tag of the command the word should answer; `nbytes` the command's byte count
    (checked against BRCVD for an IBTT word only: the normal word carries no byte count).
    """
    if status.errors:
        return "; ".join(MEANING[e] for e in status.errors)
    if not status.okay:
        return "OKAY clear: a transfer of the command got no OKAY response, no error bit set"
    if status.tag != tag:
        return f"tag {status.tag}, but the command's tag is {tag} (a status of another command)"
    if nbytes is not None and status.bytes_received is not None and status.bytes_received != nbytes:
        return f"{status.bytes_received} bytes received of the {nbytes} commanded"
    return None
