"""Issue 41: the streaming readers say what the old ones said: a corrupt line or piece named by the
file and its line (or line and column), a missing key by its name, the cap by its size."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from pytest_perfgate.imports import ResultsError, load_results, stream
from pytest_perfgate.imports.columnar import array_pieces

DATA = Path(__file__).parent / "data"


def test_a_corrupt_jsonl_line_is_named(tmp_path: Path) -> None:
    lines = (DATA / "aiperf" / "profile_export.jsonl").read_text().splitlines()
    lines[6] = lines[6][: len(lines[6]) // 2]
    f = tmp_path / "profile_export.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultsError, match=r"profile_export.jsonl: line 7: not valid JSON"):
        load_results(f, "aiperf")


def test_a_truncated_vllm_file_names_line_and_column(tmp_path: Path) -> None:
    text = (DATA / "vllm-bench-serve.json").read_text()
    f = tmp_path / "bench.json"
    f.write_text(text[: len(text) * 2 // 3])
    with pytest.raises(ResultsError, match=r"bench.json: not valid JSON \(truncated or corrupt\?\): .* at line 1 column"):
        load_results(f, "vllm-bench")


def test_a_missing_vllm_key_is_named(tmp_path: Path) -> None:
    doc = json.loads((DATA / "vllm-bench-serve.json").read_text())
    del doc["latencies"]
    f = tmp_path / "bench.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match=r"bench.json: field 'latencies': missing \(run vllm bench serve with"):
        load_results(f, "vllm-bench")


def test_a_truncated_inference_perf_list_names_line_and_column(tmp_path: Path) -> None:
    text = (DATA / "inference-perf" / "per_request_lifecycle_metrics.json").read_text()
    f = tmp_path / "per_request_lifecycle_metrics.json"
    f.write_text(text[: len(text) // 2])
    with pytest.raises(ResultsError, match=r"not valid JSON \(truncated or corrupt\?\): .* at line \d+ column"):
        load_results(f, "inference-perf")


def test_members_cut_small_blocks_the_same() -> None:
    """The cuts at every block size give the same values as the whole document."""
    raw = (DATA / "vllm-bench-serve.json").read_bytes()
    lists = {"itls": stream.ROWS, "errors": stream.STRINGS, "ttfts": stream.NUMBERS, "generated_texts": stream.STRINGS}
    doc = json.loads(raw)
    for block in (97, 1000, 1 << 20):
        got: dict[str, list[object]] = {}
        for key, text, whole in stream.members(io.BytesIO(raw), "f", 1 << 30, lists, block=block):
            if not whole and text:
                got.setdefault(key, []).extend(json.loads(b"[" + text + b"]"))
        assert got == {k: doc[k] for k in lists}


def test_cut_guesses_that_do_not_decode_are_malformed() -> None:
    with pytest.raises(stream.Malformed):
        list(stream.members(io.BytesIO(b'{"a": [1, 2'), "f", 1 << 30, {"a": stream.NUMBERS}))
    with pytest.raises(stream.Malformed):
        list(array_pieces(io.BytesIO(b'[{"a": 1}, {"b": '), "f", 1 << 30))
    with pytest.raises(ResultsError, match="over 0 MiB"):
        list(stream.members(io.BytesIO(b'{"a": 1}'), "f", 3, {}))


def test_an_int_past_64_bits_reads_as_the_old_path(tmp_path: Path) -> None:
    """orjson (the old path's decoder) reads 10**30 as a float: the pieces are decoded with it too."""
    from pytest_perfgate.imports import inference_perf

    doc = json.loads((DATA / "inference-perf" / "per_request_lifecycle_metrics.json").read_text())
    doc[3]["info"]["response_metrics"]["server_usage"]["completion_tokens"] = 10**30
    f = tmp_path / "per_request_lifecycle_metrics.json"
    f.write_text(json.dumps(doc))
    new, old = load_results(f), inference_perf._read_records(f)[0][1].drop_implausible()
    assert [(r.error, r.output_tokens, r.token_count_source) for r in new.records] == \
        [(r.error, r.output_tokens, r.token_count_source) for r in old.records]
