"""Points run in process here (Dask is `compare`'s engine, tested there): the cache returns
identical records, resumes a sweep, and a failing point is one recorded line."""

from __future__ import annotations

import json

import pytest

from pccx_flow.errors import InputError, ProfileError
from pccx_flow.explore import run as run_mod
from pccx_flow.explore.cache import Cache
from pccx_flow.explore.run import make_tasks, run_points

POINTS = [{"gemv_lanes": 2}, {"gemv_lanes": 4, "spec_k": 1, "alpha": 0.5}]


def _tasks(points=POINTS):
    return make_tasks(points, "v002-spec", "tiny", ["heft"], True)


def test_the_cache_returns_identical_results_without_scheduling_again(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "c")
    first = run_points(_tasks(), cache, workers=0, progress=False)
    assert all("error" not in r for r in first)
    assert len(list((tmp_path / "c").glob("*/*.json"))) == 2

    def refuse(task):
        raise AssertionError("scheduled again")

    monkeypatch.setattr(run_mod, "evaluate", refuse)
    again = run_points(_tasks(), Cache(tmp_path / "c"), workers=0, progress=False)
    assert json.dumps(again, sort_keys=True) == json.dumps(first, sort_keys=True)


def test_a_killed_sweep_resumes_and_a_cut_file_is_recomputed(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "c")
    tasks = _tasks()
    run_points(tasks[:1], cache, workers=0, progress=False)  # "killed" after one point
    cut = tmp_path / "c" / tasks[0]["key"][:2] / f"{tasks[0]['key']}.json"
    seen = []
    real = run_mod.evaluate
    monkeypatch.setattr(run_mod, "evaluate", lambda t: seen.append(t["key"]) or real(t))
    run_points(tasks, cache, workers=0, progress=False)
    assert seen == [tasks[1]["key"]]
    cut.write_text(cut.read_text()[:50])  # a record cut off mid-write
    seen.clear()
    run_points(tasks, cache, workers=0, progress=False)
    assert seen == [tasks[0]["key"]]


def test_the_key_depends_on_profile_and_step_but_not_on_alpha():
    a, b, c = _tasks([{"alpha": 0.5}, {"alpha": 0.9}, {"kv_bits": 8}])
    assert a["key"] == b["key"] != c["key"]
    recs = run_points([a, b], Cache(None), workers=0, progress=False)
    assert recs[0]["tok_s"] == recs[1]["tok_s"]  # k = 0: alpha changes nothing


def test_speculative_tok_s_uses_the_acceptance_model():
    (r,) = run_points(_tasks(POINTS[1:]), Cache(None), workers=0, progress=False)
    assert r["tokens_per_step"] == pytest.approx(1.5)
    assert r["tok_s"] == pytest.approx(1.5 * r["core_hz"] / r["step_cycles"])


def test_a_failing_point_carries_one_line_and_the_others_finish():
    # 4 KiB of L2: the policy's order deadlocks on memory (found only by scheduling it)
    points = [{"memory.l2_bytes": 4096}, {"position": 63}]
    recs = run_points(_tasks(points), Cache(None), workers=0, progress=False)
    assert "memory deadlock" in recs[0]["error"] and "\n" not in recs[0]["error"]
    assert "error" not in recs[1] and recs[1]["tok_s"] > 0


def test_an_implausible_point_refuses_the_sweep_before_any_work():
    with pytest.raises(ProfileError, match=r"point 0 \(core_mhz=20000\) refused: .*plausible"):
        _tasks([{"core_mhz": 20000}])


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ({"position": 64}, r"point 1 \(position=64\) refused: position 64 out of range: the "
                           r"tiny KV cache holds positions 0\.\.63"),
        ({"tile_rows": 4}, r"point 1 \(tile_rows=4\) refused: tile_rows 4 out of range: use "
                           r"8\.\.512 for tiny"),
    ],
)  # fmt: skip
def test_a_point_the_model_cannot_take_refuses_the_sweep_before_any_work(point, message):
    with pytest.raises(InputError, match=message):
        _tasks([{"position": 63}, point])


def test_dask_workers_give_the_records_this_process_gives():
    tasks = _tasks(POINTS[:1])
    here = run_points(tasks, Cache(None), workers=0, progress=False)
    dask = run_points(tasks, Cache(None), workers=1, progress=False)
    drop = lambda r: {k: v for k, v in r.items() if k != "wall_seconds"}  # noqa: E731
    assert [drop(r) for r in dask] == [drop(r) for r in here]


def test_the_seed_reaches_the_policies_and_the_key():
    """The ``random`` policy's schedule follows the sweep's seed, and so does the cache key."""
    one = make_tasks([{}], "v002-spec", "tiny", ["random"], True, seed=1)[0]
    two = make_tasks([{}], "v002-spec", "tiny", ["random"], True, seed=2)[0]
    assert one["seed"] == 1 and one["key"] != two["key"]
    a, b = run_points([one, two], Cache(None), workers=0, progress=False)
    assert a["step_cycles"] != b["step_cycles"]


def test_an_unwritable_cache_is_one_line(tmp_path, monkeypatch):
    import tempfile

    from pccx_flow.errors import InputError

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(InputError, match="cannot write to the cache folder .*--no-cache"):
        Cache(tmp_path / "c").put({"key": "ab" * 32})


def test_a_reused_shaped_graph_gives_the_records_a_fresh_build_gives(monkeypatch):
    """Points that share a step shape cost one graph again and again (`build_point_graph`
    with reuse); in any order, each record equals the one built from scratch."""
    from pccx_flow.explore import step as step_mod
    from pccx_flow.explore.point import evaluate

    points = [{"gemv_lanes": 8}, {"kv_bits": 8}, {"core_mhz": 600, "weight_ports": 4},
              {"kv_bits": 8, "sfu_cycles": 1.0}, {}]  # fmt: skip
    tasks = _tasks(points)

    def plain(records):
        return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in records]

    monkeypatch.setattr(step_mod, "_SHAPED", step_mod.threading.local())
    reused = plain(evaluate(t) for t in tasks)
    assert len(step_mod._SHAPED.graphs) == 2  # two shapes among the five points
    fresh = []
    for t in tasks:
        monkeypatch.setattr(step_mod, "_SHAPED", step_mod.threading.local())
        fresh.append(evaluate(t))
    assert reused == plain(fresh)
    assert len({r["makespan_cycles"] for r in reused}) >= 3  # the points do differ
