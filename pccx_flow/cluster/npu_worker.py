"""The Dask worker that owns an NPU, and the tasks that run on it.

A device is one host's: a KV260's UIO window and its u-dma-buf buffers can be opened by the
process on that board only, and the NPU runs one program at a time. So one worker per
device owns it, through `NpuWorker` (a worker plugin), and advertises the worker resource
``npu=1``; device tasks ask for that resource and name the worker, so they run there and
one at a time. Start such a worker on a board (or anywhere, with a fake device)::

    dask worker tcp://SCHEDULER:8786 --resources npu=1 --nthreads 1 \\
        --preload pccx_flow.cluster.npu_worker --npu /dev/uio4
    dask worker tcp://127.0.0.1:8786 --resources npu=1 \\
        --preload pccx_flow.cluster.npu_worker --npu fake

The task functions below are plain module functions (a worker imports them by name): a
step is opened (`open_step`: buffers, DDR image, device), run one program step per task
(`run_pieces`), and closed (`close_step`: logits, KV rows, the times of every piece);
`drop_step` releases a step whose chain failed; `dispatch_program` runs a whole program in
one task, for independent work spread over many devices (`pccx_flow.cluster.sweep`).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
import threading
import uuid
from typing import Any

import click
from distributed.diagnostics.plugin import WorkerPlugin

from pccx_flow.board.device.session import DeviceSpec, StepSession
from pccx_flow.cluster import PLUGIN_NAME
from pccx_flow.errors import BoardError


class NpuWorker(WorkerPlugin):
    """Owns one device on a Dask worker: its spec, open step sessions, opened checkpoints.

    `kind` is ``fake`` (a fake device in a temp folder of this worker, removed at teardown)
    or ``uio`` (a board: `device` is ``/dev/uioN`` or None to find it by name)."""

    name = PLUGIN_NAME

    def __init__(
        self,
        kind: str = "fake",
        device: str | None = None,
        buffers: tuple[str, ...] = ("udmabuf0", "udmabuf1"),
        done_rule: str = "cvo",
    ):
        # checked here, on the client, so a wrong option fails before a worker gets it
        DeviceSpec(kind, "unused" if kind == "fake" else None, device, tuple(buffers), done_rule)
        self.kind, self.device, self.done_rule = kind, device, done_rule
        self.buffers = tuple(buffers)
        self.spec: DeviceSpec | None = None
        self.address = ""
        self._folder: str | None = None
        self.sessions: dict[str, StepSession] = {}
        self._checkpoints: dict[str, Any] = {}
        self._lock = threading.Lock()

    def setup(self, worker) -> None:
        folder = None
        if self.kind == "fake":
            self._folder = folder = tempfile.mkdtemp(prefix="pccx-flow-fake-npu-")
        self.spec = DeviceSpec(self.kind, folder, self.device, self.buffers, self.done_rule)
        self.address = worker.address

    def teardown(self, worker) -> None:
        for session in list(self.sessions.values()):
            session.release()
        self.sessions.clear()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def checkpoint(self, path: str, config=None):
        """The checkpoint at `path` on this worker's host, opened once (with `config`, the
        client's, so a checkpoint without a manifest reads as it did there)."""
        from pccx_flow.weights.checkpoint import open_checkpoint

        key = (path, None if config is None else config.name)
        with self._lock:
            if key not in self._checkpoints:
                self._checkpoints[key] = open_checkpoint(path, config)
            return self._checkpoints[key]

    def __getstate__(self) -> dict:  # sent to workers before setup: no lock, no sessions
        return {k: getattr(self, k) for k in ("kind", "device", "buffers", "done_rule")}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)


@click.command()
@click.option("--npu", default="fake", show_default=True,
              help="fake, or the board's UIO device: /dev/uioN, or 'uio' to find it by name")
@click.option("--npu-buffers", default="udmabuf0,udmabuf1", show_default=True,
              help="u-dma-buf devices for the DDR image and the activations (a board)")
@click.option("--npu-done-rule", type=click.Choice(["cvo", "every-batch"]), default="cvo",
              show_default=True, help="fake device: DONE only from batches with a CVO (today's"
              " RTL), or from every batch")  # fmt: skip
async def dask_setup(worker, npu: str, npu_buffers: str, npu_done_rule: str) -> None:
    """The worker preload: this worker owns the device named by ``--npu``."""
    kind = "fake" if npu == "fake" else "uio"
    device = None if npu in ("fake", "uio") else npu
    buffers = tuple(b for b in npu_buffers.split(",") if b)
    await worker.plugin_add(NpuWorker(kind, device, buffers, npu_done_rule), name=PLUGIN_NAME,
                            catch_errors=False)  # fmt: skip


def _plugin() -> NpuWorker:
    from distributed import get_worker

    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        raise BoardError(
            f"worker {worker.address} owns no NPU; start it with --resources npu=1 --preload "
            "pccx_flow.cluster.npu_worker --npu fake|/dev/uioN"
        )
    return plugin


_ON_WORKER = re.compile(r" on worker (\S+?): ")


def _where(plugin: NpuWorker, exc: BaseException) -> BoardError:
    return BoardError(f"{plugin.spec.label} on worker {plugin.address}: {exc}")


def failed_worker(message: str) -> str | None:
    """The worker a device failure came from, read back from `_where`'s message (a
    `BoardError` crosses to the client as its text)."""
    found = _ON_WORKER.search(message)
    return found.group(1) if found else None


def open_step(tag: str, program, weights_path: str, k_past, v_past, ctx, profile,
              timeout: float | None = None) -> dict:  # fmt: skip
    """Open a step session for `program` on this worker's device, under the name `tag`."""
    plugin = _plugin()
    try:
        weights = plugin.checkpoint(weights_path, ctx.config)
        session = StepSession(plugin.spec, program, weights, k_past, v_past, ctx, profile, timeout)
    except BoardError as exc:
        raise _where(plugin, exc) from None
    with plugin._lock:
        plugin.sessions[tag] = session
    return {"worker": plugin.address, "device": plugin.spec.label, "steps": len(session.steps)}


def run_pieces(tag: str, indices: list[int], _after: Any = None) -> list[dict]:
    """Run program steps `indices` (in order) of the open step `tag`; `_after` is the task
    before, so the chain keeps the program's order."""
    plugin = _plugin()
    try:
        session = plugin.sessions[tag]
        return [session.run(i) for i in indices]
    except BoardError as exc:
        raise _where(plugin, exc) from None


def close_step(tag: str, _after: Any = None) -> dict:
    """The step's logits, KV rows and the times of its pieces; the session is released."""
    plugin = _plugin()
    with plugin._lock:
        session = plugin.sessions.pop(tag)
    result = session.close()
    return {
        "logits": result.logits,
        "kv_rows": result.kv_rows,
        "records": session.records,
        "report": dataclasses.asdict(result.report),
        "worker": plugin.address,
        "device": plugin.spec.label,
    }


def drop_step(tag: str, dask_worker=None) -> bool:
    """Release the step `tag` if it is open here (after a piece of its chain failed); run
    with `Client.run` on the step's worker."""
    plugin = (dask_worker.plugins if dask_worker is not None else {}).get(PLUGIN_NAME)
    return plugin is not None and _release(plugin, tag)


def _release(plugin: NpuWorker, tag: str) -> bool:
    with plugin._lock:
        session = plugin.sessions.pop(tag, None)
    if session is not None:
        session.release()
    return session is not None


def dispatch_program(program, weights_path: str, tokens: list[int], profile,
                     timeout: float | None = None, config=None) -> dict:  # fmt: skip
    """Run a whole program on this worker's device after a reference prefix of `tokens`:
    the logits, KV rows, the device's times and where it ran."""
    from pccx_flow.board.emulator.check import reference_prefix
    from pccx_flow.execute.runtime import StepContext

    plugin = _plugin()
    weights = plugin.checkpoint(weights_path, config)
    k_past, v_past, _ = reference_prefix(program, weights, tokens)
    meta = program.meta
    ctx = StepContext(weights.config, meta["semantics"], meta["position"], tokens[-1], "float32")
    tag = f"whole-{uuid.uuid4().hex}"
    open_step(tag, program, weights_path, k_past, v_past, ctx, profile, timeout)
    try:
        run_pieces(tag, list(range(len(plugin.sessions[tag].steps))))
    except BaseException:
        _release(plugin, tag)
        raise
    return close_step(tag)
