"""Two hosts on one Linux machine: network namespaces joined by a veth pair, optionally shaped by
``tc`` (``tbf`` or ``htb``; ``netem`` is not needed). Needs root and iproute2.

Every object carries the prefix ``pgd3-<pid>`` (namespaces) / ``pg<pid>`` (veth ends, which live
inside the namespaces, so deleting a namespace removes its link). :class:`NetnsHosts` removes its
namespaces and the processes in them on exit, also on an exception or Ctrl-C, and at interpreter
exit; :func:`clean_stale` removes what a killed run (SIGKILL) left behind: any ``pgd3-<pid>-*``
namespace whose pid no longer runs. Only loopback and the namespaces' own addresses
(10.213.0.1/30, 10.213.0.2/30, inside the namespaces) are used.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PREFIX = "pgd3"
_NAME = re.compile(rf"^{PREFIX}-(\d+)-[a-z0-9]+$")
ADDR_A, ADDR_B = "10.213.0.1", "10.213.0.2"


class NetnsError(RuntimeError):
    pass


def unavailable_reason() -> str | None:
    """Why namespace hosts cannot be built here (None: they can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network-namespace hosts need root (ip netns add)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"network-namespace hosts need iproute2 ({tool!r} not on PATH)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = list(args)  # argv list, never a shell
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and p.returncode != 0:
        raise NetnsError(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def list_namespaces() -> list[str]:
    out = _ip("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def delete_namespace(name: str) -> None:
    """Kill the processes inside ``name``, then delete it (its veth end goes with it)."""
    pids = _ip("ip", "netns", "pids", name, check=False).stdout.split()
    for p in pids:
        try:
            os.kill(int(p), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("ip", "netns", "delete", name, check=False)


def clean_stale() -> list[str]:
    """Remove the ``pgd3-<pid>-*`` namespaces of runs that no longer exist; returns their names."""
    gone = []
    for name in list_namespaces():
        m = _NAME.match(name)
        if m and not _alive(int(m.group(1))):
            delete_namespace(name)
            gone.append(name)
    return gone


@dataclass(frozen=True)
class Shaping:
    """A ``tc`` rate limit on both veth ends: ``tbf`` (token bucket) or ``htb`` (one class)."""

    rate: str = "10mbit"
    qdisc: str = "tbf"
    burst: str = "32kbit"
    latency: str = "400ms"

    def commands(self, ns: str, dev: str) -> list[list[str]]:
        pre = ["ip", "netns", "exec", ns, "tc"]
        if self.qdisc == "tbf":
            return [[*pre, "qdisc", "add", "dev", dev, "root", "tbf", "rate", self.rate, "burst", self.burst,
                     "latency", self.latency]]
        if self.qdisc == "htb":
            return [[*pre, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
                    [*pre, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", self.rate,
                     "burst", self.burst]]
        raise NetnsError(f"shaping qdisc must be 'tbf' or 'htb', got {self.qdisc!r}")

    def describe(self) -> str:
        return f"tc {self.qdisc} rate {self.rate} burst {self.burst}"



def _tagged(tag: str) -> tuple[int, str]:
    """(this process's pid, up to 4 letters of ``tag``): the parts of our namespace and link names."""
    return os.getpid(), re.sub(r"[^a-z0-9]", "", tag.lower())[:4]


def _begin(close: Callable[[], None]) -> None:
    """Before a namespace is made: refuse where none can be, clear stale ones, close at exit."""
    reason = unavailable_reason()
    if reason:
        raise NetnsError(reason)
    clean_stale()
    atexit.register(close)

class NetnsHosts:
    """Hosts ``a`` and ``b``: ``with NetnsHosts(shaping=None) as h: h.ns_a, h.ns_b, h.dev_a ...``."""

    def __init__(self, shaping: Shaping | None = None, tag: str = "") -> None:
        self.shaping = shaping
        pid, t = _tagged(tag)
        self.ns_a, self.ns_b = f"{PREFIX}-{pid}-{t}a", f"{PREFIX}-{pid}-{t}b"
        self.dev_a, self.dev_b = f"pg{pid}{t}a"[:15], f"pg{pid}{t}b"[:15]
        self.addr_a, self.addr_b = ADDR_A, ADDR_B
        self._up = False

    def __enter__(self) -> NetnsHosts:
        _begin(self.close)
        self._up = True
        try:
            for ns in (self.ns_a, self.ns_b):
                if ns in list_namespaces():
                    delete_namespace(ns)
                _ip("ip", "netns", "add", ns)
                _ip("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            _ip("ip", "link", "add", self.dev_a, "netns", self.ns_a, "type", "veth", "peer", "name", self.dev_b,
                "netns", self.ns_b)
            for ns, dev, addr in ((self.ns_a, self.dev_a, self.addr_a), (self.ns_b, self.dev_b, self.addr_b)):
                _ip("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/30", "dev", dev)
                _ip("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
                if self.shaping is not None:
                    for cmd in self.shaping.commands(ns, dev):
                        _ip(*cmd)
        except BaseException:
            self.close()
            raise
        return self

    def shape(self, shaping: Shaping | None) -> None:
        """Replace the link's shaping (None: remove it) on both ends, between measurements."""
        for ns, dev in ((self.ns_a, self.dev_a), (self.ns_b, self.dev_b)):
            _ip("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
            if shaping is not None:
                for cmd in shaping.commands(ns, dev):
                    _ip(*cmd)
        self.shaping = shaping

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._up:
            return
        self._up = False
        for ns in (self.ns_a, self.ns_b):
            delete_namespace(ns)
        atexit.unregister(self.close)

    def names(self) -> Sequence[str]:
        return (self.ns_a, self.ns_b)

    def describe(self) -> str:
        link = self.shaping.describe() if self.shaping else "unshaped"
        return f"netns {self.ns_a} ({self.addr_a}) <-veth-> {self.ns_b} ({self.addr_b}), {link}"


ROOT_ADDR, PEER_ADDR = "10.214.0.1", "10.214.0.2"


class RootPeer:
    """One host beside this one: a namespace joined to the **root** namespace by a veth pair (the
    root end ``ROOT_ADDR``, the namespace end ``PEER_ADDR``, /30), its default route via the root
    end, so that the namespace reaches every address of this machine (a Ray head on its default
    address: load/ray_workers.py's test). ``with RootPeer(tag) as p: p.ns, p.exec(...)``."""

    def __init__(self, tag: str = "") -> None:
        pid, t = _tagged(tag)
        self.ns = f"{PREFIX}-{pid}-{t}p"
        self.dev_root, self.dev_peer = f"pg{pid}{t}r"[:15], f"pg{pid}{t}p"[:15]
        self.root_addr, self.peer_addr = ROOT_ADDR, PEER_ADDR
        self._up = False

    def __enter__(self) -> RootPeer:
        _begin(self.close)
        self._up = True
        try:
            if self.ns in list_namespaces():
                delete_namespace(self.ns)
            _ip("ip", "link", "del", self.dev_root, check=False)
            _ip("ip", "netns", "add", self.ns)
            _ip(*self.exec("ip", "link", "set", "lo", "up"))
            _ip("ip", "link", "add", self.dev_root, "type", "veth", "peer", "name", self.dev_peer, "netns", self.ns)
            _ip("ip", "addr", "add", f"{self.root_addr}/30", "dev", self.dev_root)
            _ip("ip", "link", "set", self.dev_root, "up")
            _ip(*self.exec("ip", "addr", "add", f"{self.peer_addr}/30", "dev", self.dev_peer))
            _ip(*self.exec("ip", "link", "set", self.dev_peer, "up"))
            _ip(*self.exec("ip", "route", "add", "default", "via", self.root_addr))
        except BaseException:
            self.close()
            raise
        return self

    def exec(self, *argv: str) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._up:
            return
        self._up = False
        delete_namespace(self.ns)  # its veth end, and so the pair, goes with it
        _ip("ip", "link", "del", self.dev_root, check=False)
        atexit.unregister(self.close)
