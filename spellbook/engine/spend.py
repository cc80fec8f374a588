"""The session summariser's token spend for the day, kept in the index folder (``summariser.json``).

The capture processes write it (sessions/summariser.py), one at a time under a lock file, so two
captures cannot both spend what is left; ``stats`` and the web view's overview read it. A day is a
UTC day: the count starts again at 0 when the date in the file is not today's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spellbook.files import atomic_write

SPEND_FILE = "summariser.json"
DAILY_TOKENS = 50_000  # most prompt+completion tokens the summariser spends per UTC day
LOCK_FILE = "summariser.lock"


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def spent(index_path: Path, day: str | None = None) -> dict[str, Any]:
    """The day's spend: {"day", "tokens", "calls", "refused", "fallbacks"} (zeros for a new day)."""
    day = day or today()
    fresh = {"day": day, "tokens": 0, "calls": 0, "refused": 0, "fallbacks": 0}
    try:
        data = json.loads((index_path / SPEND_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return fresh
    if not isinstance(data, dict) or data.get("day") != day:
        return fresh
    return {key: data.get(key, 0) if key != "day" else day for key in fresh}


@contextlib.contextmanager
def ledger(index_path: Path) -> Iterator[dict[str, Any]]:
    """The day's spend, held under the lock until the block ends, then written back (atomically)."""
    index_path.mkdir(parents=True, exist_ok=True)
    fd = os.open(index_path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.name == "posix":
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        entry = spent(index_path)
        yield entry
        atomic_write(index_path / SPEND_FILE, json.dumps(entry))
    finally:
        os.close(fd)
