import pytest

from pccx_flow.graph.nodes import BLOCKS, LANE_CLASSES, OPS
from pccx_flow.render import style


def test_every_lane_class_block_and_op_has_its_own_look():
    assert set(style.LANE_COLOURS) == set(LANE_CLASSES)
    assert len(set(style.LANE_COLOURS.values())) == len(LANE_CLASSES)
    assert set(style.BLOCK_COLOURS) == set(BLOCKS)
    assert set(style.BLOCK_TITLES) == set(BLOCKS)
    assert set(style.OP_SHAPES) == set(OPS)
    assert len(set(style.OP_SHAPES.values())) == len(OPS)
    assert set(BLOCKS) >= style.OFF_PATH_BLOCKS


def test_unknown_names_fall_back_to_the_mixed_look():
    assert style.lane_colour(None) == style.MIXED_COLOUR
    assert style.lane_colour("warp-drive") == style.MIXED_COLOUR
    assert style.block_colour("nope") == style.MIXED_COLOUR
    assert style.op_shape(None) == style.GROUP_SHAPE
    assert style.block_title("ffn") == "FFN"


def test_text_colour_contrasts_with_the_fill():
    assert style.text_colour("#ffffff") == "#000000"
    assert style.text_colour("#000000") == "#ffffff"
    assert style.text_colour(style.LANE_COLOURS["gemv"]) == "#ffffff"  # dark blue
    assert style.text_colour(style.LANE_COLOURS["ctrl"]) == "#000000"  # light grey


def _closest_pair(colours: dict[str, str], names) -> tuple[float, str, str, str]:
    """Smallest CIEDE2000 distance between two of `names`, over normal and CVD vision."""
    import itertools

    from coloraide import Color

    worst = (1e9, "", "", "")
    for vision in (None, "protan", "deutan", "tritan"):
        seen = {n: Color(colours[n]) for n in names}
        if vision:
            seen = {n: c.filter(vision) for n, c in seen.items()}
        for a, b in itertools.combinations(names, 2):
            worst = min(worst, (seen[a].delta_e(seen[b], method="2000"), a, b, str(vision)))
    return worst


def test_palette_stays_apart_under_colour_vision_deficiencies():
    pytest.importorskip("coloraide", reason="the test extra (coloraide) is not installed")
    assert set(style.LAYER_BLOCKS) <= set(BLOCKS)
    # the blocks of one layer stand side by side in a Gantt row: far apart for every reader
    d, a, b, vision = _closest_pair(style.BLOCK_COLOURS, style.LAYER_BLOCKS)
    assert d >= 15, (a, b, vision)
    d, a, b, vision = _closest_pair(style.BLOCK_COLOURS, BLOCKS)
    assert d >= 7.5, (a, b, vision)
    d, a, b, vision = _closest_pair(style.LANE_COLOURS, LANE_CLASSES)
    assert d >= 7.5, (a, b, vision)
    # the pairs a newcomer could not tell apart before
    for a, b in (("altup_pred", "altup_corr"), ("const", "residual")):
        assert _closest_pair(style.BLOCK_COLOURS, (a, b))[0] >= 15


# WCAG 2.x contrast and CIEDE2000, computed here from the hex codes (not by a colour library,
# so the rule is checked by arithmetic anyone can follow).
def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgb(hex_colour: str) -> tuple[float, float, float]:
    return tuple(_linear(int(hex_colour[i : i + 2], 16) / 255) for i in (1, 3, 5))


def wcag_contrast(a: str, b: str) -> float:
    """(L1 + 0.05) / (L2 + 0.05) of the relative luminances, lighter over darker."""
    la, lb = (0.2126 * r + 0.7152 * g + 0.0722 * b_ for r, g, b_ in (_rgb(a), _rgb(b)))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour."""
    r, g, b = _rgb(hex_colour)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def ciede2000(a: str, b: str) -> float:
    """ΔE00 of two sRGB colours (Sharma, Wu and Dalal, 2005, equations 1-17)."""
    import math

    (l1, a1, b1), (l2, a2, b2) = _lab(a), _lab(b)
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dlp, dcp = l2 - l1, c2p - c1p
    dh = h2p - h1p
    if c1p * c2p == 0:
        dh = 0.0
    elif dh > 180:
        dh -= 360
    elif dh < -180:
        dh += 360
    dhp = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dh / 2))
    lbp, cbp = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        hbp = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hbp = (h1p + h2p) / 2
    else:
        hbp = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(hbp - 30)) + 0.24 * math.cos(math.radians(2 * hbp))
         + 0.32 * math.cos(math.radians(3 * hbp + 6))
         - 0.20 * math.cos(math.radians(4 * hbp - 63)))  # fmt: skip
    d_theta = 30 * math.exp(-(((hbp - 275) / 25) ** 2))
    rc = 2 * math.sqrt(cbp**7 / (cbp**7 + 25**7))
    sl = 1 + 0.015 * (lbp - 50) ** 2 / math.sqrt(20 + (lbp - 50) ** 2)
    sc, sh = 1 + 0.045 * cbp, 1 + 0.015 * cbp * t
    rt = -math.sin(math.radians(2 * d_theta)) * rc
    return math.sqrt((dlp / sl) ** 2 + (dcp / sc) ** 2 + (dhp / sh) ** 2
                     + rt * (dcp / sc) * (dhp / sh))  # fmt: skip


def test_ciede2000_matches_sharmas_published_pairs():
    """Two of the test pairs of Sharma et al. (given there in Lab), through sRGB here: the
    implementation is checked on colours whose ΔE00 coloraide and the paper agree on."""
    assert ciede2000("#ffffff", "#ffffff") == 0
    assert ciede2000("#000000", "#ffffff") == pytest.approx(100.0, abs=0.01)
    assert wcag_contrast("#000000", "#ffffff") == pytest.approx(21.0)
    coloraide = pytest.importorskip("coloraide")
    for a, b in (("#2694f3", "#f05810"), ("#585aa0", "#4c425f"), ("#eedd88", "#99ddff")):
        want = coloraide.Color(a).delta_e(coloraide.Color(b), method="2000")
        assert ciede2000(a, b) == pytest.approx(want, abs=0.05)


def test_block_colours_read_on_white_and_legend_neighbours_differ():
    for block, colour in style.BLOCK_COLOURS.items():
        assert wcag_contrast(colour, "#ffffff") >= 3.0, (block, colour)
    for a, b in zip(BLOCKS, BLOCKS[1:], strict=False):  # the legend's order
        assert ciede2000(style.block_colour(a), style.block_colour(b)) >= 20, (a, b)
    # the pair that read as one before (ΔE ≈ 9): far apart wherever they meet
    assert ciede2000(style.block_colour("final"), style.block_colour("altup_corr")) >= 20
