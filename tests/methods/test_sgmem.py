"""SGMem: sentence splitting, the sentence graph's structure, and retrieval over a real store."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.knn import knn_graph
from memgas.kernels.segment import SELECTED_OFFSET, fixed_chunks
from memgas.methods import SGMem, get_method
from memgas.methods.sgmem import split_sentences, turn_sentences
from memgas.store import open_store

# Three sessions; the answer to "Where did I adopt my cat?" sits in one sentence of session "pets", turn 2.
SESSIONS = {
    "work": [
        "I started a new job at a logistics company. My manager is called Priya.",
        "The commute takes forty minutes by train. I read on the way.",
        "We ship mostly furniture to Scandinavia.",
    ],
    "pets": [
        "I want to talk about my cat. She is a grey tabby.",
        "Her name is Miso and she loves cardboard boxes.",
        "I adopted Miso from the Riverside animal shelter in March. It was the best day of the year.",
        "She sleeps on my keyboard when I work from home.",
    ],
    "food": [
        "Dr. Lee told me to eat less salt, e.g. no more instant noodles.",
        "I cook lentil soup twice a week. It costs about $3.50 per pot.",
    ],
}


def _session(sid: str, lines: list[str]):
    msgs = []
    for line in lines:
        msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted. Anything else?"}]
    return make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-0{len(sid)}-01T10:00:00")



@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("sgmem") / "m.db")
    method = SGMem(embedder)
    for sid, lines in SESSIONS.items():
        method.ingest(s, _session(sid, lines))
    yield s
    s.close()


def test_sentence_splitter_handles_abbreviations_and_decimals() -> None:
    text = "Dr. Lee told me to eat less salt, e.g. no more instant noodles. It costs about $3.50 per pot!\nOK"
    assert split_sentences(text) == [
        "Dr. Lee told me to eat less salt, e.g. no more instant noodles.", "It costs about $3.50 per pot!", "OK"]


def test_turn_sentences_keep_the_speaker_and_cut_long_replies() -> None:
    reply = "Sure. " + "Long answer text goes on. " * 40
    turn = make_session([{"role": "user", "content": "Hi there. How are you?"},
                         {"role": "assistant", "content": reply}], user_id="u", session_id="s").turns[0]
    sentences = turn_sentences(turn, reply_chars=60)
    assert sentences[:3] == ["user: Hi there.", "user: How are you?", "assistant: Sure."]
    assert all(s.startswith(("user: ", "assistant: ")) for s in sentences)
    assert sum(len(s) - len("assistant: ") for s in sentences if s.startswith("assistant")) < 80


def test_knn_graph_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(40, 8))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    g = knn_graph(v, k=3, threshold=0.2, block=7).toarray()
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    expected = np.zeros_like(g)
    for i in range(40):
        for j in np.argsort(-sims[i])[:3]:
            if sims[i, j] >= 0.2:
                expected[i, j] = expected[j, i] = sims[i, j]
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    assert np.all(np.diag(g) == 0)


def test_fixed_chunks_never_cross_sessions() -> None:
    keys = np.array(["a", "a", "a", "b", "b", "b", "b", "b", "c"], dtype=object)
    assert fixed_chunks(keys, 2).tolist() == [0, 0, 1, 2, 2, 3, 3, 4, 5]
    with pytest.raises(InvalidInputError):
        fixed_chunks(keys, 0)


def test_every_sentence_belongs_to_exactly_one_chunk(embedder, store) -> None:
    method = SGMem(embedder, chunk_turns=2)
    graph = method.build_graph(store, "u")
    table = graph.units.table
    n_sent, n_chunks = len(graph.sentences), len(graph.chunk_vectors)
    membership = np.zeros((n_sent, n_chunks), dtype=int)
    membership[np.arange(n_sent), graph.sentence_chunk] = 1
    assert (membership.sum(axis=1) == 1).all() and (membership.sum(axis=0) >= 1).all()
    # sentences are exactly those of each turn's view, in order, and a chunk holds turns of one session
    expected = []
    for r in graph.rows:
        turn = store.get_session("u", table.session_ids[r]).turns[table.turn_start[r]]
        expected += turn_sentences(turn)
    assert list(graph.sentences) == expected
    for c in range(n_chunks):
        turns = np.flatnonzero(graph.chunk_of_turn == c)
        assert 1 <= turns.size <= 2 and len({table.session_ids[graph.rows[t]] for t in turns}) == 1
    assert graph.edges.shape == (n_sent, n_sent) and (graph.edges != graph.edges.T).nnz == 0


def test_query_reaches_the_chunk_holding_the_fact(embedder, store) -> None:
    method = SGMem(embedder, chunk_turns=2, top_chunks=2)
    graph = method.build_graph(store, "u")
    table = graph.units.table
    best = int(np.argmax(graph.sentence_vectors @ embedder.embed(["Where did I adopt my cat?"])[0]))
    assert "Riverside animal shelter" in graph.sentences[best]
    assert graph.sentence_chunk[best] in method.collect_chunks(graph, "Where did I adopt my cat?")

    scored = method.score(store, "u", "Where did I adopt my cat?")
    ranking = get_method("sgmem", embedder).rank(store, "u", "Where did I adopt my cat?")
    assert ranking.sessions[0] == "pets"
    assert ranking.turns[0] == ("pets", 2)
    # retrieved chunks (at most top_chunks) rank above every other turn
    top = scored.scores[graph.rows] >= SELECTED_OFFSET - 1
    assert 1 <= len(set(graph.chunk_of_turn[top])) <= 2
    assert "pets" in {table.session_ids[r] for r in graph.rows[top]}


def test_rejects_bad_parameters(embedder) -> None:
    with pytest.raises(InvalidInputError):
        SGMem(embedder, chunk_turns=0)


def test_empty_user_scores_nothing(embedder, store) -> None:
    assert SGMem(embedder).search(store, "nobody", "cat") == []
