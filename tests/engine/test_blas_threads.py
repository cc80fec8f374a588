"""Every ``spellbook`` command starts OpenBLAS with one thread (spellbook/startup/blas.py): the
model caps BLAS at one thread anyway, and the worker threads OpenBLAS starts as numpy loads spin on
the other core while the command's start needs it. Each case runs in a fresh interpreter: the
setting only counts before numpy's first import."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers.processes import child_env

PROBE = """
import json, os, sys
sys.argv = ["spellbook", "--help"]
from spellbook.cli import run
try:
    run()
except SystemExit:
    pass
before = "numpy" in sys.modules  # nothing loaded numpy before run() chose the thread count
import numpy  # noqa: F401
from threadpoolctl import threadpool_info
threads = [pool["num_threads"] for pool in threadpool_info() if pool["internal_api"] == "openblas"]
print(json.dumps({"numpy_before": before, "variable": os.environ.get("OPENBLAS_NUM_THREADS"), "threads": threads}))
"""


def probe(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def without_the_variable() -> dict[str, str]:
    env = child_env()
    env.pop("OPENBLAS_NUM_THREADS", None)
    return env


ONE_CORE = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: OpenBLAS starts one thread anyway")


@ONE_CORE
def test_a_command_starts_openblas_with_one_thread() -> None:
    seen = probe(without_the_variable())
    assert seen["numpy_before"] is False
    assert seen["variable"] == "1"
    assert seen["threads"] == [1]
    # ...where numpy alone starts one per core: the difference the setting makes.
    count = (
        "import json, numpy; from threadpoolctl import threadpool_info; "
        "print(json.dumps([p['num_threads'] for p in threadpool_info() if p['internal_api'] == 'openblas']))"
    )
    plain = subprocess.run(
        [sys.executable, "-c", count],
        env=without_the_variable(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (threads,) = json.loads(plain.stdout)
    assert threads > 1


@ONE_CORE  # OpenBLAS caps a count the user set at the cores there are
def test_a_thread_count_the_user_set_is_kept() -> None:
    env = without_the_variable()
    env["OPENBLAS_NUM_THREADS"] = "2"
    seen = probe(env)
    assert seen["variable"] == "2"
    assert seen["threads"] == [2]
