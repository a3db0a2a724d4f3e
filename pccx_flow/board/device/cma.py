"""Physically contiguous host buffers for the DataMover: where they come from and their address.

A DataMover command carries a 32-bit physical address (``pccx-v002.md`` §5), so whatever the
NPU streams (the DDR image: weights and KV cache; the activations it writes back) must sit in
physically contiguous memory below 4 GiB, which on a KV260 means the kernel's CMA pool.
pccx's own runtime (``pccxai/pccx-FPGA-NPU-LLM-kv260`` ``sw/runtime/``) allocates no such
buffer: its token path loads weights into L2 once and reads back one token from status, and
``sw/runtime/npu/dma.py`` ``issue_command`` takes the physical address from its caller. So
pccx-flow follows the usual Linux way on Zynq MPSoC, the ``u-dma-buf`` driver
(github.com/ikwzm/udmabuf): a buffer reserved at module load (``udmabufN=SIZE``) appears as
``/dev/udmabufN`` (mmap it) with its physical address and size in
``/sys/class/u-dma-buf/udmabufN/{phys_addr,size}``.

The source is pluggable (`BufferSource`): `UdmabufSource` for a board and `FileSource`, a
plain file mapped in memory with a made-up physical address, for tests and rehearsals.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pccx_flow.errors import BoardError

SYSFS_UDMABUF = Path("/sys/class/u-dma-buf")
ADDRESS_LIMIT = 1 << 32  # DataMover addresses are 32 bits


@dataclass
class Buffer:
    """One mapped, physically contiguous buffer: bytes at `phys` .. `phys + size`."""

    name: str
    phys: int
    size: int
    mem: mmap.mmap
    _fd: int = field(default=-1, repr=False)

    def view(self, offset: int, nbytes: int) -> memoryview:
        """`nbytes` bytes at `offset`; outside the buffer is a one-line `BoardError`."""
        if offset < 0 or offset + nbytes > self.size:
            raise BoardError(
                f"buffer {self.name}: bytes {offset}..{offset + nbytes} outside its {self.size}"
            )
        return memoryview(self.mem)[offset : offset + nbytes]

    def close(self) -> None:
        if not self.mem.closed:
            # numpy views may still point into it: then it is unmapped when they go
            with contextlib.suppress(BufferError):
                self.mem.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class BufferSource(Protocol):
    """Where buffers come from: ``allocate(name, size)`` returns a mapped `Buffer`."""

    def allocate(self, name: str, size: int) -> Buffer: ...


def _check_address(name: str, phys: int, size: int) -> None:
    if phys + size > ADDRESS_LIMIT:
        raise BoardError(
            f"buffer {name} at {phys:#x}+{size:#x} ends above 4 GiB; the DataMover's addresses are"
            " 32 bits: reserve the CMA pool below 4 GiB"
        )


def check_plan(sizes: list[tuple[str, int]], phys: list[int]) -> None:
    """Buffers `sizes` placed at `phys` each end below 4 GiB: a one-line `BoardError` if not.

    Cheap and run before any work (loading weights, decoding the KV prefix), so a program too
    large for 32-bit DataMover addresses fails at once rather than after minutes."""
    for (name, size), at in zip(sizes, phys, strict=True):
        _check_address(name, at, max(size, 1))


class UdmabufSource:
    """Buffers from the u-dma-buf driver, one device per buffer, taken in the order given.

    `devices` are names such as ``udmabuf0``; each must be at least as large as the buffer
    asked for (load the module with e.g. ``udmabuf0=0x10000000 udmabuf1=0x100000``).
    """

    def __init__(
        self, devices: list[str], sysfs: Path = SYSFS_UDMABUF, dev_root: Path = Path("/dev")
    ):
        self.devices = list(devices)
        self.sysfs = Path(sysfs)
        self.dev_root = Path(dev_root)

    def precheck(self, sizes: list[tuple[str, int]]) -> None:
        """The buffers `sizes` would fit the devices, read from sysfs without opening them
        (`check_plan`); a device that sysfs does not describe is left to `allocate`."""
        phys = []
        for (name, size), dev in zip(sizes, self.devices, strict=False):
            try:
                at = int((self.sysfs / dev / "phys_addr").read_text().strip(), 0)
                have = int((self.sysfs / dev / "size").read_text().strip(), 0)
            except (OSError, ValueError):
                return
            if have < size:
                raise BoardError(
                    f"{dev} holds {have:#x} bytes, buffer {name} needs {size:#x}; reload"
                    f" u-dma-buf with {dev}={size:#x} or more"
                )
            phys.append(at)
        check_plan(sizes[: len(phys)], phys)

    def allocate(self, name: str, size: int) -> Buffer:
        if not self.devices:
            raise BoardError(
                f"no u-dma-buf device left for buffer {name} ({size:#x} bytes); load the module"
                " with one more udmabufN=SIZE"
            )
        dev = self.devices.pop(0)
        try:
            phys = int((self.sysfs / dev / "phys_addr").read_text().strip(), 0)
            have = int((self.sysfs / dev / "size").read_text().strip(), 0)
        except (OSError, ValueError) as exc:
            raise BoardError(
                f"cannot read {self.sysfs / dev}/phys_addr and size ({exc}); is the u-dma-buf"
                " module loaded (sudo modprobe u-dma-buf udmabuf0=SIZE)?"
            ) from None
        if have < size:
            raise BoardError(
                f"{dev} holds {have:#x} bytes, buffer {name} needs {size:#x}; reload u-dma-buf"
                f" with {dev}={size:#x} or more"
            )
        _check_address(name, phys, size)
        path = self.dev_root / dev
        try:
            fd = os.open(path, os.O_RDWR | os.O_SYNC)
        except PermissionError:
            raise BoardError(
                f"permission denied opening {path}; add a udev rule giving group pccx access to"
                " u-dma-buf devices (README, Running on a KV260) or run as root"
            ) from None
        except OSError as exc:
            raise BoardError(f"cannot open {path}: {exc.strerror}") from None
        try:
            mem = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError) as exc:
            os.close(fd)
            raise BoardError(f"cannot map {size:#x} bytes of {path}: {exc}") from None
        return Buffer(name, phys, size, mem, fd)


FAKE_PHYS_BASE = 0x4000_0000  # where `FileSource` starts its made-up physical addresses


def file_addresses(sizes: list[tuple[str, int]], phys_base: int = FAKE_PHYS_BASE) -> list[int]:
    """The physical address `FileSource` gives each buffer of `sizes`, allocated in order."""
    phys, at = [], phys_base
    for _, size in sizes:
        phys.append(at)
        at += -(-max(size, 1) // (1 << 20)) * (1 << 20)
    return phys


class FileSource:
    """File-backed buffers with made-up physical addresses (tests, rehearsals; not a board).

    Buffers are laid out one after the other from `phys_base`, 1 MiB aligned, so that a
    physical address in a DataMover command can be resolved back to a buffer by `resolve`.
    """

    def __init__(self, folder: Path, phys_base: int = FAKE_PHYS_BASE):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.next_phys = phys_base
        self.buffers: list[Buffer] = []

    def precheck(self, sizes: list[tuple[str, int]]) -> None:
        """The buffers `sizes`, allocated in this order, would end below 4 GiB (`check_plan`)."""
        check_plan(sizes, file_addresses(sizes, self.next_phys))

    def allocate(self, name: str, size: int) -> Buffer:
        size = max(size, 1)
        _check_address(name, self.next_phys, size)
        path = self.folder / f"{name}.buf"
        with open(path, "wb") as f:
            f.truncate(size)
        fd = os.open(path, os.O_RDWR)
        mem = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        buf = Buffer(name, self.next_phys, size, mem, fd)
        self.next_phys = file_addresses([(name, size), ("next", 1)], self.next_phys)[1]
        self.buffers.append(buf)
        return buf


def resolve(buffers: list[Buffer], phys: int, nbytes: int) -> memoryview:
    """The bytes at physical address `phys` in one of `buffers` (what a DataMover reaches)."""
    for b in buffers:
        if b.phys <= phys and phys + nbytes <= b.phys + b.size:
            return b.view(phys - b.phys, nbytes)
    raise BoardError(f"physical address {phys:#x}+{nbytes:#x} is in no allocated buffer")
