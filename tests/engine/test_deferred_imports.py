"""spellbook/startup/deferred.py: the SDK's HTTP and request-state dependencies stay unloaded in a
process that defers them, and every way of using one loads the real package and puts the real
objects where stand-ins were bound. Each case runs in a fresh interpreter (this one has imported
them already)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.processes import child_env

LOADED = (
    "sorted(m for m in sys.modules if m.split('.')[0] in deferred.HTTP_ONLY "
    "and type(sys.modules[m]).__name__ == 'module')"
)

PRELUDE = f"""
import os, sys
from spellbook.startup import deferred
assert deferred.defer()
from mcp.server.request_state import InvalidRequestState, RequestStateSecurity
from spellbook.server.tools import NoRequestState, _Server
server = _Server("t", request_state_security=RequestStateSecurity(codec=NoRequestState()))
assert {LOADED} == [], {LOADED}
assert "cryptography.hazmat.primitives.ciphers.aead" in deferred.deferred()
assert "sse_starlette" in deferred.deferred()
assert "uvicorn" not in sys.modules  # sse_starlette's own imports never ran
"""


def run(body: str) -> str:
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_sdk_server_and_its_tools_load_without_the_deferred_packages() -> None:
    out = run("""
        from spellbook.server import tools_common, tools_exchange, tools_history, tools_knowledge, tools_structure
        import mcp.server.streamable_http, mcp.server.sse
        print(deferred.deferred())
    """)
    assert "cryptography" in out


@pytest.mark.parametrize("use", ["call", "except"])
def test_a_call_loads_the_real_packages_and_rebinds_every_stand_in(use: str) -> None:
    """The SDK's AES-GCM codec, used once deferral is on: it seals and unseals, and a tampered
    token meets ``except InvalidTag`` in the SDK, which must be the real class by then."""
    run(f"""
        from mcp.server import request_state
        codec = request_state.AESGCMRequestStateCodec([os.urandom(32)])
        assert deferred.deferred() == []
        assert {LOADED} != []
        assert isinstance(request_state.InvalidTag, type) and issubclass(request_state.InvalidTag, Exception)
        token = codec.seal(b"payload")
        assert codec.unseal(token) == b"payload"
        if "{use}" == "except":
            forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
            try:
                codec.unseal(forged)
            except InvalidRequestState:
                pass
            else:
                raise AssertionError("a forged token was accepted")
    """)


def test_isinstance_an_attribute_and_a_type_expression_load_them_too() -> None:
    run("""
        from mcp.server import streamable_http
        stand_in = streamable_http.EventSourceResponse
        assert type(stand_in).__name__ == "_StandIn"
        assert not isinstance(object(), stand_in)  # loads
        assert deferred.deferred() == []
        import sse_starlette
        assert streamable_http.EventSourceResponse is sse_starlette.EventSourceResponse
        assert stand_in.__name__ == "EventSourceResponse"
        assert (stand_in | None) == (sse_starlette.EventSourceResponse | None)
    """)


def test_a_class_may_derive_from_a_stand_in() -> None:
    run("""
        import cryptography.exceptions as exceptions
        class Mine(exceptions.InvalidTag):
            pass
        import cryptography.exceptions as real
        assert issubclass(Mine, real.InvalidTag) and type(real).__name__ == "module"
    """)


def test_nothing_is_deferred_once_a_package_is_imported() -> None:
    code = (
        "import cryptography\nfrom spellbook.startup import deferred\n"
        "assert not deferred.defer()\nassert deferred.deferred() == []"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_request_state_refuses_what_it_did_not_mint() -> None:
    from mcp.server.request_state import InvalidRequestState

    from spellbook.server.tools import NoRequestState

    with pytest.raises(InvalidRequestState):
        NoRequestState().unseal("v1.anything")
    with pytest.raises(RuntimeError, match="mint no request state"):
        NoRequestState().seal(b"{}")
