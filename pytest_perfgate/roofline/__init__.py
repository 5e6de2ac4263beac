"""What the hardware allows, from first principles: the parts of physical floors that know nothing of
thresholds files, engines or verdicts (those are :mod:`pytest_perfgate.floors`).

* :mod:`.hardware` -- peaks and bandwidth (known accelerators, ``[hardware]``, detection);
* :mod:`.probe` -- measured CPU (and GPU) peaks, cached per machine;
* :mod:`.model` -- a model's shape from ``config.json`` or ``[models.NAME]``;
* :mod:`.config` -- the ``[hardware]`` and ``[models]`` tables, and one engine's floor inputs;
* :mod:`.formulas` -- roofline floors (prefill, decode, throughput, TP all-reduce, speculation);
* :mod:`.gates` -- a gate's floor for a workload, feasibility before measuring;
* :mod:`.gpu_check` -- measured GPU peaks beside the table (``python -m pytest_perfgate.roofline.gpu_check``).

No torch at import. Formulas and sources: docs/metrics.md#physical-floors.
"""
