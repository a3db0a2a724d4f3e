"""What the bring-up ladder (`pccx_flow.board.device.doctor`) works with: the `Rung` record
each rung returns, the `Bench` of inputs and open handles, and the helpers the rungs share:
one probe batch with its DONE, the status words of a page collected and judged (every word
decoded per Xilinx PG022, `dm_status`), the likely causes of a bad status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow.board.device import dm_status, regmap
from pccx_flow.board.device.cma import SYSFS_UDMABUF, Buffer
from pccx_flow.board.device.dispatch import Batch, DispatchReport, run_batch
from pccx_flow.board.device.regmap import BoardRegisters
from pccx_flow.board.device.uio import DEV_ROOT, SYSFS_UIO, UIO_NAME, Npu
from pccx_flow.board.isa import L2_WORD_BYTES, encode

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
    statuses: list[dict] = field(default_factory=list)  # every DataMover status word, decoded

    def to_json(self) -> dict:
        return {
            "rung": self.number,
            "name": self.name,
            "passed": self.passed,
            "evidence": self.evidence,
            "likely_causes": self.causes,
            "next_step": self.next_step,
            "status_words": self.statuses,
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


def kick(npu: Npu, words: list[int], timeout: float) -> int:
    """Write `words` (already ending with the DONE marker) and the kick; wait for DONE.

    `dispatch.run_batch` does it (the reissue pacing, the ERROR bit and sticky errors);
    commands are pushed by the caller, whose statuses it collects itself."""
    report = DispatchReport()
    run_batch(npu, Batch(-1, -1, tuple(words)), None, timeout, report)
    return npu.status()


def collect(npu: Npu, page: str, want: int, timeout: float) -> list[int]:
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


def decode_status(word: int) -> dm_status.StatusWord:
    """A status word read through STS_POP: the 32-bit IBTT form when bits above 7 are set."""
    return dm_status.decode(word, ibtt=word > 0xFF)


def judge_words(page: str, words: list[int], tags: list[int], nbytes: int,
                r: Rung) -> list[str]:  # fmt: skip
    """Decode `words` (one per command, tags `tags`) into `r`'s evidence and its status list;
    the problems found. All well: one evidence line with the raw words; otherwise every word
    on a line of its own."""
    evidence = r.evidence
    for k, w in enumerate(words):
        got = decode_status(w)
        want = tags[k] if k < len(tags) else None
        r.statuses.append({"page": page, "expected_tag": want, **got.to_json(),
                           "problem": None if want is None else dm_status.judge(
                               got, tag=want, nbytes=nbytes)})  # fmt: skip
    if not words:
        return [f"{page}: no status word for {len(tags)} command(s)"]
    problems = []
    if len(words) > len(tags):
        problems.append(f"{page}: {len(words)} status words for {len(tags)} command(s)")
    elif len(words) < len(tags):
        problems.append(f"{page}: only {len(words)} status words for {len(tags)} commands")
    for k, (w, tag) in enumerate(zip(words, tags, strict=False)):
        why = dm_status.judge(decode_status(w), tag=tag, nbytes=nbytes)
        if why is not None:
            problems.append(f"{page}: status {k} ({w:#04x}): {why}")
    if problems:
        for k, w in enumerate(words):
            evidence.append(f"{page}: status {k}: {decode_status(w).describe()}")
    elif len(words) == 1:
        evidence.append(f"{page}: status {decode_status(words[0]).describe()}")
    else:
        raw = " ".join(f"{w:#04x}" for w in words)
        evidence.append(f"{page}: {len(words)} statuses {raw}: tags {tags[0]}..{tags[-1]}, OKAY")
    return problems


def flags_line(npu: Npu, page: str) -> tuple[str, int, int, int]:
    flags = npu.flags(page)
    cmd = npu.window.read32(npu.regs.page_register(page, "CMD_LVL"))
    sts = npu.window.read32(npu.regs.page_register(page, "STS_LVL"))
    line = (
        f"{page}: FLAGS={flags:#04x} (cmd_empty={flags & 1} cmd_full={flags >> 1 & 1}"
        f" sts_empty={flags >> 2 & 1} sts_full={flags >> 3 & 1} sticky="
        f"{regmap.sticky_errors(flags):#x}) CMD_LVL={cmd} STS_LVL={sts}"
    )
    return line, flags, cmd, sts



def status_causes(problems: list[str]) -> list[str]:
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



def pattern(n: int, seed: int) -> bytes:
    """`n` bytes no two neighbouring L2 words share (a copy to the wrong place shows)."""
    return bytes((seed * 131 + i * 7 + (i // L2_WORD_BYTES) * 29) & 0xFF for i in range(n))


