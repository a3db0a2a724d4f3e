"""Point records on disk, one JSON file per step key, so a sweep resumes after a kill.

A record is written to a temporary file in the same folder and renamed into place, so a
kill leaves either the whole record or none; a file that does not parse (or whose key does
not match its name) is ignored and the point computed again. Only JSON is read: a cache
folder can be shared or copied without trusting it to run code. Records marked
``transient`` (a crash, not the point's own error) are not stored.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from pccx_flow.errors import InputError


class Cache:
    """A folder of ``<key[:2]>/<key>.json`` records (or nothing, when `root` is None)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        if root is not None:
            if root.exists() and not root.is_dir():
                raise InputError(f"cache {root} is not a folder; give a folder name")
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"cannot create cache folder {root}: {exc.strerror}") from None

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The stored record of `key`, or None."""
        if self.root is None:
            return None
        path = self._path(key)
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) and rec.get("key") == key else None

    def put(self, record: dict) -> None:
        """Store `record` under its ``key`` (atomically), unless it is transient."""
        if self.root is None or record.get("transient"):
            return
        path = self._path(record["key"])
        try:
            path.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        except OSError as exc:
            raise InputError(
                f"cannot write to the cache folder {path.parent}: {exc.strerror}; give a "
                "writable --cache DIR or --no-cache"
            ) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
