"""Measured data handed to a gate: a sample set, a proportion, or a single measured value.

Values are kept in the base unit of their dimension (see :mod:`units`). Construction validates:
NaN, infinities, negative durations, empty lists and mixed units are rejected with a message that
names what was wrong.
"""

from __future__ import annotations

import math
import reprlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ..config.units import Quantity, Unit, UnitError, parse_quantity, to_base, unit
from ..runtime.heap import trim_large
from .dependence import Dependence, arrival_order, estimate, in_order


class SampleError(ValueError):
    """Samples that cannot be evaluated (NaN, inf, negative durations, empty, mixed units)."""


@dataclass(frozen=True, eq=False)
class Samples:
    """Independent observations of one metric, e.g. per-request TTFTs.

    ``denominators`` turns the set into a ratio of sums (e.g. output tokens over busy seconds):
    the "value" statistic is then ``sum(values) / sum(denominators)``, bounded by the ratio estimator
    (one pair per cluster).
    """

    values: npt.NDArray[np.float64]
    unit: Unit
    label: str = ""
    denominators: npt.NDArray[np.float64] | None = None
    notes: tuple[str, ...] = field(default=())
    # the requests the values came from: failed ones count against a gate's error budget and, for a
    # ``max`` latency quantile gate, as over the limit (censored: their values are unknown)
    requests: RequestCounts | None = None
    # when each value was measured (s, any origin: a request's send time): the arrival order the
    # per-request verdicts decide in, blocked by the run's dependence (:mod:`.dependence`); None: the
    # values are taken as independent draws
    sent: npt.NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.requests, Mapping):  # read back from a stored file
            object.__setattr__(self, "requests", RequestCounts(**self.requests))
        if self.sent is not None:
            sent = np.asarray(self.sent, dtype=np.float64).ravel()
            if sent.shape != self.values.shape or not np.all(np.isfinite(sent)):
                raise SampleError(f"samples {self.label or ''}: {sent.size} finite send times for {self.values.size} values")
            object.__setattr__(self, "sent", sent)

    def ordered(self) -> npt.NDArray[np.float64]:
        """The values in arrival order (as given when no send times are known, or when they are
        already in it: the values themselves, not a copy)."""
        if self.sent is None:
            return self.values
        got = self.__dict__.get("_in_order")
        if got is None:
            got = in_order(self.sent)
            object.__setattr__(self, "_in_order", got)
        if got:
            return self.values
        trim_large(self.n)  # before two full-size arrays (the order, the copy): the heap's freed pages
        # back first (~165 MiB at a 1M-request run's 31M ITL gaps: issue 41)
        return self.values[arrival_order(self.sent)]

    def dependence(self, ordered: npt.NDArray[np.float64] | None = None) -> Dependence:
        """The run's dependence (block length) from its values in arrival order; independent (block
        1) when no send times are known: values given as a plain list are taken as independent draws.
        ``ordered``: :meth:`ordered` already taken (no second copy of the values)."""
        if self.sent is None or self.denominators is not None:
            return Dependence(self.n)
        got = self.__dict__.get("_dependence")  # estimated once a Samples (a mean gate asks 4 times)
        if not isinstance(got, Dependence):
            got = estimate(self.ordered() if ordered is None else ordered)
            trim_large(self.n)  # the estimate's freed chunks (~20-40 MiB at 31M ITL gaps)
            object.__setattr__(self, "_dependence", got)
        return got

    @property
    def dimension(self) -> str:
        return self.unit.dimension

    @property
    def n(self) -> int:
        return int(self.values.size)

    def __len__(self) -> int:
        return self.n


ARRIVAL = "request in arrival order"  # a Proportion's clusters: one per request, in send order (dependence)


@dataclass(frozen=True)
class Proportion:
    """``successes`` out of ``trials`` (e.g. accepted out of proposed draft tokens).

    Without clusters the trials are assumed independent (one binomial). With ``cluster_successes``
    and ``cluster_trials`` (one entry per request, or per run) the bound is cluster-aware: build it
    with :func:`make_proportion` from two equal-length sequences.
    """

    successes: int
    trials: int
    label: str = ""
    extra: tuple[tuple[str, float], ...] = ()  # reported alongside (e.g. per-position rates)
    cluster_successes: tuple[int, ...] = ()
    cluster_trials: tuple[int, ...] = ()
    cluster_unit: str = "request"  # what one cluster is: "request", "run", "draw"
    requests: RequestCounts | None = None  # the requests of the run(s) it came from (error budget)

    def __post_init__(self) -> None:
        if isinstance(self.requests, Mapping):  # read back from a stored file
            object.__setattr__(self, "requests", RequestCounts(**self.requests))
        for name in ("successes", "trials"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise SampleError(f"proportion {self.label or ''}: {name} must be an integer, got {v!r}")
            if v < 0:
                raise SampleError(f"proportion {self.label or ''}: {name} must be >= 0, got {v}")
        if self.successes > self.trials:
            raise SampleError(
                f"proportion {self.label or ''}: successes {self.successes} > trials {self.trials}"
            )
        cs, ct = self.cluster_successes, self.cluster_trials
        if len(cs) != len(ct):
            raise SampleError(f"proportion {self.label or ''}: {len(cs)} cluster successes for {len(ct)} cluster trials")
        if ct and (sum(cs) != self.successes or sum(ct) != self.trials):
            raise SampleError(f"proportion {self.label or ''}: clusters sum to {sum(cs)}/{sum(ct)}, "
                              f"not {self.successes}/{self.trials}")

    @property
    def n(self) -> int:
        return int(self.trials)

    @property
    def unit(self) -> Unit:
        return unit("%")

    @property
    def clustered(self) -> bool:
        return bool(self.cluster_trials)

    def clusters(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(successes, trials) per cluster as floats; one cluster (the whole proportion) when unclustered."""
        if not self.cluster_trials:
            return np.asarray([self.successes], dtype=np.float64), np.asarray([self.trials], dtype=np.float64)
        return (np.asarray(self.cluster_successes, dtype=np.float64),
                np.asarray(self.cluster_trials, dtype=np.float64))


def make_proportion(successes: Any, trials: Any, *, label: str = "", unit_name: str = "request") -> Proportion:
    """A proportion from two integers (one binomial: the verdict says it assumes independent trials)
    or from two equal-length sequences, one entry per cluster (request): a cluster-aware bound.

    ``make_proportion(760, 1000)``; ``make_proportion([12, 9, 15], [16, 16, 20])``.
    """
    where = f" {label}" if label else ""
    scalar = [isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (successes, trials)]
    if all(scalar):
        return Proportion(int(successes), int(trials), label)
    if any(scalar) or isinstance(successes, (str, bytes)) or isinstance(trials, (str, bytes)):
        raise SampleError(f"proportion{where}: give two integers or two equal-length sequences, "
                          f"got {type(successes).__name__} and {type(trials).__name__}")
    try:
        s = np.asarray(list(successes) if not isinstance(successes, np.ndarray) else successes)
        t = np.asarray(list(trials) if not isinstance(trials, np.ndarray) else trials)
    except TypeError:
        raise SampleError(f"proportion{where}: successes and trials must be integers or sequences of them") from None
    if s.ndim != 1 or t.ndim != 1 or s.size != t.size:
        raise SampleError(f"proportion{where}: {s.size} successes for {t.size} trials: one entry per cluster each")
    if s.size == 0:
        raise SampleError(f"proportion{where}: no clusters (empty lists): nothing was measured")
    for name, a in (("successes", s), ("trials", t)):
        if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a))):
            raise SampleError(f"proportion{where}: {name} must be integers, got {a.dtype} values")
    si, ti = s.astype(np.int64), t.astype(np.int64)
    bad = (si < 0) | (si > ti)
    if bad.any():
        i = int(np.argmax(bad))
        raise SampleError(f"proportion{where}: cluster {i}: {int(si[i])} successes of {int(ti[i])} trials")
    return Proportion(int(si.sum()), int(ti.sum()), label, cluster_successes=tuple(si.tolist()),
                      cluster_trials=tuple(ti.tolist()), cluster_unit=unit_name)


def pool(parts: Iterable[Proportion], label: str = "") -> Proportion:
    """Pool proportions keeping clusters: a clustered part contributes its clusters, an unclustered
    part (e.g. one run's counter delta) counts as one cluster (the run). The parts' request counts
    (failed requests: the error budget) add up."""
    parts = list(parts)
    cs: list[int] = []
    ct: list[int] = []
    units: set[str] = set()
    extra: tuple[tuple[str, float], ...] = ()
    for p in parts:
        if p.clustered:
            cs.extend(p.cluster_successes)
            ct.extend(p.cluster_trials)
        else:
            cs.append(p.successes)
            ct.append(p.trials)
        units.add(p.cluster_unit if p.clustered else "run")
        extra = extra or p.extra
    unit_name = "request" if units == {"request"} else "run" if units == {"run"} else "request or run"
    return Proportion(sum(cs), sum(ct), label, extra, tuple(cs), tuple(ct), unit_name, pooled_requests(parts))


def with_failures(d: Any, measured: int, failed: int) -> Any:
    """``d`` (:class:`Samples` or :class:`Proportion`) carrying the counts of its requests: ``measured``
    of which ``failed`` failed (cause "failed"); ``d`` itself when nothing failed and no count is given."""
    if isinstance(failed, bool) or not isinstance(failed, int) or failed < 0:
        raise SampleError(f"{getattr(d, 'label', '') or 'data'}: failed must be a count >= 0, got {failed!r}")
    if not failed and not measured:
        return d
    total = measured + failed if isinstance(d, Samples) else measured
    if total < failed or total <= 0:
        raise SampleError(f"{getattr(d, 'label', '') or 'data'}: {failed} failed of {total} requests: "
                          "give requests = the number of requests measured")
    return replace(d, requests=RequestCounts(total, total - failed, {"failed": failed} if failed else {}))


def pooled_requests(parts: Iterable[Any]) -> RequestCounts | None:
    """The request counts of ``parts`` added up (runs, or data that carry their runs' counts), None
    when none of them carries any."""
    total: RequestCounts | None = None
    for p in parts:
        got = p.request_counts() if isinstance(p, RequestRun) else getattr(p, "requests", None)
        if isinstance(got, RequestCounts):
            total = got if total is None else total + got
    return total


@runtime_checkable
class MetricSource(Protocol):
    """Anything a gate can take its metric from (a load run, a memory report, a KV-pressure summary)."""

    def perfgate_data(self, metric: str) -> Samples | Proportion: ...


@dataclass(frozen=True)
class RequestCounts:
    """The measured requests of one or more runs: how many were sent, how many succeeded (streamed
    output), and the failed ones by cause (``{"HTTP 500": 3}``) with what the first of them said
    (``{"HTTP 500": "from http://h:8000/v1/completions: out of memory"}``). Runs pool with ``+``."""

    measured: int = 0
    succeeded: int = 0
    causes: Mapping[str, int] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        return sum(self.causes.values())

    def __add__(self, other: RequestCounts) -> RequestCounts:
        causes = Counter(self.causes)
        causes.update(other.causes)
        return RequestCounts(self.measured + other.measured, self.succeeded + other.succeeded, dict(causes),
                             {**other.reasons, **self.reasons})

    def listed(self, top: int | None = None) -> str:
        """``"3 x HTTP 500 from http://h:8000/v1/completions: out of memory, 1 x timeout (...)"``,
        most frequent first (the ``top`` most frequent, and how many other causes); "" when none failed."""
        ranked = Counter(self.causes).most_common()
        shown = [f"{n} x {cause}{self.reasons.get(cause, '')}"
                 for cause, n in ranked[:top]]
        rest = ranked[len(shown):]
        if rest:
            shown.append(f"{sum(n for _, n in rest)} x {len(rest)} other cause(s)")
        return ", ".join(shown)


@runtime_checkable
class RequestRun(MetricSource, Protocol):
    """A measured run of requests (``load.RunResult``): besides its samples, verdicts read its
    request counts (failed requests count against a gate's error budget) and the engine that
    served it (every number traces to its engine; physical floors need its hardware)."""

    @property
    def engine_info(self) -> Mapping[str, Any]: ...

    def request_counts(self) -> RequestCounts: ...


Data = Samples | Proportion


def _to_unit(u: str | Unit) -> Unit:
    if isinstance(u, Unit):
        return u
    try:
        return unit(u)
    except UnitError as e:
        raise SampleError(str(e)) from None


def make_samples(
    values: Iterable[Any],
    unit_name: str | Unit = "",
    *,
    label: str = "",
    denominators: Iterable[Any] | None = None,
    sent: Iterable[Any] | None = None,
    copy: bool = True,
) -> Samples:
    """Build validated :class:`Samples` from numbers in ``unit_name`` or from quantity strings.

    ``make_samples([12.1, 13.4], "ms")`` or ``make_samples(["12 ms", "0.013 s"])``. ``sent``: when
    each value was measured (seconds, e.g. each request's send time): the verdicts then decide in
    arrival order and account for the run's dependence (:mod:`.dependence`). ``copy=False``: a
    float64 ``values`` array the caller gives up is scaled in place and kept, not copied (a 31M-gap
    ITL run's values: issue 41).
    """
    u = _to_unit(unit_name) if unit_name != "" or isinstance(unit_name, Unit) else None
    raw = list(values) if not isinstance(values, np.ndarray) else values
    where = f" ({label})" if label else ""
    if isinstance(raw, np.ndarray):
        if raw.dtype.kind not in "iuf":
            raise SampleError(f"samples{where}: expected numbers, got an array of {raw.dtype}")
        arr = raw.astype(np.float64, copy=copy).ravel()
        if u is None:
            u = unit("")
        if u.name == "%":  # in place on the copy: the same float64 operation as ``arr / 100.0``
            arr /= 100.0
        else:
            arr *= u.factor
    else:
        bases: list[float] = []
        seen: Unit | None = u
        for i, v in enumerate(raw):
            if isinstance(v, str):
                try:
                    q: Quantity = parse_quantity(v)
                except UnitError as e:
                    raise SampleError(f"samples{where}: item {i}: {e}") from None
                if seen is not None and q.unit.dimension != seen.dimension:
                    raise SampleError(
                        f"samples{where}: mixed units: item {i} is {q.unit.name or 'a plain number'!r} "
                        f"({q.unit.dimension}) but earlier samples are {seen.name or 'plain'!r} ({seen.dimension})"
                    )
                seen = seen or q.unit
                bases.append(q.base)
            elif isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                shown = reprlib.repr(v) if not hasattr(v, "records") else f"a {type(v).__name__} of {len(v.records)} requests"
                raise SampleError(f"samples{where}: item {i} is not a number: {shown}")
            else:
                try:
                    x = float(v)
                except OverflowError:  # an int too large for a float
                    raise SampleError(f"samples{where}: item {i} is too large: {v!r:.40}") from None
                bases.append(to_base(x, u) if u else x)
        u = seen or unit("")
        arr = np.asarray(bases, dtype=np.float64)
    _validate(arr, u, where)
    dens = None
    if denominators is not None:
        try:
            dens = np.asarray(list(denominators), dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise SampleError(f"samples{where}: denominators must be numbers: {e}") from None
        if dens.shape != arr.shape:
            raise SampleError(f"samples{where}: {dens.size} denominators for {arr.size} values")
        if not np.all(np.isfinite(dens)) or np.any(dens <= 0):
            raise SampleError(f"samples{where}: denominators must be finite and > 0")
    times = None
    if sent is not None:
        try:
            times = np.asarray(list(sent) if not isinstance(sent, np.ndarray) else sent, dtype=np.float64)
        except (TypeError, ValueError, OverflowError) as e:
            raise SampleError(f"samples{where}: send times must be numbers: {e}") from None
    return Samples(arr, u, label, dens, sent=times)


def arrival_data(data: Any, metric: str, *, label: str = "") -> Data:
    """:func:`as_data`, with :class:`Samples` made here from a run (``data`` not itself Samples) put
    in arrival order: their values as :meth:`Samples.ordered` gives them, their send times sorted
    with them, so that the verdict's arrival-ordered values are the samples' own and no copy of
    them is held beside the values and send times in their first order (issue 41: two full-size
    arrays fewer at a 1M-request run's 31M ITL gaps). The same data as a set and in arrival order
    (every order statistic, the dependence estimate): only a verdict that reads the values in their
    first order (a mean's float sum) tells them apart; Samples given as such are returned as they are."""
    d = as_data(data, metric, label=label)
    if d is data or not isinstance(d, Samples) or d.sent is None or d.denominators is not None:
        return d
    values, sent, done, ordered = d.values, d.sent, d.__dict__.get("_dependence"), d.__dict__.get("_in_order")
    u, name, notes, requests = d.unit, d.label, d.notes, d.requests
    del d  # made here: its arrays go as they are read (a source that keeps its own Samples keeps them)
    if not (in_order(sent) if ordered is None else ordered):
        trim_large(int(values.size))  # the heap's freed pages back first (as Samples.ordered)
        order = arrival_order(sent)
        if values.size <= np.iinfo(np.int32).max:  # int32: half a full-size array beside the others
            order = order.astype(np.int32)
        sent = sent[order]  # the sorted send times, then the values: never both copies at once
        values = values[order]
        del order
    got = Samples(values, u, name, None, notes, requests, sent=sent)
    object.__setattr__(got, "_in_order", True)
    if isinstance(done, Dependence):
        object.__setattr__(got, "_dependence", done)
    return got


def _validate(arr: npt.NDArray[np.float64], u: Unit, where: str) -> None:
    if arr.size == 0:
        raise SampleError(f"samples{where}: no samples (empty list): nothing was measured")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise SampleError(f"samples{where}: item {i} is {float(arr[i])}; NaN and infinite values are rejected")
    if u.dimension in ("time", "bytes", "token_rate", "request_rate", "bandwidth") and (arr < 0).any():
        i = int(np.argmax(arr < 0))
        kind = "duration" if u.dimension == "time" else "value"
        raise SampleError(f"samples{where}: item {i} is a negative {kind} ({arr[i] / u.factor:g} {u.name})")


def single(value: Any, unit_name: str = "", *, label: str = "") -> Samples:
    """One measured number (a run-level value): verdicts say "single measurement"."""
    return make_samples([value], unit_name, label=label)


def as_data(data: Any, metric: str, *, label: str = "") -> Data:
    """Coerce what a test passed to ``check`` into evaluable data for ``metric``."""
    if isinstance(data, (Samples, Proportion)):
        return data
    if isinstance(data, MetricSource):
        return data.perfgate_data(metric)
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        if not math.isfinite(data):
            raise SampleError(f"value{(' (' + label + ')') if label else ''} is {data!r}; NaN/inf rejected")
        return single(data, label=label)
    if isinstance(data, str):
        return single(data, label=label)
    if isinstance(data, (Sequence, np.ndarray)):
        return make_samples(data, label=label)
    raise SampleError(
        f"cannot evaluate {type(data).__name__}: pass perfgate.samples([...], unit), "
        "a Proportion, or a run result"
    )
