# Root conftest: the plugin itself is loaded through its pytest11 entry point (pyproject.toml).
# Results of `pytest -m phase1 perf_tests` go to perfgate-results/ (see README "Outputs").
