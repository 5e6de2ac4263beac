"""report.html built from real stored runs: parsed (every gate, nothing unescaped, self-contained)
and rendered in headless Chromium at desktop and phone width."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from perfgate_project import StoredRuns

from pytest_perfgate.cli import main

HOSTILE_RAW = ("<img src=x", "</script><img", "onerror=alert(1)>", "\x1b")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


_BUILT: list[str] = []


def _report(stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str]) -> str:
    """report.html rebuilt from the stored runs by ``perfgate report`` (once for this module)."""
    if not _BUILT:
        assert main(["report", str(stored_runs.results)]) == 0
        capsys.readouterr()
        _BUILT.append("yes")
    return (stored_runs.results / "report.html").read_text(encoding="utf-8")


def test_report_from_real_runs_has_every_gate_and_nothing_unescaped(
        stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str]) -> None:
    raw = _report(stored_runs, capsys)
    for bad in HOSTILE_RAW:  # engine name, prompt tags and the phase title carry markup
        assert bad not in raw, bad
    p = _Tags()
    p.feed(raw)
    p.close()
    text = "".join(p.text)
    assert "scripted-</script><img src=x onerror=alert(1)>" in text  # shown as text
    assert "Speculative decoding <for> long context & more" in text
    ids = {a.get("id") for _, a in p.tags}
    for gate in ("ttft", "itl", "acceptance", "spec_speedup"):
        assert f"gate-0-{gate}" in ids, gate
    # self-contained: no scripts, images, stylesheets or anything fetched
    names = {t for t, _ in p.tags}
    assert not names & {"script", "img", "link", "iframe", "object", "embed"}
    for tag, attrs in p.tags:
        assert "src" not in attrs and not any(k.startswith("on") for k in attrs), (tag, attrs)
        href = attrs.get("href") or attrs.get("xlink:href")
        if href is not None:
            assert href.startswith(("#", "https://example.org/sp")), (tag, href)
    assert "url(http" not in raw and "@import" not in raw
    # what the report shows: overview first, failing gate first, plots of each kind, trend from history
    assert raw.index("Overview") < raw.index("Phase phase1")
    assert raw.index('id="gate-0-ttft"') < raw.index('id="gate-0-itl"')
    assert "REGRESSED beyond the 10% regression tolerance" in text
    assert "cost: 2 engineer-weeks" in text
    for heading in ("histogram", "cumulative distribution", "TTFT per request", "ITL per chunk",
                    "E2E = TTFT + (N-1) x TPOT", "Trend", "Engines", "baseline"):
        assert heading in text, heading
    assert raw.count('class="plot"') >= 4 + 3 + 4  # gates, runs, trends
    assert "/tmp/" not in text  # no absolute paths on the page


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


def test_report_renders_in_headless_chromium(stored_runs: StoredRuns, capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    _report(stored_runs, capsys)
    page = (stored_runs.results / "report.html").as_uri()
    for width in (1400, 390):
        shot = tmp_path / f"report-{width}.png"
        r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--window-size={width},2400", f"--screenshot={shot}", page],
                           capture_output=True, text=True, timeout=300)
        assert shot.exists(), r.stderr[-2000:]
        assert _png_size(shot) == (width, 2400)
        assert shot.stat().st_size > 50_000  # drawn plots and tables, not a blank page
        assert not re.search(r"(?i)uncaught|refused to", r.stderr)
