"""Control characters in names (issue 38, item 11): a file name with ESC, a vLLM ``model_id``, a
sweep level's folder name, a ``/metrics`` label value carrying U+202E (right-to-left override) or
another bidi/format character never reach the terminal, report.html, gates.xml or summary.md raw.
Names go through the printable choke points: ``runtime/redaction.printable`` (terminal, names read
from files and servers) and the writers' ``clean_text`` (every writer's text)."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from reliability_helpers import BENCH_EXPORT, ttft_p50_gates

from pytest_perfgate.cli import main
from pytest_perfgate.engines.prometheus import parse_prometheus
from pytest_perfgate.verdicts.wording import clean_text

EXPORT = BENCH_EXPORT
RLO, ESC = "\u202e", "\x1b"
HOSTILE = f"{RLO}lmth.exe{ESC}[2J{ESC}]0;pwned\x07\u2066\u200f\u2028\ufeff"
# what no output may carry raw: C0/C1 controls (not tab/newline), bidi and other format characters, separators
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def _gate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str, limit: str = "300 ms") -> tuple[int, str]:
    (tmp_path / "thresholds.toml").write_text(ttft_p50_gates(limit))
    rc = main(["gate", "--thresholds", str(tmp_path / "thresholds.toml"), "--out", str(tmp_path / "out"), *args])
    o, e = capsys.readouterr()
    return rc, o + e


def test_a_file_name_with_esc_is_escaped_in_the_problem_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / f"cut{ESC}[2J{ESC}[31mPASSED{RLO}.json"
    cut.write_text(EXPORT.read_text()[:5000])
    rc, text = _gate(tmp_path, capsys, str(cut), "--run", f"good={EXPORT}")
    assert rc == 4
    assert not RAW.search(text), repr(text)
    (line,) = [ln for ln in text.splitlines() if "cut" in ln and "not valid JSON" in ln]
    assert line.startswith(f"perfgate gate: {tmp_path}/cut\\x1b[2J\\x1b[31mPASSED\\u202e.json: not valid JSON")


def _hostile_export(path: Path, **extra: object) -> Path:
    doc = json.loads(EXPORT.read_text())
    doc.update(model_id=f"meta/llama{HOSTILE}", backend=f"vllm{HOSTILE}", **extra)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("limit", ["300 ms", "10 ms"])  # a pass, and a failure (its lines and the fallback)
def test_names_with_bidi_and_control_characters_reach_no_output_raw(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     limit: str) -> None:
    single = _hostile_export(tmp_path / "in" / f"run{HOSTILE}.json")
    sweep = tmp_path / "in" / f"sweep{HOSTILE}"
    for conc in (1, 4):
        _hostile_export(sweep / f"SERVE-{HOSTILE}-BENCH-c{conc}" / "run=0.json", max_concurrency=conc)
    _, text = _gate(tmp_path, capsys, "--run", f"one={single}", "--run", f"many={sweep}", limit=limit)
    assert not RAW.search(text), repr(text)
    assert "\\u202e" in text  # shown, escaped
    out = tmp_path / "out"
    for name in ("gates.xml", "summary.md", "report.html"):
        body = (out / name).read_text(encoding="utf-8")
        assert not RAW.search(body), (name, RAW.search(body))
    for name in ("gates.xml", "report.html"):  # the names are there, made visible
        assert "#x202E" in (out / name).read_text(encoding="utf-8"), name
    ET.parse(out / "gates.xml")  # still well-formed
    assert "meta/llama\\u202elmth.exe\\x1b[2J" in (out / "report.html").read_text()  # the model_id, as read


def test_metrics_label_values_are_made_printable() -> None:
    got = parse_prometheus(f'# TYPE vllm:hits counter\nvllm:hits_total{{pool="a{RLO}b{ESC}[2J"}} 3\n')
    assert got == {'vllm:hits{pool="a\\u202eb\\x1b[2J"}': 3.0}


def test_every_invisible_character_is_marked_by_the_writers() -> None:
    """clean_text, the writers' choke point, against this Python's Unicode tables: every control,
    format (Cf: bidi, zero-width, BOM) and line/paragraph separator character but tab and newline."""
    leaks = [f"U+{c:04X}" for c in range(sys.maxunicode + 1)
             if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp") and chr(c) not in "\t\n\r"
             and clean_text(chr(c)) == chr(c)]
    assert leaks == []
    assert clean_text(f"a{RLO}b\tc\nd") == "a#x202Eb\tc\nd"
