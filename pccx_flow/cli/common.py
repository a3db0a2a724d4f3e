"""The options that choose which decode step a command builds, shared by every command.

`schedule`, `check`, `graph export` and `render` all build one decode-step DAG from the
same options (preset, semantics, position, layers, tile rows); keeping them here means one
default position, one `--layers` syntax and one set of error messages.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.errors import InputError

# A 1,024-token context: long enough that KV reads show, short enough to be typical.
DEFAULT_POSITION = 1023

# Defaults of the step options (position None = DEFAULT_POSITION capped by the preset).
STEP_DEFAULTS = {
    "preset": "e4b",
    "semantics": "pccx",
    "position": None,
    "layers": None,
    "tile_rows": 512,
}


_ASCII_INT = re.compile(r"[+-]?[0-9]{1,30}")
_ASCII_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,4})?")


def ascii_int(text: str) -> int:
    """An integer written with ASCII digits only (`int` also takes ``"٣"``, ``"1_0"``)."""
    if not _ASCII_INT.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; write digits 0-9")
    return int(text)


def int_in(lo: int, hi: int, *, guard: bool = False) -> Callable[[str], int]:
    """An argparse type: an ASCII integer in ``[lo, hi]``. With `guard`, `hi` only catches
    typos (`count`, `positive`): a value below `lo` is asked for as `lo` or more, not as a
    range a user should read as the option's."""

    def parse(text: str) -> int:
        value = ascii_int(text)
        if not lo <= value <= hi:
            wanted = f"{lo} or more" if guard and value < lo else f"{lo}..{hi}"
            raise argparse.ArgumentTypeError(f"{value} is out of range; give {wanted}")
        return value

    parse.__name__ = "integer"
    return parse


def float_in(lo: float, hi: float, *, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite ASCII decimal number in ``[lo, hi]`` (or 0 if `zero`).

    Bounds keep values away from subnormals and overflow (``1e-320`` as a divisor is inf).
    """

    def parse(text: str) -> float:
        if not _ASCII_FLOAT.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; write e.g. 0.5 or 1e-3")
        value = float(text)
        if not math.isfinite(value) or not (lo <= value <= hi or (zero and value == 0)):
            also = "0 or " if zero else ""
            raise argparse.ArgumentTypeError(f"{text} is out of range; give {also}{lo:g}..{hi:g}")
        return value

    parse.__name__ = "number"
    return parse


# Counts, positions and seeds: no real value comes near 2**31 (a larger one is a typo).
count = int_in(0, 2**31 - 1, guard=True)
positive = int_in(1, 2**31 - 1, guard=True)
seed = int_in(0, 2**32 - 1)

# Time limits in seconds: up to a day.
seconds = float_in(1e-3, 86400.0)


def add_policy_timeout_arg(p: argparse.ArgumentParser) -> None:
    """Add --policy-timeout (the time limit of a plugin policy run in a child process)."""
    from pccx_flow.schedule.sandbox import MIN_TIMEOUT, SECONDS_PER_NODE

    p.add_argument(
        "--policy-timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="stop a plugin policy after S seconds (default: the larger of "
        f"{MIN_TIMEOUT:g} s and {SECONDS_PER_NODE * 1000:g} ms per node; built-ins have none)",
    )


def add_read_ahead_arg(p: argparse.ArgumentParser) -> None:
    """Add --read-ahead: when the KV tile reads of a step within L2 are issued."""
    p.add_argument(
        "--read-ahead",
        choices=("stream", "fixed"),
        default=None,
        help="when KV tiles are read, within L2: 'stream' (default) reads each stream's tiles "
        "one after another as soon as L2 has room and a tile slot is free; 'fixed' issues "
        "each just ahead of its use (at most two K and one V tile of a stream in flight)",
    )


def read_ahead_from_args(args: argparse.Namespace) -> dict | None:
    """The `problem_from_graph` read-ahead rule --read-ahead names (None: the default)."""
    rule = getattr(args, "read_ahead", None)
    if rule is None:
        return None
    if not getattr(args, "memory", True):
        raise InputError("--read-ahead orders KV reads within L2; drop --no-memory to use it")
    return {"rule": rule}


def add_step_args(p: argparse.ArgumentParser, *, layers: bool = True) -> None:
    """Add --preset, --semantics, --position, --tile-rows and (unless `layers` is False)
    --layers to a subcommand's parser."""
    d = STEP_DEFAULTS
    p.add_argument("--preset", default=d["preset"], help="model preset: e4b or tiny (default: e4b)")
    p.add_argument("--semantics", default=d["semantics"], help="pccx or gemma3n (default: pccx)")
    p.add_argument(
        "--position",
        type=count,
        default=d["position"],
        metavar="N",
        help=f"decode position (default: {DEFAULT_POSITION}, or the preset's last if smaller)",
    )
    if layers:
        p.add_argument(
            "--layers", default=d["layers"], metavar="A:B", help="only layers A..B-1 (default: all)"
        )
    p.add_argument(
        "--tile-rows",
        type=positive,
        default=d["tile_rows"],
        metavar="N",
        help="most GEMV output rows and keys per tile, in whole 16-byte L2 words (default: "
        "512, one instruction's limit)",
    )


def parse_layers(text: str | None, n_layers: int) -> tuple[int, int] | None:
    """``A:B`` (either side may be empty, or a single ``N``) as a half-open range, or None."""
    if text is None:
        return None
    head, sep, tail = text.partition(":")
    try:
        if not sep:
            a = int(head)
            b = a + 1
        else:
            a = int(head) if head.strip() else 0
            b = int(tail) if tail.strip() else n_layers
    except ValueError:
        raise InputError(f"--layers {text!r}: write A:B with integers, e.g. 0:5") from None
    if not 0 <= a < b <= n_layers:
        raise InputError(
            f"--layers {text!r}: need 0 <= A < B <= {n_layers} (the preset has {n_layers} layers)"
        )
    return a, b


@dataclass(frozen=True)
class StepChoice:
    """A validated choice of decode step: what `build_decode_graph` is called with."""

    config: object  # Gemma3nConfig
    semantics: str
    position: int
    tile_rows: int
    layers: tuple[int, int] | None

    def build(self, profile=None, layers: tuple[int, int] | None = None,
              row_align: int | None = None):  # fmt: skip
        """Build the step's graph (optionally costed on `profile`, or cut to other `layers`;
        `row_align`: see `build_decode_graph`)."""
        from pccx_flow.graph.build import build_decode_graph

        return build_decode_graph(
            self.config,
            semantics=self.semantics,
            position=self.position,
            profile=profile,
            tile_rows=self.tile_rows,
            layers=layers if layers is not None else self.layers,
            row_align=row_align,
        )


def step_from_args(args: argparse.Namespace) -> StepChoice:
    """Validate the step options, failing with one line before anything slow is built."""
    from pccx_flow.model.config import check_position, check_semantics, get_config

    config = get_config(args.preset)
    semantics = check_semantics(args.semantics)
    position = args.position
    if position is None:
        position = min(DEFAULT_POSITION, config.max_seq - 1)
    check_position(config, position)
    if args.tile_rows < 1:
        raise InputError(f"--tile-rows {args.tile_rows}: give a positive number of rows")
    layers = parse_layers(getattr(args, "layers", None), config.n_layers)
    return StepChoice(config, semantics, position, args.tile_rows, layers)


def check_output_path(path: Path, suffixes: tuple[str, ...] | None = None) -> None:
    """Fail with one line, before any slow work, if `path` cannot be written as asked."""
    if suffixes is not None and path.suffix.lower().lstrip(".") not in suffixes:
        raise InputError(
            f"cannot tell the format of {path.name!r}: end the file name with "
            + ", ".join(f".{s}" for s in suffixes)
        )
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a folder; give a file name")
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: folder {path.parent} does not exist")


def check_distinct_outputs(outputs: dict[str, Path | None]) -> None:
    """Fail with one line if two outputs (option name -> path) name the same file."""
    seen: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise InputError(
                f"{seen[key]} and {option} both name {path}; give each output its own file"
            )
        seen[key] = option
    existing = [(o, p) for o, p in outputs.items() if p is not None and p.exists()]
    for i, (a, pa) in enumerate(existing):
        for b, pb in existing[i + 1 :]:
            if os.path.samefile(pa, pb):  # hard links, bind mounts
                raise InputError(f"{a} and {b} name the same file; give each its own file")


CONFIG_FILE_HELP = (
    "JSON file of config fields (the manifest's 'config' fields, any subset, e.g. "
    '{"n_sparse_layers": 10}) for a checkpoint without them; the rest comes from its '
    "manifest, from --preset, or from its tensor shapes"
)


def checkpoint_config(preset: str | None, config_file: str | None):
    """What a checkpoint is opened with: a preset, some fields from a file, both, or None.

    With both, the file's fields replace the preset's. With neither, the checkpoint's own
    manifest decides, or its tensor shapes (`pccx_flow.weights.infer`).
    """
    from pccx_flow.model.config import get_config
    from pccx_flow.weights.checkpoint import load_config_file
    from pccx_flow.weights.infer import with_overrides

    fields = load_config_file(config_file) if config_file is not None else None
    if preset is None:
        return fields
    config = get_config(preset)
    return with_overrides(config, fields, f"--config {config_file}") if fields else config


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a failed write (permissions, full disk, ...) into one line naming the file."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_scheduler_address(address: str | None) -> None:
    """One line when a --scheduler value is not a Dask address (no ``scheme://``)."""
    if address and "://" not in address:
        raise InputError(
            f"--scheduler {address!r} is not an address; give one like tcp://127.0.0.1:8786"
        )
