"""The SFU's arithmetic as the RTL computes it: BF16 bit patterns in, BF16 bit patterns out.

An as-built program emulated with ``--numerics rtl`` runs its CVOs through these functions,
written from ``LLM/rtl/core/cvo/CVO_sfu_unit.sv`` (pccxai/pccx-v002): its local
``bf16_mul`` and ``bf16_add``, the EXP pipeline (BF16 -> Q8.7 fixed point, times log2(e) in
Q1.7, a 7-bit mantissa LUT), the SQRT LUTs, RECIP (exponent flip, one Newton-Raphson step
through ``bf16_mul``/``bf16_add``), SCALE (``bf16_mul`` by the scalar; ``recip_scale``
approximates 1/s by flipping its exponent and mantissa), REDUCE_SUM (a sequential
``bf16_add`` accumulator) and GELU (x * sigmoid(1.702 x) through the same helpers). Values
are handled as uint16 arrays; every operation truncates as the RTL does, and no NaN, inf or
subnormal case is special unless the RTL makes it one. Verilog's expression widths matter:
where a product sits in a 9-bit expression (the EXP and SQRT mantissa tables) it keeps only
its low 9 bits, so their curvature terms vanish; where a magnitude lands in a 16-bit signed
wire it wraps.

Checked against the RTL itself under Verilator (`tests/board/emulator/test_sfu_rtl.py`, when
``PCCX_V002_RTL`` names a pccx-v002 checkout): EXP, SQRT, RECIP and GELU agree bit for bit on
all 65,536 BF16 inputs, ``bf16_add`` (through REDUCE_SUM) on 30,000 random pairs, SCALE on
random scalars.

What this reading shows about the RTL (each a consequence of the code, not a modelling
choice; `pccx_flow.board.target.GAPS` lists them with the emulator's other departures):

- ``bf16_add`` normalises one bit off: a carry-free sum (bit 8 of the 10-bit sum set) keeps
  the larger exponent and takes the hidden bit as the mantissa's top bit, so 1 + 1 = 1.5 and
  a sum without a carry drops an exponent (1 + 2**-8 = 0.75). REDUCE_SUM, RECIP and GELU go
  through it.
- The EXP pipeline converts x to Q8.7 by shifting ``{1, mantissa, 7'b0}`` left by
  ``exponent - 127 + 7`` inside 16 bits: for |x| >= 2**-5 the hidden bit leaves the word
  (only the mantissa's low bits remain), so EXP(0.5) = EXP(1) = EXP(2) = 1.0, and for smaller
  |x| the value is read 2**14 too large, so EXP(2**-7) = +inf.
- GELU's x delay line has 10 stages while its sigmoid path has 8 registers, so in a stream
  the RTL pairs sigmoid(1.702 x[k]) with x[k-2] (and with whatever the bridge holds in a
  stream bubble); the test shows it on a continuous stream. The timing is not modelled here:
  `gelu` pairs each x with its own sigmoid, the best case.
- SCALE takes its scalar from the first element the unit ever sees after another function:
  consecutive SCALEs keep the first one's scalar and treat every later element as data.

>>> from pccx_flow.board.isa import bf16
>>> one = bf16.to_bits([1.0])
>>> float(bf16.from_bits(bf16_add(one, one))[0])
1.5
>>> float(bf16.from_bits(bf16_mul(bf16.to_bits([3.0]), bf16.to_bits([0.5])))[0])
1.5
"""

from __future__ import annotations

import numpy as np

U16 = np.uint16
_ONE = 0x3F80  # Bf16One
_TWO = 0x4000  # Bf16Two
_SCALE_1702 = 0x3FD9  # Bf16Scale1702
_LOG2E_Q17 = 0xB8  # Log2EQ17: log2(e) in Q1.7


def _fields(x):
    x = np.asarray(x, dtype=np.int64)
    return (x >> 15) & 1, (x >> 7) & 0xFF, x & 0x7F


def bf16_mul(a, b) -> np.ndarray:
    """``bf16_mul`` of CVO_sfu_unit.sv: truncating, exponent wraps in 8 bits."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    sa, ea, ma = _fields(a)
    sb, eb, mb = _fields(b)
    zero = ((a & 0x7FFF) == 0) | ((b & 0x7FFF) == 0)
    esum = (ea + eb) & 0x1FF
    mp = ((0x80 | ma) * (0x80 | mb)) & 0xFFFF
    high = (mp >> 15) & 1
    er = np.where(high == 1, (esum - 127 + 1) & 0x1FF, (esum - 127) & 0x1FF) & 0xFF
    mr = np.where(high == 1, (mp >> 8) & 0x7F, (mp >> 7) & 0x7F)
    out = ((sa ^ sb) << 15) | (er << 7) | mr
    return np.where(zero, 0, out).astype(U16)


def bf16_add(a, b) -> np.ndarray:
    """``bf16_add`` of CVO_sfu_unit.sv, normalisation as written (see the module docstring)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    a, b = np.broadcast_arrays(a, b)
    sa, ea, ma = _fields(a)
    sb, eb, mb = _fields(b)
    ma9 = 0x80 | ma  # {1'b0, 1'b1, a[6:0]}
    mb9 = 0x80 | mb
    a_big = ea >= eb
    elarge = np.where(a_big, ea, eb)
    diff = np.where(a_big, ea - eb, eb - ea) & 0xFF
    shift = np.minimum(diff, 16)  # 9-bit values shifted by >= 9 are 0
    ma9 = np.where(a_big, ma9, ma9 >> shift)
    mb9 = np.where(a_big, mb9 >> shift, mb9)
    same = sa == sb
    s = np.where(same, sa, np.where(ma9 >= mb9, sa, sb))
    total = np.where(same, ma9 + mb9, np.abs(ma9 - mb9)) & 0x3FF
    eout = np.where(
        (total >> 9) & 1 == 1, elarge + 1, np.where((total >> 8) & 1 == 1, elarge, elarge - 1)
    ) & 0xFF
    mout = np.where(
        (total >> 9) & 1 == 1,
        (total >> 3) & 0x7F,
        np.where((total >> 8) & 1 == 1, (total >> 2) & 0x7F, (total >> 1) & 0x7F),
    )
    out = (s << 15) | (eout << 7) | mout
    out = np.where(total == 0, 0, out)
    out = np.where((b & 0x7FFF) == 0, a, out)
    out = np.where((a & 0x7FFF) == 0, b, out)
    return out.astype(U16)


def _exp_mant_lut(k):
    # v = {2'b0, k} + ({2'b0, k} * {2'b0, k} >> 9): every operand is 9 bits wide, so the
    # product keeps its low 9 bits and the correction term is always 0
    v = k + (((k * k) & 0x1FF) >> 9)
    return v & 0x7F


def _exp_bits(x) -> np.ndarray:
    """The EXP pipeline (stages 1-3) on BF16 bits: 2^(x log2 e) from a Q8.7 fixed point."""
    x = np.asarray(x, dtype=np.int64)
    sign, e, m = _fields(x)
    sh = e - 127
    full = ((0x80 | m) << 7) & 0xFFFF  # {1'b1, mant, 7'b0}
    left = (full << np.clip(sh + 7, 0, 31)) & 0xFFFF
    right = full >> np.clip(-(sh + 7), 0, 63)
    mag = np.where(e == 0, 0, np.where(sh >= 8, 0x7FFF, np.where(sh >= -7, left, right)))
    # -$signed({1'b0, mag}) lands in a 16-bit signed wire: wrap to 16 bits
    fixed = np.where(sign == 1, -mag, mag) & 0xFFFF
    fixed = np.where(fixed >= 0x8000, fixed - 0x10000, fixed)  # Q8.7, signed
    y = fixed * _LOG2E_Q17  # Q9.14
    n = (y >> 14) & 0x1FF  # 9'(y[23:14]), two's complement bits kept
    frac = (y >> 7) & 0x7F
    out_exp = (127 + n) & 0x1FF
    over = ((out_exp >> 8) & 1 == 1) | (out_exp == 0)
    saturate = np.where((n >> 8) & 1 == 0, 0x7F80, 0)  # +inf or 0
    out = np.where(over, saturate, ((out_exp & 0xFF) << 7) | _exp_mant_lut(frac))
    return out.astype(U16)


def _sqrt_bits(x) -> np.ndarray:
    _, e, m = _fields(x)
    unbiased = (e - 127) & 0xFF
    out_exp = (127 + (unbiased >> 1)) & 0xFF
    # 9-bit expressions: the products keep their low 9 bits (sqrt_mant_even / _odd)
    even = (((m + (((m * ((128 - m) & 0x7F)) & 0x1FF) >> 9)) & 0x1FF) >> 1) & 0x7F
    odd = ((53 + (((m * 91) & 0x1FF) >> 7)) & 0x1FF) & 0x7F
    mant = np.where(unbiased & 1 == 1, odd, even)
    return ((out_exp << 7) | mant).astype(U16)


def _recip_estimate(x) -> np.ndarray:
    """r0 of RECIP (and of GELU's sigmoid): exponent 254 - e, mantissa 127 - m[6:1]."""
    _, e, m = _fields(x)
    return ((((254 - e) & 0xFF) << 7) | ((127 - (m >> 1)) & 0x7F)).astype(U16)


def _recip_bits(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    sign = (x >> 15) & 1
    mag = x & 0x7FFF
    r0 = _recip_estimate(mag)
    xr0 = bf16_mul(mag, r0).astype(np.int64)
    corr = bf16_add(np.full_like(xr0, _TWO), 0x8000 | (xr0 & 0x7FFF))  # 2 - x r0
    out = bf16_mul(r0, corr).astype(np.int64) & 0x7FFF
    return ((sign << 15) | out).astype(U16)


def gelu_sigmoid(x) -> np.ndarray:
    """sigmoid(1.702 x) as GELU's stages g1-r3 compute it (BF16 bits in and out)."""
    x = np.asarray(x, dtype=np.int64)
    y = bf16_mul(x, _SCALE_1702).astype(np.int64)
    neg = y ^ 0x8000
    denom = bf16_add(np.full_like(neg, _ONE), _exp_bits(neg)).astype(np.int64)
    r0 = _recip_estimate(denom).astype(np.int64)
    xr0 = bf16_mul(denom, r0).astype(np.int64)
    return bf16_mul(r0, bf16_add(np.full_like(xr0, _TWO), 0x8000 | (xr0 & 0x7FFF)))


def _gelu_bits(x) -> np.ndarray:
    """x * sigmoid(1.702 x), each x paired with its own sigmoid (see the module docstring:
    the RTL's stream pairs it with the sigmoid of the element two cycles later)."""
    return bf16_mul(x, gelu_sigmoid(x))


def reduce_sum(x) -> int:
    """REDUCE_SUM: the accumulator starts at 0 and adds each element in stream order."""
    acc = np.zeros(1, dtype=np.int64)
    for v in np.asarray(x, dtype=np.int64).reshape(-1):
        acc = bf16_add(acc, v).astype(np.int64)
    return int(acc[0])


def scale(x, scalar: int, recip: bool) -> np.ndarray:
    """SCALE by `scalar` (BF16 bits); ``recip_scale`` takes the RTL's approximate 1/scalar."""
    s = int(scalar)
    if recip:  # {s[15], 254 - e, 127 - m[6:1]}
        s = (s & 0x8000) | (((254 - ((s >> 7) & 0xFF)) & 0xFF) << 7) | ((127 - ((s & 0x7F) >> 1))
                                                                        & 0x7F)  # fmt: skip
    return bf16_mul(x, s)


FUNCTIONS = {"EXP": _exp_bits, "SQRT": _sqrt_bits, "RECIP": _recip_bits, "GELU": _gelu_bits}


def apply(func: str, x_bits, *, scalar: int | None = None, recip: bool = False) -> np.ndarray:
    """One CVO function on BF16 bits as the SFU computes it (SIN, COS: not in the SFU)."""
    if func == "REDUCE_SUM":
        return np.array([reduce_sum(x_bits)], dtype=U16)
    if func == "SCALE":
        return scale(x_bits, scalar, recip)
    if func not in FUNCTIONS:
        raise KeyError(func)
    return FUNCTIONS[func](x_bits)
