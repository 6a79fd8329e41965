"""Reading structured output from a model: thinking blocks stripped, JSON extracted from prose or fences,
and validated against the small JSON-schema subset memgas's prompts use.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

__all__ = ["strip_think", "extract_json", "validate_json"]

# ----------------------------------------------------------------------------- JSON output


_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_END = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def strip_think(text: str) -> str:
    """``text`` without reasoning blocks (``<think>…</think>``, also ``<thinking>``).

    A closing tag without its opening one (the template opened it) drops everything before it; an
    opening tag never closed (the answer was cut off while thinking) drops everything after it.
    """
    text = _THINK_BLOCK.sub("", text)
    ends = list(_THINK_END.finditer(text))
    if ends:
        text = text[ends[-1].end() :]
    opened = _THINK_OPEN.search(text)
    return (text[: opened.start()] if opened else text).strip()


def extract_json(text: str) -> Any:
    """The first JSON object or array in a model's text.

    Tries, in order: the whole text (after :func:`strip_think`), the inside of a fenced code block,
    then every ``{`` or ``[`` position with :meth:`json.JSONDecoder.raw_decode` (so prose around the
    JSON, or a second object after it, does not matter).

    Raises:
        ValueError: no JSON object or array is in the text.
    """
    text = strip_think(text)
    candidates = [text, *(m.group(1) for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        return value
    raise ValueError("the reply holds no JSON object")


_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
}


def validate_json(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Check ``value`` against the JSON-schema subset memgas uses; return the problems (empty = valid).

    Supported keywords: ``type``, ``properties``, ``required``, ``additionalProperties: false``,
    ``items``, ``minItems``, ``maxItems``, ``minLength``, ``maxLength``, ``enum``. Booleans are not
    integers here, unlike in Python.
    """
    kind = schema.get("type")
    if kind is not None:
        expected = _TYPES[kind]
        if not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool)):
            return [f"{path}: expected {kind}, got {type(value).__name__}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{path}: missing '{key}'" for key in schema.get("required", ()) if key not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{path}: unexpected '{key}'" for key in value if key not in props]
        for key, sub in props.items():
            if key in value:
                errors += validate_json(value[key], sub, f"{path}.{key}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate_json(item, schema["items"], f"{path}[{i}]")
    elif isinstance(value, str):
        if len(value.strip()) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    return errors
