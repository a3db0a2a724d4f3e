"""One node's instruction words: GEMV, CVO, MEMCPY and MEMSET as the target reads them.

`Words` is a part of `pccx_flow.board.program.lower._Lowering` (it shares the lowering's
state). Each non-host node becomes one word (a CVO longer than the target's cap several),
with its sidecar extras: the weight or KV stream the host programs into the DataMover, the
operands a word has no field for, a SCALE constant's slot. Addresses, lengths and slot
pointers follow the target (`pccx_flow.board.isa.target`).
"""

from __future__ import annotations

import math

from pccx_flow.board.isa import (
    FORMATS,
    L2_WORD_BYTES,
    IsaError,
    encode,
    flag_bits,
    fmap_shape_fields,
)
from pccx_flow.board.program.ddr import weight_stream
from pccx_flow.board.program.tensors import DTYPE_BYTES, TO_L2_COPIES, f32_halves, operand_groups


class Words:
    """The instruction words of a node (see the module docstring)."""

    def _instruction(self, n: str, d: dict, op: str) -> tuple[list[int], dict]:
        """The words of one node (several for a CVO split at the target's cap) and its
        sidecar extras."""
        outs = d["outputs"]
        if op in ("GEMV", "GEMM"):
            word, extra = self._gemv(n, d, op)
            return [word], extra
        if op == "CVO":
            return self._cvo(n, d)
        if op == "MEMSET":
            hi, lo = f32_halves(d["params"].get("value", 0.0))
            slot, new, evicted = self.slots.lookup(("fmap_shape", hi, lo, 0), len(self.prog.words))
            if evicted is not None and self._pending(self.slot_users.get(slot)):
                self._fence("slot eviction")
            self.prog.slots.append(
                {"word": len(self.prog.words), "slot": slot, "value": [hi, lo, 0],
                 "cache": "fmap_shape", "meaning": f"{d['params'].get('what')} (float32 bits)"}
            )  # fmt: skip
            for t in outs:
                self.slot_tensor[t["name"]] = slot
                self.slot_value[t["name"]] = d["params"].get("value", 0.0)
            self.slot_users[slot] = len(self.prog.words)
            return [encode("MEMSET", dest_cache="fmap_shape", slot=slot, a=hi, b=lo)], {}
        if op == "MEMCPY":
            word, extra = self._memcpy(n, d)
            return [word], extra
        raise IsaError(f"node {n}: op {op} has no instruction")

    def _cvo(self, n: str, d: dict) -> tuple[list[int], dict]:
        """A CVO node's words: addresses in the target's unit, lengths and pieces by its rules.

        As built (`pccx_flow.board.isa.target`): element addresses, whole-word lengths, a scalar
        in element 7 (so a CVO over it covers its word), at most 2,048 results per word."""
        ins, outs = d["inputs"], d["outputs"]
        first, func = ins[0]["name"], d["func"]
        span = d["params"].get("span")
        whole = sum(math.prod(self.info[t]["shape"]) for t in operand_groups(d)[0])
        a, b = span if span else (0, whole)
        per = L2_WORD_BYTES // DTYPE_BYTES[self.t.tensor_dtype(self.info[first]["dtype"])]
        if a % per:
            raise IsaError(f"node {n}: CVO span start {a} is not on a 128-bit word")
        offset = 0 if span else self._offset(first)
        if func == "REDUCE_SUM" and offset and first not in self.clean:
            raise IsaError(
                f"node {n}: REDUCE_SUM over {first}, a CVO result in element {offset} of a word"
                " whose other elements are not zero; the bridge streams from element 0"
            )
        src, dst = self._addr(first) + a // per, self._addr(outs[0]["name"])
        flags = flag_bits(FORMATS["CVO"].field("flags"), d["flags"])
        words = [
            encode(
                "CVO",
                func=func,
                src=self.t.cvo_field(src + start // per),
                dst=self.t.cvo_field(dst + start // per),
                length=length,
                flags=flags,
            )
            for start, length in self.t.cvo_pieces(func, b - a, offset)
        ]
        # where the result lies: a sum in element 7 of an otherwise zero word (the bridge's
        # serialiser starts empty), an element-wise result where its input was
        out = outs[0]["name"]
        if func == "REDUCE_SUM" and self.t.scalar_element:
            self.offsets[out] = self.t.scalar_element
            self.clean.add(out)
        elif offset and b - a == 1:
            self.offsets[out] = offset
        extra = {}
        if d["kernel"] == "cvo_scale_const":
            hi, lo = f32_halves(d["params"]["scale"])
            slot = self._slot("fmap_shape", hi, lo, 0, n, "SCALE constant (float32 bits)")
            # the slot holds float32 bits (the hardware's scalar); the exact value is kept
            # beside it for a float64 check of the program's math
            extra = {"scalar_slot": slot, "scalar": d["params"]["scale"], "_slots": [slot]}
        return words, extra

    def _gemv(self, n: str, d: dict, op: str) -> tuple[int, dict]:
        groups = operand_groups(d)
        x = groups[0]
        out = d["outputs"][0]
        for t in x:
            if self._offset(t):
                raise IsaError(
                    f"node {n}: GEMV input {t} sits at element {self._offset(t)} of its word "
                    f"(a REDUCE_SUM result on target {self.t.name}); a GEMV loads from element 0"
                )
        rows = math.prod(out["shape"])
        cols = sum(math.prod(self.info[p]["shape"]) for p in x)
        extra: dict = {}
        if d["weight"]:
            w = d["weight"]
            cols = (w["cols"][1] - w["cols"][0]) if "cols" in w else cols
            layout = d["params"].get("layout", "out_in")
            extra["weight"] = weight_stream(self.ddr, w, layout)
            extra["weight"].update(rows=w["rows"], cols=w.get("cols"), layout=layout)
        else:
            # attention: the "matrix" is the KV rows in L2 (second operand)
            kv = [t for grp in groups[1:] for t in grp] or x
            extra["matrix_operand"] = list(kv)
            p = d["params"]
            extra["attention"] = {
                k: p[k] for k in ("keys", "kv_head", "head_dim", "has_past") if k in p
            }
            extra["attention"]["row_offset"] = p.get("row_offset", 0)  # its tile's first key
            extra["attention"]["kind"] = d["kernel"]
        tile = ("weight_shape", rows, cols & 0xFFFF, cols >> 16, n, "GEMV tile shape")
        if self.t.gemv_length_ptr == "shape_ptr":
            # as built: the L2 load takes its length from the fmap-shape slot at shape_ptr
            # (X*Y*Z BF16 elements); size_ptr goes to the engine (`rtl_rules.RULES`)
            shape = self._slot(
                "fmap_shape", *fmap_shape_fields(cols), n, "GEMV input length (X*Y*Z elements)"
            )
            size = self._slot(*tile)
        else:
            size = self._slot("fmap_shape", cols & 0xFFFF, cols >> 16, 1, n, "GEMV input length")
            shape = self._slot(*tile)
        extra["_slots"] = [size, shape]
        flags = flag_bits(FORMATS[op].field("flags"), d["flags"])
        word = encode(
            op,
            dest=self._addr(out["name"]),
            src=self._addr(x[0]),
            flags=flags,
            size_ptr=size,
            shape_ptr=shape,
            parallel_lane=1,
        )
        return word, extra

    def _memcpy(self, n: str, d: dict) -> tuple[int, dict]:
        kind = d["func"]
        out = d["outputs"][0]
        to_npu = kind in TO_L2_COPIES
        local = out["name"] if to_npu else d["inputs"][0]["name"]
        parts = self.group_of.get(local, (local,))
        local_words = sum(self.region[p][1] for p in parts)
        nbytes = self._l2_bytes(out["name"]) if to_npu else sum(self._l2_bytes(q) for q in parts)
        slot = self._length_slot(local_words, n)
        word = encode(
            "MEMCPY",
            from_device="host" if to_npu else "npu",
            to_device="npu" if to_npu else "host",
            dest=self._addr(local) if to_npu else 0,
            src=0 if to_npu else self._addr(local),
            aux=0,
            shape_ptr=slot,
        )
        stream: dict = {"kind": kind, "bytes": nbytes, "_slots": [slot]}
        if kind == "logits_readback":
            stream["host_tensor"] = out["name"]  # where the host keeps this run of logits
        p = d["params"]
        if kind in ("kv_read", "kv_write"):
            region = self.ddr["kv"][f"{p['cache_layer']}.{p['kind']}"]
            row, head = region["row_bytes"], p["kv_head"]
            first = p["positions"][0] if kind == "kv_read" else p["position"]
            stream["ddr_offset"] = region["offset"] + head * region["head_bytes"] + first * row
            cache_dtype = self.kv_dtype
            stream["kv"] = {
                "layer": p["cache_layer"],
                "kind": p["kind"],
                "head": head,
                "first_row": first,
                "dtype": cache_dtype,
            }
            stream["kv"]["rows"] = p["positions"][1] - p["positions"][0] if kind == "kv_read" else 1
            stream["ddr_bytes"] = math.prod(out["shape"]) * DTYPE_BYTES[cache_dtype]
        elif kind == "embed_fetch":
            region = self.ddr["tensors"][d["weight"]["key"]]
            stream["ddr_offset"] = region["offset"]
            stream["embed"] = {
                "key": d["weight"]["key"],
                "id_rule": p.get("id_rule", "none"),
                "id_limit": p.get("id_limit", 0),
            }
            stream["row_rule"] = "the host points this stream at row token_id (after id_rule)"
        return word, stream
