"""thresholds.toml validation: every error names file, table and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.config import ConfigError, load_thresholds

GOOD = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "config_good.toml").read_text()


def load(tmp_path: Path, text: str) -> object:
    p = tmp_path / "thresholds.toml"
    p.write_text(text)
    return load_thresholds(p)


def test_good_file(tmp_path: Path) -> None:
    th = load(tmp_path, GOOD)
    g = th.gates["long_context_ttft"]  # type: ignore[attr-defined]
    assert g.metric == "ttft" and g.statistic.q == 0.99 and g.threshold.base == pytest.approx(0.150)
    assert g.baseline.base == pytest.approx(0.320)
    spec = th.engines["spec"]  # type: ignore[attr-defined]
    assert spec.kind == "vllm" and spec.args["dtype"] == "float32" and spec.args["speculative_config"]["num_speculative_tokens"] == 5
    assert len(th.sha256) == 64  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ('max = "150 ms"', 'max = "150 parsecs"', "[gates.long_context_ttft] max = '150 parsecs': unknown unit 'parsecs'"),
        ('max = "150 ms"', 'max = "150 tok/s"', "[gates.long_context_ttft] max = '150 tok/s': unit mismatch"),
        ('max = "150 ms"', 'max = 150', "unit mismatch: ttft is time, got a plain number"),
        ('max = "150 ms"', 'max = "150 ms"\nmin = "1 ms"', "[gates.long_context_ttft] max: both min and max"),
        ('max = "150 ms"', '', "[gates.long_context_ttft] max: neither min nor max"),
        ('metric = "time_to_first_token"', 'metric = "ttfx"', "[gates.long_context_ttft] metric: unknown metric 'ttfx'"),
        ('statistic = "p99"', 'statistic = "p999x"', "[gates.long_context_ttft] statistic: unknown statistic"),
        ('fallback = ["tiered_kv_cache"]', 'fallback = ["plan_z"]', "[gates.long_context_ttft] fallback: unknown fallback 'plan_z'"),
        ('phase = "phase1"\nmetric', 'phase = "phase9"\nmetric', "[gates.long_context_ttft] phase: unknown phase 'phase9'"),
        ('baseline = "320 ms"', 'baseline = "320 ms"\ncolour = "red"', "[gates.long_context_ttft] colour: unknown key"),
        ('depends_on = []', 'depends_on = ["phase2"]', "[phases.phase1] depends_on: dependency cycle: phase1 -> phase2 -> phase1"),
        ("confidence = 0.95", "confidence = 1.5", "[perfgate] confidence: must be a number in [0.5, 1)"),
        ('extends = "plain"', 'extends = "nope"', "[engines.spec] extends: unknown engine 'nope'"),
        ("[perfgate]", "[perfgate\n", "TOML syntax error"),
    ],
)
def test_errors_name_file_table_key(tmp_path: Path, old: str, new: str, expect: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError) as ei:
        load(tmp_path, GOOD.replace(old, new, 1))
    msg = str(ei.value)
    assert msg.startswith("thresholds.toml: ")
    assert expect in msg


def test_recorded_only_gate(tmp_path: Path) -> None:
    th = load(tmp_path, GOOD + '\n[gates.tpot]\nphase = "phase1"\nmetric = "tpot"\nstatistic = "p50"\nrecord_only = true\n')
    assert th.gates["tpot"].recorded_only  # type: ignore[attr-defined]


def test_compare_gate_units(tmp_path: Path) -> None:
    extra = '\n[gates.tput]\nphase = "phase1"\nmetric = "throughput"\nstatistic = "value"\ncompare = "ratio"\nruns = ["spec", "plain"]\nmin = 0.8\n'
    th = load(tmp_path, GOOD + extra)
    assert th.gates["tput"].compare == "ratio"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"\[gates.tput\] min = '80 tok/s': unit mismatch"):
        load(tmp_path, GOOD + extra.replace("min = 0.8", 'min = "80 tok/s"'))
    with pytest.raises(ConfigError, match=r"\[gates.tput\] runs: a ratio gate compares exactly two runs"):
        load(tmp_path, GOOD + extra.replace('runs = ["spec", "plain"]', 'runs = ["spec"]'))


def test_percent_is_exact(tmp_path: Path) -> None:
    th = load(tmp_path, GOOD + '\n[gates.acc]\nphase = "phase1"\nmetric = "acceptance"\nmin = "70%"\n')
    assert th.gates["acc"].threshold.base == 0.7  # type: ignore[attr-defined]
    assert th.gates["acc"].statistic.kind == "value"  # type: ignore[attr-defined]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read thresholds file"):
        load_thresholds(tmp_path / "nope.toml")
