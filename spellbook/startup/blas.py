"""One BLAS thread in every Spellbook process, decided before numpy loads.

The default model runs its matrix products on one BLAS thread each (``use._cap_blas``): parallel
work goes to Python threads or child processes (``lanes.py``), never to BLAS's own. But OpenBLAS
starts its worker threads as numpy is imported, one per core, and each spins for about 0.1 s
before it sleeps; the cap set later leaves them idle. On this 2-core machine that spin cost 60 ms of
CPU per process (``python -c "import numpy"``: 125 -> 65 ms of task clock), taken from the
command's imports and the model's load on the other core at the moment they both run.
"""

from __future__ import annotations

import os

VARIABLE = "OPENBLAS_NUM_THREADS"


def one_thread() -> None:
    """Start OpenBLAS with one thread, unless the environment already says how many. Call before
    numpy is imported; a child process (git, a hook) inherits the setting, and runs no BLAS."""
    os.environ.setdefault(VARIABLE, "1")
