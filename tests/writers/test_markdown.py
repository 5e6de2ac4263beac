"""summary.md: the Markdown report for $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

import re
from pathlib import Path

from writer_docs import HOSTILE, make_doc, phase_entry, verdict

from pytest_perfgate.writers import markdown


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
    assert fail[5] == "320 ms (34% lower)"
    assert fail[6] == "fail"
    assert r"tiered\_kv\_cache (triggered)" in fail[7]
    # failing gates first: fail, inconclusive, then passes and recorded values
    assert rows[1][6] == r"inconclusive (need \>= 1200 samples, 1100 more)"
    assert rows[2][6] == "pass (band: large gain)"
    assert rows[3][0] == r"long\_context\_ttft\[2\]"
    assert rows[4][4] == "recorded"
    assert "/repo/" not in text  # no absolute paths
    assert r"Not evaluated in this run: tpot\_p99" in text
    assert r"Not evaluated in this run: cross\_node\_p99" in text


def test_triggered_fallbacks_and_fallback_tests(tmp_path: Path) -> None:
    text = markdown.render(make_doc())
    assert "### Triggered fallbacks" in text
    assert r'- **tiered\_kv\_cache** "Tiered KV cache" (docs/fallbacks.md\#plan-a) [cost: page swap 30-50 ms]' in text
    assert "(<https://example.org/sp>)" in text  # an http(s) doc becomes an autolink
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
