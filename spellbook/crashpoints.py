"""Test hook: die by SIGKILL at a chosen point of the write path, to prove crash safety there.

``SPELLBOOK_TEST_CRASH_AT=<point>[:<n>]`` (read once, at import) makes the process kill itself
with SIGKILL the n-th time (default 1st) it passes ``crash_point(<point>)``. Unset, a call costs
one comparison. The points (tests/e2e/test_crash.py kills the owner at each, then checks that the
next start brings the index level with the vault and loses no acknowledged write):

  file-written         a note file was renamed into place; nothing indexed yet
  vectors-written      its chunk vectors are handed to the vector writer; the catalog not yet
  vectors-behind       the vector writer is about to put vectors in Chroma (the note may be acknowledged)
  catalog-transaction  inside the catalog transaction, every row written, before COMMIT
  git-commit           inside a git commit of a tool's write (the index already done)
  sync-merged          a sync built its merge commit, not yet pushed (git/sync.py)
  sync-moved           a sync moved HEAD to what it merged, no file written yet
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "file-written",
    "vectors-written",
    "vectors-behind",
    "catalog-transaction",
    "git-commit",
    "sync-merged",
    "sync-moved",
)

_point, _, _nth = os.environ.get("SPELLBOOK_TEST_CRASH_AT", "").partition(":")
_left = int(_nth or 1) if _point else 0


def crash_point(name: str) -> None:
    """SIGKILL this process here if ``SPELLBOOK_TEST_CRASH_AT`` names this point (and its count is up)."""
    global _left
    if name != _point:
        return
    _left -= 1
    if _left <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
