"""gates.xml: validated against the bundled JUnit XSD and read back with junitparser."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from junitparser import Failure, JUnitXml, Properties, Skipped, TestCase, TestSuite
from writer_docs import HOSTILE, make_doc, phase_entry, verdict

from pytest_perfgate import writers
from pytest_perfgate.writers import junit


def validate(path: Path) -> None:
    xmlschema.XMLSchema(junit.SCHEMA_PATH).validate(str(path))


def suites(path: Path) -> dict[str, TestSuite]:
    xml = JUnitXml.fromfile(str(path))
    return {s.name: s for s in xml}


def props_of(case: TestCase) -> dict[str, str]:
    props = case.child(Properties)  # type: ignore[no-untyped-call]
    assert props is not None, f"{case.name} has no properties"
    return {p.name: p.value for p in props}


def test_schema_is_bundled() -> None:
    assert junit.SCHEMA_PATH.is_file()
    xmlschema.XMLSchema(junit.SCHEMA_PATH)


def test_gates_xml_validates_and_reads_back(tmp_path: Path) -> None:
    path = junit.JUnitWriter().write(make_doc(), tmp_path)
    assert path == tmp_path / "gates.xml"
    validate(path)
    s = suites(path)
    assert list(s) == ["phase1", "phase2", "phase3"]
    p1 = s["phase1"]
    # 5 verdicts + 1 not evaluated; fail + inconclusive (fail mode) are failures
    assert (p1.tests, p1.failures, p1.errors, p1.skipped) == (6, 2, 0, 1)
    assert p1.timestamp == "2024-07-01T12:00:00+00:00"
    cases = {c.name: c for c in p1}
    assert set(cases) == {
        "long_context_ttft", "acceptance_rate", "spec_throughput", "ttft_p50", "long_context_ttft[2]", "tpot_p99",
    }
    assert all(c.classname == "perfgate.phase1" for c in p1)

    failed = cases["long_context_ttft"]
    (res,) = failed.result
    assert isinstance(res, Failure)
    assert res.type == "perfgate.gate"
    assert res.message.startswith("gate long_context_ttft: ttft p99 = 212 ms")
    text = res.text or ""
    for needle in ("tiered_kv_cache", "Tiered KV cache", "docs/fallbacks.md#plan-a", "page swap 30-50 ms",
                   "sequence_parallel", "https://example.org/sp"):
        assert needle in text
    props = props_of(failed)
    assert props["outcome"] == "fail"
    # numbers as numbers in the gate's unit, with a unit property; the formatted text beside them
    assert (props["observed"], props["lower"], props["upper"], props["unit"]) == ("212", "200", "230", "ms")
    assert props["observed_text"] == "212 ms"
    assert props["ci"] == "95% CI 200 ms - 230 ms, n=500"
    assert props["n"] == "500"
    assert (props["threshold"], props["direction"], props["threshold_text"]) == ("150", "max", "max 150 ms")
    assert props["baseline"] == "320" and props["baseline_text"].startswith("320 ms")
    assert float(failed.time) == 0.0  # no test duration in this hand-built document
    assert props["fallbacks"] == "tiered_kv_cache,sequence_parallel"
    assert props["triggered"] == "tiered_kv_cache,sequence_parallel"
    assert props["test"] == "perf_tests/test_phase1.py::test_ttft"

    passed = cases["acceptance_rate"]
    assert passed.is_passed
    props = props_of(passed)
    assert props["band"] == "large gain"
    assert props["threshold_text"] == "min 70.0%" and props["unit"] == "%"
    assert "triggered" not in props  # only a failing gate triggers its fallbacks

    inc = cases["spec_throughput"]
    (res,) = inc.result
    assert isinstance(res, Failure) and res.type == "perfgate.inconclusive"
    assert props_of(inc)["needed"] == "1200"

    assert cases["ttft_p50"].is_passed
    assert props_of(cases["ttft_p50"])["threshold_text"] == "recorded"
    assert cases["long_context_ttft[2]"].is_passed

    (skip,) = cases["tpot_p99"].result
    assert isinstance(skip, Skipped) and skip.message == "not evaluated in this run"

    assert (s["phase2"].tests, s["phase2"].failures, s["phase2"].skipped) == (1, 0, 0)
    assert (s["phase3"].tests, s["phase3"].failures, s["phase3"].skipped) == (1, 0, 1)


def test_suite_properties_and_totals(tmp_path: Path) -> None:
    path = junit.JUnitWriter().write(make_doc(), tmp_path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("8", "2", "0")
    p1 = suites(path)["phase1"]
    props = {p.name: p.value for p in p1.properties()}  # type: ignore[no-untyped-call]
    assert props["outcome"] == "failed"
    assert props["run_id"] == "20240701T120000Z-abcdef"
    assert props["thresholds_sha256"] == "ab" * 32
    assert props["triggered_fallbacks"] == "sequence_parallel,tiered_kv_cache"
    assert props["fallback_test:perf_tests/test_fb.py::test_tiered"] == "tiered_kv_cache: failed (ttft 180 ms)"


def test_inconclusive_warn_is_skipped(tmp_path: Path) -> None:
    path = junit.JUnitWriter().write(make_doc(), tmp_path, inconclusive="warn")
    validate(path)
    p1 = suites(path)["phase1"]
    assert (p1.tests, p1.failures, p1.skipped) == (6, 1, 2)
    (res,) = {c.name: c for c in p1}["spec_throughput"].result
    assert isinstance(res, Skipped)
    assert "inconclusive" in res.message


def test_phase_selection(tmp_path: Path) -> None:
    path = junit.JUnitWriter().write(make_doc(), tmp_path, phases=["phase2", "nope"])
    validate(path)
    assert list(suites(path)) == ["phase2"]


def test_empty_document(tmp_path: Path) -> None:
    path = junit.JUnitWriter().write({"schema": "pytest-perfgate/decisions/1", "phases": {}}, tmp_path)
    validate(path)
    assert list(suites(path)) == []


def test_hostile_strings_survive_escaping(tmp_path: Path) -> None:
    doc = make_doc()
    v = verdict(HOSTILE, "fail", fallbacks=(HOSTILE,), note=HOSTILE, test=HOSTILE, band=HOSTILE)
    v["summary"] = HOSTILE + "\nsecond line"
    v["ci"] = HOSTILE
    v["display"]["observed"] = HOSTILE
    doc["fallbacks"][HOSTILE] = {"title": HOSTILE, "cost": HOSTILE, "doc": HOSTILE}
    doc["phases"][HOSTILE] = phase_entry(
        HOSTILE, [v], outcome=HOSTILE, title=HOSTILE, run_id=HOSTILE, not_evaluated=[HOSTILE],
        fallback_tests=[{"test": HOSTILE, "fallback": HOSTILE, "outcome": "failed", "reason": HOSTILE}],
        timestamp=HOSTILE,
    )
    path = junit.JUnitWriter().write(doc, tmp_path)
    validate(path)
    raw = path.read_text(encoding="utf-8")
    assert "<img" not in raw and "</script>" not in raw and "]]>" not in raw
    for bad in ("\x00", "\x07", "\x1b", "\ud800", "\ufffe"):
        assert bad not in raw
    s = suites(path)
    cleaned = writers.clean_text(HOSTILE)
    assert "#x1B" in cleaned and "#xD800" in cleaned
    suite = s[cleaned]
    case = next(iter(suite))
    assert case.name == cleaned
    (res,) = case.result
    assert isinstance(res, Failure)
    assert res.message == cleaned + "\nsecond line"  # newline in an attribute survives (&#10;)
    assert cleaned in (res.text or "")
    assert props_of(case)["observed_text"] == cleaned


def test_real_verdict_to_dict_is_accepted(tmp_path: Path) -> None:
    """The writer reads what ``Verdict.to_dict()`` produces (including infinite bounds -> None)."""
    from pytest_perfgate.verdicts.verdict import Verdict

    v = Verdict(gate="g", phase="p", outcome="inconclusive", metric="ttft", statistic="p99", observed=0.2,
                lower=0.1, upper=math.inf, n=3, confidence=0.95, method="order-statistic", unit="ms",
                direction="max", threshold=0.15, fallbacks=("a",))
    d = v.to_dict() | {"test": "t.py::t", "duration": 1.25}
    doc = {"schema": "pytest-perfgate/decisions/1", "fallbacks": {"a": {"title": "A", "cost": "", "doc": ""}},
           "phases": {"p": phase_entry("p", [d], outcome="inconclusive")}}
    path = junit.JUnitWriter().write(doc, tmp_path)
    validate(path)
    case = next(iter(suites(path)["p"]))
    props = props_of(case)
    assert props["observed"] == "200" and props["lower"] == "100" and "upper" not in props  # +inf: no number
    assert props["unit"] == "ms" and props["observed_text"] == "200 ms"
    assert float(case.time) == 1.25  # the measuring test's duration
    assert "Fallback plans if the gate fails" in (case.result[0].text or "")


def test_registry_and_write_all(tmp_path: Path) -> None:
    assert writers.names() == ["html", "junit", "markdown"]
    w = writers.get("junit")
    assert isinstance(w, writers.Writer)
    assert (w.name, w.filename) == ("junit", "gates.xml")
    with pytest.raises(ValueError, match="available: html, junit, markdown"):
        writers.get("pdf")
    paths = writers.write_all(make_doc(), tmp_path / "out")
    assert sorted(p.name for p in paths) == ["gates.xml", "report.html", "summary.md"]
    assert all(p.is_file() for p in paths)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_write_all_keeps_going_after_a_failure(tmp_path: Path) -> None:
    class Broken:
        name = "broken"
        filename = "broken.txt"

        def write(self, doc: Any, out_dir: Path, *, phases: Any = None, inconclusive: str = "fail") -> Path:
            raise RuntimeError("boom")

    writers.register("broken", Broken)
    try:
        with pytest.raises(writers.WriterError, match="broken.*boom") as info:
            writers.write_all(make_doc(), tmp_path, writers=["broken", "junit"])
        assert [p.name for p in info.value.written] == ["gates.xml"]
    finally:
        del writers.WRITERS["broken"]


def test_atomic_write_text_replaces_and_cleans_up(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "f.txt"
    writers.atomic_write_text(p, "one")
    writers.atomic_write_text(p, "two\n")
    assert p.read_text(encoding="utf-8") == "two\n"
    with pytest.raises(UnicodeEncodeError):
        writers.atomic_write_text(p, "\ud800")
    assert p.read_text(encoding="utf-8") == "two\n"
    assert [x.name for x in p.parent.iterdir()] == ["f.txt"]


def test_many_gates_are_counted_once_per_suite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 31: junitparser's add_testcase recounts the whole suite per case (10,006 gates: 34 s of
    a 272-s session). The suites' statistics are computed once each, and they are right."""
    calls = {"n": 0}
    real = TestSuite.update_statistics

    def counted(self: TestSuite) -> None:
        calls["n"] += 1
        real(self)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(TestSuite, "update_statistics", counted)
    vs = [verdict(f"g{i:04d}", "fail" if i % 10 == 0 else "pass") for i in range(500)]
    doc = {**make_doc(), "phases": {"phase1": phase_entry("phase1", vs, not_evaluated=["never"])}}
    path = junit.JUnitWriter().write(doc, tmp_path)
    assert calls["n"] <= 2, f"{calls['n']} statistics passes for 1 suite"
    monkeypatch.undo()
    validate(path)
    s = suites(path)["phase1"]
    assert (s.tests, s.failures, s.errors, s.skipped) == (501, 50, 0, 1)
