"""thresholds.toml fuzzing: any document is either a valid configuration or a ConfigError that
names the file (and the table/key where there is one) -- never a traceback."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_perfgate.config import ConfigError, Thresholds, load_thresholds, parse_thresholds

pytest_plugins = ["pytester"]

VALID = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "fuzz_valid.toml").read_text()

SCHEMA_KEYS = [
    "perfgate", "phases", "fallbacks", "gates", "engines", "params", "confidence", "inconclusive",
    "max_samples", "max_seconds", "max_error_rate", "title", "depends_on", "description", "cost", "doc",
    "phase", "metric", "statistic", "max", "min", "baseline", "fallback", "compare", "runs", "unit",
    "bands", "engine", "record_only", "kind", "extends", "model", "phase1", "phase2", "ttft", "spec", "base",
]  # fmt: skip
SCHEMA_VALUES = [
    "150 ms", "70%", "0.8", "30 tok/s", "p99", "p50", "p0", "p100", "median", "mean", "value", "ttft", "tpot",
    "acceptance_rate", "error_rate", "ratio", "difference", "reduction", "fail", "warn", "phase1", "phase2",
    "tiered_kv_cache", "base", "spec", "vllm", "openai", "1e999 ms", "-5 ms", "nan", "inf", "", " ", "\x00",
    "150 parsecs", "ms", "%", "1%", "101%",
]  # fmt: skip

scalars = st.one_of(
    st.sampled_from(SCHEMA_VALUES),
    st.text(max_size=12),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),  # not TOML, but parse_thresholds must cope with any Python value
)
keys = st.one_of(st.sampled_from(SCHEMA_KEYS), st.text(min_size=1, max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=25,
)


def _check(doc: Any, path: Path) -> None:
    try:
        th = parse_thresholds(doc, path)
    except ConfigError as e:
        assert str(e).startswith(path.name + ": "), str(e)
        assert "Traceback" not in str(e)
        return
    assert isinstance(th, Thresholds)


def _valid_doc() -> dict[str, Any]:
    return tomllib.loads(VALID)


def test_the_seed_document_is_valid(tmp_path: Path) -> None:
    p = tmp_path / "thresholds.toml"
    p.write_text(VALID)
    th = load_thresholds(p)
    assert set(th.gates) == {"ttft", "accept", "speedup", "rec"}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=st.dictionaries(keys, values, max_size=6))
def test_random_documents(doc: dict[str, Any]) -> None:
    _check(doc, Path("thresholds.toml"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_document(data: st.DataObject) -> None:
    """Replace, delete or add one value at a random place of the valid document (several times)."""
    doc = _valid_doc()
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        # walk down to a random table
        node: dict[str, Any] = doc
        while True:
            tables = [k for k, v in node.items() if isinstance(v, dict)]
            if not tables or data.draw(st.booleans(), label="stop here"):
                break
            node = node[data.draw(st.sampled_from(tables), label="descend")]
        action = data.draw(st.sampled_from(["replace", "delete", "add"]), label="action")
        if action in ("replace", "delete") and node:
            k = data.draw(st.sampled_from(sorted(node)), label="key")
            if action == "delete":
                del node[k]
            else:
                node[k] = data.draw(values, label="value")
        else:
            node[data.draw(keys, label="new key")] = data.draw(values, label="new value")
    _check(doc, Path("thresholds.toml"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_text_through_load_thresholds(tmp_path: Path, data: st.DataObject) -> None:
    """Byte-level damage of the file text: syntax errors, bad UTF-8, truncation."""
    raw = bytearray(VALID.encode())
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        i = data.draw(st.integers(0, len(raw)), label="at")
        op = data.draw(st.sampled_from(["insert", "delete", "truncate"]), label="op")
        if op == "insert":
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=6) | st.sampled_from(
                [b"=", b"[", b"]", b'"', b"\n", b"\xff", b"\n[gates.x]\n", b"ms", b"%"]), label="bytes")
        elif op == "delete":
            del raw[i : i + data.draw(st.integers(1, 20), label="len")]
        else:
            del raw[i:]
    p = tmp_path / "thresholds.toml"
    p.write_bytes(bytes(raw))
    try:
        load_thresholds(p)
    except ConfigError as e:
        assert str(e).startswith("thresholds.toml: ")


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        (VALID.replace('max = "150 ms"', 'max = "1e999 ms"'), "[[]gates.ttft[]] max = '1e999 ms'*finite*"),
        (VALID.replace('title = "Vision"', 'title = ["Vision", 1]'), "[[]phases.phase2[]] title: must be a string*"),
        (VALID.replace('min = "70%"', 'min = { a = 1 }'), "[[]gates.accept[]] min = *"),
        ("\xff not utf-8", "*"),
    ],
)
def test_bad_files_are_usage_errors_without_traceback(pytester: pytest.Pytester, text: str, expect: str) -> None:
    if text.startswith("\xff"):
        (pytester.path / "thresholds.toml").write_bytes(b"\xff\xfe not utf-8 [")
    else:
        pytester.makefile(".toml", thresholds=text)
    pytester.makepyfile("def test_a():\n    pass\n")
    r = pytester.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"ERROR: perfgate: thresholds.toml: {expect}"])
    assert "Traceback" not in r.stderr.str() + r.stdout.str()
