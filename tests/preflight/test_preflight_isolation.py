"""Issue 38: nothing of vLLM's that can take a process down runs in the user's process. On x86 CPUs
without AVX512-BF16 vLLM's CPU platform loads ``_C_AVX2``/``_C_AVX512``; the preflight's backend
enumeration imported vllm/platforms/rocm.py, whose ``import vllm._C`` registered the same torch
library again: SIGABRT (rc 134) in ``perfgate check`` and in the test suite. These tests make any
x86 machine look like those CPUs (a ``sitecustomize`` on the child's path), inject an abort into
vLLM's import path, and drive the supervisor with scripted children."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_perfgate import preflight
from pytest_perfgate.config import load_thresholds
from pytest_perfgate.preflight.child import MARK, supervise

ROOT = Path(__file__).parents[2]
X86 = os.uname().machine in ("x86_64", "AMD64")

# the CPU flags vLLM's CPU platform reads to choose its kernels (vllm/platforms/cpu.py import_kernels)
ISA = {"avx2": "torch.cpu._is_avx512_supported = lambda: False\n"
               "torch.cpu._is_avx512_bf16_supported = lambda: False\n",
       "avx512-without-bf16": "torch.cpu._is_avx512_supported = lambda: True\n"
                              "torch.cpu._is_avx512_bf16_supported = lambda: False\n"}
ABORT_ON_IMPORT = """
import importlib.abc, os, sys
class _Abort(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "vllm.v1.attention.backends.flex_attention":  # imported by the backend enumeration only
            os.abort()
        return None
sys.meta_path.insert(0, _Abort())
"""


def _env(site: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(site)] if site else []
    paths += [str(ROOT), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _site(tmp_path: Path, code: str) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    (d / "sitecustomize.py").write_text(code)
    return d


def _check(site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_perfgate.cli", "check", *args], cwd=ROOT, env=_env(site),
                          capture_output=True, text=True, timeout=900)


def _preflight_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("preflight:") and " built in " not in ln]


@pytest.fixture(scope="module")
def plain() -> subprocess.CompletedProcess[str]:
    pytest.importorskip("vllm")
    return _check(None)


@pytest.mark.skipif(not X86, reason="vLLM's x86 CPU kernels (AVX2 / AVX-512 / AVX512-BF16) only")
@pytest.mark.parametrize("isa", sorted(ISA))
def test_perfgate_check_on_every_x86_isa_level_says_what_it_says_on_avx512_bf16(
        tmp_path: Path, isa: str, plain: subprocess.CompletedProcess[str]) -> None:
    """Before: the AVX2 child died with SIGABRT, perfgate check exited 134 with a C++ stack. A CPU
    cannot be made to look like one above it: on an AVX2-only CPU the AVX-512 kernels die of SIGILL in
    the child, which is then one finding of that unit, the rest reported (as any crash)."""
    site = _site(tmp_path, "import torch.cpu\n" + ISA[isa])
    r = _check(site)
    if isa.startswith("avx512") and not _cpu_has("avx512f"):
        assert r.returncode == 4, r.stdout[-2000:] + r.stderr[-3000:]
        crashed = [ln for ln in r.stdout.splitlines() if "preflight crashed" in ln]
        assert crashed and all("SIGILL" in ln for ln in crashed), r.stdout
        assert "5 vLLM config(s) built" in r.stdout
        assert "Traceback" not in r.stderr and "frame #" not in r.stdout + r.stderr
        return
    assert r.returncode == plain.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert _preflight_lines(r.stdout) == _preflight_lines(plain.stdout)
    assert "crashed" not in r.stdout and "Aborted" not in r.stderr


def _cpu_has(flag: str) -> bool:
    """The CPU's own flag (/proc/cpuinfo), whatever a sitecustomize makes torch say."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in ln.split() for ln in text.splitlines() if ln.startswith("flags"))


def test_a_child_that_aborts_is_one_finding_and_the_other_engines_are_reported(
        tmp_path: Path, plain: subprocess.CompletedProcess[str]) -> None:
    r = _check(_site(tmp_path, ABORT_ON_IMPORT))
    assert r.returncode == 4, r.stdout[-2000:] + r.stderr[-2000:]
    crashed = [ln for ln in r.stdout.splitlines() if "preflight crashed" in ln]
    assert crashed == ["preflight: [engines.qwen72b-spec+context_parallel (plan sequence_parallel)]: preflight "
                       "crashed: the process was killed by SIGABRT (vLLM's C++ code called abort) during the "
                       "attention backend enumeration; the preflight went on with the other engines in a fresh "
                       "process"], r.stdout
    assert "5 vLLM config(s) built" in r.stdout and "1 crashed" in r.stdout
    # every other finding is still there (the crashed unit's own notes and GPU count included)
    assert set(_preflight_lines(plain.stdout)) - set(_preflight_lines(r.stdout)) == set()
    assert "Traceback" not in r.stderr and "frame #" not in r.stdout + r.stderr


def test_the_backend_enumeration_never_imports_another_platforms_modules() -> None:
    pytest.importorskip("vllm")
    code = textwrap.dedent("""
        import json, sys
        from pytest_perfgate.preflight.build import OTHER_PLATFORMS, backends_with
        from vllm.platforms import current_platform
        yes, missing = backends_with("dcp", True)
        here = type(current_platform).__module__
        print(json.dumps({"imported": [m for m in OTHER_PLATFORMS if m in sys.modules and m != here],
                          "yes": yes, "missing": missing}))
    """)
    p = subprocess.run([sys.executable, "-c", code], env=_env(None), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["imported"] == []
    assert "ROCM_AITER_MLA" in doc["missing"]  # read from its source, as a backend not importable here
    assert "TRITON_MLA" in doc["yes"]


def _scripted(tmp_path: Path, body: str) -> list[str]:
    """A child that writes the given events (then does what ``body`` ends with)."""
    script = tmp_path / "child.py"
    script.write_text(f"import json, os, sys, time\nM = {MARK!r}\n"
                      "def ev(**e):\n    sys.stdout.write(M + json.dumps(e) + '\\n'); sys.stdout.flush()\n" + body)
    return [sys.executable, str(script)]


def test_the_supervisor_names_the_unit_step_and_cause_and_restarts_without_it(tmp_path: Path) -> None:
    th = load_thresholds(ROOT / "thresholds.toml")
    calls: list[list[str]] = []
    body = textwrap.dedent("""
        skip = set(sys.argv[1:])
        for u in ("a", "b", "c"):
            if u in skip:
                continue
            ev(ev="step", unit=u, step="config build")
            if u == "b":
                print("terminate called after throwing an instance of 'c10::Error'", file=sys.stderr)
                sys.stderr.flush()
                os.kill(os.getpid(), 6)
            if u == "c":
                sys.exit(3)
            ev(ev="finding", f=dict(engine=u, key="", level="note", message="ok"))
            ev(ev="done", unit=u)
        ev(ev="end")
    """)
    cmd = _scripted(tmp_path, body)
    report = preflight.Report()

    def make(skip: list[str]) -> list[str]:
        calls.append(list(skip))
        return [*cmd, *skip]

    supervise(th, {}, False, None, report, cmd=make)
    assert calls == [[], ["a", "b"], ["a", "b", "c"]]
    lines = [f.line() for f in report.findings]
    assert lines[0] == "[engines.a]: note: ok"
    assert lines[1].startswith("[engines.b]: preflight crashed: the process was killed by SIGABRT (vLLM's C++ code "
                               "called abort) during the config build (terminate called after throwing an instance "
                               "of 'c10::Error')")
    assert lines[2].startswith("[engines.c]: preflight crashed: the process exited with status 3 during the "
                               "config build")
    assert report.failed(strict=False) and len(report.crashed) == 2


def test_a_child_that_makes_no_progress_is_killed_at_the_step_deadline(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFGATE_PREFLIGHT_STEP_TIMEOUT", "10")
    th = load_thresholds(ROOT / "thresholds.toml")
    cmd = _scripted(tmp_path, "if 'a' not in sys.argv:\n    ev(ev='step', unit='a', step='config build')\n"
                              "    time.sleep(3600)\nev(ev='end')\n")
    report = preflight.Report()
    supervise(th, {}, False, None, report, cmd=lambda skip: [*cmd, *skip])
    (f,) = report.findings
    assert f.line() == ("[engines.a]: preflight crashed: no progress for 10 s (killed; PERFGATE_PREFLIGHT_STEP_TIMEOUT "
                        "sets the deadline) during the config build; the preflight went on with the other engines "
                        "in a fresh process")


def test_a_killed_childs_work_folder_is_removed_by_the_supervisor(tmp_path: Path) -> None:
    """The child builds engine configs in a folder the supervisor makes and removes: a child killed
    mid-build (SIGABRT here) ran no cleanup of its own, and its folder stayed in /tmp, one a crash."""
    th = load_thresholds(ROOT / "thresholds.toml")
    seen = tmp_path / "seen"
    body = textwrap.dedent(f"""
        work = os.environ["PERFGATE_PREFLIGHT_WORK"]
        with open({str(seen)!r}, "a") as f:
            f.write(work + "\\n")
        open(os.path.join(work, "config.json"), "w").write("{{}}")
        if "a" not in sys.argv:
            ev(ev="step", unit="a", step="config build")
            os.kill(os.getpid(), 6)
        ev(ev="end")
    """)
    cmd = _scripted(tmp_path, body)
    report = preflight.Report()
    supervise(th, {}, False, None, report, cmd=lambda skip: [*cmd, *skip])
    folders = seen.read_text().split()
    assert len(folders) == 2 and len(set(folders)) == 2  # one a child
    assert all(Path(f).name.startswith("perfgate-preflight-") and not Path(f).exists() for f in folders)
    assert report.crashed
