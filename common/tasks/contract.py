"""What every reply contract checks with (issue 23, item 1): the reasons a reply is rejected, the public
limits a contract reads, and the checks of shapes, rows, labels and mechanism outputs.

An owner is trusted with nothing the coordinator aggregates: a reply is used only if it has the
shape, the value range, the support and the labels that the task's own public parameters allow
an honest owner's release to have. Each kind's contract (``Kind.contract``, in its family's module)
is a pure function of (task spec, reply payload, :class:`PublicLimits`) that returns None or raises
:class:`ContractViolation`. Ranges are read from the mechanism objects the task names
(``Mechanism.max_abs_output``, and each mechanism's support), never hard-coded.

The ``2**-20`` output grid of the continuous mechanisms needs no check: reports travel as int64
indices on that grid (``proto/serde.py``), so whatever arrives is on it, and a coarser power-of-two
grid is a subset of it. Supports finer than a range are checked where a mechanism has one: Duchi's
reports are ``±B`` only, and Piecewise Algorithm 4 reports at most ``k`` non-zero values per row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from privfed.common.mechanisms.base import SNAP_STEP, IdentityMechanism, Mechanism

R = TypeVar("R")

#: Why a reply was rejected: the codes the report's ``rejected_owners`` uses.
REJECTION_CODES = {
    "undecodable": "the reply could not be decoded (malformed message, or non-finite values on the wire)",
    "wrong_kind": "the reply is not the kind of release the task asked for",
    "shape": "the reply's shape does not fit the task (columns, rows, dimensions)",
    "too_many_rows": "more rows than the public bound on an owner's rows",
    "not_finite": "the reply holds NaN or infinite values",
    "out_of_range": "values outside the mechanism's public output range or support",
    "label_out_of_range": "labels outside the task's classes",
    "no_answer": "the owner's node stayed connected but never answered within the round timeout",
}
#: Values may pass a mechanism's bound by the wire's rounding to its grid (half a step).
RANGE_TOLERANCE = SNAP_STEP / 2
#: Probability, under the public noise law, that an honest count passes :func:`count_limit`.
COUNT_TAIL = 2.0**-40
#: How far an orthonormal basis' Gram matrix may be from the identity (float rounding of an SVD).
ORTHONORMAL_TOLERANCE = 1e-6


@dataclass(frozen=True)
class PublicLimits:
    """The public configuration a contract needs beyond the task itself.

    ``max_rows``: the bound on the rows one owner holds (``JobConfig.owner_rows_bound``).
    """

    max_rows: int


class ContractViolation(Exception):
    """A reply broke its task's contract: ``code`` (:data:`REJECTION_CODES`) and a one-line ``detail``."""

    def __init__(self, code: str, detail: str):
        if code not in REJECTION_CODES:
            raise ValueError(f"unknown rejection code {code!r}; one of {sorted(REJECTION_CODES)}")
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def reply_of(payload: object, kind: type[R]) -> R:
    """``payload`` if it is a ``kind``, else a ``wrong_kind`` violation."""
    if not isinstance(payload, kind):
        raise ContractViolation("wrong_kind", f"expected {kind.__name__}, got {type(payload).__name__}")
    return payload


def check_matrix(a: object, what: str, shape: tuple[int | None, ...]) -> np.ndarray:
    """``a`` as a float64 array of ``shape`` (None: any length there), every value finite."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf":
        raise ContractViolation("shape", f"{what} must be numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ")"
        raise ContractViolation("shape", f"{what} of shape {arr.shape}, expected {want}")
    if not np.all(np.isfinite(arr)):
        raise ContractViolation("not_finite", f"{what} holds {int(np.sum(~np.isfinite(arr)))} non-finite value(s)")
    return arr


def check_rows(n: int, limits: PublicLimits, what: str) -> None:
    if n > limits.max_rows:
        raise ContractViolation(
            "too_many_rows", f"{n} {what}; an owner holds at most {limits.max_rows} rows (public bound)"
        )


def check_labels(labels: object, n: int, n_classes: int) -> None:
    y = np.asarray(labels)
    if y.shape != (n,) or (n and y.dtype.kind not in "iu"):
        raise ContractViolation("shape", f"labels of shape {y.shape} and dtype {y.dtype}, expected ({n},) integers")
    if n and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ContractViolation(
            "label_out_of_range",
            f"labels in [{int(y.min())}, {int(y.max())}], the task's label values are 0..{n_classes - 1}",
        )


def check_reports(reports: np.ndarray, mechanism: Mechanism) -> None:
    """Every report row a possible output of ``mechanism``: within ``max_abs_output``, and on its
    support where it has one finer than a range (module docstring)."""
    if not reports.size:
        return
    bound = float(mechanism.max_abs_output)
    top = float(np.max(np.abs(reports)))
    if top > bound + RANGE_TOLERANCE:
        raise ContractViolation(
            "out_of_range", f"|value| up to {top:.6g}, beyond {type(mechanism).__name__}'s output bound {bound:.6g}"
        )
    if isinstance(mechanism, IdentityMechanism):
        return
    # the mechanisms' modules on first use (issue 27): a mechanism object's own module is loaded already
    from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim

    if type(mechanism).__name__ == "DuchiMultidim":  # by name: the Duchi module imports scipy
        if np.any(np.abs(np.abs(reports) - bound) > RANGE_TOLERANCE):
            raise ContractViolation("out_of_range", f"Duchi reports are ±{bound:.6g} only")
    elif isinstance(mechanism, PiecewiseMultidim) and mechanism.k < mechanism.d:
        most = int(np.max(np.count_nonzero(reports, axis=1)))
        if most > mechanism.k:
            raise ContractViolation(
                "out_of_range", f"a row with {most} non-zero values; this mechanism reports {mechanism.k} per row"
            )


def count_limit(max_rows: int, count_epsilon: float) -> int:
    """The largest row count an honest owner's noisy count reaches but with probability :data:`COUNT_TAIL`:
    ``max_rows`` plus the two-sided geometric noise's tail ``t`` with ``P(|Z| > t) <= COUNT_TAIL``
    (``P(|Z| > t) = 2 a^(t+1) / (1 + a)``, ``a = exp(-epsilon)``); ``max_rows`` for an exact count."""
    if math.isinf(count_epsilon):
        return max_rows
    from privfed.common.mechanisms.geometric import GeometricMechanism  # on first use (issue 27)

    mech = GeometricMechanism(epsilon=count_epsilon)
    tail = math.log(COUNT_TAIL * (1.0 + mech.alpha) / 2.0) / math.log(mech.alpha) - 1.0
    return max_rows + max(0, math.ceil(tail))
