"""Third-party import noise is dropped in perfgate's processes, one named message at a time
(pytest_perfgate/runtime/noise.py, issue 25); everything else those loggers say still shows."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate.runtime import noise


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.got: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.got.append(record.getMessage())


def test_only_the_named_messages_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "cuda_hint", lambda: False)
    keep = _Keep()
    loggers = [logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")]
    saved = [list(log.filters) for log in loggers]
    for log in loggers:  # this session's plugin may have installed them already
        log.filters[:] = [f for f in log.filters if not isinstance(f, noise._Drop)]
        log.addHandler(keep)
    try:
        assert noise.install() == ["torchao", "torch.utils._pytree"]
        noise.install()  # idempotent
        assert [sum(isinstance(f, noise._Drop) for f in log.filters) for log in loggers] == [1, 1]
        loggers[0].warning("Failed to load /v/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: Could not load this library: x")
        loggers[0].warning("Failed to load /v/torchao/_C_cutlass_90a.abi3.so: undefined symbol: foo")  # a real error
        loggers[0].error("quantize_ failed: shape mismatch")
        loggers[1].warning("%s is an Enum subclass and is now natively supported by torch.compile as an opaque value "
                           "type. Calling register_constant() on Enum subclasses is deprecated", "<enum 'K'>")
        loggers[1].warning("something else about pytrees")
    finally:
        for log, s in zip(loggers, saved, strict=True):
            log.removeHandler(keep)
            log.filters[:] = s
    assert keep.got == ["Failed to load /v/torchao/_C_cutlass_90a.abi3.so: undefined symbol: foo",
                        "quantize_ failed: shape mismatch", "something else about pytrees"]


def test_with_a_gpu_torchaos_kernel_failures_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "cuda_hint", lambda: True)
    loggers = [logging.getLogger("torchao"), logging.getLogger("torch.utils._pytree")]
    saved = [list(log.filters) for log in loggers]
    for log in loggers:
        log.filters[:] = [f for f in log.filters if not isinstance(f, noise._Drop)]
    try:
        assert noise.install() == ["torch.utils._pytree"]
        assert not [f for f in loggers[0].filters if isinstance(f, noise._Drop)]
    finally:
        for log, s in zip(loggers, saved, strict=True):
            log.filters[:] = s


def test_a_perfgate_session_importing_torchao_prints_none_of_it(tmp_path: Path) -> None:
    (tmp_path / "thresholds.toml").write_text("[phases.phase1]\n")
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        def test_x():
            import torchao  # loads its CUDA kernels at import, registers its enums with torch
            assert torchao
    """))
    args = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_x.py",
            "--perfgate-thresholds", "thresholds.toml", "--perfgate-out", "out"]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    both = proc.stdout + proc.stderr
    assert proc.returncode == 0, both[-3000:]
    assert "Failed to load" not in both and "register_constant" not in both, both[-3000:]


pytest_plugins = ["pytester"]


def test_torch_jit_deprecation_is_not_in_a_perfgate_warnings_summary(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", thresholds="[phases.phase1]\n")
    pytester.makepyfile(test_w="""
        import warnings

        def test_w():
            msg = "`torch.jit.script_method` is deprecated. Please switch to `torch.compile` or `torch.export`."
            warnings.warn_explicit(msg, DeprecationWarning, "_script.py", 365, module="torch.jit._script")
            warnings.warn_explicit("a deprecation of someone else", DeprecationWarning, "x.py", 1, module="x")
    """)
    r = pytester.runpytest("-p", "no:cacheprovider", "--perfgate-thresholds", "thresholds.toml")
    r.assert_outcomes(passed=1, warnings=1)
    r.stdout.no_fnmatch_line("*torch.jit.script_method*")
    r.stdout.fnmatch_lines(["*a deprecation of someone else*"])
