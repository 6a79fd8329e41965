"""What the inspector reads (memgas.sessions.inspector through Memory.units and Memory.graph, and the same over REST with the
Python client): a session's units by granularity, its association with other sessions read off the stored edges,
and the user's sessions as a graph."""

from __future__ import annotations

from typing import Any

import pytest

from memgas import Memory
from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.embed.base import Embedder


def _fill(mem: Memory) -> None:
    for sid, when, said in [("hike", "2024-05-20", "I hiked Mount Hood with Ann last weekend."),
                            ("hike-2", "2024-06-02", "Ann and I want to hike Mount Hood again in autumn."),
                            ("bread", "2024-07-01", "I baked sourdough bread with rye flour."),
                            ("undated", None, "A note without a date.")]:
        mem.add_many([{"session_id": sid, "timestamp": when, "messages": [
            {"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]}], user_id="ana")


def test_units_and_association_of_a_session_match_the_stored_edges(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        _fill(mem)
        view = mem.units("hike-2", user_id="ana")
        grans = [u["granularity"] for u in view["units"]]
        assert grans == sorted(grans, key=["session", "turn", "summary", "keyword"].index)
        assert {"session", "turn", "summary", "keyword"} <= set(grans)
        table = mem.store.session_units("ana", "hike-2")
        assert sorted(u["id"] for u in view["units"]) == sorted(int(i) for i in table.ids)
        # the links equal the cross-session edges counted by hand
        units = mem.store.load_units("ana")
        owner = dict(zip((int(i) for i in units.ids), units.session_ids))
        edges = mem.store.load_edges("ana")
        counted: dict[str, list[Any]] = {}
        for a, b, w in zip(edges.src.tolist(), edges.dst.tolist(), edges.weight.tolist()):
            sa, sb = owner[a], owner[b]
            if sa != sb and "hike-2" in (sa, sb):
                other = sb if sa == "hike-2" else sa
                counted.setdefault(other, []).append(w)
        got = {link["session_id"]: link for link in view["links"]}
        assert set(got) == set(counted) and "hike" in got
        for other, weights in counted.items():
            assert got[other]["edges"] == len(weights)
            assert got[other]["weight"] == pytest.approx(sum(weights), abs=1e-5)
            assert got[other]["max_weight"] == pytest.approx(max(weights), abs=1e-5)
        assert [link["weight"] for link in view["links"]] == sorted((k["weight"] for k in view["links"]), reverse=True)
        with pytest.raises(NotFoundError):
            mem.units("nope", user_id="ana")


def test_the_graph_holds_the_newest_sessions_and_the_links_among_them(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        _fill(mem)
        g = mem.graph(user_id="ana")
        assert [n["session_id"] for n in g["sessions"]] == ["bread", "hike-2", "hike", "undated"]
        assert g["total_sessions"] == 4 and g["sessions"][0]["preview"] == "I baked sourdough bread with rye flour."
        pairs = {(link["source"], link["target"]) for link in g["links"]}
        assert ("hike", "hike-2") in pairs and all(a < b for a, b in pairs)
        small = mem.graph(user_id="ana", limit=2)
        assert [n["session_id"] for n in small["sessions"]] == ["bread", "hike-2"]
        assert all({link["source"], link["target"]} <= {"bread", "hike-2"} for link in small["links"])
        for bad in (0, 2001, True):
            with pytest.raises(InvalidInputError, match="limit"):
                mem.graph(user_id="ana", limit=bad)
        with pytest.raises(NotFoundError):
            mem.graph(user_id="nobody")
