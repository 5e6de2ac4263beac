"""A typed verdict record end to end (issue 23): ``Verdict.from_dict`` is ``to_dict``'s round trip,
on generated verdicts (hypothesis) and on seeded real evaluations of every statistic kind."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_perfgate
from pytest_perfgate import evaluate, make_proportion, make_samples
from pytest_perfgate.config import parse_thresholds
from pytest_perfgate.store.records import same_verdict
from pytest_perfgate.verdicts.record import BaselineRecord, VerdictRecord
from pytest_perfgate.verdicts.verdict import Verdict
from pytest_perfgate.verdicts.wording import bounds_cell, metric_text, outcome_text, shown, threshold_text


def same(a: Verdict, b: Verdict) -> bool:
    """Field by field, NaN equal to NaN."""
    for f in fields(Verdict):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y:
            return False
    return True


def round_trips(v: Verdict) -> None:
    d = v.to_dict()
    json.dumps(d, allow_nan=False)  # what decisions.json and the JUnit property hold
    back = Verdict.from_dict(json.loads(json.dumps(d)))
    assert same(back, replace(v, fallback_info=())), (v, back)
    assert back.to_dict() == d
    assert same_verdict(v, d) and same_verdict(back, v)


number = st.one_of(st.floats(-1e6, 1e6), st.just(math.inf), st.just(-math.inf), st.just(math.nan))
opt = st.one_of(st.none(), st.floats(-1e6, 1e6))
name = st.text("abcdefgh_ 0123", min_size=1, max_size=12)

verdicts = st.builds(
    Verdict,
    gate=name, phase=name, outcome=st.sampled_from(["pass", "fail", "inconclusive", "recorded", "error"]),
    metric=st.sampled_from(["ttft", "tpot", "acceptance_rate", "output_throughput", "memory"]),
    statistic=st.sampled_from(["p99", "p50", "mean", "value", "rate", "trim10"]),
    observed=number, lower=number, upper=number, n=st.integers(0, 10**6), confidence=st.floats(0.5, 0.9999),
    method=st.sampled_from(["order-statistic", "single", "none", "clopper-pearson", "Welch t over runs (3 vs 3)"]),
    unit=st.sampled_from(["ms", "s", "%", "tok/s", "", "GiB"]), direction=st.sampled_from([None, "max", "min"]),
    threshold=opt, baseline=opt, needed=st.one_of(st.none(), st.integers(1, 10**6)),
    fallbacks=st.lists(name, max_size=3).map(tuple), band=st.one_of(st.none(), name),
    compare=st.sampled_from([None, "ratio", "difference", "reduction"]), note=st.text(max_size=30),
    details=st.dictionaries(name, st.floats(-1e6, 1e6), max_size=3),
    floor=opt, floor_kind=st.sampled_from(["", "floor", "ceiling"]), floor_multiple=opt, efficiency=opt,
    efficiency_kind=st.sampled_from(["", "MFU", "MBU"]), floor_basis=st.text(max_size=10),
)


@settings(max_examples=300, deadline=None, derandomize=True)  # CI: the same examples every run
@given(verdicts)
def test_generated_verdicts_round_trip(v: Verdict) -> None:
    round_trips(v)


def test_seeded_evaluations_of_every_kind_round_trip() -> None:
    doc: dict[str, Any] = {"phases": {"p": {}}, "gates": {
        "q": {"metric": "ttft", "statistic": "p99", "max": "150 ms"},
        "m": {"metric": "ttft", "statistic": "mean", "max": "120 ms"},
        "v": {"metric": "ttft", "statistic": "value", "max": "120 ms"},
        "r": {"metric": "acceptance_rate", "statistic": "rate", "min": "60%"},
        "pd": {"metric": "quality_loss", "statistic": "mean", "max": "3%", "params": {"paired": "discordant"}},
        "cr": {"metric": "ttft", "statistic": "p50", "compare": "ratio", "max": 0.9},
    }}
    for g in doc["gates"].values():
        g["phase"] = "p"
    th = parse_thresholds(doc, Path("thresholds.toml"))
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n = int(rng.choice([1, 5, 40, 400]))
        lat = make_samples(rng.lognormal(np.log(0.1), 0.4, n), "s")
        k = int(rng.integers(0, n + 1))
        pairs = make_samples(rng.choice([-1.0, 0.0, 1.0], size=n, p=[0.03, 0.9, 0.07]))
        for v in (evaluate(th.gate("q"), lat, thresholds=th), evaluate(th.gate("m"), lat, thresholds=th),
                  evaluate(th.gate("v"), lat, thresholds=th), evaluate(th.gate("r"), make_proportion(k, n), thresholds=th),
                  evaluate(th.gate("pd"), pairs, thresholds=th),
                  evaluate(th.gate("cr"), (lat, make_samples(rng.lognormal(np.log(0.12), 0.4, n), "s")), thresholds=th)):
            round_trips(v)


def test_a_record_reads_what_the_writers_read() -> None:
    v = Verdict(gate="g", phase="p", outcome="inconclusive", metric="ttft", statistic="p99", observed=0.2,
                lower=0.1, upper=math.inf, n=50, confidence=0.95, method="order-statistic", unit="ms",
                direction="max", threshold=0.15, needed=299)
    d = v.to_dict()
    r = VerdictRecord.read(d)
    assert (r.observed, r.lower, r.upper, r.exact("upper"), r.n, r.needed) == (0.2, 0.1, None, math.inf, 50, 299)
    assert shown(r, "observed") == shown(d, "observed") == "200 ms"
    assert metric_text(d) == "ttft p99" and threshold_text(d) == "max 150 ms"
    assert outcome_text(d) == "inconclusive (need >= 299 samples, 249 more)"
    assert bounds_cell(d) == "100 ms - unbounded (n=50)"
    # an older or hand-edited document: missing and mistyped fields read as empty, never raise
    old = VerdictRecord.read({"outcome": "pass", "n": "many", "lower": None, "details": {"x": "y", "z": 1}})
    assert (old.n, old.exact("lower"), dict(old.details)) == (None, -math.inf, {"z": 1.0})
    assert math.isnan(old.exact("observed")) and Verdict.from_dict(old).outcome == "pass"


# What reads stored verdicts outside verdicts/: the writers, the store, the command line, the terminal
# table and the re-tune's read-back. Their ``.get(`` calls with a verdict field's name are on these
# other documents only (a phase entry of decisions.json, a fallback test, a history row, a data
# file's header or part, the decision document), never on a verdict.
READERS = ("writers/*.py", "store/*.py", "cli/*.py", "load/retune.py")
NOT_VERDICTS = {"entry", "e", "ft", "row", "self.header", "obj", "doc"}
# the trend site's own document (trend.json, written by writers/trend_site.py from store/trend.py's
# typed Series and Points): a series, a point, the points of a series
TREND_SITE = ("writers/trend_site.py", {"s", "p", "pts[i]"})
VERDICT_NAMES = {"v", "d", "r", "verdict", "live", "vb", "base", "vs_base", "last", "stored"}


def typed_reading_violations(root: Path) -> list[str]:
    """``file:line receiver.get("key")`` of every read of a stored verdict as a dict in ``root``."""
    import ast

    keys = ({f.name for f in fields(VerdictRecord)} | {f.name for f in fields(BaselineRecord)}) - {"raw"}
    out = []
    for path in sorted(p for pattern in READERS for p in root.glob(pattern)):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
                continue
            receiver = ast.unparse(node.func.value)
            key = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if str(path.relative_to(root)) == TREND_SITE[0] and receiver in TREND_SITE[1]:
                continue
            if receiver in VERDICT_NAMES or "verdict" in receiver or (key in keys and receiver not in NOT_VERDICTS):
                out.append(f"{path.relative_to(root)}:{node.lineno} {receiver}.get({key!r})")
    return out


def test_stored_verdicts_are_read_typed_everywhere() -> None:
    """A renamed field of a stored verdict is a mypy error in every reader, not a silent None in a
    report: they read it through VerdictRecord (issue 35)."""
    assert typed_reading_violations(Path(pytest_perfgate.__file__).parent) == []


def test_the_scan_finds_dict_reads(tmp_path: Path) -> None:
    (tmp_path / "writers").mkdir()
    (tmp_path / "writers" / "w.py").write_text(
        'def f(v, entry, r):\n    return v.get("outcome"), entry.get("outcome"), r["verdict"].get("display"), entry.get("title")\n')
    assert typed_reading_violations(tmp_path) == ["writers/w.py:2 v.get('outcome')",
                                                  "writers/w.py:2 r['verdict'].get('display')"]


def test_what_the_recorder_and_the_store_add_reads_typed() -> None:
    r = VerdictRecord.read({"gate": "g", "test": "t.py::x", "label": "4 KiB", "samples": "data/g.json", "run_id": "r1",
                            "runs": ["a", "b"], "duration": 1.5, "curve": [{"level": 1}, "junk"],
                            "vs_baseline": {"baseline_run": "r0", "change": 0.31, "tolerance": 0.05, "regressed": True,
                                            "smaller_is_better": False}})
    assert (r.test, r.label, r.samples, r.run_id, r.runs, r.duration) == ("t.py::x", "4 KiB", "data/g.json", "r1",
                                                                           ("a", "b"), 1.5)
    assert r.curve == ({"level": 1},)
    assert r.vs_baseline == BaselineRecord("r0", "", 0.31, 0.05, True, False, False)
    assert VerdictRecord.read({"vs_baseline": "x", "duration": "long"}).vs_baseline is None
    assert VerdictRecord.read({"duration": float("inf")}).duration is None
