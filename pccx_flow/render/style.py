"""The one colour and shape palette every picture uses, so a lane or a block looks the same
in a DAG render, a Gantt chart and a dashboard.

Lane classes get fill colours (DAG nodes are coloured by where they run); blocks get fill
colours (Gantt bars are coloured by what part of the step they belong to); ops get Graphviz
shapes (so GEMV, CVO, MEMCPY, MEMSET and HOST steps can be told apart in black and white).

Colours are chosen to stay apart for readers with protanopia, deuteranopia or tritanopia
too: lanes use the Okabe-Ito palette. Block colours are bars, often thinner than a pixel
column, on a white page, so each has a WCAG contrast of at least 3:1 against white (a pale
bar vanished); blocks next to each other in the legend (the step's block order) differ by
CIEDE2000 ΔE ≥ 20; the eight blocks of a layer (which stand side by side in a Gantt row)
differ by ΔE ≥ 15 under every simulated colour vision, and all twelve by ≥ 7.5. The twelve
were searched for among OKLCH colours meeting those rules, the big blocks (attention, FFN)
given the clearest hues; `tests/render/test_style.py` measures every rule.
"""

from __future__ import annotations

LANE_COLOURS: dict[str, str] = {
    "gemv": "#0072b2",  # blue: the weight-streaming matrix-vector cores
    "gemm": "#cc79a7",  # reddish purple: the systolic array (idle in batch-1 decode)
    "sfu": "#e69f00",  # orange: the CVO special-function unit
    "dma": "#009e73",  # bluish green: MEMCPY over ACP
    "ctrl": "#bbbbbb",  # grey: MEMSET into the constant caches
    "host": "#d55e00",  # vermillion: the Cortex-A53 running ops with no instruction
}

# Fill of a collapsed node whose members run on more than one lane class.
MIXED_COLOUR = "#d9d9d9"

# The blocks of every layer, in step order.
LAYER_BLOCKS = (
    "const", "altup_pred", "attn", "laurel", "residual", "ffn", "altup_corr", "ple_mix",
)  # fmt: skip

BLOCK_COLOURS: dict[str, str] = {
    # once per step
    "embed": "#435bf5",  # bright blue
    "altup_init": "#6e7655",  # olive
    "ple_pre": "#4c425f",  # dark purple
    "final": "#78292e",  # maroon
    # every layer
    "const": "#879777",  # sage
    "altup_pred": "#7a5867",  # plum
    "attn": "#2694f3",  # sky blue
    "laurel": "#ba0d01",  # red
    "residual": "#585aa0",  # slate blue
    "ffn": "#f05810",  # orange
    "altup_corr": "#2422c0",  # indigo
    "ple_mix": "#a6859a",  # mauve
}

BLOCK_TITLES: dict[str, str] = {
    "embed": "embedding",
    "altup_init": "AltUp init",
    "ple_pre": "PLE pre-compute",
    "const": "constants",
    "altup_pred": "AltUp predict",
    "attn": "attention",
    "laurel": "LAuReL",
    "residual": "residual + merge",
    "ffn": "FFN",
    "altup_corr": "AltUp correct",
    "ple_mix": "PLE mix",
    "final": "final + LM head",
}

# Blocks the specification places beside the critical path (spec 003: LAuReL runs parallel
# to attention, PLE only feeds the shadow rows). Drawn with dashed borders.
OFF_PATH_BLOCKS = frozenset({"laurel", "ple_pre", "ple_mix"})

OP_SHAPES: dict[str, str] = {
    "GEMV": "box",
    "GEMM": "box3d",
    "CVO": "ellipse",
    "MEMCPY": "cds",
    "MEMSET": "note",
    "HOST": "hexagon",
}

# Shape of a collapsed node that folds several op kinds.
GROUP_SHAPE = "component"

# Graphviz sizes a node from its label's box, but some shapes draw over part of that box:
# the arrow head of `cds` (MEMCPY) and the two tabs of `component` (a folded group) covered
# the ends of the longest line. A wider margin (inches, horizontal,vertical) keeps the
# label inside what the shape leaves free.
SHAPE_MARGINS: dict[str, dict[str, str]] = {
    "cds": {"margin": "0.2,0.08"},
    "component": {"margin": "0.16,0.04"},
}

# Critical-path emphasis.
CRITICAL_PENWIDTH = "3.5"
CRITICAL_COLOUR = "#000000"
EDGE_COLOUR = "#9a9a9a"


def lane_colour(lane_class: str | None) -> str:
    """Fill colour of a lane class (the mixed colour for None or an unknown class)."""
    return LANE_COLOURS.get(lane_class or "", MIXED_COLOUR)


def block_colour(block: str | None) -> str:
    """Fill colour of a block (the mixed colour for None or an unknown block)."""
    return BLOCK_COLOURS.get(block or "", MIXED_COLOUR)


def block_title(block: str) -> str:
    """Human title of a block, for cluster labels and legends."""
    return BLOCK_TITLES.get(block, block)


def op_shape(op: str | None) -> str:
    """Graphviz shape of an op kind (the group shape for a mix of ops)."""
    return OP_SHAPES.get(op or "", GROUP_SHAPE)


def text_colour(fill: str) -> str:
    """Black or white text, whichever reads better on `fill` (a ``#rrggbb`` colour)."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    luminance = 0.299 * r + 0.587 * g + 0.114 * b
    return "#000000" if luminance > 140 else "#ffffff"
