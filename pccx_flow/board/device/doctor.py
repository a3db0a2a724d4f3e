"""The board bring-up ladder: seven rungs from "is the device there" to "one layer is right".

pccx's own bring-up of v002 on a KV260 (``pccxai/v002-kv260-deploy-20260527``, ``debug/``:
``dbg_step_00_env_check`` .. ``dbg_step_14_acp_result_readout_isolation`` and
``debug/results/RESULTS.md``) was a ladder of hand-written scripts, and what each failure
meant took a long time to see: MEMSET raised DONE (the frontend was alive) while the ACP
DataMover never emitted a status word; a non-empty status FIFO was taken for success until
the words were decoded; a user-space write to the CCI-400 snoop registers raised SIGBUS
(secure-world registers). `climb` runs the same ladder in order and stops at the first rung
that fails:

1. environment: the UIO node by name and its map, permissions, the u-dma-buf buffers and
   their physical addresses (below 4 GiB), the bitstream's SHA-256 when a path is given;
2. the AXI-Lite window: the status word, every DataMover page's FLAGS and FIFO levels, a
   command FIFO that does not drain after a reset;
3. frontend alive: one MEMSET and its DONE (a one-element CVO follows it: today's RTL raises
   DONE only when a CVO completes, ``pccx-v002.md`` §5);
4. the HP weight channels: one command, then a burst of `regmap.FIFO_DEPTH`, every status
   word decoded (`dm_status`, Xilinx PG022) with a timeout when none arrives;
5. the ACP feature-map channels, by MEMCPY words (ACP in host->L2, ACP out L2->host): one,
   then a burst, statuses decoded and the pattern read back; where HP answers and ACP does
   not, what to check about cache-coherent snooping (never touching secure registers);
6. an L2 round trip: a pattern host->L2->host across a wide L2 range, then a MEMSET that
   changes a copy's length and a copy that must move exactly that, closed by a CVO;
7. a one-layer prefix of a decode step (``emit --bisect``'s ``layer0``) with its golden L2
   words checked after every batch (`golden_check`, read back by `readback`).

Each rung is a function of a `Bench` (plain inputs and the handles earlier rungs opened)
returning a `Rung` record: name, passed, evidence, likely causes and the next step.

On a board, rung 4's commands move bytes into the weight streams that no GEMV consumes;
whether the RTL discards them is not known (no board was available to this project), so
a failure of rung 7 right after rung 4 on a board is worth a second look after reloading
the bitstream. And rung 7 needs an NPU that computes the step: a bitstream of today's RTL
lacks parts of it (docs/board-programs.md), so there rung 7 names the first instruction
the RTL gets wrong, which is what it is for.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow.board.device import dm_status, regmap
from pccx_flow.board.device.cma import (
    ADDRESS_LIMIT,
    SYSFS_UDMABUF,
    Buffer,
    UdmabufSource,
)
from pccx_flow.board.device.dispatch import Batch, DispatchReport, run_batch
from pccx_flow.board.device.regmap import BoardRegisters
from pccx_flow.board.device.uio import DEV_ROOT, SYSFS_UIO, UIO_NAME, Npu, find_uio, open_npu
from pccx_flow.board.isa import L2_WORD_BYTES, decode, encode, memcpy_length_fields
from pccx_flow.errors import BoardError, PccxFlowError

SLOT = 63  # the fmap-shape slot the probes' MEMCPY lengths go through
PROBE_BYTES = 256  # one HP probe command's byte count (the record's steps used 256 too)
PROBE_AREA = 128 << 10  # bytes of the second u-dma-buf the probes use
ACP_WORD = 0x40  # L2 word of rung 5's patterns (word 0 is the DONE marker's scratch)
ACP_BURST = 6  # MEMCPYs of a burst: a MEMSET + 6 + the DONE marker fill the 8-deep FIFO
SWEEP_WORD, SWEEP_WORDS = 0x400, 0x800  # rung 6: L2 words 0x400 .. 0xbff
DONE_MARKER = encode("CVO", func="REDUCE_SUM", src=0, dst=0, length=1)


@dataclass
class Rung:
    """What one rung found: passed or not, the evidence, and when not, why and what next."""

    number: int
    name: str
    passed: bool
    evidence: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    next_step: str = ""

    def to_json(self) -> dict:
        return {
            "rung": self.number,
            "name": self.name,
            "passed": self.passed,
            "evidence": self.evidence,
            "likely_causes": self.causes,
            "next_step": self.next_step,
        }


@dataclass
class Bench:
    """The ladder's inputs (where to look, how long to wait) and what the rungs open."""

    regs: BoardRegisters
    profile: object  # the hardware profile (rung 7 lowers a step for it)
    uio_name: str = UIO_NAME
    sysfs_root: Path = SYSFS_UIO
    dev_root: Path = DEV_ROOT
    udmabuf_sysfs: Path = SYSFS_UDMABUF
    buffers: tuple[str, ...] = ("udmabuf0", "udmabuf1")
    bitstream: Path | None = None
    timeout: float = 1.0  # seconds for each DONE or status word
    weights: Path | None = None  # rung 7's checkpoint (None: a synthetic tiny one)
    position: int = 1
    bus: object = None  # the fake device's register observer
    # the fake board's hook: the emulator becomes the NPU for rung 7 (None on a board)
    load_model: Callable | None = None
    device: Path | None = None  # filled by rung 1
    probe: Buffer | None = None  # filled by rung 1
    npu: Npu | None = None  # filled by rung 2

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()
            self.probe = None
        if self.npu is not None:
            self.npu.window.close()
            self.npu = None


# --- helpers -----------------------------------------------------------------------------


def _kick(npu: Npu, words: list[int], timeout: float) -> int:
    """Write `words` (already ending with the DONE marker) and the kick; wait for DONE.

    `dispatch.run_batch` does it (the reissue pacing, the ERROR bit and sticky errors);
    commands are pushed by the caller, whose statuses it collects itself."""
    report = DispatchReport()
    run_batch(npu, Batch(-1, -1, tuple(words)), None, timeout, report)
    return npu.status()


def _collect(npu: Npu, page: str, want: int, timeout: float) -> list[int]:
    """Pop status words from `page` until `want` came and the FIFO is empty, or `timeout`."""
    words: list[int] = []
    deadline = time.monotonic() + timeout
    pop = npu.regs.page_register(page, "STS_POP")
    while len(words) <= 4 * regmap.FIFO_DEPTH:
        if not npu.flags(page) & regmap.FLAG_STS_EMPTY:
            words.append(npu.window.read32(pop))
            continue
        if len(words) >= want or time.monotonic() >= deadline:
            break
        time.sleep(npu.poll_interval)
    return words


def _decode(word: int) -> dm_status.StatusWord:
    """A status word read through STS_POP: the 32-bit IBTT form when bits above 7 are set."""
    return dm_status.decode(word, ibtt=word > 0xFF)


def _judge(page: str, words: list[int], tags: list[int], nbytes: int,
           evidence: list[str]) -> list[str]:  # fmt: skip
    """Decode `words` (one per command, tags `tags`) into `evidence`; the problems found.

    All well: one line with the raw words. Otherwise every word on a line of its own."""
    if not words:
        return [f"{page}: no status word for {len(tags)} command(s)"]
    problems = []
    if len(words) > len(tags):
        problems.append(f"{page}: {len(words)} status words for {len(tags)} command(s)")
    elif len(words) < len(tags):
        problems.append(f"{page}: only {len(words)} status words for {len(tags)} commands")
    for k, (w, tag) in enumerate(zip(words, tags, strict=False)):
        why = dm_status.judge(_decode(w), tag=tag, nbytes=nbytes)
        if why is not None:
            problems.append(f"{page}: status {k} ({w:#04x}): {why}")
    if problems:
        evidence += [f"{page}: status {k}: {_decode(w).describe()}" for k, w in enumerate(words)]
    elif len(words) == 1:
        evidence.append(f"{page}: status {_decode(words[0]).describe()}")
    else:
        raw = " ".join(f"{w:#04x}" for w in words)
        evidence.append(f"{page}: {len(words)} statuses {raw}: tags {tags[0]}..{tags[-1]}, OKAY")
    return problems


def _flags_line(npu: Npu, page: str) -> tuple[str, int, int, int]:
    flags = npu.flags(page)
    cmd = npu.window.read32(npu.regs.page_register(page, "CMD_LVL"))
    sts = npu.window.read32(npu.regs.page_register(page, "STS_LVL"))
    line = (
        f"{page}: FLAGS={flags:#04x} (cmd_empty={flags & 1} cmd_full={flags >> 1 & 1}"
        f" sts_empty={flags >> 2 & 1} sts_full={flags >> 3 & 1} sticky="
        f"{regmap.sticky_errors(flags):#x}) CMD_LVL={cmd} STS_LVL={sts}"
    )
    return line, flags, cmd, sts


# --- rung 1: environment -----------------------------------------------------------------


def rung_environment(bench: Bench) -> Rung:
    """The UIO node, its map and permissions, the buffers, the bitstream's checksum."""
    r = Rung(1, "environment", False)
    try:
        node = find_uio(bench.uio_name, bench.sysfs_root, bench.dev_root)
    except BoardError as exc:
        r.evidence.append(str(exc))
        r.causes = [
            "the bitstream is not loaded (no UIO device for the NPU's AXI-Lite window)",
            f"the overlay names its UIO device differently (looked for '*{bench.uio_name}*')",
        ]
        r.next_step = (
            "sudo xmutil unloadapp; sudo xmutil loadapp pccx_npu_bd; then"
            " `grep -H . /sys/class/uio/uio*/name` and pass --uio NAME"
        )
        return r
    entry = Path(bench.sysfs_root) / node.name
    name = (entry / "name").read_text(encoding="ascii", errors="replace").strip()
    try:
        addr = int((entry / "maps" / "map0" / "addr").read_text().strip(), 0)
        size = int((entry / "maps" / "map0" / "size").read_text().strip(), 0)
    except (OSError, ValueError):
        addr = size = -1
    r.evidence.append(f"UIO {node} name {name!r}, map0 {addr:#x}+{size:#x}")
    if addr != bench.regs.base or size < bench.regs.window_bytes:
        r.causes = [
            f"map0 is not the profile's register window ({bench.regs.base:#x}+"
            f"{bench.regs.window_bytes:#x}): another device matched the name, or the profile"
            " is not this bitstream's"
        ]
        r.next_step = "give --uio with the NPU's exact UIO name, or a --profile for this bitstream"
        return r
    if not os.access(node, os.R_OK | os.W_OK):
        r.evidence.append(f"{node}: no read/write permission for uid {os.getuid()}")
        r.causes = ["no udev rule gives this user the UIO device, and not running as root"]
        r.next_step = (
            'add SUBSYSTEM=="uio", ATTR{name}=="*fabric*", GROUP="pccx", MODE="0660" to'
            " /etc/udev/rules.d/99-pccx-uio.rules (docs: Running on a KV260) or run with sudo"
        )
        return r
    r.evidence.append(f"{node}: read/write permitted")
    for dev in bench.buffers:
        sysfs = Path(bench.udmabuf_sysfs) / dev
        try:
            phys = int((sysfs / "phys_addr").read_text().strip(), 0)
            have = int((sysfs / "size").read_text().strip(), 0)
        except (OSError, ValueError):
            r.evidence.append(f"{dev}: no {sysfs}/phys_addr and size")
            r.causes = ["the u-dma-buf module is not loaded, or loaded without this buffer"]
            r.next_step = (
                "sudo modprobe u-dma-buf udmabuf0=0x10000000 udmabuf1=0x1000000 (sizes: the"
                " DDR image and the act. buffer that `pccx-flow emit` prints)"
            )
            return r
        r.evidence.append(f"{dev}: physical {phys:#x}, {have:,} bytes")
        if phys + have > ADDRESS_LIMIT:
            r.causes = [f"{dev} ends above 4 GiB; DataMover addresses are 32 bits"]
            r.next_step = "reserve the CMA pool below 4 GiB (the cma= kernel argument)"
            return r
    if bench.bitstream is not None:
        try:
            digest = hashlib.sha256(Path(bench.bitstream).read_bytes()).hexdigest()
        except OSError as exc:
            r.evidence.append(f"bitstream {bench.bitstream}: {exc.strerror}")
            r.causes = ["the bitstream path is wrong or unreadable"]
            r.next_step = "give --bitstream /lib/firmware/xilinx/pccx_npu_bd/pccx_npu_bd.bit.bin"
            return r
        r.evidence.append(f"bitstream {bench.bitstream}: sha256 {digest}")
    try:
        source = UdmabufSource([bench.buffers[-1]], bench.udmabuf_sysfs, bench.dev_root)
        bench.probe = source.allocate("probe", PROBE_AREA)
    except BoardError as exc:
        r.evidence.append(str(exc))
        r.causes = ["the probe area cannot be mapped from the second u-dma-buf device"]
        r.next_step = "check the u-dma-buf device's permissions and size (at least 128 KiB)"
        return r
    bench.device = node
    r.passed = True
    return r


# --- rung 2: the AXI-Lite window ---------------------------------------------------------


def rung_window(bench: Bench) -> Rung:
    """The status word and every page's FLAGS and FIFO levels; reset what is not idle."""
    r = Rung(2, "AXI-Lite window", False)
    try:
        npu = open_npu(bench.regs, bench.device, sysfs_root=bench.sysfs_root, bus=bench.bus)
    except BoardError as exc:
        r.evidence.append(str(exc))
        r.causes = ["the window cannot be mapped (size, permissions)"]
        r.next_step = "check the profile's registers.window_bytes against map0's size"
        return r
    bench.npu = npu
    status = npu.status()
    regs = bench.regs
    r.evidence.append(
        f"status {status:#010x} at {regs.status:#05x} (BUSY={int(bool(status & regs.busy_mask))}"
        f" DONE={int(bool(status & regs.done_mask))}"
        f" ERROR={int(bool(status & regs.error_mask))})"
    )
    lines = {page: _flags_line(npu, page) for page in regs.pages}
    r.evidence += [line for line, *_ in lines.values()]
    dirty = [p for p, (_, flags, cmd, sts) in lines.items()
             if cmd or sts or regmap.sticky_errors(flags)]  # fmt: skip
    if dirty:
        left = npu.reset()
        r.evidence.append(f"reset (statuses drained, sticky errors cleared) of {', '.join(dirty)}")
        stuck = []
        for page in dirty:
            line, _, cmd, _ = _flags_line(npu, page)
            r.evidence.append(f"after reset {line}")
            if cmd:
                stuck.append((page, cmd))
        if stuck:
            page, cmd = stuck[0]
            r.causes = [
                f"the DataMover behind page {page} takes no commands: {cmd} stay in its"
                " command FIFO (an AXI master stalled on an earlier transfer, or the"
                " DataMover's clock or reset not running)",
            ]
            r.next_step = (
                "reload the bitstream (xmutil unloadapp; xmutil loadapp pccx_npu_bd) and run"
                " doctor again; if the FIFO is full again at once, check the DataMover's clock"
                " and reset in the block design and `dmesg` for AXI errors"
            )
            return r
        if left:
            r.causes = [f"not clean after a reset: {'; '.join(left)}"]
            r.next_step = "reload the bitstream; a core that stays BUSY has no soft reset"
            return r
    if status & regs.busy_mask:
        r.causes = ["the core is BUSY before anything was written (a batch of an earlier run)"]
        r.next_step = "reload the bitstream: pccx documents no soft reset of the core"
        return r
    r.passed = True
    return r


# --- rung 3: frontend alive --------------------------------------------------------------


def rung_frontend(bench: Bench) -> Rung:
    """One MEMSET and its DONE: the decoder and scheduler answer, no DataMover involved."""
    r = Rung(3, "frontend alive (MEMSET and DONE)", False)
    npu = bench.npu
    x, y, z = memcpy_length_fields(1)
    memset = encode("MEMSET", dest_cache="fmap_shape", slot=SLOT, a=x, b=y, c=z)
    r.evidence.append(f"MEMSET {memset:#018x}, then the DONE marker CVO {DONE_MARKER:#018x}")
    try:
        status = _kick(npu, [memset, DONE_MARKER], bench.timeout)
    except BoardError as exc:
        r.evidence.append(str(exc))
        r.causes = [
            "the decoder does not take the words: the status word may sit elsewhere in this"
            f" bitstream (the profile reads {bench.regs.status:#05x}; pccx's layers use 0x004,"
            " 0x008 or 0x010)",
            "the core is stuck BUSY or DONE comes from another rule than a CVO completing",
        ]
        r.next_step = (
            "reload the bitstream and run doctor again; check the status offset against the"
            " loaded RTL (a profile with [registers] status_offset = ...)"
        )
        return r
    r.evidence.append(f"DONE (status {status:#010x})")
    for page in bench.regs.pages:
        line, _, cmd, sts = _flags_line(npu, page)
        if cmd or sts:
            r.evidence.append(line)
            r.causes = [f"a MEMSET moved DataMover page {page}, which it never uses"]
            r.next_step = "compare the register map of the profile with the loaded bitstream"
            return r
    r.passed = True
    return r


# --- rungs 4 and 5: the DataMover channels -----------------------------------------------


def _probe_hp(bench: Bench, page: str, count: int, r: Rung) -> list[str]:
    npu = bench.npu
    tags = [(count + k) & 0xF for k in range(count)]
    addr = bench.probe.phys
    commands = [regmap.encode_command(addr=addr, length_bytes=PROBE_BYTES, tag=t) for t in tags]
    for c in commands:
        npu.push_command(page, c)
    command = commands[0]
    level = npu.window.read32(npu.regs.page_register(page, "CMD_LVL"))
    r.evidence.append(
        f"{page}: {count} command(s) of {PROBE_BYTES} bytes at {addr:#x} pushed (the first"
        f" {command:#020x}), CMD_LVL={level}"
    )
    try:
        _kick(npu, [DONE_MARKER], bench.timeout)
    except BoardError as exc:
        return [f"{page}: {exc}"]
    words = _collect(npu, page, count, bench.timeout)
    return _judge(page, words, tags, PROBE_BYTES, r.evidence)


def _status_causes(problems: list[str]) -> list[str]:
    text = " ".join(problems)
    causes = []
    if "INTERR" in text:
        causes.append(
            "INTERR: PG022 names a byte count of 0 as a cause; these commands ask for"
            f" {PROBE_BYTES} bytes, so look at the command word itself (tag [71:68], address"
            " [63:32], type [23], BTT [22:0], pccx sw/runtime/npu/README.md) against how the"
            " DataMover is configured in the block design (address width, DRE)"
        )
    if "DECERR" in text or "SLVERR" in text:
        causes.append(
            "DECERR/SLVERR: the address is not reachable through this port (the PS address"
            " map, or the buffer is not in DDR)"
        )
    if "only" in text:
        causes.append(
            "fewer statuses than commands: during the probe nothing consumes the weight"
            " stream, so a burst larger than the stream's buffering stalls the DataMover (a"
            " limit of this probe when the single command passed), or statuses are dropped"
        )
    elif "status words for" in text and "no status word" not in text:
        causes.append(
            "a status count that differs from the command count: the helper page pushes a"
            " status more than once (a write enable held for several cycles), or drops some"
            " (pccx's record saw three words 0x80 for one command on HP0, step 05; by PG022"
            " 0x80 is OKAY with tag 0, where the record's log read INTERR)"
        )
    if "tag" in text:
        causes.append(
            "a status with another tag: a status of an earlier command, or the tag read from"
            " other bits (PG022: tag in [3:0]; pccx's sw/runtime/npu/dma.py reads [7:4])"
        )
    return causes or ["a DataMover status that is not OKAY for its command"]


def rung_hp(bench: Bench) -> Rung:
    """Each HP weight channel: one command, then a burst; every status word decoded."""
    r = Rung(4, "DataMover weight channels (HP)", False)
    pages = [p for p in bench.regs.pages if p.startswith("hp")]
    silent, problems = [], []
    for page in pages:
        for count in (1, regmap.FIFO_DEPTH):
            found = _probe_hp(bench, page, count, r)
            if found:
                problems += found
                if any("no status word" in p for p in found):
                    silent.append(page)
                break
    if not problems:
        r.passed = True
        return r
    r.evidence += problems
    if len(silent) == len(pages):
        r.causes = [
            "MEMSET raised DONE (rung 3) but no DataMover emitted a status word: the frontend"
            " is alive and the DataMovers are not (their clocks or resets, the helper pages'"
            " command/status streams not connected to them, or the PS-PL HP ports disabled)",
        ]
        r.next_step = (
            "check in the block design that each helper page's command and status streams"
            " reach its DataMover and that the S_AXI_HP ports are enabled; `dmesg` for AXI"
            " errors; reload the bitstream"
        )
    else:
        r.causes = _status_causes(problems)
        r.next_step = (
            "compare the command word above with the DataMover's configuration"
            " (hw/vivado/system_bd.tcl in pccx's board repository); try an address inside the"
            " DDR image's weight area"
        )
        if all("status words for" in p for p in problems):
            r.next_step = (
                "reload the bitstream and repeat; if one command again gets several status"
                " words, look at the write enable of the helper page's status FIFO in the RTL"
            )
    return r


def _acp_batch(bench: Bench, to_host: bool, count: int, l2_word: int, host_off: int,
               r: Rung) -> list[str]:  # fmt: skip
    """`count` one-word MEMCPYs through ACP in (host->L2) or out (L2->host); statuses."""
    npu, probe = bench.npu, bench.probe
    page = "acp_out" if to_host else "acp_in"
    x, y, z = memcpy_length_fields(1)
    words = [encode("MEMSET", dest_cache="fmap_shape", slot=SLOT, a=x, b=y, c=z)]
    tags = [(0x8 + k) & 0xF for k in range(count)]
    for k, tag in enumerate(tags):
        addr = probe.phys + host_off + k * L2_WORD_BYTES
        npu.push_command(page, regmap.encode_command(addr=addr, length_bytes=L2_WORD_BYTES,
                                                     tag=tag))  # fmt: skip
        ends = ("npu", "host") if to_host else ("host", "npu")
        words.append(
            encode("MEMCPY", from_device=ends[0], to_device=ends[1],
                   dest=0 if to_host else l2_word + k, src=l2_word + k if to_host else 0,
                   aux=0, shape_ptr=SLOT)  # fmt: skip
        )
    r.evidence.append(f"{page}: {count} MEMCPY {'L2->host' if to_host else 'host->L2'}"
                      f" of one L2 word each from L2 word {l2_word:#x}")  # fmt: skip
    try:
        _kick(npu, [*words, DONE_MARKER], bench.timeout)
    except BoardError as exc:
        return [f"{page}: {exc}"]
    got = _collect(npu, page, count, bench.timeout)
    return _judge(page, got, tags, L2_WORD_BYTES, r.evidence)


def _pattern(n: int, seed: int) -> bytes:
    """`n` bytes no two neighbouring L2 words share (a copy to the wrong place shows)."""
    return bytes((seed * 131 + i * 7 + (i // L2_WORD_BYTES) * 29) & 0xFF for i in range(n))


def rung_acp(bench: Bench) -> Rung:
    """ACP in and out by MEMCPY words, one then a burst; the pattern must come back."""
    r = Rung(5, "DataMover feature-map channels (ACP) vs HP", False)
    probe = bench.probe
    problems: list[str] = []
    for count in (1, ACP_BURST):
        n = count * L2_WORD_BYTES
        sent = _pattern(n, count)
        probe.view(0, n)[:] = sent
        probe.view(0x1000, n)[:] = bytes(n)
        problems += _acp_batch(bench, False, count, ACP_WORD, 0, r)
        if problems:
            break
        problems += _acp_batch(bench, True, count, ACP_WORD, 0x1000, r)
        if problems:
            break
        back = bytes(probe.view(0x1000, n))
        if back != sent:
            first = next(i for i in range(n) if back[i] != sent[i])
            problems.append(
                f"ACP round trip of {n} bytes: byte {first} came back {back[first]:#04x},"
                f" {sent[first]:#04x} was sent (statuses all OKAY)"
            )
            break
        r.evidence.append(f"{n} bytes host->L2->host through ACP came back equal")
    if not problems:
        r.passed = True
        return r
    r.evidence += problems
    no_status = any("no status word" in p or "DONE not seen" in p for p in problems)
    if no_status:
        r.causes = [
            "the HP channels answer (rung 4) and ACP does not: the ACP takes only 16-byte"
            " single-beat or 64-byte four-beat aligned INCR bursts with AxCACHE 0b0111,"
            " 0b1011 or 0b1111 (UG1085, ACP Limitations; Arm's Cortex-A53 TRM answers other"
            " AxCACHE values with SLVERR), so a DataMover issuing longer bursts needs a"
            " converter in front of the port",
            "cache-coherent snooping not enabled for the port: pccx's bring-up record saw"
            " exactly this (ACP silent, HP answering) and suspected the CCI-400 snoop control"
            " (its hypothesis H1, never confirmed); UG1085 puts S_AXI_ACP_FPD on the APU's"
            " snoop control unit, while CCI-400 snooping concerns the HPC/ACE ports",
        ]
        r.next_step = (
            "check, do not write: which PS port the ACP DataMover drives in the block design"
            " (S_AXI_ACP_FPD or S_AXI_HPC), its burst length and AxCACHE; whether the boot"
            " firmware enables snooping for that port (arm-trusted-firmware plat/xilinx/zynqmp"
            " cci_enable_snoop_dvm_reqs). The CCI-400 registers (0xFD6E0000) are secure-world:"
            " a user-space access raised SIGBUS on pccx's board, so read them from the boot"
            " firmware or a kernel module. pccx-flow never touches them"
        )
    elif any("came back" in p for p in problems):
        r.causes = [
            "statuses OKAY but other bytes came back: a coherency problem (the CPU's view of"
            " the buffer and the ACP's differ: a cached mapping without snooping), or the"
            " MEMCPY's L2 address read differently by the RTL"
        ]
        r.next_step = (
            "map the u-dma-buf devices uncached (O_SYNC, as pccx-flow does; u-dma-buf"
            " sync_mode) and repeat; check the ACP port's coherency settings as above"
        )
    else:
        r.causes = _status_causes(problems)
        r.next_step = "compare the ACP DataMover's configuration with the command word"
    return r


# --- rung 6: L2 round trip ---------------------------------------------------------------


def rung_l2(bench: Bench) -> Rung:
    """A wide pattern host->L2->host, then a MEMSET that changes a copy's length, and a CVO."""
    r = Rung(6, "L2 round trip (MEMCPY, MEMSET, CVO)", False)
    npu, probe = bench.npu, bench.probe
    n = SWEEP_WORDS * L2_WORD_BYTES
    back_off, half_off = 0x8000, 0x10000
    sent = _pattern(n, 3)
    probe.view(0, n)[:] = sent
    probe.view(back_off, n)[:] = b"\xa5" * n
    probe.view(half_off, n)[:] = b"\xa5" * n

    def memset(words: int) -> int:
        x, y, z = memcpy_length_fields(words)
        return encode("MEMSET", dest_cache="fmap_shape", slot=SLOT, a=x, b=y, c=z)

    def memcpy(to_host: bool) -> int:
        ends = ("npu", "host") if to_host else ("host", "npu")
        return encode("MEMCPY", from_device=ends[0], to_device=ends[1],
                      dest=0 if to_host else SWEEP_WORD, src=SWEEP_WORD if to_host else 0,
                      aux=0, shape_ptr=SLOT)  # fmt: skip

    steps = [  # (label, page, host offset, bytes, words)
        ("host->L2", "acp_in", 0, n, [memset(SWEEP_WORDS), memcpy(False)]),
        ("L2->host", "acp_out", back_off, n, [memcpy(True)]),
        ("L2->host after a MEMSET to half the length", "acp_out", half_off, n // 2,
         [memset(SWEEP_WORDS // 2), memcpy(True)]),
    ]  # fmt: skip
    problems: list[str] = []
    for k, (label, page, off, nbytes, words) in enumerate(steps):
        tag = 0xC + k
        command = regmap.encode_command(addr=probe.phys + off, length_bytes=nbytes, tag=tag)
        npu.push_command(page, command)
        try:
            _kick(npu, [*words, DONE_MARKER], bench.timeout)
        except BoardError as exc:
            problems.append(f"{label}: {exc}")
            break
        problems += _judge(page, _collect(npu, page, 1, bench.timeout), [tag], nbytes,
                           r.evidence)  # fmt: skip
        if problems:
            break
        r.evidence.append(f"{label}: {nbytes:,} bytes, DONE from the closing CVO")
    if not problems:
        back, half = bytes(probe.view(back_off, n)), bytes(probe.view(half_off, n))
        if back != sent:
            first = next(i for i in range(n) if back[i] != sent[i])
            word = SWEEP_WORD + first // L2_WORD_BYTES
            problems.append(
                f"L2 word {word:#x} (byte {first % L2_WORD_BYTES}) came back"
                f" {back[first]:#04x}, {sent[first]:#04x} was sent"
            )
            r.causes = [
                "an L2 word does not hold what was written (a bad bit in that L2 bank), or"
                " the copy's address arithmetic differs from the ISA's (word addresses,"
                " pccx-v002 mem_dispatcher.sv)"
            ]
            r.next_step = (
                "repeat with the bitstream reloaded; if the same word fails, run the RTL"
                " testbench of the L2 around it; if the offset drifts, compare MEMCPY's address"
                " fields with the RTL's"
            )
        elif half[: n // 2] != sent[: n // 2] or half[n // 2 :] != b"\xa5" * (n // 2):
            problems.append(
                f"the copy after the MEMSET to {n // 2:,} bytes moved another length: the"
                " MEMSET did not change the slot the MEMCPY read its length from"
            )
            r.causes = ["MEMSET writes a different constant slot than MEMCPY's shape_ptr reads"]
            r.next_step = "compare the MEMSET and MEMCPY field layouts with the RTL decoder's"
        else:
            r.evidence.append(
                f"{n:,} bytes came back equal through L2 words {SWEEP_WORD:#x}.."
                f"{SWEEP_WORD + SWEEP_WORDS - 1:#x}; after the MEMSET the copy moved exactly"
                f" {n // 2:,} bytes"
            )
            r.passed = True
            return r
    r.evidence += problems
    if not r.causes:
        r.causes = _status_causes(problems)
        r.next_step = "see rungs 4 and 5: the same channels moved smaller copies"
    return r


# --- rung 7: one layer with golden vectors -----------------------------------------------


def layer0_stage(profile, weights, position: int):
    """The ``layer0`` prefix of the step at `position` lowered for `profile`, and per word
    its golden L2 writes (`pccx_flow.board.emulator.golden`), as `golden_check` reads them."""
    from pccx_flow.board.device.golden_check import read_golden
    from pccx_flow.board.emulator.bisect import bisect_programs, prefix_golden
    from pccx_flow.board.emulator.check import default_tokens, reference_prefix
    from pccx_flow.board.emulator.golden import write_golden
    from pccx_flow.board.isa.target import row_align_for, target_of
    from pccx_flow.board.program.lower import lower
    from pccx_flow.execute.runtime import StepContext
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    config = weights.config
    target = target_of(profile)
    graph = build_decode_graph(config, semantics="pccx", position=position, profile=profile,
                               row_align=row_align_for(target))  # fmt: skip
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile,
                          "critical-path", seed=0)  # fmt: skip
    program = lower(graph, schedule, profile, config, target=target.name)
    stage = next(s for s in bisect_programs(program) if s.name == "layer0")
    tokens = default_tokens(position + 1, config.vocab)
    k_past, v_past, _ = reference_prefix(stage.program, weights, tokens)
    ctx = StepContext(config, "pccx", position, tokens[-1], "float32")
    record = prefix_golden(stage.program, weights, k_past.copy(), v_past.copy(), tokens[-1], ctx)
    with tempfile.TemporaryDirectory(prefix="pccx-flow-doctor-") as d:
        write_golden(stage.program, record, Path(d))
        golden = read_golden(Path(d))
    return stage, golden, tokens, k_past, v_past, ctx


def rung_layer(bench: Bench) -> Rung:
    """The one-layer prefix of a tiny step, L2 checked against golden words after each batch."""
    from pccx_flow.board.device.dispatch import plan
    from pccx_flow.board.device.golden_check import check_batch
    from pccx_flow.board.device.host_side import HostSide
    from pccx_flow.board.device.readback import MemcpyReadBack
    from pccx_flow.board.device.run_step import host_buffers, readback_offset, run_step
    from pccx_flow.weights.checkpoint import open_checkpoint

    r = Rung(7, "one layer with golden vectors (emit --bisect layer0)", False)
    with tempfile.TemporaryDirectory(prefix="pccx-flow-doctor-") as d:
        if bench.weights is None:
            from pccx_flow.model.config import get_config
            from pccx_flow.weights.synth import write_synthetic_checkpoint

            path = write_synthetic_checkpoint(get_config("tiny"), 0, Path(d) / "ckpt",
                                              progress=False)  # fmt: skip
            what = "synthetic tiny checkpoint (seed 0)"
        else:
            path, what = bench.weights, str(bench.weights)
        weights = open_checkpoint(path)
        stage, golden, tokens, k_past, v_past, ctx = layer0_stage(
            bench.profile, weights, bench.position
        )
        program = stage.program
        r.evidence.append(
            f"layer0 prefix of the {weights.config.name} step at position {bench.position}"
            f" ({what}): {stage.instructions} words, {stage.batches} batches,"
            f" {stage.host_steps} host steps; golden L2 words of {len(golden)} instructions"
        )
        readback = max((-(-len(w.data) // 16) * 16 for ws in golden.values() for w in ws),
                       default=0)  # fmt: skip
        source = UdmabufSource(list(bench.buffers), bench.udmabuf_sysfs, bench.dev_root)
        buffers = host_buffers(program, source, weights, k_past, v_past, readback)
        try:
            if bench.load_model is not None:
                # the fake's ``corrupt`` fault: the first GEMV with golden words, or any word
                ops = {i: decode(program.words[i]).op for i in golden}
                first = min((i for i in golden if ops[i] == "GEMV"), default=min(golden))
                bench.load_model(program, buffers, weights.config, first)
            batches = [b for b in plan(program, 1 << 30) if isinstance(b, Batch)]
            reader = MemcpyReadBack(bench.npu, program, buffers["act"], readback_offset(program),
                                    bench.timeout)  # fmt: skip

            def check(done: int, _total: int) -> None:
                b = batches[done - 1]
                reader.after_word = b.last
                line = check_batch(golden, b.first, b.last, program.nodes, reader)
                if line is not None:
                    raise BoardError(f"after batch {b.index}, {line}")

            result = run_step(program, bench.npu, buffers, tokens[-1],
                              host=HostSide(program, buffers["act"], weights, ctx),
                              timeout=bench.timeout, progress=check)  # fmt: skip
        except PccxFlowError as exc:
            r.evidence.append(str(exc))
            r.causes = [
                "the first instruction named above computes or stores differently from the"
                " emulator's (golden) reading of the ISA: its engine, its L2 addresses, or"
                " the numbers it reads (weights and KV rows from the DDR image)",
            ]
            r.next_step = (
                "run the growing prefixes one by one (`pccx-flow emit --bisect DIR --weights"
                " CKPT`, then `pccx-flow dispatch DIR/N-NAME.prog --check-golden"
                " DIR/N-NAME.golden`) and look at the first instruction kind that fails"
            )
            return r
        finally:
            for b in buffers.values():
                b.close()
    rep = result.report
    r.evidence.append(
        f"{rep.batches} batches, {rep.host_steps} host steps, {rep.descriptors} DataMover"
        f" commands; L2 matched the golden words after every batch ({reader.batches} read-back"
        " batches)"
    )
    r.passed = True
    return r


RUNGS: tuple[Callable[[Bench], Rung], ...] = (
    rung_environment, rung_window, rung_frontend, rung_hp, rung_acp, rung_l2, rung_layer,
)  # fmt: skip


def climb(bench: Bench, rungs=RUNGS) -> list[Rung]:
    """Run `rungs` in order, stopping after the first that fails; close what they opened."""
    out: list[Rung] = []
    try:
        for rung in rungs:
            if rung is rung_layer and bench.probe is not None:
                bench.probe.close()  # rung 7 allocates the buffers afresh
                bench.probe = None
            out.append(rung(bench))
            if not out[-1].passed:
                break
    finally:
        bench.close()
    return out


def format_report(rungs: list[Rung], total: int = len(RUNGS)) -> str:
    """The terminal report: one block per rung climbed, the failing one with its diagnosis."""
    lines = []
    for r in rungs:
        lines.append(f"rung {r.number} {r.name}: {'PASS' if r.passed else 'FAIL'}")
        lines += [f"    {e}" for e in r.evidence]
        if not r.passed:
            lines += [f"  likely cause: {c}" for c in r.causes]
            lines.append(f"  next: {r.next_step}")
    passed = sum(r.passed for r in rungs)
    if passed == total:
        lines.append(f"all {total} rungs passed")
    else:
        lines.append(f"stopped at rung {rungs[-1].number} of {total} ({passed} passed)")
    return "\n".join(lines)
