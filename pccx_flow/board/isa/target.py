"""How a pccx v002 target reads a program's words: the specification's reading or the RTL's.

The same 64-bit word means different things to the design pccx documents and to the RTL
pccx built (public repository pccxai/pccx-v002, ``LLM/rtl``). A program is lowered for one
*target*, and the lowering, the emulator and the timing replay all take the target's reading
from here, so they cannot disagree about it:

- ``spec`` keeps pccx-flow's reading of the specification (``pccx-v002.md`` §4): every
  address counts 128-bit L2 words, activations sit in L2 as float32 (the specification's
  math), a CVO may be as long as its length field and may share a batch with other CVOs.
- ``as-built`` follows the RTL wherever a program can follow it (`rtl_rules.RULES`, each
  with the file and signal it comes from). Where the RTL has no datapath for what a decode
  step needs, no program can work around it; `rtl_rules.GAPS` lists those, and the
  as-built emulator keeps the documented intent there and says so.

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
    """One target's reading of the words (see the module docstring and `rtl_rules.RULES`)."""

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
        (`rtl_rules.RULES` "partial words"), so REDUCE_SUM leaves its sum in element 7 with elements
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


def check_program_target(program_target: str, expected: str, what: str) -> None:
    """Refuse, in one line, a program lowered for another target than `what` expects."""
    if program_target != expected:
        raise TargetError(
            f"the program was emitted for target {program_target!r} but {what} reads words as "
            f"target {expected!r}; re-run emit with that profile (or --target {expected})"
        )
