"""The switch: which start-up tricks run in this process (spellbook/startup/__init__.py lists them).

``SPELLBOOK_PLAIN_START=1`` turns every one off; a comma-separated list of their names turns those
off alone (to measure one). Unset, the tricks run when the pinned packages whose insides they know
(``WRITTEN_AGAINST``, pinned in pyproject.toml) are installed at those versions, and none runs
otherwise: an upgrade starts plain, never breaks. Read once a process; standard library only.
"""

from __future__ import annotations

import os
import sys
import threading

SWITCH = "SPELLBOOK_PLAIN_START"
TRICKS = ("front", "deferred", "chroma_local", "heap", "blas")
# The pinned packages whose insides the tricks know: (import name, distribution, version).
WRITTEN_AGAINST = (
    ("mcp", "mcp", "2.3.0"),
    ("chromadb", "chromadb", "1.5.9"),
)
_NO = ("", "0", "false", "no", "off")

_lock = threading.Lock()
_state: tuple[frozenset[str], str | None] | None = None  # (tricks off, why), once a process


def on(trick: str) -> bool:
    """Whether ``trick`` (one of ``TRICKS``) runs in this process."""
    return trick not in _decided()[0]


def plain() -> bool:
    """Whether every trick is off."""
    return len(_decided()[0]) == len(TRICKS)


def reason() -> str | None:
    """Why tricks are off (the switch, or the versions that differ); None when all run."""
    return _decided()[1]


def mismatched(path: list[str] | None = None) -> list[str]:
    """The pinned packages not installed at the version the tricks were written against, as
    ``"chromadb 1.6.0 (tricks written for 1.5.9)"``. A package is read where Python would import it
    from (the first folder on ``path`` that holds it as a regular package), and its version from the name of the wheel's
    ``<distribution>-<version>.dist-info`` folder beside it: a few ``stat`` calls, where
    ``importlib.metadata`` takes milliseconds."""
    found = []
    for name, distribution, version in WRITTEN_AGAINST:
        for entry in sys.path if path is None else path:
            folder = entry or "."
            if not os.path.isfile(os.path.join(folder, name, "__init__.py")):
                continue  # a folder of that name without it (a namespace) loses to a package further on
            if not os.path.isdir(os.path.join(folder, f"{distribution}-{version}.dist-info")):
                found.append(f"{name} {_installed(folder, distribution)} (tricks written for {version})")
            break
        else:
            found.append(f"{name} not found (tricks written for {version})")
    return found


def _installed(folder: str, distribution: str) -> str:
    prefix = f"{distribution}-"
    try:
        versions = [
            n[len(prefix) : -len(".dist-info")]
            for n in os.listdir(folder)
            if n.lower().startswith(prefix.lower()) and n.endswith(".dist-info")
        ]
    except OSError:
        versions = []
    return ", ".join(sorted(versions)) or "of unknown version"


def _decided() -> tuple[frozenset[str], str | None]:
    global _state
    if _state is None:
        with _lock:
            if _state is None:
                _state = _decide(os.environ.get(SWITCH, ""))
    return _state


def _decide(value: str) -> tuple[frozenset[str], str | None]:
    value = value.strip().lower()
    if value not in _NO:
        names = frozenset(n.strip() for n in value.split(","))
        if names <= set(TRICKS):
            return names, f"{SWITCH}={value}"
        return frozenset(TRICKS), f"{SWITCH}={value}"  # 1, true, or a word that names no trick: all off
    different = mismatched()
    if different:
        return frozenset(TRICKS), "installed " + "; ".join(different)
    return frozenset(), None
