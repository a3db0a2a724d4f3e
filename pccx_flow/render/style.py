"""The one colour and shape palette every picture uses, so a lane or a block looks the same
in a DAG render, a Gantt chart and a dashboard.

Lane classes get fill colours (DAG nodes are coloured by where they run); blocks get fill
colours (Gantt bars are coloured by what part of the step they belong to); ops get Graphviz
shapes (so GEMV, CVO, MEMCPY, MEMSET and HOST steps can be told apart in black and white).
The colours are Tableau-10-like: distinct, readable with black text, and colour-blind safe
enough for the six lane classes.
"""

from __future__ import annotations

LANE_COLOURS: dict[str, str] = {
    "gemv": "#4e79a7",  # blue: the weight-streaming matrix-vector cores
    "gemm": "#9c755f",  # brown: the systolic array (idle in batch-1 decode)
    "sfu": "#f28e2b",  # orange: the CVO special-function unit
    "dma": "#76b7b2",  # teal: MEMCPY over ACP
    "ctrl": "#bab0ac",  # grey: MEMSET into the constant caches
    "host": "#e15759",  # red: the Cortex-A53 running ops with no instruction
}

# Fill of a collapsed node whose members run on more than one lane class.
MIXED_COLOUR = "#d9d9d9"

BLOCK_COLOURS: dict[str, str] = {
    "embed": "#8cd17d",
    "altup_init": "#b6992d",
    "ple_pre": "#f1ce63",
    "const": "#bab0ac",
    "altup_pred": "#86bcb6",
    "attn": "#4e79a7",
    "laurel": "#ff9d9a",
    "residual": "#79706e",
    "ffn": "#f28e2b",
    "altup_corr": "#499894",
    "ple_mix": "#d4a6c8",
    "final": "#e15759",
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
