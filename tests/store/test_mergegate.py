"""A merge gate against main's recent runs (store/mergegate.py): --perfgate-baseline main and a gate's
regression = { vs = "main", tolerance = "10%" }, run effects included, main's commit range named."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from trendrepo import git

from pytest_perfgate.config import ConfigError, Thresholds, load_thresholds
from pytest_perfgate.store import baseline, history
from pytest_perfgate.store.live import LiveStore
from pytest_perfgate.store.mergegate import compare_branch
from pytest_perfgate.verdicts.samples import make_samples
from pytest_perfgate.verdicts.verdict import evaluate

C = 0.95
THRESHOLDS = (Path(__file__).parents[1] / "fixtures" / "thresholds" / "store.toml").read_text()


def thresholds_at(tmp: Path, text: str) -> Thresholds:
    p = tmp / "thresholds.toml"
    p.write_text(text)
    return load_thresholds(p)


def _main_history(tmp: Path, th: Thresholds, runs: int, seed: int = 1) -> tuple[Path, Path, list[str]]:
    """``runs`` commits on main, one run of gate ``lat`` each (p90 ~ 80 ms, run effects CV 5%); then a
    branch ``pr`` checked out."""
    repo = tmp / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    out = repo / "perfgate-results"
    rng = np.random.default_rng(seed)
    shas = []
    for i in range(runs):
        (repo / "f").write_text(str(i))
        git(repo, "add", "f")
        git(repo, "commit", "-q", "-m", f"c{i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
        data = make_samples(rng.lognormal(math.log(50) + rng.normal(0, 0.05), 0.3, 2000), "ms")
        v = evaluate(th.gate("lat"), data, confidence=C, thresholds=th)
        history.record(history.path_of(out), run_id=f"main-{i:02d}", started=f"2026-01-01T00:{i:02d}:00",
                       git_commit=shas[-1], thresholds_file=None, thresholds_sha256=None, engines=[],
                       verdicts=[(0, v.to_dict())])
    git(repo, "checkout", "-q", "-b", "pr")
    return repo, out, shas


def _current(factor: float, seed: int = 9) -> object:
    rng = np.random.default_rng(seed)
    return make_samples(rng.lognormal(math.log(50 * factor), 0.3, 2000), "ms")


def test_baseline_main_uses_its_recent_runs_with_run_effects(tmp_path: Path, th: Thresholds) -> None:
    repo, out, shas = _main_history(tmp_path, th, 8)
    ref = baseline.resolve("main", out, repo)
    assert ref.branch == "main" and ref.commit == shas[-1]
    slow = compare_branch(th.gate("lat"), _current(1.6), ref, confidence=C, thresholds=th, exclude_run="pr-run")
    assert slow is not None and slow.regressed and slow.baseline_runs == 8
    assert slow.baseline_commits == f"{shas[0]}..{shas[-1]}"
    assert f"vs main (commits {shas[0][:12]}..{shas[-1][:12]}, 8 runs)" in slow.text
    assert "between-run spread CV" in slow.text and slow.between_run_cv is not None
    same = compare_branch(th.gate("lat"), _current(1.0), ref, confidence=C, thresholds=th)
    assert same is not None and not same.regressed
    # the live store fails the gate and says why, in the verdict
    store = LiveStore(out, th, "pr-run", ref)
    v = store.keep(evaluate(th.gate("lat"), _current(1.6), confidence=C, thresholds=th), _current(1.6), C, [], "t")
    assert v.outcome == "fail" and "vs main (commits" in v.note
    assert store.extras(v)["vs_baseline"]["baseline_runs"] == 8


def test_two_runs_of_main_say_the_spread_is_unknown(tmp_path: Path, th: Thresholds) -> None:
    repo, out, _ = _main_history(tmp_path, th, 2)
    cmp = compare_branch(th.gate("lat"), _current(1.6), baseline.resolve("main", out, repo), confidence=C,
                         thresholds=th)
    assert cmp is not None and not cmp.regressed and cmp.inconclusive
    assert "run-to-run variation unknown (2 baseline runs in history, 3 needed)" in cmp.text


def test_gate_option_regression_vs_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = THRESHOLDS.replace('max = "150 ms"\nregression = "10%"',
                              'max = "150 ms"\nregression = { vs = "main", tolerance = "10%" }')
    assert text != THRESHOLDS
    th = thresholds_at(tmp_path, text)
    assert th.gate("lat").regression == pytest.approx(0.10) and th.gate("lat").regression_vs == "main"
    repo, out, _ = _main_history(tmp_path, th, 6)
    monkeypatch.chdir(repo)
    store = LiveStore(out, th, "pr-run")  # no --perfgate-baseline: the gate's own `vs`
    v = store.keep(evaluate(th.gate("lat"), _current(1.6), confidence=C, thresholds=th), _current(1.6), C, [], "t")
    assert v.outcome == "fail" and "vs main (commits" in v.note


def test_gate_option_vs_main_reads_the_sessions_shared_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """main's runs in a shared history (``--perfgate-history``: a PostgreSQL URL, here another file),
    none in this results folder: the gate's ``vs = "main"`` compares with them (it read only the
    results folder's history.sqlite before, and passed a 1.6x slowdown with a warning)."""
    text = THRESHOLDS.replace('max = "150 ms"\nregression = "10%"',
                              'max = "150 ms"\nregression = { vs = "main", tolerance = "10%" }')
    th = thresholds_at(tmp_path, text)
    repo, shared_out, _ = _main_history(tmp_path, th, 6)
    monkeypatch.chdir(repo)
    store = LiveStore(repo / "fresh-results", th, "pr-run", history_at=history.path_of(shared_out))
    v = store.keep(evaluate(th.gate("lat"), _current(1.6), confidence=C, thresholds=th), _current(1.6), C, [], "t")
    assert v.outcome == "fail" and "vs main (commits" in v.note


@pytest.mark.parametrize(("value", "msg"), [('{ vs = "main" }', "tolerance"), ('{ vs = "", tolerance = "5%" }', "vs"),
                                            ('{ vs = "main", tolerance = "5%", to = 1 }', "to")])
def test_bad_regression_table_is_named(tmp_path: Path, value: str, msg: str) -> None:
    text = THRESHOLDS.replace('max = "150 ms"\nregression = "10%"', f'max = "150 ms"\nregression = {value}')
    with pytest.raises(ConfigError, match=msg) as e:
        thresholds_at(tmp_path, text)
    assert "gates.lat" in str(e.value)


def test_gate_option_without_history_warns_once_naming_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = THRESHOLDS.replace('max = "150 ms"\nregression = "10%"',
                              'max = "150 ms"\nregression = { vs = "main", tolerance = "10%" }')
    th = thresholds_at(tmp_path, text)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "c0")
    monkeypatch.chdir(repo)
    store = LiveStore(repo / "perfgate-results", th, "first")
    cur = _current(1.0)
    with pytest.warns(UserWarning, match=r"gate regression vs 'main' not compared: commit \w+ but no run history in") as w:
        v = store.keep(evaluate(th.gate("lat"), cur, confidence=C, thresholds=th), cur, C, [], "t")
        store.keep(evaluate(th.gate("lat"), cur, confidence=C, thresholds=th), cur, C, [], "t")
    assert len(w) == 1 and "--perfgate-baseline" not in str(w[0].message) and v.outcome == "pass"


def test_repeated_runs_of_the_pull_request_count_as_current_runs(tmp_path: Path, th: Thresholds) -> None:
    """The suite run again at the PR's commit: its earlier stored runs join this one (m runs)."""
    repo, out, _ = _main_history(tmp_path, th, 8)
    (repo / "f").write_text("pr")
    git(repo, "commit", "-qam", "pr change")
    pr = git(repo, "rev-parse", "HEAD")
    ref = baseline.resolve("main", out, repo)
    first = compare_branch(th.gate("lat"), _current(1.0, seed=1), ref, confidence=C, thresholds=th, exclude_run="pr-0")
    assert first is not None and "1 run vs 8 baseline runs" in first.text
    for i in range(2):
        v = evaluate(th.gate("lat"), _current(1.0, seed=2 + i), confidence=C, thresholds=th)
        history.record(history.path_of(out), run_id=f"pr-{i}", started=f"2026-01-02T00:0{i}:00", git_commit=pr,
                       thresholds_file=None, thresholds_sha256=None, engines=[], verdicts=[(0, v.to_dict())])
    again = compare_branch(th.gate("lat"), _current(1.0, seed=1), ref, confidence=C, thresholds=th, exclude_run="pr-2")
    assert again is not None and "3 runs vs 8 baseline runs" in again.text and again.baseline_runs == 8
