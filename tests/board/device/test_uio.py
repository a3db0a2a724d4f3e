"""Finding, opening and polling a UIO device, against a fake sysfs tree and plain files."""

from __future__ import annotations

import os
import struct
import time

import pytest

from pccx_flow.board.device.regmap import board_registers
from pccx_flow.board.device.uio import BoardTimeout, DeviceGone, Window, find_uio, open_npu
from pccx_flow.errors import BoardError
from pccx_flow.hardware.profile import load_profile

REGS = board_registers(load_profile("v002-as-built"))


def _sysfs(tmp_path, names: dict[str, str], size: int | None = None):
    root = tmp_path / "sys" / "class" / "uio"
    for uio, name in names.items():
        (root / uio / "maps" / "map0").mkdir(parents=True)
        (root / uio / "name").write_text(name + "\n")
        if size is not None:
            (root / uio / "maps" / "map0" / "size").write_text(f"{size:#x}\n")
    return root


def _device_file(tmp_path, size=REGS.window_bytes):
    (tmp_path / "dev").mkdir(exist_ok=True)
    path = tmp_path / "dev" / "uio4"
    path.write_bytes(bytes(size))
    return path


def test_find_uio_by_name(tmp_path):
    # pccx sw/runtime/uio.py find_fabric_uio: the NPU's UIO name contains 'fabric'
    root = _sysfs(tmp_path, {"uio0": "axi-pmon", "uio10": "other", "uio4": "fabric@a0000000"})
    assert find_uio(sysfs_root=root, dev_root=tmp_path / "dev") == tmp_path / "dev" / "uio4"


def test_find_uio_missing_is_one_line(tmp_path):
    root = _sysfs(tmp_path, {"uio0": "axi-pmon"})
    with pytest.raises(BoardError) as info:
        find_uio(sysfs_root=root, dev_root=tmp_path / "dev")
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg and "uio0=axi-pmon" in msg and "--device" in msg


def test_open_by_name_writes_land_little_endian(tmp_path):
    root = _sysfs(tmp_path, {"uio4": "fabric"}, size=REGS.window_bytes)
    path = _device_file(tmp_path)
    npu = open_npu(REGS, sysfs_root=root, dev_root=tmp_path / "dev")
    try:
        npu.write_instruction(0x3010_0010_0400_0000)
        npu.kick()
        npu.window.write32(REGS.status, 0x2)
        assert npu.status() == 0x2
    finally:
        npu.window.close()
    data = path.read_bytes()
    assert struct.unpack_from("<Q", data, 0x000)[0] == 0x3010_0010_0400_0000
    assert struct.unpack_from("<Q", data, 0x008)[0] == 0x8000_0000_0000_0000


def test_missing_device_is_one_line(tmp_path):
    with pytest.raises(BoardError, match="cannot open .*uio7: No such file") as info:
        open_npu(REGS, tmp_path / "uio7", sysfs_root=tmp_path)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any file")
def test_unreadable_device_says_permissions(tmp_path):
    path = _device_file(tmp_path)
    path.chmod(0)
    with pytest.raises(BoardError, match="Permission denied; run as a user allowed"):
        open_npu(REGS, path, sysfs_root=tmp_path)


def test_map_smaller_than_window_is_refused(tmp_path):
    root = _sysfs(tmp_path, {"uio4": "fabric"}, size=0x1000)
    path = _device_file(tmp_path)
    with pytest.raises(BoardError, match="UIO map0 is 0x1000 bytes, smaller"):
        open_npu(REGS, path, sysfs_root=root)
    short = tmp_path / "short"
    short.write_bytes(bytes(0x100))
    with pytest.raises(BoardError, match="cannot map 0x10000 bytes"):
        Window(short, REGS.window_bytes)


def test_access_outside_or_unaligned(tmp_path):
    with Window(_device_file(tmp_path), REGS.window_bytes) as w:
        with pytest.raises(BoardError, match="unaligned or outside"):
            w.read32(REGS.window_bytes)
        with pytest.raises(BoardError, match="unaligned or outside"):
            w.write64(0x4, 1)


def test_status_wait_times_out(tmp_path):
    npu = open_npu(REGS, _device_file(tmp_path), sysfs_root=tmp_path)
    t0 = time.monotonic()
    with pytest.raises(BoardTimeout) as info:
        npu.wait_done(timeout=0.05)
    assert time.monotonic() - t0 < 1.0
    msg = str(info.value)
    print(msg)
    assert "DONE not seen within 0.05 s" in msg and "v002-as-built" in msg
    npu.window.close()


def test_removed_device_is_gone(tmp_path):
    path = _device_file(tmp_path)
    npu = open_npu(REGS, path, sysfs_root=tmp_path)
    assert npu.window.alive()
    path.unlink()
    assert not npu.window.alive()
    with pytest.raises(DeviceGone, match="disappeared while waiting for DONE"):
        npu.wait_done(timeout=1.0)
    npu.window.close()
