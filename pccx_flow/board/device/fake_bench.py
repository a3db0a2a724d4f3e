"""The fake board `pccx-flow doctor --fake-device` climbs: a fake NPU, fake buffers, faults.

NOT a board. A `pccx_flow.board.device.fake_device.FakeDevice` stands for the register
window, and next to its fake ``/sys/class/uio`` tree this writes a fake
``/sys/class/u-dma-buf`` tree and ``/dev/udmabufN`` files, so the doctor finds, checks and
maps everything through the same code as on a KV260. The DataMovers reach those files as
physical memory.

Until the doctor loads a program (`FakeBoard.load_model`, the ladder's last rung) the NPU
behind the register file is `ProbeModel`: it runs the MEMSET, MEMCPY and CVO words of the
doctor's probe batches, moving bytes between the buffers and an L2 of its own as the ACP
DataMover commands point. From then on it is the emulator (`device_model.DeviceModel`).

Each fault of `FAULTS` reproduces one failure a rung must diagnose, most of them as pccx's
bring-up record saw them on a KV260 (``pccxai/v002-kv260-deploy-20260527``
``debug/results/RESULTS.md``): MEMSET raised DONE while no DataMover answered; HP0 answered
one command with three status words; the ACP channel took commands and never answered.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from pccx_flow.board.device import dm_status, regmap
from pccx_flow.board.device.cma import Buffer, resolve
from pccx_flow.board.device.fake_device import FakeDevice
from pccx_flow.board.device.regmap import BoardRegisters
from pccx_flow.board.isa import L2_WORD_BYTES, IsaError, decode, memcpy_length_words
from pccx_flow.errors import BoardError, InputError

# fault -> (the rung it stops, what it reproduces)
FAULTS: dict[str, tuple[int, str]] = {
    "no-uio": (1, "no UIO device carries the NPU's name (bitstream not loaded)"),
    "no-udmabuf": (1, "no u-dma-buf buffers (the module is not loaded)"),
    "stuck-cmd-fifo": (2, "a DataMover command FIFO full from the start, never draining"),
    "never-done": (3, "the MEMSET batch never raises DONE"),
    "dm-silent": (4, "MEMSET DONE, but no DataMover emits a status word"),
    "hp-interr": (4, "the HP weight channels answer every command with INTERR"),
    "extra-status": (4, "HP0 answers one command with three status words (record, step 05)"),
    "acp-no-status": (5, "HP channels answer, the ACP channels never emit a status word"),
    "l2-bad-bit": (6, f"bit 0 of L2 word {0x900:#x} reads back flipped"),
    "corrupt": (7, "a wrong L2 value after one instruction of layer 0"),
}
BAD_WORD = 0x900  # the L2 word of ``l2-bad-bit`` (inside rung 6's sweep, off rung 5's)

# The fake u-dma-buf devices: (name, made-up physical address, bytes)
UDMABUFS = (("udmabuf0", 0x4000_0000, 8 << 20), ("udmabuf1", 0x4100_0000, 2 << 20))
L2_BYTES = (1 << 17) * L2_WORD_BYTES  # the 17-bit L2 word address space


def check_faults(faults: list[str]) -> None:
    """Unknown fault names are one line listing the known ones."""
    bad = [f for f in faults if f not in FAULTS]
    if bad:
        raise InputError(
            f"--fake-device {bad[0]!r}: not a fault of the fake board; give none (a healthy"
            f" device) or some of {', '.join(FAULTS)}"
        )


class ProbeModel:
    """The fake NPU for the doctor's probe batches (see the module docstring)."""

    def __init__(self, board: FakeBoard):
        self.board = board
        self.l2 = bytearray(L2_BYTES)
        self.slots: dict[int, tuple[int, int, int]] = {}
        self._taken: dict[str, int] = {}

    def _take(self, page: str) -> regmap.DataMoverCommand:
        commands = self.board.device.pages[page].commands
        k = self._taken.get(page, 0)
        if k >= len(commands):
            raise BoardError(f"a MEMCPY found no DataMover command on page {page}")
        self._taken[page] = k + 1
        return regmap.decode_command(commands[k])

    def on_batch(self, words: list[int]) -> None:
        self._taken = {}
        for word in words:
            try:
                ins = decode(word)
            except IsaError as exc:
                raise BoardError(f"probe word {word:#018x}: {exc}") from None
            f = ins.fields
            if ins.op == "MEMSET":
                self.slots[f["slot"]] = (f["a"], f["b"], f["c"])
            elif ins.op == "MEMCPY":
                self._memcpy(f)
            elif ins.op != "CVO":  # a CVO only raises DONE here; rung 7 checks CVO values
                raise BoardError(f"the probe model runs MEMSET, MEMCPY and CVO, not {ins.op}")

    def _memcpy(self, f: dict) -> None:
        n = memcpy_length_words(*self.slots.get(f["shape_ptr"], (0, 0, 0))) * L2_WORD_BYTES
        to_host = f["to_device"] == 1
        page = "acp_out" if to_host else "acp_in"
        cmd = self._take(page)
        if page in self.board.silent:
            return  # the channel never moves anything
        if cmd.length_bytes != n:
            raise BoardError(f"MEMCPY moves {n} bytes, its {page} command {cmd.length_bytes}")
        host = resolve(self.board.memory, cmd.addr, n)
        at = (f["src"] if to_host else f["dest"]) * L2_WORD_BYTES
        if at + n > L2_BYTES:
            raise BoardError(f"MEMCPY of {n} bytes at L2 word {at // L2_WORD_BYTES:#x} leaves L2")
        if to_host:
            host[:] = self.l2[at : at + n]
            bad = BAD_WORD * L2_WORD_BYTES - at
            if "l2-bad-bit" in self.board.faults and 0 <= bad < n:
                host[bad] ^= 1
        else:
            self.l2[at : at + n] = host


class FakeBoard:
    """A fake KV260 in `folder` with `faults` (names of `FAULTS`). Use as a context manager."""

    def __init__(self, folder: Path, registers: BoardRegisters, faults: list[str] = (),
                 *, answer_timeout: float = 5.0):  # fmt: skip
        check_faults(list(faults))
        self.faults = set(faults)
        self.folder = Path(folder)
        name = "fake-other-device" if "no-uio" in self.faults else "fabric-fake-npu"
        self.device = FakeDevice(self.folder, registers, name=name,
                                 answer_timeout=answer_timeout)  # fmt: skip
        self.udmabuf_sysfs = self.folder / "sys" / "class" / "u-dma-buf"
        self.memory: list[Buffer] = []
        self.silent: set[str] = set()  # pages whose DataMover never answers nor moves bytes
        if "no-udmabuf" not in self.faults:
            for dev, phys, size in UDMABUFS:
                entry = self.udmabuf_sysfs / dev
                entry.mkdir(parents=True, exist_ok=True)
                (entry / "phys_addr").write_text(f"{phys:#x}\n", encoding="ascii")
                (entry / "size").write_text(f"{size}\n", encoding="ascii")
                path = self.device.dev_root / dev
                path.write_bytes(bytes(size))
                fd = os.open(path, os.O_RDWR)
                mem = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
                self.memory.append(Buffer(dev, phys, size, mem, fd))
        self._inject(registers)
        self.probe = ProbeModel(self)
        self.device.on_batch = self.probe.on_batch
        # today's RTL raises DONE only when a CVO completes (pccx-v002.md §5)
        self.device.done_when = lambda words: any(decode(w).op == "CVO" for w in words)

    def _inject(self, regs: BoardRegisters) -> None:
        dev = self.device
        hp = [p for p in regs.pages if p.startswith("hp")]
        if "dm-silent" in self.faults:
            self.silent = set(regs.pages)
        elif "acp-no-status" in self.faults:
            self.silent = {p for p in regs.pages if p.startswith("acp")}
        for page in self.silent:
            dev.dm_answer(page, lambda _tag: [])
        if "stuck-cmd-fifo" in self.faults:
            dev.stuck_commands(hp[-1])
        if "never-done" in self.faults:
            dev.never_done(0)
        if "hp-interr" in self.faults:
            for page in hp:
                dev.dm_answer(page, lambda tag: [dm_status.encode(tag=tag, okay=False,
                                                                  interr=True)])  # fmt: skip
        if "extra-status" in self.faults:
            dev.dm_answer(hp[0], lambda tag: [dm_status.encode(tag=tag)] * 3)

    @property
    def sysfs_root(self) -> Path:
        return self.device.sysfs_root

    @property
    def dev_root(self) -> Path:
        return self.device.dev_root

    def load_model(self, program, buffers: dict[str, Buffer], config,
                   corrupt_at: int | None = None) -> None:  # fmt: skip
        """From now on the NPU is the emulator running `program` (rung 7); with the
        ``corrupt`` fault, the value instruction `corrupt_at` writes is made wrong."""
        from pccx_flow.board.device.device_model import DeviceModel

        model = DeviceModel(program, buffers, config)
        model.attach(self.device)
        if "corrupt" in self.faults and corrupt_at is not None:
            model.corrupt_at = corrupt_at
            model.em.record = {}

    def __enter__(self) -> FakeBoard:
        self.device.start()
        return self

    def __exit__(self, *exc) -> None:
        self.device.stop()
        for b in self.memory:
            b.close()
