"""The decision record: ``decisions.json``, one entry per phase, merged across runs.

Written atomically (temp file + ``os.replace``) under a file lock, incrementally after every test,
so a killed run leaves a valid file with everything measured up to then, and two CI jobs writing
the same directory don't corrupt it (each only replaces the phases it ran).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import Thresholds
from ..runtime.atomic import atomic_write_text
from ..runtime.links import check
from ..verdicts.record import VerdictRecord

SCHEMA = "pytest-perfgate/decisions/1"
FILENAME = "decisions.json"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def git_commit(cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]


def atomic_write_json(path: Path, doc: Any) -> None:
    atomic_write_text(path, json.dumps(doc, indent=2, allow_nan=False, default=str), root=path.parent)


def read_decisions(out_dir: Path) -> dict[str, Any]:
    """The stored document, or an empty one. A corrupt file is reported, not silently replaced."""
    path = out_dir / FILENAME
    if not path.exists():
        return {"schema": SCHEMA, "phases": {}, "fallbacks": {}}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable decision record ({e}); move it away to start afresh") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("phases"), dict):
        raise ValueError(f"{path}: not a perfgate decision record (no 'phases' table)")
    return doc


def decision(phase: str, out_dir: str | Path = "perfgate-results") -> dict[str, Any] | None:
    """The recorded entry of ``phase`` in ``out_dir/decisions.json`` (None if not recorded), for code
    outside pytest; inside a test use the fixture's ``perfgate.decision(phase)``."""
    entry = read_decisions(Path(out_dir)).get("phases", {}).get(phase)
    return dict(entry) if isinstance(entry, dict) else None


def gate_value(entry: Mapping[str, Any] | None, gate: str) -> float | None:
    """The observed value of ``gate`` in a phase entry (e.g. ``vision_kv_tokens_freed`` of phase 2)."""
    vs = (entry or {}).get("verdicts")
    for v in (VerdictRecord.read(d) for d in vs if isinstance(d, Mapping)) if isinstance(vs, list) else ():
        if v.gate == gate:
            return v.observed
    return None


def required_gates(th: Thresholds, phase: str) -> list[str]:
    """The threshold gates a phase needs evaluated to pass: every gate with a min or max, except the
    gates that validate a fallback plan (a gate whose ``runs`` names a plan: it is evaluated only
    when that plan is triggered)."""
    plans = set(th.fallbacks)
    return [g.name for g in th.gates_of(phase) if not g.recorded_only and not (set(g.runs) & plans)]


def phase_outcome(
    verdicts: Iterable[Mapping[str, Any]],
    fallback_tests: Iterable[Mapping[str, Any]],
    required: Iterable[str] | None = None,
) -> str:
    """The outcome of a phase from its verdicts:

    * "not run": no verdict at all;
    * "failed": a gate errored or was invalid (its client did not keep up), or failed with a triggered plan that was not validated;
    * "incomplete": a required threshold gate (``required``) has no verdict (deselected, ``-k``,
      interrupted), or only record-only verdicts exist: never "passed";
    * "inconclusive": a threshold gate could not decide;
    * "fallback": gates failed and *every* plan they triggered was validated (its test passed);
    * "passed": every required gate passed.
    """
    vs = [VerdictRecord.read(v) for v in verdicts]
    if not vs:
        return "not run"
    if any(v.outcome in ("error", "invalid") for v in vs):  # invalid: the client did not keep up
        return "failed"
    failed = [v for v in vs if v.outcome == "fail"]
    if failed:
        triggered = {f for v in failed for f in v.fallbacks}
        ok = {t["fallback"] for t in fallback_tests if t["outcome"] == "passed"}
        if not triggered or not triggered <= ok:
            return "failed"
    evaluated = {v.gate for v in vs if v.outcome != "recorded"}
    if required is not None and (set(required) - evaluated):
        return "incomplete"
    if not evaluated:
        return "incomplete"  # record-only verdicts never make a phase pass
    if any(v.outcome == "inconclusive" for v in vs):
        return "inconclusive"
    return "fallback" if failed else "passed"


def phase_entry(
    th: Thresholds,
    phase: str,
    verdicts: list[dict[str, Any]],
    fallback_tests: list[dict[str, Any]],
    *,
    run_id: str,
    commit: str | None,
    engines: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    ph = th.phases[phase]
    records = [VerdictRecord.read(v) for v in verdicts]
    triggered = sorted({f for v in records if v.outcome == "fail" for f in v.fallbacks})
    evaluated = {v.gate for v in records}
    return {
        "phase": phase,
        "title": ph.title,
        "depends_on": list(ph.depends_on),
        "outcome": phase_outcome(verdicts, fallback_tests, required_gates(th, phase)),
        "timestamp": now_iso(),
        "git_commit": commit,
        "thresholds_file": str(th.path),
        "thresholds_sha256": th.sha256,
        "run_id": run_id,
        "confidence": th.settings.confidence,
        "verdicts": verdicts,
        "triggered_fallbacks": triggered,
        "fallback_tests": fallback_tests,
        "not_evaluated": [g.name for g in th.gates_of(phase) if g.name not in evaluated],
        "required_not_evaluated": [g for g in required_gates(th, phase) if g not in evaluated],
        "engines": engines or [],
    }


def merge_phases(out_dir: Path, th: Thresholds, entries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """Replace the given phases in the stored record (keeping the others) and write it atomically."""
    from filelock import FileLock

    out_dir.mkdir(parents=True, exist_ok=True)
    lock = check(out_dir / (FILENAME + ".lock"), out_dir)  # the lock is opened O_TRUNC: never through a link
    with FileLock(str(lock), timeout=60):
        try:
            doc = read_decisions(out_dir)
        except ValueError:
            # keep the unreadable file for inspection; start a new record beside it
            bad = out_dir / FILENAME
            bad.replace(bad.with_suffix(".corrupt.json"))
            doc = {"schema": SCHEMA, "phases": {}, "fallbacks": {}}
        doc = merged(doc, th, entries)
        atomic_write_json(out_dir / FILENAME, doc)
        return doc


def merged(doc: dict[str, Any], th: Thresholds, entries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """``doc`` (a stored record, or ``{}``) with the given phases replaced and the plans of ``th``."""
    doc["schema"] = SCHEMA
    doc["updated"] = now_iso()
    doc.setdefault("phases", {}).update(entries)
    fb = doc.setdefault("fallbacks", {})
    for f in th.fallbacks.values():
        fb[f.name] = {"title": f.title, "cost": f.cost, "doc": f.doc}
    return doc
