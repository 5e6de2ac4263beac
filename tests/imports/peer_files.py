"""Exports in the schemas of AIPerf, guidellm and inference-perf, written from one scripted set of
requests (known send, chunk and end times), field for field as each tool's source writes them
(the modules named in each reader's docstring); the readers' tests compare what they read with
the script."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

T0 = 1_764_000_000.0  # a Unix time in seconds (AIPerf and guidellm stamp wall-clock times)
N = 10
CHUNKS, TOKENS_PER_CHUNK = 4, 2
FAILED = 6  # the index of the one failed request


@dataclass(frozen=True)
class Req:
    i: int
    start: float  # s
    ttft: float  # s
    gaps: tuple[float, ...]  # s between consecutive chunks

    @property
    def chunks(self) -> list[float]:
        out = [self.start + self.ttft]
        for g in self.gaps:
            out.append(out[-1] + g)
        return out

    @property
    def end(self) -> float:
        return self.chunks[-1] + 0.001

    @property
    def tokens(self) -> int:
        return CHUNKS * TOKENS_PER_CHUNK


def script() -> list[Req]:
    return [Req(i, T0 + 0.25 * i, 0.050 + 0.002 * i, tuple(0.010 + 0.001 * ((i + k) % 3) for k in range(CHUNKS - 1)))
            for i in range(N)]


def aiperf(path: Path, *, warmup: int = 0, server_counts: bool | None = None) -> Path:
    lines = []
    for r in script():
        meta = {"session_num": r.i, "x_request_id": f"id-{r.i}", "x_correlation_id": f"c-{r.i}",
                "conversation_id": f"conv-{r.i}", "turn_index": 0, "request_start_ns": round(r.start * 1e9),
                "request_ack_ns": None, "request_end_ns": round(r.end * 1e9), "worker_id": "worker_1",
                "record_processor_id": "record_processor_1",
                "benchmark_phase": "warmup" if r.i < warmup else "profiling", "was_cancelled": False,
                "cancellation_time_ns": None}
        if r.i == FAILED:
            lines.append({"metadata": meta, "metrics": {"input_sequence_length": {"value": 64, "unit": "tokens"}},
                          "error": {"code": 500, "type": "Internal Server Error", "message": "boom"}})
            continue
        metrics = {
            "input_sequence_length": {"value": 64, "unit": "tokens"},
            "time_to_first_token": {"value": r.ttft * 1e3, "unit": "ms"},
            "time_to_second_token": {"value": r.gaps[0] * 1e3, "unit": "ms"},
            "inter_chunk_latency": {"value": [g * 1e3 for g in r.gaps], "unit": "ms"},
            "request_latency": {"value": (r.chunks[-1] - r.start) * 1e3, "unit": "ms"},
            "output_sequence_length": {"value": r.tokens, "unit": "tokens"},
            "inter_token_latency": {"value": (r.chunks[-1] - r.chunks[0]) / (r.tokens - 1) * 1e3, "unit": "ms"},
        }
        lines.append({"metadata": meta, "metrics": metrics, "error": None})
    path.write_text("\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n")
    if server_counts is not None:
        agg = {"input_config": {"endpoint": {"use_server_token_count": server_counts}}, "records": {}}
        path.with_name("profile_export_aiperf.json").write_text(json.dumps(agg))
    return path


def _guidellm_request(r: Req) -> dict[str, Any]:
    timings = {"targeted_start": r.start, "queued": r.start - 0.01, "dequeued": r.start - 0.005,
               "scheduled_at": r.start - 0.002, "resolve_start": r.start - 0.001, "request_start": r.start,
               "first_request_iteration": r.chunks[0], "first_token_iteration": r.chunks[0],
               "first_output_token_iteration": r.chunks[0], "last_token_iteration": r.chunks[-1],
               "last_request_iteration": r.chunks[-1], "request_iterations": CHUNKS, "token_iterations": r.tokens,
               "request_end": r.end, "resolve_end": r.end + 0.0005, "finalized": r.end + 0.001}
    failed = r.i == FAILED
    info = {"request_id": f"req-{r.i}", "conversation_id": None, "history_len": 0, "turn_index": 0,
            "status": "errored" if failed else "completed", "scheduler_node_id": 0, "scheduler_process_id": 0,
            "scheduler_start_time": T0, "timings": timings, "error": "HTTP 500: boom" if failed else None,
            "traceback": None}
    out = {"type_": "generative_request_stats", "request_id": f"req-{r.i}", "response_id": None,
           "request_args": None, "output": None if failed else "x" * r.tokens, "info": info,
           "input_metrics": {"text_tokens": 64, "total_tokens": 64},
           "output_metrics": {"text_tokens": None if failed else r.tokens, "total_tokens": None if failed else r.tokens},
           "request_start_time": r.start, "prompt_tokens": 64, "output_tokens": None if failed else r.tokens}
    if not failed:
        out["time_to_first_token_ms"] = 1000 * r.ttft
        out["inter_token_latency_ms"] = 1000 * (r.chunks[-1] - r.chunks[0]) / (r.tokens - 1)
        out["time_per_output_token_ms"] = 1000 * (r.chunks[-1] - r.start) / r.tokens
    return out


def guidellm(path: Path, *, levels: int = 1, kept: int | None = None, version: int = 2) -> Path:
    benchmarks = []
    for k in range(levels):
        reqs = [_guidellm_request(r) for r in script()]
        ok = [q for q in reqs if q["info"]["status"] == "completed"][:kept]
        errored = [q for q in reqs if q["info"]["status"] == "errored"]
        made = {"successful": N - 1, "incomplete": 1, "errored": 1, "total": N + 1}
        benchmarks.append({
            "type_": "generative_benchmark", "id_": f"b{k}", "run_id": "run", "run_index": k,
            "config": {"id_": f"b{k}", "run_id": "run", "run_index": k, "sample_size": kept,
                       "strategy": {"type_": "constant", "rate": 2.0 * (k + 1)}},
            "scheduler_state": {}, "scheduler_metrics": {"requests_made": made},
            "metrics": {"request_totals": made},
            "requests": {"successful": ok, "errored": errored,
                         "incomplete": [_guidellm_request(script()[0]) | {"output_tokens": 3}], "total": None},
        })
    doc = {"metadata": {"version": version, "guidellm_version": "0.8.1", "python_version": "3.11.7",
                        "platform": "Linux"}, "args": {}, "benchmarks": benchmarks}
    path.write_text(json.dumps(doc, indent=2))
    return path


def inference_perf(path: Path, *, server_usage: bool = True) -> Path:
    entries = []
    for r in script():
        failed = r.i == FAILED
        token_times = [t for t in r.chunks for _ in range(TOKENS_PER_CHUNK)]
        response = None if failed else {
            "output_tokens": r.tokens + 1,  # the client's re-tokenisation: one more than the server said
            "server_usage": {"prompt_tokens": 64, "completion_tokens": r.tokens, "total_tokens": 64 + r.tokens}
            if server_usage else None,
            "response_chunks": ["data: {}"] * CHUNKS, "chunk_times": r.chunks, "output_token_times": token_times}
        entries.append({
            "start_time": r.start, "end_time": r.end, "request": json.dumps({"prompt": "x", "max_tokens": r.tokens}),
            "response": None if failed else "x" * r.tokens,
            "info": {"request_metrics": {"text": {"input_tokens": 64}}, "response_metrics": response,
                     "extra_info": {}, "lora_adapter": None, "labels": {}},
            "error": {"error_type": "HTTPError", "error_msg": "500 boom"} if failed else None,
        })
    path.write_text(json.dumps(entries, indent=2))
    return path
