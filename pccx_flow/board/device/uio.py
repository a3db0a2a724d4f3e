"""Open the NPU's UIO device, map its register window and talk to it with timeouts.

On a KV260 the NPU's AXI-Lite window is a Linux UIO device (``/dev/uioN``) whose sysfs
entry ``/sys/class/uio/uioN/name`` contains ``fabric`` (pccx ``sw/runtime/uio.py``
``find_fabric_uio``); mapping 0 is the whole window. Everything here takes the sysfs root and
the device path as parameters, so tests run against a fake tree and a plain file (see
`pccx_flow.board.device.fake_device`); nothing needs root unless a real device is opened.

A read of the status register before the hardware can answer can hang the AXI bus (pccx
``sw/runtime/uio.py`` warns a power cycle may follow), so every wait here has a deadline and
ends in a one-line `BoardError`.

An optional `Bus` observes each access: a real device needs none (the hardware sees the
writes); the fake device uses it to see each write in order, the way an AXI slave does.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pccx_flow.board.device import regmap
from pccx_flow.board.device.regmap import BoardRegisters
from pccx_flow.errors import BoardError

SYSFS_UIO = Path("/sys/class/uio")
DEV_ROOT = Path("/dev")
UIO_NAME = "fabric"  # pccx sw/runtime/uio.py: the NPU's UIO name contains 'fabric'


class BoardTimeout(BoardError):
    """A status wait that passed its deadline."""


class DeviceGone(BoardError):
    """The device file disappeared or the device stopped answering."""


class Bus(Protocol):
    """Observer of register accesses (the fake device's side of the AXI-Lite port)."""

    def wrote(self, offset: int, size: int) -> None: ...

    def will_read(self, offset: int, size: int) -> None: ...


def find_uio(name: str = UIO_NAME, sysfs_root: Path = SYSFS_UIO, dev_root: Path = DEV_ROOT) -> Path:
    """The device node of the first UIO device whose sysfs ``name`` contains `name`."""
    seen = []
    entries = sorted(Path(sysfs_root).glob("uio*"), key=lambda p: (len(p.name), p.name))
    for entry in entries:
        try:
            uio_name = (entry / "name").read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        seen.append(f"{entry.name}={uio_name}")
        if name.lower() in uio_name.lower():
            return Path(dev_root) / entry.name
    found = ", ".join(seen) if seen else "none"
    raise BoardError(
        f"no UIO device named '*{name}*' under {sysfs_root} (found: {found}); load the "
        "bitstream first (xmutil loadapp ...) or give --device /dev/uioN"
    )


def uio_map_size(device: Path, sysfs_root: Path = SYSFS_UIO) -> int | None:
    """The size of mapping 0 of a UIO device from sysfs, or None when sysfs does not say."""
    try:
        text = (Path(sysfs_root) / Path(device).name / "maps" / "map0" / "size").read_text()
        return int(text.strip(), 0)
    except (OSError, ValueError):
        return None


class Window:
    """A mapped register window: 32/64-bit little-endian accesses at byte offsets."""

    def __init__(self, path: Path, size: int, bus: Bus | None = None):
        self.path = Path(path)
        self.size = size
        self.bus = bus
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_SYNC)
        except OSError as exc:
            hint = (
                "run as a user allowed to open it (a udev rule, see README 'Running on a KV260')"
                if exc.errno in (1, 13)
                else "check the device path (is the bitstream loaded?)"
            )
            raise BoardError(f"cannot open {self.path}: {exc.strerror}; {hint}") from None
        self._inode = os.fstat(self._fd).st_ino
        try:
            self._mm: mmap.mmap | None = mmap.mmap(
                self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
            )
        except (OSError, ValueError) as exc:
            os.close(self._fd)
            raise BoardError(
                f"cannot map {size:#x} bytes of {self.path}: {exc}; check registers.window_bytes"
                " of the profile against the device's map0 size"
            ) from None

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
            os.close(self._fd)

    def __enter__(self) -> Window:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def alive(self) -> bool:
        """True while the device file still exists as the one that was opened."""
        if self._mm is None:
            return False
        try:
            return os.stat(self.path).st_ino == self._inode
        except OSError:
            return False

    def _check(self, offset: int, size: int) -> mmap.mmap:
        if self._mm is None:
            raise DeviceGone(f"{self.path} is closed")
        if offset % size or not 0 <= offset <= self.size - size:
            raise BoardError(
                f"register access of {size} bytes at {offset:#x} is unaligned or outside the"
                f" {self.size:#x}-byte window of {self.path}"
            )
        return self._mm

    def write32(self, offset: int, value: int) -> None:
        struct.pack_into("<I", self._check(offset, 4), offset, value & 0xFFFF_FFFF)
        if self.bus is not None:
            self.bus.wrote(offset, 4)

    def write64(self, offset: int, value: int) -> None:
        """One 64-bit store, as pccx's ``sw/runtime/uio.py`` does it (``struct.pack_into``).

        Whether CPython's copy reaches the AXI-Lite slave as a single 64-bit beat has not
        been checked on a board; the bare-metal driver writes two 32-bit halves on 32-bit
        CPUs (``npu_driver.c`` ``pccx_npu_write64``).
        """
        struct.pack_into("<Q", self._check(offset, 8), offset, value & (1 << 64) - 1)
        if self.bus is not None:
            self.bus.wrote(offset, 8)

    def read32(self, offset: int) -> int:
        mm = self._check(offset, 4)
        if self.bus is not None:
            self.bus.will_read(offset, 4)
        return struct.unpack_from("<I", mm, offset)[0]

    def read64(self, offset: int) -> int:
        mm = self._check(offset, 8)
        if self.bus is not None:
            self.bus.will_read(offset, 8)
        return struct.unpack_from("<Q", mm, offset)[0]


@dataclass
class Npu:
    """The NPU behind a `Window`, addressed through a profile's `BoardRegisters`."""

    window: Window
    regs: BoardRegisters
    poll_interval: float = 1e-4
    polls: int = 0

    # --- the instruction path ---

    def write_instruction(self, word: int) -> None:
        """One 64-bit instruction word into the command FIFO (a single 64-bit write)."""
        self.window.write64(self.regs.instruction, word)

    def kick(self) -> None:
        """End the batch: the RTL pushes the kick marker and starts decoding."""
        self.window.write64(self.regs.kick, regmap.KICK_WORD)

    def status(self) -> int:
        """The low 32 bits of the status word (BUSY, DONE, ERROR)."""
        return self.window.read32(self.regs.status)

    def wait_status(
        self, ready: Callable[[int], bool], what: str, timeout: float | None = None
    ) -> int:
        """Poll status until ``ready(status)``; `BoardTimeout` or `DeviceGone` otherwise."""
        limit = self.regs.poll_timeout_seconds if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            if not self.window.alive():
                raise DeviceGone(f"device {self.window.path} disappeared while waiting for {what}")
            status = self.status()
            self.polls += 1
            if ready(status):
                return status
            if time.monotonic() >= deadline:
                raise BoardTimeout(
                    f"{what} not seen within {limit:g} s (status {status:#010x};"
                    f" registers.poll_timeout_seconds of profile {self.regs.profile})"
                )
            time.sleep(self.poll_interval)

    def wait_done(self, timeout: float | None = None) -> int:
        """Wait for DONE with BUSY clear."""
        busy, done = self.regs.busy_mask, self.regs.done_mask
        return self.wait_status(lambda s: s & done and not s & busy, "DONE", timeout)

    def wait_idle(self, timeout: float | None = None) -> int:
        """Wait for BUSY clear."""
        return self.wait_status(lambda s: not s & self.regs.busy_mask, "idle (BUSY clear)", timeout)

    # --- DataMover pages ---

    def flags(self, page: str) -> int:
        return self.window.read32(self.regs.page_register(page, "FLAGS"))

    def push_command(self, page: str, command: int) -> None:
        """Stage a 72-bit command in CMD_LO/HI/EXT and push it; a full FIFO is an error."""
        if self.flags(page) & regmap.FLAG_CMD_FULL:
            raise BoardError(
                f"DataMover page {page}: command FIFO full (depth {regmap.FIFO_DEPTH})"
            )
        lo, hi, ext = regmap.command_registers(command)
        self.window.write32(self.regs.page_register(page, "CMD_LO"), lo)
        self.window.write32(self.regs.page_register(page, "CMD_HI"), hi)
        self.window.write32(self.regs.page_register(page, "CMD_EXT"), ext)
        self.window.write32(self.regs.page_register(page, "CMD_PUSH"), 1)

    def status_level(self, page: str) -> int:
        return self.window.read32(self.regs.page_register(page, "STS_LVL"))

    def pop_status(self, page: str) -> int | None:
        """One 8-bit status word, or None when the status FIFO is empty."""
        if self.flags(page) & regmap.FLAG_STS_EMPTY:
            return None
        return self.window.read32(self.regs.page_register(page, "STS_POP")) & 0xFF

    def clear_errors(self, page: str) -> None:
        self.window.write32(self.regs.page_register(page, "ERR_W1C"), regmap.ERR_W1C_ALL)

    def probe(self) -> list[str]:
        """A read-only look at the window: the status word and each page's FLAGS, one line each.

        After a clean bitstream load every page should say ``idle`` (command and status FIFOs
        empty, no sticky error), as pccx's ``hw/scripts/post_deploy_smoke.py`` checks.
        """
        lines = [f"status {self.status():#010x} at {self.regs.status:#05x}"]
        for page in self.regs.pages:
            flags = self.flags(page)
            idle = flags & regmap.FLAG_CMD_EMPTY and flags & regmap.FLAG_STS_EMPTY
            sticky = regmap.sticky_errors(flags)
            state = "idle" if idle and not sticky else "NOT idle"
            lines.append(f"{page:8s} FLAGS={flags:#04x} {state} (sticky errors {sticky:#x})")
        return lines

    def reset(self) -> list[str]:
        """Drain every page's status FIFO and clear its sticky errors; what is left, as text.

        pccx documents no soft reset of the NPU core itself: a core that stays BUSY needs
        the bitstream reloaded. The returned list names what this could not clear.
        """
        left = []
        for page in self.regs.pages:
            for _ in range(regmap.FIFO_DEPTH + 1):
                if self.pop_status(page) is None:
                    break
            self.clear_errors(page)
            flags = self.flags(page)
            if regmap.sticky_errors(flags) or not flags & regmap.FLAG_STS_EMPTY:
                left.append(f"{page} FLAGS={flags:#04x}")
        if self.status() & self.regs.busy_mask:
            left.append("core BUSY (no soft reset: reload the bitstream)")
        return left


def open_npu(
    registers: BoardRegisters,
    device: Path | None = None,
    *,
    sysfs_root: Path = SYSFS_UIO,
    dev_root: Path = DEV_ROOT,
    bus: Bus | None = None,
) -> Npu:
    """Map the NPU window of `device` (found by UIO name under `sysfs_root` when None)."""
    path = Path(device) if device is not None else find_uio(UIO_NAME, sysfs_root, dev_root)
    size = uio_map_size(path, sysfs_root)
    if size is not None and size < registers.window_bytes:
        raise BoardError(
            f"{path}: UIO map0 is {size:#x} bytes, smaller than the profile's register window"
            f" ({registers.window_bytes:#x}); wrong device or wrong profile"
        )
    return Npu(Window(path, registers.window_bytes, bus=bus), registers)
