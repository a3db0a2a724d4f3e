"""The emulated L2: 128-bit words kept as 16-bit units, with who wrote each and how.

`L2Access` is a part of `pccx_flow.board.emulator.emulate.Emulator` (the class that mixes it
in holds the `Board`, the program's regions, the target ``self.t``, the word being run and
the fence position). A float32 value fills two units (its value sits in the first), a
float16 or BF16 value one. Every access is checked: it must lie inside an allocated region,
a read must find values some word or host step wrote, and a read of a value another engine
wrote since the last fence is a missing fence. BF16 values are rounded as the hardware
stores them; on the as-built target every writer stores whole words, and the CVO bridge's
partial last word has the layout `write_bridge` gives it.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from pccx_flow.board.isa import L2_WORD_BYTES, bf16
from pccx_flow.board.isa.target import BF16

UNITS_PER_WORD = 8  # 16-bit units per 128-bit L2 word
# how each 16-bit unit was last written (Board.stored): 0 never or the second unit of a float32
STORED = {"float16": 1, "float32": 2, BF16: 3}


def units_of(dtype: str) -> int:
    """16-bit units one value of `dtype` fills in the emulated L2."""
    return 1 if dtype in ("float16", BF16) else 2


@dataclass
class Board:
    """The emulated state: L2 values, who wrote each unit, constant slots, KV cache."""

    l2: np.ndarray
    written_by: np.ndarray  # word index that last wrote each unit; -2 never
    stored: np.ndarray  # how each unit was last written (`STORED`; 0 never)
    slots: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    # as built the fmap-shape and weight-shape slots are two RAMs (mem_dispatcher.sv
    # u_fmap_shape, u_weight_shape): (cache, slot) -> (a, b, c)
    rams: dict[tuple[int, int], tuple[int, int, int]] = field(default_factory=dict)
    host: dict[str, np.ndarray] = field(default_factory=dict)


class L2Access:
    """Checked reads and writes of the emulated L2 (see the module docstring)."""

    def _check_region(self, addr: int, words: int) -> None:
        i = bisect.bisect_right(self.region_starts, addr) - 1
        if i < 0 or self.region_reach[i] < addr + words:
            raise self.fail(
                f"L2 words {addr}..{addr + words - 1} are outside every allocated region"
            )

    def read(self, addr: int, n: int, dtype: str, engine: str | None,
             offset: int = 0) -> np.ndarray:  # fmt: skip
        """`n` values of `dtype` from L2 word `addr`, starting `offset` elements in."""
        step = units_of(dtype)
        words = math.ceil((offset + n) * step / UNITS_PER_WORD)
        self._check_region(addr, words)
        start = addr * UNITS_PER_WORD + offset * step
        sl = slice(start, start + n * step, step)
        writers = self.b.written_by[sl]
        if n and writers.min() == -2:
            raise self.fail(f"reads L2 word {addr} that no instruction or host step wrote")
        last = int(writers.max()) if n else -1
        if last >= self.done_upto and self.engines.get(last) != engine:
            raise self.fail(
                f"reads L2 written by word {last} ({self.engines.get(last)}) with no fence "
                "between them (missing fence)"
            )
        return self.b.l2[sl].copy()

    def write(self, addr: int, values: np.ndarray, dtype: str, offset: int = 0,
              whole_words: bool = False) -> None:  # fmt: skip
        """Store `values` as `dtype` at element `offset` of word `addr`.

        BF16 values are rounded as the hardware stores them. With `whole_words` (every
        writer on the as-built target: the bridge, the DMA and the assumed GEMV store move
        128-bit words) the rest of the covered words is written too, as zeros."""
        values = np.asarray(values).reshape(-1)
        step = units_of(dtype)
        words = math.ceil((offset + values.size) * step / UNITS_PER_WORD)
        self._check_region(addr, words)
        if dtype == "float16":
            values = values.astype(np.float16)
        elif dtype == BF16:
            values = bf16.round_bf16(values)
        elif self.F is np.float32:
            values = values.astype(np.float32)
        base = addr * UNITS_PER_WORD
        start = base + offset * step
        if whole_words:
            cover = slice(base, base + words * UNITS_PER_WORD)
            self.b.l2[cover] = 0
            self.b.written_by[cover] = self.index
            self.b.stored[cover] = 0
            self.b.stored[cover][::step] = STORED.get(dtype, 2)
        sl = slice(start, start + values.size * step, step)
        self.b.l2[sl] = values.astype(self.F)
        self.b.written_by[sl] = self.index
        self.b.stored[start : start + values.size * step] = 0  # the second unit of a float32
        self.b.stored[sl] = STORED.get(dtype, 2)
        if self.record is not None and self.index >= 0:
            if whole_words or offset or dtype == BF16:  # the words as L2 now holds them
                raw = self.raw_words(addr, words)
            else:
                raw = values.astype(np.float16 if dtype == "float16" else np.float32).tobytes()
            self.record.setdefault(self.index, []).append((addr, dtype, raw))

    def write_bridge(self, addr: int, results: np.ndarray) -> None:
        """Write CVO results as the as-built bridge does: whole BF16 words from `addr`.

        Full words hold 8 results in order; a last word holding k < 8 results has them in
        its top k elements, and below them what its serialiser still held: the previous
        word's last 8 - k results, or zeros when there was none (mem_CVO_stream_bridge.sv,
        ST_WRITE: ``wr_word_data <= {fifo_dout, wr_ser_buf[127:16]}``)."""
        y = bf16.round_bf16(np.asarray(results).reshape(-1))
        full, k = divmod(y.size, UNITS_PER_WORD)
        out = [y[: full * UNITS_PER_WORD]]
        if k:
            prev = y[(full - 1) * UNITS_PER_WORD : full * UNITS_PER_WORD] if full else np.zeros(8)
            out.append(np.concatenate([np.asarray(prev)[k:], y[full * UNITS_PER_WORD :]]))
        self.write(addr, np.concatenate(out), BF16)

    def raw_words(self, addr: int, words: int) -> bytes:
        """L2 words ``addr .. addr + words - 1`` as the bytes a MEMCPY L2->host would move.

        Each value is laid out as it was written (float32: 4 bytes over two units; float16
        and BF16: 2 bytes); bytes nothing wrote read as zero."""
        out = np.zeros(words * L2_WORD_BYTES, dtype=np.uint8)
        units = slice(addr * UNITS_PER_WORD, (addr + words) * UNITS_PER_WORD)
        stored, values = self.b.stored[units], self.b.l2[units]
        for code, wire in ((1, "<f2"), (2, "<f4")):
            u = np.flatnonzero(stored == code)
            raw = values[u].astype(wire).view(np.uint8).reshape(len(u), 2 * code)
            out[2 * u[:, None] + np.arange(raw.shape[1])] = raw
        u = np.flatnonzero(stored == STORED[BF16])
        raw = bf16.to_bits(values[u]).astype("<u2").view(np.uint8).reshape(len(u), 2)
        out[2 * u[:, None] + np.arange(2)] = raw
        return out.tobytes()

    # --- the program -----------------------------------------------------------------------
