"""Chroma's clients: importing chromadb without gRPC, the embedded client (``embedded_client``) and
a client of a Chroma server (``http_client``).

chromadb imports OpenTelemetry's gRPC span exporter whenever it loads (in
``chromadb.telemetry.opentelemetry``), though it makes one only when Chroma's tracing is switched
on (``CHROMA_OTEL_GRANULARITY``). That import loads gRPC and protobuf: measured here, 12 MB of the
server's resident memory (the 17 MB ``cygrpc`` library and its modules) and ~50 ms of start-up,
for something Spellbook never uses. ``import_chromadb`` puts a stand-in module there first: it
hands out the real exporter, imported then, the moment Chroma makes one, and any other name of the
real module on first use, so Chroma's tracing still works when it is switched on.

With the tricks off (spellbook/startup/__init__.py), chromadb is imported as it comes and an
embedded Chroma is chromadb's own ``PersistentClient`` on the same folder.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

from spellbook.startup import switch

OTLP_GRPC = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


def import_chromadb() -> types.ModuleType:
    if switch.on("chroma_import") and "chromadb" not in sys.modules and OTLP_GRPC not in sys.modules:
        sys.modules[OTLP_GRPC] = _OnDemand(OTLP_GRPC)
    import chromadb

    return chromadb


def _real_module() -> types.ModuleType:
    if isinstance(sys.modules.get(OTLP_GRPC), _OnDemand):
        del sys.modules[OTLP_GRPC]
    return importlib.import_module(OTLP_GRPC)


class _Exporter:
    """Stands in for ``OTLPSpanExporter``: making one makes the real one."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _real_module().OTLPSpanExporter(*args, **kwargs)


class _OnDemand(types.ModuleType):
    """Stands in for the exporter's module until something uses it."""

    OTLPSpanExporter = _Exporter

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_real_module(), name)


def embedded_client(folder: Path) -> Any:
    """A client of the embedded Chroma in ``folder``: ``LocalChroma`` (chroma_local.py), or with
    that trick off chromadb's own, which reads and writes the same files."""
    if switch.on("chroma_local"):
        from spellbook.startup.chroma_local import LocalChroma

        return LocalChroma(folder)
    chromadb = import_chromadb()
    from chromadb.config import Settings as ChromaSettings

    return chromadb.PersistentClient(path=str(folder), settings=ChromaSettings(anonymized_telemetry=False,
                                                                                 allow_reset=True))


def http_client(url: str) -> Any:
    """A client of the Chroma server at ``url``, checked with a heartbeat: a wrong URL fails now,
    with the URL in the message, rather than on the first query."""
    from urllib.parse import urlparse

    chromadb = import_chromadb()
    from chromadb.config import Settings as ChromaSettings

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"chroma_url must look like http://127.0.0.1:8000, not {url!r}")
    client = chromadb.HttpClient(
        host=parsed.hostname, port=parsed.port or (443 if parsed.scheme == "https" else 8000),
        ssl=parsed.scheme == "https", settings=ChromaSettings(anonymized_telemetry=False),
    )
    client.heartbeat()
    return client
