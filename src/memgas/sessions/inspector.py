"""What the inspector shows of a user's memory (``/ui``, :meth:`Memory.units <memgas.memory.Memory.units>`,
:meth:`Memory.graph <memgas.memory.Memory.graph>`): a session's units by granularity with its association to other
sessions, and the user's sessions as a graph linked by association strength.

Association between two sessions is read off the stored edges between their units: how many there are, their
summed weight (the link's strength) and the largest one (the closest pair of units).
"""

from __future__ import annotations

from typing import Any, Collection

from memgas.core.errors import NotFoundError
from memgas.core.types import GRANULARITIES
from memgas.store import Store

__all__ = ["session_view", "graph_view"]


def _links(rows: list[tuple[str, str, int, float, float]]) -> dict[tuple[str, str], list[float]]:
    """Store link rows merged per unordered pair: ``(a, b)`` with ``a < b`` → ``[edges, weight, largest]``."""
    out: dict[tuple[str, str], list[float]] = {}
    for a, b, n, total, top in rows:
        pair = (a, b) if a < b else (b, a)
        held = out.setdefault(pair, [0, 0.0, 0.0])
        held[0] += n
        held[1] += total
        held[2] = max(held[2], top)
    return out


def session_view(store: Store, user_id: str, session_id: str, *, hidden: Collection[str] = ()) -> dict[str, Any]:
    """A session's units (id, granularity, turn range, chunk, text; by granularity, then position) and the other
    sessions it is associated with, strongest first, but those of ``hidden`` (expired: never shown).

    Raises:
        NotFoundError: the user has no such session.
    """
    table = store.session_units(user_id, session_id)
    if len(table) == 0:
        store.get_session(user_id, session_id)  # raises NotFoundError for a session that is not there
    units = sorted(({"id": int(table.ids[r]), "granularity": GRANULARITIES[int(table.granularity[r])],
                     "turn_start": int(table.turn_start[r]), "turn_end": int(table.turn_end[r]),
                     "chunk": int(table.chunk[r]), "text": table.texts[r]} for r in range(len(table))),
                   key=lambda u: (GRANULARITIES.index(u["granularity"]), u["turn_start"], u["chunk"]))
    links = [{"session_id": b if a == session_id else a, "edges": int(n), "weight": round(w, 6),
              "max_weight": round(top, 6)}
             for (a, b), (n, w, top) in _links(store.session_links(user_id, session_id)).items()
             if (b if a == session_id else a) not in hidden]
    return {"session_id": session_id, "units": units, "links": sorted(links, key=lambda x: -x["weight"])}


def graph_view(store: Store, user_id: str, *, limit: int = 300, hidden: Collection[str] = ()) -> dict[str, Any]:
    """The user's ``limit`` newest sessions (by timestamp, undated last) but those of ``hidden`` (expired: never
    shown, nor counted) as nodes, and the association links among them, strongest first.

    Raises:
        NotFoundError: the user has no memory.
    """
    headers = store.list_sessions(user_id, previews=True)
    if not headers:
        raise NotFoundError(f"unknown user {user_id!r}: no memory stored for this user")
    headers = [h for h in headers if h.session_id not in hidden]
    dated = [h for h in headers if h.timestamp is not None][::-1] + [h for h in headers if h.timestamp is None]
    shown = dated[:limit]
    ids = {h.session_id for h in shown}
    nodes = [{"session_id": h.session_id, "timestamp": h.timestamp.isoformat() if h.timestamp else None,
              "messages": h.n_messages, "agent_id": h.agent_id, "run_id": h.run_id, "preview": h.preview}
             for h in shown]
    links = [{"source": a, "target": b, "edges": int(n), "weight": round(w, 6), "max_weight": round(top, 6)}
             for (a, b), (n, w, top) in _links(store.session_links(user_id)).items() if a in ids and b in ids]
    return {"sessions": nodes, "links": sorted(links, key=lambda x: -x["weight"]), "total_sessions": len(headers)}
