"""Answers of whole-vault reads (``analyze_knowledge``, ``graph``), kept until the index changes.

At 10,000 notes ``analyze_knowledge`` takes ~0.6 s and ``graph`` ~0.4 s (bench/bench_web.py),
too slow for a page a person clicks through. Both depend only on the catalog (and, for stale
notes, on the day), so an answer is kept, per scope and arguments, until the catalog's change
counter moves (``Catalog.changes()``: any file indexed, touched or removed) or ``TTL_SECONDS``
pass. ``refresh()``, run from the owner's maintenance loop, recomputes in the background the
answers someone asked for in the last ``WARM_SECONDS`` once the index has changed, at most every
``REFRESH_SECONDS``, so the next page view finds them ready. Answers are shared, not copied:
callers must not change them.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spellbook.scope import Scope

if TYPE_CHECKING:
    from spellbook.engine.access import Access

TTL_SECONDS = 300.0
WARM_SECONDS = 300.0
REFRESH_SECONDS = 5.0
MAX_ENTRIES = 32


@dataclass
class _Entry:
    compute: Callable[[], Any]
    scope: Scope
    mark: int
    made: float
    used: float
    value: Any


class Memo:
    def __init__(self, changes: Callable[[], int], access: Access) -> None:
        self.changes = changes
        self.access = access  # the running call's scope keys an answer; a refresh runs in it again
        self._entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        name: str,
        args: tuple,
        compute: Callable[[], Any],
        stale: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> Any:
        """The kept answer of ``name(*args)`` in the running call's scope, or ``compute()``'s.
        With ``stale`` (a page a person clicks through), a kept answer the index has moved on from
        is returned at once, through ``stale`` (which drops what no longer exists) and with
        ``stale_seconds`` (its age); the owner's ``refresh`` recomputes it within a few seconds."""
        scope = self.access.scope()
        key = (name, scope, args)
        now, mark = time.monotonic(), self.changes()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.mark == mark and now - entry.made < TTL_SECONDS:
                entry.used = now
                self._entries.move_to_end(key)
                return entry.value
            if entry is not None and stale is not None:
                entry.used = now  # refresh() recomputes what was used lately
                value, age = entry.value, round(now - entry.made, 1)
            else:
                value = None
        if value is not None:
            return {**stale(value), "stale_seconds": age}
        value = compute()
        with self._lock:
            self._entries[key] = _Entry(compute, scope, mark, now, now, value)
            self._entries.move_to_end(key)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)
        return value

    def refresh(self) -> int:
        """Recompute the recently used answers the index has changed under; returns how many."""
        now, mark = time.monotonic(), self.changes()
        with self._lock:
            due = [
                (key, e)
                for key, e in self._entries.items()
                if now - e.used < WARM_SECONDS
                and (e.mark != mark or now - e.made >= TTL_SECONDS)
                and now - e.made >= REFRESH_SECONDS
            ]
        for key, entry in due:
            with self.access.within(entry.scope):
                value = entry.compute()
            with self._lock:
                if key in self._entries:
                    self._entries[key] = _Entry(entry.compute, entry.scope, mark, now, entry.used, value)
        return len(due)
