"""summary.md: the Markdown report for $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_perfgate.units import format_value, unit
from pytest_perfgate.writers import markdown

# The document builders are repeated in each writer test module (tests/writers has no package/conftest).
HOSTILE = "</script><img src=x onerror=alert(1)> ]]> & \"quote' \x00\x07\x1b[31m \ud800 \udfff \ufffe end"


def verdict(
    gate: str = "long_context_ttft",
    outcome: str = "pass",
    *,
    phase: str = "phase1",
    metric: str = "ttft",
    statistic: str = "p99",
    observed: float | None = 0.120,
    lower: float | None = 0.110,
    upper: float | None = 0.131,
    threshold: float | None = 0.150,
    direction: str | None = "max",
    baseline: float | None = 0.320,
    n: int = 500,
    method: str = "order-statistic",
    unit_name: str = "ms",
    fallbacks: tuple[str, ...] = (),
    band: str | None = None,
    needed: int | None = None,
    note: str = "",
    test: str = "perf_tests/test_phase1.py::test_ttft",
) -> dict[str, Any]:
    """A verdict dict shaped like ``Verdict.to_dict()`` plus ``test``."""
    u = unit(unit_name)

    def fmt(x: float | None) -> str:
        return "n/a" if x is None else format_value(x, u)

    imp = None if not baseline or observed is None else (baseline - observed) / abs(baseline)
    if imp is not None and direction == "min":
        imp = -imp
    ci = "single measurement" if method == "single" else f"95% CI {fmt(lower)} - {fmt(upper)}, n={n}"
    return {
        "gate": gate, "phase": phase, "outcome": outcome, "metric": metric, "statistic": statistic,
        "observed": observed, "lower": lower, "upper": upper, "n": n, "confidence": 0.95, "method": method,
        "unit": unit_name, "direction": direction, "threshold": threshold, "baseline": baseline,
        "needed": needed, "fallbacks": list(fallbacks), "band": band, "compare": None, "note": note,
        "details": {}, "improvement": imp, "ci": ci,
        "summary": f"gate {gate}: {metric} {statistic} = {fmt(observed)} ({ci}) {outcome}",
        "display": {k: fmt(v) for k, v in
                    (("observed", observed), ("lower", lower), ("upper", upper),
                     ("threshold", threshold), ("baseline", baseline))},
        "test": test,
    }


def phase_entry(name: str, verdicts: list[dict[str, Any]], *, outcome: str = "passed", **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "phase": name, "title": f"title of {name}", "depends_on": [], "outcome": outcome,
        "timestamp": "2024-07-01T12:00:00+00:00", "git_commit": "0123456789abcdef0123456789abcdef01234567",
        "thresholds_file": "/repo/thresholds.toml", "thresholds_sha256": "ab" * 32,
        "run_id": "20240701T120000Z-abcdef", "confidence": 0.95, "verdicts": verdicts,
        "triggered_fallbacks": sorted({f for v in verdicts if v["outcome"] == "fail" for f in v["fallbacks"]}),
        "fallback_tests": [], "not_evaluated": [],
    }
    entry.update(extra)
    return entry


FALLBACKS = {
    "tiered_kv_cache": {"title": "Tiered KV cache", "cost": "page swap 30-50 ms", "doc": "docs/fallbacks.md#plan-a"},
    "sequence_parallel": {"title": "Sequence parallelism", "cost": "high complexity", "doc": "https://example.org/sp"},
}


def make_doc() -> dict[str, Any]:
    p1 = [
        verdict("long_context_ttft", "fail", observed=0.212, lower=0.2, upper=0.23,
                fallbacks=("tiered_kv_cache", "sequence_parallel")),
        verdict("acceptance_rate", "pass", metric="acceptance_rate", statistic="rate", observed=0.82,
                lower=0.78, upper=0.85, threshold=0.7, direction="min", baseline=None, unit_name="%",
                method="clopper-pearson", band="large gain", fallbacks=("tiered_kv_cache",)),
        verdict("spec_throughput", "inconclusive", metric="output_throughput", statistic="mean",
                observed=0.81, lower=0.74, upper=0.88, threshold=0.8, direction="min", baseline=None,
                unit_name="", method="bootstrap", needed=1200, n=100),
        verdict("ttft_p50", "recorded", statistic="p50", threshold=None, direction=None, baseline=None,
                lower=None, upper=None),
        verdict("long_context_ttft", "pass", test="perf_tests/test_phase1.py::test_ttft_again"),
    ]
    p2 = [verdict("mm_throughput", "pass", phase="phase2", metric="output_throughput", statistic="value",
                  observed=31.0, lower=31.0, upper=31.0, threshold=30.0, direction="min", baseline=15.0,
                  unit_name="tok/s", method="single", n=1)]
    return {
        "schema": "pytest-perfgate/decisions/1",
        "updated": "2024-07-01T12:00:00+00:00",
        "fallbacks": FALLBACKS,
        "phases": {
            "phase1": phase_entry(
                "phase1", p1, outcome="failed", not_evaluated=["tpot_p99"],
                fallback_tests=[{"test": "perf_tests/test_fb.py::test_tiered", "fallback": "tiered_kv_cache",
                                 "outcome": "failed", "reason": "ttft 180 ms"}],
            ),
            "phase2": phase_entry("phase2", p2, depends_on=["phase1"]),
            "phase3": phase_entry("phase3", [], outcome="not run", not_evaluated=["cross_node_p99"]),
        },
    }


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The rows of the table whose header line starts with ``header_start``, split on unescaped pipes."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_summary_md_layout(tmp_path: Path) -> None:
    path = markdown.MarkdownWriter().write(make_doc(), tmp_path)
    assert path == tmp_path / "summary.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Performance gates\n")
    assert "## Phase phase1: title of phase1 - FAILED" in text
    assert "## Phase phase2: title of phase2 - PASSED" in text
    assert "## Phase phase3: title of phase3 - NOT RUN" in text
    header = "| gate | metric | observed | CI | threshold | baseline | outcome | fallback |"
    assert text.count(header) == 2  # phase3 checked no gate
    rows = table_rows(text, header)
    assert len(rows) == 5 and all(len(r) == 8 for r in rows)
    fail = rows[0]
    assert fail[0] == r"long\_context\_ttft"
    assert fail[2:5] == ["212 ms", "95% CI 200 ms - 230 ms, n=500", "max 150 ms"]
    assert fail[5] == "320 ms (34% better)"
    assert fail[6] == "fail"
    assert r"tiered\_kv\_cache (triggered)" in fail[7]
    assert rows[1][6] == "pass (band: large gain)"
    assert rows[2][6] == r"inconclusive (need \>= 1200 samples, 1100 more)"
    assert rows[3][4] == "recorded"
    assert rows[4][0] == r"long\_context\_ttft\[2\]"
    assert r"Not evaluated in this run: tpot\_p99" in text
    assert r"Not evaluated in this run: cross\_node\_p99" in text


def test_triggered_fallbacks_and_fallback_tests(tmp_path: Path) -> None:
    text = markdown.render(make_doc())
    assert "### Triggered fallbacks" in text
    assert r"- **tiered\_kv\_cache**: Tiered KV cache (cost: page swap 30-50 ms), see docs/fallbacks.md\#plan-a" in text
    assert "see <https://example.org/sp>" in text  # an http(s) doc becomes an autolink
    rows = table_rows(text, "| test | fallback | outcome | reason |")
    assert rows == [[r"perf\_tests/test\_fb.py::test\_tiered", r"tiered\_kv\_cache", "failed", "ttft 180 ms"]]


def test_statistics_notes_name_the_methods_used() -> None:
    text = markdown.render(make_doc())
    notes = text.split("### Notes on the statistics", 1)[1]
    assert "one-sided at the stated confidence level" in notes
    for m in ("order-statistic", "clopper-pearson", "bootstrap", "single"):
        assert f"- {m}:" in notes
    assert "- t:" not in notes  # no mean gate with a t bound in this document
    assert "Inconclusive gates fail the run" in notes
    assert "only warn" in markdown.render(make_doc(), inconclusive="warn")


def test_phase_selection_and_empty_document() -> None:
    text = markdown.render(make_doc(), phases=["phase2"])
    assert "## Phase phase2" in text and "## Phase phase1" not in text
    empty = markdown.render({"phases": {}})
    assert "No phase results recorded." in empty


def test_cells_escape_pipes_and_newlines() -> None:
    doc = make_doc()
    v = doc["phases"]["phase2"]["verdicts"][0]
    v["gate"] = "a|b\nc\r\nd"
    v["ci"] = "x | y"
    text = markdown.render(doc)
    phase2 = text.split("## Phase phase2", 1)[1]
    (row,) = table_rows(phase2, "| gate | metric |")
    assert len(row) == 8
    assert row[0] == r"a\|b<br>c<br>d"
    assert row[3] == r"x \| y"
    assert r"a\|b<br>c<br>d" in text
    assert r"x \| y" in text


def test_hostile_strings_are_inert(tmp_path: Path) -> None:
    doc = make_doc()
    v = verdict(HOSTILE, "fail", fallbacks=(HOSTILE,), note=HOSTILE, test=HOSTILE)
    v["summary"] = HOSTILE
    v["ci"] = HOSTILE + "\n| injected | row |"
    doc["fallbacks"][HOSTILE] = {"title": HOSTILE, "cost": HOSTILE, "doc": "javascript:alert(1)"}
    doc["phases"][HOSTILE] = phase_entry(
        HOSTILE, [v, verdict(outcome=HOSTILE)], outcome=HOSTILE, title=HOSTILE, run_id=HOSTILE,
        not_evaluated=[HOSTILE], depends_on=[HOSTILE], timestamp=HOSTILE, thresholds_file=HOSTILE,
        fallback_tests=[{"test": HOSTILE, "fallback": HOSTILE, "outcome": "failed", "reason": HOSTILE}],
    )
    path = markdown.MarkdownWriter().write(doc, tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "</script>" not in text
    assert not re.search(r"(?<!\\)<(img|/?script)", text)  # every "<" from data is backslash-escaped
    assert "<javascript:" not in text and "](javascript:" not in text
    for bad in ("\x00", "\x07", "\x1b", "\ud800", "\ufffe"):
        assert bad not in text
    assert r"\<img src=x onerror=alert(1)\>" in text
    assert "\n| injected | row |" not in text
    # the only raw tags are the <br> line breaks this writer puts into cells, and autolinks it made
    assert set(re.findall(r"(?<!\\)<[^>\s]*", text)) <= {"<br", "<https://example.org/sp"}
