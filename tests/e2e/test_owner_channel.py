"""The owner's channel under attack: bounded reads before authentication, timeouts, public methods only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

import spellbook.server.hub as hub_module
from spellbook.config import Settings
from spellbook.errors import ConflictError, InvalidInputError, NoteNotFoundError, RemoteError, SpellbookError
from spellbook.server import channel
from spellbook.server.hub import Hub


def open_hub(vault: Path, transport: str = "auto", index: Path | None = None) -> Hub:
    vault.mkdir(exist_ok=True)
    settings = Settings(vault=vault, embedder="hashing", watch=False, index_dir=index)
    hub = Hub(settings, watch=False, reconcile_on_open=False, warm_up=False, transport=transport)
    hub.start(background=False)
    return hub


@pytest.fixture(params=["unix", "tcp"])
def owner(request, tmp_path: Path, monkeypatch):
    target = getattr(hub_module, "channel", hub_module)
    monkeypatch.setattr(target, "REQUEST_SECONDS", 1.0, raising=False)
    hub = open_hub(tmp_path / "vault", "auto" if request.param == "unix" else "tcp")
    assert hub.role == "owner"
    assert ("socket" in info(hub)) == (request.param == "unix")
    yield hub
    hub.close()


def info(hub: Hub) -> dict:
    return json.loads((hub.index_dir / "owner.json").read_text())


def connect(hub: Hub) -> socket.socket:
    published = info(hub)
    if "socket" in published:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(hub.index_dir / published["socket"]))
        return sock
    return socket.create_connection(("127.0.0.1", int(published["port"])), timeout=5)


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """Did the other side close (or reset) the connection within ``within`` seconds?"""
    sock.settimeout(within)
    try:
        while sock.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


def test_bytes_before_authentication_are_bounded(owner: Hub) -> None:
    sock = connect(owner)
    sock.settimeout(5)
    sent, chunk = 0, b"x" * 65536
    with pytest.raises(OSError):  # the owner hangs up long before 64 MB arrive
        while sent < 64 * 2**20:
            sock.sendall(chunk)
            sent += len(chunk)
    assert sent < 8 * 2**20
    sock.close()
    assert owner.call("stats")["notes"] >= 0


def test_idle_connections_are_closed(owner: Hub) -> None:
    sock = connect(owner)
    started = time.monotonic()
    assert closed_by_peer(sock, within=5.0)
    assert time.monotonic() - started < 3.0
    sock.close()


def test_slow_senders_are_cut_off(owner: Hub) -> None:
    sock = connect(owner)
    started = time.monotonic()
    sock.settimeout(0.2)
    with pytest.raises(OSError):
        while time.monotonic() - started < 5.0:  # one byte every 0.1 s never completes a header
            sock.sendall(b"{")
            time.sleep(0.1)
            try:
                if not sock.recv(1024):
                    raise ConnectionResetError("closed")
            except TimeoutError:
                pass
    assert time.monotonic() - started < 3.0
    sock.close()


def send_request(sock: socket.socket, published: dict, method: str, params: dict) -> dict:
    """A request as a follower frames it; returns the owner's reply."""
    body = json.dumps(params).encode()
    header = {"method": method, "length": len(body)}
    if "token" in published:
        header["token"] = published["token"]
    sock.sendall(json.dumps(header).encode() + b"\n" + body)
    sock.settimeout(10)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, reply = data.partition(b"\n")
    assert len(reply) == json.loads(head)["length"]
    return json.loads(reply)


@pytest.mark.parametrize("method", ["close", "_call_local", "__init__", "prepare"])
def test_only_public_methods_are_served(owner: Hub, method: str) -> None:
    before = owner.call("stats")["notes"]
    with connect(owner) as sock:
        reply = send_request(sock, info(owner), method, {})
    assert "result" not in reply and "unknown method" in reply["refused"]
    assert owner.call("stats")["notes"] == before  # the engine is still open for every client


def test_an_authenticated_request_is_bounded_too(owner: Hub) -> None:
    published = info(owner)
    header = {
        "method": "stats",
        "length": channel.MAX_REQUEST_BYTES + 1,
        **{k: published[k] for k in ("token",) if k in published},
    }
    with connect(owner) as sock:
        sock.sendall(json.dumps(header).encode() + b"\n")
        assert closed_by_peer(sock, within=5.0)  # refused on the header: the body is never read
    with pytest.raises(InvalidInputError, match="the largest is"):  # a follower says so before sending
        channel.request(owner.index_dir, "scribe", {"text": "x" * channel.MAX_REQUEST_BYTES}, timeout=5)


def test_tcp_needs_the_token(tmp_path: Path) -> None:
    hub = open_hub(tmp_path / "vault", "tcp")
    try:
        with connect(hub) as sock:
            reply = send_request(sock, {"token": "0" * 32}, "stats", {})
        assert reply == {"refused": "bad token"}
    finally:
        hub.close()


def test_the_unix_socket_is_private_and_goes_with_its_owner(tmp_path: Path) -> None:
    hub = open_hub(tmp_path / "vault")
    sock_file = hub.index_dir / "owner.sock"
    assert stat.S_ISSOCK(sock_file.stat().st_mode) and stat.S_IMODE(sock_file.stat().st_mode) == 0o600
    assert not [p for p in hub.index_dir.iterdir() if p.name.startswith(".owner-")]
    hub.close()
    assert not sock_file.exists() and not (hub.index_dir / "owner.json").exists()


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_close_stops_the_listener_at_once_and_leaves_no_descriptor(tmp_path: Path, transport: str) -> None:
    """The listener is woken by close(), not found stopped at its next poll; its thread, socket and
    wake-up pipe are gone when close() returns, and closing again does nothing."""
    hub = open_hub(tmp_path / "vault", transport)
    published = info(hub)
    with connect(hub) as sock:
        assert "result" in send_request(sock, published, "stats", {})
    channel = hub._channel
    listening = channel._listening
    assert listening is not None and listening.is_alive()
    mine = {fd: _identity(fd) for fd in (*channel._wake, channel._server.socket.fileno())}
    hub.close()
    assert not listening.is_alive()
    # Each descriptor is closed: its number is free, or another thread's file took it since.
    assert all(_identity(fd) != identity for fd, identity in mine.items())
    channel.close()  # again: nothing left to do
    if "port" in published:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", int(published["port"])), timeout=5)


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def test_errors_keep_their_class_and_fields() -> None:
    conflict = ConflictError("a.md", "v1", "v2", "current text", note_id="n1")
    back = SpellbookError.from_wire(json.loads(json.dumps(conflict.to_wire())))
    assert type(back) is ConflictError and str(back) == str(conflict)
    assert (back.current_version, back.content, back.note_id, back.expected_version) == (
        "v2",
        "current text",
        "n1",
        "v1",
    )
    missing = SpellbookError.from_wire(NoteNotFoundError("zz").to_wire())
    assert isinstance(missing, LookupError) and missing.note_id == "zz"
    unknown = SpellbookError.from_wire({"type": "NoSuchError", "message": "boom", "fields": {"x": 1}})
    assert type(unknown) is RemoteError and str(unknown) == "boom"
    assert type(SpellbookError.from_wire({"type": "dict", "message": "m"})) is RemoteError  # only Spellbook errors


def test_a_follower_raises_the_owners_error_at_once(tmp_path: Path) -> None:
    owner = open_hub(tmp_path / "vault")
    follower = open_hub(tmp_path / "vault")
    try:
        assert follower.role == "follower"
        note = owner.call("scribe", {"text": "Kettle descaling uses citric acid.", "title": "Kettle"})
        for hub in (owner, follower):
            started = time.monotonic()
            with pytest.raises(InvalidInputError) as caught:  # a ValueError, yet not retried as if unreachable
                hub.call("memorize", {"query": " "})
            assert time.monotonic() - started < 2.0
            with pytest.raises(ConflictError) as conflict:
                hub.call("revise", {"id": note["id"], "text": "new", "version": "stale"})
            assert conflict.value.content and conflict.value.current_version
        assert "query is empty" in str(caught.value)
    finally:
        follower.close()
        owner.close()


def test_an_index_path_too_long_for_sun_path(tmp_path: Path) -> None:
    index = tmp_path / ("i" * 60) / ("n" * 60)
    assert len(str(index / "owner.sock")) > channel.SUN_PATH_MAX
    owner = open_hub(tmp_path / "vault", index=index)
    follower = open_hub(tmp_path / "vault", index=index)
    try:
        assert info(owner)["socket"] == "owner.sock" and follower.role == "follower"
        assert follower.call("stats")["owner_pid"] == os.getpid()
    finally:
        follower.close()
        owner.close()


def _netns_refused() -> str | None:
    if not shutil.which("unshare"):
        return "unshare is not installed"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"the kernel refuses a network namespace: {probe.stderr.strip()}"


@pytest.mark.slow
def test_servers_in_different_network_namespaces_share_a_vault(tmp_path: Path) -> None:
    """The second server has its own network (``unshare -n``: no shared loopback), like a second
    container on the same vault volume; it reaches the owner through the Unix socket."""
    refused = _netns_refused()
    if refused:
        pytest.skip(refused)
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from tests.helpers.stdio import alive, call, eventually, server

    vault = tmp_path / "vault"
    isolated = server(vault)
    isolated = StdioServerParameters(command="unshare", args=["-n", isolated.command, *isolated.args], env=isolated.env)
    pids: list[int] = []

    async def main() -> None:
        async with Client(server(vault)) as first:
            owner = (await call(first, "stats"))["owner_pid"]
            pids.append(owner)
            # the premise: from a new network namespace, the owner's host loopback is unreachable
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                probe.listen()
                port = probe.getsockname()[1]
                reach = subprocess.run(
                    [
                        "unshare",
                        "-n",
                        sys.executable,
                        "-c",
                        f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                assert reach.returncode != 0, "unshare -n did not isolate the network"
            async with Client(isolated) as second:
                started = time.monotonic()
                assert (await call(second, "stats"))["owner_pid"] == owner  # forwarded across namespaces
                assert time.monotonic() - started < 5.0
                a = await call(
                    second, "scribe", text="Saffron fact from the isolated one.", title="Saffron", category="c"
                )
                assert (await call(first, "memorize", query="saffron"))["results"][0]["id"] == a["id"]

                os.kill(owner, signal.SIGKILL)  # leaves a stale owner.sock behind

                async def new_owner():
                    try:
                        pid = (await call(second, "stats"))["owner_pid"]
                    except AssertionError:
                        return None
                    return pid if pid != owner else None

                took_over = await eventually(new_owner, timeout=15)
                assert took_over
                pids.append(took_over)
                async with Client(server(vault)) as third:  # back from the host's namespace
                    assert (await call(third, "stats"))["owner_pid"] == took_over
                    hits = (await call(third, "memorize", query="saffron"))["results"]
                    assert hits[0]["id"] == a["id"]

    anyio.run(main)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids), "a server process outlived its client"


def test_a_stale_socket_and_owner_json_are_replaced(tmp_path: Path) -> None:
    """What a kill -9'd owner leaves behind: a socket file nobody listens on, and its owner.json."""
    index = tmp_path / "vault" / ".spellbook"
    index.mkdir(parents=True)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(index / "owner.sock"))
    dead.close()
    (index / "owner.json").write_text(json.dumps({"pid": 999999, "socket": "owner.sock"}))
    assert hub_module.owner_pid(index) is None  # the lock is free: nobody owns it, whatever owner.json says
    owner = open_hub(tmp_path / "vault")
    follower = open_hub(tmp_path / "vault")
    try:
        assert hub_module.owner_pid(index) == os.getpid()
        assert follower.call("stats")["owner_pid"] == os.getpid()
    finally:
        follower.close()
        owner.close()
