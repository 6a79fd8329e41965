"""SeCom-style segments: TextTiling over turn vectors, coverage, the shared scoring helper, and retrieval."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.segment import SELECTED_OFFSET, TIE_WEIGHT, chronological_rows, labels_from_starts, structure_scores
from memgas.methods import SeCom, get_method
from memgas.methods.secom import SeComConfig, depth_scores, gap_similarities, texttiling_starts
from memgas.store import open_store
from support.signals import topic_stream


def test_gap_similarity_compares_the_blocks_around_each_gap() -> None:
    v = topic_stream([5, 4])
    starts = np.zeros(9, dtype=bool)
    starts[[0, 6]] = True
    s = gap_similarities(v, starts, block=2)
    assert np.isnan(s[0]) and np.isnan(s[6])
    left, right = v[2:4].sum(axis=0), v[4:6].sum(axis=0)
    assert s[4] == pytest.approx(left @ right / np.linalg.norm(left) / np.linalg.norm(right))
    assert s[7] == pytest.approx(v[6] @ v[7:9].sum(axis=0) / np.linalg.norm(v[7:9].sum(axis=0)))  # stops at edges
    with pytest.raises(InvalidInputError):
        gap_similarities(v, starts, block=0)


def _naive_depth(s: list[float], session: list[int]) -> list[float]:
    out = []
    for i, x in enumerate(s):
        j = i
        while j > 0 and session[j - 1] == session[i] and s[j - 1] >= s[j]:
            j -= 1
        k = i
        while k < len(s) - 1 and session[k + 1] == session[i] and s[k + 1] >= s[k]:
            k += 1
        out.append((s[j] - x) + (s[k] - x))
    return out


def test_depth_scores_match_hill_climbing() -> None:
    rng = np.random.default_rng(5)
    s = rng.uniform(size=40)
    session = np.repeat([0, 1, 2, 3], [12, 9, 1, 18])
    np.testing.assert_allclose(depth_scores(s, session), _naive_depth(s.tolist(), session.tolist()))


def test_segments_split_at_topic_changes_and_cover_each_turn_once() -> None:
    v = topic_stream([6, 6, 5, 7], seed=2)
    session_start = np.zeros(len(v), dtype=bool)
    session_start[[0, 17]] = True  # session 2 = the last topic
    starts = texttiling_starts(v, session_start, SeComConfig())
    assert {0, 6, 12, 17} <= set(starts.tolist())
    labels = labels_from_starts(starts, len(v))
    assert np.bincount(labels).sum() == len(v) and (np.diff(labels) >= 0).all()
    assert labels[17] != labels[16]  # no segment crosses a session start


def test_structure_scores_rank_selected_then_by_structure_then_own() -> None:
    struct = np.array([0.5, 0.9, 0.2])
    member_struct = np.array([0, 0, 1, 2, 2])
    member_unit = np.array([0, 1, 2, 3, 0])
    own = np.array([0.1, 0.3, 0.0, 0.2, -1.0])
    out = structure_scores(struct, member_struct, member_unit, 5, own=own)
    np.testing.assert_allclose(out[:4], [0.5 + TIE_WEIGHT * 0.1, 0.5 + TIE_WEIGHT * 0.3, 0.9, 0.2 + TIE_WEIGHT * 0.2])
    assert out[4] == -np.inf  # in no structure
    sel = structure_scores(struct, member_struct, member_unit, 5, selected=np.array([False, False, True]))
    np.testing.assert_allclose(sel[:4], [0.2 + SELECTED_OFFSET, 0.5, 0.9, 0.2 + SELECTED_OFFSET])


def test_chronological_rows_order_sessions_then_turns() -> None:
    row_session = ("b", "a", "b", "a", "x")
    turn_start = np.array([1, 1, 0, 0, 0])
    assert chronological_rows(np.array([0, 1, 2, 3]), row_session, turn_start, ["a", "b"]).tolist() == [3, 1, 2, 0]


SESSIONS = {
    "mixed": ["I'm baking sourdough bread this weekend.", "My starter is called Bubbles.",
              "The dough needs a long cold proof.", "Also, my car insurance renewal is due.",
              "The insurer raised the premium by 20 percent.", "I should compare insurance quotes."],
    "other": ["I'm learning Spanish on an app.", "My streak is 45 days."],
}



@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("secom") / "m.db")
    method = SeCom(embedder)
    for i, (sid, lines) in enumerate(SESSIONS.items()):
        msgs = []
        for line in lines:
            msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Right."}]
        method.ingest(s, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-09-0{i + 1}T12:00:00"))
    yield s
    s.close()


def test_segments_and_retrieval(embedder, store) -> None:
    method = get_method("secom", embedder, block=1)
    segments = method.segments(store, "u")
    flat = [t for seg in segments for t in seg]
    assert flat == [("mixed", i) for i in range(6)] + [("other", 0), ("other", 1)]
    assert all(len({sid for sid, _ in seg}) == 1 for seg in segments)
    assert len(segments) >= 3  # the two topics of "mixed" are apart
    ranking = method.rank(store, "u", "Did my car insurance premium go up?")
    assert ranking.sessions[0] == "mixed"
    assert ranking.turns[0] == ("mixed", 4)  # inside the segment, the turn's own similarity decides
