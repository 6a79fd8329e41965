"""One router per resource: sessions, users, search (with answer and facts), and operations."""
