"""The NPU's register window and the DataMover command pages, as data.

The pccx repositories disagree about the register map (the status word sits at 0x004, 0x008
or 0x010 depending on the layer, ``pccx-v002.md`` §5), so the offsets a board backend uses
come from the hardware profile (``[registers]`` and ``[registers.datamover_pages]``), not from
constants here. What this module does hold as tables are the layouts that every pccx source
agrees on, each with the file it was read from in the board repository
``pccxai/pccx-FPGA-NPU-LLM-kv260``:

- the register offsets inside one DataMover helper page (``sw/runtime/npu/dma.py``,
  ``sw/runtime/npu/README.md``),
- the bits of a page's FLAGS register (``hw/scripts/post_deploy_smoke.py``),
- the 72-bit DataMover command and how it is staged in CMD_LO/HI/EXT
  (``sw/runtime/npu/dma.py`` ``pack_datamover_command``, ``sw/runtime/npu/README.md``),
- the 8-bit DataMover status word (Xilinx PG022; see `STATUS_FIELDS` for the disagreement
  with pccx's ``dma.py``).

>>> cmd = encode_command(addr=0x12345678, tag=0xA, length_bytes=0x40)
>>> hex(cmd)
'0xa01234567840800040'
>>> [hex(r) for r in command_registers(cmd)]
['0x40800040', '0x12345678', '0xa0']
>>> decode_command(cmd).length_bytes
64
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.errors import BoardError
from pccx_flow.hardware.profile import Profile


@dataclass(frozen=True)
class BitField:
    """Bits [hi:lo] (inclusive) of a register or command word, and what they mean."""

    name: str
    hi: int
    lo: int
    meaning: str

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def get(self, word: int) -> int:
        return (word >> self.lo) & self.mask

    def put(self, value: int) -> int:
        if not 0 <= value <= self.mask:
            raise BoardError(
                f"DataMover field {self.name} = {value:#x} does not fit in {self.width} bits"
            )
        return value << self.lo


# --- The NPU control window -------------------------------------------------------------

# Written to the kick register to end a batch; the RTL pushes this marker into the command
# FIFO itself. sw/baremetal/npu_driver/npu_driver.h PCCX_NPU_KICK_WORD; sw/runtime/uio.py
# push_kick says any value written to the kick register triggers it.
KICK_WORD = 0x8000_0000_0000_0000

# Status bit 2 = ERROR: sw/baremetal/npu_driver/npu_driver.h PCCX_NPU_STATUS_ERROR (the
# profile carries BUSY and DONE; ERROR is only defined by the bare-metal driver).
STATUS_ERROR_BIT = 2

# --- One DataMover helper page (a 4 KiB AXI-Lite page per channel) ----------------------

# Offsets inside a page: sw/runtime/npu/dma.py (CMD_LO .. ERR_W1C) and the table
# "Command/Status AXIL FIFO Layout" of sw/runtime/npu/README.md.
PAGE_REGISTERS: dict[str, int] = {
    "CMD_LO": 0x000,  # staged command bits [31:0]
    "CMD_HI": 0x004,  # staged command bits [63:32]
    "CMD_EXT": 0x008,  # staged command bits [71:64] in [7:0]
    "CMD_PUSH": 0x00C,  # write: push the staged command into the command FIFO
    "STS_POP": 0x010,  # read: pop one 8-bit status word
    "FLAGS": 0x014,  # read: FIFO empty/full and sticky error bits
    "CMD_LVL": 0x018,  # read: command FIFO occupancy
    "STS_LVL": 0x01C,  # read: status FIFO occupancy
    "ERR_W1C": 0x020,  # write 1 to clear sticky error bits
}
PAGE_BYTES = 0x1000  # sw/runtime/npu/address_map.py HELPER_PAGE_SIZE
FIFO_DEPTH = 8  # sw/runtime/npu/README.md: "Each DataMover helper ... with FIFO depth 8"

# FLAGS bits: bit0 cmd_empty, bit1 cmd_full, bit2 sts_empty, bit3 sts_full
# (sw/runtime/npu/dma.py FLAG_*), bits [7:4] sticky errors (hw/scripts/post_deploy_smoke.py
# "FLAGS layout: bit0=cmd_empty, bit1=cmd_full, bit2=sts_empty, bit3=sts_full,
# bits[7:4]=sticky errors"). pccx names no individual sticky bit, so they are reported raw.
FLAG_CMD_EMPTY = 1 << 0
FLAG_CMD_FULL = 1 << 1
FLAG_STS_EMPTY = 1 << 2
FLAG_STS_FULL = 1 << 3
FLAGS_STICKY = BitField("sticky", 7, 4, "sticky error bits, cleared through ERR_W1C")
# ERR_W1C takes the sticky bits in the positions FLAGS shows them (pccx documents the
# register as "clear sticky error bits" without a layout; same positions is an assumption).
ERR_W1C_ALL = FLAGS_STICKY.mask << FLAGS_STICKY.lo

# --- The 72-bit DataMover command -------------------------------------------------------

# sw/runtime/npu/README.md: "tag[71:68], reserved zero bits [67:64], addr[63:32], drr[31]=0,
# eof[30], dsa[29:24]=0, type[23]=1, and btt[22:0]"; sw/runtime/npu/dma.py packs the same.
COMMAND_FIELDS: tuple[BitField, ...] = (
    BitField("tag", 71, 68, "4-bit command tag, echoed in the status word"),
    BitField("reserved", 67, 64, "zero"),
    BitField("addr", 63, 32, "32-bit physical address (source for MM2S, destination for S2MM)"),
    BitField("drr", 31, 31, "DRE realignment request, zero"),
    BitField("eof", 30, 30, "end of frame (TLAST at the end of this command)"),
    BitField("dsa", 29, 24, "DRE stream alignment, zero"),
    BitField("type", 23, 23, "1 = incrementing address burst"),
    BitField("btt", 22, 0, "bytes to transfer, 1 .. 2**23 - 1"),
)
COMMAND_BITS = 72
_CMD = {f.name: f for f in COMMAND_FIELDS}

# --- The 8-bit DataMover status word ----------------------------------------------------

# Xilinx PG022 (AXI DataMover) "Status Word Details": bit7 OKAY, bit6 SLVERR, bit5 DECERR,
# bit4 INTERR, [3:0] TAG. pccx's sw/runtime/npu/dma.py poll_status reads the tag from bits
# [7:4] instead; pccx-flow follows the IP's documented layout and lists this disagreement.
STATUS_FIELDS: tuple[BitField, ...] = (
    BitField("okay", 7, 7, "every transfer of the command got an OKAY response"),
    BitField("slverr", 6, 6, "a slave reported an error"),
    BitField("decerr", 5, 5, "address decode error"),
    BitField("interr", 4, 4, "internal error (e.g. a zero byte count)"),
    BitField("tag", 3, 0, "the tag of the command this status belongs to"),
)
_STS = {f.name: f for f in STATUS_FIELDS}
STATUS_DISAGREEMENT = (
    "DataMover status tag: Xilinx PG022 puts it in bits [3:0] (OKAY/SLVERR/DECERR/INTERR in "
    "[7:4]); pccx sw/runtime/npu/dma.py poll_status reads it from bits [7:4]"
)


@dataclass(frozen=True)
class DataMoverCommand:
    """One decoded 72-bit command."""

    addr: int
    length_bytes: int
    tag: int
    eof: bool


@dataclass(frozen=True)
class DataMoverStatus:
    """One decoded 8-bit status word."""

    tag: int
    okay: bool
    slverr: bool
    decerr: bool
    interr: bool

    @property
    def errors(self) -> list[str]:
        return [n for n in ("slverr", "decerr", "interr") if getattr(self, n)]


def encode_command(*, addr: int, length_bytes: int, tag: int = 0, eof: bool = True) -> int:
    """The 72-bit command word; a value that does not fit is a one-line `BoardError`."""
    if not 1 <= length_bytes <= _CMD["btt"].mask:
        raise BoardError(
            f"DataMover length {length_bytes} bytes is outside 1 .. {_CMD['btt'].mask}"
            " (23-bit byte count); split the transfer"
        )
    return (
        _CMD["tag"].put(tag)
        | _CMD["addr"].put(addr)
        | _CMD["eof"].put(int(eof))
        | _CMD["type"].put(1)
        | _CMD["btt"].put(length_bytes)
    )


def decode_command(word: int) -> DataMoverCommand:
    """The fields of a 72-bit command; reserved or constant bits that are wrong are refused."""
    if not 0 <= word < 1 << COMMAND_BITS:
        raise BoardError(f"DataMover command {word:#x} is wider than {COMMAND_BITS} bits")
    for name, want in (("reserved", 0), ("drr", 0), ("dsa", 0), ("type", 1)):
        got = _CMD[name].get(word)
        if got != want:
            raise BoardError(f"DataMover command {word:#x}: field {name} is {got}, must be {want}")
    if _CMD["btt"].get(word) == 0:
        raise BoardError(f"DataMover command {word:#x}: byte count 0 (the IP's INTERR case)")
    return DataMoverCommand(
        addr=_CMD["addr"].get(word),
        length_bytes=_CMD["btt"].get(word),
        tag=_CMD["tag"].get(word),
        eof=bool(_CMD["eof"].get(word)),
    )


def command_registers(word: int) -> tuple[int, int, int]:
    """(CMD_LO, CMD_HI, CMD_EXT): the three 32-bit writes that stage a command."""
    return word & 0xFFFF_FFFF, (word >> 32) & 0xFFFF_FFFF, (word >> 64) & 0xFF


def command_from_registers(lo: int, hi: int, ext: int) -> int:
    """The 72-bit command staged by CMD_LO/HI/EXT (only CMD_EXT[7:0] is used)."""
    return (lo & 0xFFFF_FFFF) | (hi & 0xFFFF_FFFF) << 32 | (ext & 0xFF) << 64


def encode_status(
    *, tag: int, okay: bool = True, slverr: bool = False, decerr: bool = False, interr: bool = False
) -> int:
    """The 8-bit status word (PG022 layout)."""
    return (
        _STS["okay"].put(int(okay))
        | _STS["slverr"].put(int(slverr))
        | _STS["decerr"].put(int(decerr))
        | _STS["interr"].put(int(interr))
        | _STS["tag"].put(tag)
    )


def decode_status(word: int) -> DataMoverStatus:
    """The fields of an 8-bit status word (PG022 layout)."""
    return DataMoverStatus(
        tag=_STS["tag"].get(word),
        okay=bool(_STS["okay"].get(word)),
        slverr=bool(_STS["slverr"].get(word)),
        decerr=bool(_STS["decerr"].get(word)),
        interr=bool(_STS["interr"].get(word)),
    )


def sticky_errors(flags: int) -> int:
    """The sticky error nibble of a FLAGS value (0 = none)."""
    return FLAGS_STICKY.get(flags)


@dataclass(frozen=True)
class BoardRegisters:
    """The register window of one hardware profile, as offsets inside the mapped window.

    ``pages`` maps each DataMover channel name of the profile to the offset of its helper page
    inside the NPU's window (the profile gives physical addresses; the window starts at
    ``registers.base``).
    """

    profile: str
    base: int
    window_bytes: int
    instruction: int
    kick: int
    status: int
    status_alternatives: tuple[int, ...]
    busy_mask: int
    done_mask: int
    error_mask: int
    max_batch: int
    poll_timeout_seconds: float
    pages: dict[str, int]
    # How the command FIFO hands words on (profile [program] command_fifo): "reissue" (the
    # public AXIL_CMD_IN decodes the last word written again every cycle until the next
    # write, so the host follows every word with a kick-marker word the decoder drops).
    command_fifo: str = "ideal"

    def page_register(self, page: str, register: str) -> int:
        """Offset in the window of one register of one DataMover page."""
        if page not in self.pages:
            raise BoardError(
                f"unknown DataMover page {page!r}; profile {self.profile} has"
                f" {', '.join(self.pages)}"
            )
        return self.pages[page] + PAGE_REGISTERS[register]


def board_registers(profile: Profile) -> BoardRegisters:
    """The `BoardRegisters` of a loaded profile; pages outside the window are refused."""
    r = profile.registers
    pages = {}
    for name, addr in r.datamover_pages.items():
        off = addr - r.base
        if off < 0 or off + PAGE_BYTES > r.window_bytes:
            raise BoardError(
                f"profile {profile.name}: DataMover page {name} at {addr:#x} lies outside the"
                f" register window {r.base:#x}+{r.window_bytes:#x}; fix registers.datamover_pages"
            )
        pages[name] = off
    return BoardRegisters(
        profile=profile.name,
        base=r.base,
        window_bytes=r.window_bytes,
        instruction=r.instruction_offset,
        kick=r.kick_offset,
        status=r.status_offset,
        status_alternatives=tuple(r.status_offset_alternatives),
        busy_mask=1 << r.busy_bit,
        done_mask=1 << r.done_bit,
        error_mask=1 << STATUS_ERROR_BIT,
        max_batch=r.max_batch,
        poll_timeout_seconds=r.poll_timeout_seconds,
        pages=pages,
        command_fifo=profile.program.command_fifo,
    )
