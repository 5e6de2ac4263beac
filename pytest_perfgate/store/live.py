"""What a running session does with the store: keep every verdict's data, compare with the
baseline, append verdicts to the history. Used by the plugin; no pytest import."""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import backend, history, records
from .baseline import BaselineRef, apply, compare_stored

if TYPE_CHECKING:
    from ..config import Thresholds
    from ..verdicts.verdict import Verdict

Hook = Callable[["Verdict", Any, float, Sequence[Any]], "Verdict"]


class LiveStore:
    def __init__(self, out_dir: Path, thresholds: Thresholds, run_id: str, baseline: BaselineRef | None = None,
                 history_at: history.Location | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.local_history = history.path_of(self.out_dir)
        # where the verdicts go: the results directory's history.sqlite, or a shared one (a
        # postgresql:// URL, another file), which then keeps the run's data files too
        self.history_at: history.Location = history_at if history_at is not None else self.local_history
        self.fallback: str | None = None  # why the shared history was given up for the local file
        backend.use(self.out_dir, self.history_at)
        self.thresholds = thresholds
        self.run_id = run_id
        self.baseline = baseline
        self._seq = itertools.count()
        self._extras: dict[str, dict[str, Any]] = {}  # gate -> extras of its latest stored verdict
        self._stored: set[str] = set()
        self._hist_seq = itertools.count()
        self._branch_refs: dict[str, BaselineRef | None] = {}
        self._hist_rows: list[tuple[int, Mapping[str, Any]]] = []  # every verdict recorded, with its seq
        self._written: set[int] = set()  # the seqs the history has (after a fall back: the local file)
        self._uploaded: set[str] = set()  # data files already in the shared history
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
        """A gate's ``regression = { vs = BRANCH }``: the branch in the session's history (a shared
        one, a PostgreSQL URL, when set; read in the current directory's git repository); None, with one warning, when it names nothing."""
        if branch is None:
            return None
        if branch not in self._branch_refs:
            from .baseline import resolve

            try:
                at = self.history_at if self.fallback is None else self.local_history  # the shared history too
                self._branch_refs[branch] = resolve(branch, self.out_dir, Path.cwd(), at)
            except ValueError as e:
                why = str(e).replace(f"--perfgate-baseline {branch}: ", "")
                warnings.warn(f"perfgate: gate regression vs {branch!r} not compared: {why}", stacklevel=4)
                self._branch_refs[branch] = None
        return self._branch_refs[branch]

    def extras(self, v: Verdict) -> dict[str, Any]:
        """Keys to add to the verdict's dict: ``samples`` (data file) and ``vs_baseline``. By gate: the
        verdict object may be replaced after the store (physical floors) before it is recorded."""
        return self._extras.pop(v.gate, {})

    @property
    def shared(self) -> bool:
        """The history is not the results directory's own file (its data files go there too)."""
        return backend.is_url(self.history_at) or Path(self.history_at) != self.local_history

    def open_history(self) -> None:
        """Open (create or migrate) the history before anything is measured; a shared history that
        cannot be opened is given up for the local file at once (:meth:`_give_up`)."""
        if not self.shared:
            return
        try:
            backend.open_history(self.history_at).close()
        except backend.errors() as e:
            self._give_up(e)

    def record_history(self, all_verdicts: Iterable[Mapping[str, Any]], *, started: str, commit: str | None,
                       engines: Iterable[Mapping[str, Any]]) -> int:
        """Append the verdicts not stored yet to the history (and, to a shared one, the run's data
        files not stored yet); returns how many verdicts were added. A shared history that fails is
        given up for the local history.sqlite, which then gets every verdict of the run."""
        for v in all_verdicts:
            key = json.dumps(v, sort_keys=True, default=str)
            if key not in self._stored:  # a verdict keeps its seq: a write that failed is retried as it was
                self._stored.add(key)
                self._hist_rows.append((next(self._hist_seq), v))
        meta: dict[str, Any] = dict(run_id=self.run_id, started=started, git_commit=commit,
                                    thresholds_file=str(self.thresholds.path), thresholds_sha256=self.thresholds.sha256,
                                    engines=list(engines), results_dir=str(self.out_dir))
        if self.shared and self.fallback is None:
            rows = [(s, v) for s, v in self._hist_rows if s not in self._written]
            files = self._new_files()
            try:
                added = history.record(self.history_at, verdicts=rows, files=files.items(), **meta)
            except backend.errors() as e:
                self._give_up(e)
            else:
                self._uploaded.update(files)
                self._written.update(s for s, _ in rows)
                return added
        rows = [(s, v) for s, v in self._hist_rows if s not in self._written]
        added = history.record(self.local_history, verdicts=rows, **meta)
        self._written.update(s for s, _ in rows)
        return added

    def _new_files(self) -> dict[str, bytes]:
        """This run's data files (``samples/<run>/``, its run files under it) not in the shared history yet."""
        folder = self.out_dir / records.DIRNAME / records._slug(self.run_id)
        out: dict[str, bytes] = {}
        if folder.is_dir():
            for f in records.data_files(folder):
                rel = f.relative_to(self.out_dir).as_posix()
                if rel not in self._uploaded and f.is_file():
                    out[rel] = f.read_bytes()
        return out

    def _give_up(self, e: BaseException) -> None:
        """The shared history failed: this session writes the local history.sqlite instead, says so
        once, and fails at its end (the message says how to move the run there)."""
        where = backend.label(self.history_at)
        cause = str(e) if isinstance(e, history.HistoryError) else f"{where}: {type(e).__name__}: {e}"
        from ..runtime.redaction import clean

        cause = clean(cause, limit=400)
        self.fallback = cause
        self._written.clear()  # the local file gets the whole run
        backend.use(self.out_dir, self.local_history)
        msg = (f"{cause}; this run's verdicts go to {self.local_history} instead, nothing measured is lost "
               f"(move them with: perfgate history --history URL --import {self.local_history})")
        warnings.warn(f"perfgate: {msg}", stacklevel=3)
        if msg not in self.errors:
            self.errors.append(msg)
