"""The configuration of a memgas cluster, as files: :func:`render` fills one in.

Each file is a ``string.Template`` (``${name}`` placeholders) of one component: ``patroni.yml`` (a database node:
PostgreSQL under Patroni), ``etcd.env`` (the node's etcd member, as Debian's ``/etc/default/etcd``), ``haproxy.cfg``
(the router: writes to the primary, reads to the replicas, HTTP to the workers by user id), ``pgbouncer.ini``
(transaction pooling in front of the router) and ``systemd/memgas.service`` (a worker). The deployment guide
(docs/guides/cluster.md) shows them filled in; :mod:`memgas.bench.hacluster` starts its test and benchmark cluster from
these same files.
"""

from __future__ import annotations

from importlib.resources import files
from string import Template

__all__ = ["render", "FILES", "files_markdown"]

#: The templates, by name.
FILES = ("patroni.yml", "etcd.env", "haproxy.cfg", "pgbouncer.ini", "systemd/memgas.service")


def render(template: str, /, **values: object) -> str:
    """The file ``template`` (one of :data:`FILES`) with every placeholder filled in.

    Raises:
        KeyError: a placeholder without a value (``Template.substitute``).
    """
    text = files(__name__).joinpath(template).read_text(encoding="utf-8")
    return Template(text).substitute({k: str(v) for k, v in values.items()})


def files_markdown() -> str:
    """Every template as a Markdown section with its text in a code block (the deployment guide shows them)."""
    out = []
    for name in FILES:
        text = files(__name__).joinpath(name).read_text(encoding="utf-8")
        kind = {"yml": "yaml", "ini": "ini", "service": "ini"}.get(name.rsplit(".", 1)[-1], "text")
        out.append(f"### `{name}`\n\n```{kind}\n{text.rstrip()}\n```\n")
    return "\n".join(out)
