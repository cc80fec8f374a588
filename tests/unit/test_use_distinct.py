"""``use_forward.distinct``: ``np.unique`` for the piece ids of a batch, without numpy.ma's import."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from spellbook.embedders.use_forward import distinct
from tests.helpers.processes import child_env


def test_distinct_is_np_unique_for_piece_ids() -> None:
    rng = np.random.default_rng(7)
    for size in (0, 1, 2, 3, 64, 5000):
        for high in (1, 5, 250_000):
            ids = rng.integers(0, high, size, dtype=np.int64)
            got = distinct(ids)
            assert got.dtype == ids.dtype and np.array_equal(got, np.unique(ids)), (size, high)


def test_distinct_leaves_numpy_ma_unimported() -> None:
    code = (
        "import sys, numpy as np; from spellbook.embedders.use_forward import distinct; "
        "distinct(np.array([3, 1, 3])); print('numpy.ma' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "False", done.stderr[-500:]
