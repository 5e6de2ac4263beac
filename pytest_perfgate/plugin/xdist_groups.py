"""``--dist loadgroup`` groups under pytest 9: pytest-xdist (3.8) marks a grouped test by renaming
``item._nodeid`` to ``<node id>@<group>``, and its controller sends a group to one worker by that
suffix; pytest 9 keeps a node id in ``item._id`` and no longer reads ``_nodeid``, so the suffix never
reaches the controller and the groups are silently spread over the workers (a phase's fallback test
then ran where its gate's verdict was not seen, and skipped). Here, on a worker, after xdist's own
hook, a grouped test whose node id lacks the suffix gets it the way pytest 9 reads it. Nothing
happens where xdist's rename took (older pytest) or without ``--dist loadgroup``.

The suffix is xdist's own (its group names sorted, joined by ``_``); pytest's and xdist's own lines
show it (``FAILED test_x.py::test_ttft@perfgate-phase1``), as they did with older pytest. perfgate's
own records drop it (:func:`plain`): decisions.json, gates.xml and the reports name the test as a
run without xdist does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest


def group_suffix(item: Any) -> str:
    """xdist's suffix for ``item`` ("" when it has no xdist_group marker)."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "@" + "_".join(sorted(names)) if names else ""


def plain(nodeid: str) -> str:
    """``nodeid`` without the xdist group suffix that carries a perfgate group."""
    head, at, tail = nodeid.rpartition("@")
    return head if at and "perfgate-" in tail and "::" not in tail and "/" not in tail else nodeid


def name_groups(config: Any, items: Sequence[Any]) -> int:
    """Put each grouped item's xdist group into its node id where xdist's rename did not take;
    the number of items changed (0 off an xdist worker or without ``--dist loadgroup``)."""
    if not hasattr(config, "workerinput") or not config.getoption("loadgroup", default=False):
        return 0
    changed = 0
    for item in items:
        suffix = group_suffix(item)
        if not suffix or item.nodeid.endswith(suffix) or not hasattr(item, "_id"):
            continue
        item._id = type(item._id).parse(item.nodeid + suffix)  # pytest >= 9's NodeId (what its nodeid reads)
        changed += 1
    return changed


def register(config: pytest.Config) -> None:
    """Without xdist: the ``xdist_group`` marker registered (the plugin groups a phase's tests with
    it; inert, but known to --strict-markers and -W error::pytest.PytestUnknownMarkWarning). On an
    xdist worker: :class:`GroupNames` as a plugin of its own (a trylast hook)."""
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): pytest-xdist --dist loadgroup group (inert without xdist)")
    elif hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("perfgate-xdist-groups"):
        config.pluginmanager.register(GroupNames(), "perfgate-xdist-groups")


class GroupNames:
    """The hook, registered by the plugin where pytest-xdist is installed."""

    @pytest.hookimpl(trylast=True)  # after xdist's own (its rename, where it takes)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        name_groups(config, items)
