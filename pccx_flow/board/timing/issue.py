"""Three models of how the NPU takes instructions from its command FIFO and starts them.

Every model sees the same thing: instruction words, in program order, released to the device
when the host writes their batch's kick (`replay` models the host side, identical for all
three) — except ``rtl``, whose words reach the decoder as they are written (below). A model
decides when each instruction leaves the command FIFO ("dispatch") and when it
starts on a lane; all three also respect the data hazards of `hazards` (an instruction never
starts before its inputs are written), each lane runs one instruction at a time, and a GEMV
that streams weights holds one unit of the ``weight_port`` pool, as the list scheduler does.

``spec``  The documentation's intent (pccx-v002.md §1: GEMM, GEMV, SFU and DMA run
          independently, "a stall in one engine never halts another"; decode and execution
          separated by a FIFO): the decoder takes one instruction per ``issue.decode_cycles``
          into a per-engine queue of unbounded depth; each engine starts its instructions in
          program order, each on its earliest free lane, as soon as the inputs are ready.

``rtl``   The RTL as built (pccxai/pccx-v002):
          ``LLM/rtl/core/controller/ctrl_npu_frontend.sv`` — the AXIL_CMD_IN command FIFO is 8
          deep and ``OUT_kick = cmd_valid & fetch_ready``; ``ctrl_npu_decoder.sv`` — the
          decoder is always ready and takes 1 instruction per clock (unknown opcodes dropped);
          ``npu_controller_top.sv`` — "issues at most 1 decoded uop per clock (ISA serial
          issue)"; ``Global_Scheduler.sv`` — ONE registered ``OUT_LOAD_uop`` (the L2 read path)
          driven for GEMM, GEMV, MEMCPY and CVO with priority GEMM > GEMV > MEMCPY > CVO, and
          ONE ``OUT_STORE_uop`` latched at issue and held until the engine signals completion;
          MEMSET only touches the constant cache. Assumed here: instructions issue in order,
          one at a time; an instruction that uses the load path (GEMM, GEMV, MEMCPY, CVO)
          issues only after the previous load-path instruction has completed, because the one
          uop register has no completion ID and a second issue would overwrite it (the store
          path serves a subset of the same opcodes, so it adds no further wait). With one
          decoded uop per clock the priority never arbitrates between two live instructions.
          MEMSET issues behind them in order, costing its decode cycle. An instruction starts
          when it issues. **Calibrated on the RTL** (`pccx-flow cosim`, Verilator, the
          controller of pccx-v002): a word is decoded `RTL_WRITE_TO_DECODE` cycles after the
          host starts writing it (AXI-Lite address beat, data beat, FIFO push, pop, decoder
          register), not at the kick: the kick only pushes a marker word the decoder drops.
          Not calibrated, because the controller has no signal for it: completion (the engines
          are outside the controller; the load-path wait above stays an assumption). The
          hardware has no back-pressure (the decoder is always ready, the
          FIFO drops a ninth word): where this model makes an instruction wait, the real
          controller would overwrite a uop in flight; the wait is what a correct controller
          (or a host that serialises) must pay.

``decoupled`` The per-engine FIFO proposal (``docs/design/v002.1-dispatcher-redesign-
          proposal.md`` in pccxai/pccx-FPGA-NPU-LLM-kv260, "moderate refactor" cut): the
          dispatcher pops the command FIFO in order, one instruction per decode cycle, into a
          per-opcode uop FIFO of ``issue.decoupled_queue_depth`` entries; it stalls at the FIFO
          head while the target queue is full (decision C05 taken as "stall at the AXI-Lite
          command FIFO head"); each engine runs its queue in order, engines concurrently; the
          hazard scoreboard covers L2 address ranges and constant slots (C09 "all of the
          above"). The queue depth is the proposal's unconfirmed starting point (C03).
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.board.timing.footprint import Footprint

MODELS = ("spec", "rtl", "decoupled")
# Cycles from the start of a word's AXI-Lite write to its decoded uop (valid at the decoder's
# outputs), measured by `pccx-flow cosim` on pccx-v002's npu_controller_top (AXIL_CMD_IN
# ADDR_INST write -> fifo_wen -> IF_queue -> ctrl_npu_decoder OUT_*_valid): 2 + 5.
RTL_WRITE_TO_DECODE = 7


@dataclass
class Placed:
    """One instruction's replayed timing (cycles, model estimate)."""

    fp: Footprint
    lane: str
    release: int  # its batch's kick reached the device
    dispatch: int  # it left the command FIFO
    start: int
    finish: int
    issue_stall: int  # start - (the earliest time its inputs, lane and port allowed)
    binding: str  # what set its start: release, issue, data, lane, port


class IssueModel:
    """Lane, port and per-engine state shared by the three models; `place` differs."""

    name = ""

    def __init__(self, profile, decode_cycles: int, queue_depth: int) -> None:
        self.decode = decode_cycles
        self.depth = queue_depth
        self.lanes: dict[str, list[int]] = {
            cls: [0] * n for cls, n in profile.lanes.items() if cls != "host"
        }
        self.ports = [0] * max(1, profile.pools.get("weight_port", 1))
        self.last_dispatch = -decode_cycles
        self.engine_last_start: dict[str, int] = {}
        self.engine_starts: dict[str, list[int]] = {}
        self.load_path_free = 0

    def _resources(self, fp: Footprint) -> tuple[int, int, int, int]:
        lanes = self.lanes.get(fp.engine)
        if not lanes:
            from pccx_flow.errors import ProfileError

            raise ProfileError(
                f"instruction {fp.index} ({fp.node}) needs a {fp.engine} lane; the profile has "
                "none (replay on the profile the program was emitted for)"
            )
        lane = min(range(len(lanes)), key=lanes.__getitem__)
        port = min(range(len(self.ports)), key=self.ports.__getitem__) if fp.weight_port else -1
        return lane, lanes[lane], port, self.ports[port] if port >= 0 else 0

    def _issue_bound(self, fp: Footprint, release: int) -> tuple[int, int]:
        """(dispatch time, earliest start the issue rules allow)."""
        raise NotImplementedError

    def place(self, fp: Footprint, release: int, data_ready: int) -> Placed:
        lane, lane_t, port, port_t = self._resources(fp)
        dispatch, issue_t = self._issue_bound(fp, release)
        bounds = {"release": release, "data": data_ready, "lane": lane_t, "port": port_t}
        nominal = max(bounds.values())
        start = max(nominal, issue_t)
        binding = "issue" if issue_t > nominal else max(bounds, key=bounds.__getitem__)
        if self.name == "rtl":
            dispatch = start  # the controller holds the instruction until it issues
        finish = start + fp.cycles
        self.lanes[fp.engine][lane] = finish
        if port >= 0:
            self.ports[port] = finish
        self.last_dispatch = dispatch
        self.engine_last_start[fp.engine] = start
        self.engine_starts.setdefault(fp.engine, []).append(start)
        if fp.load_path:
            self.load_path_free = finish
        return Placed(
            fp, f"{fp.engine}{lane}", release, dispatch, start, finish, start - nominal, binding
        )


class SpecModel(IssueModel):
    name = "spec"

    def _issue_bound(self, fp: Footprint, release: int) -> tuple[int, int]:
        dispatch = max(release, self.last_dispatch + self.decode)
        return dispatch, max(dispatch, self.engine_last_start.get(fp.engine, 0))


class RtlModel(IssueModel):
    name = "rtl"

    def _issue_bound(self, fp: Footprint, release: int) -> tuple[int, int]:
        t = max(release, self.last_dispatch + self.decode)
        if fp.load_path:
            t = max(t, self.load_path_free)
        return t, t


class DecoupledModel(IssueModel):
    name = "decoupled"

    def _issue_bound(self, fp: Footprint, release: int) -> tuple[int, int]:
        queue = self.engine_starts.get(fp.engine, [])
        # an entry leaves its engine queue when it starts: room once the one `depth` places
        # ahead of this instruction in the same queue has started
        room = queue[-self.depth] if len(queue) >= self.depth else 0
        dispatch = max(release, self.last_dispatch + self.decode, room)
        return dispatch, max(dispatch, self.engine_last_start.get(fp.engine, 0))


def make_model(name: str, profile) -> IssueModel:
    """A fresh issue model by name (one of `MODELS`), costed from the profile's ``[issue]``."""
    cls = {"spec": SpecModel, "rtl": RtlModel, "decoupled": DecoupledModel}[name]
    return cls(profile, profile.issue.decode_cycles, profile.issue.decoupled_queue_depth)
