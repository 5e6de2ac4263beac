"""Statistic and comparison kinds: what ``statistic = "..."`` and ``compare = "..."`` in a thresholds
file may say, and what the load-time checks need of each kind. Pure Python (no numpy): ``config``
checks budgets at pytest start-up.

This module holds **the one registry** of kinds. A :class:`StatisticKind` parses its own texts
(``p99``, ``mean``, ...), knows the fewest samples at which a pass is possible (what the sequential
looks of :mod:`.looks` need), the requests a run needs before it can decide, and the load-time checks
that apply to it. A :class:`ComparisonKind` knows the dimensions its threshold may have.
:mod:`pytest_perfgate.verdicts.methods` extends both with the estimation (point, bounds, needed,
combine, wording) and its ``register(method)`` puts a Method here: one class, registered once, adds a
statistic kind end to end (parsing, load-time checks, evaluation, comparisons, sequential looks).

The built-in kinds below are registered at import so that a thresholds file loads without the
verdicts layer; verdicts/methods.py replaces each by its Method, a subclass of it
(:func:`register_kind` accepts a subclass of the registered class under the same name).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MEAN_MIN_N = 12  # the mean's bound needs at least this many samples (see verdicts.bounds.mean_bounds)


@dataclass(frozen=True)
class Statistic:
    """A parsed ``statistic``: its ``kind`` (a registered :class:`StatisticKind`, e.g. ``quantile``),
    the kind's parameter ``q`` (a quantile's level; any kind may use it) and the text as written."""

    kind: str
    q: float | None = None
    text: str = ""

    @staticmethod
    def parse(text: str) -> Statistic:
        """The statistic ``text`` names; ValueError listing the known kinds when none parses it."""
        t = text.strip().lower()
        for k in _KINDS.values():
            st = k.parse(t)
            if st is not None:
                return st
        raise ValueError(f"unknown statistic {text!r} (use {statistics_help()})")


class StatisticKind:
    """One statistic kind as the thresholds layer sees it; subclass it (through
    ``verdicts.methods.Method``) to add a kind."""

    kind: str = ""
    help: str = ""  # how a thresholds file writes it, for the error listing the known kinds ("" hides it)
    single_ok: bool = False  # takes ``single = true`` (one measured number, no interval)
    checks_budget: bool = False  # a sequential gate's max_samples is checked at load time for a reachable pass
    censors_failures: bool = False  # a max latency gate counts failed requests as over its limit (order statistics)

    def parse(self, text: str) -> Statistic | None:
        """The :class:`Statistic` for ``text`` (stripped, lower case), or None when it is not this kind's."""
        return None

    def label(self, st: Statistic) -> str:
        """How the kind reads in a usage error (``p99``, ``mean``)."""
        return st.text or self.kind

    def min_pass_samples(self, q: float | None, direction: str | None, alpha: float) -> int:
        """Fewest samples at which a pass is possible at error ``alpha`` (every sample on the good side):
        the first sequential look that may pass."""
        return 2

    def decidable_size(self, q: float | None, direction: str | None, c: float, compare: str | None) -> int | None:
        """Fewest requests a run needs before the gate can decide, None when there is no fixed count."""
        return None


class QuantileKind(StatisticKind):
    """``p50``, ``p99``, ``p99.9`` (any ``pNN``), ``median``: an order statistic."""

    kind = "quantile"
    help = "p50, p90, p99, p99.9 (any pNN), median"
    checks_budget = True
    censors_failures = True
    _RE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)$")

    def parse(self, text: str) -> Statistic | None:
        if text == "median":
            return Statistic("quantile", 0.5, "p50")
        m = self._RE.match(text)
        if m:
            q = float(m.group(1)) / 100.0
            if 0.0 < q < 1.0:
                return Statistic("quantile", q, text)
        return None

    def label(self, st: Statistic) -> str:
        return f"p{st.q * 100:g}" if st.q is not None else self.kind

    def min_pass_samples(self, q: float | None, direction: str | None, alpha: float) -> int:
        if q is None:
            return 2
        qq = q if direction != "min" else 1 - q  # the probability of a sample on the good side
        return max(1, math.ceil(math.log(alpha) / math.log(qq) - 1e-12))

    def decidable_size(self, q: float | None, direction: str | None, c: float, compare: str | None) -> int | None:
        """A quantile gate's early-stopping minimum (P99 at 95%: 299); a quantile comparison's per-run
        bounds at 1 - alpha/2 (P99: 368)."""
        if q is None:
            return None
        if compare is None:
            return self.min_pass_samples(q, direction, 1 - c)
        a2 = (1 - c) / 2
        return max(math.ceil(math.log(a2) / math.log(q) - 1e-12), math.ceil(math.log(a2) / math.log(1 - q) - 1e-12))


class MeanKind(StatisticKind):
    """``mean`` (``avg``, ``average``)."""

    kind = "mean"
    help = "mean"

    def parse(self, text: str) -> Statistic | None:
        return Statistic("mean", None, "mean") if text in ("mean", "avg", "average") else None

    def min_pass_samples(self, q: float | None, direction: str | None, alpha: float) -> int:
        return MEAN_MIN_N


class ValueKind(StatisticKind):
    """``value`` (``rate``, ``ratio``): one run-level number, a proportion, or a ratio of sums."""

    kind = "value"
    help = "value, rate"
    single_ok = True

    def parse(self, text: str) -> Statistic | None:
        return Statistic("value", None, text) if text in ("value", "rate", "ratio") else None


class SustainedKind(StatisticKind):
    """``sustained`` (``capacity``): the largest load level a sweep sustains under the gate's ``slo``
    terms (a capacity gate; decided by the sweep itself, load/gates.py)."""

    kind = "sustained"
    help = "sustained (a capacity gate)"

    def parse(self, text: str) -> Statistic | None:
        return Statistic("sustained", None, "sustained") if text in ("sustained", "capacity") else None


class ComparisonKind:
    """One ``compare`` kind as the thresholds layer sees it; ``verdicts.methods.Comparison`` extends it."""

    kind: str = ""
    dims: tuple[str, ...] | None = None  # dimensions of its threshold; None: the metric's own


class RatioKind(ComparisonKind):
    kind = "ratio"
    dims = ("number", "fraction")


class DifferenceKind(ComparisonKind):
    kind = "difference"


class ReductionKind(ComparisonKind):
    kind = "reduction"
    dims = ("number", "fraction")


_KINDS: dict[str, StatisticKind] = {}
_COMPARES: dict[str, ComparisonKind] = {}


def register_kind(k: StatisticKind | ComparisonKind) -> None:
    """Add ``k`` under ``k.kind``. A name already taken is a ValueError, except by the same class
    (registered again, or its module imported again) or a subclass of the registered class
    (verdicts' Method of a built-in kind extends it)."""
    if not k.kind:
        raise ValueError(f"{type(k).__name__}: a kind needs a name (its `kind` attribute)")
    if isinstance(k, StatisticKind):
        _check_free(_KINDS.get(k.kind), k)
        _KINDS[k.kind] = k
    else:
        _check_free(_COMPARES.get(k.kind), k)
        _COMPARES[k.kind] = k


def _same_class(a: type, b: type) -> bool:
    """The same class, or the same class of a module imported again (pytester's in-process runs)."""
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


def _check_free(old: object, k: StatisticKind | ComparisonKind) -> None:
    if old is not None and not _same_class(type(k), type(old)) and not isinstance(k, type(old)):
        raise ValueError(f"kind {k.kind!r} is already registered ({type(old).__name__}); "
                         f"{type(k).__name__} may replace it only as a subclass")


def kind(name: str) -> StatisticKind | None:
    """The registered statistic kind ``name``, None when unknown."""
    return _KINDS.get(name)


def comparison_kind(name: str) -> ComparisonKind | None:
    """The registered comparison kind ``name``, None when unknown."""
    return _COMPARES.get(name)


def known_kinds() -> tuple[str, ...]:
    return tuple(_KINDS)


def compare_kinds() -> tuple[str, ...]:
    return tuple(_COMPARES)


def statistics_help() -> str:
    """What ``statistic = ...`` may say, e.g. ``p50, p90, p99, p99.9 (any pNN), median, mean, value, rate``."""
    return ", ".join(k.help for k in _KINDS.values() if k.help)


for _k in (QuantileKind(), MeanKind(), ValueKind(), SustainedKind(), RatioKind(), DifferenceKind(), ReductionKind()):
    register_kind(_k)
