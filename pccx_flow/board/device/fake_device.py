"""A fake KV260 NPU: a memory-mapped file as the register window and a thread as the device.

The file stands where ``/dev/uioN`` would be, next to a fake ``sys/class/uio`` tree, so the
whole host path (`pccx_flow.board.device.uio`: find the device by name, map the window, write words,
kick, poll) runs unchanged in CI. A device thread models what the host can see of the board:

- the status word (BUSY, DONE, ERROR) at the profile's status offset;
- the instruction FIFO, ``max_batch`` (8) deep: words written since the last kick. A word
  beyond the depth is dropped, as the RTL drops it (pccx-v002.md §5 "deeper writes are
  dropped"; pccx sw/runtime/uio.py says older words are dropped instead). The real RTL says
  nothing; the fake records the fault and raises the status ERROR bit so it can be seen.
  With the profile's ``command_fifo = "reissue"`` (the public AXIL_CMD_IN, which decodes
  the last word written again every cycle until the next write) an instruction word written
  while the previous one is still being re-decoded is such a fault too; a kick-marker word
  written to the instruction register ends the re-decoding and is dropped;
- the kick: the batch's words go to `on_batch(words)` (a functional model, later the
  emulator), BUSY while it runs, then DONE;
- each DataMover helper page: CMD_LO/HI/EXT staging, PUSH into an 8-deep command FIFO, status
  words (PG022 layout) in an 8-deep status FIFO popped by reading STS_POP, FLAGS with sticky
  error bits cleared by ERR_W1C. Commands complete when the batch that uses them runs.

A register file cannot tell its writer that a value changed, so the host's `Window` reports
each access through `FakeBus`. Writes are posted, as an Arm core posts stores to device
memory: the value goes to the device thread in order and the host goes on. The kick, a read
with a side effect (STS_POP) and the first read after posted writes wait for the device to
take every access before them (device memory keeps one peripheral's accesses in order), so
a read never sees a register the device has not updated yet. A device that stops
answering therefore shows as a timeout at the next access that waits.

Faults can be injected at a given batch: DONE never comes, a sticky DMA error on a page, the
device disappears (file removed, or the device stops answering). And on a DataMover page:
other status words or none (`dm_answer`), a command FIFO that never drains (`stuck_commands`).
"""

from __future__ import annotations

import mmap
import os
import queue
import struct
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow.board.device import regmap
from pccx_flow.board.device.regmap import BoardRegisters
from pccx_flow.board.device.uio import DeviceGone, Npu, open_npu
from pccx_flow.errors import BoardError

OnBatch = Callable[[list[int]], None]


@dataclass
class _Page:
    """The state of one DataMover helper page."""

    staged: list[int] = field(default_factory=lambda: [0, 0, 0])  # CMD_LO, CMD_HI, CMD_EXT
    commands: deque = field(default_factory=deque)
    statuses: deque = field(default_factory=deque)
    sticky: int = 0
    log: list[int] = field(default_factory=list)  # every command pushed, in order


class FakeBus:
    """The fake device's side of the register port (module docstring: posted writes, waits)."""

    def __init__(self, device: FakeDevice, answer_timeout: float):
        self.device = device
        self.answer_timeout = answer_timeout
        self._posted = False  # writes sent since the device last answered

    def _transact(self, kind: str, offset: int, size: int, value: bytes = b"") -> None:
        # the device releases it as its answer (~13 µs a round trip, ~30 with an Event);
        # a fresh one per access, so a late answer never passes for the next one's
        answered = threading.Lock()
        answered.acquire()
        self.device._inbox.put((kind, offset, size, value, answered))
        if not answered.acquire(timeout=self.answer_timeout):
            raise DeviceGone(
                f"device {self.device.device_path} did not answer a register"
                f" {'write' if kind == 'w' else 'read'} at {offset:#x} within"
                f" {self.answer_timeout:g} s"
            )
        self._posted = False  # the device took every access before this one, in order

    def wrote(self, offset: int, size: int) -> None:
        mm = self.device._mm
        if mm.closed:  # the device was stopped: nothing will ever take the write
            raise DeviceGone(f"device {self.device.device_path} is stopped")
        # the value as written now: a later write to the same register must not replace it
        value = bytes(mm[offset : offset + size])
        if self.device.is_kick(offset):
            self._transact("w", offset, size, value)  # the host waits for its kick
            return
        self.device._inbox.put(("w", offset, size, value, None))
        self._posted = True

    def will_read(self, offset: int, size: int) -> None:
        if offset in self.device._pop_offsets:  # a read with a side effect needs the device
            self._transact("r", offset, size)
        elif self._posted:  # the registers it reads may still change with those writes
            self._transact("sync", offset, size)


class FakeDevice:
    """The fake board (see the module docstring). Use as a context manager.

    >>> from pccx_flow.hardware.profile import load_profile
    >>> from pccx_flow.board.device.regmap import board_registers
    >>> import tempfile
    >>> seen = []
    >>> with tempfile.TemporaryDirectory() as d, FakeDevice(
    ...         Path(d), board_registers(load_profile("v002-spec")), seen.append) as dev:
    ...     npu = dev.open()
    ...     npu.write_instruction(0x3000_0000_0000_0000); npu.kick()
    ...     _ = npu.wait_done(); npu.window.close()
    >>> [hex(w) for w in seen[0]]
    ['0x3000000000000000']
    """

    def __init__(
        self,
        folder: Path,
        registers: BoardRegisters,
        on_batch: OnBatch | None = None,
        *,
        name: str = "fabric-fake-npu",
        answer_timeout: float = 5.0,
    ):
        self.regs = registers
        self.on_batch = on_batch
        folder = Path(folder)
        self.dev_root = folder / "dev"
        self.sysfs_root = folder / "sys" / "class" / "uio"
        self.device_path = self.dev_root / "uio0"
        map0 = self.sysfs_root / "uio0" / "maps" / "map0"
        map0.mkdir(parents=True, exist_ok=True)
        self.dev_root.mkdir(parents=True, exist_ok=True)
        (self.sysfs_root / "uio0" / "name").write_text(name + "\n", encoding="ascii")
        (map0 / "addr").write_text(f"{registers.base:#010x}\n", encoding="ascii")
        (map0 / "size").write_text(f"{registers.window_bytes:#x}\n", encoding="ascii")
        self.device_path.write_bytes(bytes(registers.window_bytes))
        self.bus = FakeBus(self, answer_timeout)

        self.fifo: list[int] = []  # words since the last kick
        self._exposed: int | None = None  # reissue FIFO: the word still being re-decoded
        self.reissued: list[int] = []  # words written while the previous one was re-decoded
        self.batches: list[list[int]] = []  # words of each kicked batch, as the device got them
        self.dropped: list[int] = []
        self.faults: list[str] = []  # one line per fault the device saw
        self.pages = {name: _Page() for name in registers.pages}
        self._never_done_at: int | None = None
        self._dma_error_at: dict[int, tuple[str, int]] = {}
        self._disappear_at: tuple[int, str] | None = None
        self._silent = False
        self._overflowed = False
        self._dm_answer: dict[str, Callable[[int], list[int]]] = {}
        self._stuck: set[str] = set()
        # None: every batch raises DONE. A predicate models a DONE rule, e.g. today's RTL,
        # which raises DONE only when a CVO completes (pccx-v002.md §5).
        self.done_when: Callable[[list[int]], bool] | None = None

        self._pop_offsets = {registers.page_register(p, "STS_POP") for p in registers.pages}
        self._by_offset: dict[int, tuple[str, str]] = {}
        for p in registers.pages:
            for reg in regmap.PAGE_REGISTERS:
                self._by_offset[registers.page_register(p, reg)] = (p, reg)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd = os.open(self.device_path, os.O_RDWR)
        self._mm = mmap.mmap(
            self._fd, registers.window_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE
        )
        self._status(regmap_status=0)
        for p in self.pages:
            self._refresh_page(p)

    # --- lifecycle ---

    def start(self) -> FakeDevice:
        self._thread = threading.Thread(target=self._run, name="fake-npu", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self._mm.closed:
            self._mm.close()
            os.close(self._fd)

    def __enter__(self) -> FakeDevice:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def open(self, by_name: bool = False) -> Npu:
        """The host's `Npu` on this device (found through the fake sysfs tree if `by_name`)."""
        return open_npu(
            self.regs,
            None if by_name else self.device_path,
            sysfs_root=self.sysfs_root,
            dev_root=self.dev_root,
            bus=self.bus,
        )

    # --- fault injection (batch numbers count kicks from 0) ---

    def never_done(self, at_batch: int = 0) -> None:
        """From kick number `at_batch` on, stay BUSY and never raise DONE."""
        self._never_done_at = at_batch

    def dma_error(self, page: str, at_batch: int = 0, bits: int = 0b0001) -> None:
        """The first command on `page` completing in batch `at_batch` fails (SLVERR, sticky)."""
        self.regs.page_register(page, "FLAGS")  # unknown page: one-line error now
        self._dma_error_at[at_batch] = (page, bits)

    def disappear(self, at_batch: int = 0, how: str = "remove") -> None:
        """At kick `at_batch`, the device file is removed (``remove``) or stops answering."""
        if how not in ("remove", "silent"):
            raise ValueError("how must be 'remove' or 'silent'")
        self._disappear_at = (at_batch, how)

    def dm_answer(self, page: str, answer: Callable[[int], list[int]]) -> None:
        """Each command on `page` is answered with the status words ``answer(tag)`` (none: a
        channel that takes commands and never answers, pccx's ACP in its bring-up record)."""
        self.regs.page_register(page, "FLAGS")
        self._dm_answer[page] = answer

    def stuck_commands(self, page: str) -> None:
        """The command FIFO of `page` is full and never drains (a push into it is dropped)."""
        self.regs.page_register(page, "FLAGS")
        self._stuck.add(page)
        commands = self.pages[page].commands
        while len(commands) < regmap.FIFO_DEPTH:
            commands.append(regmap.encode_command(addr=0, length_bytes=1, tag=len(commands)))
        self._refresh_page(page)

    # --- the device thread ---

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                kind, offset, size, value, answered = self._inbox.get(timeout=0.02)
            except queue.Empty:
                continue
            if self._silent:
                continue  # a device that is gone never answers
            after = self._access(kind, offset, size, value)
            if answered is not None:
                answered.release()
            if after is not None:
                after()

    def _status(self, regmap_status: int) -> None:
        struct.pack_into("<Q", self._mm, self.regs.status, regmap_status)

    def _refresh_page(self, name: str) -> None:
        page = self.pages[name]
        flags = page.sticky << regmap.FLAGS_STICKY.lo
        flags |= regmap.FLAG_CMD_EMPTY if not page.commands else 0
        flags |= regmap.FLAG_CMD_FULL if len(page.commands) >= regmap.FIFO_DEPTH else 0
        flags |= regmap.FLAG_STS_EMPTY if not page.statuses else 0
        flags |= regmap.FLAG_STS_FULL if len(page.statuses) >= regmap.FIFO_DEPTH else 0
        for reg, value in (
            ("FLAGS", flags),
            ("CMD_LVL", len(page.commands)),
            ("STS_LVL", len(page.statuses)),
        ):
            struct.pack_into("<I", self._mm, self.regs.page_register(name, reg), value)

    def is_kick(self, offset: int) -> bool:
        """A write at `offset` lands in the 64-bit kick register."""
        return self.regs.kick <= offset < self.regs.kick + 8

    def _access(self, kind: str, offset: int, size: int, value: bytes) -> Callable[[], None] | None:
        """Take one access; a write's `value` is its bytes as the host wrote them."""
        regs = self.regs
        if kind == "sync":
            return None
        if kind == "r":
            name, _ = self._by_offset[offset]
            page = self.pages[name]
            value = page.statuses.popleft() if page.statuses else 0
            struct.pack_into("<I", self._mm, offset, value)
            self._refresh_page(name)
            return None
        if regs.instruction <= offset < regs.instruction + 8:
            if size != 8 or offset != regs.instruction:
                self.faults.append(
                    f"{size * 8}-bit write at {offset:#x}: the instruction register takes one"
                    " 64-bit write per word"
                )
                return None
            word = int.from_bytes(value, "little")
            if regs.command_fifo == "reissue":
                # the public AXIL_CMD_IN decodes the last word again every cycle until the
                # next write; a kick-marker word (opcode 0x8, dropped) ends that harmlessly
                if self._exposed is not None and word != regmap.KICK_WORD:
                    self.reissued.append(self._exposed)
                    self._overflowed = True  # the status ERROR bit after this batch
                    self.faults.append(
                        f"word {self._exposed:#018x} of batch {len(self.batches)} was decoded "
                        "again every cycle until the next instruction word (public AXIL_CMD_IN "
                        "re-issues words; follow each with a kick-marker word)"
                    )
                self._exposed = None if word == regmap.KICK_WORD else word
                if word == regmap.KICK_WORD:
                    return None
            if len(self.fifo) >= regs.max_batch:
                self.dropped.append(word)
                self._overflowed = True
                self.faults.append(
                    f"command FIFO overflow: word {len(self.fifo) + 1} of batch"
                    f" {len(self.batches)} ({word:#018x}) dropped (depth {regs.max_batch})"
                )
            else:
                self.fifo.append(word)
            return None
        if self.is_kick(offset):
            return self._kick()
        if offset in self._by_offset:
            name, reg = self._by_offset[offset]
            self._page_write(name, reg, int.from_bytes(value[:4], "little"))
            self._refresh_page(name)
        return None

    def _page_write(self, name: str, reg: str, value: int) -> None:
        page = self.pages[name]
        if reg in ("CMD_LO", "CMD_HI", "CMD_EXT"):
            page.staged[("CMD_LO", "CMD_HI", "CMD_EXT").index(reg)] = value
        elif reg == "CMD_PUSH":
            command = regmap.command_from_registers(*page.staged)
            if len(page.commands) >= regmap.FIFO_DEPTH:
                self.faults.append(f"DataMover {name}: push into a full command FIFO dropped")
                return
            page.commands.append(command)
            page.log.append(command)
        elif reg == "ERR_W1C":
            page.sticky &= ~(value >> regmap.FLAGS_STICKY.lo) & regmap.FLAGS_STICKY.mask

    def _kick(self) -> Callable[[], None]:
        self._exposed = None  # the kick pushes a marker too: the last word stops repeating
        index = len(self.batches)
        words, self.fifo = self.fifo, []
        self.batches.append(words)
        overflow, self._overflowed = self._overflowed, False
        self._status(self.regs.busy_mask)
        return lambda: self._execute(index, words, overflow)

    def _execute(self, index: int, words: list[int], overflow: bool) -> None:
        if self._disappear_at is not None and self._disappear_at[0] == index:
            self._silent = True
            if self._disappear_at[1] == "remove":
                self.device_path.unlink(missing_ok=True)
            return
        error = overflow
        if self.on_batch is not None:
            try:
                self.on_batch(list(words))
            except Exception as exc:  # the model's failure is the device's ERROR, not a crash
                self.faults.append(f"batch {index}: on_batch raised {type(exc).__name__}: {exc}")
                error = True
        fail = self._dma_error_at.pop(index, None)
        for name, page in self.pages.items():
            while page.commands and name not in self._stuck:
                command = page.commands.popleft()
                tag = regmap.COMMAND_FIELDS[0].get(command)
                try:
                    regmap.decode_command(command)
                except BoardError as exc:  # a malformed command: the IP's internal error
                    self.faults.append(f"DataMover {name}: {exc}")
                    page.sticky |= 0b0001
                    status = regmap.encode_status(tag=tag, okay=False, interr=True)
                else:
                    if fail is not None and fail[0] == name:
                        page.sticky |= fail[1]
                        self.faults.append(
                            f"DataMover {name}: command {command:#x} failed (SLVERR)"
                        )
                        status = regmap.encode_status(tag=tag, okay=False, slverr=True)
                        fail = None
                    else:
                        status = regmap.encode_status(tag=tag)
                answer = self._dm_answer.get(name)
                for word in [status] if answer is None else answer(tag):
                    if len(page.statuses) < regmap.FIFO_DEPTH:
                        page.statuses.append(word)
                    else:
                        self.faults.append(f"DataMover {name}: status FIFO full, status lost")
            self._refresh_page(name)
        if self._never_done_at is not None and index >= self._never_done_at:
            return  # stays BUSY
        if self.done_when is not None and not error and not self.done_when(list(words)):
            self._status(0)  # finished, but this batch cannot raise DONE (the RTL's rule)
            return
        self._status(self.regs.done_mask | (self.regs.error_mask if error else 0))
