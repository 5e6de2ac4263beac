"""Memory gates: a probe around any workload (fragmentation under three definitions, peaks, alloc
retries, OOMs), an allocator-setting sweep in child processes, max-safe-batch search. The KV-cache
pressure of engine runs is a load metric (load/kv.py). Formulas in docs/metrics.md; torch and numpy
are imported lazily."""
