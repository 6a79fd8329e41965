"""Hosts on one machine for a cluster's tests: network namespaces joined by a bridge, so that what crosses a network
crosses one, each host with its own address, and a host that can die whole (every process in it killed at once).

Where namespaces cannot be made (not root, no ``ip``, a sandbox without them), each host is an address of its own on
loopback (``127.77.0.N``) and dies by its processes being killed; :attr:`Hosts.mode` says which.

What a run makes it removes: on :meth:`Hosts.close`, at the process's exit, and, for a run killed before either
(``kill -9``, a lost terminal), at the start of the next run: each run writes its process id under
:data:`OWNERS`, and a run finds the namespaces, bridges and processes of every owner that is no longer alive and
removes them.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

__all__ = ["Hosts", "OWNERS", "remove_leftovers"]

#: Where each run that made namespaces writes its process id (a file named by its tag): root-only, like namespaces.
OWNERS = Path("/run/memgas-hosts")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_tag(tag: str) -> None:
    """Kill every process in the namespaces of ``tag`` and remove them and its bridge (the veth pairs go with them)."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for ns in (n for n in listed if n.startswith(f"mg{tag}-")):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "link", "del", f"mgb{tag}"], capture_output=True)


def remove_leftovers(owners: Path | None = None) -> list[str]:
    """Remove what runs that are no longer alive left behind (their namespaces, bridges and processes); the tags
    removed. A run writes its owner file before it makes anything, so a namespace of this harness's naming whose
    tag has no living owner is a leftover; a run still alive keeps its own (two clusters may run at once)."""
    owners = OWNERS if owners is None else owners
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return []
    living: set[str] = set()
    marks = list(owners.iterdir()) if owners.is_dir() else []
    for mark in marks:
        try:
            pid = int(mark.read_text().strip())
        except (OSError, ValueError):
            pid = 0
        if re.fullmatch(r"[0-9a-f]{4}", mark.name) and _alive(pid):
            living.add(mark.name)
        else:
            mark.unlink(missing_ok=True)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    tags = {m.group(1) for name in listed for m in [re.fullmatch(r"mg([0-9a-f]{4})-\w+", name)] if m}
    tags |= {mark.name for mark in marks if re.fullmatch(r"[0-9a-f]{4}", mark.name)}
    removed = sorted(tags - living)
    for tag in removed:
        _remove_tag(tag)
    return removed


class Hosts:
    """Named hosts with an address each; :meth:`spawn` runs a program on one, :meth:`kill` kills it whole.

    Args:
        names: the hosts' names (a few letters and digits each).
        namespaces: try network namespaces (else loopback addresses at once).
    """

    def __init__(self, names: Sequence[str], *, namespaces: bool = True) -> None:
        self.tag = secrets.token_hex(2)  # in every namespace and link name: two clusters never collide
        self.names = list(names)
        self._procs: dict[str, list[subprocess.Popen[bytes]]] = {name: [] for name in names}
        self._made: list[tuple[str, str]] = []  # ("link" | "netns", name): a name alone cannot tell them apart
        self.mode = "loopback addresses"
        net = int(self.tag, 16) % 250 + 1
        self.address = {name: f"127.77.{net}.{i + 10}" for i, name in enumerate(names)}
        self.network = f"127.77.{net}.0/24"
        if namespaces:
            reason = self._namespaces(net)
            if reason is None:
                self.mode = "network namespaces"
            else:
                self.mode = f"loopback addresses ({reason})"

    def _namespaces(self, net: int) -> str | None:
        """Make a bridge and one namespace per host on it; ``None`` when done, else why not (all undone)."""
        if os.geteuid() != 0 or shutil.which("ip") is None:
            return "network namespaces need root and iproute2"
        remove_leftovers()
        try:
            OWNERS.mkdir(mode=0o700, exist_ok=True)
            (OWNERS / self.tag).write_text(str(os.getpid()))
        except OSError as exc:
            return f"no network namespaces here: cannot write {OWNERS}: {exc.strerror or exc}"
        atexit.register(self.close)  # an interrupted run still removes what it made
        bridge = f"mgb{self.tag}"
        address = {name: f"10.77.{net}.{i + 10}" for i, name in enumerate(self.names)}
        try:
            _ip("link", "add", bridge, "type", "bridge")
            self._made.append(("link", bridge))
            _ip("addr", "add", f"10.77.{net}.1/24", "dev", bridge)
            _ip("link", "set", bridge, "up")
            for i, name in enumerate(self.names):
                ns, outside = self.namespace(name), f"mg{self.tag}h{i}"
                _ip("netns", "add", ns)
                self._made.append(("netns", ns))
                _ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", outside, "master", bridge)
                _ip("link", "set", outside, "up")
                _ip("-n", ns, "addr", "add", f"{address[name]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "route", "add", "default", "via", f"10.77.{net}.1")
        except (subprocess.SubprocessError, OSError) as exc:
            detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else str(exc)
            self._unmake()
            return f"no network namespaces here: {detail or exc}"
        self.address, self.network = address, f"10.77.{net}.0/24"
        return None

    def namespace(self, name: str) -> str:
        """The network namespace of a host (when :attr:`mode` is namespaces)."""
        return f"mg{self.tag}-{name}"

    def command(self, name: str, argv: Sequence[str], user: str | None = None) -> list[str]:
        """``argv`` as run on host ``name`` (in its namespace), as ``user`` if given."""
        argv = list(argv)
        if user is not None and os.geteuid() == 0:
            argv = ["runuser", "-u", user, "--", *argv]
        if self.mode == "network namespaces":
            argv = ["ip", "netns", "exec", self.namespace(name), *argv]
        return argv

    def spawn(self, name: str, argv: Sequence[str], log: Path, *, user: str | None = None,
              env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a program on a host, its output appended to ``log``. A program run as another ``user`` starts in
        ``/``: the caller's working directory (a checkout in a private home folder) may be closed to that user, and
        PostgreSQL's bootstrap fails where it cannot change back into it."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(self.command(name, argv, user), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                    start_new_session=True, cwd="/" if user is not None else None)
        self._procs[name].append(proc)
        return proc

    def kill(self, name: str) -> None:
        """The host dies: SIGKILL to every process on it (its namespace's, and every one started on it)."""
        pids: set[int] = set()
        if self.mode == "network namespaces":
            found = subprocess.run(["ip", "netns", "pids", self.namespace(name)], capture_output=True, text=True)
            pids |= {int(p) for p in found.stdout.split()}
        for proc in self._procs[name]:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self._procs[name]:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self._procs[name] = []

    def _unmake(self) -> None:
        for kind, made in reversed(self._made):  # (a tag may start with "b": "mgb0a1-x" is a namespace)
            subprocess.run(["ip", kind, "del", made], capture_output=True)
        self._made = []
        (OWNERS / self.tag).unlink(missing_ok=True)

    def close(self) -> None:
        """Kill every host and remove the namespaces and the bridge (the veth pairs go with their namespaces); a
        second call does nothing more."""
        for name in self.names:
            self.kill(name)
        self._unmake()
