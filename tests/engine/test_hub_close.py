"""The hub closed while its engine is still opening: a client that leaves during start-up."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.server.hub import Hub


def test_close_as_the_maintenance_thread_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() may run at any point of the opening (the stdio server opens the engine at once when
    its handshake was answered early, and a client can leave within a second); here, just as the
    opening starts the maintenance thread."""
    (tmp_path / "vault").mkdir()
    hub = Hub(Settings(vault=tmp_path / "vault", embedder="hashing", watch=False), reconcile_on_open=False)
    errors: list[BaseException] = []
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name == "spellbook-maintain" and not errors:
            try:
                hub.close()  # the client left just now
            except BaseException as exc:
                errors.append(exc)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    hub.start(background=False)
    assert not errors
    assert hub.engine is not None
    hub.close()  # a second close is harmless
