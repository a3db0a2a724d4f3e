"""Sweeps: every instance once, journalled as it lands, resumed after an interruption."""

from __future__ import annotations

import json

import pytest

from pccx_flow.compare.instances import parse_dags, random_instance
from pccx_flow.compare.sweep import read_journal, run_sweep
from pccx_flow.errors import InputError

POLICIES = ["heft", "critical-path", "program-order"]
OPTS = {"exact_max_nodes": 0}


def _instances(count):
    return parse_dags(f"random:{count}")[0][1]


def test_journal_resumes_and_recomputes_a_cut_off_line(tmp_path):
    journal = tmp_path / "j.jsonl"
    inst = _instances(4)
    seen = []
    first = run_sweep(inst[:3], POLICIES, journal=journal, workers=0, progress=False,
                      task_options=OPTS, on_record=seen.append)  # fmt: skip
    assert [r["key"] for r in first] == [d["key"] for d in inst[:3]] and len(seen) == 3
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])  # interrupted mid-line
    seen.clear()
    again = run_sweep(inst, POLICIES, journal=journal, workers=0, progress=False,
                      task_options=OPTS, on_record=seen.append)  # fmt: skip
    assert [r["key"] for r in seen] == [inst[2]["key"], inst[3]["key"]]  # only the missing
    assert [r["key"] for r in again] == [d["key"] for d in inst]
    assert again[0] == first[0]  # the journalled record, unchanged
    assert set(read_journal(journal, POLICIES)) == {d["key"] for d in inst}
    # asking for a policy the journal lacks recomputes those instances
    assert read_journal(journal, [*POLICIES, "dls"]) == {}


def test_records_hold_every_policy_and_bounds():
    rec = run_sweep([random_instance("fork_join", 12, 3)], POLICIES, workers=0,
                    progress=False, task_options=OPTS)[0]  # fmt: skip
    assert set(rec["results"]) == set(POLICIES) and rec["nodes"] == 12
    assert rec["largest_bound_cycles"] == max(rec["bounds"].values())
    for r in rec["results"].values():
        assert r["makespan"] >= rec["largest_bound_cycles"] and r["seconds"] > 0
    assert rec["exact"]["status"] == "skipped"
    json.dumps(rec)  # a journal line


@pytest.mark.slow
def test_dask_local_processes_give_the_same_records(tmp_path):
    inst = _instances(3)
    local = run_sweep(inst, POLICIES, workers=0, progress=False, task_options=OPTS)
    dask = run_sweep(inst, POLICIES, workers=1, progress=False, task_options=OPTS,
                     journal=tmp_path / "j.jsonl")  # fmt: skip
    strip = [{p: r["makespan"] for p, r in rec["results"].items()} for rec in local]
    assert [{p: r["makespan"] for p, r in rec["results"].items()} for rec in dask] == strip
    assert len((tmp_path / "j.jsonl").read_text().splitlines()) == 3


def test_bad_dags_lists_are_one_line():
    for text, words in [("random:x", "random:COUNT"), ("random:0", "at least 1"),
                        ("foo", "decode, random:COUNT or file:PATH"), ("", "empty")]:  # fmt: skip
        with pytest.raises(InputError, match=words):
            parse_dags(text)
