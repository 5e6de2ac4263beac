"""Counters and gauges of a Prometheus text exposition (``/metrics``), flattened for the load runner."""

from __future__ import annotations

from ..runtime.redaction import printable

_SUMMED_LABELS = frozenset({"model_name", "engine"})


def parse_prometheus(text: str) -> dict[str, float]:
    """Flatten Prometheus text: ``{name[{labels}]: value}`` for counters and gauges.

    Counter names lose ``_total`` (``_created`` samples are dropped); the ``model_name`` and
    ``engine`` labels are summed over; other labels stay, sorted, as ``name{k="v",...}``.
    Unparseable text gives ``{}``.
    """
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    try:
        for fam in text_string_to_metric_families(text):
            if fam.type not in ("counter", "gauge", "unknown"):
                continue
            for s in fam.samples:
                name = s.name
                if name.endswith("_created"):
                    continue
                if fam.type != "gauge" and name.endswith("_total"):
                    name = name[: -len("_total")]
                labels = sorted((k, v) for k, v in s.labels.items() if k not in _SUMMED_LABELS)
                if labels:
                    name += "{" + ",".join(f'{k}="{printable(v)}"' for k, v in labels) + "}"  # the server's text
                out[name] = out.get(name, 0.0) + float(s.value)
    except ValueError:
        return {}
    return out
