"""The transcripts agents send, read as memgas messages (``{"role", "content", "name"?}``).

Accepted, and mixed freely in one list:

- memgas's own messages (``role`` user / assistant / system / tool, ``content`` a string, ``name`` or
  ``speaker`` optional);
- OpenAI chat messages: ``content`` a string or a list of parts (``text``, ``input_text``, ``output_text``,
  ``refusal``; an image, audio or file part becomes ``[image]``, ``[audio]``, ``[file]``), ``name``,
  assistant ``tool_calls`` (or the older ``function_call``) with or without content, ``tool`` (and
  ``function``) results, and the ``developer`` role, read as ``system``;
- Anthropic messages: ``content`` a list of blocks (``text``; ``image`` and ``document`` as placeholders;
  ``tool_use``; ``tool_result``, which Anthropic sends inside a *user* message; ``thinking`` blocks are
  left out: they are the model's scratch work, not the conversation);
- a plain string: one user message.

Tool calls are kept and shown: an assistant message's calls become lines ``[tool call] name({...})`` of its
content. Tool results become messages of role ``tool``, named after the tool when the transcript says
which. A turn starts at each ``user`` message (:func:`memgas.core.types.group_turns`), so tool messages
are replies inside the turn: stored and shown with it, and never read as the user's own words (the
user-side text a turn is indexed by holds only ``user`` messages).

>>> to_messages("I moved to Lisbon")
[{'role': 'user', 'content': 'I moved to Lisbon'}]
>>> to_messages([{"role": "assistant", "content": None,
...               "tool_calls": [{"function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]}])
[{'role': 'assistant', 'content': '[tool call] weather({"city": "Lisbon"})'}]
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from memgas.core.errors import InvalidInputError

__all__ = ["to_messages"]

#: Roles of other formats read as one of memgas's.
_ROLE_ALIASES = {"developer": "system", "function": "tool", "human": "user", "ai": "assistant", "model": "assistant"}
#: Parts and blocks that carry no text, shown as a placeholder.
_PLACEHOLDERS = {"image": "[image]", "image_url": "[image]", "input_image": "[image]", "input_audio": "[audio]",
                 "audio": "[audio]", "file": "[file]", "input_file": "[file]", "document": "[document]"}
#: Parts and blocks whose text is the model's scratch work.
_SKIPPED = {"thinking", "redacted_thinking", "reasoning"}


def to_messages(raw: object) -> list[Any]:
    """Read a transcript (see the module docstring) as a list of memgas message dicts.

    What is not recognisably another format is passed through unchanged, so that validation
    (:func:`memgas.core.validate.make_session`) names what is wrong with it.
    """
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if isinstance(raw, Mapping) and "role" in raw:
        raw = [raw]
    if isinstance(raw, (bytes, Mapping)) or not isinstance(raw, Iterable):
        return raw  # type: ignore[return-value]  # refused by validation, with its message
    out: list[Any] = []
    for i, message in enumerate(raw):
        try:
            out.extend(_one(message) if isinstance(message, Mapping) else [message])
        except InvalidInputError as e:
            raise InvalidInputError(f"message {i}: {e}") from None
    return out


def _one(message: Mapping[str, Any]) -> list[Any]:
    role = message.get("role")
    role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
    content = message.get("content")
    calls = _tool_calls(message)
    if isinstance(content, str) and not calls and role == message.get("role"):
        return [message]  # memgas's own shape (or OpenAI's plain one): nothing to read
    name = message.get("name", message.get("speaker"))
    results: list[dict[str, Any]] = []
    if isinstance(content, list):
        texts = []
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_result":
                results.append(_message("tool", _text(block.get("content")), None))
            elif kind == "tool_use":
                calls.append(_call(block.get("name"), block.get("input")))
            elif kind not in _SKIPPED:
                texts.append(_text([block]))
        content = "\n".join(t for t in texts if t)
    elif content is not None and not isinstance(content, str):
        return [message]  # not a transcript format: validation says why
    if role == "tool" and isinstance(content, str) and not results:
        return [_message("tool", content, name)]
    text = "\n".join(part for part in ((content or "").strip(), *calls) if part)
    return results + ([_message(role, text, name)] if text or not results else [])


def _message(role: Any, content: str, name: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **({"name": name} if name else {})}


def _tool_calls(message: Mapping[str, Any]) -> list[str]:
    calls = []
    listed = message.get("tool_calls") or ()
    if not isinstance(listed, (list, tuple)):
        raise InvalidInputError(f"tool_calls must be a list of calls, got {type(listed).__name__}")
    for i, call in enumerate(listed):
        function = call.get("function", call) if isinstance(call, Mapping) else {}
        if not isinstance(function, Mapping):
            raise InvalidInputError(f"tool_calls[{i}].function must be an object with a name and arguments, "
                                    f"got {type(function).__name__}")
        calls.append(_call(function.get("name"), function.get("arguments")))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        calls.append(_call(legacy.get("name"), legacy.get("arguments")))
    return calls


def _json(value: Any, what: str) -> str:
    """``value`` as JSON text, or a one-line :class:`InvalidInputError` naming ``what`` when JSON cannot hold it."""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(f"{what} must hold JSON values (strings, numbers, lists, objects): {detail}") from None


def _call(name: Any, arguments: Any) -> str:
    if not isinstance(arguments, str):
        arguments = _json(arguments if arguments is not None else {}, "a tool call's arguments")
    return f"[tool call] {name or 'tool'}({arguments})"


def _text(content: Any) -> str:
    """The text of a content string, or of a list of parts / blocks (placeholders for what holds none)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else _json(content, "a message's content part")
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if kind in _SKIPPED:
                continue
            text = part.get("text", part.get("refusal"))
            texts.append(text if isinstance(text, str) else _PLACEHOLDERS.get(str(kind), f"[{kind or 'part'}]"))
    return "\n".join(t for t in texts if t)
