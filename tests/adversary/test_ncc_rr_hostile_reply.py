"""A hostile OWNER against the coordinator's reply contract of a padded NCC share (``labels="rr"`` with ⊥ dummies,
``"joint"`` with weight-0 dummies; audit 13, item 4).

An honest owner's padded share carries ``work_rows(n, max_owner_rows)`` reports for its private ``n``: a power of
two (``n``'s cell, at least 1), or the task's bound if that is less; under ``max_owner_rows == 1`` the labels'
k-RR is K-ary (no ⊥). A hostile owner answers the same task with ⊥ labels where the task has none, labels above
⊥, more reports than the job's bound, none at all, or a count no honest owner sends (37, 63). Each must be refused
at validation (``check_reply``, what the coordinator's dispatcher runs on every reply before a strategy folds it),
after a round trip through the wire's serde, as the coordinator decodes it; the honest owner's reply (a real
owner core's) passes. Before this audit the counts no honest owner sends, 0 among them, were accepted: harmless to
the sums' bound (at most ``max_rows`` reports, as an honest owner of that many rows could send) but outside the
protocol, and a share of no reports from an owner said "no rows" where an honest one cannot.
"""

from __future__ import annotations

import numpy as np
import pytest
from differential import BOUNDS, D, K, owner_core

from privfed.common.tasks import (
    JointNccShareReply,
    NccShareReply,
    NccShareTask,
    PublicLimits,
    Result,
    Task,
    check_reply,
)
from privfed.common.tasks.contract import ContractViolation
from privfed.proto import serde

#: No clock, no child process, no socket: run with the in-process suites, on two workers (Makefile).
pytestmark = pytest.mark.in_process

LIMITS = PublicLimits(max_rows=100)
RR = NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=100)
RR_ONE = NccShareTask("pm", 1.0, "rr", 0.5, K, BOUNDS, max_owner_rows=1)
JOINT = NccShareTask("pm", 1.0, "joint", 0.0, K, BOUNDS, max_owner_rows=100)


def _wire(payload):
    """``payload`` as the coordinator decodes it off the wire."""
    return serde.result_from_proto(serde.result_to_proto(Result("t", "owner-0.o00000", payload))).payload


def _rr(m: int, labels=None) -> NccShareReply:
    labels = np.zeros(m, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
    return NccShareReply(reports=np.zeros((m, D)), labels=labels)


def _joint(m: int) -> JointNccShareReply:
    return JointNccShareReply(features=np.zeros(m, dtype=np.int64), reports=np.zeros(m, dtype=np.int64))


def _code(spec: NccShareTask, payload) -> str | None:
    try:
        check_reply(spec, _wire(payload), LIMITS)
    except ContractViolation as exc:
        return exc.code
    return None


@pytest.mark.parametrize("n", [0, 1, 37, 100, 300])
@pytest.mark.parametrize("spec", [RR, RR_ONE, JOINT], ids=["rr", "rr-bound-1", "joint"])
def test_an_honest_owners_share_passes(spec, n):
    rng = np.random.Generator(np.random.PCG64(n))
    owner, core = owner_core(rng.uniform(0, 1, (n, D)), rng.integers(0, K, n))
    (result,) = core.answer([Task("t", owner.owner_id, "run-1", spec)]).results
    assert _code(spec, result.payload) is None


@pytest.mark.parametrize(
    ("spec", "payload", "code"),
    [
        (RR_ONE, _rr(1, [K]), "label_out_of_range"),  # ⊥ where the task's k-RR is K-ary
        (RR, _rr(64, [K + 1] * 64), "label_out_of_range"),  # above ⊥
        (RR, _rr(128), "too_many_rows"),  # more than the job's bound
        (RR_ONE, _rr(2), "shape"),  # a K-ary share is one report under the bound 1
        (RR, _rr(0), "shape"),  # none: an honest owner of no rows sends one dummy
        (RR, _rr(37), "shape"),  # the private count itself, as before the padding
        (RR, _rr(63), "shape"),
        (JOINT, _joint(0), "shape"),
        (JOINT, _joint(37), "shape"),
    ],
    ids=[
        "bottom-bound-1",
        "above-bottom",
        "over-bound",
        "two-at-bound-1",
        "none",
        "37",
        "63",
        "joint-none",
        "joint-37",
    ],
)
def test_a_hostile_share_is_refused_at_validation(spec, payload, code):
    assert _code(spec, payload) == code


@pytest.mark.parametrize("m", [1, 2, 4, 32, 64, 100])
def test_every_public_count_passes(m):
    """The counts an honest owner may send under the bound 100: the powers of two below it, and 100 itself."""
    assert _code(RR, _rr(m)) is None and _code(JOINT, _joint(m)) is None


def test_a_clear_share_is_one_report_per_row_and_any_count_passes():
    """``labels="clear"`` is not padded (the owner opted in): its length is ``n``, 37 or 0."""
    clear = NccShareTask("pm", 1.0, "clear", 0.0, K, BOUNDS, max_owner_rows=100)
    assert _code(clear, _rr(37)) is None and _code(clear, _rr(0)) is None
