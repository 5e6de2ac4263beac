"""Report writers: the decision document rendered as JUnit XML, Markdown and HTML.

Every writer reads the decision document exactly as stored in ``perfgate-results/decisions.json``
(see :mod:`pytest_perfgate.store.decisions`) and writes one file into an output directory, atomically.
No pytest imports: writers are usable from plain Python::

    from pytest_perfgate.writers import write_all
    write_all(json.loads(Path("perfgate-results/decisions.json").read_text()), Path("perfgate-results"))

A writer is anything with ``name``, ``filename`` and ``write(doc, out_dir, *, phases, inconclusive)``
(:class:`Writer`; optionally ``write_final``, the same for the run's last write). The built-in ones
are registered lazily in :data:`WRITERS` (their modules are imported on first use);
:func:`register` adds more, and so does any installed distribution through the
``pytest_perfgate.writers`` entry-point group (a :class:`Writer`, or a class or function making
one), without editing this package::

    [project.entry-points."pytest_perfgate.writers"]
    csv = "mypkg.report:CsvWriter"

:func:`get` looks one up by name; the plugin and ``perfgate report`` run every writer there is.

This module also holds the small helpers the writers share: :func:`atomic_write_text`, phase
selection, test-case naming and the notes on the statistics; the texts shown for a verdict are in
:mod:`pytest_perfgate.verdicts.wording` (``clean_text`` makes characters illegal in XML 1.0 / HTML visible).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..runtime.atomic import atomic_write_text
from ..verdicts.record import VerdictRecord
from ..verdicts.wording import clean_text, number

__all__ = [
    "WRITERS",
    "Writer",
    "WriterError",
    "atomic_write_text",
    "clean_text",
    "filenames",
    "get",
    "names",
    "register",
    "write_all",
]


@runtime_checkable
class Writer(Protocol):
    """Renders the decision document into one file ``out_dir / filename``."""

    @property
    def name(self) -> str:
        """Registry name, e.g. ``"junit"``."""
        ...

    @property
    def filename(self) -> str:
        """File written into the output directory, e.g. ``"gates.xml"``."""
        ...

    def write(
        self,
        doc: Mapping[str, Any],
        out_dir: Path,
        *,
        phases: list[str] | None = None,
        inconclusive: str = "fail",
    ) -> Path:
        """Write the report and return its path.

        ``phases``: only these phases (in document order); ``None`` for all.
        ``inconclusive``: ``"fail"`` to treat inconclusive gates as failures, anything else
        (``"warn"``) to report them as skipped/warnings.
        """
        ...


class RenderedWriter:
    """A writer whose file is ``render(doc, phases=..., inconclusive=...)`` written atomically.

    Subclasses set ``name``, ``filename`` and ``render`` (a staticmethod)."""

    name: str = ""
    filename: str = ""

    @staticmethod
    def render(doc: Mapping[str, Any], *, phases: list[str] | None = None, inconclusive: str = "fail") -> str:
        raise NotImplementedError

    def write(self, doc: Mapping[str, Any], out_dir: Path, *, phases: list[str] | None = None,
              inconclusive: str = "fail") -> Path:
        """Write ``out_dir / filename`` atomically and return its path."""
        return atomic_write_text(Path(out_dir) / self.filename, self.render(doc, phases=phases, inconclusive=inconclusive),
                                 root=Path(out_dir))


class WriterError(RuntimeError):
    """One or more writers failed in :func:`write_all`; ``written`` holds the files that were written."""

    def __init__(self, message: str, written: list[Path]) -> None:
        super().__init__(message)
        self.written = written


def _junit() -> Writer:
    from .junit import JUnitWriter

    return JUnitWriter()


def _markdown() -> Writer:
    from .markdown import MarkdownWriter

    return MarkdownWriter()


def _html() -> Writer:
    from .html import HtmlWriter

    return HtmlWriter()


ENTRY_POINT_GROUP = "pytest_perfgate.writers"
BUILTIN: dict[str, tuple[str, Callable[[], Writer]]] = {
    "junit": ("gates.xml", _junit), "markdown": ("summary.md", _markdown), "html": ("report.html", _html),
}
"""The built-in writers: name -> (the file it writes, its factory)."""
WRITERS: dict[str, Callable[[], Writer]] = {name: factory for name, (_, factory) in BUILTIN.items()}
"""Registry: writer name -> factory (built-in writers import their module only when created; the
``pytest_perfgate.writers`` entry points of installed distributions come on top, :func:`names`)."""


def register(name: str, factory: Callable[[], Writer]) -> None:
    """Add (or replace) a writer under ``name``."""
    WRITERS[name] = factory


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The ``pytest_perfgate.writers`` entry points not shadowed by a registered writer."""
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {ep.name: ep for ep in eps if ep.name not in WRITERS}


def _where(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    who = f"distribution {dist.name} {dist.version}" if dist is not None else "an installed distribution"
    return f"entry point {ep.name} = {ep.value!r} of {who} (group {ENTRY_POINT_GROUP})"


def _load(ep: importlib.metadata.EntryPoint) -> Writer:
    """The writer an entry point names: a :class:`Writer`, or a class or function that makes one."""
    try:
        obj = ep.load()
        # a class (which has the attributes of a Writer too) or a function is called to make one
        made = obj() if isinstance(obj, type) or (callable(obj) and not isinstance(obj, Writer)) else obj
    except Exception as e:  # the user's package failed: say which one
        raise ValueError(f"{_where(ep)}: cannot load it: {type(e).__name__}: {e}") from None
    if not isinstance(made, Writer):
        raise ValueError(f"{_where(ep)}: gives a {type(made).__name__}, not a writer (name, filename, write)")
    return made


def names() -> list[str]:
    """The writer names (registered and entry points), sorted; no writer module is imported."""
    return sorted({*WRITERS, *_entry_points()})


def get(name: str) -> Writer:
    """A writer instance by name; the error lists the available writers."""
    factory = WRITERS.get(name)
    if factory is not None:
        return factory()
    ep = _entry_points().get(name)
    if ep is None:
        raise ValueError(f"unknown report writer {name!r} (available: {', '.join(names())})")
    return _load(ep)


def filenames() -> list[str]:
    """The files the writers write (a built-in writer's without importing it), in :func:`names` order."""
    out = []
    for name in names():
        builtin = BUILTIN.get(name)
        if builtin is not None and WRITERS.get(name) is builtin[1]:
            out.append(builtin[0])
            continue
        with contextlib.suppress(Exception):  # a writer that cannot be made writes nothing
            out.append(get(name).filename)
    return out


def write_all(
    doc: Mapping[str, Any],
    out_dir: Path,
    *,
    writers: Iterable[str] | None = None,
    phases: list[str] | None = None,
    inconclusive: str = "fail",
    final: bool = False,
) -> list[Path]:
    """Run the named writers (all of :func:`names` by default) and return the files written.

    ``final``: the run's last write (end of the session, ``perfgate report``): a writer with a
    ``write_final`` method (the HTML report, with its plots) uses it. Every writer is attempted
    even if an earlier one fails (also one whose entry point does not load); failures are then
    raised together as :class:`WriterError`. Unknown names raise :class:`ValueError` before
    anything is written.
    """
    chosen = list(writers) if writers is not None else names()
    known = set(names())
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ValueError(f"unknown report writer {unknown[0]!r} (available: {', '.join(sorted(known))})")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    errors: list[str] = []
    first: BaseException | None = None
    for name in chosen:
        w: Writer | None = None
        try:
            w = get(name)
            write = getattr(w, "write_final", None) if final else None
            write = write if callable(write) else w.write
            written.append(write(doc, out_dir, phases=phases, inconclusive=inconclusive))
        except Exception as e:  # keep writing the other reports
            errors.append(f"{name} ({w.filename if w is not None else 'not loaded'}): {type(e).__name__}: {e}")
            first = first or e
    if errors:
        raise WriterError("report writers failed: " + "; ".join(errors), written) from first
    return written


# ---------------------------------------------------------------- what the writers share

PHASE_LABELS = {
    "passed": "PASSED",
    "failed": "FAILED",
    "fallback": "FALLBACK",
    "inconclusive": "INCONCLUSIVE",
    "not run": "NOT RUN",
}

METHOD_NOTES = {
    "order-statistic": "percentiles: exact distribution-free order-statistic bounds "
    "(the pass rule is MLPerf LoadGen's early-stopping criterion)",
    "clopper-pearson": "rates and proportions: exact Clopper-Pearson bounds",
    "t": "means: Student-t bounds",
    "bootstrap": "comparisons of two runs (ratio, difference, reduction) and ratio metrics: "
    "percentile bootstrap with a fixed seed per gate (decision records of earlier versions)",
    "single": "a single measurement: no confidence interval, the value itself is compared",
}

BOUNDS_NOTE = (
    "Bounds are one-sided at the stated confidence level: a max gate passes when the upper bound is "
    "below the threshold and fails when the lower bound is above it; a min gate mirrors this. "
    "Anything else is inconclusive: the data cannot decide at that confidence (more samples may)."
)


def phase_label(outcome: object) -> str:
    """``"PASSED"``, ``"FAILED"``, ... for a phase outcome."""
    text = clean_text(outcome)
    return PHASE_LABELS.get(text, text.upper() or "UNKNOWN")


def select_phases(doc: Mapping[str, Any], phases: Sequence[str] | None) -> list[tuple[str, Mapping[str, Any]]]:
    """``(name, entry)`` of the phases to report, in document order (``None``: all)."""
    table = doc.get("phases")
    if not isinstance(table, Mapping):
        return []
    wanted = None if phases is None else set(phases)
    return [
        (str(name), entry)
        for name, entry in table.items()
        if isinstance(entry, Mapping) and (wanted is None or name in wanted)
    ]


def verdicts_of(entry: Mapping[str, Any]) -> list[VerdictRecord]:
    """The verdicts of a phase entry, typed (anything malformed left out): writers read their fields
    as attributes, so a renamed field is a type error, not a silent ``None`` in a report."""
    vs = entry.get("verdicts")
    return [VerdictRecord.read(v) for v in vs if isinstance(v, Mapping)] if isinstance(vs, list) else []


def phase_meta(entry: Mapping[str, Any], *, code: Callable[[str], str], plain: Callable[[str], str],
               thresholds_file: bool = False) -> list[str]:
    """The phase's run, commit, time, (``thresholds_file``: thresholds file by name,) confidence and
    dependencies; ``code`` and ``plain`` escape and mark up the document's text."""
    meta = []
    if entry.get("run_id"):
        meta.append(f"run {code(clean_text(entry.get('run_id')))}")
    if entry.get("git_commit"):
        meta.append(f"commit {code(clean_text(entry.get('git_commit'))[:12])}")
    if entry.get("timestamp"):
        meta.append(plain(clean_text(entry.get("timestamp"))))
    if thresholds_file and entry.get("thresholds_file"):  # by name: no absolute paths
        sha = clean_text(entry.get("thresholds_sha256"))[:12]
        name = clean_text(entry.get("thresholds_file")).replace("\\", "/").rsplit("/", 1)[-1]
        meta.append(f"thresholds {plain(name)}" + (f" (sha256 {plain(sha)})" if sha else ""))
    conf = number(entry.get("confidence"))
    if conf is not None:
        meta.append(f"confidence {conf * 100:g}%")
    deps = strings(entry.get("depends_on"))
    if deps:
        meta.append("depends on " + ", ".join(code(d) for d in deps))
    return meta


def verdict_values(selected: Sequence[tuple[str, Mapping[str, Any]]], key: str) -> list[str]:
    """The distinct non-empty ``key`` of the selected phases' verdicts, in order of first appearance."""
    values = (clean_text(getattr(v, key)) for _, entry in selected for v in verdicts_of(entry))
    return list(dict.fromkeys(x for x in values if x))


def inconclusive_note(inconclusive: str) -> str:
    """What an inconclusive gate does to this run."""
    if inconclusive == "fail":
        return "Inconclusive gates fail the run (--perfgate-inconclusive=fail)."
    return f"Inconclusive gates only warn (inconclusive = {inconclusive})."


def strings(value: object) -> list[str]:
    """A list of strings from a JSON value that should be one (``None`` -> ``[]``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [clean_text(x) for x in value]
    return [clean_text(value)]


def case_names(verdicts: Sequence[VerdictRecord]) -> list[str]:
    """One name per verdict: the gate name, ``"gate[2]"``, ``"gate[3]"`` for repeated checks."""
    seen: dict[str, int] = {}
    out = []
    for v in verdicts:
        gate = clean_text(v.gate) or "(unnamed gate)"
        seen[gate] = seen.get(gate, 0) + 1
        out.append(gate if seen[gate] == 1 else f"{gate}[{seen[gate]}]")
    return out


def is_url(text: str) -> bool:
    """An absolute http(s) URL without whitespace or characters that would need quoting in markup."""
    return bool(re.fullmatch(r"https?://[^\s<>\"'`\\]+", text))
