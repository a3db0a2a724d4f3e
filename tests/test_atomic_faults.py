"""Faults while writing outputs: kills at random moments, a full disk, concurrent writers.

After every fault the output is the complete old file or the complete new one, temporaries
of killed writers are removed by the next write into the folder, and a program set is never
read as a mix (a kill in the short window between its renames is refused in one line).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pccx_flow import atomic
from pccx_flow.board.program.files import ProgramFileError, read_program
from pccx_flow.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
PY = sys.executable


def _parts(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{atomic.PART_TAG}-"))


WRITER = """
import json, sys
from pccx_flow import atomic
out, n = sys.argv[1], 0
print("ready", flush=True)
while True:  # each file is big enough that a kill often lands inside a write
    n += 1
    atomic.write_text(out, json.dumps({"n": n, "pad": "x" * 2_000_000}))
"""


def test_killed_at_random_moments_the_file_is_always_complete(tmp_path):
    out = tmp_path / "out.json"
    out.write_text(json.dumps({"n": 0, "pad": ""}))
    rng = random.Random(5)
    seen = set()
    for _ in range(10):
        proc = subprocess.Popen([PY, "-c", WRITER, str(out)], env=ENV, stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.01, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        data = json.loads(out.read_text())  # complete, whatever the moment of the kill
        seen.add(data["n"])
    # each writer removed the temporaries of the killed ones before it: at most the last's
    assert len(_parts(tmp_path)) <= 1
    atomic.write_text(tmp_path / "other.json", "{}")
    assert _parts(tmp_path) == []
    assert len(seen) > 1


@pytest.fixture
def small_disk(tmp_path, request):
    """A 2 MiB tmpfs, or the size given as the parameter (needs the right to mount; skipped
    with the reason otherwise)."""
    size = getattr(request, "param", "2m")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a size-limited tmpfs: {exc}")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs: {r.stderr.strip() or r.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def _fill(disk: Path, leave: int) -> None:
    """Fill the disk up to `leave` free bytes."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(disk / "filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


def test_a_full_disk_leaves_every_old_output_intact(small_disk, capsys):
    prog = small_disk / "s.prog"
    tiny = ["--preset", "tiny", "--layers", "0:1"]
    assert main(["emit", *tiny, "--position", "2", "-o", str(prog)]) == 0
    outputs = {
        "json": small_disk / "s.sched.json",
        "gantt": small_disk / "g.svg",
        "trace": small_disk / "t.json",
        "pccx": small_disk / "p.pccx",
        "graph": small_disk / "g.graph.json",
        "render": small_disk / "r.svg",
    }
    for path in outputs.values():
        path.write_text("OLD")
    before = {p: p.read_bytes() for p in small_disk.iterdir()}
    _fill(small_disk, 8 * 1024)
    capsys.readouterr()
    runs = [
        ["emit", *tiny, "--position", "5", "-o", str(prog)],
        ["schedule", *tiny, "--json", str(outputs["json"])],
        ["schedule", *tiny, "--gantt", str(outputs["gantt"])],
        ["schedule", *tiny, "--trace", str(outputs["trace"])],
        ["schedule", *tiny, "--pccx", str(outputs["pccx"])],
        ["graph", "export", *tiny, "-o", str(outputs["graph"])],
        ["render", "--preset", "tiny", "--layer", "0", "-o", str(outputs["render"])],
    ]
    for argv in runs:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "No space left on device" in err, (argv, err)
        for p, data in before.items():
            assert p.read_bytes() == data, (argv, p)
        assert _parts(small_disk) == []
    assert read_program(prog).meta["position"] == 2


EMIT = [PY, "-m", "pccx_flow", "emit", "--preset", "tiny", "--layers", "0:1"]


def test_concurrent_emits_to_one_path_leave_one_whole_program(tmp_path):
    out = tmp_path / "step.prog"
    procs = [
        subprocess.Popen([*EMIT, "--position", str(p), "-o", str(out)], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for p in (1, 2, 3)
    ]  # fmt: skip
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
        p.stderr.close()
    assert read_program(out).meta["position"] in (1, 2, 3)  # words, memh, sidecar agree
    assert _parts(tmp_path) == []


@pytest.mark.slow
def test_emit_killed_at_random_moments_leaves_old_new_or_a_refused_mix(tmp_path):
    out = tmp_path / "step.prog"
    # the one whole run both makes the old program and times an emit (a second whole run,
    # only to time an overwrite, took as long and changed nothing the kills see)
    t0 = time.monotonic()
    subprocess.run([*EMIT, "--position", "1", "-o", str(out)], env=ENV, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    whole = time.monotonic() - t0
    rng = random.Random(3)
    outcomes = []
    for i in range(6):
        proc = subprocess.Popen([*EMIT, "--position", str(3 + i % 2), "-o", str(out)], env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.5, 1.0) * whole)  # late: past start-up, into the lowering
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        try:
            outcomes.append(read_program(out).meta["position"])
        except ProgramFileError as exc:  # a kill between two renames: refused, never used
            assert "interrupted or concurrent emit" in str(exc) or "another emit" in str(exc)
            outcomes.append("refused")
    assert all(o in (1, 3, 4, "refused") for o in outcomes), outcomes
    # a position no earlier run wrote: the program read is this run's
    subprocess.run([*EMIT, "--position", "2", "-o", str(out)], env=ENV, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    assert read_program(out).meta["position"] == 2 and _parts(tmp_path) == []
    shutil.rmtree(tmp_path, ignore_errors=True)


def _complete(path: Path) -> bool:
    """`path` holds a whole file of its kind (parsed to its end)."""
    data = path.read_bytes()
    if path.suffix == ".svg":
        return data.rstrip().endswith(b"</svg>")
    if path.suffix == ".pccx":
        from pccx_flow.traces.pccx_file import read_pccx

        read_pccx(path)
        return True
    json.loads(data)
    return True


CLI = [PY, "-m", "pccx_flow"]
TINY = ["--preset", "tiny", "--layers", "0:2"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "outputs"),
    [
        (["schedule", *TINY, "--json", "{s.json}", "--trace", "{t.json}", "--pccx", "{p.pccx}",
          "--gantt", "{g.svg}"], ["s.json", "t.json", "p.pccx", "g.svg"]),
        (["graph", "export", *TINY, "-o", "{g.json}"], ["g.json"]),
        (["render", "--preset", "tiny", "--layer", "1", "-o", "{r.svg}"], ["r.svg"]),
    ],
    ids=["schedule", "graph-export", "render"],
)  # fmt: skip
def test_killed_commands_leave_each_output_old_or_complete(tmp_path, argv, outputs):
    paths = {name: tmp_path / name for name in outputs}
    argv = [str(paths[a[1:-1]]) if a.startswith("{") else a for a in argv]
    for p in paths.values():
        p.write_text("OLD")
    t0 = time.monotonic()
    subprocess.run([*CLI, *argv], env=ENV, check=True, capture_output=True, timeout=300)
    whole = time.monotonic() - t0
    rng = random.Random(len(outputs))
    for _ in range(4):
        for p in paths.values():
            p.write_text("OLD")
        proc = subprocess.Popen([*CLI, *argv], env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(rng.uniform(0.4, 1.0) * whole)
        os.kill(proc.pid, rng.choice([signal.SIGKILL, signal.SIGTERM]))
        proc.wait()
        for p in paths.values():
            assert p.read_text(errors="replace") == "OLD" or _complete(p), p
    subprocess.run([*CLI, *argv], env=ENV, check=True, capture_output=True, timeout=300)
    assert all(_complete(p) for p in paths.values()) and _parts(tmp_path) == []


# --steps 1 --fuse: a few hundred tasks instead of one per node (the distributed scheduler's
# ~0.6 ms per task made the default four unfused steps ~30 s); the end, which matters here,
# is the same: Dask writes its draft, then the lanes page and the report are renamed in.
REPORT = [*CLI, "run", "--synthetic", "tiny", "--policy", "heft", "--steps", "1", "--fuse",
          "--report"]  # fmt: skip


def _report_pair(report: Path) -> str | None:
    """Each file of `report` and its lanes page is OLD or a complete page; returns the run id
    of a complete report (None for OLD), whose lanes page is then of the same run or refused
    by `check_pair` (a kill between the two renames, never read as one run)."""
    from pccx_flow.dashboard.report import ReportPairError, check_pair, lanes_path, run_id

    texts = [p.read_text(errors="replace") for p in (report, lanes_path(report))]
    for p, text in zip((report, lanes_path(report)), texts, strict=True):
        assert text == "OLD" or text.rstrip().endswith("</html>"), (p, text[-200:])
    if texts[0] == "OLD":
        return None
    run = run_id(texts[0])
    assert run is not None and f'href="{lanes_path(report).name}#run={run}"' in texts[0]
    if run_id(texts[1]) != run:
        with pytest.raises(ReportPairError):
            check_pair(report)
    else:
        assert check_pair(report) == lanes_path(report)
    return run


def _kill_when(proc, folder: Path, ending: str, delay: float, sig: int) -> None:
    """Send `sig` to `proc` `delay` s after a temporary ending in `ending` appears in
    `folder`."""
    while proc.poll() is None:
        if any(n.endswith(ending) for n in _parts(folder)):
            time.sleep(delay)
            proc.send_signal(sig)
            proc.wait()
            return
        time.sleep(0.002)
    pytest.fail(f"the run ended ({proc.returncode}) before a temporary *{ending} appeared")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "output"),
    [
        (["schedule", *TINY, "--policy", "{policy}", "--json", "{out}"], "s.json"),
        (["schedule", *TINY, "--policy", "{policy}", "--gantt", "{out}"], "g.svg"),
        (["graph", "export", "--preset", "tiny", "--layers", "{layers}", "-o", "{out}"],
         "g.json"),
        (["render", "--preset", "tiny", "--layer", "{layer}", "-o", "{out}"], "r.svg"),
    ],
    ids=["schedule-json", "schedule-gantt", "graph-export", "render"],
)  # fmt: skip
def test_concurrent_writers_to_one_path_leave_one_whole_file(tmp_path, argv, output):
    """Two runs that make different files, both to one path: each exits 0 and the path
    holds one of the two whole, never a blend, with no temporaries left."""
    out = tmp_path / output
    variants = [{"policy": p, "layers": f"0:{i + 1}", "layer": str(i)}
                for i, p in enumerate(("heft", "program-order"))]  # fmt: skip
    made = []
    for v in variants:  # what each run writes alone
        subprocess.run([*CLI, *[a.format(out=out, **v) for a in argv]], env=ENV, check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        made.append(out.read_bytes())
    assert len(set(made)) == 2  # the runs do write different files
    procs = [subprocess.Popen([*CLI, *[a.format(out=out, **v) for a in argv]], env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for v in variants]  # fmt: skip
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
        proc.stderr.close()
    data = out.read_bytes()
    if output.endswith(".json"):  # the trace-free JSON carries wall times: compare the rest
        data, made = _no_wall(data), [_no_wall(m) for m in made]
    assert data in made and _parts(tmp_path) == []


def _no_wall(data: bytes) -> bytes:
    obj = json.loads(data)
    obj.get("metrics", {}).pop("wall_seconds", None)
    return json.dumps(obj, sort_keys=True).encode()


@pytest.mark.slow
def test_run_report_killed_while_writing_leaves_old_or_a_whole_pair(tmp_path):
    """Kills timed off the temporaries at the end of the run: after Dask's draft of the report
    appears (while it is written and the lanes page is built), and as the lanes page's
    temporary appears (it and the report's are written, then both renamed within a few ms);
    first over OLD files, then over a whole pair of an earlier run."""
    out = tmp_path / "run.html"
    out.write_text("OLD")
    (tmp_path / "run.lanes.html").write_text("OLD")
    rng = random.Random(27)
    outcomes = []

    def killed(ending: str, delay: float) -> str | None:
        proc = subprocess.Popen([*REPORT, str(out)], env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        sig = rng.choice([signal.SIGKILL, signal.SIGTERM])
        _kill_when(proc, tmp_path, ending, rng.uniform(0, delay), sig)
        outcomes.append(_report_pair(out))
        return outcomes[-1]

    killed(".run.html", 1.0)  # Dask's draft
    killed(".run.lanes.html", 0.004)
    subprocess.run([*REPORT, str(out)], env=ENV, check=True, capture_output=True, timeout=300)
    first = _report_pair(out)
    assert first is not None and _parts(tmp_path) == []  # the killed runs' temporaries
    assert killed(".run.lanes.html", 0.004) is not None  # the earlier pair, or the new one


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", ["2m", "4m"], indirect=True)
def test_run_report_on_a_full_disk_leaves_the_old_pair(small_disk):
    """2 MiB: Dask's draft of the report (~1.8 MB) does not fit; 4 MiB: it does, the lanes page and
    the new report do not. Either way the old pair stays and the error is one line."""
    out = small_disk / "run.html"
    lanes = small_disk / "run.lanes.html"
    out.write_text("OLD")
    lanes.write_text("OLD LANES")
    r = subprocess.run([*REPORT, str(out)], env=ENV, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "No space left on device" in r.stderr, r.stderr
    assert out.read_text() == "OLD" and lanes.read_text() == "OLD LANES"
    assert _parts(small_disk) == []


@pytest.mark.slow
def test_concurrent_run_reports_to_one_path_leave_one_runs_pair(tmp_path):
    out = tmp_path / "run.html"
    procs = [
        subprocess.Popen([*REPORT, str(out)], env=ENV, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
        for _ in range(2)
    ]  # fmt: skip
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
        p.stderr.close()
    from pccx_flow.dashboard.report import check_pair, run_id

    assert _report_pair(out) is not None and check_pair(out) == tmp_path / "run.lanes.html"
    assert run_id(out.read_text()) == run_id((tmp_path / "run.lanes.html").read_text())
    assert _parts(tmp_path) == []
