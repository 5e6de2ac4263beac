"""The outcome of one load run, and the metric data a gate takes from it (``perfgate_data``)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import metrics as metric_names
from ..contract import RequestRecord
from ..runtime.redaction import clean
from ..verdicts.samples import Proportion, RequestCounts, SampleError, Samples, make_samples, single
from . import column_metrics as cm
from . import metrics as m
from .columns import RequestColumns
from .schedule import LoadConfig

if TYPE_CHECKING:
    from ..config import Gate
    from .health import ClientHealth
    from .kv import KVPressure

_DISTRIBUTIONS = metric_names.from_source(metric_names.RECORDS)  # per-request samples: ttft, tpot, ... decode_rate


def error_cause(error: str) -> str:
    """The cause of an error message: the text before the first ``": "``."""
    return error.split(": ", 1)[0]


_API_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
_REASON_LIMIT = 160
_ADDRESS_ONLY = ("connection refused", "cannot connect")  # their detail is the address and errno


def server_reason(body: str) -> str:
    """What a server said in an error body: the ``message``/``detail`` of a JSON error (OpenAI's
    ``{"error": {"message": ...}}``, FastAPI's ``{"detail": ...}``), else the text itself."""
    import json

    text = body.strip()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    for _ in range(3):  # {"error": {"message": ...}}, {"error": "..."}, {"detail": [...]}
        if not isinstance(doc, dict):
            break
        inner = next((doc[k] for k in ("error", "message", "detail", "msg") if k in doc), None)
        if isinstance(inner, str):
            text = inner
            break
        if isinstance(inner, list) and inner:
            text = "; ".join(str(x.get("msg", x) if isinstance(x, dict) else x) for x in inner[:3])
            break
        doc = inner
    return clean(text, _REASON_LIMIT)  # decoded JSON may hold raw escapes or a secret again


def request_url(info: Mapping[str, Any]) -> str:
    """The URL an engine's requests go to (``base_url`` + the endpoint of its ``api``), "" when unknown."""
    base = str(info.get("base_url") or "").rstrip("/")
    return base + _API_PATHS.get(str(info.get("api") or "completions"), "") if base else ""


def describe_error(error: str, url: str) -> str:
    """The words after ``N x CAUSE`` in a list of causes: `` from URL: server's reason`` for an HTTP
    status, `` (URL): detail`` for the others (no detail for a refused connection: its URL says it)."""
    cause, _, detail = error.partition(": ")
    if cause.startswith("HTTP "):
        reason = server_reason(detail)
        return (f" from {url}" if url else "") + (f": {reason}" if reason else "")
    detail = "" if cause in _ADDRESS_ONLY else " ".join(detail.split())[:_REASON_LIMIT]
    return (f" ({url})" if url else "") + (f": {detail}" if detail else "")


# metrics whose value depends on how many tokens each request produced
_LENGTH_DEPENDENT = frozenset({"tpot", "itl", "e2e", "decode_rate", "output_throughput"})


@dataclass
class RunResult:
    """Records of one run with the counters around it. Implements ``MetricSource``."""

    records: list[RequestRecord]
    counters_before: dict[str, float] = field(default_factory=dict)
    counters_after: dict[str, float] = field(default_factory=dict)
    engine_info: dict[str, Any] = field(default_factory=dict)
    config: LoadConfig | None = None
    start_ns: int = 0
    end_ns: int = 0
    slos: dict[str, float] = field(default_factory=dict)  # goodput limits in seconds: ttft/tpot/e2e
    gauges: list[dict[str, float]] = field(default_factory=list)  # gauge polls during the run
    stopped_early: bool = False
    # sequential runs: a counter snapshot after each measured request, in order (per-request clusters)
    request_counters: list[dict[str, float]] = field(default_factory=list)
    health: ClientHealth | None = None  # did the client keep up (load/health.py, load/validity.py)
    worker_health: list[ClientHealth] = field(default_factory=list)  # per client worker (load/workers.py)
    # a sequential load run's looks and each gate's deciding look (load/decided.py: run_until_decided)
    decided: Any = None
    counter_notes: list[str] = field(default_factory=list)  # counters the run dropped: a /metrics value NaN (load/counters.py)
    # the records as columns (load/columns.py): a run built by from_columns keeps only these, ``records``
    # is then made from them on first use (and the columns dropped: records may be changed in place)
    columns: RequestColumns | None = None

    @classmethod
    def from_columns(cls, columns: RequestColumns, **kw: Any) -> Any:
        """A run whose records are ``columns`` (plausible ones: every number fits int64, counts are
        counts): the metrics, counts and verdicts read the columns, ``records`` is a lazy view."""
        run = cls(records=[], columns=columns, **kw)
        run.__dict__["_records"] = None
        return run

    def columnar(self) -> RequestColumns | None:
        """The columns while the records have not been made from them (the fast path), else None."""
        return self.columns if self.__dict__.get("_records") is None else None

    def n_measured(self) -> int:
        c = self.columnar()
        return int(c.measured.sum()) if c is not None else len(self.measured)

    def n_successful(self) -> int:
        c = self.columnar()
        return int(c.successful.sum()) if c is not None else len(self.successful)

    # -- views ---------------------------------------------------------------------------------
    @property
    def measured(self) -> list[RequestRecord]:
        return m.measured(self.records)

    @property
    def successful(self) -> list[RequestRecord]:
        return m.successful(self.records)

    def errors(self) -> Counter[str]:
        """Failed measured requests by cause (``"HTTP 500"``, ``"timeout"``, ...)."""
        c = self.columnar()
        if c is not None:
            return cm.errors(c, error_cause)
        return Counter(error_cause(r.error) for r in self.measured if r.error is not None)

    def request_counts(self) -> RequestCounts:
        """Measured, successful and failed requests (``samples.RequestRun``: a gate's error budget)."""
        reasons: dict[str, str] = {}
        url = request_url(self.engine_info)
        c = self.columnar()
        if c is not None:
            return cm.request_counts(c, url, error_cause, describe_error)
        measured = self.measured  # once: a pass over every record (100k of them for an imported run)
        failed = [r.error for r in measured if r.error is not None]
        for e in failed:
            if error_cause(e) not in reasons:
                reasons[error_cause(e)] = describe_error(e, url)
        return RequestCounts(len(measured), len(self.successful), dict(Counter(error_cause(e) for e in failed)),
                             {k: v for k, v in reasons.items() if v})

    def _why_empty(self) -> str:
        n = self.n_measured()
        if n == 0:
            return "no measured requests (nothing was sent)"
        errs = self.errors()
        if errs:
            return "no successful requests: " + self.request_counts().listed(3)
        return f"no successful requests among {n}"

    def _sequential(self) -> bool:
        return self.config is not None and self.config.in_flight == 1

    def perfgate_verdict(self, gate: Gate, c: float) -> dict[str, Any]:
        """A bounded goodput gate (``slo`` per-request limits) on this run: see :mod:`.gates`."""
        from .gates import goodput_fields

        return goodput_fields(gate, self, c)

    # -- MetricSource ----------------------------------------------------------------------------
    def perfgate_data(self, metric: str) -> Samples | Proportion:
        """Samples (time metrics in s, rates in tok/s or req/s) or a Proportion for ``metric``."""
        desc = metric_names.lookup(metric)
        if desc is None:
            raise SampleError(f"{metric}: unknown metric (known: {', '.join(metric_names.known_names())})")
        name = desc.name
        if desc.source == metric_names.REQUESTS:
            if not self.n_measured():
                raise SampleError(f"{name}: {self._why_empty()}")
            c = self.columnar()
            return cm.error_rate(c) if c is not None else m.error_rate(self.records)
        if desc.source in (metric_names.RECORDS, metric_names.RUN):
            got = dataclasses.replace(self._from_records(name), requests=self.request_counts())
            unforced = self._lengths_not_forced(name)
            return dataclasses.replace(got, notes=(*got.notes, unforced)) if unforced else got
        try:
            if desc.source == metric_names.COUNTERS:  # the run's failed requests travel with its rates
                return self._noted(dataclasses.replace(self._from_counters(name), requests=self.request_counts()))
            if desc.source == metric_names.KV:
                return self._noted(self.kv_pressure().perfgate_data(name))
        except SampleError as e:  # a counter missing because its readings were dropped (NaN): says so
            why = [n for n in self.counter_notes if n.split(" was ")[0].removeprefix("/metrics: ") in str(e)]
            if why:
                raise SampleError(f"{e} ({'; '.join(why)})") from None
            raise
        raise SampleError(f"{name}: not measured by a load run")

    def _noted(self, d: Samples | Proportion) -> Samples | Proportion:
        """Counter data with the run's notes (a counter dropped for a NaN reading) when it takes notes."""
        return dataclasses.replace(d, notes=(*d.notes, *self.counter_notes)) if self.counter_notes and isinstance(d, Samples) else d

    def _lengths_not_forced(self, name: str) -> str:
        """For a metric that depends on output lengths, on a server that does not take ``ignore_eos``
        (the openai kind's ``info()['output_lengths']``): the note that says so, with how many
        requests stopped before their ``max_tokens``; "" otherwise."""
        if name not in _LENGTH_DEPENDENT or not str(self.engine_info.get("output_lengths", "")).startswith("not forced"):
            return ""
        c = self.columnar()
        early = cm.early_stops(c) if c is not None else \
            sum(1 for r in self.successful if r.finish_reason not in (None, "length"))
        return (f"output lengths not forced (the server takes no ignore_eos): {early}/{self.n_successful()} "
                "request(s) stopped before max_tokens; measured over the tokens that came")

    def _from_records(self, name: str) -> Samples:
        c = self.columnar()
        if c is not None and not (name == "goodput" and self.slos) and not (
                name in ("output_throughput", "request_throughput") and self._sequential()):
            return self._from_columns(c, name)
        ok = self.successful
        if not ok and name != "queue_time":
            raise SampleError(f"{name}: {self._why_empty()}")
        if name == "ttft":
            return _seconds(m.ttfts(ok), name, [r.sent_ns for r in ok])
        if name == "e2e":
            return _seconds(m.e2es(ok), name, [r.sent_ns for r in ok])
        if name == "itl":
            gaps, ends = m.itl_gaps_and_ends(ok)  # numpy: no list of every chunk's gap (3 M Python ints for 100k requests)
            if not gaps.size:
                raise SampleError(f"{name}: no request streamed more than one chunk")
            return make_samples(gaps.astype(np.float64) / 1e9, "s", label=name, sent=ends.astype(np.float64) / 1e9)  # each gap when it ended
        if name == "queue_time":
            q = m.queue_times(self.records)
            if not q:
                raise SampleError(f"{name}: {self._why_empty() if not self.measured else 'no scheduled send times'}")
            return _seconds(q, name)
        if name in ("tpot", "decode_rate"):
            return self._per_request(name, ok)
        if name in ("output_throughput", "request_throughput") and self._sequential():
            # One request at a time: a ratio of sums (tokens over busy seconds), resampled by pairs.
            busy = [(r.end_ns or r.chunk_ns[-1]) - r.sent_ns for r in ok]
            pairs = [(r, b) for r, b in zip(ok, busy, strict=True) if b > 0]
            if not pairs:
                raise SampleError(f"{name}: no request with a positive duration")
            num = [m.output_tokens(r) if name == "output_throughput" else 1 for r, _ in pairs]
            unit_name = "tok/s" if name == "output_throughput" else "req/s"
            return make_samples(num, unit_name, label=name, denominators=[b / 1e9 for _, b in pairs])
        if name == "output_throughput":
            v = m.output_throughput(self.records)
            return _single(v, "tok/s", name)
        if name == "request_throughput":
            return _single(m.request_throughput(self.records), "req/s", name)
        # goodput
        if not self.slos:
            raise SampleError(f"{name}: needs SLO limits (RunResult.slos, e.g. {{'ttft': 0.2, 'tpot': 0.05}})")
        return _single(m.goodput(self.records, self.slos), "req/s", name)

    def _from_columns(self, c: RequestColumns, name: str) -> Samples:
        """:meth:`_from_records` on the columns (load/column_metrics.py): the same samples."""
        import numpy as np

        ok = np.flatnonzero(c.successful)
        if not ok.size and name != "queue_time":
            raise SampleError(f"{name}: {self._why_empty()}")
        if name in ("ttft", "e2e", "itl"):
            got = cm.metric(c, name)
            if got is None:
                raise SampleError(f"{name}: no request streamed more than one chunk")
            return got  # type: ignore[no-any-return]
        if name == "queue_time":
            q = cm.queue_ns(c)
            if not q.size:
                raise SampleError(f"{name}: {self._why_empty() if not self.n_measured() else 'no scheduled send times'}")
            return cm.seconds(q, name)
        if name in ("tpot", "decode_rate"):
            vals, rows, skipped = cm.per_request(c, name, ok)
            what = "TPOT" if name == "tpot" else "decode rate"
            reason = f"{skipped} request(s) with <= 1 output token ({what} undefined)" if skipped else ""
            if not vals.size:
                raise SampleError(f"{name}: undefined for every request: {reason}")
            s = make_samples(vals / 1e9 if name == "tpot" else vals, "s" if name == "tpot" else "tok/s", label=name,
                             sent=c.sent_ns[rows].astype(np.float64) / 1e9)
            return dataclasses.replace(s, notes=(reason,)) if reason else s
        if name in ("output_throughput", "request_throughput"):
            return _single(cm.throughput(c, name), "tok/s" if name == "output_throughput" else "req/s", name)
        raise SampleError(f"{name}: needs SLO limits (RunResult.slos, e.g. {{'ttft': 0.2, 'tpot': 0.05}})")

    def _per_request(self, name: str, ok: list[RequestRecord]) -> Samples:
        """TPOT (s) or decode rate (tok/s) of every request where it is defined, in send order."""
        ex = m.tpots(ok) if name == "tpot" else m.decode_rates(ok)
        if not ex.values:
            raise SampleError(f"{name}: undefined for every request: {ex.reason}")
        one = m.tpot_ns if name == "tpot" else m.decode_rate
        sent = np.asarray([r.sent_ns for r in ok if one(r) is not None], dtype=np.float64) / 1e9
        vals = np.asarray(ex.values, dtype=np.float64)
        s = make_samples(vals / 1e9 if name == "tpot" else vals, "s" if name == "tpot" else "tok/s", label=name,
                         sent=sent if sent.size == vals.size else None)
        return dataclasses.replace(s, notes=(ex.reason,)) if ex.reason else s

    def _counter_rate(self, name: str, p: Proportion | None, num: str, den: str, what: str,
                      none: str) -> Proportion:
        """A rate from counter deltas (``num`` of ``den``), per request where the engine gave
        per-request snapshots; a clear error when the counters are absent or did not move."""
        if p is None:
            raise SampleError(f"{name}: not available from this server: no {what} ({num}, {den})")
        if p.trials == 0:
            raise SampleError(f"{name}: {none} during the run")
        return m.per_request(p, self.counters_before, self.counters_after, self.request_counters, num, den)

    def _from_counters(self, name: str) -> Samples | Proportion:
        b, a = self.counters_before, self.counters_after
        if not a:
            raise SampleError(f"{name}: not available from this server: the engine exposes no counters (no /metrics)")
        if name == "acceptance_rate":
            return self._counter_rate(name, m.acceptance(b, a), m.ACCEPTED, m.DRAFT_TOKENS,
                                      "speculative-decoding counters", "no draft tokens were proposed")
        if name == "acceptance_length":
            v = m.acceptance_length(b, a)
            if v is None:
                raise SampleError(f"{name}: no drafts during the run (or no {m.DRAFTS} counter)")
            return single(v, label=name)
        if name == "prefix_cache_hit_rate":
            return self._counter_rate(name, m.prefix_cache_hit_rate(b, a), m.PREFIX_HITS, m.PREFIX_QUERIES,
                                      "prefix-cache counters", "no prefix-cache queries")
        # kv_cache_usage: polled during the run when configured, else the snapshot after it
        polled = [g[m.KV_USAGE] for g in self.gauges if m.KV_USAGE in g]
        if polled:
            return make_samples([100.0 * v for v in polled], "%", label=name)
        if m.KV_USAGE not in a:
            raise SampleError(f"{name}: no {m.KV_USAGE} gauge")
        return make_samples([100.0 * a[m.KV_USAGE]], "%", label=name)

    # -- reports -------------------------------------------------------------------------------
    def kv_pressure(self) -> KVPressure:
        """Peak KV-cache usage, preemptions, recomputed/swapped requests (:mod:`.kv`)."""
        from .kv import of_run

        return of_run(self)

    def summary(self) -> dict[str, dict[str, float]]:
        """P50/P90/P99/mean (and n) per time metric in seconds, decode rate in tok/s, run rates.

        Percentiles are the empirical order statistic X_(ceil(nq)), the same value a pNN gate reports."""
        from ..verdicts.bounds import empirical_quantile

        out: dict[str, dict[str, float]] = {}
        for name in _DISTRIBUTIONS:
            try:
                data = self.perfgate_data(name)
            except SampleError:
                continue
            assert isinstance(data, Samples)
            v = data.values
            out[name] = {
                "n": float(v.size), "mean": float(v.mean()),
                **{f"p{q}": empirical_quantile(v, q / 100) for q in (50, 90, 99)},
            }
        for name in ("output_throughput", "request_throughput"):
            c = self.columnar()
            v2 = cm.throughput(c, name) if c is not None else getattr(m, name)(self.records)
            if v2 is not None:
                out[name] = {"value": float(v2)}
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: records (no prompt text), counters, engine info, config, errors, summary."""
        return {
            "engine": self.engine_info,
            "config": self.config.to_dict() if self.config is not None else None,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "stopped_early": self.stopped_early,
            "slos": dict(self.slos),
            "counters_before": dict(self.counters_before),
            "counters_after": dict(self.counters_after),
            "request_counters": [dict(c) for c in self.request_counters],
            "errors": dict(self.errors()),
            "kv_pressure": self.kv_pressure().to_dict(),
            "summary": self.summary(),
            "records": [dataclasses.asdict(r) for r in self.records],
            "client": self.health.to_dict() if self.health is not None else None,
            "client_workers": [h.to_dict() for h in self.worker_health],
            "counter_notes": list(self.counter_notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """Inverse of :meth:`to_dict` (summary and errors are recomputed)."""
        from .health import ClientHealth

        cfg = data.get("config")
        client = data.get("client")
        return cls(
            records=[RequestRecord(**r) for r in data.get("records", [])],
            counters_before=dict(data.get("counters_before", {})),
            counters_after=dict(data.get("counters_after", {})),
            engine_info=dict(data.get("engine", {})),
            config=LoadConfig(**cfg) if cfg else None,
            start_ns=int(data.get("start_ns", 0)),
            end_ns=int(data.get("end_ns", 0)),
            slos=dict(data.get("slos", {})),
            stopped_early=bool(data.get("stopped_early", False)),
            request_counters=[dict(c) for c in data.get("request_counters", [])],
            health=ClientHealth.from_dict(client) if isinstance(client, Mapping) else None,
            worker_health=[ClientHealth.from_dict(h) for h in data.get("client_workers") or [] if isinstance(h, Mapping)],
            counter_notes=[str(x) for x in data.get("counter_notes") or [] if isinstance(x, str)],
        )


def _get_records(self: RunResult) -> list[RequestRecord]:
    got: list[RequestRecord] | None = self.__dict__.get("_records")
    if got is None:  # made from the columns once; from here on the records are the run's data
        cols = self.__dict__.get("columns")
        got = cols.records() if cols is not None else []
        self.__dict__["_records"] = got
        self.__dict__["columns"] = None
    return got


def _set_records(self: RunResult, records: list[RequestRecord]) -> None:
    self.__dict__["_records"] = records


setattr(RunResult, "records", property(_get_records, _set_records))  # noqa: B010  (a field, lazy when columnar)


def _seconds(values_ns: list[int], name: str, sent_ns: list[int] | None = None) -> Samples:
    """Samples in seconds; ``sent_ns``: when each was measured (the arrival order: dependence)."""
    sent = None if sent_ns is None or len(sent_ns) != len(values_ns) else np.asarray(sent_ns, dtype=np.float64) / 1e9
    return make_samples(np.asarray(values_ns, dtype=np.float64) / 1e9, "s", label=name, sent=sent)


def _single(v: float | None, unit_name: str, name: str) -> Samples:
    if v is None:
        raise SampleError(f"{name}: the run has no duration (no request was sent and answered)")
    return single(v, unit_name, label=name)
