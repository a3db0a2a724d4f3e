"""How a pccx v002 target reads a program's words: the specification's reading or the RTL's.

The same 64-bit word means different things to the design pccx documents and to the RTL
pccx built (public repository pccxai/pccx-v002, ``LLM/rtl``). A program is lowered for one
*target*, and the lowering, the emulator and the timing replay all take the target's reading
from here, so they cannot disagree about it:

- ``spec`` keeps pccx-flow's reading of the specification (``pccx-v002.md`` §4): every
  address counts 128-bit L2 words, activations sit in L2 as float32 (the specification's
  math), a CVO may be as long as its length field and may share a batch with other CVOs.
- ``as-built`` follows the RTL wherever a program can follow it (`RULES`, each with the file
  and signal it comes from). Where the RTL has no datapath for what a decode step needs, no
  program can work around it; `GAPS` lists those, and the as-built emulator keeps the
  documented intent there and says so.

A target is chosen by the hardware profile (``[program] target``; ``v002-as-built`` says
``as-built``) and can be overridden per command (``emit --target``).

>>> t = get_target("as-built")
>>> t.cvo_field(3), t.cvo_word(t.cvo_field(3)), t.element_bytes
(24, 3, 2)
>>> t.cvo_length("EXP", 5), t.cvo_length("REDUCE_SUM", 5), t.cvo_length("RECIP", 1, offset=7)
(8, 5, 8)
>>> get_target("spec").cvo_field(3)
3
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from pccx_flow.errors import PccxFlowError

TARGETS = ("spec", "as-built")
# How the command FIFO hands words to the decoder (`COMMAND_FIFOS` text says which RTL).
COMMAND_FIFOS = ("ideal", "paced", "reissue")

L2_WORD_BYTES = 16
ADDR_BITS = 17
# The element a CVO writes a lone result to, and where every 1-element tensor of an as-built
# program lives (see `Target.scalar_element`).
SCALAR_ELEMENT = 7
BF16 = "bfloat16"


class TargetError(PccxFlowError):
    """An unknown target or command-FIFO name, or a program made for another target."""


@dataclass(frozen=True)
class Target:
    """One target's reading of the words (see the module docstring and `RULES`)."""

    name: str
    # CVO src/dst field unit: "word" (128-bit L2 word) or "element" (16-bit BF16 element).
    cvo_addresses: str
    # How activations (and the KV rows L2 holds) are stored in L2: float32 or bfloat16.
    l2_dtype: str
    # Most results one CVO may produce (None: the 16-bit length field is the only limit).
    cvo_max_results: int | None
    # Lengths cover whole words; a lone result lands in element 7 (`scalar_element`).
    cvo_whole_words: bool
    # A CVO only as the last instruction of its batch (the bridge drops a CVO while busy).
    one_cvo_per_batch: bool
    # Which GEMV field points at the fmap-shape slot holding the input length.
    gemv_length_ptr: str
    # The DDR KV cache's element type (None: the graph's, float16 or float32).
    kv_cache_dtype: str | None

    @property
    def element_bytes(self) -> int:
        """Bytes of one activation element in L2."""
        return 2 if self.l2_dtype == BF16 else 4

    @property
    def elements_per_word(self) -> int:
        return L2_WORD_BYTES // self.element_bytes

    @property
    def scalar_element(self) -> int:
        """Element of its word where REDUCE_SUM's one result lands (0 unless whole words).

        The as-built bridge writes a last partial word's results into its top elements
        (`RULES` "partial words"), so REDUCE_SUM leaves its sum in element 7 with elements
        0-6 zero; an element-wise CVO over it covers the whole word and keeps it there.
        """
        return SCALAR_ELEMENT if self.cvo_whole_words else 0

    def tensor_dtype(self, dtype: str) -> str:
        """How a tensor of graph dtype `dtype` is stored in L2 on this target."""
        if self.l2_dtype == BF16 and dtype in ("float32", "float16", "float64"):
            return BF16
        return dtype

    def tensor_bytes(self, shape: list[int] | tuple[int, ...], dtype: str) -> int:
        """Bytes a tensor takes in L2 on this target."""
        return math.prod(shape) * DTYPE_BYTES[self.tensor_dtype(dtype)]

    def cvo_field(self, word: int, element: int = 0) -> int:
        """The CVO src/dst field that addresses element `element` of L2 word `word`."""
        return word * 8 + element if self.cvo_addresses == "element" else word

    def cvo_word(self, field: int) -> int:
        """The L2 word a CVO src/dst field makes the SFU start at.

        As built the bridge drops the field's low 3 bits (``src_addr >> 3``): a CVO always
        streams from the first element of a word."""
        return field >> 3 if self.cvo_addresses == "element" else field

    @property
    def cvo_reach_words(self) -> int:
        """L2 words a CVO field can address at all (17 bits of words, or of elements)."""
        return (1 << ADDR_BITS) // (8 if self.cvo_addresses == "element" else 1)

    def cvo_length(self, func: str, elements: int, offset: int = 0) -> int:
        """The length field of a CVO over `elements` values starting at element `offset`.

        On whole-word targets an element-wise CVO covers every word it touches (the bridge
        streams from a word's element 0 and writes whole words, a partial word's results in
        its top elements), so each value keeps its place. REDUCE_SUM sums exactly the values
        meant; over a lone REDUCE_SUM result (element 7, the rest of its word zero) it covers
        the word.
        """
        if not self.cvo_whole_words:
            return elements
        per = self.elements_per_word
        if func == "REDUCE_SUM":
            return elements if offset == 0 else per
        if offset and offset + elements > per:
            raise TargetError(f"{elements} values from element {offset} of a word")
        return -(-(offset + elements) // per) * per

    def cvo_pieces(self, func: str, elements: int, offset: int = 0) -> list[tuple[int, int]]:
        """``(first element, length field)`` of each CVO word a CVO over `elements` needs.

        A CVO producing more results than `cvo_max_results` is split into whole-word pieces
        no longer than the cap; REDUCE_SUM writes one result and is never split here.
        """
        total = self.cvo_length(func, elements, offset)
        cap = self.cvo_max_results
        if cap is None or func == "REDUCE_SUM" or total <= cap:
            return [(0, total)]
        return [(a, min(cap, total - a)) for a in range(0, total, cap)]

    def cvo_results(self, func: str, length: int) -> int:
        """How many results a CVO of this length writes."""
        return 1 if func == "REDUCE_SUM" else length


SPEC = Target(
    name="spec",
    cvo_addresses="word",
    l2_dtype="float32",
    cvo_max_results=None,
    cvo_whole_words=False,
    one_cvo_per_batch=False,
    gemv_length_ptr="size_ptr",
    kv_cache_dtype=None,
)
AS_BUILT = Target(
    name="as-built",
    cvo_addresses="element",
    l2_dtype=BF16,
    cvo_max_results=2048,
    cvo_whole_words=True,
    one_cvo_per_batch=True,
    gemv_length_ptr="shape_ptr",
    kv_cache_dtype=BF16,
)
_BY_NAME = {t.name: t for t in (SPEC, AS_BUILT)}

DTYPE_BYTES = {"float32": 4, "float16": 2, BF16: 2, "float64": 8, "int32": 4}


def get_target(name: str) -> Target:
    """A target by name (`TARGETS`)."""
    if name not in _BY_NAME:
        raise TargetError(f"unknown target {name!r}; use one of {', '.join(TARGETS)}")
    return _BY_NAME[name]


def row_align_for(target: Target) -> int:
    """Rows a decode graph's split GEMV tiles come in multiples of, so every tile's output
    fills whole L2 words and multi-part operands stay contiguous (8 BF16 values a word as
    built; 1 on the spec target, whose graphs are as they always were)."""
    return target.elements_per_word if target.cvo_whole_words else 1


def target_of(profile, override: str | Target | None = None) -> Target:
    """The target a profile names (``[program] target``), or `override` when given (a name,
    or a `Target` itself, e.g. one with another cap for a test)."""
    if isinstance(override, Target):
        return override
    return get_target(override or profile.program.target)


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


def check_program_target(program_target: str, expected: str, what: str) -> None:
    """Refuse, in one line, a program lowered for another target than `what` expects."""
    if program_target != expected:
        raise TargetError(
            f"the program was emitted for target {program_target!r} but {what} reads words as "
            f"target {expected!r}; re-run emit with that profile (or --target {expected})"
        )
