"""One source per registry (issue 23): the engine kinds, the report writers and the metric-name
lists are read from their table, not written out again where they are used."""

from __future__ import annotations

from pytest_perfgate.config import metrics
from pytest_perfgate.engines import registry, requirements
from pytest_perfgate.engines.manager import EMBEDDED
from pytest_perfgate.load import capacity, goodput
from pytest_perfgate.preflight import VLLM_KINDS
from pytest_perfgate.verdicts import rules
from pytest_perfgate.writers import BUILTIN, filenames, names


def test_the_slo_latencies_are_the_metric_tables() -> None:
    assert metrics.slo_names() == ("ttft", "tpot", "e2e")
    assert goodput.SLO_NAMES == capacity._METRICS == rules.CENSORED_METRICS == metrics.slo_names()
    assert all(metrics.lookup(n) is not None and metrics.lookup(n).source == metrics.RECORDS  # type: ignore[union-attr]
               for n in metrics.slo_names())


def test_engine_kinds_are_read_from_the_registry() -> None:
    assert [k.name for k in registry.BUILTIN] == ["vllm", "openai", "vllm-server", "server", "transformers-vlm"]
    assert VLLM_KINDS == registry.VLLM_KINDS == ("vllm", "vllm-server")
    assert requirements.modules_for("vllm-server", {}, embedded=False) == ("vllm", "transformers")
    assert requirements.modules_for("openai", {}, embedded=True) == requirements.EMBEDDED_MODULES
    assert requirements.wants_gpu("vllm", {"device": "cuda"}) and not requirements.wants_gpu("server", {"device": "cuda"})
    assert all(spec.kind in registry.kinds() and registry.is_vllm(spec.kind) for spec in EMBEDDED.values())
    # every built-in kind's factory and arguments resolve (arguments None only where vLLM's source is
    # needed and missing), without importing vLLM or torch
    for kind in registry.BUILTIN:
        assert isinstance(kind.factory, str) and callable(registry._resolve(kind.factory)), kind.name
        known = kind.known_arguments()
        assert known is None and kind.vllm or known is not None and "model" in known, kind.name


def test_writers_and_their_files_are_read_from_the_registry() -> None:
    assert names() == sorted(BUILTIN)
    assert filenames() == ["report.html", "gates.xml", "summary.md"]  # in name order: html, junit, markdown
