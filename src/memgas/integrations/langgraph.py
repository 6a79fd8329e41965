"""LangGraph: ``MemgasStore``, a ``langgraph.store.base.BaseStore`` over memgas. Extra ``langgraph``.

What maps to what:

- an item's namespace ``(user_id, *rest)``: its first element is the memgas user (a memgas id: letters, digits and
  ``. : @ / + - _``); ``rest`` and the key are kept with the item and filterable;
- an item is one memgas session (its id encodes ``rest`` and the key, so ids never collide), whose one message
  is the item's **text**: ``value["text"]`` (or ``value["content"]``) when it is a string, else the value as
  ``key: value`` lines (nested values as JSON); that text is what search ranks. The value itself is kept
  whole in the session's metadata, with the namespace, the key and the creation and update times;
- ``put`` replaces the item (``None`` as the value deletes it) and returns only once memgas has committed and
  indexed it: an item is searchable as soon as ``put`` returns;
- LangGraph's semantic-search ``index`` config: ``MemgasStore(memory, index={"fields": [...]})`` names the value
  fields (dotted paths, ``"$"`` for the whole value) whose text memgas ranks, and ``put(..., index=[...])`` names them
  for one item; ``put(..., index=False)`` keeps an item out of query searches (``get`` and a search without a query
  still find it). memgas embeds with its own model, so ``dims`` and ``embed`` are not used;
- ``search(namespace_prefix, query=...)`` ranks the user's items with memgas (``score`` is the hit's relevance,
  0-1) and keeps those under the prefix that match ``filter`` (equality on value keys); without a query, the
  items under the prefix, newest first. ``list_namespaces`` reads the namespaces of the stored items.

>>> from memgas import Memory
>>> from memgas.integrations.langgraph import MemgasStore
>>> store = MemgasStore(Memory())
>>> store.put(("ana", "memories"), "gym", {"text": "My locker code is 4512."})
>>> [i.key for i in store.search(("ana",), query="locker code?")]
['gym']
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping, Sequence

from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp

from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.core.types import Session
from memgas.integrations.calls import AnyMemory, call

__all__ = ["MemgasStore", "item_text"]

#: Marks a memgas session as a LangGraph item (the key of its metadata).
MARK = "langgraph"
#: Characters an item's id keeps as they are; every other is written ``+XX`` (its UTF-8 bytes in hex).
_PLAIN = re.compile(r"[A-Za-z0-9._:@-]")
#: How many of a user's hits a search reads at most (all of them when a condition is checked on the hits).
SEARCH_CAP = 1000


def _encode(part: str) -> str:
    return "".join(c if _PLAIN.fullmatch(c) else "".join(f"+{b:02X}" for b in c.encode("utf-8")) for c in part)


def _session_id(rest: tuple[str, ...], key: str) -> str:
    """The memgas session id of an item: ``lg/<part>/.../<key>``, each part encoded (reversible, never ``/``)."""
    sid = "/".join(["lg", *(_encode(p) for p in rest), _encode(key)])
    if len(sid) > 256:
        raise InvalidInputError(f"namespace and key too long for a memgas id ({len(sid)} characters encoded, "
                                "256 at most)")
    return sid


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def item_text(value: dict[str, Any], fields: Sequence[str] | None = None) -> str:
    """The text memgas stores and ranks for an item's value (see the module docstring): the named ``fields``' texts
    where given (``"$"``: the whole value), else ``text`` or ``content``, else every field."""
    named = [f for f in fields or () if f != "$"]
    if named:
        parts = [_at(value, f) for f in named]
        texts = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True) for v in parts
                 if v is not None]
        if texts:
            return "\n".join(texts)
    for field in ("text", "content"):
        if isinstance(value.get(field), str) and value[field].strip():
            return value[field]
    lines = [f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)}"
             for k, v in value.items()]
    return "\n".join(lines) or "(empty)"


class MemgasStore(BaseStore):
    """LangGraph's long-term memory store over a memgas facade (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        index: LangGraph's index config; its ``fields`` are the value fields memgas ranks (``None``: as above).
    """

    def __init__(self, memory: AnyMemory, *, index: Mapping[str, Any] | None = None) -> None:
        self.memory = memory
        self.fields: list[str] | None = None if index is None else list(index.get("fields") or ["$"])

    # -- the one operation LangGraph calls ----------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order (puts commit one by one)."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread, off the event loop (an ``AsyncMemory`` is driven from there; with
        an ``AsyncClient``, whose connections belong to its own event loop, prefer a ``Client`` here)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, None if op.value is None else dict(op.value), op.index)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")

    @staticmethod
    def _split(namespace: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if not namespace:
            raise InvalidInputError("a memgas item's namespace starts with the user id")
        return namespace[0], tuple(namespace[1:])

    def _stored(self, user: str, sid: str) -> Session | None:
        try:
            return call(self.memory.get, sid, user_id=user)
        except NotFoundError:
            return None

    @staticmethod
    def _fields(user: str, meta: Mapping[str, Any]) -> dict[str, Any]:
        lg = meta[MARK]
        return {"namespace": (user, *lg["namespace"]), "key": lg["key"], "value": lg["value"],
                "created_at": datetime.fromisoformat(lg["created_at"]),
                "updated_at": datetime.fromisoformat(lg["updated_at"])}

    def _item(self, user: str, meta: Mapping[str, Any]) -> Item:
        return Item(**self._fields(user, meta))

    def _found(self, user: str, meta: Mapping[str, Any], score: float | None = None) -> SearchItem:
        return SearchItem(**self._fields(user, meta), score=score)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        user, rest = self._split(namespace)
        stored = self._stored(user, _session_id(rest, key))
        return None if stored is None or MARK not in stored.metadata else self._item(user, stored.metadata)

    def _put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any] | None,
             index: Literal[False] | list[str] | None = None) -> None:
        user, rest = self._split(namespace)
        sid = _session_id(rest, key)
        stored = self._stored(user, sid)
        if stored is not None:
            call(self.memory.delete, sid, user_id=user)
        if value is None:
            return
        now = datetime.now(timezone.utc).isoformat()
        created = stored.metadata[MARK]["created_at"] if stored is not None and MARK in stored.metadata else now
        meta = {MARK: {"namespace": list(rest), "key": key, "value": value, "created_at": created, "updated_at": now,
                       "indexed": index is not False}}
        fields = self.fields if index is None or index is False else index
        call(self.memory.add, [{"role": "user", "content": item_text(value, fields)}], user_id=user, session_id=sid,
             metadata=meta)

    def _items(self, user: str) -> list[Session]:
        """Every item of ``user`` as its stored session (newest first)."""
        rows = call(self.memory.list, user_id=user)
        sessions = [self._stored(user, r.session_id) for r in rows if r.session_id.startswith("lg/")]
        items = [s for s in sessions if s is not None and MARK in s.metadata]
        return sorted(items, key=lambda s: s.metadata[MARK]["updated_at"], reverse=True)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user, prefix = self._split(op.namespace_prefix)

        def wanted(meta: Mapping[str, Any]) -> bool:
            lg = meta.get(MARK)
            return (lg is not None and tuple(lg["namespace"][: len(prefix)]) == prefix
                    and all(lg["value"].get(k) == v for k, v in (op.filter or {}).items()))

        if op.query:
            # The namespace prefix and the scalar value conditions go into memgas's filter (inside the ranking);
            # what a filter cannot say (a condition on a nested value, a key with a dot) is checked on the hits.
            # ``$not``: an item stored before ``indexed`` was kept has no such key, and is ranked
            filters: dict[str, Any] = {MARK: {"$exists": True}, "$not": {f"{MARK}.indexed": False}}
            filters.update({f"{MARK}.namespace.{i}": part for i, part in enumerate(prefix)})
            rest = {}
            for k, v in (op.filter or {}).items():
                if "." not in k and (isinstance(v, (str, bool)) or (isinstance(v, (int, float)) and v == v)):
                    filters[f"{MARK}.value.{k}"] = v
                else:
                    rest[k] = v
            want = SEARCH_CAP if rest else min(op.offset + op.limit, SEARCH_CAP)
            hits = call(self.memory.search, op.query, user_id=user, k=want, filters=filters)
            found = [self._found(user, h.metadata, float(h.relevance)) for h in hits
                     if wanted(h.metadata)]
            return found[op.offset: op.offset + op.limit]
        items = [s for s in self._items(user) if wanted(s.metadata)]
        return [self._found(user, s.metadata) for s in items][op.offset: op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        users = [u.user_id for u in call(self.memory.users)]
        spaces = sorted({(u, *s.metadata[MARK]["namespace"]) for u in users for s in self._items(u)})
        for cond in op.match_conditions or ():
            path = tuple(cond.path)

            def fits(ns: tuple[str, ...], path: tuple[str, ...] = path, kind: str = cond.match_type) -> bool:
                part = ns[: len(path)] if kind == "prefix" else ns[-len(path):]
                return len(ns) >= len(path) and all(p == "*" or p == q for p, q in zip(path, part))

            spaces = [ns for ns in spaces if fits(ns)]
        if op.max_depth is not None:
            spaces = sorted({ns[: op.max_depth] for ns in spaces})
        return spaces[op.offset: op.offset + op.limit]
