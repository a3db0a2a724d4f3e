"""Address assignment of the lowering: which L2 region holds each tensor, and when it frees.

`Addresses` is a part of `pccx_flow.board.program.lower._Lowering` (it shares the lowering's
state; the class that mixes it in sets ``self.g``, ``self.order``, ``self.pos``, ``self.t``,
``self.l2``, ``self.readers``, ``self.done_upto`` and ``self.quarantine`` users). It finds
each tensor's facts (size on the target, last reader, whether the NPU touches it, CVO
window), groups multi-part operands into one contiguous region, aliases accm accumulators
with their outputs, allocates regions (`pccx_flow.board.program.alloc`) and frees them after
their last reader, keeping a region an unfenced instruction may still read in quarantine
until the next fence. A group's parts produced after it is placed get reserved words that
regions dying before then may use; the part claims them when it is produced, after a fence
if a borrower is still in quarantine. Regions that live through much of the step are placed
ahead at the top of L2 the same way (`Addresses._plan_long_lived`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict

from pccx_flow.board.isa import L2_WORD_BYTES, IsaError
from pccx_flow.board.program.alloc import LARGE_FRACTION, AllocationError, words_for
from pccx_flow.board.program.tensors import operand_groups
from pccx_flow.schedule.memory import HOST_OUTPUT_COPIES

# The long-lived regions placed ahead at the top take at most 1/LONG_LIVED_SHARE of L2
# (112 KiB of 1.75 MiB): below that, six 256 KiB KV tiles (a head's each) and the small
# regions that fill from the bottom (~70-110 KiB in E4B's programs) still fit. With the
# top eighth, a short last tile grouped with its new row (a row the KV-sharing layers keep
# reading; such a row is grouped with no tile since, `_tensor_facts`) was planned 130 words
# into the third tile's room, and E4B's programs at position 700 on v002-as-built
# (critical-path, min-min, random) did not lower once those layers read V tile 1 during V
# tile 0's ·V.
LONG_LIVED_SHARE = 16


def promised_note(reserved: list[list[int]]) -> str:
    """Words the free count includes but a region may not take: reserved for regions produced
    later, which it would outlive (`L2Allocator.alloc`)."""
    words = sum(end - start for start, end, _ in reserved)
    return f" ({words} of them promised to regions produced later)" if words else ""


class Addresses:
    """Tensor facts, regions, aliases and their release (see the module docstring)."""

    def _tensor_facts(self) -> None:
        g, pos = self.g, self.pos
        self.info: dict[str, dict] = {}
        self.last_use: dict[str, int] = {}
        self.npu: set[str] = set()
        self.low: set[str] = set()
        self.offsets: dict[str, int] = {}  # tensor -> element offset when not 0 (`_offset`)
        self.clean: set[str] = set()  # REDUCE_SUM results: nothing else in their word
        produced_at: dict[str, int] = {}  # tensor -> issue position of its producer
        for n in self.order:
            d = g.nodes[n]
            for t in d["outputs"]:
                self.info[t["name"]] = t
                self.last_use.setdefault(t["name"], pos[n])
                produced_at.setdefault(t["name"], pos[n])
            for t in d["inputs"]:
                self.info.setdefault(t["name"], t)
                self.last_use[t["name"]] = max(self.last_use.get(t["name"], -1), pos[n])
            if d["op"] == "MEMSET":
                continue  # its value lives in a constant slot, not in L2
            if d["op"] != "HOST":
                # the logits read-back writes host memory only (the scheduler's rule)
                to_host = d["op"] == "MEMCPY" and d.get("func") in HOST_OUTPUT_COPIES
                for t in d["inputs"] + ([] if to_host else d["outputs"]):
                    self.npu.add(t["name"])
                    if d["op"] == "CVO":
                        self.low.add(t["name"])
        # Groups: an operand of several parts is one contiguous region, parts in order.
        self.group_of: dict[str, tuple[str, ...]] = {}
        self.split_operands = 0
        # A new KV row that later layers read too (a KV-sharing source layer's) is grouped
        # with no tile: in its layer's last tile group it would stay, 32 words, in the middle
        # of the tile stack until the step's last layer, and with a tile per KV head (four
        # such rows a layer) every layer after it found a tile's room split there (E4B at
        # 799 on v002-as-built). On its own it is a small long-lived region, planned at the
        # top (`_plan_long_lived`); the operand is split as the sharing layers' are.
        shared_rows = {
            t["name"]
            for n in self.order
            if g.nodes[n].get("kernel") == "kv_write"
            and len({g.nodes[r].get("layer") for r in g.successors(n)}) > 1
            for t in g.nodes[n]["outputs"]
        }
        for n in self.order:
            d = g.nodes[n]
            if d["op"] == "HOST":
                continue
            for operand in operand_groups(d):
                if len(operand) < 2:
                    continue
                key = tuple(operand)
                if shared_rows & set(key) or any(self.group_of.get(p, key) != key for p in key):
                    self.split_operands += 1  # a shared row, or parts in another group
                    continue
                for p in key:
                    self.group_of[p] = key
        # GEMV with accm accumulates into its destination: its accumulator input and its
        # output share one region when nothing else reads the accumulator (a chain of
        # accm GEMVs then lives in the region of its last output).
        n_readers: dict[str, int] = defaultdict(int)
        for n in self.order:
            for t in g.nodes[n]["inputs"]:
                n_readers[t["name"]] += 1
        self.alias: dict[str, str] = {}
        self.accm_copies = 0
        for n in self.order:
            d = g.nodes[n]
            if d["op"] != "GEMV" or not d["flags"].get("accm"):
                continue
            acc = operand_groups(d)[1]
            out = d["outputs"][0]["name"]
            if len(acc) == 1 and n_readers[acc[0]] == 1 and acc[0] not in self.group_of:
                self.alias[acc[0]] = out
            else:
                self.accm_copies += 1
        chain_last: dict[str, int] = {}
        for t in self.last_use:
            r = self.rep(t)
            chain_last[r] = max(chain_last.get(r, -1), self.last_use[t])
        self.chain_last = chain_last
        # when a region is first needed: its earliest producer, through aliases (an accm
        # chain's region is its last output's, first written by the chain's first GEMV)
        needed: dict[str, int] = {}
        for t, at in produced_at.items():
            r = self.rep(t)
            needed[r] = min(needed.get(r, at), at)
        self.needed_at = needed
        for t in list(self.low):
            self.low.add(self.rep(t))
        self.region: dict[str, tuple[int, int]] = {}  # tensor -> (addr, words)
        self.group_region: dict[tuple, int] = {}
        self.promised: dict[str, tuple[int, int]] = {}  # part -> its reserved (addr, words)
        self.writer: dict[str, tuple[int, str]] = {}  # tensor -> (word index, engine)
        self.readers: dict[str, dict[str, int]] = defaultdict(dict)  # tensor -> engine -> word
        self.free_at: dict[int, list] = defaultdict(list)  # position -> regions to free
        # Regions whose tensors are dead but may still be read by an unfenced instruction:
        # they go back to the free list at the next fence (so no overwrite needs its own fence).
        self.quarantine: list[tuple[int, int]] = []
        regions = self._region_words()
        # large regions stack from the top a slot of the largest one apart (`L2Allocator`)
        self.l2.slot_words = max((sum(sizes) for sizes in regions.values()
                                  if sum(sizes) * LARGE_FRACTION >= self.l2.total_words),
                                 default=0)  # fmt: skip
        # under the long-lived regions planned at the top, or at the top when none is
        self.l2.ceiling = self._plan_long_lived(regions)

    def _region_words(self) -> dict[tuple[str, ...], list[int]]:
        """Every L2 region of the step: its parts' tensors -> their words."""
        regions = {}
        for key in {self.group_of.get(t, (t,)) for t in self.npu if self.rep(t) == t}:
            regions[key] = [words_for(self._l2_bytes(p)) for p in key]
        return regions

    def _plan_long_lived(self, regions: dict[tuple[str, ...], list[int]]) -> int:
        """Place ahead, at the top of L2, the regions that live through much of the step
        (the embedding scale, the PLE inputs, the new rows the KV-sharing layers keep
        reading).

        The linear scan places a small region first fit from the bottom, wherever the bottom
        is free at its birth: one born beside a layer's short-lived scores lands mid-L2 and,
        living on, splits the space the KV tiles stack into from the top. These are given
        addresses at the top instead (in order of birth, the highest place where no planned
        region of an overlapping life is), every part reserved until it is produced so that
        regions dying before may use its words (`L2Allocator.alloc`); the tiles stack under
        them. A region lives through "much of the step" when more than a quarter of the
        step's KV tiles come and go during its life; the long-lived parts stay within the
        top 1/`LONG_LIVED_SHARE` of L2. `regions` are the step's (`_region_words`).
        Returns the lowest word planned (L2's size when none is).
        """
        total = self.l2.total_words
        births = sorted(
            min(self.needed_at.get(p, 0) for p in key)
            for key, sizes in regions.items()
            if sum(sizes) * LARGE_FRACTION >= total
        )
        if not births:
            return total
        span = len(births) // 4

        def life(p: str) -> tuple[int, int]:
            return self.needed_at.get(p, 0), self.chain_last.get(p, self.last_use.get(p, 0))

        def long_lived(p: str) -> bool:
            birth, death = life(p)
            return bisect_right(births, death) - bisect_right(births, birth) > span

        floor = total - total // LONG_LIVED_SHARE
        top_ok = self.l2.reach_words >= total  # CVO tensors may lie anywhere
        items = []
        for key, sizes in regions.items():
            if any(p in self.alias for p in key) or not all(p in self.needed_at for p in key):
                continue
            if not any(long_lived(p) for p in key) or (any(p in self.low for p in key)
                                                        and not top_ok):  # fmt: skip
                continue
            if len(key) == 1 and sizes[0] * LARGE_FRACTION >= total:
                continue
            items.append((min(life(p)[0] for p in key), key, sizes))
        planned: list[tuple[int, int, int, int]] = []  # (lo, hi, birth, death) of parts
        for _, key, sizes in sorted(items):
            offsets = [sum(sizes[:i]) for i in range(len(sizes))]
            width = sum(sizes)
            ends = sorted({total, *(lo for lo, *_ in planned)}, reverse=True)
            lowest = min(o for p, o in zip(key, offsets, strict=True) if long_lived(p))
            base = None
            for end in ends:  # from the top down
                if end - width < 0 or end - width + lowest < floor:
                    break  # below the top share here, and at every lower end
                parts = [(end - width + o, end - width + o + w, *life(p))
                         for p, o, w in zip(key, offsets, sizes, strict=True)]  # fmt: skip
                if all(not (lo < qhi and qlo < hi and b <= qd and qb <= d)
                       for lo, hi, b, d in parts for qlo, qhi, qb, qd in planned):  # fmt: skip
                    base = end - width
                    break
            if base is None:
                continue  # no room at the top while it lives: the scan places it
            planned.extend(parts)
            if len(key) > 1:
                self.group_region[key] = base
            for p, (lo, hi, _, death) in zip(key, parts, strict=True):
                self.l2.reserve(lo, hi - lo, self.needed_at[p])
                self.region[p] = (lo, hi - lo)
                self.promised[p] = (lo, hi - lo)
                self.free_at[death].append((lo, hi - lo, (p,)))
        return min((lo for lo, *_ in planned), default=total)

    def _l2_bytes(self, name: str) -> int:
        """Bytes tensor `name` takes in L2 on the target (BF16 activations as built)."""
        t = self.info[name]
        return self.t.tensor_bytes(t["shape"], t["dtype"])

    def _offset(self, name: str) -> int:
        """Element of its first word where tensor `name` starts: 0, except a REDUCE_SUM's
        sum (element 7 as built, `Target.scalar_element`) and element-wise CVO results on
        it, which keep its place (set by `_cvo`)."""
        return self.offsets.get(name, 0)

    def rep(self, name: str) -> str:
        """The tensor whose region `name` lives in (itself unless it is an accm accumulator)."""
        while name in self.alias:
            name = self.alias[name]
        return name

    def _alloc(self, name: str, node: str, index: int) -> None:
        if name in self.promised:
            self._claim(name, node, index)
            return
        if name in self.region or name not in self.npu:
            return
        r = self.rep(name)
        if r != name:
            self._alloc_rep(r, node, index)
            self.region[name] = self.region[r]
            return
        self._alloc_rep(name, node, index)

    def _alloc_rep(self, name: str, node: str, index: int) -> None:
        if name in self.region:
            if name in self.promised:
                self._claim(name, node, index)
            return
        key = self.group_of.get(name)
        if key is not None:
            if key not in self.group_region:
                for p in key[:-1]:
                    if self._l2_bytes(p) % L2_WORD_BYTES:
                        raise IsaError(
                            f"node {node}: part {p} of a multi-part operand does not fill whole "
                            f"L2 words on target {self.t.name}, so the parts are not contiguous"
                        )
                sizes = [words_for(self._l2_bytes(p)) for p in key]
                low = any(p in self.low for p in key)
                # parts produced later are reserved until then (alloc's module docstring)
                now = self.pos[node]
                parts = [(p, sum(sizes[:i]), sizes[i]) for i, p in enumerate(key)]
                due = {p: self.needed_at[p] for p in key if self.needed_at.get(p, now) > now}
                later = [(o, w, due[p]) for p, o, w in parts if p in due]
                dies = max(self.chain_last.get(p, self.last_use[p]) for p in key)
                addr = self._take(sum(sizes), low, name, node, index, dies, later)
                self.group_region[key] = addr
                self.promised.update({p: (addr + o, w) for p, o, w in parts if p in due})
                off = addr
                for p, w in zip(key, sizes, strict=True):
                    self.region[p] = (off, w)
                    # each part's words are freed after that part's own last reader: a KV
                    # tile grouped with the new row dies long before the row, which later
                    # (KV-sharing) layers keep reading
                    self.free_at[self.chain_last.get(p, self.last_use[p])].append((off, w, (p,)))
                    off += w
            return
        w = words_for(self._l2_bytes(name))
        addr = self._take(w, name in self.low, name, node, index, self.chain_last[name])
        self.region[name] = (addr, w)
        self.free_at[self.chain_last[name]].append((addr, w, (name,)))

    def _claim(self, name: str, node: str, index: int) -> None:
        """Take the words reserved for part `name` of a group, now that it is produced."""
        addr, words = self.promised.pop(name)
        due = self.needed_at[name]
        if self.l2.claim(addr, words, due):
            return
        if self.quarantine:
            self._fence("reclaim L2")  # a region that borrowed the words awaits its fence
            if self.l2.claim(addr, words, due):
                return
        raise AllocationError(
            f"does not fit: tensor {name} ({words * 16} B) for instruction {index} "
            f"(node {node}): the words reserved for it are still in use on "
            f"{self.profile.name} (a lowering fault: please report it)"
        )

    def _take(
        self,
        words: int,
        low: bool,
        name: str,
        node: str,
        index: int,
        dies: int | None = None,
        later: list[tuple[int, int, int]] | tuple = (),
    ) -> int:
        l2 = self.l2
        if self.quarantine and not low and words * LARGE_FRACTION >= l2.total_words:
            # A large region stacks from the top: one placed lower only because the tile
            # freed above it still waits for its fence splits the space the next tiles
            # need (a layer's first tiles stream in as the last layer's leave), so fence
            # now when that gives it a higher place.
            here = l2.placement(words, low=low, dies=dies)
            fenced = l2.placement(words, low=low, dies=dies, freed=self.quarantine)
            if fenced is not None and (here is None or fenced > here):
                self._fence("stack a large region")
        addr = l2.alloc(words, low=low, dies=dies, later=later)
        if addr is None and self.quarantine:
            self._fence("reclaim L2")
            addr = l2.alloc(words, low=low, dies=dies, later=later)
        if addr is None:
            where = "CVO window" if low else "L2"
            limit = l2.reach_words if low else l2.total_words
            live = l2.live_below(limit)
            raise AllocationError(
                f"does not fit: tensor {name} ({words * 16} B) for instruction {index} "
                f"(node {node}) needs {words} words of {where} but only "
                f"{l2.largest_hole(limit)} contiguous of {limit} are free"
                f"{promised_note(l2.reserved)}; "
                f"{(live + words) * 16} B would be live there (L2 peak so far "
                f"{l2.peak_words * 16} B) of {limit * 16} B on {self.profile.name} "
                "(the schedule's bytes fit, their placement does not: try another policy, "
                "or a larger L2)",
                node=node,
            )
        return addr

    def _release(self, position: int) -> None:
        for addr, w, names in self.free_at.pop(position, []):
            readers: dict[str, int] = {}
            for p in names:
                for eng, word in self.readers.get(p, {}).items():
                    readers[eng] = max(readers.get(eng, -1), word)
            if any(self._pending(r) for r in readers.values()):
                self.quarantine.append((addr, w))  # an engine may still read it
            else:
                self.l2.release(addr, w)

    def _addr(self, name: str) -> int:
        return self.region[name][0]

    def _where(self, t: str) -> list:
        """``[addr, words, elements, dtype]`` of a tensor in L2."""
        addr, words = self.region[t]
        return self._located([addr, words, math.prod(self.info[t]["shape"])], t)

    def _located(self, head: list, t: str) -> list:
        """`head` + the tensor's L2 dtype, + its element offset when it is not 0."""
        out = [*head, self.t.tensor_dtype(self.info[t]["dtype"])]
        return out + [self._offset(t)] if self._offset(t) else out
