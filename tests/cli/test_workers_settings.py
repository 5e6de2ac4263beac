"""Worker settings and the thresholds file named the same way by every command (issue 38, item 12):
``perfgate check`` refuses what pytest refuses (a Ray address with a trailing newline); a Ray cluster
without Ray installed is said at start in one line with the install hint; ``per_node`` and the worker
count have an upper bound with a named error; a huge value is never echoed whole; ``perfgate check
--thresholds FILE`` is taken as ``perfgate gate --thresholds FILE`` is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_perfgate.cli import main
from pytest_perfgate.config import ConfigError
from pytest_perfgate.config.load import MAX_WORKERS, parse_thresholds
from pytest_perfgate.load.schedule import LoadConfig, LoadConfigError, RayWorkers, parse_ray
from pytest_perfgate.load.workers import resolve_workers
from pytest_perfgate.plugin import _workers

pytest_plugins = ["pytester"]

GATES = '[phases.p]\n[gates.g]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "1 s"\n'


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["check", "--no-preflight", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def workers_setting(tmp_path: Path, value: Any) -> Any:
    return parse_thresholds({"perfgate": {"workers": value}}, tmp_path / "t.toml").settings.workers


def test_a_trailing_newline_in_a_ray_address_is_refused_by_perfgate_check_as_by_pytest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for value in ({"ray": "h:80\n"}, "ray://h:80\n", {"ray": "auto\n"}):
        with pytest.raises(ConfigError, match="workers.ray"):
            workers_setting(tmp_path, value)
    f = tmp_path / "thresholds.toml"
    f.write_text('[perfgate]\nworkers = { ray = "h:80\\n" }\n' + GATES)
    rc, _, err = check(capsys, str(f))
    assert rc == 4 and "[perfgate] workers.ray: must be \"auto\" or \"HOST:PORT\"" in err and "'h:80\\n'" in err
    for text in ("ray://h:80\n", "ray://h:80?per_node=2\n\n"):  # the session's parser: the same refusal
        if text.endswith("\n\n"):
            assert parse_ray(text) == RayWorkers("h:80", 2)  # surrounding whitespace of an option is stripped
        with pytest.raises(LoadConfigError):
            parse_ray(text.strip() + "\nx")


def test_per_node_and_the_worker_count_have_an_upper_bound(tmp_path: Path) -> None:
    assert workers_setting(tmp_path, {"ray": "auto", "per_node": MAX_WORKERS}) == f"ray://auto?per_node={MAX_WORKERS}"
    for value, key in (({"ray": "auto", "per_node": MAX_WORKERS + 1}, "workers.per_node"),
                       (f"ray://auto?per_node={'9' * 5000}", "workers.per_node"), (10**6, "workers")):
        with pytest.raises(ConfigError, match=f"at most {MAX_WORKERS}") as e:
            workers_setting(tmp_path, value)
        assert key in str(e.value) and len(str(e.value)) < 300, str(e.value)
    with pytest.raises(LoadConfigError, match=f"per_node: at most {MAX_WORKERS} worker processes per node"):
        parse_ray(f"ray://auto?per_node={MAX_WORKERS + 1}")
    for big in (MAX_WORKERS + 1, 10**5000):  # past Python's int-to-text limit too: no ValueError of its own
        with pytest.raises(LoadConfigError, match=f"per_node: from 1 to {MAX_WORKERS}"):
            LoadConfig(ray="auto", per_node=big)
        with pytest.raises(LoadConfigError, match=f"from 1 to {MAX_WORKERS}"):
            LoadConfig(workers=big)
    with pytest.raises(LoadConfigError, match=f"at most {MAX_WORKERS} client worker processes"):
        resolve_workers(str(MAX_WORKERS + 1))


@pytest.mark.parametrize("value", ["9" * 5000, "x" * 5000, "ray://auto?per_node=" + "9" * 5000, "ray://" + "h" * 5000])
def test_a_5000_character_workers_value_is_not_echoed_whole(value: str) -> None:
    with pytest.raises(pytest.UsageError) as e:
        _workers(value, 1)
    msg = str(e.value)
    assert msg.startswith("perfgate: --perfgate-workers ") and "\n" not in msg and len(msg) < 400, msg
    assert "characters)" in msg  # how long the value was, instead of the value


def test_ray_without_ray_installed_is_said_at_start_with_the_install_hint(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed: find_spec says None
    with pytest.raises(pytest.UsageError) as e:
        _workers(None, "ray://auto?per_node=1")
    msg = str(e.value)
    assert "\n" not in msg and "pip install 'pytest-perfgate[ray]'" in msg and msg.startswith("perfgate: [perfgate] ")
    with pytest.raises(pytest.UsageError, match=r"--perfgate-workers ray://h:6379: .*need Ray.*pytest-perfgate\[ray\]"):
        _workers("ray://h:6379", 1)
    f = tmp_path / "thresholds.toml"
    f.write_text('[perfgate]\nworkers = "ray://auto"\n' + GATES)
    rc, _, err = check(capsys, str(f))  # the file is valid; this machine lacks Ray: a note
    assert rc == 0 and "Ray is not installed here, so pytest stops at start: pip install 'pytest-perfgate[ray]'" in err


def test_a_session_without_ray_stops_at_start_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import sys\nsys.modules['ray'] = None  # Ray not installed\n")
    pytester.makefile(".toml", thresholds='[perfgate]\nworkers = { ray = "auto" }\n' + GATES)
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert r.ret == 4
    err = r.stderr.str()
    assert "Traceback" not in err + r.stdout.str()
    r.stderr.fnmatch_lines(["*perfgate: [[]perfgate[]] workers 'ray://auto?per_node=1': workers on a Ray cluster "
                            "need Ray, which is not installed here: pip install 'pytest-perfgate[[]ray[]]'"])


@pytest.mark.parametrize("args", [["--thresholds", "{f}"], ["{f}"], ["{f}", "--thresholds", "{f}"]])
def test_check_and_gates_take_the_thresholds_file_as_gate_does(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(GATES)
    given = [a.format(f=f) for a in args]
    rc, out, _ = check(capsys, *given)
    assert rc == 0 and f"{f}: OK: 1 phases, 1 gates" in out
    assert main(["gates", *given]) == 0 and "max 1.00 s" in capsys.readouterr().out


def test_two_different_thresholds_files_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["check", str(tmp_path / "a.toml"), "--thresholds", str(tmp_path / "b.toml")])
    assert e.value.code == 2 and "two thresholds files" in capsys.readouterr().err
