"""Read a pccx split-`.npy` checkpoint lazily, one memory-mapped file per tensor.

Layout (``gemma3n-semantics.md``, "Checkpoint tensor names"): a directory with one file per
tensor, ``model.language_model.<key>.npy``. An INT4 tensor is packed ``uint8 [rows, cols/2]``
plus ``<full key>.scale.npy`` (float32, one scale per row); a float32 tensor is stored in its
logical shape. ``manifest.json`` is written last, so its presence means the directory is
complete. Like the pccx runtime, the reader takes either storage form for any 2-D tensor, a
minimal manifest ``{"mode": "int4"}``, or no manifest at all (pccx's runtime treats it as
optional). Without a config in the manifest, the config comes from the caller (a preset, or
some fields from a ``--config`` JSON file) or is inferred from the tensor shapes
(`pccx_flow.weights.infer`). A folder without a manifest still has to look finished: no
temporary files of a writer in it, and every tensor file as long as its header says.
Reading never writes anything into the folder.

Nothing is read until it is used, and nothing is loaded whole: E4B is ~3.6 GB and a GEMV tile
or an embedding row only needs a few rows. A `Checkpoint` pickles as its path and config only,
so the Dask executor can ship it to worker processes, which reopen the files themselves.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from pccx_flow import files
from pccx_flow.errors import (
    ConfigError,
    InputError,
    MissingTensorError,
    TensorFormatError,
    WeightsError,
)
from pccx_flow.model.config import PRESETS, Gemma3nConfig
from pccx_flow.model.tensors import KEY_PREFIX, TensorSpec, tensor_manifest
from pccx_flow.weights.infer import infer_config, with_overrides
from pccx_flow.weights.int4 import dequantize_rows
from pccx_flow.weights.npy import NpyHeader, open_readonly, read_header

MANIFEST_NAME = "manifest.json"
FORMAT_NAME = "pccx-split-npy"
FORMAT_VERSION = 1
MODES = ("int4", "float32")
# Names a writer gives files it has not finished; a folder holding one is being written.
PARTIAL_SUFFIXES = (".tmp", ".part", ".partial", ".incomplete")
MAX_JSON_BYTES = 1 << 20  # a config or manifest is a few kB; refuse anything past 1 MiB

# Config fields that decide tensor shapes; a caller's config must agree with the manifest's.
SHAPE_FIELDS = (
    "hidden",
    "ffn",
    "n_layers",
    "n_q_heads",
    "n_kv_heads",
    "head_dim",
    "vocab",
    "vocab_per_layer",
    "ple_dim",
    "altup_streams",
    "laurel_rank",
)


def tensor_path(directory: Path | str, key: str) -> Path:
    """File of a tensor's data: ``<dir>/model.language_model.<key>.npy``."""
    return Path(directory) / f"{KEY_PREFIX}{key}.npy"


def scale_path(directory: Path | str, key: str) -> Path:
    """File of an INT4 tensor's per-row scales: ``<dir>/model.language_model.<key>.scale.npy``."""
    return Path(directory) / f"{KEY_PREFIX}{key}.scale.npy"


def short_key(key: str) -> str:
    """Accept a short key or a full ``model.language_model.`` key; return the short key."""
    return key[len(KEY_PREFIX) :] if key.startswith(KEY_PREFIX) else key


def check_config_fields(data: object, where: str) -> dict:
    """Check a (possibly partial) config object: known field names and plain-number values."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the config must be a JSON object of config fields")
    types = {f.name: f.type for f in fields(Gemma3nConfig)}
    unknown = sorted(set(data) - set(types))
    if unknown:
        shown = ", ".join(u if u.isidentifier() else repr(u)[:40] for u in unknown)
        raise ConfigError(f"{where}: unknown config fields {shown}; known: {', '.join(types)}")
    for k, v in data.items():
        want = str(types[k])
        ok = (
            isinstance(v, str)
            if want == "str"
            else isinstance(v, int) and not isinstance(v, bool)
            if want == "int"
            else isinstance(v, int | float) and not isinstance(v, bool)
        )
        if not ok:
            raise ConfigError(f"{where}: field {k} must be {'a ' + want}, got {v!r}")
    return dict(data)


def config_from_dict(data: dict, where: str) -> Gemma3nConfig:
    """Build a config from a manifest's ``config`` object, with a one-line error if it is bad."""
    try:
        data = check_config_fields(data, where)
    except ConfigError as exc:
        raise WeightsError(str(exc)) from None
    try:
        return Gemma3nConfig(**data)
    except TypeError as exc:
        raise WeightsError(f"{where}: incomplete config ({exc})") from None


def read_small_json(path: Path, what: str) -> object:
    """Parse a small JSON file; refuse FIFOs, devices and anything past `MAX_JSON_BYTES`.

    The file is opened without blocking and checked on the open descriptor, so a FIFO or a
    symlink to ``/dev/zero`` is refused at once instead of hanging or filling memory.
    """
    try:
        f = files.open_regular(path)
    except files.NotRegularFile:
        raise WeightsError(f"{what} {path} is not a regular file; give a JSON file") from None
    except OSError as exc:
        raise WeightsError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise WeightsError(f"{what} {path} is {size} bytes; a JSON config is a few kB")
        try:
            data = f.read(MAX_JSON_BYTES + 1)
        except OSError as exc:
            raise WeightsError(f"{what} {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        text = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise WeightsError(f"{what} {path}: not valid JSON ({text})") from None


def load_config_file(path: Path | str) -> dict:
    """The fields of a ``--config`` JSON file: the manifest's ``config`` fields, any subset.

    Fields it leaves out come from the checkpoint (its manifest, or its tensor shapes).
    """
    path = Path(path)
    data = read_small_json(path, "--config")
    return check_config_fields(data, f"--config {path}")


def check_same_shapes(given: Gemma3nConfig, stored: Gemma3nConfig, where: str) -> None:
    """Raise `ConfigError` if two configs disagree on anything that changes a tensor shape."""
    diff = [f for f in SHAPE_FIELDS if getattr(given, f) != getattr(stored, f)]
    if diff:
        f = diff[0]
        raise ConfigError(
            f"{where} was written for config {stored.name!r} ({f}={getattr(stored, f)}) but config "
            f"{given.name!r} has {f}={getattr(given, f)}; pass the matching --preset or none"
        )


def _looks_unfinished(directory: Path) -> str | None:
    """The name of a writer's temporary file in `directory`, if there is one."""
    for p in directory.iterdir():
        if p.name.endswith(PARTIAL_SUFFIXES):
            return p.name
    return None


def read_manifest(directory: Path) -> dict | None:
    """Load and sanity-check ``manifest.json``; None for a finished folder without one.

    Raises `WeightsError` if the folder is missing, holds no tensor files, is still being
    written (a temporary file of a writer is in it), or the manifest is malformed.
    """
    path = directory / MANIFEST_NAME
    if not directory.is_dir():
        raise WeightsError(f"checkpoint {directory} is not a directory; give a checkpoint folder")
    if not path.exists():
        partial = _looks_unfinished(directory)
        if partial is not None:
            raise WeightsError(
                f"checkpoint {directory} is still being written or was left half-written "
                f"({partial} is a temporary file and there is no {MANIFEST_NAME}); wait for "
                "the writer, or rewrite the checkpoint"
            )
        if not any(directory.glob(f"{KEY_PREFIX}*.npy")):
            raise WeightsError(
                f"checkpoint {directory} has no {MANIFEST_NAME} and no {KEY_PREFIX}*.npy "
                "tensor files: it is not a checkpoint; write one with `pccx-flow weights synth` "
                "or `weights import`"
            )
        return None
    manifest = read_small_json(path, "manifest")
    if not isinstance(manifest, dict):
        raise WeightsError(f'{path}: must be a JSON object like {{"mode": "int4"}}')
    mode = manifest.get("mode")
    if mode not in MODES:
        raise WeightsError(f"{path}: mode {mode!r} unknown; expected one of {', '.join(MODES)}")
    fmt = manifest.get("format", FORMAT_NAME)
    if fmt != FORMAT_NAME:
        raise WeightsError(f"{path}: format {fmt!r} unknown; expected {FORMAT_NAME!r}")
    return manifest


ConfigChoice = Gemma3nConfig | Mapping | None


def _stored_config(directory: Path, manifest: dict | None) -> Gemma3nConfig | None:
    if manifest is None:
        return None
    if "config" in manifest:
        return config_from_dict(manifest["config"], f"{directory / MANIFEST_NAME}")
    if isinstance(manifest.get("preset"), str) and manifest["preset"] in PRESETS:
        return PRESETS[manifest["preset"]]
    return None


def _check_against_shapes(directory: Path, config: Gemma3nConfig) -> None:
    """Refuse a given config that the tensor shapes contradict, naming the first field."""
    try:
        seen = infer_config(directory).config
    except WeightsError:
        return  # shapes unreadable: opening the tensors reports the damaged file itself
    diff = [f for f in SHAPE_FIELDS if getattr(config, f) != getattr(seen, f)]
    if diff:
        f = diff[0]
        raise ConfigError(
            f"checkpoint {directory}: its tensors have {f}={getattr(seen, f)} but config "
            f"{config.name!r} has {f}={getattr(config, f)}; drop --preset to infer the config "
            "from the tensor shapes, or pass --config FILE"
        )


def resolve_config_noted(
    directory: Path, manifest: dict | None, config: ConfigChoice = None
) -> tuple[Gemma3nConfig, str | None]:
    """The config a checkpoint is read with, and a note when any of it was inferred.

    `config` is a full `Gemma3nConfig` (a preset: checked against the manifest's config, or
    against the tensor shapes when the manifest has none), a mapping of some config fields
    (a ``--config`` file: they replace those fields of the manifest's or the inferred
    config), or None.
    """
    where = f"checkpoint {directory}"
    stored = _stored_config(directory, manifest)
    if isinstance(config, Gemma3nConfig):
        if stored is not None:
            check_same_shapes(config, stored, where)
        else:
            _check_against_shapes(directory, config)
        return config, None
    overrides = check_config_fields(dict(config or {}), "--config")
    note = None
    if stored is not None:
        base = stored
    else:
        inferred = infer_config(directory, name=overrides.get("name"))
        base = inferred.config
        assumed = {k: v for k, v in inferred.assumed.items() if k not in overrides}
        note = replace(inferred, assumed=assumed).describe()
    if not overrides:
        return base, note
    chosen = with_overrides(base, overrides, "--config")
    check_same_shapes(chosen, base, where)
    return chosen, note


def resolve_config(
    directory: Path, manifest: dict | None, config: ConfigChoice = None
) -> Gemma3nConfig:
    """The config a checkpoint is read with (see `resolve_config_noted`)."""
    return resolve_config_noted(directory, manifest, config)[0]


@dataclass
class _Opened:
    """One tensor's mapped files, checked against its spec."""

    storage: str  # "int4" or "float32", as found on disk
    data: np.ndarray  # packed uint8 [rows, cols/2] or float32 in the logical shape
    scale: np.ndarray | None  # float32 [rows] for int4


def _expected_forms(spec: TensorSpec) -> str:
    shape = list(spec.shape)
    forms = [f"float32 {shape}"]
    if len(shape) == 2:
        forms.append(f"uint8 {[shape[0], shape[1] // 2]} + scale float32 [{shape[0]}]")
    return " or ".join(forms)


def check_tensor_files(directory: Path, spec: TensorSpec) -> str:
    """Check a tensor's file header(s) against its spec, reading no data; returns its storage.

    Raises `MissingTensorError` for an absent file and `TensorFormatError` for a wrong shape,
    dtype or size (a truncated file), a pickle, or something that is not a regular file.
    """
    what = f"tensor {spec.key}"
    path = tensor_path(directory, spec.key)
    try:
        header = read_header(path, what)
    except FileNotFoundError:
        raise MissingTensorError(f"{what} is missing: no file {path.name} in {directory}") from None
    storage = _storage_of(header, spec, path)
    if storage == "float32":
        return storage
    spath = scale_path(directory, spec.key)
    try:
        sheader = read_header(spath, f"scales of {spec.key}")
    except FileNotFoundError:
        raise MissingTensorError(
            f"{what} is stored packed (uint8) but its scales {spath.name} are missing"
        ) from None
    if sheader.dtype != np.float32 or sheader.shape != (spec.shape[0],):
        raise TensorFormatError(
            f"scales of {spec.key}: {spath.name} is {sheader.dtype} {list(sheader.shape)}, "
            f"expected float32 [{spec.shape[0]}]"
        )
    return storage


def check_headers(checkpoint: Checkpoint) -> None:
    """Check every tensor file's header, dtype, shape and size before any work starts.

    Reads only the `.npy` headers (a few hundred bytes per file; E4B has ~350 files), so a
    truncated or mis-shaped tensor in layer 34 is named when the checkpoint is opened, not
    after a full decode step. Tensors a decode step never reads (`TensorSpec.used` False,
    the K/V weights of KV-sharing layers) may be absent.
    """
    manifest = checkpoint.manifest if (checkpoint.path / MANIFEST_NAME).exists() else None
    if manifest is not None:
        check_manifest_keys(manifest, checkpoint)
    for spec in tensor_manifest(checkpoint.config):
        try:
            storage = check_tensor_files(checkpoint.path, spec)
        except MissingTensorError:
            if spec.used or tensor_path(checkpoint.path, spec.key).exists():
                raise
            continue
        lie = manifest_problem(manifest, spec, storage, checkpoint.path)
        if lie:
            raise TensorFormatError(lie)


def manifest_problem(
    manifest: dict | None, spec: TensorSpec, storage: str, directory: Path
) -> str | None:
    """How the manifest's entry for `spec` contradicts its file (`storage`) or the config.

    A manifest's ``tensors`` table is optional (a minimal manifest is ``{"mode": "int4"}``),
    but one that is there must tell the truth: a reader that trusts it (pccx's own runtime)
    would size or decode the tensor wrongly."""
    tensors = manifest.get("tensors") if isinstance(manifest, dict) else None
    if not isinstance(tensors, dict) or spec.key not in tensors:
        return None
    entry = tensors[spec.key]
    where = f"{directory / MANIFEST_NAME}: tensor {spec.key}"
    if not isinstance(entry, dict):
        return f"{where} is {entry!r}, expected an object with storage and shape"
    if entry.get("shape") != list(spec.shape):
        return (
            f"{where} has shape {entry.get('shape')!r} but the config needs {list(spec.shape)}"
            " (and its file holds that); fix or rewrite the manifest"
        )
    if entry.get("storage") != storage:
        return (
            f"{where} says storage {entry.get('storage')!r} but its file holds {storage}; "
            "fix or rewrite the manifest"
        )
    return None


def check_manifest_keys(manifest: dict, checkpoint: Checkpoint) -> None:
    """A manifest ``tensors`` table naming tensors the config does not have is refused."""
    tensors = manifest.get("tensors")
    if tensors is None:
        return
    if not isinstance(tensors, dict):
        raise WeightsError(f"{checkpoint.path / MANIFEST_NAME}: 'tensors' must be an object")
    extra = sorted(set(tensors) - set(checkpoint.keys()))
    if extra:
        raise WeightsError(
            f"{checkpoint.path / MANIFEST_NAME}: lists tensor {extra[0]!r}, which config "
            f"{checkpoint.config.name!r} does not have; fix or rewrite the manifest"
        )


def open_tensor(directory: Path, spec: TensorSpec) -> _Opened:
    """Check a tensor's file(s) against its spec and map them read-only."""
    storage = check_tensor_files(directory, spec)
    data, _ = open_readonly(tensor_path(directory, spec.key), f"tensor {spec.key}")
    if storage == "float32":
        return _Opened("float32", data, None)
    scale, _ = open_readonly(scale_path(directory, spec.key), f"scales of {spec.key}")
    scale = np.array(scale)  # [rows] float32, small: keep in RAM, shared by every caller
    scale.setflags(write=False)
    return _Opened("int4", data, scale)


def _check_values(spec: TensorSpec, opened: _Opened) -> None:
    """Refuse NaN, infinite or overflowing values, naming the tensor (once per tensor, when
    it is first read: a checkpoint edited after `weights verify` is still caught)."""
    from pccx_flow.weights.finite import scale_problem, value_problem

    if opened.storage == "int4":
        problem = scale_problem(opened.scale)
        what = f"scales of {spec.key}"
    else:
        problem = value_problem(opened.data)
        what = f"tensor {spec.key}"
    if problem:
        raise TensorFormatError(
            f"{what}: {problem}; the checkpoint is damaged (check it with "
            "`pccx-flow weights verify`)"
        )


def _storage_of(header: NpyHeader, spec: TensorSpec, path: Path) -> str:
    shape = spec.shape
    if header.dtype == np.float32 and header.shape == shape:
        return "float32"
    packed = (shape[0], shape[1] // 2) if len(shape) == 2 and shape[1] % 2 == 0 else None
    if packed and header.dtype == np.uint8 and header.shape == packed:
        return "int4"
    raise TensorFormatError(
        f"tensor {spec.key}: {path.name} is {header.dtype} {list(header.shape)}, expected "
        f"{_expected_forms(spec)}; rewrite the checkpoint for this config"
    )


class Checkpoint:
    """A checkpoint directory read through memory maps, tensor by tensor, on first use."""

    def __init__(
        self,
        path: Path | str,
        config: Gemma3nConfig,
        manifest: dict | None = None,
        config_note: str | None = None,
    ):
        self.path = Path(path)
        self.config = config
        self._manifest = manifest
        self.config_note = config_note  # what was inferred or assumed, for the user
        self._specs = {t.key: t for t in tensor_manifest(config)}
        self._opened: dict[str, _Opened] = {}
        self._lock = threading.Lock()

    # Pickle the path and config only; memmaps are reopened lazily on the other side.
    def __getstate__(self) -> dict:
        return {"path": str(self.path), "config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["config"])

    @property
    def manifest(self) -> dict | None:
        """The parsed ``manifest.json``, None if the folder has none (read on first use)."""
        if self._manifest is None:
            self._manifest = read_manifest(self.path)
        return self._manifest

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r}, config={self.config.name!r})"

    def keys(self) -> list[str]:
        """Short keys of every tensor the config needs, model-level first, then by layer."""
        return list(self._specs)

    def spec(self, key: str) -> TensorSpec:
        k = short_key(key)
        try:
            return self._specs[k]
        except KeyError:
            raise MissingTensorError(
                f"{key!r} is not a tensor of config {self.config.name!r}; see `Checkpoint.keys()`"
            ) from None

    def _open(self, key: str) -> _Opened:
        spec = self.spec(key)
        opened = self._opened.get(spec.key)
        if opened is None:
            with self._lock:
                opened = self._opened.get(spec.key)
                if opened is None:
                    opened = open_tensor(self.path, spec)
                    _check_values(spec, opened)
                    self._opened[spec.key] = opened
        return opened

    def storage(self, key: str) -> str:
        """``"int4"`` or ``"float32"``: how the tensor is stored on disk."""
        return self._open(key).storage

    def tensor(self, key: str) -> np.ndarray:
        """The whole logical tensor as a fresh float32 array (INT4 dequantised)."""
        t = self._open(key)
        if t.storage == "int4":
            return dequantize_rows(t.data, t.scale)
        return np.array(t.data, dtype=np.float32)

    def rows(self, key: str, start: int, stop: int, dtype=np.float32) -> np.ndarray:
        """Rows ``start:stop`` of a 2-D tensor as float32, dequantising only those rows.

        ``dtype=np.float64`` returns them in float64 (INT4 rows dequantised exactly).
        """
        spec = self.spec(key)
        if len(spec.shape) != 2:
            raise TensorFormatError(f"tensor {spec.key} is 1-D; rows() needs a matrix")
        n = spec.shape[0]
        if not (isinstance(start, int | np.integer) and isinstance(stop, int | np.integer)):
            raise InputError(f"rows of {spec.key}: start and stop must be integers")
        if not 0 <= start <= stop <= n:
            raise InputError(
                f"rows {start}:{stop} of {spec.key} out of range: it has rows 0..{n - 1}"
            )
        t = self._open(key)
        if t.storage == "int4":
            return dequantize_rows(t.data[start:stop], t.scale[start:stop], dtype)
        return np.array(t.data[start:stop], dtype=dtype)

    def int4(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """``(packed uint8 memmap [rows, cols/2], scale float32 [rows])`` of an INT4 tensor."""
        t = self._open(key)
        if t.storage != "int4":
            raise TensorFormatError(
                f"tensor {short_key(key)} is stored float32, not INT4; use tensor() or float32()"
            )
        return t.data, t.scale

    def float32(self, key: str) -> np.ndarray:
        """Read-only float32 memmap of a tensor stored float32."""
        t = self._open(key)
        if t.storage != "float32":
            raise TensorFormatError(
                f"tensor {short_key(key)} is stored INT4, not float32; use tensor() or int4()"
            )
        return t.data


def open_checkpoint(path: Path | str, config: ConfigChoice = None) -> Checkpoint:
    """Open a checkpoint directory: every tensor header is checked now, data mapped on use.

    `config`: a `Gemma3nConfig` (it must agree with the manifest's config, or with the tensor
    shapes when there is none), a mapping of some config fields (e.g. from
    `load_config_file`; the rest comes from the manifest or the shapes), or None (the
    manifest's config, else one inferred from the shapes: `Checkpoint.config_note` then says
    what was inferred and assumed).
    """
    directory = Path(path)
    manifest = read_manifest(directory)
    chosen, note = resolve_config_noted(directory, manifest, config)
    checkpoint = Checkpoint(directory, chosen, manifest, note)
    check_headers(checkpoint)
    return checkpoint
