"""Tests of memgas.units with the real embedding model (MiniLM int8 ONNX)."""

from __future__ import annotations

import os
import random

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest
from segtok.segmenter import split_multi

from memgas.core.errors import InvalidInputError, MemgasError
from memgas.core.types import Message, Session
from memgas.core.validate import make_session
from memgas.kernels.quantize import from_half, to_half
from memgas.kernels.text import fair_heads
from memgas.methods.units import ExtractiveSummarizer, YakeKeyworder, build_units, embed_texts, embedding_view

_VOCAB = (
    "river garden kitchen morning project budget travel doctor concert library recipe bicycle weather "
    "painting neighbour holiday market coffee museum festival mountain ocean window letter student "
    "teacher engine camera jacket piano forest village harbour ticket planet winter summer autumn "
    "spring basket candle mirror pillow wallet ladder bridge castle island desert valley meadow"
).split()


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n)) + "."


def _session(messages: list[dict], **kw) -> Session:
    return make_session(messages, user_id="u1", session_id=kw.pop("session_id", "s1"), **kw)


def _of(units, granularity):
    return [u for u in units if u.granularity == granularity]


class CountingEmbedder:
    """The real embedder, counting its embed calls and texts (and optionally breaking its output)."""

    def __init__(self, inner, *, drop_column: bool = False) -> None:
        self.inner = inner
        self.id, self.dim, self.max_tokens = inner.id, inner.dim, inner.max_tokens
        self.calls: list[list[str]] = []
        self.drop_column = drop_column

    def embed(self, texts):
        self.calls.append(list(texts))
        out = self.inner.embed(texts)
        return out[:, :-1] if self.drop_column else out

    def count_tokens(self, texts):
        return self.inner.count_tokens(texts)

    def split_to_window(self, text, max_tokens=None):
        return self.inner.split_to_window(text, max_tokens)



_HIKING = [
    {"role": "user", "name": "Caroline", "content": "Hi! Last weekend I went hiking at Mount Rainier with my "
     "sister Melanie. We camped near Paradise and watched the sunrise over the glacier."},
    {"role": "assistant", "name": "Bot", "content": "That sounds wonderful. Did the weather hold up?"},
    {"role": "user", "name": "Caroline", "content": "Mostly yes. It rained on Sunday, so we drove back to Seattle "
     "early and had ramen downtown. Thanks for asking!"},
    {"role": "assistant", "name": "Bot", "content": "Glad you had a good trip, despite the rain."},
    {"role": "user", "name": "Caroline", "content": "Next month we plan to climb Mount Rainier's Camp Muir route "
     "with a guide named Oskar."},
]


@pytest.fixture(scope="module")
def hiking() -> Session:
    return _session(_HIKING, timestamp="2023-05-08T13:56:00")


def test_short_session_has_one_unit_per_granularity_and_turn(embedder, hiking):
    counting = CountingEmbedder(embedder)
    units = build_units(hiking, counting)
    n = len(hiking.turns)
    assert [u.granularity for u in units] == ["session"] + ["turn"] * n + ["summary", "keyword"]
    assert [(u.turn_start, u.turn_end) for u in _of(units, "turn")] == [(i, i + 1) for i in range(n)]
    assert all((u.turn_start, u.turn_end) == (0, n) for u in units if u.granularity != "turn")
    assert all(u.session_id == "s1" and u.id is None for u in units)
    matrix = np.stack([u.vector for u in units])
    assert matrix.dtype == np.float32 and matrix.shape == (len(units), embedder.dim)
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-4)  # unit vectors rounded to float16
    assert len(counting.calls) == 2  # [turns], then [summary + keywords]
    # Turn vectors are the embedder's own vectors of the turns' embedding views.
    np.testing.assert_array_equal(units[1].vector, from_half(to_half(embedder.embed([embedding_view(hiking.turns[0])])[0])))
    # A session chunk's vector pools its turns' vectors.
    pooled = np.mean([u.vector for u in _of(units, "turn")], axis=0)
    np.testing.assert_array_equal(units[0].vector, from_half(to_half(pooled / np.linalg.norm(pooled))))


def test_embedding_view_keeps_user_words_and_cuts_long_replies(hiking):
    long_reply = Session(
        user_id="u", session_id="s", messages=(
            Message("user", "My cat Miso ate a whole " + "very " * 100 + "long sock."),
            Message("assistant", "Oh no! " + "Here is what to do next. " * 100),
        ),
    )
    view = embedding_view(long_reply.turns[0], reply_chars=300)
    assert long_reply.messages[0].content in view  # user words are never cut
    reply_line = view.splitlines()[1]
    assert reply_line.startswith("assistant: Oh no!") and reply_line.endswith("…") and len(reply_line) < 330
    assert embedding_view(hiking.turns[0]) == hiking.turns[0].text  # short turns are embedded whole


def test_speaker_names_are_in_the_texts(embedder, hiking):
    units = build_units(hiking, embedder)
    session_text = _of(units, "session")[0].text
    assert session_text == hiking.text
    assert "Caroline: Hi! Last weekend" in session_text and "Bot: That sounds wonderful" in session_text
    assert _of(units, "turn")[0].text.startswith("Caroline: Hi!")


def test_summary_sentences_come_from_user_text(embedder, hiking):
    units = build_units(hiking, embedder)
    summary = _of(units, "summary")[0].text
    user_text = "\n".join(m.content for m in hiking.messages if m.role == "user")
    sentences = [s for s in split_multi(summary) if s.strip()]
    assert 1 <= len(sentences) <= 3 and len(summary) <= 600
    assert all(s in user_text for s in sentences)
    assert "Hi!" not in summary  # fillers lose to sentences with content
    # chronological order
    positions = [user_text.index(s) for s in sentences]
    assert positions == sorted(positions)


def test_keywords_keep_proper_names(embedder, hiking):
    keywords = _of(build_units(hiking, embedder), "keyword")[0].text.split(", ")
    assert any("Rainier" in k for k in keywords)
    assert len(keywords) <= 10
    assert len({k.lower() for k in keywords}) == len(keywords)
    assert not any("Bot" in k for k in keywords)  # assistant side is not used when the user spoke


def test_long_session_is_chunked_at_turn_boundaries_without_truncation(embedder):
    rng = random.Random(7)
    messages = []
    for _ in range(40):
        messages.append({"role": "user", "name": "Ana", "content": _words(rng, 60)})
        messages.append({"role": "assistant", "name": "Ben", "content": _words(rng, 60)})
    session = _session(messages, timestamp="2023-01-02")
    units = build_units(session, embedder)
    chunks, turns = _of(units, "session"), _of(units, "turn")
    assert len(turns) == 40 and len(chunks) > 1
    assert [c.chunk for c in chunks] == list(range(len(chunks)))
    # a chunk holds as many turns as one window reads (by their embedding views)
    view_counts = embedder.count_tokens([embedding_view(t) for t in session.turns])
    for c in chunks:
        assert sum(view_counts[c.turn_start:c.turn_end]) + 2 <= embedder.max_tokens  # + [CLS], [SEP]
    for a, b in zip(chunks, chunks[1:]):  # greedy: the next turn did not fit
        assert sum(view_counts[a.turn_start:a.turn_end]) + view_counts[b.turn_start] + 2 > embedder.max_tokens
    assert chunks[0].turn_start == 0 and chunks[-1].turn_end == 40
    assert all(a.turn_end == b.turn_start for a, b in zip(chunks, chunks[1:]))
    for turn in turns:
        holders = [c for c in chunks if c.turn_start <= turn.turn_start < c.turn_end]
        assert len(holders) == 1 and turn.text in holders[0].text
    assert "\n".join(c.text for c in chunks) == session.text


def test_short_turns_are_packed_greedily(embedder):
    rng = random.Random(3)
    session = _session([{"role": "user", "content": _words(rng, 25)} for _ in range(30)])
    chunks = _of(build_units(session, embedder), "session")
    assert 1 < len(chunks) < 30
    limit = embedder.max_tokens - 2
    turn_counts = embedder.count_tokens([t.text for t in session.turns])
    for chunk, next_chunk in zip(chunks, chunks[1:]):
        # greedy: the next turn did not fit in this chunk
        assert embedder.count_tokens([chunk.text])[0] + turn_counts[next_chunk.turn_start] > limit


def test_a_message_larger_than_the_window_is_covered(embedder):
    rng = random.Random(11)
    content = " ".join(_words(rng, 100) for _ in range(30))  # 3,000 words
    session = _session([{"role": "user", "content": content}])
    units = build_units(session, embedder)
    (chunk,), (turn,) = _of(units, "session"), _of(units, "turn")
    assert (chunk.turn_start, chunk.turn_end) == (0, 1)
    assert chunk.text == turn.text == session.text  # stored whole
    np.testing.assert_allclose(chunk.vector, turn.vector, atol=1e-6)
    # The turn's vector is the re-normalised mean of its window pieces, computed by embed_texts.
    np.testing.assert_array_equal(turn.vector, from_half(to_half(embed_texts(embedder, [embedding_view(session.turns[0])])[0])))
    pieces = embedder.split_to_window(embedding_view(session.turns[0]))
    mean = np.mean(embedder.embed(pieces), axis=0)
    np.testing.assert_allclose(turn.vector, mean / np.linalg.norm(mean), atol=2**-11)  # rounded to float16
    assert len(_of(units, "summary")[0].text) <= 600


def test_custom_summarizer_and_keyworder_are_used(embedder, hiking):
    calls: list[str] = []

    class Llm:
        def summarize(self, session, turn_vectors):
            calls.append("summarize")
            self.turn_vectors = turn_vectors
            return "Caroline hiked Mount Rainier."

        def keywords(self, session):
            calls.append("keywords")
            return ["Caroline", "Mount Rainier", "  "]

    llm = Llm()
    units = build_units(hiking, embedder, summarizer=llm, keyworder=llm)
    assert calls == ["summarize", "keywords"]
    assert _of(units, "summary")[0].text == "Caroline hiked Mount Rainier."
    assert _of(units, "keyword")[0].text == "Caroline, Mount Rainier"
    np.testing.assert_array_equal(llm.turn_vectors, np.stack([u.vector for u in _of(units, "turn")]))

    class Silent:
        def summarize(self, session, turn_vectors):
            return "  "

    with pytest.raises(MemgasError, match="no summary"):
        build_units(hiking, embedder, summarizer=Silent())


def test_keyword_unit_falls_back_to_the_summary_when_there_are_no_keywords(embedder):
    session = _session([{"role": "user", "content": "I am ok, thanks."}, {"role": "assistant", "content": "Good!"}])
    units = build_units(session, embedder)
    assert _of(units, "keyword")[0].text == _of(units, "summary")[0].text == "I am ok, thanks."


def test_wrong_embedder_shape_raises(embedder, hiking):
    with pytest.raises(MemgasError, match="shape"):
        build_units(hiking, CountingEmbedder(embedder, drop_column=True))


def test_embed_texts_embeds_duplicates_once(embedder):
    counting = CountingEmbedder(embedder)
    vectors = embed_texts(counting, ["a red fox", "a blue whale", "a red fox"])
    assert counting.calls == [sorted({"a red fox", "a blue whale"})]
    np.testing.assert_array_equal(vectors[0], vectors[2])


def test_extractive_summarizer_picks_the_turns_nearest_the_centroid():
    session = _session(
        [
            {"role": "user", "content": "Hello there."},
            {"role": "user", "content": "My daughter Priya starts violin lessons in September. Yay."},
            {"role": "user", "content": "Unrelated: what is the capital of Peru?"},
        ]
    )
    # Turn 1 lies between the other two, so it is nearest their mean.
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32)
    assert ExtractiveSummarizer(max_sentences=1).summarize(session, vectors) == (
        "My daughter Priya starts violin lessons in September."
    )
    # Fewer top turns than sentences: the round-robin takes a second sentence of the best turns.
    two = ExtractiveSummarizer(max_sentences=4).summarize(session, vectors)
    assert two.startswith("Hello there.") and "Priya" in two and "Peru" in two
    # max_chars: a sentence that does not fit is skipped; with nothing fitting, the best one is cut.
    assert ExtractiveSummarizer(max_sentences=3, max_chars=20).summarize(session, vectors) == "Hello there. Yay."
    one = _session([{"role": "user", "content": "My daughter Priya starts violin lessons in September."}])
    assert ExtractiveSummarizer(max_chars=20).summarize(one, vectors[:1]) == "My daughter Priya"
    with pytest.raises(InvalidInputError):
        ExtractiveSummarizer().summarize(session, vectors[:2])
    with pytest.raises(InvalidInputError):
        ExtractiveSummarizer(max_sentences=0)


def test_extractive_summarizer_uses_all_turns_without_a_user_message():
    session = _session([{"role": "assistant", "content": "Welcome back, Dmitri. Your order of basil seeds shipped."}])
    summary = ExtractiveSummarizer().summarize(session, np.ones((1, 4), dtype=np.float32) / 2)
    assert summary == "Welcome back, Dmitri. Your order of basil seeds shipped."


def test_yake_input_is_capped_fairly_so_short_messages_still_count():
    texts = ["a" * 50, "word " * 2000, "My cousin Beatrix moved to Reykjavik."]
    heads = fair_heads(texts, 1000)
    assert heads[0] == texts[0] and heads[2] == texts[2]  # short messages keep all of their text
    assert sum(map(len, heads)) <= 1000 and heads[1] == texts[1][: len(heads[1])]
    assert len(heads[1]) > 1000 - 50 - len(texts[2]) - 5 and not heads[1].endswith(" ")  # the rest, at a word
    assert fair_heads(texts[:1], 1000) == texts[:1]


def test_yake_keywords_cover_later_turns_and_stay_distinct(hiking):
    keywords = YakeKeyworder(top=10).keywords(hiking)
    assert keywords[0] == "Mount Rainier" and "Oskar" in " ".join(keywords)
    assert "Rainier" not in keywords  # covered by "Mount Rainier"
    assert YakeKeyworder(top=3).keywords(hiking) == keywords[:3]
