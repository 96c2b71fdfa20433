"""numpy's BLAS on one thread.

The gateway's matrix work is small: a query vector against the semantic cache's entries or a local-mode
collection of a few thousand vectors. OpenBLAS starts one thread per core at import and, after each call,
keeps its extra threads busy-waiting for the next one: on a 2-core machine that spin cost 2-19 ms of CPU a
turn (`bench/turn_overhead.py`), more than the rest of the turn's own work. One thread does these products
for the same CPU (a 1,500 x 384 product takes 0.07 ms instead of 0.03 ms of wall time) and spins nothing.
(The embedding model runs on onnxruntime's own threads, set apart.)"""

from __future__ import annotations

import numpy  # noqa: F401 - loaded first, so that threadpoolctl finds its BLAS
from threadpoolctl import threadpool_limits


def limit_blas_threads(threads: int = 1) -> None:
    """Every BLAS library loaded in this process uses at most ``threads`` threads from now on."""
    threadpool_limits(limits=threads, user_api="blas")
