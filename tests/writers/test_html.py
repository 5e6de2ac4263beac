"""report.html: self-contained, readable, and nothing from the data appears unescaped."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from writer_docs import HOSTILE, make_doc, phase_entry, verdict

from pytest_perfgate.writers import html as html_writer
from pytest_perfgate.writers import html_markup

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "h3", "h4", "table", "thead",
    "tbody", "tr", "th", "td", "ul", "li", "a", "code", "strong", "span", "div", "p", "br", "section", "footer",
    "svg", "line", "rect", "path", "circle",
}


class Collector(HTMLParser):
    """Records every tag and attribute; fails on anything a report must never contain."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in ("meta", "br", "line", "rect", "path", "circle"):
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("line", "rect", "path", "circle"):
            return
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> (open: {self.stack[-3:]})"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(text: str) -> Collector:
    p = Collector()
    p.feed(text)
    p.close()
    assert p.stack == [], f"unclosed tags: {p.stack}"
    return p


def hostile_doc() -> dict[str, Any]:
    doc = make_doc()
    v = verdict(HOSTILE, "fail", fallbacks=(HOSTILE,), note=HOSTILE, test=HOSTILE, band=HOSTILE,
                unit_name="ms")
    v["summary"] = HOSTILE
    v["ci"] = HOSTILE
    v["metric"] = HOSTILE
    v["statistic"] = HOSTILE
    v["outcome"] = "fail"
    v["display"] = {k: HOSTILE for k in v["display"]}
    doc["fallbacks"][HOSTILE] = {"title": HOSTILE, "cost": HOSTILE, "doc": HOSTILE}
    doc["fallbacks"]["js"] = {"title": "js", "cost": "", "doc": "javascript:alert(1)"}
    doc["fallbacks"]["quote"] = {"title": "q", "cost": "", "doc": 'https://x.org/"onmouseover="alert(1)'}
    v["fallbacks"] = [HOSTILE, "js", "quote"]
    doc["phases"][HOSTILE] = phase_entry(
        HOSTILE, [v, verdict(outcome=HOSTILE)], outcome=HOSTILE, title=HOSTILE, run_id=HOSTILE,
        git_commit=HOSTILE, thresholds_file=HOSTILE, thresholds_sha256=HOSTILE, timestamp=HOSTILE,
        depends_on=[HOSTILE], not_evaluated=[HOSTILE], triggered_fallbacks=[HOSTILE, "js", "quote"],
        fallback_tests=[{"test": HOSTILE, "fallback": HOSTILE, "outcome": HOSTILE, "reason": HOSTILE}],
    )
    doc["updated"] = HOSTILE
    doc["schema"] = HOSTILE
    return doc


def test_report_html_is_self_contained_and_parses(tmp_path: Path) -> None:
    path = html_writer.HtmlWriter().write(make_doc(), tmp_path)
    assert path == tmp_path / "report.html"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    p = parse(text)
    tags = {t for t, _ in p.tags}
    assert tags <= ALLOWED_TAGS
    assert "script" not in tags and "img" not in tags and "link" not in tags
    for _, attrs in p.tags:  # no external resources
        for key, value in attrs.items():
            assert key not in ("src", "srcset")
            if key == "href":
                assert value is not None and (value.startswith("#") or value.startswith("https://"))
    body = "".join(p.text)
    assert "/repo/" not in body  # no absolute paths: the thresholds file by name
    for needle in ("20240701T120000Z-abcdef", "0123456789abcdef0123456789abcdef01234567", "thresholds.toml",
                   "abababababab", "2024-07-01T12:00:00+00:00", "FAILED", "PASSED", "NOT RUN"):
        assert needle in body
    assert "ab" * 32 not in body  # only a prefix of the sha256


def test_gate_table_fallbacks_and_fallback_tests() -> None:
    p = parse(html_writer.render(make_doc()))
    body = "".join(p.text)
    for needle in ("long_context_ttft[2]", "212 ms", "95% CI 200 ms - 230 ms, n=500", "max 150 ms",
                   "320 ms (34% ", "pass (band: large gain)", "inconclusive (need >= 1200 samples, 1100 more)",
                   "not evaluated in this run", "tpot_p99", "Triggered fallbacks", "Tiered KV cache",
                   "cost: page swap 30-50 ms", "docs/fallbacks.md#plan-a", "Fallback tests",
                   "perf_tests/test_fb.py::test_tiered", "ttft 180 ms", "Notes on the statistics",
                   "one-sided at the stated confidence level"):
        assert needle in body, needle
    links = [a["href"] for t, a in p.tags if t == "a" and a.get("href", "").startswith("http")]  # type: ignore[union-attr]
    assert set(links) == {"https://example.org/sp"}  # in the overview and in the phase
    badges = [a["class"] for t, a in p.tags if t == "span" and (a.get("class") or "").startswith("badge")]
    assert "badge bad" in badges and "badge ok" in badges and "badge none" in badges
    # one interval plot per verdict (6), each with a title for the tooltip
    assert sum(1 for t, _ in p.tags if t == "svg") == 6


def test_interval_plot_handles_missing_and_infinite_bounds() -> None:
    full = html_markup.interval_svg(verdict())
    assert full.count("<circle") == 1 and full.count("<rect") == 1 and "<path" not in full
    # an unbounded upper bound (to_dict() stores +inf as None) gets an arrow at the right edge
    open_hi = html_markup.interval_svg(verdict(upper=None))
    assert open_hi.count("<path") == 1
    both = html_markup.interval_svg(verdict(lower=None, upper=None, threshold=None, baseline=None))
    assert both.count("<path") == 2 and both.count("<circle") == 1
    nothing = html_markup.interval_svg(verdict(observed=None, lower=None, upper=None, threshold=None, baseline=None))
    assert "<svg" not in nothing and "no data" in nothing
    # raw infinities, NaN, strings and booleans in the numbers are ignored, never emitted
    weird = verdict()
    weird.update(lower=-math.inf, upper=math.nan, observed="1e9</svg>", threshold=True)
    out = html_markup.interval_svg(weird)
    assert "nan" not in out.lower().replace("no data", "") and "inf" not in out and "</svg>" == out[-6:]
    parse(out)
    # all values equal / huge ranges still give finite coordinates inside the box
    for v in (verdict(observed=0.0, lower=0.0, upper=0.0, threshold=0.0, baseline=0.0),
              verdict(observed=1e308, lower=-1e308, upper=1.7e308, threshold=0.0, unit_name="s")):
        out = html_markup.interval_svg(v)
        parse(out)
        assert "nan" not in out and "inf" not in out
        xs = [float(c) for c in re.findall(r'(?:cx|x1)="([^"]+)"', out)]
        assert xs and all(0 <= c <= 220 for c in xs)
    spread = html_markup.interval_svg(verdict(observed=1e308, lower=-1e308, upper=1.7e308, threshold=0.0,
                                              unit_name="s"))
    dot = float(re.search(r'<circle cx="([^"]+)"', spread).group(1))  # type: ignore[union-attr]
    thr = float(re.findall(r'<line x1="([^"]+)"', spread)[-1])
    assert thr < dot  # distinct positions, not everything collapsed to the middle


def test_hostile_strings_are_escaped(tmp_path: Path) -> None:
    path = html_writer.HtmlWriter().write(hostile_doc(), tmp_path)
    raw = path.read_text(encoding="utf-8")  # lone surrogates were replaced: the file is valid UTF-8
    assert "</script>" not in raw
    assert "<img" not in raw
    assert "]]>" not in raw
    assert "javascript:" not in raw.replace("javascript:alert(1)</code>", "")  # shown as text, never a link
    for bad in ("\x00", "\x07", "\x1b", "\ud800", "\udfff", "\ufffe"):
        assert bad not in raw
    p = parse(raw)
    tags = {t for t, _ in p.tags}
    assert tags <= ALLOWED_TAGS
    for tag, attrs in p.tags:
        for key, value in attrs.items():
            assert not key.startswith("on"), (tag, key, value)
        if tag == "a":
            assert attrs["href"] in ("https://example.org/sp",) or str(attrs["href"]).startswith(("#phase-", "#gate-"))
        assert attrs.get("class") in (None, "badge ok", "badge bad", "badge fb", "badge warn", "badge none",
                                      "ok", "bad", "warn", "none", "notrun", "meta", "summary", "plain", "info", "iv",
                                      "scroll", "cards", "card ok", "card bad", "card warn", "card none", "num")
    body = "".join(p.text)
    assert "<img src=x onerror=alert(1)>" in body  # shown to the reader as text
    assert "#x1B[31m" in body and "#xD800" in body


def test_phase_selection_inconclusive_warn_and_empty() -> None:
    p = parse(html_writer.render(make_doc(), phases=["phase2"], inconclusive="warn"))
    body = "".join(p.text)
    assert "mm_throughput" in body and "long_context_ttft" not in body
    assert "only warn" in body
    warn = "".join(parse(html_writer.render(make_doc(), inconclusive="warn")).text)
    assert "reported as warnings in this run" in warn
    empty = "".join(parse(html_writer.render({"phases": {}})).text)
    assert "No phase results recorded." in empty


def test_histogram_counts_are_numpys() -> None:
    """plots._counts (binary searches on the sorted values) gives np.histogram's counts, ties on the
    edges and the closed last bin included (issue 41: the 31M-gap ITL figure)."""
    import numpy as np

    from pytest_perfgate.writers.plots import _counts

    rng = np.random.default_rng(0)
    for t in range(200):
        v = np.sort(np.round(rng.lognormal(0, 1, int(rng.integers(1, 3000))), int(rng.integers(0, 4))))
        extra = rng.uniform(v.min() - (1 if t % 3 == 0 else 0), v.max() + (1 if t % 2 else 0))
        lo, hi = min(v.min(), extra), max(v.max(), extra)
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 41)
        assert np.array_equal(_counts(v, bins), np.histogram(v, bins)[0]), t
