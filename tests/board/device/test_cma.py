"""Host buffers: the file-backed fake and u-dma-buf through a fake sysfs tree."""

from __future__ import annotations

import pytest

from pccx_flow.board.device.cma import FileSource, UdmabufSource, resolve
from pccx_flow.errors import BoardError


def test_file_source_gives_disjoint_buffers_that_resolve_by_physical_address(tmp_path):
    src = FileSource(tmp_path, phys_base=0x4000_0000)
    a, b = src.allocate("a", 5000), src.allocate("b", 100)
    assert a.phys == 0x4000_0000 and b.phys == 0x4010_0000  # 1 MiB aligned, in order
    a.view(4990, 10)[:] = b"0123456789"
    assert bytes(resolve([a, b], 0x4000_0000 + 4990, 10)) == b"0123456789"
    with pytest.raises(BoardError, match="in no allocated buffer"):
        resolve([a, b], 0x4000_0000 + 4999, 2)
    with pytest.raises(BoardError, match="outside"):
        a.view(4999, 2)


def test_buffers_above_4_gib_are_refused(tmp_path):
    with pytest.raises(BoardError, match="above 4 GiB"):
        FileSource(tmp_path, phys_base=0xFFFF_F000).allocate("big", 0x2000)


def _udmabuf(tmp_path, size: int, phys: int = 0x6000_0000):
    sysfs, dev = tmp_path / "sys", tmp_path / "dev"
    (sysfs / "udmabuf0").mkdir(parents=True)
    dev.mkdir()
    (sysfs / "udmabuf0" / "phys_addr").write_text(f"{phys:#x}\n")
    (sysfs / "udmabuf0" / "size").write_text(f"{size}\n")
    (dev / "udmabuf0").write_bytes(bytes(size))
    return sysfs, dev


def test_udmabuf_maps_the_device_with_its_sysfs_physical_address(tmp_path):
    sysfs, dev = _udmabuf(tmp_path, 8192)
    buf = UdmabufSource(["udmabuf0"], sysfs, dev).allocate("image", 4096)
    buf.view(0, 4)[:] = b"pccx"
    buf.close()
    assert buf.phys == 0x6000_0000 and (dev / "udmabuf0").read_bytes()[:4] == b"pccx"


def test_udmabuf_problems_are_one_line(tmp_path):
    sysfs, dev = _udmabuf(tmp_path, 4096)
    with pytest.raises(BoardError, match="reload u-dma-buf with udmabuf0=0x2000"):
        UdmabufSource(["udmabuf0"], sysfs, dev).allocate("image", 8192)
    with pytest.raises(BoardError, match="is the u-dma-buf module loaded"):
        UdmabufSource(["udmabuf7"], sysfs, dev).allocate("image", 10)
    with pytest.raises(BoardError, match="no u-dma-buf device left"):
        UdmabufSource([], sysfs, dev).allocate("act", 10)


def test_prechecks_refuse_what_allocate_would_refuse_without_opening_anything(tmp_path):
    from pccx_flow.board.device.cma import check_plan, file_addresses

    sizes = [("image", 0x100), ("act", 5 << 20)]
    assert file_addresses(sizes, 0x4000_0000) == [0x4000_0000, 0x4010_0000]
    check_plan(sizes, file_addresses(sizes))
    with pytest.raises(BoardError, match=r"buffer act at 0xffe00000\+0x500000 ends above 4 GiB"):
        FileSource(tmp_path / "f", phys_base=0xFFD0_0000).precheck(sizes)
    sysfs, dev = _udmabuf(tmp_path, 8192, phys=0xFFFF_F000)
    (dev / "udmabuf0").unlink()  # never opened: sysfs alone decides
    with pytest.raises(BoardError, match="buffer image at 0xfffff000"):
        UdmabufSource(["udmabuf0"], sysfs, dev).precheck([("image", 0x2000)])
    with pytest.raises(BoardError, match="udmabuf0 holds 0x2000 bytes"):
        UdmabufSource(["udmabuf0"], sysfs, dev).precheck([("image", 0x3000)])
    UdmabufSource(["udmabuf9"], sysfs, dev).precheck([("image", 1 << 40)])  # left to allocate
