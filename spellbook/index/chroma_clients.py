"""Chroma's two clients: of the embedded Chroma in a folder, and of a Chroma server.

The embedded one is ``LocalChroma`` (spellbook/startup/chroma_local.py: Chroma's Rust bindings
without the chromadb package), or with the start-up tricks off chromadb's own ``PersistentClient``,
which reads and writes the same files. A server (``chroma_url``) goes through chromadb's
``HttpClient``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spellbook.startup import switch


def embedded_client(folder: Path) -> Any:
    if switch.on("chroma_local"):
        from spellbook.startup.chroma_local import LocalChroma

        return LocalChroma(folder)
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    return chromadb.PersistentClient(
        path=str(folder), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=True)
    )


def http_client(url: str) -> Any:
    """A client of the Chroma server at ``url``, checked with a heartbeat: a wrong URL fails now,
    with the URL in the message, rather than on the first query."""
    from urllib.parse import urlparse

    import chromadb
    from chromadb.config import Settings as ChromaSettings

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"chroma_url must look like http://127.0.0.1:8000, not {url!r}")
    client = chromadb.HttpClient(
        host=parsed.hostname,
        port=parsed.port or (443 if parsed.scheme == "https" else 8000),
        ssl=parsed.scheme == "https",
        settings=ChromaSettings(anonymized_telemetry=False),
    )
    client.heartbeat()
    return client
