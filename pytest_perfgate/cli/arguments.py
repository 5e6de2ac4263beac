"""The argument groups several ``perfgate`` commands share: the thresholds file and the trend
options (commits, branches, the change points' false-alarm rate)."""

from __future__ import annotations

import argparse
from typing import Any


class _OneFile(argparse.Action):
    """The thresholds file, given as ``FILE`` or ``--thresholds FILE`` (as ``perfgate gate``, ``diff``
    and ``evaluate`` take it); both at once only when they name the same file."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if values is None:  # the positional left out
            return
        if getattr(ns, self.dest, None) not in (None, values):
            parser.error(f"two thresholds files ({getattr(ns, self.dest)} and {values}): give one, as FILE or --thresholds FILE")
        setattr(ns, self.dest, values)


def thresholds_arguments(p: argparse.ArgumentParser) -> None:
    """``[FILE]`` and ``--thresholds FILE``: the thresholds file of a command that reads one."""
    p.add_argument("thresholds", nargs="?", default=None, action=_OneFile, metavar="FILE",
                   help="the thresholds file (default: ./thresholds.toml)")
    p.add_argument("--thresholds", dest="thresholds", default=None, action=_OneFile, metavar="FILE",
                   help="the same, as perfgate gate, diff and evaluate take it")



def trend_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--branch", action="append", default=None, help="git branch whose first-parent commits order "
                   "the runs (repeatable; default: the current branch and main/master; without git: run start times)")
    p.add_argument("--alpha", type=float, default=0.01, help="false-alarm rate of the change points per gate, "
                   "branch and analysis of a stationary series (default 0.01)")
