"""Rungs 1-3 of the bring-up ladder: the environment, the AXI-Lite window, the frontend.

pccx's own steps 00-02 (``pccxai/v002-kv260-deploy-20260527`` ``debug/dbg_step_00_env_check``,
``dbg_step_01_axil_window``, ``dbg_step_02_memset_frontend``) as functions of a `Bench`: the
UIO node, its map, permissions, the u-dma-buf buffers and the bitstream's checksum; every
DataMover page's FLAGS and FIFO levels; one MEMSET and its DONE, no DataMover involved.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pccx_flow.board.device import regmap
from pccx_flow.board.device.cma import ADDRESS_LIMIT, UdmabufSource
from pccx_flow.board.device.doctor_bench import (
    DONE_MARKER,
    PROBE_AREA,
    SLOT,
    Bench,
    Rung,
    flags_line,
    kick,
)
from pccx_flow.board.device.uio import find_uio, open_npu
from pccx_flow.board.isa import encode, memcpy_length_fields
from pccx_flow.errors import BoardError
from pccx_flow.files import NotRegularFile, open_regular

# --- rung 1: environment -----------------------------------------------------------------


def rung_environment(bench: Bench) -> Rung:
    """The UIO node, its map and permissions, the buffers, the bitstream's checksum."""
    r = Rung(1, "environment", False)
    try:
        node = find_uio(bench.uio_name, bench.sysfs_root, bench.dev_root)
    except BoardError as exc:
        # find_uio's hint names dispatch's --device; doctor takes --uio NAME (next step)
        r.evidence.append(str(exc).replace(" or give --device /dev/uioN", ""))
        r.causes = [
            "the bitstream is not loaded (no UIO device for the NPU's AXI-Lite window)",
            f"the overlay names its UIO device differently (looked for '*{bench.uio_name}*';"
            " pccx's KV260 deploy record shows 'pccx-npu', debug/dbg_step_00_env_check.py)",
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
            with open_regular(bench.bitstream) as f:  # a FIFO or /dev/zero: refused, no hang
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except NotRegularFile as exc:
            r.evidence.append(f"bitstream {exc}")
            r.causes = ["--bitstream names something that is not a file"]
            r.next_step = "give --bitstream /lib/firmware/xilinx/pccx_npu_bd/pccx_npu_bd.bit.bin"
            return r
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
    lines = {page: flags_line(npu, page) for page in regs.pages}
    r.evidence += [line for line, *_ in lines.values()]
    dirty = [p for p, (_, flags, cmd, sts) in lines.items()
             if cmd or sts or regmap.sticky_errors(flags)]  # fmt: skip
    if dirty:
        left = npu.reset()
        r.evidence.append(f"reset (statuses drained, sticky errors cleared) of {', '.join(dirty)}")
        stuck = []
        for page in dirty:
            line, _, cmd, _ = flags_line(npu, page)
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
        status = kick(npu, [memset, DONE_MARKER], bench.timeout)
    except BoardError as exc:
        r.evidence.append(str(exc))
        r.causes = [
            "the decoder does not take the words, or the status word sits elsewhere in this"
            f" bitstream: the profile reads {bench.regs.status:#05x}; pccx's layers use 0x004,"
            " 0x008 or 0x010, and its KV260 deploy record read BUSY (bit 0) and DONE (bit 1)"
            " at 0x000 (debug/dbg_step_02_memset_frontend.py). In pccx-v002's"
            " AXIL_STAT_OUT.sv the read address (s_araddr) is not decoded: a read pops a"
            " status FIFO and is answered only while it holds a word (s_arready)",
            "the core is stuck BUSY or DONE comes from another rule than a CVO completing",
        ]
        r.next_step = (
            "reload the bitstream and run doctor again; check the status offset against the"
            " loaded RTL (a profile with [registers] status_offset = ...)"
        )
        return r
    r.evidence.append(f"DONE (status {status:#010x})")
    for page in bench.regs.pages:
        line, _, cmd, sts = flags_line(npu, page)
        if cmd or sts:
            r.evidence.append(line)
            r.causes = [f"a MEMSET moved DataMover page {page}, which it never uses"]
            r.next_step = "compare the register map of the profile with the loaded bitstream"
            return r
    r.passed = True
    return r


