"""The AIPerf, guidellm and inference-perf readers on files in each tool's schema (peer_files.py):
what each reads equals the scripted truth, what each format cannot say is refused or noted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peer_files import CHUNKS, FAILED, TOKENS_PER_CHUNK, N, aiperf, guidellm, inference_perf, script

import pytest_perfgate as perfgate
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.imports import ImportedRun, ResultsError, load_runs
from pytest_perfgate.verdicts.samples import SampleError, Samples
from pytest_perfgate.verdicts.verdict import evaluate

GATES = ('[phases.p]\n[gates.ttft]\nphase = "p"\nmetric = "ttft"\nstatistic = "p50"\nmax = "1 s"\n'
         'max_error_rate = 0.2\n')


def _values(run: ImportedRun, metric: str) -> list[float]:
    got = run.perfgate_data(metric)
    assert isinstance(got, Samples)
    return sorted(float(x) for x in got.values)


def _truth(metric: str) -> list[float]:
    ok = [r for r in script() if r.i != FAILED]
    if metric == "ttft":
        return sorted(r.ttft for r in ok)
    if metric == "e2e":
        return sorted(r.chunks[-1] - r.start for r in ok)
    if metric == "tpot":
        return sorted((r.chunks[-1] - r.chunks[0]) / (r.tokens - 1) for r in ok)
    return sorted(g for r in ok for g in r.gaps)


def _check_common(run: ImportedRun, fmt: str, metrics: tuple[str, ...]) -> None:
    assert run.source.format == fmt
    assert len(run.records) == N and len(run.successful) == N - 1
    assert [r.sent_ns for r in run.records] == sorted(r.sent_ns for r in run.records)
    for m in metrics:
        # Unix seconds as float64 resolve 0.24 us at 1.76e9 s (guidellm's stamps; the script's own)
        assert _values(run, m) == pytest.approx(_truth(m), abs=1e-6), m
    assert run.request_counts().measured == N and sum(run.request_counts().causes.values()) == 1


def test_aiperf(tmp_path: Path) -> None:
    run = perfgate.load_results(aiperf(tmp_path / "profile_export.jsonl"))
    _check_common(run, "aiperf", ("ttft", "e2e", "tpot", "itl"))
    (bad,) = [r for r in run.records if r.error]
    assert bad.error == "HTTP 500: boom"
    assert run.source.token_counts == "unknown"
    assert any("does not say whether aiperf used the server's counts" in n for n in run.notes())
    assert run.source.rerun(460) == "aiperf profile --request-count 460"


def test_aiperf_token_counts_and_warmup_phase(tmp_path: Path) -> None:
    run = perfgate.load_results(aiperf(tmp_path / "profile_export.jsonl", warmup=2, server_counts=False))
    assert run.source.token_counts == "tokenizer" and len(run.measured) == N - 2
    assert any("re-tokenising the text" in n for n in run.notes())
    run = perfgate.load_results(aiperf(tmp_path / "profile_export.jsonl", server_counts=True))
    assert run.source.token_counts == "server" and run.records[0].token_count_source == "server"


def test_aiperf_bad_line_names_the_line_and_field(tmp_path: Path) -> None:
    p = aiperf(tmp_path / "profile_export.jsonl")
    lines = p.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["metrics"]["time_to_first_token"]["unit"] = "fortnights"
    good, lines[3] = lines[3], json.dumps(rec)
    p.write_text("\n".join(lines))
    with pytest.raises(ResultsError, match=r"line 4: field 'time_to_first_token.unit': unknown time unit 'fortnights'"):
        perfgate.load_results(p)
    lines[3] = good
    p.write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
    with pytest.raises(ResultsError, match=r"profile_export.jsonl: line 6: not valid JSON"):
        perfgate.load_results(p)


def test_guidellm_has_no_chunk_times(tmp_path: Path) -> None:
    run = perfgate.load_results(guidellm(tmp_path / "benchmarks.json"))
    _check_common(run, "guidellm", ("ttft", "e2e", "tpot"))
    assert not run.source.per_chunk and run.source.version == "0.8.1"
    with pytest.raises(SampleError, match=r"itl: guidellm run \(guidellm\) keeps no per-chunk times"):
        run.perfgate_data("itl")
    assert any("1 incomplete request(s)" in n for n in run.notes())


def test_guidellm_sample_says_n_of_n_and_sweep_levels(tmp_path: Path) -> None:
    runs = load_runs(guidellm(tmp_path / "benchmarks.json", levels=3, kept=5))
    assert list(runs) == ["0-constant@2", "1-constant@4", "2-constant@6"]
    run = runs["1-constant@4"]
    assert len(run.records) == 6 and run.source.total == 10
    (tmp_path / "t.toml").write_text(GATES)
    th = load_thresholds(tmp_path / "t.toml")
    v = evaluate(th.gate("ttft"), run, thresholds=th)
    assert "a sample: 6 of 10 requests the tool ran are in the file" in v.note
    with pytest.raises(ResultsError, match=r"field 'version': unknown format version '9'"):
        perfgate.load_results(guidellm(tmp_path / "b9.json", version=9))


def test_inference_perf(tmp_path: Path) -> None:
    run = perfgate.load_results(inference_perf(tmp_path / "per_request_lifecycle_metrics.json"))
    _check_common(run, "inference-perf", ("ttft", "e2e", "tpot", "itl"))
    assert run.source.token_counts == "server"
    assert all(r.output_tokens == CHUNKS * TOKENS_PER_CHUNK for r in run.successful)  # the server's, not the client's
    assert run.perfgate_data("itl").n == (N - 1) * (CHUNKS - 1)  # per chunk: no zero gaps of shared token times
    with pytest.raises(SampleError, match="no scheduled send times"):
        run.perfgate_data("queue_time")
    run = perfgate.load_results(inference_perf(tmp_path / "p2.json", server_usage=False))
    assert run.source.token_counts == "tokenizer" and run.successful[0].output_tokens == CHUNKS * TOKENS_PER_CHUNK + 1


def test_every_peer_file_is_detected_not_confused(tmp_path: Path) -> None:
    from pytest_perfgate.imports import find

    files = {"aiperf": aiperf(tmp_path / "a.jsonl"), "guidellm": guidellm(tmp_path / "g.json"),
             "inference-perf": inference_perf(tmp_path / "i.json"),
             "vllm-bench": Path(__file__).parent / "data" / "vllm-bench-serve.json"}
    assert {name: find(p).name for name, p in files.items()} == {n: n for n in files}


REAL_AIPERF = Path(__file__).parent / "data" / "aiperf" / "profile_export.jsonl"


def test_real_aiperf_export_matches_its_own_aggregate() -> None:
    """AIPerf 0.13.0's own export (data/README.md): perfgate's samples of it give AIPerf's own means
    and np.percentile figures (profile_export_aiperf.json), to the nanosecond rounding of the file."""
    import numpy as np

    run = perfgate.load_results(REAL_AIPERF)
    agg = json.loads((REAL_AIPERF.parent / "profile_export_aiperf.json").read_text())
    assert len(run.records) == agg["request_count"]["avg"] == 20 and run.source.token_counts == "server"
    for metric, tag in (("ttft", "time_to_first_token"), ("itl", "inter_chunk_latency"), ("e2e", "request_latency"),
                        ("tpot", "inter_token_latency")):  # AIPerf's "inter_token_latency" is perfgate's TPOT
        v = np.asarray(_values(run, metric)) * 1000
        assert agg[tag]["unit"] == "ms"
        assert v.mean() == pytest.approx(agg[tag]["avg"], abs=1e-5), metric
        for q in (50, 90, 99):
            assert np.percentile(v, q) == pytest.approx(agg[tag][f"p{q}"], abs=1e-5), (metric, q)


REAL_IP = Path(__file__).parent / "data" / "inference-perf" / "per_request_lifecycle_metrics.json"


def test_real_inference_perf_export_against_its_own_summary() -> None:
    """inference-perf 0.7.0's own export (data/README.md): TTFT is its TTFT (np.percentile, linear);
    E2E differs by definition (its request_latency runs to the end of the response, perfgate's to the
    last chunk); its per-token ITL has a median of 0 (tokens of one chunk share a time), perfgate's
    per-chunk ITL does not."""
    import numpy as np

    run = perfgate.load_results(REAL_IP)
    lat = json.loads((REAL_IP.parent / "summary_lifecycle_metrics.json").read_text())["successes"]["latency"]
    assert len(run.records) == 20 and run.source.token_counts == "server"
    ttft = np.asarray(_values(run, "ttft"))
    assert ttft.mean() == pytest.approx(lat["time_to_first_token"]["mean"], abs=1e-8)
    for q, key in ((50, "median"), (90, "p90"), (99, "p99")):
        assert np.percentile(ttft, q) == pytest.approx(lat["time_to_first_token"][key], abs=1e-8)
    to_end = np.asarray([(r.end_ns or 0) - r.sent_ns for r in run.successful]) / 1e9
    assert to_end.mean() == pytest.approx(lat["request_latency"]["mean"], abs=1e-8)
    assert np.mean(_values(run, "e2e")) < to_end.mean()  # to the last chunk: before the end of the response
    assert lat["inter_token_latency"]["median"] == 0.0 and np.median(_values(run, "itl")) > 0
