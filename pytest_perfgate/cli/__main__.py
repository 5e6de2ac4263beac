"""``python -m pytest_perfgate.cli``: the ``perfgate`` command."""

from . import main

raise SystemExit(main())
