"""An owner's policy (issue 26, item 2): a job it declines is refused with the fixed code ``policy``
before anything is validated, computed or debited; an accepted job is held to the epsilon it
announced; per-day and total limits count the other jobs' releases in the owner's own ledger."""

import math

import pytest

from privfed.common.errors import ConfigError
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.common.tasks import REFUSAL_TEXTS, JoinAccepted, JoinTask, NccShareTask, Refusal, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import build_owners, federation_split
from privfed.owner.policy import OwnerPolicy
from privfed.proto.serde import result_to_proto

NODE = "owner-0"


@pytest.fixture(scope="module")
def digits():
    return federation_split("digits", seed=0, test_fraction=0.2)


SCHEMA, OTHER_SCHEMA = "ab" * 32, "cd" * 32  # SHA-256 hex digests


def job(job_id="j1", *, epsilon=1.0, delta=0.0, task="ncc", user="alice", schema=SCHEMA):
    return JobInfo(job_id=job_id, data_user=user, task=task, epsilon=epsilon, delta=delta, schema_sha256=schema)


def ncc_tasks(train, owners, eps=1.0, prefix="t"):
    spec = NccShareTask(  # features at 3/4 of eps, labels at 1/4: eps per owner in all
        mechanism="pm", epsilon=0.75 * eps, labels="rr", label_epsilon=0.25 * eps, n_classes=10, bounds=train.bounds
    )
    return [Task(f"{prefix}-{i}", o, "r1", spec) for i, o in enumerate(owners)]


def core(tmp_path, train, policy, n=2):
    owners = build_owners(train, node_id=NODE, n_owners=n, shards=range(n), seed=0, rng_kind="seeded", rng_seed=0)
    ledger = Ledger(tmp_path / "ledger.sqlite", epsilon_budget=100.0)
    return OwnerCore(owners, ledger, owner_policy=policy), [o.owner_id for o in owners], ledger


def test_a_policy_file_with_an_unknown_key_or_a_bad_value_is_refused_naming_it(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text('tasks = ["ncc"]\nmax_epsilon_per_jobb = 1.0\n')
    with pytest.raises(ConfigError, match="max_epsilon_per_jobb"):
        OwnerPolicy.read(path)
    path.write_text("max_epsilon_per_job = -1\n")
    with pytest.raises(ConfigError, match="max_epsilon_per_job"):
        OwnerPolicy.read(path)
    path.write_text('data_users = "alice"\n')
    with pytest.raises(ConfigError, match="data_users"):
        OwnerPolicy.read(path)
    path.write_text('tasks = ["ncc", "svm"]\n')  # a typo would decline every job of the task meant
    with pytest.raises(ConfigError, match="unknown task.*svm.*known: ncc, lr, feddpdr, bdt, nb"):
        OwnerPolicy.read(path)
    path.write_text('schema_sha256 = "ab12"\n')  # a prefix matches no announced digest
    with pytest.raises(ConfigError, match="schema_sha256 must be a SHA-256 hex digest"):
        OwnerPolicy.read(path)
    path.write_text('tasks = ["ncc"]\nmax_epsilon_per_job = 2.0\ndata_users = ["alice"]\n')
    assert OwnerPolicy.read(path) == OwnerPolicy(tasks=("ncc",), max_epsilon_per_job=2.0, data_users=("alice",))


@pytest.mark.parametrize(
    ("policy", "announced", "rule"),
    [
        (OwnerPolicy(), None, "unannounced"),
        (OwnerPolicy(tasks=("bdt",)), job(), "task"),
        (OwnerPolicy(data_users=("bob",)), job(), "data_user"),
        (OwnerPolicy(schema_sha256=OTHER_SCHEMA), job(), "schema"),
        (OwnerPolicy(max_epsilon_per_job=0.5), job(epsilon=1.0), "epsilon_per_job"),
        (OwnerPolicy(max_delta_per_job=1e-6), job(delta=1e-5), "delta_per_job"),
        (
            OwnerPolicy(tasks=("ncc",), data_users=("alice",), schema_sha256=SCHEMA, max_epsilon_per_job=1.0),
            job(),
            None,
        ),
    ],
)
def test_each_rule_declines_on_the_announcement_alone(tmp_path, policy, announced, rule):
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=10.0)
    assert policy.declines(announced, ledger, "owner-0.o00000") == rule


def test_day_and_total_limits_count_the_other_jobs_releases_not_this_ones(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=math.inf)
    owner = "owner-0.o00000"
    ledger.debit_many([Debit(owner, 1.5, 0.0, "x", "a", job="earlier"), Debit(owner, 0.5, 0.0, "x", "b", job="j1")])
    assert OwnerPolicy(max_epsilon_per_day=2.5).declines(job(epsilon=1.0), ledger, owner) is None  # 1.5 + 1
    assert OwnerPolicy(max_epsilon_per_day=2.4).declines(job(epsilon=1.0), ledger, owner) == "epsilon_per_day"
    assert OwnerPolicy(max_epsilon_total=2.4).declines(job(epsilon=1.0), ledger, owner) == "epsilon_total"
    old = "UPDATE releases SET ts = datetime('now', '-2 days') WHERE job = 'earlier'"
    ledger._db().execute(old)  # a release of two days ago no longer counts for the day, still for the total
    assert OwnerPolicy(max_epsilon_per_day=1.0).declines(job(epsilon=1.0), ledger, owner) is None
    assert OwnerPolicy(max_epsilon_total=2.4).declines(job(epsilon=1.0), ledger, owner) == "epsilon_total"


def test_a_declined_job_is_refused_with_the_policy_code_and_nothing_is_debited(tmp_path, digits):
    train, _ = digits
    c, owners, ledger = core(tmp_path, train, OwnerPolicy(max_epsilon_per_job=1.0))
    results = c.answer(ncc_tasks(train, owners), job=job(epsilon=1.5)).results
    for r in results:
        assert isinstance(r.payload, Refusal) and r.payload.code == "policy"
        assert r.payload.message.startswith(REFUSAL_TEXTS["policy"]) and "epsilon_per_job" in r.payload.message
    assert all(ledger.history(o) == [] for o in owners)
    # the same tasks in a job the policy accepts are answered, and recorded under the job's id
    results = c.answer(ncc_tasks(train, owners, prefix="u"), job=job("j2", epsilon=1.0)).results
    assert not any(isinstance(r.payload, Refusal) for r in results)
    assert {h["job"] for o in owners for h in ledger.history(o)} == {"j2"}


def test_the_accept_round_is_answered_by_the_same_check_with_nothing_debited(tmp_path, digits):
    """A ``join`` task (the accept round, walkthrough 5 F1) gets the refusal every task of a declined job gets, or an
    empty acceptance (its bytes: the ids and an empty field); no policy takes part in every job; nothing is debited."""
    train, _ = digits
    declined, accepted = job(epsilon=1.5), job("j2", epsilon=1.0)

    def joins(c, owners, announced, prefix):
        return c.answer([Task(f"{prefix}-{i}", o, "accept", JoinTask()) for i, o in enumerate(owners)], job=announced)

    c, owners, ledger = core(tmp_path, train, OwnerPolicy(max_epsilon_per_job=1.0))
    refused = joins(c, owners, declined, "a").results
    task_refusal = c.answer(ncc_tasks(train, owners[:1]), job=declined).results[0].payload
    assert [r.payload for r in refused] == [task_refusal] * 2  # two owners' rows, one refusal: the rule's
    assert task_refusal.code == "policy" and "epsilon_per_job" in task_refusal.message
    answers = joins(c, owners, accepted, "b")
    assert [r.payload for r in answers.results] == [JoinAccepted()] * 2 and answers.outbound == []
    assert result_to_proto(answers.results[0]).ByteSize() == len(b"\n\x03b-0\x12\x0eowner-0.o00000\xc2\x01\x00")
    assert joins(c, owners, None, "c").results[0].payload.message.endswith("; nothing was released (rule unannounced)")
    assert all(ledger.history(o) == [] for o in owners)
    (tmp_path / "free").mkdir()
    free, free_owners, free_ledger = core(tmp_path / "free", train, None)
    assert [r.payload for r in joins(free, free_owners, None, "d").results] == [JoinAccepted()] * 2
    assert all(free_ledger.history(o) == [] for o in free_owners)


@pytest.mark.parametrize("policy", [None, OwnerPolicy()])
def test_the_accept_round_refuses_an_id_whose_budget_cannot_pay_the_announced_job(tmp_path, digits, policy):
    """Walkthrough 6, W6-12: an owner id with less budget left than the job announces declines it at the accept
    round (``budget_exceeded``), with or without a policy, so the plan and its quorum count only owners that can
    pay; what the id spent on the job itself (a resumed job) is part of the job, not on top of it."""
    train, _ = digits
    c, owners, ledger = core(tmp_path, train, policy)
    rich, poor = owners
    ledger.debit_many(
        [
            Debit(poor, 99.5, 0.0, purpose="earlier", release_id="r0", job="j0"),
            Debit(rich, 99.0, 0.0, purpose="earlier", release_id="r1", job="j0"),
            Debit(rich, 0.6, 0.0, purpose="this job's first round", release_id="r2", job="j2"),
        ]
    )

    def join(announced):
        tasks = [Task(f"{announced.job_id}-{i}", o, "accept", JoinTask()) for i, o in enumerate(owners)]
        return {r.owner_id: r.payload for r in c.answer(tasks, job=announced).results}

    answers = join(job("j2", epsilon=1.0))
    assert answers[rich] == JoinAccepted()  # 99 + 1 <= 100: its 0.6 on j2 is within the job's 1
    assert answers[poor].code == "budget_exceeded" and "epsilon=1" in answers[poor].message
    assert join(job("j3", epsilon=0.5))[poor] == JoinAccepted()
    assert join(job("j4", epsilon=0.3, delta=1e-5))[poor].code == "budget_exceeded"  # the ledger's delta budget is 0
    assert ledger.spent(poor).epsilon == 99.5 and ledger.spent(rich).epsilon == 99.6  # nothing debited


def test_an_accepted_job_is_held_to_the_epsilon_it_announced(tmp_path, digits):
    train, _ = digits
    c, owners, ledger = core(tmp_path, train, OwnerPolicy())
    announced = job(epsilon=1.0)
    first = c.answer(ncc_tasks(train, owners[:1], eps=1.0), job=announced).results
    assert not isinstance(first[0].payload, Refusal)
    spent = ledger.spent(owners[0]).epsilon
    again = c.answer(ncc_tasks(train, owners[:1], eps=1.0, prefix="again"), job=announced).results  # a second release
    assert again[0].payload.code == "policy" and "announced" in again[0].payload.message
    assert ledger.spent(owners[0]).epsilon == spent  # nothing more debited
    unannounced = c.answer(ncc_tasks(train, owners[1:], prefix="v")).results
    assert unannounced[0].payload.code == "policy" and "unannounced" in unannounced[0].payload.message


def test_without_a_policy_every_job_is_answered_and_recorded_under_its_id(tmp_path, digits):
    train, _ = digits
    c, owners, ledger = core(tmp_path, train, None)
    assert not any(isinstance(r.payload, Refusal) for r in c.answer(ncc_tasks(train, owners), job=job("j9")).results)
    assert {h["job"] for o in owners for h in ledger.history(o)} == {"j9"}
    assert ledger.spent_on(owners[0], job="j9") == ledger.spent(owners[0])
    assert ledger.spent_on(owners[0], other_than="j9").epsilon == 0


def test_each_release_records_the_data_user_its_job_was_submitted_by_and_sends_nothing_more(tmp_path, digits):
    """Walkthrough M4: the owner's ledger records whom a release went to (the announced job's data user, ''
    when unknown). It is written locally only: the same tasks answered by the same seeded owners for a job
    that names another data user, or none, get the same answers."""
    train, _ = digits
    answers = {}
    for user in ("alice", "bob", ""):
        (tmp_path / (user or "unknown")).mkdir()
        c, owners, ledger = core(tmp_path / (user or "unknown"), train, None)
        results = c.answer(ncc_tasks(train, owners), job=job("j9", user=user)).results
        assert not any(isinstance(r.payload, Refusal) for r in results)
        answers[user] = [result_to_proto(r).SerializeToString(deterministic=True) for r in results]  # as sent
        assert {(h["job"], h["data_user"]) for o in owners for h in ledger.history(o)} == {("j9", user)}
        ledger.close()
    assert answers["alice"] == answers["bob"] == answers[""]


@pytest.mark.parametrize("policy", [None, OwnerPolicy(tasks=("nb", "ncc"))])
def test_a_release_of_another_jobs_kind_is_refused_whatever_the_policy(tmp_path, digits, policy):
    """An owner whose policy admits nb jobs only must not release an NCC share under an nb announcement:
    the kind must be one the announced job sends (common/tasks' ``Kind.tasks``), with or without a policy."""
    train, _ = digits
    c, owners, ledger = core(tmp_path, train, policy)
    results = c.answer(ncc_tasks(train, owners), job=job(task="nb")).results
    for r in results:
        assert isinstance(r.payload, Refusal) and r.payload.code == "invalid_task"
        assert r.payload.message.startswith(REFUSAL_TEXTS["invalid_task"]) and "'nb'" in r.payload.message
    assert all(ledger.history(o) == [] for o in owners)  # nothing debited
    answered = c.answer(ncc_tasks(train, owners, prefix="u"), job=job("j2", task="ncc")).results
    assert not any(isinstance(r.payload, Refusal) for r in answered)


def test_every_release_kind_names_the_jobs_that_send_it():
    from privfed.common.tasks import KINDS
    from privfed.server.parameters import TASKS

    releases = [k for k in KINDS if k.name not in ("ring_message", "secagg_keys", "secagg_unmask")]
    assert all(k.tasks and set(k.tasks) <= set(TASKS) for k in releases)
    assert {t for k in releases for t in k.tasks} == set(TASKS)  # every job has a kind to send
