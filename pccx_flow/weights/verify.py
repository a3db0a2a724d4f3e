"""Check a checkpoint directory file by file without loading it.

Every tensor the config needs is opened exactly as `Checkpoint` opens it (header, dtype,
shape in either storage form, truncation, pickles refused), float32 data and INT4 scales are
scanned for NaN/inf and for magnitudes no decode can use (`pccx_flow.weights.finite`), the
manifest's shape and storage of each tensor are held against the files, and files that
belong to no tensor are listed. The K/V weights of
KV-sharing layers (and their gamma_k) are never read by a decode step, so their absence is
not a problem (`TensorSpec.used` is False).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow.errors import MissingTensorError, TensorFormatError, WeightsError
from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.model.tensors import tensor_manifest
from pccx_flow.weights.checkpoint import (
    MANIFEST_NAME,
    ConfigChoice,
    manifest_problem,
    open_tensor,
    read_manifest,
    resolve_config_noted,
    scale_path,
    tensor_path,
)
from pccx_flow.weights.finite import scale_problem, value_problem


@dataclass
class CheckReport:
    """What `inspect_checkpoint` found: problems are fatal, notes (extra files) are not."""

    path: Path
    config: Gemma3nConfig | None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_tensors: int = 0
    n_bytes: int = 0


def inspect_checkpoint(path: Path | str, config: ConfigChoice = None) -> CheckReport:
    """Inspect every file of a checkpoint; a bad manifest or an unfinished folder is a problem.

    A folder without a manifest is checked against the config it is opened with (given, or
    inferred from its shapes; the inference is reported as a note). Raises `ConfigError` only
    when the given config disagrees with the manifest or the shapes: a usage error, not a
    damaged file.
    """
    directory = Path(path)
    report = CheckReport(directory, None)
    try:
        manifest = read_manifest(directory)
        config, note = resolve_config_noted(directory, manifest, config)
    except WeightsError as exc:
        report.problems.append(str(exc))
        return report
    report.config = config
    if note:
        report.notes.append(note)
    expected = {MANIFEST_NAME}
    listed = manifest.get("tensors") if isinstance(manifest, dict) else None
    if listed is not None:
        names = {spec.key for spec in tensor_manifest(config)}
        if not isinstance(listed, dict):
            report.problems.append(f"{directory / MANIFEST_NAME}: 'tensors' must be an object")
        elif extra := sorted(set(listed) - names):
            report.problems.append(
                f"{directory / MANIFEST_NAME}: lists tensor {extra[0]!r}, which config "
                f"{config.name!r} does not have"
            )
    for spec in tensor_manifest(config):
        data_file, scale_file = tensor_path(directory, spec.key), scale_path(directory, spec.key)
        expected.add(data_file.name)
        if len(spec.shape) == 2:
            expected.add(scale_file.name)
        try:
            opened = open_tensor(directory, spec)
        except MissingTensorError as exc:
            if spec.used or data_file.exists():
                report.problems.append(str(exc))
            continue
        except TensorFormatError as exc:
            report.problems.append(str(exc))
            continue
        report.n_tensors += 1
        report.n_bytes += data_file.stat().st_size
        lie = manifest_problem(manifest, spec, opened.storage, directory)
        if lie:
            report.problems.append(lie)
        if opened.storage == "int4":
            report.n_bytes += scale_file.stat().st_size
            if problem := scale_problem(opened.scale):
                report.problems.append(f"scales of {spec.key}: {problem}")
        else:
            if problem := value_problem(opened.data):
                report.problems.append(f"tensor {spec.key}: {problem}")
            if scale_file.exists():
                report.notes.append(
                    f"unused file {scale_file.name} ({spec.key} is stored float32; ignored)"
                )
    for p in sorted(directory.iterdir()):
        if p.name not in expected:
            report.notes.append(f"unknown file {p.name} (not a tensor of {config.name}; ignored)")
    return report


def verify_checkpoint(path: Path | str, config: ConfigChoice = None) -> list[str]:
    """Problems of a checkpoint, one line each; empty when it is usable.

    Unknown extra files are not problems; `inspect_checkpoint` lists them as notes.
    """
    return inspect_checkpoint(path, config).problems
