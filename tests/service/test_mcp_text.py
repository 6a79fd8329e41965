"""The MCP tools' compact text (``memgas.service.mcp_text``): counts read as English ("1 message", "2 messages")."""

from __future__ import annotations

from memgas.service.mcp_text import render


def row(messages: int) -> dict[str, object]:
    return {"session_id": "s", "timestamp": "2024-05-01T10:00:00", "messages": messages, "preview": "hello",
            "agent_id": None, "run_id": None}


def test_counts_are_singular_for_one_and_plural_otherwise() -> None:
    listed = render("list_sessions", {"sessions": [row(1), row(2)]}).splitlines()
    assert " · 1 message · " in listed[0] and " · 2 messages · " in listed[1]
    assert render("add_memory", {"session_id": "s", "messages": 1, "created": True}).endswith(": 1 message")
    assert render("delete_memory", {"user_id": "u", "deleted_sessions": 1}) == "deleted 1 session of u"
    assert render("delete_memory", {"user_id": "u", "deleted_sessions": 0}) == "deleted 0 sessions of u"


def test_a_profile_line_names_its_speaker_where_the_message_did() -> None:
    said = {"kind": "preference", "text": "I'm allergic to cats", "session_id": "g", "message": 0,
            "timestamp": "2024-05-01T10:00:00", "always": False}
    lines = render("get_profile", {"statements": [{**said, "who": "Alice"}, {**said, "who": None}]}).splitlines()
    assert lines == ["- [2024-05-01 10:00 · g] preference: Alice: I'm allergic to cats",
                     "- [2024-05-01 10:00 · g] preference: I'm allergic to cats"]
