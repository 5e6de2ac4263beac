"""perfgate history --changes and perfgate report --history DIR on a git repository with a slowdown
at one commit; the trend page checked in headless Chromium."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from trendrepo import make

from pytest_perfgate.cli import main


def test_changes_json_names_the_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    r = make(tmp_path)
    monkeypatch.chdir(r.repo)
    assert main(["history", "--changes", "--results", str(r.results), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (c,) = doc["changes"]
    assert c["gate"] == "ttft_p50" and c["branch"] == "main"
    assert (c["before"], c["after"]) == (r.commits[8], r.commits[9]) and len(c["after"]) == 40
    assert c["lower"] < 0.25 < c["upper"] and c["confidence"] > 0.99 and c["size"] == pytest.approx(0.25, abs=0.06)
    assert {s["gate"]: s["runs"] for s in doc["series"]} == {"flat": 14, "ttft_p50": 14}
    assert main(["history", "flat", "--changes", "--results", str(r.results)]) == 0
    out = capsys.readouterr().out
    assert "gate flat, branch main: 14 runs, 0 change points (false-alarm rate 0.01)" in out
    assert main(["history", "ttft_p50", "--changes", "--results", str(r.results)]) == 0
    assert f"last before {r.commits[8]}, first after {r.commits[9]}" in capsys.readouterr().out


def test_changes_bad_input_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    r = make(tmp_path, n=5)
    monkeypatch.chdir(r.repo)
    assert main(["history", "nope", "--changes", "--results", str(r.results)]) == 3
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "no stored verdict of gate 'nope'" in err
    assert main(["history", "--changes", "--alpha", "2", "--results", str(r.results)]) == 2
    assert "--alpha 2.0: must be between 0 and 0.5" in capsys.readouterr().err


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    w, h = struct.unpack(">II", head[16:24])
    return int(w), int(h)


def test_trend_site_renders_in_headless_chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    r = make(tmp_path)
    monkeypatch.chdir(r.repo)
    site = tmp_path / "site"
    assert main(["report", str(r.results), "--history", str(site)]) == 0
    assert f"wrote {site / 'index.html'}" in capsys.readouterr().out
    page = (site / "ttft_p50.html").read_text()
    assert r.commits[9] in page and "threshold" in page and "<svg" in page and "+2" in page
    assert "ttft_p50.html" in (site / "index.html").read_text()
    data = json.loads((site / "trend.json").read_text())
    assert {s["gate"] for s in data["series"]} == {"flat", "ttft_p50"}
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    shot = tmp_path / "trend.png"
    res = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--window-size=1100,900", f"--screenshot={shot}", (site / "ttft_p50.html").as_uri()],
                         capture_output=True, text=True, timeout=300)
    assert shot.exists(), res.stderr[-2000:]
    assert _png_size(shot) == (1100, 900) and shot.stat().st_size > 20_000


def test_a_blown_up_bound_does_not_flatten_the_plot() -> None:
    """Seen in a real 14-commit history: one run's bounds 20.2 ms - 1794 ms. The view keeps the runs'
    values (the bound drawn to the edge with an arrow head); a far threshold is named, not drawn."""
    from pytest_perfgate.writers.trend_site import svg

    pts = [{"run_id": f"r{i}", "commit": f"{i:040x}", "observed": v, "lower": v * 0.97, "upper": v * 1.03,
            "outcome": "pass", "threshold": 0.1} for i, v in enumerate([0.0207, 0.0212, 0.0208, 0.0268, 0.0269])]
    pts[2] = {**pts[2], "lower": 0.0202, "upper": 1.794}
    out = svg({"gate": "g", "branch": "main", "unit": "ms", "metric": "ttft", "points": pts, "changes": []})
    labels = [float(t) for t in __import__("re").findall(r'text-anchor="end" font-size="11">([0-9.]+)</text>', out)]
    assert labels and max(labels) < 40 and min(labels) >= 0
    assert "threshold 100 (above the plot)" in out and "<path d=" in out
