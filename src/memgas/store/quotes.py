"""What a context reads of the sessions it quotes, without reading them whole: a unit's messages, a session's
metadata and who speaks in it. The :class:`QuoteStore` interface, used only by :mod:`memgas.context.build`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

from memgas.core.types import Message

__all__ = ["QuoteStore"]


class QuoteStore(ABC):
    """Parts of a user's sessions, read by their keys (a session may hold tens of thousands of words, of which a
    context quotes a turn)."""

    @abstractmethod
    def unit_messages(self, user_id: str, ids: Sequence[int]) -> dict[int, tuple[int, tuple[Message, ...]]]:
        """For each of the user's units ``ids`` that exists, by id: the position in its session of the first message
        its text is made of and those messages (a turn unit's: its turn's), reading no other message; ``(-1, ())``
        for a unit whose text is kept as it is (made of no messages)."""

    @abstractmethod
    def session_metadata(self, user_id: str, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The metadata of each of the user's sessions ``session_ids`` that exists, by id (no message read)."""

    @abstractmethod
    def session_speakers(self, user_id: str, session_ids: Sequence[str]
                         ) -> dict[str, tuple[dict[str, Any], tuple[tuple[str, str | None], ...]]]:
        """For each of the user's sessions ``session_ids`` that exists, by id: its metadata and each message's
        ``(role, name)`` in order (who speaks in it, without what was said)."""
