"""Episodic (EM-LLM-style) memory: surprise, boundaries, modularity refinement, coverage, and retrieval."""


from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.segment import SELECTED_OFFSET, labels_from_starts, starts_from_labels
from memgas.methods import Episodic, get_method
from memgas.methods.episodic import (
    EmbeddingDriftSurprise,
    EpisodicConfig,
    refine_boundaries,
    representatives,
    segment_events,
    split_modularity,
    surprise_boundaries,
)
from memgas.store import open_store
from support.signals import topic_stream


def test_drift_surprise_is_one_minus_cosine_to_the_recent_context() -> None:
    v = topic_stream([4, 3])
    starts = np.zeros(7, dtype=bool)
    starts[[0, 5]] = True
    s = EmbeddingDriftSurprise(context=2).surprise([""] * 7, v, starts)
    assert np.isnan(s[0]) and np.isnan(s[5])
    ctx = v[1] + v[2]
    assert s[3] == pytest.approx(1 - v[3] @ ctx / np.linalg.norm(ctx))
    assert s[6] == pytest.approx(1 - v[6] @ v[5])  # context stops at the session start
    assert s[4] > s[3]  # the topic changes at position 4


def test_boundaries_at_surprise_peaks_and_forced_starts() -> None:
    surprise = np.array([np.nan, 0.2, 0.21, 0.19, 0.2, 0.9, 0.2, 0.22, np.nan, 0.2])
    forced = np.zeros(10, dtype=bool)
    forced[8] = True
    assert surprise_boundaries(surprise, forced, window=4, gamma=1.0).tolist() == [0, 5, 8]
    with pytest.raises(InvalidInputError):
        surprise_boundaries(surprise, forced, window=1, gamma=1.0)


def test_split_modularity_matches_networkx() -> None:
    v = topic_stream([5, 4], seed=3)
    a = np.clip(v @ v.T, 0, None)
    np.fill_diagonal(a, 0)
    g = nx.from_numpy_array(a)
    expected = [nx.community.modularity(g, [set(range(p)), set(range(p, 9))]) for p in range(1, 9)]
    np.testing.assert_allclose(split_modularity(a), expected, atol=1e-12)
    assert int(np.argmax(split_modularity(a))) + 1 == 5
    assert not split_modularity(np.zeros((3, 3))).any()


def test_refinement_moves_a_misplaced_boundary_to_the_topic_change() -> None:
    v = topic_stream([6, 5, 6], seed=1)
    fixed = np.zeros(17, dtype=bool)
    fixed[0] = True
    assert refine_boundaries(np.array([0, 4, 13]), v, fixed).tolist() == [0, 6, 11]
    fixed[4] = True  # a session start never moves
    assert refine_boundaries(np.array([0, 4, 13]), v, fixed).tolist()[:2] == [0, 4]


def test_events_cover_the_stream_exactly_once() -> None:
    v = topic_stream([7, 3, 9, 2, 8], seed=2)
    session_start = np.zeros(len(v), dtype=bool)
    session_start[[0, 12]] = True
    starts = segment_events([""] * len(v), v, session_start, EpisodicConfig(window=5))
    labels = labels_from_starts(starts, len(v))
    assert starts[0] == 0 and (np.diff(starts) > 0).all() and 12 in starts
    events = [np.flatnonzero(labels == e) for e in range(labels.max() + 1)]
    assert np.concatenate(events).tolist() == list(range(len(v)))  # in order, each position once
    assert all((np.diff(e) == 1).all() for e in events)  # contiguous
    assert starts_from_labels(labels).tolist() == starts.tolist()
    with pytest.raises(InvalidInputError):
        labels_from_starts(np.array([0, 3, 3]), 5)
    with pytest.raises(InvalidInputError):
        labels_from_starts(np.array([1, 3]), 5)


def test_representative_is_the_event_medoid() -> None:
    v = topic_stream([4, 5], seed=4)
    labels = np.array([0] * 4 + [1] * 5)
    reps = representatives(v, labels)
    for e, rep in enumerate(reps):
        members = np.flatnonzero(labels == e)
        sums = (v[members] @ v[members].T).sum(axis=1)
        assert rep == members[np.argmax(sums)]


SESSIONS = {
    "s1": ["I'm repainting the living room in sage green.", "The painter comes on Tuesday.",
           "I bought two tins of primer.", "My sister recommended a jazz bar downtown.",
           "The bar has live saxophone on Fridays."],
    "s2": ["My laptop battery dies after an hour.", "The laptop is a 2019 ThinkPad.",
           "I might replace the battery myself."],
    "s3": ["I'm training for a half marathon in May.", "My long run this week was 16 km."],
}



@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("episodic") / "m.db")
    method = Episodic(embedder)
    for i, (sid, lines) in enumerate(SESSIONS.items()):
        msgs = []
        for line in lines:
            msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Okay."}]
        method.ingest(s, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-07-0{i + 1}T18:00:00"))
    yield s
    s.close()


def test_retrieval_brings_the_event_and_its_neighbours(embedder, store) -> None:
    method = get_method("episodic", embedder, k_similar=1, contiguity=1)
    ranking = method.rank(store, "u", "What is wrong with my ThinkPad battery?")
    assert ranking.sessions[0] == "s2" and ranking.turns[0][0] == "s2"
    index = method._indexes.get(store, "u")
    scored = method.score(store, "u", "What is wrong with my ThinkPad battery?")
    events = index.event_of[scored.scores[index.rows] >= SELECTED_OFFSET - 1]
    # one event by similarity, plus its neighbours on each side in the stream
    assert 2 <= len(set(events.tolist())) <= 3 and np.ptp(events) == len(set(events.tolist())) - 1
    no_buffer = get_method("episodic", embedder, k_similar=1, contiguity=0).score(store, "u", "ThinkPad battery")
    assert len(set(index.event_of[no_buffer.scores[index.rows] >= SELECTED_OFFSET - 1].tolist())) == 1
    with pytest.raises(InvalidInputError):
        Episodic(embedder, contiguity=-1)


@pytest.mark.slow
def test_token_nll_surprise_from_the_real_local_model() -> None:
    """EM-LLM's own surprise (token NLL of a GGUF model) where llama-cpp-python and a model are installed."""
    pytest.importorskip("llama_cpp")
    from memgas.core.errors import MissingDependencyError
    from memgas.llm.local import TokenNLLSurprise

    try:
        scorer = TokenNLLSurprise(max_unit_tokens=24, n_ctx=256, n_threads=2)
    except MissingDependencyError as e:
        pytest.skip(str(e))
    texts = ["I bake sourdough bread every Sunday morning.", "The bread needs a long, slow rise overnight.",
             "The bread needs a long, slow rise overnight.", "Quantum chromodynamics describes the strong force."]
    nll = scorer.surprise(texts, np.zeros((4, 2)), np.array([True, False, False, False]))
    assert np.isnan(nll[0]) and np.isfinite(nll[1:]).all() and (nll[1:] > 0).all()
    assert nll[2] < nll[1]  # a repeat of what was just said is barely surprising
    assert nll[3] > nll[2]  # a jump to physics is
