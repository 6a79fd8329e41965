"""Typed request and response bodies of the REST API (they make the served OpenAPI schema).

Limits mirror :mod:`memgas.model` so a request the schema accepts is refused only for what the schema
cannot say (a malformed timestamp, a duplicate id): those come back as 400 ``invalid_input``, schema
violations as 422 ``validation_error``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memgas.core.validate import ID_CHAR, MAX_K, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS

__all__ = [
    "MessageIn", "Messages", "messages_payload", "AppendRequest", "AppendResult", "MessageUpdate", "MessageChange", "ContextRequest",
    "ContextOut", "SessionIn", "AddSessionRequest", "AddManyRequest", "AddResult", "AddManyResponse",
    "SearchRequest", "SearchResponse", "HitOut", "TurnOut", "SessionOut", "SessionHeader", "SessionList", "SessionQuery",
    "DeleteMatching", "Filters", "ScopeId", "Order", "Limit",
    "UserRow", "UserList", "DeleteResult", "AnswerRequest", "AnswerOut", "FactOut", "FactList", "ErrorBody",
    "ErrorResponse", "Health", "ID_PATTERN", "UserId", "SessionId", "AgentId", "TemplateOut", "TemplateList",
    "TemplateMatchRequest", "TemplateMatch", "TemplateMatches", "PrincipleIn", "PrincipleOut", "PrincipleList",
    "PrincipleAdded", "PrincipleRecallRequest", "PrincipleMatch", "PrincipleMatches", "ItemDeleted", "MinSimilarity",
    "TemplateSolveRequest", "TemplateSolved", "DistilledProblem", "TemplateLearnRequest", "TemplateLearned",
    "TemplateDraft",
]

#: What a user or session id looks like (:func:`memgas.core.validate.check_id`).
# The length goes in max_length: a {1,256} repeat of \w is too large for pydantic's regex engine.
ID_PATTERN = f"^{ID_CHAR}+$"
UserId = Annotated[str, Field(min_length=1, max_length=256, pattern=ID_PATTERN,
                              description="whose memory: 1-256 letters, digits and . : @ / + - _")]
SessionId = Annotated[str, Field(min_length=1, max_length=256, pattern=ID_PATTERN,
                                 description="unique within the user")]
Timestamp = Annotated[str, Field(max_length=64, description="ISO 8601 (UTC when no zone is given), years 1000-8999")]
AgentId = Annotated[str, Field(min_length=1, max_length=256, pattern=ID_PATTERN,
                               description="whose experience: an agent's, shared by its users (ids as for users)")]
ScopeId = Annotated[str, Field(min_length=1, max_length=256, pattern=ID_PATTERN,
                               description="an optional scope of the session (ids as for users)")]
Filters = Annotated[dict[str, Any] | None, Field(default=None, description=(
    "which sessions: {field: value}, {field: {$eq|$ne|$in|$nin|$gt|$gte|$lt|$lte|$exists: ...}}, $and, $or, $not; "
    "fields session_id, timestamp, created_at, agent_id, run_id, else metadata keys (dotted paths); docs, "
    "'Scopes, filters and scores'"))]
MinSimilarity = Annotated[float | None, Field(ge=-1.0, le=1.0, description=(
    "leave out items whose cosine similarity is below this; default: the method's measured threshold"))]


class _Request(BaseModel):
    # Strict: "k": "5" or "k": true is a 422, as the library refuses them; nothing is coerced.
    model_config = ConfigDict(extra="forbid", strict=True)


class MessageIn(BaseModel):
    """One message of a session: memgas's own shape, an OpenAI chat message (content parts, ``tool_calls``,
    the ``tool`` and ``developer`` roles) or an Anthropic message (content blocks); see "The formats agents
    send" in the docs (guide "Live conversations") for what each becomes. Other keys of those formats (``tool_call_id``, ``id``) are
    accepted and not stored."""

    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["user", "assistant", "system", "tool", "developer", "function"]
    content: str | list[dict[str, Any]] | None = Field(
        default=None, description="text (1 to 200,000 characters), or a list of content parts / blocks")
    name: str | None = Field(default=None, max_length=256, description="the speaker's name, when known")
    tool_calls: list[dict[str, Any]] | None = Field(default=None, max_length=128,
                                                    description="an assistant's tool calls (OpenAI)")
    metadata: dict[str, Any] | None = Field(default=None, description="a JSON object kept with the message")


#: The messages of a request: a list of messages, or a plain string as one user message.
Messages = Annotated[list[MessageIn], Field(min_length=1, max_length=10_000)] | Annotated[
    str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)]


def messages_payload(messages: list[MessageIn] | str) -> list[dict[str, Any]] | str:
    """The messages of a request as :class:`~memgas.memory.Memory` takes them."""
    return messages if isinstance(messages, str) else [m.model_dump(exclude_none=True) for m in messages]


class SessionIn(_Request):
    """One session of a batch."""

    messages: Messages
    session_id: SessionId | None = Field(default=None, description="a random id is made when omitted")
    timestamp: Timestamp | None = None
    metadata: dict[str, Any] | None = Field(default=None, description="a JSON object, at most 64 KiB and 32 levels")
    agent_id: ScopeId | None = Field(default=None, description="the agent that held the conversation")
    run_id: ScopeId | None = Field(default=None, description="the run (of a workflow) it belongs to")


class AddSessionRequest(SessionIn):
    """``POST /v1/sessions``: store one session."""

    user_id: UserId


class AddManyRequest(_Request):
    """``POST /v1/sessions/batch``: store several sessions of one user, all or none."""

    user_id: UserId
    sessions: list[SessionIn] = Field(min_length=1, max_length=1000)
    skip_existing: bool = Field(default=False, description="leave out sessions the user already has")


class AddResult(BaseModel):
    """What one stored session became."""

    session_id: str
    units: int | None = None
    edges: int | None = None
    seconds: float | None = None
    skipped: bool = False


class AddManyResponse(BaseModel):
    """One result per session of the batch, in order."""

    results: list[AddResult]


class SearchRequest(_Request):
    """``POST /v1/search``."""

    user_id: UserId
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    k: int = Field(default=5, ge=1, le=MAX_K)
    query_time: str | None = Field(default=None, max_length=64, description="anchors 'last week' etc.; default now")
    min_score: float = Field(default=0.0, ge=0.0, le=1.0, description="leave out hits less relevant than this")
    exclude_sessions: list[SessionId] = Field(default_factory=list, max_length=100,
                                              description="sessions to leave out (the conversation in the prompt)")
    filters: Filters = None


class ContextRequest(SearchRequest):
    """``POST /v1/context``: :class:`SearchRequest` and the budget of the text."""

    k: int = Field(default=5, ge=1, le=MAX_K, description="evidence from at most the k most relevant sessions (a "
                                                          "question across the conversation reads them all)")
    max_tokens: int = Field(default=1000, ge=1, le=100_000, description="the text's budget, 4 characters a token")
    min_score: float | None = Field(default=None, ge=0.0, le=1.0,  # type: ignore[assignment]  # None: the floor
                                    description="leave out turns less relevant than this (default: the calibrated "
                                                "floor)")
    in_prompt: dict[SessionId, Annotated[int, Field(ge=0, le=1_000_000)]] | None = Field(
        default=None, max_length=100, description="what the prompt already holds of a conversation: {session_id: n}, "
                                                  "its latest n messages are left out, its older ones may come back")


class StandingOut(BaseModel):
    """One statement that holds now about the user: an instruction, a preference, or a lasting fact ("I moved to
    Lisbon last month."); what it is about, and where it was said."""

    kind: Literal["instruction", "preference", "fact"]
    text: str = Field(description="the statement, one sentence of a user message")
    session_id: str
    message: int = Field(description="the message's position in its session")
    timestamp: str | None = Field(description="the session's time")
    always: bool = Field(description="an instruction with no condition: it holds for every request")
    who: str | None = Field(default=None, description="the speaker's name where the message gives one (a group "
                                                     "chat), else null: the user")
    subject: str | None = Field(default=None, description="what it is about: home, diet, food, partner, family, "
                                                         "work, pets, language, name or other (null: not read)")


class ProfileOut(BaseModel):
    """The user's current standing instructions and preferences, oldest first."""

    statements: list[StandingOut]


class DigestItemOut(BaseModel):
    """One thing a session brought up: a line of the message that brought it up."""

    session_id: str
    message: int = Field(description="the position of the message the line is read from")
    turn_start: int = Field(description="the item's first turn")
    turn_end: int = Field(description="one past the item's last turn")
    speaker: str = Field(description="the message's name, else its role")
    text: str = Field(description="the start of the message, or with a topic the part of it about the topic")
    timestamp: str | None = Field(description="the session's time")
    relevance: float | None = Field(description="with a topic, the cosine of the item's best turn with it")


class SessionDigestOut(BaseModel):
    """What one session brought up, in order."""

    session_id: str
    timestamp: str | None
    items: list[DigestItemOut]


class TimelineOut(BaseModel):
    """The course of the user's conversations: each session's digest, oldest first."""

    sessions: list[SessionDigestOut]


class ContextOut(BaseModel):
    """Prompt-ready text of the relevant memories (empty when there are none)."""

    context: str


class AppendRequest(_Request):
    """``POST /v1/sessions/{session_id}/messages``: messages to add to the end of a session (made if new)."""

    user_id: UserId
    messages: Messages
    timestamp: Timestamp | None = Field(default=None, description="a new session's time (default now)")
    metadata: dict[str, Any] | None = Field(default=None, description="merged into the session's metadata")
    agent_id: ScopeId | None = Field(default=None, description="a new session's agent (a stored one keeps its own)")
    run_id: ScopeId | None = Field(default=None, description="a new session's run (a stored one keeps its own)")
    return_context: bool = Field(default=False, description="also return the context for the last user message")
    context_tokens: int = Field(default=1000, ge=1, le=100_000, description="that context's budget")
    window: int = Field(default=20, ge=1, le=1_000_000,
                        description="how many of this session's latest messages the prompt holds: left out of that "
                                    "context, the older ones are memory")


class AppendResult(BaseModel):
    """What an append did."""

    session_id: str
    created: bool
    messages: int = Field(description="the session's messages now")
    units: int
    edges: int
    seconds: float
    context: str | None = None


class MessageUpdate(_Request):
    """``PATCH /v1/messages/{index}?session_id=``: the message's new content."""

    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class MessageChange(BaseModel):
    """What an edit or delete of one message did."""

    session_id: str
    messages: int = Field(description="the session's messages now (0: the session was deleted)")
    units: int | None = None
    edges: int | None = None
    seconds: float | None = None
    deleted_session: bool = False


class TurnOut(BaseModel):
    """A turn of a retrieved session."""

    index: int
    score: float
    text: str


class HitOut(BaseModel):
    """A retrieved session (see :class:`memgas.core.types.Hit`)."""

    session_id: str
    score: float
    relevance: float
    timestamp: str | None
    turns: list[TurnOut]
    weights: dict[str, float]
    via_association: bool
    seed_score: float
    method: str
    metadata: dict[str, Any] = Field(default_factory=dict, description="the session's metadata")
    agent_id: str | None = None
    run_id: str | None = None
    created_at: str | None = Field(default=None, description="when the session was stored")
    channels: dict[str, float] = Field(default_factory=dict, description=(
        "MemGAS: each channel's share of the session's evidence (router weight x its best score above the user's "
        "average unit), fractions summing to 1; channels that gave none left out, empty when no channel singles the "
        "session out (found by association, or the best of a few)"))


class SearchResponse(BaseModel):
    """The hits, best first."""

    hits: list[HitOut]


class MessageOut(BaseModel):
    """A stored message."""

    role: str
    content: str
    name: str | None = None
    metadata: dict[str, Any] | None = None


class SessionOut(BaseModel):
    """A stored session."""

    session_id: str
    user_id: str
    timestamp: str | None
    metadata: dict[str, Any]
    agent_id: str | None = None
    run_id: str | None = None
    messages: list[MessageOut]


class SessionHeader(BaseModel):
    """A stored session's header."""

    session_id: str
    timestamp: str | None
    messages: int
    turns: int
    created_at: str
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    preview: str = Field(description="the start of the session's first user message")
    cursor: str = Field(description="pass as cursor to list the sessions after this one")


class SessionList(BaseModel):
    """A page of the user's sessions, in the order asked for (oldest first by default)."""

    sessions: list[SessionHeader]
    next_cursor: str | None = Field(default=None, description="the cursor of the next page; null on the last")


Order = Literal["oldest", "newest"]
#: Sessions per page when none is asked for.
Limit = Annotated[int | None, Field(default=None, ge=1, le=10_000, description="sessions per page (default: all)")]


class SessionQuery(_Request):
    """``POST /v1/sessions/query``: a page of the user's sessions that pass ``filters``."""

    user_id: UserId
    filters: Filters = None
    limit: Limit = None
    cursor: str | None = Field(default=None, min_length=1, max_length=2048, description="a listed session's")
    order: Order = "oldest"


class DeleteMatching(_Request):
    """``POST /v1/sessions/delete``: delete the user's sessions that pass ``filters`` (all in one transaction)."""

    user_id: UserId
    filters: dict[str, Any] = Field(min_length=1, description="which sessions (an empty filter is refused)")


class ExpireRequest(_Request):
    """``POST /v1/expire``: delete what has expired, of one user or (an admin key) of every user."""

    user_id: UserId | None = Field(default=None, description="one user's sessions; default every user's (admin key)")
    before: Timestamp | None = Field(default=None, description=(
        "also the sessions older than this; default the retention period the server was started with"))


class ExpireOut(BaseModel):
    """How many sessions expired and were deleted."""

    expired_sessions: int


class UserRow(BaseModel):
    """A user the caller may see."""

    user_id: str
    sessions: int


class UserList(BaseModel):
    """The users the caller may see."""

    users: list[UserRow]


class DeleteResult(BaseModel):
    """What a delete removed."""

    user_id: str
    deleted_sessions: int


class AnswerRequest(_Request):
    """``POST /v1/answer`` (needs a server started with an LLM)."""

    user_id: UserId
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    question_date: str | None = Field(default=None, max_length=64)
    k: int = Field(default=5, ge=1, le=MAX_K)
    use_filter: bool = True


class MemoryOut(BaseModel):
    """A memory shown to the model."""

    session_id: str
    timestamp: str | None
    text: str


class AnswerOut(BaseModel):
    """An answer with the sessions it cites and the LLM use."""

    answer: str
    sources: list[str]
    memories: list[MemoryOut]
    removed: list[str]
    llm: dict[str, float]


class FactOut(BaseModel):
    """A knowledge-graph fact with its validity interval."""

    id: int
    subject: str
    relation: str
    object: str
    valid_at: str | None
    invalid_at: str | None
    created_at: str | None
    episodes: list[str]
    invalidated_by: int | None


class FactList(BaseModel):
    """The user's facts."""

    facts: list[FactOut]


class CommunityOut(BaseModel):
    """A community of entities with its summary; ``by_llm`` false for the extractive fallback."""

    members: list[str]
    summary: str
    by_llm: bool


class CommunityList(BaseModel):
    """The user's entity communities."""

    communities: list[CommunityOut]


class RetryRequest(_Request):
    """``POST /v1/facts/retry``: retry a user's failed fact extractions."""

    user_id: UserId


class RetryOut(BaseModel):
    """Messages whose extraction is still pending after the retry."""

    pending: int


class _ExperienceScope(_Request):
    """Whose experience: exactly one of ``agent_id`` and ``user_id`` (400 otherwise)."""

    agent_id: AgentId | None = None
    user_id: UserId | None = None


class TemplateOut(BaseModel):
    """A Buffer-of-Thoughts thought template (see :mod:`memgas.experience.thoughts`)."""

    id: int
    task_type: str
    description: str
    steps: list[str]
    source: dict[str, Any] | None = Field(default=None, description="the solved problem it was distilled from")
    scrubbed: list[str] | None = Field(default=None, description="source values replaced by placeholders")
    created_at: str


class TemplateList(BaseModel):
    """The scope's templates, oldest first."""

    templates: list[TemplateOut]


class TemplateMatchRequest(_ExperienceScope):
    """``POST /v1/templates/match``: templates for an already distilled problem description."""

    description: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description=(
        "a distilled description of the problem (its general kind, without its particular values)"))
    k: int = Field(default=1, ge=1, le=MAX_K)
    min_similarity: MinSimilarity = None


class TemplateMatch(BaseModel):
    """A template with the cosine similarity of its description to the query."""

    template: TemplateOut
    similarity: float


class TemplateMatches(BaseModel):
    """The best templates first."""

    matches: list[TemplateMatch]


#: A problem or solution given to Buffer of Thoughts (its prompts hold it whole).
ProblemText = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]


class TemplateSolveRequest(_ExperienceScope):
    """``POST /v1/templates/solve``: solve a problem with the scope's best template (needs the server's LLM)."""

    problem: ProblemText
    learn: bool = Field(default=False, description="learn a template from the solution afterwards")


class DistilledProblem(BaseModel):
    """What Buffer of Thoughts' problem distiller made of the problem (its description is what is matched)."""

    key_information: list[str]
    constraints: list[str]
    task_type: str
    description: str


class TemplateDraft(BaseModel):
    """A template as the template writer wrote it (stored as is when ``status`` is ``added``)."""

    task_type: str
    description: str
    steps: list[str]
    scrubbed: list[str] | None = Field(default=None, description="source values replaced by placeholders")


class TemplateLearned(BaseModel):
    """What learning did: ``added`` (``id``, ``template``), ``duplicate`` of a stored template (``duplicate_of``,
    its cosine ``score``; nothing stored) or ``pending`` (``id``, ``error``: the LLM failed, so the raw problem and
    solution are kept until ``distill_pending`` turns them into a template)."""

    status: Literal["added", "duplicate", "pending"]
    id: int | None = None
    template: TemplateDraft | None = None
    duplicate_of: int | None = None
    score: float | None = None
    error: str | None = None
    llm: dict[str, float] | None = Field(default=None, description="the LLM use (of the learning step alone)")


class TemplateLearnRequest(_ExperienceScope):
    """``POST /v1/templates/learn``: write a template from a solved problem (needs the server's LLM)."""

    problem: ProblemText
    solution: ProblemText
    answer: str | None = Field(default=None, min_length=1, max_length=MAX_QUERY_CHARS,
                               description="the final answer, when apart from the solution")


class TemplateSolved(BaseModel):
    """A solved problem: the answer, the template used (``None``: solved without one) and what learning did."""

    answer: str
    reasoning: str
    distilled: DistilledProblem | None = Field(description="None when the distiller failed (see distill_error)")
    distill_error: str | None = None
    template: TemplateMatch | None = Field(description="the template used, with its cosine to the distilled problem")
    learned: TemplateLearned | None = Field(description="with learn: the template learned from this solution")
    llm: dict[str, float]


class PrincipleIn(_ExperienceScope):
    """``POST /v1/principles``: a principle written by hand."""

    situation: str = Field(min_length=1, max_length=2000, description="when it applies: 'When ...' (what is matched)")
    action: str = Field(min_length=1, max_length=2000, description="what to do")
    avoid: str = Field(min_length=1, max_length=2000, description="what not to do")
    reason: str = Field(min_length=1, max_length=2000, description="why")


class PrincipleOut(BaseModel):
    """A PRINCIPLES strategy principle (see :mod:`memgas.experience.principles`)."""

    id: int
    situation: str
    action: str
    avoid: str
    reason: str
    support: int = Field(description="how many contrasts (or additions) produced it")
    origin: dict[str, Any]


class PrincipleList(BaseModel):
    """The scope's principles, oldest first."""

    principles: list[PrincipleOut]


class PrincipleAdded(BaseModel):
    """The stored principle: the new one, or the near-duplicate whose ``support`` grew instead."""

    added: bool
    principle: PrincipleOut


class PrincipleRecallRequest(_ExperienceScope):
    """``POST /v1/principles/recall``: the principles whose situations are nearest a conversation's context."""

    context: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="the conversation so far, as text")
    k: int = Field(default=3, ge=1, le=MAX_K)
    min_similarity: MinSimilarity = None


class PrincipleMatch(BaseModel):
    """A principle with the cosine similarity of its situation to the context."""

    principle: PrincipleOut
    similarity: float


class PrincipleMatches(BaseModel):
    """The best principles first."""

    matches: list[PrincipleMatch]


class ItemDeleted(BaseModel):
    """A deleted experience item."""

    id: int
    deleted: bool


class ErrorBody(BaseModel):
    """What went wrong: a stable ``code`` and a readable ``message``."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """Every error response: ``{"error": {"code", "message"}, "request_id"}``."""

    error: ErrorBody
    request_id: str


class Health(BaseModel):
    """``/healthz`` and ``/readyz``."""

    status: Literal["ok", "unavailable"]
    detail: str | None = None
