"""Deprecated alias of the data types, errors and validation that ``memgas.model`` held: they live in
:mod:`memgas.core.types`, :mod:`memgas.core.errors` and :mod:`memgas.core.validate` now (the types and errors
users need are also names of :mod:`memgas`). Kept for one release; importing it warns.
"""

from __future__ import annotations

import warnings

from memgas.core import errors, types, validate

warnings.warn("memgas.model is deprecated: import from memgas (Hit, the errors), memgas.core.types, "
              "memgas.core.errors or memgas.core.validate", DeprecationWarning, stacklevel=2)

__all__ = [*types.__all__, *errors.__all__, *validate.__all__]

globals().update({name: getattr(module, name) for module in (types, errors, validate) for name in module.__all__})
