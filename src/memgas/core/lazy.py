"""Lazy exports for packages (PEP 562): a public name's submodule is imported on first access.

``memgas`` and ``memgas.methods`` export classes whose modules pull in numpy, scipy, onnxruntime or a
method's own dependencies; importing them lazily keeps ``memgas --help`` and ``import memgas.memory`` cheap.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: dict[str, Any],
                 modules: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names live in submodules.

    Args:
        package: the package's ``__name__``.
        namespace: its ``globals()``; a name is cached there once imported.
        modules: each exported name and the module that defines it, relative to ``package`` (``"sub"``
            or ``".sub"``; ``"..sibling.mod"`` for a module of a sibling package).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.
    """

    def getattr_(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if module.startswith(".") else f".{module}", package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(modules))

    return getattr_, dir_
