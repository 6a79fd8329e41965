"""``amem`` and ``amem-extractive``: notes, LLM-chosen links and memory evolution, over a real SQLite store,
the real embedder and a scripted LLM on loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.amem import AMem
from memgas.store import open_store
from support.openai_stub import OpenAIStub

#: One user line per turn, in time order (one session each).
LINES = [
    ("a", "I booked the flights for the trip today."),
    ("b", "My sister keeps sending me recipes for lentil soup."),
    ("c", "The hotel in Lisbon confirmed our room with a sea view."),
]
#: The scripted note writer: a line → (keywords, tags, context).
NOTES = {
    "I booked the flights": (["flights", "Portugal"], ["travel"], "Planning a vacation to Portugal in June."),
    "My sister keeps": (["sister", "lentil soup"], ["family", "food"], "Family cooking."),
    "The hotel in Lisbon": (["hotel", "Lisbon"], ["travel"], "Accommodation for the Portugal trip."),
}


def respond(body: dict[str, Any], links: bool = True, evolve: bool = True) -> str:
    """Notes from :data:`NOTES`; the hotel note links to the flights note and rewrites its context."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You write memory notes"):
        keywords, tags, context = next(v for k, v in NOTES.items() if k in user)
        return json.dumps({"keywords": keywords, "tags": tags, "context": context})
    new, neighbours = user.split("NEW NOTE:\n", 1)[1].split("\n\nNEIGHBOURS:\n")
    if "hotel in Lisbon" not in new:
        return json.dumps({"links": [], "updates": []})
    flights = next(int(line.split(".", 1)[0]) for line in neighbours.splitlines() if "flights" in line and ". " in line)
    updates = [{"note": flights, "context": "Flights to Lisbon for the hotel stay by the sea.",
                "tags": ["travel", "Lisbon"]}] if evolve else []
    return json.dumps({"links": [flights] if links else [], "updates": updates})


def _fill(method: AMem, store: Any) -> None:
    for day, (sid, line) in enumerate(LINES, 1):
        msgs = [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted."}]
        method.ingest(store, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-05-0{day}T10:00:00"))


def _amem(embedder: Any, stub: OpenAIStub, **options: Any) -> AMem:
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    return get_method("amem", embedder, llm=llm, **options)  # type: ignore[return-value]


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    s = open_store(tmp_path / "m.db")
    yield s
    s.close()


def test_notes_carry_llm_keywords_and_context_into_their_vectors(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    amem = _amem(embedder, stub, top_k=1)
    _fill(amem, store)
    notes = amem.notes(store, "u")
    assert [n.keywords for n in notes][1] == ["sister", "lentil soup"]
    assert notes[0].links == {2} and notes[2].links == {0}
    # "Portugal" is in no turn's text, only in two notes' keywords and context
    assert amem.rank(store, "u", "vacation plans in Portugal").sessions[0] in ("a", "c")
    # two calls per note, but none to link the first note (nothing to link to)
    assert len(stub.requests) == 2 * len(LINES) - 1


def test_memory_evolution_rewrites_and_re_embeds_the_neighbour(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    amem = _amem(embedder, stub)
    _fill(amem, store)
    flights = amem.notes(store, "u")[0]
    assert flights.context == "Flights to Lisbon for the hotel stay by the sea." and flights.tags == ["travel", "Lisbon"]
    stub.responder = lambda body: respond(body, evolve=False)
    frozen = _amem(embedder, stub)
    view, frozen_view = amem._indexes.get(store, "u"), frozen._indexes.get(store, "u")
    assert frozen.notes(store, "u")[0].context == "Planning a vacation to Portugal in June."
    q = embedder.embed(["flights to Lisbon by the sea"])[0]
    assert view.vectors[0] @ q > frozen_view.vectors[0] @ q + 0.05  # the evolved note was re-embedded
    np.testing.assert_allclose(view.vectors[1], frozen_view.vectors[1])  # the others were not touched


def test_a_linked_note_ranks_right_after_the_top_ones(embedder, stub: OpenAIStub, store: Any) -> None:
    query = "Did my sister like the hotel?"
    stub.responder = lambda body: respond(body, evolve=False)
    _fill(_amem(embedder, stub), store)
    linked = _amem(embedder, stub, top_k=1).rank(store, "u", query)
    stub.responder = lambda body: respond(body, links=False, evolve=False)
    unlinked = _amem(embedder, stub, top_k=1)
    assert unlinked.notes(store, "u")[0].links == set()
    # by cosine the sister's note comes second; the hotel note's link to the flights puts those second
    assert unlinked.rank(store, "u", query).turns == [("c", 0), ("b", 0), ("a", 0)]
    assert linked.turns == [("c", 0), ("a", 0), ("b", 0)]


def test_the_extractive_variant_links_by_threshold_and_calls_no_llm(embedder, store: Any) -> None:
    loose = get_method("amem-extractive", embedder, link_threshold=-1.0)
    strict = get_method("amem-extractive", embedder, link_threshold=0.99)
    _fill(loose, store)
    assert loose.llm is None
    notes = loose.notes(store, "u")  # type: ignore[attr-defined]
    assert notes[2].links == {0, 1} and notes[0].links == {1, 2}
    assert all(not n.links for n in strict.notes(store, "u"))  # type: ignore[attr-defined]
    assert loose.rank(store, "u", "lentil soup").sessions[0] == "b"
