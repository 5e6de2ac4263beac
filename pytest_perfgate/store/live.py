"""What a running session does with the store: keep every verdict's data, compare with the
baseline, append verdicts to the history. Used by the plugin; no pytest import."""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import history, records
from .baseline import BaselineRef, apply, compare_stored

if TYPE_CHECKING:
    from ..config import Thresholds
    from ..verdicts.verdict import Verdict

Hook = Callable[["Verdict", Any, float, Sequence[Any]], "Verdict"]


class LiveStore:
    def __init__(self, out_dir: Path, thresholds: Thresholds, run_id: str, baseline: BaselineRef | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.thresholds = thresholds
        self.run_id = run_id
        self.baseline = baseline
        self._seq = itertools.count()
        self._extras: dict[str, dict[str, Any]] = {}  # gate -> extras of its latest stored verdict
        self._stored: set[str] = set()
        self._hist_seq = itertools.count()
        self._branch_refs: dict[str, BaselineRef | None] = {}
        self.errors: list[str] = []  # outputs that could not be written: the session fails at its end

    def hook(self, test: str) -> Hook:
        """The ``store`` callback of one test's ``perfgate`` fixture."""

        def store(v: Verdict, data: Any, confidence: float, drawn: Sequence[Any]) -> Verdict:
            return self.keep(v, data, confidence, drawn, test)

        return store

    def keep(self, v: Verdict, data: Any, confidence: float, drawn: Sequence[Any], test: str) -> Verdict:
        from ..verdicts.samples import Proportion, Samples

        gate = self.thresholds.gate(v.gate)
        if isinstance(data, Samples) and data.n == 1 and v.method == "clopper-pearson" and not gate.compare:
            # sample_until_decided hands pooled proportions back as one fraction: keep the counts
            data = Proportion(round(v.observed * v.n), v.n, gate.name)
        extra: dict[str, Any] = {}
        try:
            rel = records.write(self.out_dir, gate=gate, verdict=v, data=data, confidence=confidence,
                                run_id=self.run_id, test=test, seq=next(self._seq),
                                extra_runs=[d for d in drawn if hasattr(d, "records")])
            extra["samples"] = rel.as_posix()
        except (OSError, TypeError, ValueError) as e:  # the test goes on; the session fails at its end
            where = getattr(e, "filename", None) or self.out_dir / records.DIRNAME
            msg = f"{where}: gate data not stored: {getattr(e, 'strerror', None) or e}"
            warnings.warn(f"perfgate: {msg} (gate {v.gate})", stacklevel=3)
            if msg not in self.errors:  # once per place and cause, not once per gate
                self.errors.append(msg)
        ref = self.baseline if self.baseline is not None else self._branch_ref(gate.regression_vs)
        if ref is not None and v.outcome != "error":
            try:
                if ref.branch is not None:  # a branch's recent runs, run effects included
                    from .mergegate import compare_branch

                    cmp = compare_branch(gate, data, ref, confidence=confidence, thresholds=self.thresholds,
                                         exclude_run=self.run_id)
                    if cmp is None:  # no run of the gate on the branch yet: its tip's run, if any
                        cmp = compare_stored(gate, data, ref, confidence=confidence, thresholds=self.thresholds,
                                             exclude_run=self.run_id)
                else:
                    cmp = compare_stored(gate, data, ref, confidence=confidence, thresholds=self.thresholds,
                                         exclude_run=self.run_id)
            except (OSError, ValueError) as e:
                warnings.warn(f"perfgate: gate {v.gate}: baseline comparison failed: {e}", stacklevel=3)
                cmp = None
            if cmp is not None:
                v = apply(v, cmp, gate)
                extra["vs_baseline"] = cmp.to_dict()
        self._extras[v.gate] = extra
        return v

    def _branch_ref(self, branch: str | None) -> BaselineRef | None:
        """A gate's ``regression = { vs = BRANCH }``: the branch in this results directory's history
        (read in the current directory's git repository); None, with one warning, when it names nothing."""
        if branch is None:
            return None
        if branch not in self._branch_refs:
            from .baseline import resolve

            try:
                self._branch_refs[branch] = resolve(branch, self.out_dir, Path.cwd())
            except ValueError as e:
                why = str(e).replace(f"--perfgate-baseline {branch}: ", "")
                warnings.warn(f"perfgate: gate regression vs {branch!r} not compared: {why}", stacklevel=4)
                self._branch_refs[branch] = None
        return self._branch_refs[branch]

    def extras(self, v: Verdict) -> dict[str, Any]:
        """Keys to add to the verdict's dict: ``samples`` (data file) and ``vs_baseline``. By gate: the
        verdict object may be replaced after the store (physical floors) before it is recorded."""
        return self._extras.pop(v.gate, {})

    def record_history(self, all_verdicts: Iterable[Mapping[str, Any]], *, started: str, commit: str | None,
                       engines: Iterable[Mapping[str, Any]]) -> int:
        """Append the verdicts not stored yet to ``history.sqlite``; returns how many were added."""
        new: list[tuple[str, Mapping[str, Any]]] = []
        for v in all_verdicts:
            key = json.dumps(v, sort_keys=True, default=str)
            if key not in self._stored:
                new.append((key, v))
        added = history.record(
            history.path_of(self.out_dir), run_id=self.run_id, started=started, git_commit=commit,
            thresholds_file=str(self.thresholds.path), thresholds_sha256=self.thresholds.sha256,
            engines=engines, verdicts=[(next(self._hist_seq), v) for _, v in new], results_dir=str(self.out_dir),
        )
        self._stored.update(k for k, _ in new)
        return added
