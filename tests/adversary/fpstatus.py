"""The CPU's own record of the floating-point slow path, read without a clock (audit 9).

On x86 an SSE/AVX operation with a subnormal operand, or whose result underflows, takes a microcode assist
(Andrysco et al., "On subnormal floating point and abnormal timing", IEEE S&P 2015). The same hardware sets
sticky status bits in the thread's MXCSR register: DE (bit 1) for a denormal operand, UE (bit 4) for an
underflow. numpy clears and reads the five IEEE flags around each ufunc (its ``np.errstate`` checks), which
include UE but not DE: so DE, once set, stays set until cleared, whatever numpy or Python did since. This
module reads and clears MXCSR through two three-instruction functions (``stmxcsr`` / ``ldmxcsr``) put in an
executable page, and reports what an answer did:

* ``"denormal"``: some SSE/AVX operation of this thread (numpy's loops, OpenBLAS with one thread, CPython's
  float arithmetic) had a subnormal operand. Conservative: ``0 * 1e-310`` sets it too, though it is fast;
* ``"underflow"``: some numpy ufunc (``matmul`` included) made a result below the normal range (numpy's own
  report, ``np.errstate(under="call")``: UE itself is cleared by the next ufunc).

Other threads are not seen (the tests run BLAS on one thread: ``tests/conftest.py``). x86-64 only.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import platform
from collections.abc import Callable

import numpy as np

X86_64 = platform.machine().lower() in ("x86_64", "amd64")
DE, UE = 0x02, 0x10
_FLAGS = 0x3F  # IE DE ZE OE UE PE

# unsigned get(void): stmxcsr [rsp-4]; mov eax, [rsp-4]; ret
_GET = bytes([0x0F, 0xAE, 0x5C, 0x24, 0xFC, 0x8B, 0x44, 0x24, 0xFC, 0xC3])
# void set(unsigned): mov [rsp-4], edi; ldmxcsr [rsp-4]; ret
_SET = bytes([0x89, 0x7C, 0x24, 0xFC, 0x0F, 0xAE, 0x54, 0x24, 0xFC, 0xC3])

_page: mmap.mmap | None = None
_get: Callable[[], int] | None = None
_set: Callable[[int], None] | None = None


def _functions() -> tuple[Callable[[], int], Callable[[int], None]]:
    global _page, _get, _set
    if _get is None or _set is None:
        _page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        _page.write(_GET + _SET)
        base = ctypes.addressof(ctypes.c_char.from_buffer(_page))
        _get = ctypes.CFUNCTYPE(ctypes.c_uint32)(base)
        _set = ctypes.CFUNCTYPE(None, ctypes.c_uint32)(base + len(_GET))
    return _get, _set


#: The owner core's computations from rows (``privfed.owner.compute``, as ``owner/core.py`` calls them): the
#: part of an answer that reads rows. Validation before it compares the coordinator's parameters, whatever
#: they are, the same for every owner (a subnormal ``alpha`` sets DE there, with no row in sight).
COMPUTE = ("release_from", "compute_together")


def slow_path(answer: Callable[[], object], monkeypatch=None, between: tuple[type, str, str] | None = None) -> set[str]:
    """What of ``{"denormal", "underflow"}`` happened while ``answer()`` ran (module docstring); with a pytest
    ``monkeypatch``, both are read over the owner core's computations from rows only (:data:`COMPUTE`), or with
    ``between = (cls, first, second)`` from the return of ``cls.first`` to the call of ``cls.second`` (a gap a
    coordinator times)."""
    get, set_ = _functions()
    underflows: list[str] = []
    status, inside = [0], [monkeypatch is None]
    if between is not None:
        cls, first, second = between
        opening, closing = getattr(cls, first), getattr(cls, second)

        def opened(*args, **kwargs):
            result = opening(*args, **kwargs)
            set_(get() & ~_FLAGS)
            inside[0] = True
            return result

        def closed(*args, **kwargs):
            if inside[0]:
                status[0] |= get() & DE
                inside[0] = False
            return closing(*args, **kwargs)

        monkeypatch.setattr(cls, first, opened)
        monkeypatch.setattr(cls, second, closed)
    elif monkeypatch is not None:
        from privfed.owner import core

        def watched(function):
            def run(*args, **kwargs):
                before = get()
                set_(before & ~_FLAGS)
                inside[0] = True
                try:
                    return function(*args, **kwargs)
                finally:
                    inside[0] = False
                    status[0] |= get() & DE
                    set_(get() | (before & _FLAGS))  # sticky for whoever watches around this call

            return run

        for name in COMPUTE:
            monkeypatch.setattr(core, name, watched(getattr(core, name)))
    old = np.seterrcall(lambda kind, flag: underflows.append(kind) if inside[0] else None)
    gc.collect()
    gc.disable()  # no finalizer's arithmetic in between
    try:
        with np.errstate(under="call"):
            set_(get() & ~_FLAGS)
            answer()
            if monkeypatch is None:
                status[0] = get()
    finally:
        gc.enable()
        np.seterrcall(old)
    return ({"denormal"} if status[0] & DE else set()) | ({"underflow"} if underflows else set())
