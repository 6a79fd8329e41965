"""Turn-level ranking (issue 15): turns by their own evidence inside their session's score."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.turnscore import own_turn_scores
from memgas.methods import MemGAS
from memgas.methods.ranking import rank_units
from memgas.store import open_store


def _reference(scores, session_of, n_sessions, turn_rows, turn_scores, carrier_rows):
    """The same rule, one unit at a time."""
    best = [max((scores[i] for i in range(len(scores)) if session_of[i] == s), default=-np.inf)
            for s in range(n_sessions)]
    out = list(scores)
    for r, t in zip(turn_rows, turn_scores):
        out[r] = min(t, best[session_of[r]])
    for r in carrier_rows:
        out[r] = best[session_of[r]]
    return np.array(out)


def _random_case(rng: np.random.Generator):
    n_sessions = int(rng.integers(1, 6))
    session_of = np.concatenate([np.arange(n_sessions), rng.integers(0, n_sessions, int(rng.integers(0, 30)))])
    n = session_of.size
    rows = rng.permutation(n)
    carriers = rows[:n_sessions][np.argsort(session_of[rows[:n_sessions]])]  # not always one per session
    turns = rows[n_sessions:n_sessions + int(rng.integers(0, n - n_sessions + 1))]
    return rng.normal(size=n), session_of, n_sessions, turns, rng.normal(size=turns.size) * 2, carriers


def test_matches_the_reference_on_random_cases() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        case = _random_case(rng)
        np.testing.assert_array_equal(own_turn_scores(*case), _reference(*case))


def test_sessions_keep_their_score_and_turns_follow_their_own() -> None:
    # two sessions: session 0 (rows 0-3) is stronger; its turns 1-3 were lifted by PageRank alike
    session_of = np.array([0, 0, 0, 0, 1, 1, 1])
    scores = np.array([2.0, 1.9, 1.9, 1.9, 1.5, 1.2, 1.2])
    turns, carriers = np.array([1, 2, 3, 5, 6]), np.array([0, 4])
    own = np.array([0.3, 5.0, 0.2, 1.4, 0.1])  # turn 2 outscores its session: capped
    out = own_turn_scores(scores, session_of, 2, turns, own, carriers)
    np.testing.assert_allclose(out, [2.0, 0.3, 2.0, 0.2, 1.5, 1.4, 0.1])
    best = [out[session_of == s].max() for s in (0, 1)]
    assert best == [2.0, 1.5]  # the session ranking is unchanged
    turn_order = list(turns[np.argsort(-out[turns], kind="stable")])
    assert turn_order == [2, 5, 1, 3, 6]  # session 1's best turn now leads session 0's weaker ones


def test_a_session_without_carrier_keeps_its_other_units() -> None:
    out = own_turn_scores(np.array([1.0, 3.0]), np.array([0, 0]), 1, np.array([1]), np.array([0.5]), np.array([], int))
    np.testing.assert_allclose(out, [1.0, 0.5])


@pytest.mark.parametrize("bad", [
    dict(scores=np.array([1.0, np.nan])),
    dict(session_of=np.array([0, 2])),
    dict(turn_scores=np.array([1.0, 2.0])),
])
def test_bad_input_is_a_clear_error(bad) -> None:
    args = dict(scores=np.array([1.0, 2.0]), session_of=np.array([0, 1]), n_sessions=2,
                turn_rows=np.array([1]), turn_scores=np.array([0.5]), carrier_rows=np.array([0]))
    with pytest.raises(InvalidInputError):
        own_turn_scores(**{**args, **bad})


def _session(sid: str, lines: list[str]):
    msgs = []
    for line in lines:
        msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted."}]
    return make_session(msgs, user_id="u", session_id=sid, timestamp="2024-03-01T10:00:00")


def test_memgas_ranks_turns_by_their_seed_within_the_session_ranking(embedder) -> None:
    store = open_store(None)
    method = MemGAS(embedder)
    method.ingest(store, _session("trip", ["We drove to Lake Tahoe in June.", "The cabin had a wood stove.",
                                           "My sister brought her kayak to Lake Tahoe.", "It rained twice."]))
    method.ingest(store, _session("work", ["My manager moved the launch to June.", "I kayak on weekends now.",
                                           "The new office is near the lake."]))
    q = "who brought a kayak to Lake Tahoe"
    new = method.score(store, "u", q)
    old = MemGAS(embedder, turn_seed=False).score(store, "u", q)
    plain = MemGAS(embedder, session_weight=0.0).score(store, "u", q)  # PageRank alone
    a, b = rank_units(new.index, new.scores), rank_units(old.index, old.scores)
    assert a.sessions == b.sessions  # PageRank and session evidence still rank the sessions
    units, turns = new.index, new.index.masks["turn"]
    bonus = old.scores - plain.scores / plain.scores.max()
    session_score = np.full(len(units.sessions), -np.inf)
    np.maximum.at(session_score, units.session_of, old.scores)
    expect = np.minimum(new.seed[turns] / new.seed.max() + bonus[turns], session_score[units.session_of[turns]])
    np.testing.assert_allclose(new.scores[turns], expect)
    assert a.turns[0] == ("trip", 2)  # the kayak turn, by its own words


def test_a_fact_deep_in_a_long_reply_is_found_by_its_words_with_lexical_reply_chars(embedder) -> None:
    """BM25's view reads a reply's first 300 characters (as the vector does): without the tails, a fact the assistant
    gave after them has no lexical evidence, and its session ties with a twin that lacks it; a view that reads
    replies whole finds it."""
    from memgas.bench.longreplies import long_reply_cases

    case = next(c for c in long_reply_cases(depths=[1500]) if "Hiiragiya" in c.question)
    fact = next(s for s in case.sessions if s.session_id == "fact").messages[1].content
    assert fact.index("Hiiragiya") > 1000  # deep in the reply, past the first 300 characters
    store = open_store(None)
    default = MemGAS(embedder, reply_tail_weight=0.0)
    whole = MemGAS(embedder, reply_tail_weight=0.0, lexical_reply_chars=5000)
    for session in case.sessions:
        default.ingest(store, session)
    hits = {name: {h.session_id: h for h in m.search(store, case.user_id, case.question, k=5)}
            for name, m in (("default", default), ("whole", whole))}
    assert hits["default"]["fact"].channels.get("lexical", 0.0) == 0.0  # not one of its words in the BM25 view
    assert hits["whole"]["fact"].channels["lexical"] > 0.0
    assert next(iter(hits["whole"])) == "fact"
    assert default._indexes._snapshots.kind != whole._indexes._snapshots.kind  # another view, another snapshot


def test_reply_tails_make_a_deep_fact_findable_and_load_and_grow_exactly(embedder, tmp_path) -> None:
    """With ``reply_tail_weight``, the question's words that no turn's view holds are read in the replies' tails: the
    fact deep in a reply is found first, while a question whose words the views hold scores as without tails. The
    index is the same whether built, grown by an add, or loaded cold from its snapshot (the tails' BM25 with it)."""
    from memgas.bench.longreplies import long_reply_cases

    case = next(c for c in long_reply_cases(depths=[1500]) if "Hiiragiya" in c.question)
    path = str(tmp_path / "mem.db")
    store = open_store(path)
    writer = MemGAS(embedder, reply_tail_weight=1.0)
    *first, last = case.sessions
    for session in first:
        writer.ingest(store, session)
    writer.search(store, case.user_id, case.question, k=1)  # the index held and snapshotted before the last add
    writer.ingest(store, last)  # the held index grows by the add
    assert writer.flush(timeout=30)
    grown = writer.score(store, case.user_id, case.question)
    cold = MemGAS(embedder, reply_tail_weight=1.0)
    fresh = MemGAS(embedder, reply_tail_weight=1.0, snapshots=False)
    loaded, built = (m.score(open_store(path), case.user_id, case.question) for m in (cold, fresh))
    assert cold._indexes.loads == 1 and fresh._indexes.builds == 1
    assert cold._indexes.get(store, case.user_id).tails is not None  # the snapshot held the tails' BM25
    np.testing.assert_array_equal(loaded.scores, built.scores)
    np.testing.assert_array_equal(grown.scores, built.scores)
    hits = fresh.search(store, case.user_id, case.question, k=5)
    assert hits[0].session_id == "fact" and hits[0].channels["lexical"] > 0.0
    off = MemGAS(embedder, reply_tail_weight=0.0)
    assert {h.session_id: h for h in off.search(store, case.user_id, case.question, k=5)}["fact"].channels.get(
        "lexical", 0.0) == 0.0  # no tail read: none of the fact's words in the views
    held = "Can you help me plan a long weekend in Kyoto in early November?"  # every word in the views
    np.testing.assert_array_equal(fresh.score(store, case.user_id, held).scores, off.score(store, case.user_id,
                                                                                             held).scores)
    # a later session's user says the word: the views hold it now, so it is no longer looked up in the tails (whose
    # postings for it stopped growing), and the grown index still scores as a fresh build
    writer.ingest(store, make_session([{"role": "user", "content": "We booked the Hiiragiya for the trip."},
                                       {"role": "assistant", "content": "Lovely."}], user_id=case.user_id,
                                      session_id="later", timestamp="2024-12-01T10:00:00"))
    np.testing.assert_array_equal(writer.score(store, case.user_id, case.question).scores,
                                  MemGAS(embedder, snapshots=False).score(store, case.user_id, case.question).scores)
    store.close()


def test_a_word_at_the_end_of_a_1_mb_message_finds_its_session(embedder) -> None:
    """The embedder reads a message's first INDEXED_MESSAGE_CHARS; the rest of a user's message is in the turns' tail
    index like a long reply's, so a word said only past that point finds its session (it was 7th of 8: no channel
    held it), and the docs' "every word stays in the lexical index" holds."""
    from memgas import Memory
    from memgas.core.validate import INDEXED_MESSAGE_CHARS
    from memgas.methods.units import turn_tail

    filler = " ".join(f"Note {i}: the weather was mild and the garden needed water." for i in range(18_000))
    big = filler[:1_000_000] + " My locker code word is zyxquartzeon."
    assert big.index("zyxquartzeon") > INDEXED_MESSAGE_CHARS
    with Memory(None, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": big}], user_id="u", session_id="big")
        for i, text in enumerate(["I love hiking in the Alps.", "My cat is named Miso.", "I work as a nurse.",
                                  "I bake bread on Sundays.", "Chess club is on Tuesdays.", "I am learning Portuguese.",
                                  "My sister visits in June."]):
            mem.add(text, user_id="u", session_id=f"s{i}")
        for question in ("What was my locker code word zyxquartzeon about?", "zyxquartzeon"):
            found = {h.session_id: h for h in mem.search(question, user_id="u", k=2)}  # 2nd of 8 at worst
            assert "big" in found and found["big"].channels["lexical"] > 0.5, question
    session = make_session([{"role": "user", "content": big}, {"role": "assistant", "content": "Noted."}],
                           user_id="u", session_id="x")
    assert turn_tail(session.turns[0]).endswith("zyxquartzeon.") and "Noted" not in turn_tail(session.turns[0])
