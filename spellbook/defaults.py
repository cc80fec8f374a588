"""The defaults that settings (config.py) and the start-up tricks (startup/) both read, written once.

Standard library only, and no ``pathlib``: the stdio front reads the cache folder from here before
anything else of Spellbook is imported (startup/front.py). Settings builds its defaults from the
same names, so a changed default changes both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV_PREFIX = "SPELLBOOK_"  # every setting's variable: SPELLBOOK_<NAME>, any case
DEFAULT_EMBEDDER = "use-m3"  # the embedder's name in embedders/registry.py
INDEX_DIRNAME = ".spellbook"  # the derived index's folder in the vault
CACHE_DIRNAME = "spellbook"  # under the user's cache folder: files derived from installed packages


def from_environment(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``SPELLBOOK_<name>`` as settings read it (the variable's name in any case; empty is unset)."""
    wanted = ENV_PREFIX + name.upper()
    for key, value in (os.environ if environ is None else environ).items():
        if value and key.upper() == wanted:
            return value
    return None


def default_cache_dir() -> str:
    """The cache folder when none is configured: ``$XDG_CACHE_HOME/spellbook``, else ``~/.cache/spellbook``."""
    user_cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(user_cache, CACHE_DIRNAME)


def cache_dir() -> str:
    """``Settings.cache_dir`` as the environment sets it, read before settings exist."""
    configured = from_environment("cache_dir")
    return os.path.expanduser(configured) if configured else default_cache_dir()
