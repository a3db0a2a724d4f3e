"""Golden vectors: per instruction, the L2 words the emulator expects it to write.

One ``.memh`` per instruction that writes L2 (``w<index>.memh``): ``@<word address>`` lines
followed by 128-bit words as 32 hex digits (little-endian bytes, as L2 holds them), which
``$readmemh`` reads, so a testbench or a board can be checked instruction by instruction.
A last word that the instruction fills only in part is padded with zero bytes; ``index.json``
lists, per instruction, its node, opcode and each written range with its valid bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.board.isa import decode
from pccx_flow.board.program.files import Program

WORD_BYTES = 16


def word_lines(addr: int, raw: bytes) -> list[str]:
    """``@addr`` then one 32-digit hex word per 16 bytes (the last padded with zeros)."""
    lines = [f"@{addr:05x}"]
    for off in range(0, len(raw), WORD_BYTES):
        chunk = raw[off : off + WORD_BYTES].ljust(WORD_BYTES, b"\0")
        lines.append(f"{int.from_bytes(chunk, 'little'):032x}")
    return lines


def write_golden(program: Program, record: dict[int, list], out: Path) -> int:
    """Write the golden files into folder `out`; return how many instructions have one.

    Each file is replaced atomically; ``index.json`` is written last. The caller refuses a
    step whose logits are not finite before calling this (`emit --golden`); lanes an
    instruction fills beyond its results may hold infinities, as the as-built CVO's whole
    BF16 words do (RECIP of the zero lanes), and are recorded as L2 holds them."""
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    for i in sorted(record):
        lines = [f"// word {i}: {program.nodes[i]}"]
        writes = []
        for addr, dtype, raw in record[i]:
            lines += word_lines(addr, raw)
            writes.append({"addr": addr, "dtype": dtype, "valid_bytes": len(raw)})
        atomic.write_text(out / f"w{i:05d}.memh", "\n".join(lines) + "\n", encoding="ascii")
        index[str(i)] = {
            "node": program.nodes[i],
            "op": decode(program.words[i]).op,
            "word": f"{program.words[i]:016x}",
            "writes": writes,
        }
    meta = {"program": program.meta, "numerics": "spec, float32", "instructions": index}
    atomic.write_text(out / "index.json", json.dumps(meta, indent=1) + "\n")
    return len(index)
