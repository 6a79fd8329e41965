"""One router per resource: sessions, users, search (with answer and facts), experience (templates and
principles), and operations."""
