"""Packages a stdio server imports through the MCP SDK and never runs, left unloaded until used.

The SDK's server modules import their HTTP transports' dependencies at the top (``sse_starlette``,
and through it ``uvicorn``, ``click`` and ``watchfiles``) and those of request-state encryption
(``cryptography``, a 14 MB native library), whether the server speaks HTTP or not. A stdio server
never calls them (its request-state codec needs no cryptography: ``NoRequestState`` in
server/tools.py); measured here they held ~11 MB of its memory. ``defer`` (standard library only,
called before the SDK is imported) gives such a process stand-ins instead: importing a deferred
package yields an empty module, and each name taken from it is a stand-in for the real object.

The first time any stand-in is used (called, an attribute read, ``isinstance``, a base class, a
type expression such as ``X | None``), every deferred package is imported for real and each
stand-in bound in a module's namespace is replaced by the real object (``load_deferred``), so a
later use, ``except`` clauses included, meets the real one. A process that needs them pays the
import then, not at start.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Iterable
from typing import Any

HTTP_ONLY = ("sse_starlette", "uvicorn", "cryptography")  # what `spellbook serve` over stdio never runs

_lock = threading.RLock()
_finder: _Finder | None = None


def defer(packages: Iterable[str] = HTTP_ONLY) -> bool:
    """Import ``packages`` (top-level names) as stand-ins from now on; False (nothing done) if one of
    them is imported already or deferral is on."""
    global _finder
    names = frozenset(packages)
    with _lock:
        if _finder is not None or any(name.split(".")[0] in names for name in list(sys.modules)):
            return False
        _finder = _Finder(names)
        sys.meta_path.insert(0, _finder)
        return True


def deferred() -> list[str]:
    """The modules imported as stand-ins so far."""
    return sorted(name for name, module in list(sys.modules.items()) if type(module) is _DeferredModule)


def load_deferred() -> None:
    """Import the deferred packages for real, and put the real objects where stand-ins were bound."""
    global _finder
    with _lock:
        finder, _finder = _finder, None
        if finder is None:
            return
        sys.meta_path.remove(finder)
        stubs = deferred()
        for name in stubs:
            del sys.modules[name]
        for name in stubs:  # parents first (sorted)
            importlib.import_module(name)
        for module in list(sys.modules.values()):
            namespace = getattr(module, "__dict__", None)
            if not isinstance(namespace, dict) or type(module) is _DeferredModule:
                continue
            for key, value in list(namespace.items()):
                if type(value) is _StandIn:
                    namespace[key] = value.real()
                elif type(value) is _DeferredModule:
                    namespace[key] = sys.modules[value.__name__]


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, packages: frozenset[str]) -> None:
        self.packages = packages

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in self.packages:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _DeferredModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # a package: its submodules come here too


class _DeferredModule(types.ModuleType):
    """A deferred package or module: each public name is a stand-in."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _StandIn(self.__name__, name)


class _StandIn:
    """``module.name`` until first used; then the real object (see the module docstring)."""

    __slots__ = ("_module", "_name")

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    def real(self) -> Any:
        load_deferred()
        return getattr(importlib.import_module(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.real()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self.real())

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, self.real())

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self.real(),)

    def __getitem__(self, item: Any) -> Any:
        return self.real()[item]

    def __or__(self, other: Any) -> Any:
        return self.real() | other

    def __ror__(self, other: Any) -> Any:
        return other | self.real()

    def __repr__(self) -> str:
        return f"<deferred {self._module}.{self._name}>"
