"""The fake device's model of the NPU: the emulator, fed by the DataMover commands it is given.

On each kick `pccx_flow.board.device.fake_device.FakeDevice` hands the batch's words to this model
(`program_model`), which runs each word with the emulator's per-word code
(`pccx_flow.board.emulator.emulate.Emulator.word`) on an L2 of its own. What the emulator reads from
DDR it reads from the DDR image the host loaded into its buffers (`ImageWeights`,
`ImageKV`), and before each word the model takes the word's commands from the DataMover pages
the host programmed and checks them: a weight command must point at bytes equal to the tile
in the image, a KV or embedding command at the right rows; the token id is read off the
embedding command's address. Results leave by the ``acp_out`` commands: the new KV row is
written to the image's cache, each run of logits and each tensor a host step reads to the
activation buffer; a host step's result enters L2 from where its ``acp_in`` command points.
A command that is missing or wrong raises, which the fake device shows as its ERROR bit.

The host steps themselves are not the model's: the host runs them on its own memory
(`pccx_flow.board.device.host_side.HostSide`), as on a board. A batch the host adds between the
program's (an L2 read-back, `pccx_flow.board.device.readback`) is run when its words are ones the
host may add (`_foreign`). `corrupt_at` injects a wrong value for tests.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pccx_flow.board.device import regmap
from pccx_flow.board.device.cma import Buffer, resolve
from pccx_flow.board.device.ddr_image import ImageKV, ImageWeights, kv_views
from pccx_flow.board.device.fake_device import OnBatch
from pccx_flow.board.device.transfers import word_transfers
from pccx_flow.board.emulator.emulate import UNITS_PER_WORD, Emulator, batch_rule_violation
from pccx_flow.board.emulator.l2 import STORED
from pccx_flow.board.isa import L2_WORD_BYTES, IsaError, decode, memcpy_length_words, wire
from pccx_flow.board.isa.target import BF16
from pccx_flow.board.program.lower import DONE_SCRATCH
from pccx_flow.errors import BoardError


def program_model(program, run_word: Callable[[int, int], None],
                  foreign: Callable[[list[int]], bool] | None = None) -> OnBatch:  # fmt: skip
    """An `on_batch` that runs each received word as ``run_word(index, word)``.

    A word model (an emulator's per-word step) needs each word's index in the program, which
    the device never sees; batches reach the device in program order, so the k-th kick is the
    program's k-th batch. A received word that differs from the program's, or a batch the
    program does not have, raises, which the fake device reports as its ERROR bit, unless
    `foreign` takes it (a batch the host adds between the program's, such as an L2 read-back:
    `foreign(words)` runs it and returns True). `program` is a
    `pccx_flow.board.device.dispatch.DispatchProgram`.
    """
    spans = [(s.get("start"), s["end"]) for s in program.steps if s.get("kind") == "batch"]
    prev = 0
    for k, (start, end) in enumerate(spans):  # start defaults to the previous batch's end
        spans[k] = (prev if start is None else start, end)
        prev = end
    done = [0]  # the program's batches received so far

    def on_batch(words: list[int]) -> None:
        k = done[0]
        want = list(program.words[spans[k][0] : spans[k][1] - 1]) if k < len(spans) else None
        if words != want and foreign is not None and foreign(words):
            return
        if k >= len(spans):
            raise BoardError(f"batch {k} received, the program has {len(spans)}")
        done[0] += 1
        start, end = spans[k]
        if words != want:
            pairs = zip(words, want, strict=False)
            first = next(
                (j for j, (a, b) in enumerate(pairs) if a != b), min(len(words), len(want))
            )
            raise BoardError(
                f"batch {k}: word {start + first} differs from the program's"
                f" ({len(words)} words received, {len(want)} expected)"
            )
        for j, word in enumerate(words):
            run_word(start + j, word)

    return on_batch


class DeviceModel:
    """The NPU behind a fake device (see the module docstring)."""

    def __init__(self, program, buffers: dict[str, Buffer], config, numerics: str = "spec"):
        self.program = program
        self.buffers = buffers
        image = buffers["image"]
        self.layout = program.ddr
        img = image.view(0, image.size)
        self.image_weights = ImageWeights(self.layout, img, config)
        k, v = kv_views(self.layout, img, config.n_kv_cache_layers, config.kv_dim)
        self.em = Emulator(program, self.image_weights, ImageKV(k), ImageKV(v), 0, numerics)
        self.device = None  # the FakeDevice, set by `attach`
        self.corrupt_at: int | None = None
        self.corrupted = False  # set once `corrupt_at` was applied (a word that wrote L2)
        self.on_batch = program_model(program, self._run_word, self._foreign)
        self.foreign_batches = 0
        self._taken: dict[str, int] = {}

    def attach(self, device) -> None:
        """Connect to the fake device whose DataMover pages this model reads."""
        self.device = device
        device.on_batch = self._on_batch

    def _on_batch(self, words: list[int]) -> None:
        self._taken = {}
        self.em.done_upto = self.em.index + 1  # dispatch waited for DONE before this batch
        bad = batch_rule_violation(self.em.t, words)
        if bad is not None:
            raise BoardError(
                f"batch word {bad}: a CVO that is not the batch's last word; the as-built "
                "bridge drops a CVO that arrives while it is busy"
            )
        self.on_batch(words)

    def _take(self, page: str, index: int) -> int:
        """The next command the host pushed on `page` in this batch."""
        commands = self.device.pages[page].commands
        k = self._taken.get(page, 0)
        if k >= len(commands):
            raise BoardError(f"word {index}: no DataMover command on page {page} for it")
        self._taken[page] = k + 1
        return commands[k]

    def _run_word(self, index: int, word: int) -> None:
        em = self.em
        em.index, em.node = index, self.program.nodes[index] or ""
        outgoing = []
        self._pop_after: list[str] = []
        image = self.buffers["image"]
        all_buffers = list(self.buffers.values())
        # what the word needs (the device knows the tile from the sidecar, as a real
        # DataMover knows it from its command); token 0 is a placeholder for the embedding row
        wants, _ = word_transfers(self.program, index, 0, 0)
        row = -1
        for want in wants:
            cmd = regmap.decode_command(self._take(want.page, index))
            if cmd.tag != index & 0xF:
                raise BoardError(f"word {index}: command tag {cmd.tag} on {want.page}")
            if want.what in ("kv_write", "logits", "host_read"):
                outgoing.append((want.what, cmd))
                continue
            if want.what == "host_write":  # a host step's result: what the host put there
                self._host_write(index, want, cmd, all_buffers)
                continue
            got = bytes(resolve(all_buffers, cmd.addr, cmd.length_bytes))
            if want.what == "weights" and want.gather is not None:
                off, run, runs, stride = want.gather
                src = image.view(off, (runs - 1) * stride + run)
                expect = b"".join(bytes(src[r * stride : r * stride + run]) for r in range(runs))
            elif want.what in ("embed", "embed_scale"):
                # the row is whichever the host pointed the command at: one whole row of the
                # table (and, for INT4, that same row's scale)
                base = self.layout["tensors"][self.program.streams[index]["embed"]["key"]]
                n_rows = base["shape"][0]
                if want.what == "embed":
                    row, rest = divmod(cmd.addr - image.phys - base["offset"], want.nbytes)
                    if rest or not 0 <= row < n_rows:
                        row = -1
                    em.token_id = row
                    want_addr = image.phys + base["offset"] + row * want.nbytes
                else:
                    want_addr = image.phys + base["scale_offset"] + 4 * em.token_id
                ok = row >= 0 and cmd.addr == want_addr and cmd.length_bytes == want.nbytes
                expect = got if ok else None
            else:
                expect = bytes(image.view(want.offset, want.nbytes))
            if got != expect:
                raise BoardError(
                    f"word {index} ({em.node}): {want.what} command on {want.page} at"
                    f" {cmd.addr:#x}+{cmd.length_bytes:#x} points at the wrong bytes"
                )
        em.word(index, word)
        for name in self._pop_after:  # the value is in L2 now; the device keeps no host copy
            em.b.host.pop(name, None)
        for what, cmd in outgoing:
            dst = resolve(all_buffers, cmd.addr, cmd.length_bytes)
            if what == "logits":  # the run leaves the device: into the host's buffer only
                run = em.b.host.pop(self.program.streams[index]["host_tensor"])
                data = wire.pack(run, self.program.meta.get("l2_dtype", "float32"))
            elif what == "host_read":  # whole L2 words leave; around the tensor they are zero
                name = self.program.streams[index]["tensor"]
                _, _, _, dtype, first = wire.entry_fields(
                    self.program.operands[index]["inputs"][name]
                )
                value = wire.pack(em.b.host.pop(name), dtype, offset=first)
                data = value + bytes(max(0, cmd.length_bytes - len(value)))
            else:
                kv = self.program.streams[index]["kv"]
                row = em.kv_rows[kv["layer"]][kv["kind"]][kv["head"]]
                data = wire.pack(row, kv["dtype"])
            if len(data) != cmd.length_bytes:
                raise BoardError(
                    f"word {index}: {what} is {len(data)} bytes, the command moves"
                    f" {cmd.length_bytes}"
                )
            dst[:] = data
        if self.corrupt_at == index:
            self._corrupt(index, word)

    def _foreign(self, words: list[int]) -> bool:
        """Run a batch that is not the program's, if it is one the host may add: MEMSETs, a
        MEMCPY L2->host and a DONE marker (`pccx_flow.board.device.readback`). The copy's bytes go
        where the ``acp_out`` command points, laid out as L2 holds them."""
        try:
            ins = [decode(w) for w in words]
        except IsaError:
            return False
        scratch = self.program.l2.get(DONE_SCRATCH, {}).get("addr")
        scratch = None if scratch is None else self.em.t.cvo_field(scratch)
        for x in ins:
            f = x.fields
            if x.op == "MEMCPY" and (f["from_device"], f["to_device"]) != (0, 1):
                return False
            if x.op == "CVO" and (f["src"], f["dst"], f["length"]) != (scratch, scratch, 1):
                return False
            if x.op not in ("MEMSET", "MEMCPY", "CVO"):
                return False
        if not any(x.op == "MEMCPY" for x in ins):
            return False
        for x in ins:
            f = x.fields
            if x.op == "MEMSET":
                self.em.memset(f)
            elif x.op == "MEMCPY":
                _, a, b, c = self.em.b.slots.get(f["shape_ptr"], (0, 0, 0, 0))
                n = memcpy_length_words(a, b, c)
                cmd = regmap.decode_command(self._take("acp_out", -1))
                if cmd.length_bytes != n * L2_WORD_BYTES:
                    raise BoardError(
                        f"read-back MEMCPY moves {n} L2 words, its acp_out command"
                        f" {cmd.length_bytes} bytes"
                    )
                dst = resolve(list(self.buffers.values()), cmd.addr, cmd.length_bytes)
                dst[:] = self.em.raw_words(f["src"], n)
        self.foreign_batches += 1
        return True

    def _host_write(self, index: int, want, cmd, all_buffers: list[Buffer]) -> None:
        """Take a host step's result from the bytes the ``acp_in`` command points at."""
        act = self.buffers["act"]
        if cmd.addr != act.phys + want.offset or cmd.length_bytes != want.nbytes:
            raise BoardError(
                f"word {index} ({self.em.node}): host_write command on {want.page} at"
                f" {cmd.addr:#x}+{cmd.length_bytes:#x} points at the wrong bytes"
            )
        name = self.program.streams[index]["tensor"]
        _, _, n, dtype, first = wire.entry_fields(self.program.operands[index]["outputs"][name])
        raw = resolve(all_buffers, cmd.addr, wire.size_of(n, dtype, first))
        values = wire.unpack(bytes(raw), n, dtype, offset=first)
        self.em.b.host[name] = values.astype(np.float16 if dtype == "float16" else self.em.F)
        self._pop_after.append(name)

    def _corrupt(self, index: int, word: int) -> None:
        """Step the first value word `index` wrote to the next value of the type L2 stores it
        in (float32, float16 or BF16: one unit in the last place; a test fault)."""
        for addr, _dtype, _ in (self.em.record or {}).get(index, []):
            u = addr * UNITS_PER_WORD
            v = self.em.b.l2[u : u + 1]
            stored = int(self.em.b.stored[u])
            if stored == STORED[BF16]:  # BF16 is the top half of a float32
                bits = int(np.float32(v[0]).view(np.uint32)) >> 16
                v[...] = np.array([(bits + 1) << 16], dtype=np.uint32).view(np.float32)[0]
            else:
                t = np.float16 if stored == STORED["float16"] else np.float32
                v[...] = np.nextafter(v.astype(t), t(np.inf))
            self.corrupted = True
            return

    def read_l2(self, addr: int, dtype: str, nbytes: int) -> bytes:
        """`nbytes` of L2 from word address `addr` (the fake device's debug port; `dtype` is
        unused: the bytes are laid out as they were written)."""
        return self.em.raw_words(addr, -(-nbytes // L2_WORD_BYTES))[:nbytes]
