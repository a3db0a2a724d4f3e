"""Compare L2 after each batch with the golden words of `emit --golden` (board bring-up).

`read_golden` reads a folder written by `pccx_flow.board.emulator.golden.write_golden` back
into, per instruction, the byte ranges it writes and their expected bytes. `check_batch` reads those
ranges back through an `L2Reader` after a batch and names the first instruction whose bytes
differ: its index, node, the 128-bit L2 word address, expected and received word.

A range that a later instruction of the same batch overwrites is not checked after that batch
(only the last value survives). pccx v002 has no L2 read register: on a board (and on the
fake device, which runs the same code) the ranges are read back by MEMCPY L2->host batches
added between the program's (`pccx_flow.board.device.readback.MemcpyReadBack`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pccx_flow.errors import InputError

WORD_BYTES = 16


class L2Reader(Protocol):
    def read_l2(self, addr: int, dtype: str, nbytes: int) -> bytes: ...


@dataclass(frozen=True)
class GoldenWrite:
    addr: int  # L2 word address
    dtype: str
    data: bytes  # valid bytes only


def _parse_memh(text: str) -> list[tuple[int, bytes]]:
    """``@addr`` blocks of 32-digit words -> (addr, bytes) per block."""
    blocks: list[tuple[int, bytearray]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("@"):
            blocks.append((int(line[1:], 16), bytearray()))
        else:
            blocks[-1][1].extend(int(line, 16).to_bytes(WORD_BYTES, "little"))
    return [(a, bytes(b)) for a, b in blocks]


def read_golden(folder: Path) -> dict[int, list[GoldenWrite]]:
    """Per instruction index, its golden L2 writes; a bad folder is a one-line `InputError`."""
    folder = Path(folder)
    try:
        index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
        out: dict[int, list[GoldenWrite]] = {}
        for key, entry in index["instructions"].items():
            i = int(key)
            blocks = _parse_memh((folder / f"w{i:05d}.memh").read_text(encoding="ascii"))
            if len(blocks) != len(entry["writes"]):
                raise ValueError(f"w{i:05d}.memh has {len(blocks)} ranges, index.json lists"
                                 f" {len(entry['writes'])}")  # fmt: skip
            out[i] = [
                GoldenWrite(w["addr"], w["dtype"], data[: w["valid_bytes"]])
                for w, (_, data) in zip(entry["writes"], blocks, strict=True)
            ]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise InputError(
            f"--check-golden {folder}: not a golden folder ({exc}); write one with"
            " `pccx-flow emit ... --golden DIR --weights CKPT`"
        ) from None
    return out


def _overlaps(a: GoldenWrite, b: GoldenWrite) -> bool:
    a0, a1 = a.addr * WORD_BYTES, a.addr * WORD_BYTES + len(a.data)
    b0, b1 = b.addr * WORD_BYTES, b.addr * WORD_BYTES + len(b.data)
    return a0 < b1 and b0 < a1


def _word(raw: bytes, start: int) -> str:
    """The 128-bit L2 word at byte `start` of `raw` as 32 hex digits (zero-padded)."""
    chunk = raw[start : start + WORD_BYTES].ljust(WORD_BYTES, b"\0")
    return f"{int.from_bytes(chunk, 'little'):032x}"


def check_batch(golden: dict[int, list[GoldenWrite]], first: int, last: int, nodes,
                reader: L2Reader) -> str | None:  # fmt: skip
    """The first divergence among instructions ``first .. last`` as one line, or None."""
    indices = [i for i in range(first, last + 1) if i in golden]
    for k, i in enumerate(indices):
        later = [w for j in indices[k + 1 :] for w in golden[j]]
        for g in golden[i]:
            if any(_overlaps(g, w) for w in later):
                continue
            got = reader.read_l2(g.addr, g.dtype, len(g.data))
            if got == g.data:
                continue
            off = next(b for b in range(len(g.data)) if got[b] != g.data[b])
            w0 = off // WORD_BYTES * WORD_BYTES

            return (
                f"first divergence at instruction {i} (node {nodes[i]}): L2 word"
                f" {g.addr + off // WORD_BYTES:#07x} expected {_word(g.data, w0)} got"
                f" {_word(got, w0)}"
            )
    return None
