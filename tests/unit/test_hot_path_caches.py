"""The caches of a node's round (issue 27) are never a way around a check: a share spec is decoded
once per distinct message, but a changed one is decoded and checked again and a malformed one is
refused every time; the coordinator encodes a spec object once, never a stale copy of another; a
task sent again over a spec decoded once is still refused; a ledger still sees what another
connection wrote, row accounts included."""

import math

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import RemoteProtocolError
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Budget, Debit, Ledger, RowsUnused
from privfed.common.tasks import LrShareReply, LrShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.local import LocalOwner
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.proto.jobwire import job_info_from_proto, job_info_to_proto

BOUNDS = Bounds(np.array([-1.0, 0.0]), np.array([1.0, 4.0]))


def lr(epsilon=2.0, bounds=BOUNDS):
    return LrShareTask(mechanism="pm", epsilon=epsilon, param_bound=4.0, c=1.0, n_classes=2, bounds=bounds)


def wire(task):
    """``task`` as a node receives it: encoded by the coordinator, bytes on the wire, parsed."""
    return pb.Task.FromString(serde.task_to_proto(task).SerializeToString())


def test_a_share_spec_is_decoded_once_per_distinct_message_and_a_changed_one_again():
    first = serde.task_from_proto(wire(Task("t1", "n.a", "r1", lr())))
    again = serde.task_from_proto(wire(Task("t2", "n.b", "r1", lr())))  # another object, the same message
    assert again.spec is first.spec and (again.task_id, again.owner_id) == ("t2", "n.b")
    changed = serde.task_from_proto(wire(Task("t3", "n.a", "r2", lr(epsilon=3.0))))
    assert changed.spec is not first.spec and changed.spec.epsilon == 3.0
    moved = serde.task_from_proto(wire(Task("t4", "n.a", "r2", lr(bounds=Bounds(BOUNDS.lo, BOUNDS.hi + 1)))))
    np.testing.assert_array_equal(moved.spec.bounds.hi, BOUNDS.hi + 1)


def test_a_malformed_share_spec_is_refused_every_time_even_after_its_good_twin():
    good = wire(Task("ok", "n.a", "r", lr()))
    assert serde.task_or_refusal(good)[0] is not None
    bad = wire(Task("bad", "n.a", "r", lr()))
    bad.lr_share.bounds.CopyFrom(serde.matrix_to_proto(np.array([[1.0, 1.0], [0.0, 0.0]])))  # lo > hi
    for _ in range(2):
        task, refusal = serde.task_or_refusal(bad)
        assert task is None and refusal.payload.code == "invalid_task" and "lo < hi" in refusal.payload.message
    assert serde.task_or_refusal(good)[0].spec.bounds.d == 2


def test_the_coordinator_encodes_each_spec_object_as_it_is_never_an_earlier_ones_message():
    a, b = lr(epsilon=1.0), lr(epsilon=5.0)
    for spec in (a, b, a, b):
        assert serde.task_from_proto(wire(Task("t", "n.a", "r", spec))).spec.epsilon == spec.epsilon
    m1, m2 = serde.task_to_proto(Task("t1", "n.a", "r", a)), serde.task_to_proto(Task("t2", "n.b", "r", a))
    m1.lr_share.mechanism.epsilon = 9.0  # a task's message is its own: changing it changes no other
    assert m2.lr_share.mechanism.epsilon == 1.0 and serde.task_to_proto(Task("t3", "n.c", "r", a)).lr_share.c == 1.0


def test_a_job_announcement_is_checked_once_per_distinct_message_and_a_malformed_one_every_time():
    job = JobInfo("job-1", "alice", "lr", 2.0, 0.0, "0" * 64)
    assert job_info_from_proto(job_info_to_proto(job), True) == job
    assert job_info_from_proto(pb.JobInfo(), False) is None
    bad = pb.JobInfo(job_id="", task="lr")  # a job without an id
    for _ in range(2):
        with pytest.raises(RemoteProtocolError, match="malformed job"):
            job_info_from_proto(bad, True)


def test_a_task_sent_again_over_a_spec_decoded_once_is_refused_and_debited_once(tmp_path, rng):
    owner = LocalOwner("n.a", rng.uniform(-1, 1, (20, 2)) * [1, 2] + [0, 2], rng.integers(0, 2, 20), rng, 2, BOUNDS)
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0) as ledger:
        core = OwnerCore([owner], ledger)
        sent = wire(Task("t1", "n.a", "r1", lr()))
        (first,) = core.answer([serde.task_from_proto(sent)]).results
        (second,) = core.answer([serde.task_from_proto(sent)]).results  # the coordinator sends it again
        (third,) = core.answer([serde.task_from_proto(wire(Task("t2", "n.a", "r2", lr())))]).results
        (fourth,) = core.answer([serde.task_from_proto(wire(Task("t3", "n.a", "r3", lr())))]).results
    assert isinstance(first.payload, LrShareReply) and isinstance(third.payload, LrShareReply)
    assert isinstance(second.payload, Refusal) and second.payload.code == "already_released"
    assert isinstance(fourth.payload, Refusal) and fourth.payload.code == "budget_exceeded"  # 2 + 2 + 2 > 5
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=5.0) as ledger:
        assert [r["release_id"] for r in ledger.history("n.a")] == ["t1#0", "t2#0"]
        assert ledger.spent("n.a") == Budget(4.0)


def test_row_accounts_another_connection_wrote_are_seen_by_the_next_standings_and_debit(tmp_path):
    # Another owner id on the same rows (a re-sharded node) spends them through another connection.
    path = tmp_path / "l.sqlite"
    with Ledger(path, epsilon_budget=1.0) as a, Ledger(path, epsilon_budget=1.0) as b:
        a.bind_rows("n.a", [b"r0", b"r1"])
        b.bind_rows("n.b", [b"r1", b"r2"])
        a.debit("n.a", 0.25, purpose="p", release_id="t1")
        assert a.rows_spent("n.a") == Budget(0.25)  # a keeps the record and its rows' sums
        b.debit("n.b", 0.5, purpose="p", release_id="t2")  # row r1 has now spent 0.75
        assert a.rows_spent("n.a") == Budget(0.75) and a.standings(["n.a"])["n.a"].spent == Budget(0.25)
        (outcome,) = a.debit_many([Debit("n.a", 0.5, 0.0, "p", "t3")])
        assert outcome == RowsUnused("n.a", "t3", (1,))  # r1 cannot afford it and is left out; r0 takes it
        assert a.debit_many([Debit("n.a", 0.25, 0.0, "p", "t4")]) == [None]  # both at 1.0
        assert math.isclose(b.rows_spent("n.b").epsilon, 1.0) and math.isclose(b.spent("n.b").epsilon, 0.5)


def test_a_spec_only_kind_validates_a_spec_object_once_per_owner_and_refuses_every_time(tmp_path, rng, monkeypatch):
    from privfed.owner.kinds.shares import LrShareKind

    calls: list[float] = []
    real = LrShareKind.validate
    monkeypatch.setattr(LrShareKind, "validate", lambda self, t, s, v: calls.append(s.epsilon) or real(self, t, s, v))
    owners = [
        LocalOwner(f"n.{k}", rng.uniform(-1, 1, (20, 2)) * [1, 2] + [0, 2], rng.integers(0, 2, 20), rng, 2, BOUNDS)
        for k in "ab"
    ]
    with Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf) as ledger:
        core = OwnerCore(owners, ledger)
        spec = serde.task_from_proto(wire(Task("x", "n.a", "r", lr()))).spec
        core.answer([Task("t1", "n.a", "r1", spec), Task("t2", "n.b", "r1", spec)])
        core.answer([Task("t3", "n.a", "r2", spec), Task("t4", "n.b", "r2", spec)])
        assert calls == [2.0, 2.0]  # once per owner's configuration
        changed = serde.task_from_proto(wire(Task("x", "n.a", "r", lr(epsilon=3.0)))).spec
        core.answer([Task("t5", "n.a", "r3", changed)])
        assert calls == [2.0, 2.0, 3.0]
        wrong = LrShareTask(mechanism="pm", epsilon=4.0, param_bound=4.0, c=1.0, n_classes=3, bounds=BOUNDS)
        for t in ("t6", "t7"):
            (result,) = core.answer([Task(t, "n.a", "r4", wrong)]).results
            assert isinstance(result.payload, Refusal) and result.payload.code == "invalid_task"
        assert calls == [2.0, 2.0, 3.0, 4.0, 4.0]
        assert [r["release_id"] for r in ledger.history("n.a")] == ["t1#0", "t3#0", "t5#0"]


def test_a_share_mechanism_is_built_once_per_name_epsilon_and_size_and_a_bad_one_refused_each_time():
    from privfed.common.errors import ConfigError
    from privfed.owner.kinds.shares import mechanism_of

    assert mechanism_of("pm", 2.0, 3) is mechanism_of("pm", 2.0, 3)
    assert mechanism_of("pm", 3.0, 3).epsilon == 3.0 and mechanism_of("pm", 2.0, 4).d == 4
    assert type(mechanism_of("laplace", 2.0, 3)).__name__ == "LaplaceMechanism"
    for _ in range(2):
        with pytest.raises(ConfigError, match="unknown mechanism"):
            mechanism_of("nope", 2.0, 3)


def test_the_coordinator_checks_a_rounds_replies_against_one_mechanism_built_once(monkeypatch):
    """check_reply of an LR share builds the release's mechanism once per (name, ε, size), not per reply
    (issue 27: a PM mechanism and its output grid per reply was 12 % of the coordinator at 10^5 owners),
    and still refuses a reply beyond its range."""
    from privfed.common.mechanisms import make_mechanism
    from privfed.common.mechanisms.piecewise_multidim import PiecewiseMultidim
    from privfed.common.tasks import PublicLimits, check_reply
    from privfed.common.tasks.contract import ContractViolation

    p, epsilon = BOUNDS.d + 1, 1.375  # an ε no other test builds a mechanism of
    bound = make_mechanism("pm", epsilon=epsilon, d=p).max_abs_output
    built = []
    post_init = PiecewiseMultidim.__post_init__
    monkeypatch.setattr(PiecewiseMultidim, "__post_init__", lambda self: built.append(1) or post_init(self))
    spec = LrShareTask(mechanism="pm", epsilon=epsilon, param_bound=4.0, c=1.0, n_classes=2, bounds=BOUNDS)

    def reply(value):
        reports = np.zeros((1, p))
        reports[0, 0] = value  # PM at this ε reports one coordinate per row
        return LrShareReply(reports)

    for i in range(50):
        check_reply(spec, reply(bound * (i % 5) / 5), PublicLimits(max_rows=1))
    assert len(built) <= 1  # once (none if an earlier check built it)
    with pytest.raises(ContractViolation, match="beyond"):
        check_reply(spec, reply(2 * bound), PublicLimits(max_rows=1))
