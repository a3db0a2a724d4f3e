"""Why each as-built rule is what it is: the RTL evidence, and what no program can fix.

`RULES` lists every way the ``as-built`` target (`pccx_flow.board.isa.target`) reads a word
differently from the ``spec`` target, with the RTL file and signal it comes from
(pccxai/pccx-v002 unless named); `GAPS` lists what the RTL as built cannot do for a decode
step whatever the program does, and what the as-built emulator does there instead.
`pccx-flow isa --targets` prints both (`rules_table`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One way the two targets read a word differently, and where the RTL says so."""

    topic: str
    spec: str
    as_built: str
    source: str  # RTL file (pccxai/pccx-v002 unless named) and the signal or line


RULES: tuple[Rule, ...] = (
    Rule(
        "CVO addresses",
        "src/dst count 128-bit L2 words",
        "src/dst count 16-bit BF16 elements; the bridge starts at word addr >> 3, so the low "
        "3 bits are ignored and the 17-bit field reaches the first 16,384 words (256 KiB)",
        "LLM/rtl/core/memory/mem_CVO_stream_bridge.sv: rd_base <= src_addr >> 3, "
        "wr_base <= dst_addr >> 3 (ST_IDLE)",
    ),
    Rule(
        "L2 element type",
        "activations are float32, 4 per word",
        "activations are BF16, 8 per word: the CVO bridge streams 8 x 16-bit elements per "
        "word, the GEMV/GEMM feature-map load counts BF16 elements",
        "mem_CVO_stream_bridge.sv: rd_deser_buf[rd_elem_idx*16+:16]; mem_dispatcher.sv: "
        "'The shape RAM returns BF16 element dimensions' (LOAD s1-s7)",
    ),
    Rule(
        "CVO result cap",
        "the 16-bit length field",
        "at most 2,048 results per CVO: results past the result FIFO are dropped and the "
        "bridge then waits for them forever; longer CVOs are split into whole-word pieces",
        "mem_CVO_stream_bridge.sv: ResultFifoDepth = 2048, OUT_cvo_result_ready = ~fifo_full; "
        "CVO_top.sv: OUT_result_valid <= ... && IN_result_ready",
    ),
    Rule(
        "REDUCE_SUM result",
        "one float32 at dst",
        "one BF16 result, written as the top 16 bits of the dst word (element 7) with "
        "elements 0-6 zero",
        "mem_CVO_stream_bridge.sv: total_results = 1 for CVO_REDUCE_SUM; ST_WRITE "
        "wr_word_data <= {fifo_dout, wr_ser_buf[127:16]}, wr_ser_buf <= 0 in ST_IDLE",
    ),
    Rule(
        "partial words",
        "a CVO writes exactly its results",
        "the bridge writes whole words; a last word holding k < 8 results has them in its top "
        "k elements and the rest of the word overwritten, so element-wise CVOs run over "
        "whole words (each value keeps its element), REDUCE_SUM's sum lives in element 7 "
        "and a CVO reading it covers its word; no GEMV reads such a value",
        "mem_CVO_stream_bridge.sv: ST_WRITE shift register wr_ser_buf, result_pop_completes",
    ),
    Rule(
        "CVO while the bridge is busy",
        "CVOs queue per engine",
        "dropped: the bridge and CVO_top latch a uop only when idle, and the decoder's CVO "
        "pulse is not queued, so a batch holds at most one CVO and it is the last word "
        "(then the DONE the host waits for is that CVO's, and the next batch's CVO finds "
        "the bridge idle); a batch without one ends with a DONE marker",
        "mem_CVO_stream_bridge.sv: 'if (IN_cvo_uop_valid)' only in ST_IDLE; "
        "LLM/rtl/top/pccx_npu_top.sv: .IN_cvo_uop_valid(cvo_op_x64_valid_wire)",
    ),
    Rule(
        "DONE",
        "raised when a batch completes",
        "sticky: set by a MEMSET, CVO or GEMM-store completion, cleared when the next "
        "instruction starts; a batch ending in its CVO shows DONE when that CVO finishes",
        "pccx_npu_top.sv: op_done_pulse = memset_done_wire | cvo_done_wire | store_done_wire; "
        "op_done_sticky cleared by op_start_pulse",
    ),
    Rule(
        "GEMV length and shape slots",
        "size_ptr: fmap-shape slot with the input length; shape_ptr: weight-shape slot with "
        "(rows, cols)",
        "shape_ptr: fmap-shape slot whose X*Y*Z is the input length in BF16 elements (the L2 "
        "load moves ceil(X*Y*Z/8) words); size_ptr goes to the GEMV engine (a weight-shape "
        "slot with (rows, cols) here)",
        "LLM/rtl/core/controller/Global_Scheduler.sv: GEMV OUT_LOAD_uop.shape_ptr_addr, "
        "OUT_GEMV_uop.size_ptr_addr; mem_dispatcher.sv: fmap_shape_rd_addr = "
        "IN_LOAD_uop.shape_ptr_addr",
    ),
    Rule(
        "MEMCPY length (both targets)",
        "the fmap-shape slot at shape_ptr holds (X, Y, Z); ceil(X*Y*Z/8) words move",
        "the same",
        "mem_dispatcher.sv: LOAD s6-s7 load_s7_word_total = floor + round of X*Y*Z/8",
    ),
    Rule(
        "KV cache element type",
        "float16 (the specification's baseline)",
        "BF16: a MEMCPY moves bytes and no engine converts between float16 and BF16, so the "
        "rows L2 holds and the DDR cache share BF16",
        "no float16 datapath in LLM/rtl (CVO_sfu_unit.sv, mem_dispatcher.sv are BF16-only)",
    ),
    Rule(
        "command FIFO",
        "one word decoded per clock, as written",
        "the public FIFO re-issues every word until the next write (command_fifo = reissue: "
        "the host follows each instruction with a kick-marker write, which the decoder "
        "drops); the deployed build issues each word once, at most one per 2 cycles "
        "(command_fifo = paced)",
        "LLM/rtl/core/controller/AXIL_CMD_IN.sv with common/rtl/interfaces/IF_queue.sv: "
        "push()/pop() set push_en/pop_en, only clear() resets them; "
        "pccxai/v002-kv260-deploy-20260527 patches/gcp-v28/AXIL_CMD_IN.sv: cmd_q.clear() "
        "every cycle, pop_pending",
    ),
)


@dataclass(frozen=True)
class Gap:
    """What the RTL as built cannot do for a decode step, whatever the program does."""

    topic: str
    rtl: str
    emulator: str  # what the as-built emulator does instead


GAPS: tuple[Gap, ...] = (
    Gap(
        "GEMV results",
        "GEMV_top's result outputs are unconnected (pccx_npu_top.sv: .OUT_result_valid_A() "
        "...), and the STORE engine writes GEMM rows only (mem_dispatcher.sv: store_active "
        "for from_GEMM_res_to_L2)",
        "writes the GEMV result to dest as BF16, zero-padded to whole words",
    ),
    Gap(
        "GEMV engine size",
        "pccx_npu_top.sv feeds the 6-bit size_ptr field itself to GEMV_top as IN_num_recur "
        "(a count, not a slot)",
        "reads rows from the weight-shape slot size_ptr names",
    ),
    Gap(
        "float32 weights",
        "the GEMV lanes take 32 INT4 weights per 128-bit HP beat (pccx_npu_top.sv "
        "gemv_weight_A/B); the float32 matrices the specification keeps (AltUp and PLE "
        "projections) have no path",
        "multiplies float32 matrices as streamed",
    ),
    Gap(
        "attention operands",
        "GEMV weights come only from HP2/HP3 (pccx_npu_top.sv: GEMV_top IN_weight_A/B from "
        "M_CORE_HP2/HP3_WEIGHT); nothing reads a matrix of K/V rows from L2",
        "reads the K/V rows of an attention GEMV from L2, where the program put them",
    ),
    Gap(
        "SCALE scalar",
        "CVO_sfu_unit.sv takes the stream's first element as the scalar and emits length-1 "
        "results while the bridge waits for length results (a SCALE hangs the bridge); a "
        "SCALE by a constant has no field for it",
        "takes the scalar from the operand (or constant slot) the sidecar names",
    ),
    Gap(
        "SFU arithmetic",
        "CVO_sfu_unit.sv computes in BF16 with truncating helpers; its bf16_add normalises one "
        "bit off (1 + 1 = 1.5; REDUCE_SUM, RECIP and GELU use it), its EXP shifts the "
        "mantissa out of a 16-bit word (EXP(0.5) = EXP(2) = 1.0), GELU pairs x[k-2] with "
        "sigmoid(1.702 x[k]) in a stream (a 10-stage x delay against 8 registers) and "
        "consecutive SCALEs keep the first one's scalar; each checked against the RTL under "
        "Verilator",
        "spec numerics: each function exact, its result rounded to BF16; rtl numerics: the "
        "SFU's own arithmetic bit for bit (pccx_flow.board.emulator.sfu_rtl), GELU paired "
        "with its own x",
    ),
    Gap(
        "EXP sub_emax",
        "CVO_top's IN_e_max is the GEMM normalizer's column-0 exponent "
        "(pccx_npu_top.sv cvo_emax_bf16), not a value in L2",
        "subtracts the findemax value the sidecar names",
    ),
    Gap(
        "stale CVO uop",
        "CVO_top and the bridge latch Global_Scheduler's registered OUT_CVO_uop on the "
        "decoder's cvo_op_x64_valid_wire, the same edge that register takes the new word: "
        "each CVO would run the previous CVO's fields (pccx_npu_top.sv IN_uop(CVO_uop_wire), "
        "IN_uop_valid(cvo_op_x64_valid_wire))",
        "runs each CVO with its own fields",
    ),
    Gap(
        "completion",
        "DONE comes from MEMSET, CVO and GEMM-store completion only: nothing signals that a "
        "MEMCPY or GEMV finished (pccx_npu_top.sv op_done_pulse)",
        "treats a batch as finished at its DONE",
    ),
)


def rules_table(width: int = 96) -> str:
    """The rules and gaps as text, wrapped to `width` columns, for `pccx-flow isa`."""

    def item(label: str, text: str) -> list[str]:
        return textwrap.wrap(
            text, width, initial_indent=f"      {label:<10}", subsequent_indent=" " * 16
        )

    lines = ["Targets: how a word is read (spec: pccx-v002.md; as-built: the RTL, cited)."]
    for r in RULES:
        lines.append(f"  - {r.topic}")
        lines += item("spec:", r.spec) + item("as-built:", r.as_built)
        lines += item("source:", r.source)
    lines.append("")
    lines.append("What the RTL as built cannot do, whatever the program (the as-built emulator")
    lines.append("keeps the documented intent there):")
    for g in GAPS:
        lines += textwrap.wrap(
            f"{g.topic}: {g.rtl}. Emulator: {g.emulator}.",
            width,
            initial_indent="  - ",
            subsequent_indent="    ",
        )
    return "\n".join(lines)
