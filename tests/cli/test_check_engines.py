"""``perfgate check`` validates ``[engines.*]``: unknown kind, unknown argument per kind, "did you
mean", one line naming the file, the table and the key, exit 4 (issue 21, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.engines.check import engine_problems, known_arguments, vllm_argument_names
from pytest_perfgate.engines.requirements import installed

GATE = """
[phases.phase1]
[gates.ttft]
phase = "phase1"
metric = "ttft"
statistic = "p95"
max = "1500 ms"
"""


def _write(tmp_path: Path, engines: str) -> Path:
    p = tmp_path / "thresholds.toml"
    p.write_text(GATE + engines)
    return p


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["check", str(path)])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize(("table", "key", "hint"), [
    ('[engines.mystack]\nkind = "openia"\nbase_url = "http://127.0.0.1:8000"\nmodel = "m"\n', "kind", "did you mean 'openai'?"),
    ('[engines.mystack]\nkind = "openai"\nbaseurl = "http://127.0.0.1:8000"\nmodel = "m"\n', "baseurl",
     "did you mean 'base_url'?"),
    ('[engines.vlm]\nkind = "transformers-vlm"\nmodel = "m"\nvison_quant = "int8"\n', "vison_quant",
     "did you mean 'vision_quant'?"),
])
def test_bad_engine_table_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str, key: str,
                                      hint: str) -> None:
    rc, err = _check(_write(tmp_path, table), capsys)
    assert rc == 4
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    name = table.split("]")[0][1:]
    assert lines[0].startswith(f"perfgate: thresholds.toml: [{name}] {key}: "), lines[0]
    assert hint in lines[0]


def test_good_openai_table_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, '[engines.mystack]\nkind = "openai"\nbase_url = "http://127.0.0.1:8000"\nmodel = "m"\n'
                            'timeout = 30\n')
    rc = main(["check", str(path)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "OK" in out.out


def test_inherited_key_is_said_once_at_its_table(tmp_path: Path) -> None:
    path = _write(tmp_path, '[engines.a]\nkind = "openai"\nbase_url = "http://x"\nmodel = "m"\napi_kye_env = "K"\n'
                            '[engines.b]\nextends = "a"\ntimeout = 5\n'
                            '[engines.c]\nkind = "openia"\nbase_url = "http://x"\nmodel = "m"\n'
                            '[engines.d]\nextends = "c"\n')
    problems, _ = engine_problems(load_thresholds(path))
    assert len(problems) == 2, problems
    assert "[engines.a] api_kye_env: unknown argument of a openai engine (did you mean 'api_key_env'?" in problems[0]
    assert "[engines.c] kind: unknown kind 'openia'" in problems[1]


@pytest.mark.skipif(not installed("vllm"), reason="vLLM is not installed: its argument names cannot be read")
def test_vllm_kinds_check_engine_args_and_server_flags(tmp_path: Path) -> None:
    names = vllm_argument_names(server=False)
    assert names is not None and {"model", "speculative_config", "enable_prefix_caching", "dtype"} <= names
    server = known_arguments("vllm-server")
    assert server is not None and {"host", "api_key", "startup_timeout", "env", "port", "max_model_len"} <= server
    path = _write(tmp_path, '[engines.v]\nkind = "vllm"\nmodel = "m"\nenable_prefix_cache = true\n'
                            '[engines.s]\nkind = "vllm-server"\nmodel = "m"\nuvicorn_log_level = "info"\n'
                            'max_model_length = 128\n')
    problems, notes = engine_problems(load_thresholds(path))
    assert not notes
    assert len(problems) == 2, problems
    assert "[engines.v] enable_prefix_cache: unknown argument of a vllm engine (did you mean 'enable_prefix_caching'?" \
        in problems[0]
    assert "[engines.s] max_model_length:" in problems[1] and "did you mean 'max_model_len'?" in problems[1]


def test_repository_thresholds_pass() -> None:
    root = Path(__file__).resolve().parents[2]
    problems, _ = engine_problems(load_thresholds(root / "thresholds.toml"))
    assert problems == []


def test_without_vllm_the_vllm_arguments_are_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_perfgate.engines import check

    monkeypatch.setattr(check, "_vllm_root", lambda: None)
    check.vllm_argument_names.cache_clear()
    try:
        problems, notes = engine_problems(load_thresholds(_write(tmp_path, '[engines.v]\nkind = "vllm"\nmodel = "m"\n')))
    finally:
        check.vllm_argument_names.cache_clear()
    assert problems == []
    assert notes == ["thresholds.toml: [engines.v]: arguments not checked (vllm: vLLM is not installed here)"]
