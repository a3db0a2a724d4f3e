"""The board bring-up ladder: seven rungs from "is the device there" to "one layer is right".

pccx's own bring-up of v002 on a KV260 (``pccxai/v002-kv260-deploy-20260527``, ``debug/``:
``dbg_step_00_env_check`` .. ``dbg_step_14_acp_result_readout_isolation`` and
``debug/results/RESULTS.md``) was a ladder of hand-written scripts, and what each failure
meant took a long time to see: MEMSET raised DONE (the frontend was alive) while the ACP
DataMover never emitted a status word; a non-empty status FIFO was taken for success until
the words were decoded; a user-space write to the CCI-400 snoop registers raised SIGBUS
(secure-world registers). `climb` runs the same ladder in order and stops at the first rung
that fails:

1. environment: the UIO node by name and its map, permissions, the u-dma-buf buffers and
   their physical addresses (below 4 GiB), the bitstream's SHA-256 when a path is given;
2. the AXI-Lite window: the status word, every DataMover page's FLAGS and FIFO levels, a
   command FIFO that does not drain after a reset;
3. frontend alive: one MEMSET and its DONE (a one-element CVO follows it: today's RTL raises
   DONE only when a CVO completes, ``pccx-v002.md`` §5);
4. the HP weight channels: one command, then a burst of `regmap.FIFO_DEPTH`, every status
   word decoded (`dm_status`, Xilinx PG022) with a timeout when none arrives;
5. the ACP feature-map channels, by MEMCPY words (ACP in host->L2, ACP out L2->host): one,
   then a burst, statuses decoded and the pattern read back; where HP answers and ACP does
   not, what to check about cache-coherent snooping (never touching secure registers);
6. an L2 round trip: a pattern host->L2->host across a wide L2 range, then a MEMSET that
   changes a copy's length and a copy that must move exactly that, closed by a CVO;
7. a one-layer prefix of a decode step (``emit --bisect``'s ``layer0``) with its golden L2
   words checked after every batch (`golden_check`, read back by `readback`).

Each rung is a function of a `Bench` (plain inputs and the handles earlier rungs opened)
returning a `Rung` record: name, passed, evidence, likely causes and the next step
(`doctor_bench`); rungs 1-3 live in `doctor_host`, 4-6 in `doctor_datamover`, 7 in
`doctor_layer`. This module puts them in order and climbs.

On a board, rung 4's commands move bytes into the weight streams that no GEMV consumes;
whether the RTL discards them is not known (no board was available to this project), so
a failure of rung 7 right after rung 4 on a board is worth a second look after reloading
the bitstream. And rung 7 needs an NPU that computes the step: a bitstream of today's RTL
lacks parts of it (docs/board-programs.md), so there rung 7 names the first instruction
the RTL gets wrong, which is what it is for.
"""

from __future__ import annotations

from collections.abc import Callable

from pccx_flow.board.device.doctor_bench import Bench, Rung
from pccx_flow.board.device.doctor_datamover import rung_acp, rung_hp, rung_l2
from pccx_flow.board.device.doctor_host import rung_environment, rung_frontend, rung_window
from pccx_flow.board.device.doctor_layer import rung_layer

__all__ = ["RUNGS", "Bench", "Rung", "climb", "format_report"]


RUNGS: tuple[Callable[[Bench], Rung], ...] = (
    rung_environment, rung_window, rung_frontend, rung_hp, rung_acp, rung_l2, rung_layer,
)  # fmt: skip


def climb(bench: Bench, rungs=RUNGS) -> list[Rung]:
    """Run `rungs` in order, stopping after the first that fails; close what they opened."""
    out: list[Rung] = []
    try:
        for rung in rungs:
            if rung is rung_layer and bench.probe is not None:
                bench.probe.close()  # rung 7 allocates the buffers afresh
                bench.probe = None
            out.append(rung(bench))
            if not out[-1].passed:
                break
    finally:
        bench.close()
    return out


def format_report(rungs: list[Rung], total: int = len(RUNGS)) -> str:
    """The terminal report: one block per rung climbed, the failing one with its diagnosis."""
    lines = []
    for r in rungs:
        lines.append(f"rung {r.number} {r.name}: {'PASS' if r.passed else 'FAIL'}")
        lines += [f"    {e}" for e in r.evidence]
        if not r.passed:
            lines += [f"  likely cause: {c}" for c in r.causes]
            lines.append(f"  next: {r.next_step}")
    passed = sum(r.passed for r in rungs)
    if passed == total:
        lines.append(f"all {total} rungs passed")
    else:
        lines.append(f"stopped at rung {rungs[-1].number} of {total} ({passed} passed)")
    return "\n".join(lines)
