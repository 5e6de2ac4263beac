"""``gates.xml``: the decision document as JUnit XML, one ``<testsuite>`` per phase.

Each verdict is a ``<testcase>`` (``classname="perfgate.<phase>"``, ``name=<gate>``, ``<gate>[2]``
for a gate checked a second time) carrying its numbers as ``<properties>``:

- ``fail`` -> ``<failure type="perfgate.gate">``, text = summary + the fallback plans;
- ``invalid`` (the client did not keep up) -> ``<error type="perfgate.invalid">`` naming the figure;
- ``inconclusive`` -> ``<failure type="perfgate.inconclusive">`` when inconclusive verdicts fail the
  run, else ``<skipped>``;
- ``recorded`` / ``pass`` -> a passing test case;
- gates of the phase never checked in the run -> ``<skipped message="not evaluated in this run">``.

Built with junitparser (escaping is automatic); characters XML 1.0 forbids are made visible by
:func:`~pytest_perfgate.writers.clean_text`. Numbers are properties of their own, as numbers in the
gate's display unit (``observed``, ``lower``, ``upper``, ``threshold``, ``baseline``, ``n``,
``confidence``) with a ``unit`` property; ``observed_text``/``ci``/``threshold_text`` keep the
formatted text. A test case's ``time`` is the duration of the test that measured it. The output validates against the
bundled ``junit-10.xsd`` (:data:`SCHEMA_PATH`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..verdicts import wording as tx
from ..verdicts.record import VerdictRecord
from ..verdicts.wording import clean_text
from . import RenderedWriter, case_names, select_phases, strings, verdicts_of

SCHEMA_PATH = Path(__file__).with_name("junit-10.xsd")
"""The Jenkins JUnit schema (as used by pytest's tests) that ``gates.xml`` validates against."""

NOT_EVALUATED = "not evaluated in this run"


def _t(value: object) -> str:
    return clean_text(value)


def _plans(doc: Mapping[str, Any], names: list[str], heading: str) -> str:
    lines = ["- " + tx.fallback_line(name, tx.fallback_info(doc, name)) for name in names]
    return f"{heading}\n" + "\n".join(lines) if lines else ""


def _in_unit(v: VerdictRecord, x: float | None) -> float | None:
    """A number of verdict ``v`` in its display unit (``%`` for fractions), or None."""
    from ..config.units import UnitError, unit

    if x is None:
        return None
    try:
        return x / unit(clean_text(v.unit)).factor
    except UnitError:
        return x


def _num(x: float) -> str:
    return f"{x:.6g}"


def _properties(v: VerdictRecord) -> list[tuple[str, str]]:
    props = [("outcome", clean_text(v.outcome)), ("metric", tx.metric_text(v))]
    for key, value in (("observed", v.observed), ("lower", v.lower), ("upper", v.upper)):
        x = _in_unit(v, value)
        if x is not None:
            props.append((key, _num(x)))
    props.append(("unit", clean_text(v.unit)))
    props.append(("observed_text", tx.shown(v, "observed")))
    props.append(("ci", clean_text(v.ci)))
    if v.n is not None:
        props.append(("n", str(v.n)))
    thr = _in_unit(v, v.threshold)
    if thr is not None and v.direction:
        props.append(("threshold", _num(thr)))
        props.append(("direction", clean_text(v.direction)))
    props.append(("threshold_text", tx.threshold_text(v)))
    base = _in_unit(v, v.baseline)
    if base is not None:
        props.append(("baseline", _num(base)))
        props.append(("baseline_text", tx.baseline_text(v)))
    vb = v.vs_baseline
    if vb is not None and vb.change is not None:
        props.append(("baseline_run", clean_text(vb.baseline_run)))
        props.append(("baseline_run_change", _num(vb.change)))
        props.append(("baseline_run_regressed", "true" if vb.regressed else "false"))
    if v.band:
        props.append(("band", clean_text(v.band)))
    if v.needed:
        props.append(("needed", str(v.needed)))
    fallbacks = [clean_text(f) for f in v.fallbacks]
    if fallbacks:
        props.append(("fallbacks", ",".join(fallbacks)))
    if fallbacks and v.outcome == "fail":
        props.append(("triggered", ",".join(fallbacks)))
    if v.confidence is not None:
        props.append(("confidence", f"{v.confidence:g}"))
    props.append(("method", clean_text(v.method)))
    if v.note:
        props.append(("note", clean_text(v.note)))
    if v.test:
        props.append(("test", clean_text(v.test)))
    if v.samples:
        props.append(("samples", clean_text(v.samples)))
    return props


def _result(kind: type[Any], message: str, type_: str, text: str | None = None) -> Any:
    r = kind(message=_t(message), type_=type_)
    if text is not None:
        r.text = _t(text)
    return r


def _testcase(doc: Mapping[str, Any], phase: str, name: str, v: VerdictRecord, inconclusive: str) -> tuple[Any, str]:
    """The test case of verdict ``v`` and ``"failure"``, ``"skipped"``, ``"error"`` or ``"passed"``."""
    from junitparser import Error, Failure, Properties, Property, Skipped, TestCase

    dur = v.duration
    case = TestCase(_t(name), f"perfgate.{_t(phase)}", max(0.0, dur) if dur is not None else 0.0)
    props = Properties()  # type: ignore[no-untyped-call]
    for key, value in _properties(v):
        props.add_property(Property(_t(key), _t(value)))
    case.append(props)  # type: ignore[no-untyped-call]
    outcome = clean_text(v.outcome)
    summary = clean_text(v.summary) or f"gate {name}: {outcome}"
    fallbacks = [clean_text(f) for f in v.fallbacks]
    status = "passed"
    if outcome == "fail":
        text = "\n\n".join(x for x in (summary, _plans(doc, fallbacks, "Fallback plans triggered:")) if x)
        case.result = [_result(Failure, summary, "perfgate.gate", text)]
        status = "failure"
    elif outcome == "inconclusive":
        if inconclusive == "fail":
            text = "\n\n".join(x for x in (summary, _plans(doc, fallbacks, "Fallback plans if the gate fails:")) if x)
            case.result = [_result(Failure, summary, "perfgate.inconclusive", text)]
            status = "failure"
        else:
            case.result = [_result(Skipped, summary, "perfgate.inconclusive", summary)]
            status = "skipped"
    elif outcome == "error":
        case.result = [_result(Error, summary, "perfgate.requests_failed", summary)]
        status = "error"
    elif outcome == "invalid":  # the client did not keep up (load/validity.py): the figure is the message
        case.result = [_result(Error, summary, "perfgate.invalid", summary)]
        status = "error"
    elif outcome not in ("pass", "recorded"):
        case.result = [_result(Failure, f"unknown verdict outcome {outcome!r}", "perfgate.unknown", summary)]
        status = "failure"
    return case, status


def build(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> Any:
    """The junitparser ``JUnitXml`` (``<testsuites>``) of the selected phases."""
    from junitparser import JUnitXml, Skipped, TestCase, TestSuite

    xml = JUnitXml("perfgate")
    for phase, entry in select_phases(doc, phases):
        suite = TestSuite(_t(phase))
        meta: list[tuple[str, object]] = [
            ("title", entry.get("title")),
            ("outcome", entry.get("outcome")),
            ("depends_on", ",".join(strings(entry.get("depends_on")))),
            ("run_id", entry.get("run_id")),
            ("git_commit", entry.get("git_commit")),
            ("thresholds_file", Path(clean_text(entry.get("thresholds_file"))).name if entry.get("thresholds_file") else None),
            ("thresholds_sha256", entry.get("thresholds_sha256")),
            ("confidence", entry.get("confidence")),
            ("triggered_fallbacks", ",".join(strings(entry.get("triggered_fallbacks")))),
        ]
        for key, value in meta:
            if value not in (None, ""):
                suite.add_property(key, _t(value))
        fts = entry.get("fallback_tests")
        for ft in fts if isinstance(fts, list) else []:
            if isinstance(ft, Mapping):
                value = f"{clean_text(ft.get('fallback'))}: {clean_text(ft.get('outcome'))}"
                if ft.get("reason"):
                    value += f" ({clean_text(ft.get('reason'))})"
                suite.add_property(f"fallback_test:{clean_text(ft.get('test'))}", _t(value))
        vs = verdicts_of(entry)
        cases = [_testcase(doc, phase, name, v, inconclusive)[0] for name, v in zip(case_names(vs), vs, strict=True)]
        for gate in strings(entry.get("not_evaluated")):
            case = TestCase(_t(gate), f"perfgate.{_t(phase)}", 0.0)
            case.result = [Skipped(message=NOT_EVALUATED, type_="perfgate.not_evaluated")]
            cases.append(case)
        # all at once: add_testcase recounts the whole suite per case (10,000 gates: 34 s, quadratic)
        suite.add_testcases(cases)
        if entry.get("timestamp"):
            suite.timestamp = _t(entry.get("timestamp"))
        xml.add_testsuite(suite)
    xml.update_statistics()  # type: ignore[no-untyped-call]
    return xml


def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> str:
    """``gates.xml`` as text (UTF-8 declaration, indented)."""
    import xml.etree.ElementTree as ET

    root = build(doc, phases=phases, inconclusive=inconclusive)._elem
    for suite in root.iter("testsuite"):  # the bundled XSD wants properties first in a suite
        props = suite.find("properties")
        if props is not None:
            suite.remove(props)
            suite.insert(0, props)
        for key in ("tests", "failures", "errors", "skipped", "time"):
            suite.set(key, suite.get(key, "0"))
    for case in root.iter("testcase"):
        props = case.find("properties")
        if props is not None:
            case.remove(props)
            case.insert(0, props)
        t = case.get("time")
        case.set("time", f"{float(t):.6f}" if t else "0")
    root.set("errors", root.get("errors", "0"))
    root.attrib.pop("skipped", None)  # not in the bundled XSD's <testsuites>
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


class JUnitWriter(RenderedWriter):
    """Writes ``gates.xml``."""

    name = "junit"
    filename = "gates.xml"
    render = staticmethod(render)
