"""One C heap pool for the process (spellbook/startup/heap.py): threads that allocate at once share
it instead of each getting a pool of its own, where freed memory piles up."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc pools")

POOLS = """
import ctypes, os, re, sys, tempfile, threading
from spellbook.startup.heap import limit_arenas
if sys.argv[1] == "limit":
    assert limit_arenas()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
start = threading.Barrier(8)

def churn():
    start.wait()
    for _ in range(20_000):  # C allocations, as SQLite and numpy make them, several threads at once
        libc.free(libc.malloc(4096))

threads = [threading.Thread(target=churn) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
path = os.path.join(tempfile.mkdtemp(), "info.xml")
f = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, f)
libc.fclose(f)
print(len(re.findall('<heap nr=', open(path).read())))
"""


def _pools(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", POOLS, mode], capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.strip())


def test_threads_share_one_pool_once_limited() -> None:
    assert _pools("limit") == 1
    if len(os.sched_getaffinity(0)) > 1:  # threads contend for the heap only when they run at once
        assert max(_pools("default") for _ in range(3)) > 1  # glibc's default: a pool per contending thread


def test_the_cli_limits_the_pools_before_it_does_anything(monkeypatch) -> None:
    import importlib

    from spellbook.startup import heap

    cli = importlib.import_module("spellbook.cli.main")

    called: list[int] = []
    monkeypatch.setattr(heap, "limit_arenas", lambda count=heap.ARENAS: called.append(count) or True)
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert called == [1]
