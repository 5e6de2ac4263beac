"""pytest-benchmark interop, without importing pytest-benchmark (neither plugin requires the other).

``perfgate.check(benchmark, gate="tokenizer_time")`` evaluates the gate on the ``benchmark``
fixture's raw per-round timings (seconds per iteration, ``benchmark.stats.stats.data``), not on its
summary; the verdict is added to the fixture's ``extra_info["perfgate"]``, so it lands in
``--benchmark-json``.
"""

from __future__ import annotations

from typing import Any

from ..verdicts.samples import SampleError


def is_benchmark(data: Any) -> bool:
    """A pytest-benchmark ``BenchmarkFixture`` (duck-typed: its class name and ``extra_info``)."""
    return type(data).__name__ == "BenchmarkFixture" and isinstance(getattr(data, "extra_info", None), dict)


def samples_of(bench: Any, label: str = "") -> Any:
    """The fixture's raw per-round timings as :class:`~pytest_perfgate.verdicts.samples.Samples` in seconds."""
    from ..verdicts.samples import make_samples

    meta = getattr(bench, "stats", None)
    rounds = getattr(getattr(meta, "stats", None), "data", None)
    if not rounds:
        raise SampleError(f"benchmark{' ' + label if label else ''}: no rounds measured yet "
                          "(call benchmark(fn) first; --benchmark-disable runs one round without timing)")
    return make_samples([float(x) for x in rounds], "s", label=label or str(getattr(bench, "name", "benchmark")))


def annotate(bench: Any, verdict: Any) -> None:
    """Put the verdict into ``benchmark.extra_info["perfgate"][gate]`` (JSON-able)."""
    d = verdict.to_dict()
    bench.extra_info.setdefault("perfgate", {})[verdict.gate] = {
        k: d.get(k) for k in ("outcome", "metric", "statistic", "observed", "lower", "upper", "n", "unit",
                              "threshold", "direction", "method", "confidence", "summary")
    }
