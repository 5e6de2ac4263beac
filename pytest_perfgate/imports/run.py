"""An imported run: the records a benchmark tool measured, with what its format can and cannot say.

:class:`ImportedRun` is a :class:`~pytest_perfgate.load.result.RunResult` (every gate kind, writer and
the store take it as they take our own runs) that also knows its :class:`Source`: the format, the
tool and version, whether the file has per-chunk times (else ITL is refused, never guessed), whether
the file holds a *sample* of the requests the tool ran ("n of N"), how the tool counted output
tokens, and the tool's own words for "run more requests" (the inconclusive verdict's hint).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract import RequestRecord
from ..load import metrics as m
from ..load import plausible
from ..load.result import RunResult
from ..verdicts.samples import Proportion, SampleError, Samples

PER_CHUNK_METRICS = frozenset({"itl"})  # metrics that need each chunk's arrival time


@dataclass(frozen=True)
class Source:
    """Where an imported run came from and what its format supports."""

    format: str  # registry name, e.g. "vllm-bench"
    tool: str  # e.g. "vllm bench serve"
    path: str
    version: str = ""  # the tool's version when the file says it
    level: str = ""  # a sweep's level (rate, concurrency) this run is
    per_chunk: bool = True  # every chunk's arrival time is in the file
    total: int | None = None  # requests the tool ran when the file keeps a sample of them
    token_counts: str = "server"  # "server" | "tokenizer" (re-tokenised text) | "unknown"
    more: str = "{tool} with {n} requests"  # the tool's own words for a run of n requests
    notes: tuple[str, ...] = ()
    load: tuple[str, float] | None = None  # a sweep level's load: ("rate", req/s) or ("concurrency", n)

    def rerun(self, n: int) -> str:
        return self.more.format(tool=self.tool, n=n)


@dataclass
class ImportedRun(RunResult):
    """A :class:`RunResult` read from a benchmark tool's file (see the module docstring)."""

    source: Source = field(default_factory=lambda: Source("", "", ""))

    # an imported run never changes once read: its views are computed once (each is a pass over every
    # record; a 100k-request file's four gates and report asked for them ~50 times: ~5 s)
    @property
    def measured(self) -> list[RequestRecord]:
        return self._view("measured", m.measured)

    @property
    def successful(self) -> list[RequestRecord]:
        return self._view("successful", m.successful)

    def _view(self, name: str, f: Callable[[list[RequestRecord]], list[RequestRecord]]) -> list[RequestRecord]:
        key = (id(self.records), len(self.records))
        got = self.__dict__.get("_views", {}).get(name)
        if got is None or got[0] != key:
            got = (key, f(self.records))
            self.__dict__.setdefault("_views", {})[name] = got
        return list(got[1])

    def drop_implausible(self) -> ImportedRun:
        """Each request whose times or counts no run can have (past int64, absurd token counts:
        :mod:`~pytest_perfgate.load.plausible`) failed with the cause named, its numbers dropped; the
        run's span from the requests that have real times."""
        if self.columnar() is not None:  # columns are built from plausible numbers only (load/columns.py)
            return self
        bad = [(r, why) for r in self.records if (why := plausible.problem(r))]
        if not bad:
            return self

        def fits(v: int) -> bool:
            return -plausible.INT64 <= v < plausible.INT64

        start = min((r.sent_ns for r in self.records if fits(r.sent_ns)), default=0)
        position = {id(r): i for i, r in enumerate(self.records)}
        for r, why in bad:
            plausible.fail(r, why)
            r.sent_ns = r.sent_ns if fits(r.sent_ns) else start  # no send time of its own: the run's start
            r.index = r.index if fits(r.index) else position[id(r)]  # no index of its own: its place in the file
        self.records.sort(key=lambda r: r.sent_ns)
        self.start_ns = start
        self.end_ns = max((r.end_ns or r.sent_ns for r in self.records), default=start)
        self.__dict__.pop("_views", None)
        return self

    def perfgate_data(self, metric: str) -> Samples | Proportion:
        from ..config import metrics as metric_names

        desc = metric_names.lookup(metric)
        name = desc.name if desc is not None else metric
        if name in PER_CHUNK_METRICS and not self.source.per_chunk:
            raise SampleError(f"{name}: {self.source.tool} ({self.source.format}) keeps no per-chunk times in "
                              f"{self.source.path}: {name} cannot be measured from it")
        if name == "queue_time" and not self._scheduled():
            raise SampleError(f"{name}: {self.source.format} has no scheduled send times (no send-lag check)")
        notes = self.notes()
        try:
            got = super().perfgate_data(metric)
        except SampleError as e:  # an error verdict names the file it came from too
            raise SampleError(f"{e} [{'; '.join(notes)}]") from None
        return dataclasses.replace(got, notes=(*got.notes, *notes)) if notes and isinstance(got, Samples) else got

    def _scheduled(self) -> bool:
        c = self.columnar()
        if c is not None:
            from ..load.columns import NONE

            return bool((c.scheduled_ns != NONE).any())
        return any(r.scheduled_ns is not None for r in self.records)

    def n_records(self) -> int:
        c = self.columnar()
        return len(c) if c is not None else len(self.records)

    def n_warmup(self) -> int:
        c = self.columnar()
        return int(c.warmup.sum()) if c is not None else sum(1 for r in self.records if r.warmup)

    def notes(self) -> tuple[str, ...]:
        """What a verdict on this run says of its source: the file, a sample's "n of N", the counts."""
        s = self.source
        out = [f"imported from {s.tool} ({s.format}{' ' + s.version if s.version else ''}): {s.path}"
               + (f" [{s.level}]" if s.level else "")]
        if s.total is not None and s.total != self.n_records():
            out.append(f"a sample: {self.n_records()} of {s.total} requests the tool ran are in the file; "
                       "the verdict is on that sample")
        warm = self.n_warmup()
        if warm:
            out.append(f"{warm} first request(s) dropped as warm-up (--warmup)")
        if s.token_counts == "tokenizer":
            out.append("output tokens counted by the tool re-tokenising the text, not the server's count")
        return (*out, *s.notes)

    def requests_for(self, samples_needed: int, samples: int) -> int:
        """Requests a run of this tool would need for ``samples_needed`` samples of a metric of which
        this run gave ``samples`` (per-chunk metrics give several a request; failures give none)."""
        ok = max(1, self.n_successful())
        per_request = samples / ok if samples else 1.0
        success = ok / max(1, self.n_measured())
        warm = self.n_warmup()
        return warm + math.ceil(samples_needed / max(per_request, 1e-9) / max(success, 1e-9))

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["source"] = dataclasses.asdict(self.source)
        return d
