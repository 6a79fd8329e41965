"""A user who moved: an older session and a newer one that states the same thing anew (the current state), and
one on another subject. The shared sample of the current-first tests (``current_first``, ``--set``)."""

from __future__ import annotations

#: (session id, timestamp, what the user said, the reply)
SESSIONS = [
    ("march", "2024-03-02T10:00:00", "I live in the Buckman neighbourhood of Portland, near the bakery on Belmont; the "
                                     "Buckman neighbourhood is lovely.", "Buckman is a great neighbourhood."),
    ("april", "2024-04-10T10:00:00", "We are moving to the Sellwood neighbourhood of Portland next week, to live by "
                                     "the river.", "Sellwood is a quiet neighbourhood."),
    ("games", "2024-05-01T10:00:00", "My favourite board game is Terraforming Mars.", "A great game."),
]
