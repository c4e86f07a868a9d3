"""BLAS and OpenMP threads of a node process (issue 27, item 1).

numpy's OpenBLAS starts one thread per CPU when it loads, and so would an OpenMP or MKL runtime.
That suits one process that has the machine to itself. When several node processes share a host
(``privfed simulate``, compose replicas, the test harnesses), each one's pool wants every CPU:
five owners on two cores ran the N = 5 logistic-regression round in 0.24 s with the default and
in 0.03 s with one thread each, and N = 20 in 5.1 s against 0.13 s (``bench/federation.py``,
"threads" lines). So a launcher that starts several nodes on one host gives each of them
:func:`threads_per_node`, and ``privfed owner --threads N`` applies it with :func:`pin_threads`.

The libraries read their thread count from the environment when they load, so :func:`pin_threads`
must run before numpy is imported: ``privfed owner`` parses its command line without loading
numpy (``tests/unit/test_owner_imports.py``) and pins first thing. A process that already loaded
numpy (the Python API, a test) is pinned through threadpoolctl instead, which sets the running
pools' thread counts.

Imports only the standard library (threadpoolctl only in that second case).
"""

from __future__ import annotations

import os
import sys

#: The environment variables the BLAS and OpenMP runtimes read when they load.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """The environment that gives a process (and its children) ``threads`` BLAS/OpenMP threads."""
    return dict.fromkeys(THREAD_VARIABLES, str(threads))


def host_threads() -> int:
    """The threads this process may use: a count the launcher set in :data:`THREAD_VARIABLES`
    (the first one set, e.g. ``privfed reproduce`` gives each experiment one), else the CPUs it
    may run on (``os.sched_getaffinity``: a container's cpuset, not the whole host's count)."""
    for name in THREAD_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) >= 1:
            return int(value)
    return len(os.sched_getaffinity(0))


def threads_per_node(nodes: int) -> int:
    """The BLAS threads each of ``nodes`` node processes on this host gets: :func:`host_threads`
    split evenly, one each when the nodes outnumber them."""
    return max(1, host_threads() // max(1, nodes))


def pin_threads(threads: int) -> None:
    """Give this process ``threads`` BLAS/OpenMP threads, its children too (through the environment).

    Before numpy loads the environment is enough, and no thread pool larger than ``threads`` is
    ever started; afterwards the loaded pools are resized with threadpoolctl.
    """
    os.environ.update(thread_env(threads))
    if "numpy" in sys.modules:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads)
