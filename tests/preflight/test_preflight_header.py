"""The pytest header's preflight (issue 26): a session that selects a configured vLLM engine
(--perfgate-engine) says before anything is measured what vLLM refuses; a gate on that engine is a
warning, or with --perfgate-strict-feasibility a usage error (exit 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm")

ROOT = Path(__file__).parents[2]
pytest_plugins = ["pytester"]


def test_the_header_names_the_refused_draft_and_strict_stops(pytester: pytest.Pytester) -> None:
    text = (ROOT / "thresholds.toml").read_text().replace('"Qwen/Qwen2.5-7B-Instruct", num_speculative_tokens',
                                                          '"Qwen/Qwen2.5-1.5B-Instruct", num_speculative_tokens')
    pytester.makefile(".toml", thresholds=text)
    pytester.makepyfile(test_g="import pytest\n\n@pytest.mark.gate('draft_acceptance')\ndef test_acc():\n    pass\n")
    args = ["--collect-only", "-p", "no:cacheprovider", "--perfgate-engine", "speculative=qwen72b-spec"]
    r = pytester.runpytest_inprocess(*args)
    out = r.stdout.str()
    assert r.ret == 0, out
    assert ("perfgate: preflight: [engines.qwen72b-spec] speculative_config.model: vLLM refuses: ValidationError: "
            "Target and draft model should have the same vocabulary size. Target model vocab_size=152064. Draft "
            "model vocab_size=151936.") in out
    # a fresh process: pytester's in-process runs drop vLLM from sys.modules between runs, and a
    # second import of vLLM in one process registers its torch ops twice
    s = pytester.runpytest_subprocess(*args, "--perfgate-strict-feasibility")
    assert s.ret == pytest.ExitCode.USAGE_ERROR, s.stdout.str()[-3000:]
    assert ("--perfgate-strict-feasibility: gate draft_acceptance: engine qwen72b-spec: [engines.qwen72b-spec] "
            "speculative_config.model: vLLM refuses") in s.stderr.str()
