"""The program sidecar's schema: every field a reader uses has the type and range it expects.

The content hash (`files.check_set`) already refuses a sidecar edited after emit; this check
is what stands between a sidecar whose hash was recomputed after an edit (or a bug in a
writer) and the readers (`disasm`, `emulate`, `replay`, `dispatch`), which index lists and
size buffers with its numbers. So every number that sizes work is bounded: the position by
the preset's KV cache, batches by the word count, L2 regions by L2, and every other integer
by 2**40 (a terabyte; no DDR image or stream comes near it) and every float by being
finite. Failures are one `ProgramFileError` line naming the field.
"""

from __future__ import annotations

import math
from pathlib import Path

from pccx_flow.errors import PccxFlowError


class ProgramFileError(PccxFlowError):
    """A program file that is missing, truncated, corrupted or made for something else."""


# Larger than any address, size or count of a v002 program (DDR images are a few GB).
MAX_INT = 1 << 40
ROLES = ("node", "slot", "kick", "done", "host_io")
STEP_KINDS = ("batch", "fence", "host")


class _Bad(Exception):
    pass


def _int(value, name: str, lo: int = 0, hi: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _Bad(f"{name} is {value!r}; expected an integer {lo}..{hi}")
    return value


def _dict(value, name: str) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"{name} is {type(value).__name__}; expected an object")
    return value


def _list(value, name: str) -> list:
    if not isinstance(value, list):
        raise _Bad(f"{name} is {type(value).__name__}; expected a list")
    return value


def _str(value, name: str, choices: tuple[str, ...] | None = None) -> str:
    if not isinstance(value, str) or (choices is not None and value not in choices):
        want = "one of " + ", ".join(choices) if choices else "a string"
        raise _Bad(f"{name} is {value!r}; expected {want}")
    return value


def _numbers(value, name: str, depth: int = 0) -> None:
    """Every number inside `value` is a bounded integer or a finite float."""
    if depth > 32:
        raise _Bad(f"{name} is nested too deeply")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if not -MAX_INT <= value <= MAX_INT:
            raise _Bad(f"{name} holds {value}, beyond +-2**40")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Bad(f"{name} holds {value}, not a finite number")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _numbers(v, f"{name}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            _numbers(v, f"{name}.{k}", depth + 1)


def _meta(meta: dict) -> None:
    from pccx_flow.board.isa.target import TARGETS
    from pccx_flow.model.config import PRESETS, SEMANTICS
    from pccx_flow.schedule.readahead import READ_AHEAD_RULES

    config = PRESETS.get(_str(meta.get("config"), "meta.config", tuple(PRESETS)))
    _str(meta.get("semantics"), "meta.semantics", tuple(SEMANTICS))
    _int(meta.get("position"), "meta.position", 0, config.max_seq - 1)
    _int(meta.get("tile_rows"), "meta.tile_rows", 1, 1 << 20)
    layers = meta.get("layers")
    if layers is not None:
        a, b = (_list(layers, "meta.layers") + [None, None])[:2]
        if len(layers) != 2:
            raise _Bad(f"meta.layers is {layers!r}; expected [A, B]")
        _int(a, "meta.layers[0]", 0, config.n_layers - 1)
        _int(b, "meta.layers[1]", a + 1, config.n_layers)
    _str(meta.get("target", "spec"), "meta.target", TARGETS)
    _int(meta.get("l2_words"), "meta.l2_words", 1, 1 << 32)
    _int(meta.get("cvo_reach_words"), "meta.cvo_reach_words", 1, 1 << 32)
    _int(meta.get("host_io_bytes", 0), "meta.host_io_bytes")
    _int(meta.get("seed", 0), "meta.seed", 0, 2**32 - 1)
    _int(meta.get("row_align", 1), "meta.row_align", 1, 1 << 16)
    _str(meta.get("read_ahead", "fixed"), "meta.read_ahead", READ_AHEAD_RULES)
    for key in ("profile", "policy"):
        _str(meta.get(key), f"meta.{key}")


def _steps(steps: list, n_words: int) -> None:
    end = 0
    for i, s in enumerate(steps):
        s = _dict(s, f"steps[{i}]")
        kind = _str(s.get("kind"), f"steps[{i}].kind", STEP_KINDS)
        if kind == "batch":
            _int(s.get("start"), f"steps[{i}].start", end, end)  # batches follow one another
            end = _int(s.get("end"), f"steps[{i}].end", end + 1, n_words)
        elif kind == "host":
            _typed(s, HOST_STEP, f"steps[{i}]")
        elif s.get("reason") is not None:
            _str(s.get("reason"), f"steps[{i}].reason")
    if end != n_words:
        raise _Bad(f"steps cover words 0..{end - 1} of {n_words}; every word belongs to a batch")


def _indexed(table: dict, name: str, n_words: int) -> None:
    for k, v in table.items():
        if not (isinstance(k, str) and k.isascii() and k.isdigit() and int(k) < n_words):
            raise _Bad(f"{name} has the key {k!r}; expected a word index 0..{n_words - 1}")
        _dict(v, f"{name}.{k}")


# Types of the nested records, as emit writes them: INT a bounded integer, NUM a finite
# number, a tuple alternatives, a list [T] a list of T, a dict a record with those keys (a
# key ending in "?" may be absent), LOC an L2 operand location ``[word, words, elements,
# dtype(, element offset)]``.
INT, NUM, STR, BOOL, NONE, LOC = "int", "num", "str", "bool", "none", "loc"
STREAM_SHAPES = (
    {"kind": STR, "bytes": INT, "ddr_offset": INT, "row_rule": STR,
     "embed": {"key": STR, "id_rule": STR, "id_limit": INT}},
    {"scalar_slot": INT, "scalar": NUM},
    {"weight": {"key": STR, "layout": STR, "offset": INT, "rows": [INT], "cols": (NONE, [INT]),
                "run_bytes": INT, "runs": INT, "stride": INT, "scale_bytes?": INT,
                "scale_offset?": INT}},
    {"kind": STR, "bytes": INT, "tensor": STR, "host_offset": INT},
    {"kind": STR, "bytes": INT, "ddr_offset": INT, "ddr_bytes": INT,
     "kv": {"kind": STR, "layer": INT, "head": INT, "first_row": INT, "rows": INT,
            "dtype": STR}},
    {"matrix_operand": [STR],
     "attention": {"kind": STR, "kv_head": INT, "head_dim": INT, "keys": [INT],
                   "row_offset": INT, "has_past": BOOL}},
    {"kind": STR, "bytes": INT, "host_tensor": STR},
)  # fmt: skip
TENSOR_REF = {"name": STR, "shape": [INT], "dtype": STR}
DDR = {
    "align": INT, "kv_dtype": STR, "weights_bytes": INT, "kv_bytes": INT, "total_bytes": INT,
    "tensors": {STR: {"offset": INT, "shape": [INT], "storage": STR, "bytes": INT,
                      "scale_offset?": INT}},
    "kv": {STR: {"offset": INT, "rows": INT, "row_bytes": INT, "heads": INT, "head_bytes": INT}},
}  # fmt: skip
HOST_STEP = {
    "kind": STR, "node": STR, "func": STR, "kernel": STR,
    "call": {"params": dict, "flags": dict, "weight": (NONE, {"key": STR, "rows": [INT]}),
             "inputs": [TENSOR_REF], "outputs": [TENSOR_REF]},
    "host_reads": {STR: LOC}, "host_writes": {STR: LOC}, "slot_reads": {STR: [NUM]},
}  # fmt: skip


def _typed(value, t, name: str) -> None:
    """`value` has type `t` (see `STREAM_SHAPES`); `_Bad` naming the first field that differs."""
    if isinstance(t, tuple):
        errors = []
        for alt in t:
            try:
                return _typed(value, alt, name)
            except _Bad as exc:
                errors.append(str(exc))
        raise _Bad(errors[-1])
    if t == INT:
        _int(value, name)
    elif t == NUM:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Bad(f"{name} is {value!r}; expected a number")
        _numbers(value, name)
    elif t == STR:
        _str(value, name)
    elif t == BOOL:
        if not isinstance(value, bool):
            raise _Bad(f"{name} is {value!r}; expected true or false")
    elif t == NONE:
        if value is not None:
            raise _Bad(f"{name} is {value!r}; expected null")
    elif t == LOC:
        loc = _list(value, name)
        if len(loc) not in (4, 5):
            raise _Bad(f"{name} is {value!r}; expected [word, words, elements, dtype(, offset)]")
        for i, part in enumerate(loc[:3] + loc[4:]):
            _int(part, f"{name}[{i if i < 3 else 4}]", 0, 1 << 32)
        _str(loc[3], f"{name}[3]", ("float32", "float16", "bfloat16"))
    elif t is dict:
        _dict(value, name)
        _numbers(value, name)
    elif isinstance(t, list):
        for i, v in enumerate(_list(value, name)):
            _typed(v, t[0], f"{name}[{i}]")
    elif isinstance(t, dict) and STR in t:  # a map of names to one type
        for k, v in _dict(value, name).items():
            _typed(v, t[STR], f"{name}.{k}")
    else:
        record = _dict(value, name)
        if not _fits(record, t):
            raise _Bad(f"{name} has fields {sorted(record)}; expected {sorted(t)}")
        for k, sub in t.items():
            if k.rstrip("?") in record:
                _typed(record[k.rstrip("?")], sub, f"{name}.{k.rstrip('?')}")


def _fits(record: dict, t: dict) -> bool:
    """`record` has every required key of `t` and no key `t` does not name."""
    allowed = {k.rstrip("?") for k in t}
    required = {k for k in t if not k.endswith("?")}
    return required <= set(record) <= allowed


def _stream(value, name: str) -> None:
    record = _dict(value, name)
    shape = next((s for s in STREAM_SHAPES if _fits(record, s)), None)
    if shape is None:
        raise _Bad(f"{name} has fields {sorted(record)}, which no kind of stream has")
    _typed(record, shape, name)


def _operands(value, name: str) -> None:
    _typed(value, {"inputs": {STR: LOC}, "outputs": {STR: LOC}}, name)


def check_links(side: dict, words: list[int], path: Path | str) -> None:
    """Every instruction word has the sidecar records its readers look up: an operand record
    for each node and host-I/O word, a weight or matrix stream for each GEMV, a transfer
    stream for each MEMCPY; kick markers sit exactly on the ``kick`` roles."""
    from pccx_flow.board.isa import CVO_FLAGS, CVO_FUNCS, KICK_MARKER, IsaError, decode

    try:
        for i, (word, role) in enumerate(zip(words, side["roles"], strict=True)):
            if (word == KICK_MARKER) != (role == "kick"):
                raise _Bad(f"roles[{i}] is {role!r} but word {i} is {word:#018x}")
            if role == "kick":
                continue
            key = str(i)
            if role in ("node", "host_io") and key not in side["operands"]:
                raise _Bad(f"operands has no record of word {i} ({role})")
            try:
                ins = decode(word)
            except IsaError:
                continue  # `check_words` names an illegal word
            op, stream = ins.op, side["streams"].get(key, {})
            if op == "CVO" and role == "node":
                func, flags = ins.fields["func"], ins.fields["flags"]
                # EXP(x - max) and SCALE by an L2 value read a second operand (`sfu.py`)
                second = (func == CVO_FUNCS["EXP"] and flags >> CVO_FLAGS["sub_emax"] & 1) or (
                    func == CVO_FUNCS["SCALE"] and "scalar_slot" not in stream
                )
                if len(side["operands"][key]["inputs"]) < 1 + bool(second):
                    raise _Bad(f"operands.{key} lacks an input CVO word {i} reads")
            if op == "GEMV" and role == "node" and not ({"weight", "matrix_operand"} & set(stream)):
                raise _Bad(f"streams has no weight or matrix record of GEMV word {i}")
            if op == "MEMCPY" and role in ("node", "host_io") and "kind" not in stream:
                raise _Bad(f"streams has no transfer record of MEMCPY word {i}")
            _names_linked(side, key, stream)
    except _Bad as exc:
        raise ProgramFileError(f"{path}: sidecar {exc}; re-run emit") from None


def _names_linked(side: dict, key: str, stream: dict) -> None:
    """Tensor names a stream points through are operands of the same word, and the weights
    and KV regions it streams are in the DDR image."""
    ddr = side["ddr"]
    for field in ("weight", "embed"):
        if field in stream and stream[field]["key"] not in ddr["tensors"]:
            raise _Bad(f"streams.{key} streams {stream[field]['key']!r}, not in ddr.tensors")
    if "kv" in stream:
        region = ddr["kv"].get(f"{stream['kv']['layer']}.{stream['kv']['kind']}")
        if region is None:
            raise _Bad(f"streams.{key} streams a KV region that is not in ddr.kv")
        if not 0 <= stream["kv"]["head"] < region["heads"]:
            raise _Bad(f"streams.{key} streams KV head {stream['kv']['head']}, not in its region")
    operands = side["operands"].get(key)
    if operands is None:
        return
    names = list(stream.get("matrix_operand", ()))
    if stream.get("kind") == "host_read":
        names.append(stream.get("tensor"))
    for name in names:
        if name not in operands["inputs"]:
            raise _Bad(f"streams.{key} names {name!r}, which is not an input of word {key}")
    if stream.get("kind") == "host_write" and stream.get("tensor") not in operands["outputs"]:
        raise _Bad(f"streams.{key} names {stream.get('tensor')!r}, not an output of word {key}")


def check_sidecar(side: dict, path: Path | str) -> None:
    """Raise `ProgramFileError` (one line) unless `side` has every field a reader uses, in range."""
    try:
        n = _int(side.get("n_words"), "n_words", 1, 1 << 32)
        _meta(_dict(side.get("meta"), "meta"))
        for key in ("nodes", "roles"):
            if len(_list(side.get(key), key)) != n:
                raise _Bad(f"{key} has {len(side[key])} entries for {n} words")
        for i, (node, role) in enumerate(zip(side["nodes"], side["roles"], strict=True)):
            if node is not None:
                _str(node, f"nodes[{i}]")
            _str(role, f"roles[{i}]", ROLES)
        _steps(_list(side.get("steps"), "steps"), n)
        l2_words = side["meta"]["l2_words"]
        for name, region in _dict(side.get("l2"), "l2").items():
            region = _dict(region, f"l2.{name}")
            addr = _int(region.get("addr"), f"l2.{name}.addr", 0, l2_words - 1)
            _int(region.get("words"), f"l2.{name}.words", 1, l2_words - addr)
            if "parts" in region:
                _typed(region["parts"], [STR], f"l2.{name}.parts")
        for i, slot in enumerate(_list(side.get("slots"), "slots")):  # a log: read, not used
            _dict(slot, f"slots[{i}]")
        _numbers(side["slots"], "slots")
        from pccx_flow.board.program.ddr import KV_DTYPE_BYTES

        _typed(side.get("ddr"), DDR, "ddr")
        _str(side["ddr"]["kv_dtype"], "ddr.kv_dtype", tuple(KV_DTYPE_BYTES))
        for key, t in side["ddr"]["tensors"].items():
            _str(t["storage"], f"ddr.tensors.{key}.storage", ("int4", "float32"))
        for key, r in side["ddr"]["kv"].items():  # a head's rows, one contiguous run
            if r["rows"] * r["row_bytes"] != r["head_bytes"]:
                raise _Bad(f"ddr.kv.{key}: rows x row_bytes is not head_bytes")
        for key, check in (("operands", _operands), ("streams", _stream)):
            _indexed(_dict(side.get(key), key), key, n)
            for k, v in side[key].items():
                check(v, f"{key}.{k}")
        _dict(side.get("summary"), "summary")
    except _Bad as exc:
        raise ProgramFileError(f"{path}: sidecar field {exc}; re-run emit") from None
