"""``gates.xml``: the decision document as JUnit XML, one ``<testsuite>`` per phase.

Each verdict is a ``<testcase>`` (``classname="perfgate.<phase>"``, ``name=<gate>``, ``<gate>[2]``
for a gate checked a second time) carrying its numbers as ``<properties>``:

- ``fail`` -> ``<failure type="perfgate.gate">``, text = summary + the fallback plans;
- ``inconclusive`` -> ``<failure type="perfgate.inconclusive">`` when inconclusive verdicts fail the
  run, else ``<skipped>``;
- ``recorded`` / ``pass`` -> a passing test case;
- gates of the phase never checked in the run -> ``<skipped message="not evaluated in this run">``.

Built with :mod:`xml.etree.ElementTree` (escaping is automatic); characters XML 1.0 forbids are
made visible by :func:`~pytest_perfgate.writers.clean_text`. The output validates against the
bundled ``junit-10.xsd`` (:data:`SCHEMA_PATH`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import (
    RenderedWriter,
    baseline_text,
    case_names,
    clean_text,
    fallback_info,
    metric_text,
    number,
    select_phases,
    shown,
    strings,
    threshold_text,
    verdicts_of,
)

SCHEMA_PATH = Path(__file__).with_name("junit-10.xsd")
"""The Jenkins JUnit schema (as used by pytest's tests) that ``gates.xml`` validates against."""

NOT_EVALUATED = "not evaluated in this run"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: object) -> ET.Element:
    el = ET.SubElement(parent, tag, {k: clean_text(v) for k, v in attrs.items()})
    if text is not None:
        el.text = clean_text(text)
    return el


def _plans(doc: Mapping[str, Any], names: list[str], heading: str) -> str:
    lines = []
    for name in names:
        info = fallback_info(doc, name)
        line = f"- {name}"
        if info["title"]:
            line += f': "{info["title"]}"'
        if info["doc"]:
            line += f" (doc: {info['doc']})"
        if info["cost"]:
            line += f" [cost: {info['cost']}]"
        if not any(info.values()):
            line += " (not described in thresholds.toml)"
        lines.append(line)
    return f"{heading}\n" + "\n".join(lines) if lines else ""


def _properties(v: Mapping[str, Any]) -> list[tuple[str, str]]:
    props = [
        ("outcome", clean_text(v.get("outcome"))),
        ("metric", metric_text(v)),
        ("observed", shown(v, "observed")),
        ("ci", clean_text(v.get("ci"))),
        ("n", clean_text(v.get("n"))),
        ("threshold", threshold_text(v)),
    ]
    if v.get("baseline") is not None:
        props.append(("baseline", baseline_text(v)))
    if v.get("band"):
        props.append(("band", clean_text(v.get("band"))))
    if v.get("needed"):
        props.append(("needed", clean_text(v.get("needed"))))
    fallbacks = strings(v.get("fallbacks"))
    if fallbacks:
        props.append(("fallbacks", ",".join(fallbacks)))
    if fallbacks and v.get("outcome") == "fail":
        props.append(("triggered", ",".join(fallbacks)))
    conf = number(v.get("confidence"))
    if conf is not None:
        props.append(("confidence", f"{conf:g}"))
    props.append(("method", clean_text(v.get("method"))))
    if v.get("note"):
        props.append(("note", clean_text(v.get("note"))))
    if v.get("test"):
        props.append(("test", clean_text(v.get("test"))))
    return props


def _testcase(
    suite: ET.Element, doc: Mapping[str, Any], phase: str, name: str, v: Mapping[str, Any], inconclusive: str
) -> str:
    """Append the test case of verdict ``v``; return ``"failure"``, ``"skipped"`` or ``"passed"``."""
    case = _sub(suite, "testcase", classname=f"perfgate.{phase}", name=name, time="0")
    props = _sub(case, "properties")
    for key, value in _properties(v):
        _sub(props, "property", name=key, value=value)
    outcome = clean_text(v.get("outcome"))
    summary = clean_text(v.get("summary")) or f"gate {name}: {outcome}"
    fallbacks = strings(v.get("fallbacks"))
    if outcome == "fail":
        text = "\n\n".join(x for x in (summary, _plans(doc, fallbacks, "Fallback plans triggered:")) if x)
        _sub(case, "failure", text, message=summary, type="perfgate.gate")
        return "failure"
    if outcome == "inconclusive":
        if inconclusive == "fail":
            text = "\n\n".join(x for x in (summary, _plans(doc, fallbacks, "Fallback plans if the gate fails:")) if x)
            _sub(case, "failure", text, message=summary, type="perfgate.inconclusive")
            return "failure"
        _sub(case, "skipped", summary, message=summary, type="perfgate.inconclusive")
        return "skipped"
    if outcome in ("pass", "recorded"):
        return "passed"
    if outcome == "error":
        _sub(case, "error", summary, message=summary, type="perfgate.requests_failed")
        return "error"
    _sub(case, "failure", summary, message=f"unknown verdict outcome {outcome!r}", type="perfgate.unknown")
    return "failure"


def build(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> ET.Element:
    """The ``<testsuites>`` element for the selected phases."""
    root = ET.Element("testsuites", {"name": "perfgate"})
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for phase, entry in select_phases(doc, phases):
        suite = _sub(root, "testsuite", name=phase)
        counts = {"failure": 0, "skipped": 0, "passed": 0, "error": 0}
        props = _sub(suite, "properties")
        meta: list[tuple[str, object]] = [
            ("title", entry.get("title")),
            ("outcome", entry.get("outcome")),
            ("depends_on", ",".join(strings(entry.get("depends_on")))),
            ("run_id", entry.get("run_id")),
            ("git_commit", entry.get("git_commit")),
            ("thresholds_file", entry.get("thresholds_file")),
            ("thresholds_sha256", entry.get("thresholds_sha256")),
            ("confidence", entry.get("confidence")),
            ("triggered_fallbacks", ",".join(strings(entry.get("triggered_fallbacks")))),
        ]
        for key, value in meta:
            if value not in (None, ""):
                _sub(props, "property", name=key, value=value)
        fts = entry.get("fallback_tests")
        for ft in fts if isinstance(fts, list) else []:
            if isinstance(ft, Mapping):
                value = f"{clean_text(ft.get('fallback'))}: {clean_text(ft.get('outcome'))}"
                if ft.get("reason"):
                    value += f" ({clean_text(ft.get('reason'))})"
                _sub(props, "property", name=f"fallback_test:{clean_text(ft.get('test'))}", value=value)
        vs = verdicts_of(entry)
        for name, v in zip(case_names(vs), vs, strict=True):
            counts[_testcase(suite, doc, phase, name, v, inconclusive)] += 1
        for gate in strings(entry.get("not_evaluated")):
            case = _sub(suite, "testcase", classname=f"perfgate.{phase}", name=gate, time="0")
            _sub(case, "skipped", message=NOT_EVALUATED, type="perfgate.not_evaluated")
            counts["skipped"] += 1
        if not len(props):
            suite.remove(props)
        tests = sum(counts.values())
        suite.set("tests", str(tests))
        suite.set("failures", str(counts["failure"]))
        suite.set("errors", str(counts["error"]))
        suite.set("skipped", str(counts["skipped"]))
        suite.set("time", "0")
        if entry.get("timestamp"):
            suite.set("timestamp", clean_text(entry.get("timestamp")))
        totals["tests"] += tests
        totals["failures"] += counts["failure"]
        totals["errors"] += counts["error"]
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", str(totals["errors"]))
    root.set("time", "0")
    return root


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> str:
    """``gates.xml`` as text (UTF-8 declaration, indented)."""
    root = build(doc, phases=phases, inconclusive=inconclusive)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


class JUnitWriter(RenderedWriter):
    """Writes ``gates.xml``."""

    name = "junit"
    filename = "gates.xml"
    render = staticmethod(render)
