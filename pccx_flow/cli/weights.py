"""`pccx-flow weights`: write synthetic checkpoints, import Hugging Face ones, verify them."""

from __future__ import annotations

import argparse
from pathlib import Path

from pccx_flow.cli.common import CONFIG_FILE_HELP
from pccx_flow.model.config import PRESETS, get_config

EPILOG = """examples:
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/tiny
  pccx-flow weights synth --preset e4b --seed 0 --out ckpt/e4b             # ~3.6 GB, ~35 s
  pccx-flow weights import gemma-3n-E4B/ --out ckpt/e4b-hf                   # shards + config.json
  pccx-flow weights verify ckpt/tiny"""

SYNTH_EPILOG = """examples:
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/tiny
  pccx-flow weights synth --preset e4b --seed 1 --out ckpt/e4b --force --no-progress
The same seed always writes byte-identical files; every tensor (gammas included) is random."""

IMPORT_EPILOG = """examples:
  pccx-flow weights import gemma-3n-E4B/ --out ckpt/e4b-hf
  pccx-flow weights import model-00001-of-00002.safetensors model-00002-of-00002.safetensors \\
      --out ckpt/e4b-hf --preset e4b
  pccx-flow weights import gemma-3n-E4B/ --out ckpt/e4b-f32 --no-quantize
SRC is a .safetensors file or a folder (with model.safetensors.index.json or *.safetensors).
Without --preset the config comes from a config.json next to the shards, else from the shapes."""

VERIFY_EPILOG = """examples:
  pccx-flow weights verify ckpt/tiny
  pccx-flow weights verify runtime-ckpt/ --preset e4b     # manifest is just {"mode": "int4"}
  pccx-flow weights verify pccx-export/ --config cfg.json # no manifest; cfg.json: some fields
Without a config in the manifest, --preset or --config, the config is inferred from the
tensor shapes and printed as a note (with the fields shapes cannot show, and their defaults).
Prints "ok: N tensors, X GB, preset P" or one line per problem (exit status 1)."""


def _config(args):
    return get_config(args.preset) if args.preset else None


def cmd_synth(args: argparse.Namespace) -> int:
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    out = write_synthetic_checkpoint(
        get_config(args.preset),
        args.seed,
        args.out,
        progress=not args.no_progress,
        force=args.force,
    )
    print(f"wrote {args.preset} checkpoint (seed {args.seed}) to {out}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from pccx_flow.weights.hf_import import import_safetensors

    out = import_safetensors(
        [Path(s) for s in args.sources],
        Path(args.out),
        config=_config(args),
        quantize=not args.no_quantize,
        progress=not args.no_progress,
        force=args.force,
    )
    print(f"imported {len(args.sources)} source(s) to {out}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from pccx_flow.cli.common import checkpoint_config
    from pccx_flow.errors import InputError
    from pccx_flow.weights.verify import inspect_checkpoint

    if not Path(args.dir).is_dir():  # a usage error (exit 2), not a damaged checkpoint (1)
        raise InputError(f"{args.dir!r} is not a folder; give a checkpoint folder to verify")
    report = inspect_checkpoint(Path(args.dir), checkpoint_config(args.preset, args.config))
    for note in report.notes:
        print(f"note: {note}")
    if report.problems:
        for problem in report.problems:
            print(problem)
        return 1
    name = report.config.name if report.config else "?"
    print(f"ok: {report.n_tensors} tensors, {report.n_bytes / 1e9:.2f} GB, preset {name}")
    return 0


def register(subparsers) -> None:
    presets = " or ".join(sorted(PRESETS))
    fmt = argparse.RawDescriptionHelpFormatter
    parser = subparsers.add_parser(
        "weights",
        help="write, import and verify checkpoints (pccx split-.npy layout)",
        description="Checkpoints in the pccx split-.npy layout: one .npy per tensor, INT4 "
        "packed with per-row scales, manifest.json written last.",
        epilog=EPILOG,
        formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="weights_command", metavar="ACTION", required=True)

    p = sub.add_parser(
        "synth",
        help="write a deterministic random checkpoint",
        description="Write a random checkpoint of a preset, streamed in row chunks into a "
        "hidden sibling folder that replaces --out only when complete (a kill or a full disk "
        "leaves the old checkpoint as it was).",
        epilog=SYNTH_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("--preset", required=True, help=f"model size: {presets}")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, help="output folder (must be empty unless --force)")
    p.add_argument("--force", action="store_true", help="write into a non-empty folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser(
        "import",
        help="convert Hugging Face safetensors shards",
        description="Convert a Hugging Face Gemma 3n safetensors checkpoint (F32/F16/BF16) "
        "to the pccx layout, quantising the INT4 tensors per row.",
        epilog=IMPORT_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("sources", nargs="+", metavar="SRC", help=".safetensors file or folder")
    p.add_argument("--out", required=True, help="output folder (must be empty unless --force)")
    p.add_argument("--preset", help=f"config: {presets} (default: from config.json)")
    p.add_argument("--no-quantize", action="store_true", help="keep every tensor float32")
    p.add_argument("--force", action="store_true", help="write into a non-empty folder")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "verify",
        help="check every file of a checkpoint",
        description="Check each tensor file (shape, dtype, truncation, pickles, NaN) without "
        "loading the model.",
        epilog=VERIFY_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("dir", metavar="DIR", help="checkpoint folder")
    p.add_argument("--preset", help=f"config: {presets}, if the manifest has none")
    p.add_argument("--config", metavar="FILE", help=CONFIG_FILE_HELP)
    p.set_defaults(func=cmd_verify)
