"""What an agent reads: context blocks built from the evidence each turn carries, headed by the user's standing
instructions and preferences (:func:`build_context`, :class:`Profiles`)."""

from memgas.context.assemble import ContextOptions
from memgas.context.build import build_context, context_mode
from memgas.context.profile import Profiles, StandingStatement

__all__ = ["build_context", "context_mode", "ContextOptions", "Profiles", "StandingStatement"]
