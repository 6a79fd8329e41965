"""memgas: long-term memory for LLM agents (multi-granularity association and selection)."""

__version__ = "0.1.0"
