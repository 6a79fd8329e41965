"""The compact text an MCP tool answers with by default (what the model reads, so tokens count): the few facts
that matter in a line each, no scores the model cannot use, no JSON punctuation. The same result stays
available whole as the tool's structured content, and as JSON text with ``format: "json"``.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["render", "TURN_CHARS"]

#: The most characters of a turn a search result shows (a turn's text, whole, is in the structured content).
TURN_CHARS = 400


def _date(stamp: str | None) -> str:
    return stamp[:16].replace("T", " ") if stamp else "undated"


def _counted(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _clip(text: str, width: int = TURN_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + "…"


def _search(r: Mapping[str, Any]) -> str:
    if not r["hits"]:
        return "(no memories found)"
    lines = []
    for n, h in enumerate(r["hits"], 1):
        lines.append(f"[{n}] session {h['session_id']} · {_date(h['timestamp'])} · relevance {h['relevance']:.2f}"
                     f"{_scope(h)}")
        lines += [f"  {_clip(t['text'])}" for t in h["turns"][:2]]
    return "\n".join(lines)


def _session(r: Mapping[str, Any]) -> str:
    head = f"session {r['session_id']} · {_date(r['timestamp'])}"
    return "\n".join([head, *(f"{m.get('name') or m['role']}: {m['content']}" for m in r["messages"])])


def _scope(row: Mapping[str, Any]) -> str:
    return "".join(f" · {name} {row[key]}" for key, name in (("agent_id", "agent"), ("run_id", "run")) if row.get(key))


def _sessions(r: Mapping[str, Any]) -> str:
    if not r["sessions"]:
        return "(no sessions yet)"
    lines = [f"{s['session_id']} · {_date(s['timestamp'])} · {_counted(s['messages'], 'message')}{_scope(s)}"
             + (f" · {_clip(s['preview'], 80)}" if s.get("preview") else "") for s in r["sessions"]]
    if r.get("next_cursor"):
        lines.append(f"(more: cursor {r['next_cursor']})")
    return "\n".join(lines)


def _added(r: Mapping[str, Any]) -> str:
    verb = "created" if r["created"] else "appended to"
    return f"{verb} session {r['session_id']}: {_counted(r['messages'], 'message')}"


def _deleted(r: Mapping[str, Any]) -> str:
    return f"deleted {_counted(r['deleted_sessions'], 'session')} of {r['user_id']}"


def _principles(r: Mapping[str, Any]) -> str:
    if not r["matches"]:
        return "(no principles for this situation)"
    return "\n".join(f"- when {m['principle']['situation']}: {m['principle']['action']}; avoid "
                     f"{m['principle']['avoid']} ({m['similarity']:.2f})" for m in r["matches"])


def _templates(r: Mapping[str, Any]) -> str:
    if not r["matches"]:
        return "(no templates for this kind of problem)"
    out = []
    for m in r["matches"]:
        t = m["template"]
        out.append(f"{t['task_type']}: {t['description']} ({m['similarity']:.2f})")
        out += [f"  {i}. {step}" for i, step in enumerate(t["steps"], 1)]
    return "\n".join(out)


def _profile(r: Mapping[str, Any]) -> str:
    if not r["statements"]:
        return "(no standing instructions or preferences)"
    return "\n".join(f"- [{_date(st['timestamp'])} · {st['session_id']}] {st['kind']}"
                     f"{' (' + st['subject'] + ')' if st.get('subject') not in (None, 'other') else ''}: "
                     f"{st['who'] + ': ' if st.get('who') else ''}{st['text']}" for st in r["statements"])


def _timeline(r: Mapping[str, Any]) -> str:
    if not r["sessions"]:
        return "(nothing stored yet, or nothing about this topic)"
    out = []
    for d in r["sessions"]:
        out.append(f"session {d['session_id']} · {_date(d['timestamp'])}")
        out += [f"  - #{i['message']} {i['speaker']}: {i['text']}" for i in d["items"]]
    return "\n".join(out)


def _answer(r: Mapping[str, Any]) -> str:
    return f"{r['answer']}\n(sources: {', '.join(r['sources']) or 'none'})"


_RENDER = {"search_memory": _search, "get_session": _session, "list_sessions": _sessions, "add_memory": _added,
           "delete_memory": _deleted, "recall_principles": _principles, "match_templates": _templates,
           "answer": _answer, "get_profile": _profile, "get_timeline": _timeline}


def render(tool: str, result: Mapping[str, Any]) -> str:
    """The compact text of ``tool``'s result (its structured content, as JSON-ready values)."""
    return _RENDER[tool](result)
