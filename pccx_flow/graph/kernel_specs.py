"""What every node kernel computes: the contract between the graph builder and the executor.

A node names its kernel (``kernel``) and carries plain-data ``params``. A kernel receives the
arrays of the node's ``inputs`` in order and returns its ``outputs`` in order (a tuple when
there are several). `KERNELS` gives, for each kernel name, the exact math, its params and its
inputs/outputs, so the kernels can be written without reading the builder. `KERNEL_OPS` says
which instruction (or HOST) each kernel belongs to; `pccx_flow.graph.check` enforces it.

Conventions shared by every kernel
----------------------------------

*Operands.* A kernel's math is written over *operands*. By default each input tensor is one
operand. When ``params["operands"]`` is present it is a list of counts ``[n0, n1, ...]``
(summing to the number of inputs): operand k is the 1-D concatenation, in input order, of the
next ``nk`` inputs. This is how a vector produced in row tiles (one GEMV tile each) is handed
to a node that needs the whole vector, without a separate gather node.

*Dtypes.* Every activation is float32 unless a tensor's ``dtype`` says otherwise (float16 or
float32 KV rows, int64 token id). Kernels compute in float32 (``np.float32`` arrays, NumPy's
default pairwise sums) except where a line below says float64.

*Spans.* A CVO kernel may carry ``params["span"] = [a, b]``: it then works on elements
``a:b`` of its first operand only (a CVO instruction takes at most 2,048 elements, so a longer
vector is processed as several nodes over consecutive spans; each output is the span's result).

*Weights.* A node that reads a checkpoint tensor has ``weight = {"key", "rows": [r0, r1]}``
and, for a GEMV split along its input dimension, ``"cols": [c0, c1]`` (half-open; absent =
every column). ``key`` is a `pccx_flow.model.tensors` key (without the
``model.language_model.`` prefix). INT4 tensors are dequantised as stored: ``q * scale[row]``.
For matrices, ``rows`` always index *outputs* and ``cols`` *inputs* of ``y = W x``:

- ``params["layout"] == "out_in"`` (every INT4 matrix, and float32 ``altup_pred`` /
  ``altup_corr``): ``W = stored[r0:r1, c0:c1]``;
- ``params["layout"] == "in_out"`` (float32 matrices the specification multiplies as ``x · A``:
  ``altup_projs``, ``altup_unprojs``, ``altup_router``, per-layer ``W_ple_proj``):
  ``W = stored[c0:c1, r0:r1].T``.

For a 1-D float32 weight (a norm gamma, ``altup_scale``) ``rows`` index its elements.
A MEMCPY row fetch (``embed_row``) names the table with ``rows = [0, table_rows]``: which row
is read is decided at run time from the token id.

*State.* Values from outside the step are never input tensors. Nodes with no inputs name
them in ``params`` with ``"source": "state"`` and a ``field``: ``token_id``, ``k_cache`` /
``v_cache`` (KV rows of earlier positions), and, on a graph cut with ``layers=(a, b)``,
``xs`` (stream rows entering layer a), ``pli`` (per-layer inputs), ``kv_new`` (new K/V row of a
cache layer below a). The position is ``graph.graph["position"]`` and is also in the params of
the nodes that need it. The KV-write nodes' outputs are committed to the cache after the step
(``graph.graph["kv_commits"]``); ``graph.graph["outputs"]`` names the step's result tensors.
"""

from __future__ import annotations

KERNELS: dict[str, str] = {
    # ---------------------------------------------------------------- GEMV ----------------
    "gemv": """GEMV tile: y = W x (+ acc).
inputs: the x parts (operand 0 = concat, length c1-c0), then, when flags.accm == 1, one
  more operand acc [r1-r0] float32 (the partial sum of the previous input chunk).
weight: {"key", "rows": [r0, r1], "cols"?: [c0, c1]}; params: {"layout": "out_in"|"in_out",
  "operands": [...]}; W as in the module docstring (INT4 dequantised, float32 as stored;
  flags.w_scale = 1 marks INT4 tiles, whose per-row scales stream with the nibbles).
output: y [r1-r0] float32 = W @ x (+ acc).""",
    "attn_scores": """Q·Kᵀ for one query head and one key tile (GEMV, flags.findemax = 1).
inputs: q [head_dim]; then k_past [n, head_dim] (KV head g's earlier rows of the tile, only
  when params.has_past); then k_new [head_dim] (head g's row of this position, only when
  params.has_new, default true; float16 on pccx, float32 on gemma3n).
params: {"head": h, "kv_head": g, "head_dim": d, "keys": [a, b], "has_past": bool,
  "has_new": bool, "row_offset": o} (o: key index of the tile's first row, default 0).
rows = concat(k_past, k_new[None]) along axis 0 (whichever are present);
K = rows[a-o:b-o].astype(float32).
outputs: scores [b-a] float32 = K @ q (no 1/sqrt(d), no softcap); emax [1] = max(scores).""",
    "attn_pv": """Probabilities · V for one query head and one key tile (GEMV); with several
key tiles the "probabilities" are exp(s - m_t), unnormalised (see attn_combine).
inputs: the tile's probabilities [b-a]; then v_past / v_new as in attn_scores.
params: {"head", "kv_head": g, "head_dim": d, "keys": [a, b], "has_past", "has_new",
  "row_offset", "operands"}.
rows as in attn_scores; V = rows[a-o:b-o].astype(float32).
output: out [d] float32 = p @ V.""",
    # ---------------------------------------------------------------- CVO -----------------
    "cvo_exp": """CVO EXP with flags.sub_emax = 1: y = exp(x - m[0]).
inputs: x [n], m [1] (the max of the scores GEMV's findemax). output: y [n].""",
    "cvo_reduce_sum": """CVO REDUCE_SUM: s = [sum(x)]. inputs: x (operand 0, <= 2048 elements).
output: s [1].""",
    "cvo_scale_const": """CVO SCALE by a constant preloaded with MEMSET: y = x * params.scale.
inputs: x. output: y, same length.""",
    "cvo_scale_by": """CVO SCALE by a computed scalar: y = x * s[0].
inputs: x (operand 0), s [1] (last operand). output: y.""",
    "cvo_scale_recip": """CVO SCALE with flags.recip_scale = 1: y = x / s[0].
inputs: x (operand 0), s [1] (last operand). output: y.""",
    "cvo_sqrt": "CVO SQRT: y = sqrt(x). inputs: x. output: y.",
    "cvo_recip": "CVO RECIP: y = 1 / x. inputs: x. output: y.",
    "cvo_gelu": """CVO GELU, tanh form of the specification (§0):
y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3); equivalently x / (1 + exp(-2u)),
which has no cancellation for u << 0. inputs: x. output: y.""",
    "cvo_sin": "CVO SIN: y = sin(x) (x already range-reduced to [-pi, pi)). inputs: x. output: y.",
    "cvo_cos": "CVO COS: y = cos(x) (x already range-reduced to [-pi, pi)). inputs: x. output: y.",
    # ---------------------------------------------------------------- HOST ----------------
    "square": "HOST: y = x * x. inputs: x (operand 0). output: y.",
    "mean_eps": """HOST scalar step of RMSNorm: r = [sum(partials) * params.inv_n + params.eps].
inputs: the partial sums, each [1] (operand 0 = concat). output: r [1].""",
    "mul_weight": """HOST: y = x * w[r0:r1] * params.scale (x times a float32 vector weight,
e.g. a norm's gamma; scale 1/D for the AltUp router input). For a per-head gamma
rows = [0, head_dim]. inputs: x (operand 0, length r1-r0). output: y.""",
    "add": "HOST: y = a + b. inputs: operands a, b (same length). output: y.",
    "sub": "HOST: y = a - b. inputs: operands a, b. output: y.",
    "mul": "HOST: y = a * b (e.g. gelu(gate) * up). inputs: operands a, b. output: y.",
    "add_slice": """HOST: y = a + b[o:o+len(a)] with o = params.offset.
inputs: operands a, b. output: y [len(a)].""",
    "add_const": "HOST: y = x + params.value. inputs: x. output: y.",
    "max_const": "HOST: y = maximum(x, params.value). inputs: x. output: y.",
    "tanh": "HOST: y = tanh(x). inputs: x (operand 0). output: y.",
    "softcap": """HOST: y = cap * tanh(x / cap), cap = params.cap (30.0).
inputs: x (operand 0: the concat of its parts, e.g. the read-back runs of logits). output: y.""",
    "sum": "HOST: s = [sum(x)] over partial sums. inputs: operand 0 = concat. output: s [1].",
    "attn_combine": """HOST: one head's attention output from its key tiles (split-K softmax).
inputs: operand 0 = the tiles' maxima m [T] (each tile's emax), operand 1 = their sums
  l [T] (REDUCE_SUM of exp(s_t - m_t)), operand 2 = their unnormalised outputs o [T*d]
  (exp(s_t - m_t) @ V_t, tile by tile). With w = exp(m - max(m)):
output: y [d] float32 = sum_t w_t o_t / sum_t w_t l_t.""",
    "sub_square": """HOST: y = (x - m[0])^2 (centred square for the two-pass std).
inputs: x, m [1]. output: y.""",
    "sub_relu": """HOST: y = maximum(x - c[0], 0) (the sparse gate of spec 002).
inputs: x, c [1]. output: y.""",
    "cutoff": """HOST scalar: c = [mean[0] + params.z * std[0]].
inputs: mean [1], std [1]. output: c [1].""",
    "mag_ratio": """HOST scalar: r = [target[0] / max(mag[0], params.floor)]
(floor 0 means a plain division). inputs: target [1], mag [1]. output: r [1].""",
    "rope_phase": """HOST: RoPE phases for this position, range-reduced for CVO SIN/COS.
inputs: theta [1] (the layer's MEMSET constant). params: {"position": p, "head_dim": d,
  "theta": θ (the same value, for checks)}. In float64: w_j = theta ** (-2j/d),
  j = 0..d/2-1; phi_j = p * w_j; phi_j = ((phi_j + pi) mod 2pi) - pi; cast to float32.
output: phase [d/2].""",
    "rope_combine": """HOST: rotate one head by the RoPE phases.
inputs: x [d], sin [d/2], cos [d/2]. params: {"pairing": "interleaved"|"split_half"}.
interleaved (spec §0): y[2j] = x[2j] cos_j - x[2j+1] sin_j,
  y[2j+1] = x[2j] sin_j + x[2j+1] cos_j.
split_half (gemma3n, h = d/2): y[j] = x[j] cos_j - x[j+h] sin_j,
  y[j+h] = x[j+h] cos_j + x[j] sin_j. output: y [d].""",
    "altup_mix": """HOST: one row of the AltUp prediction (spec §4.A).
inputs: operands coef [S*S], x_0 .. x_{S-1} (each [D], possibly in parts; params.operands).
params: {"row": k, "n_streams": S}. C = coef.reshape(S, S) (row-major);
output: y [D] = x_k + sum_j C[k, j] * x_j.""",
    "altup_correct": """HOST: one row of the AltUp correction (spec §4.E step 3).
inputs: operands corr [S], pred_k [D], innovation [D]. params: {"row": k}.
output: y [D] = pred_k + corr[k] * innovation.""",
    "mean_streams": """HOST: x_final = mean of the S stream vectors (spec §5 step 2).
inputs: operands x_0, proj_0, proj_1, ... (params.operands). output: y [D] =
(sum of operands) / number of operands.""",
    "ple_write": """HOST: PLE mixing into the shadow rows only (spec §4.E step 4).
inputs: operand 0 = mapped [D] (parts), then one operand per row listed in params.rows
  (the corrected stream rows). params: {"rows": [1, 2, 3], "operands"}.
outputs: one per listed row, in order: xs_row + mapped. Row 0 is never an input or output.""",
    # ---------------------------------------------------------------- MEMCPY --------------
    "embed_row": """MEMCPY row fetch of an embedding table (the host dequantises the INT4 row
on the way; the copy carries float32). No inputs. params: {"source": "state",
"field": "token_id", "id_rule": "clip"|"zero_if_oob"|"none", "id_limit": n}.
t = token id; clip: t = min(t, n - 1); zero_if_oob: t = t if t < n else 0; none: t.
weight: {"key", "rows": [0, table_rows]}. output: row [cols] float32 = dequant(W[t]).""",
    "kv_write": """MEMCPY of one KV head's part of this position's K or V row to the DDR cache.
inputs: the head's vector ([head_dim] float32).
params: {"cache_layer": i, "kind": "k"|"v", "kv_head": g, "position": p,
"cache_dtype": "float16"|"float32"}.
output: row [head_dim] in cache_dtype (the executor commits the heads' parts, joined in head
order, to state[kind][cache_layer][p] after the step; attention reads this value).""",
    "kv_read": """MEMCPY of earlier cache rows (one key tile of them) from DDR. No inputs.
params: {"source": "state", "field": "k_cache"|"v_cache", "cache_layer": i,
"kind": "k"|"v", "kv_head": g, "start": a, "positions": [a, b]} with b <= p (this position).
output: rows [b - a, head_dim] in the cache dtype = cache[cache_layer][a:b, g*d:(g+1)*d].""",
    "state_read": """MEMCPY of a value that enters a cut graph (layers=(a, b), a > 0) from the
state. No inputs. params: {"source": "state", "field": "xs", "row": k} | {"field": "pli",
"layer": i} | {"field": "kv_new", "cache_layer": i, "kind": "k"|"v", "kv_head": g}.
output: the stored vector (xs row [D] float32; pli [ple_dim] float32; KV head g's part of the
row [head_dim]).""",
    "readback": """MEMCPY of one run of logits (<= 2,048, the LM head's tiles) to the host.
inputs: the logit tiles (operand 0 = concat). output: the run [n] float32 in host memory.""",
    # ---------------------------------------------------------------- MEMSET --------------
    "memset": """MEMSET of a constant-cache slot. No inputs. params: {"value": v, "what": name,
"slot": s}. output: [v] float32 (e.g. the layer's RoPE theta).""",
}

# The op of the node that runs each kernel (HOST kernels have no pccx instruction).
KERNEL_OPS: dict[str, str] = {
    "gemv": "GEMV",
    "attn_scores": "GEMV",
    "attn_pv": "GEMV",
    "cvo_exp": "CVO",
    "cvo_reduce_sum": "CVO",
    "cvo_scale_const": "CVO",
    "cvo_scale_by": "CVO",
    "cvo_scale_recip": "CVO",
    "cvo_sqrt": "CVO",
    "cvo_recip": "CVO",
    "cvo_gelu": "CVO",
    "cvo_sin": "CVO",
    "cvo_cos": "CVO",
    "embed_row": "MEMCPY",
    "kv_write": "MEMCPY",
    "kv_read": "MEMCPY",
    "state_read": "MEMCPY",
    "readback": "MEMCPY",
    "memset": "MEMSET",
}
for _name in KERNELS:
    KERNEL_OPS.setdefault(_name, "HOST")
del _name

# The CVO function each CVO kernel issues (node attribute ``func``).
CVO_KERNEL_FUNCS: dict[str, str] = {
    "cvo_exp": "EXP",
    "cvo_reduce_sum": "REDUCE_SUM",
    "cvo_scale_const": "SCALE",
    "cvo_scale_by": "SCALE",
    "cvo_scale_recip": "SCALE",
    "cvo_sqrt": "SQRT",
    "cvo_recip": "RECIP",
    "cvo_gelu": "GELU",
    "cvo_sin": "SIN",
    "cvo_cos": "COS",
}


def operand_counts(params: dict, n_inputs: int) -> list[int]:
    """How many inputs make up each operand (``params["operands"]`` or one each).

    >>> operand_counts({"operands": [4, 1]}, 5), operand_counts({}, 2)
    ([4, 1], [1, 1])
    """
    counts = params.get("operands")
    if counts is None:
        return [1] * n_inputs
    return [int(c) for c in counts]
