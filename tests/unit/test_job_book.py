"""The coordinator's side of issue 23, driven in-process with an injected clock: replies that break
their contract, fail to decode or never come reject their owner and the job goes on
(:class:`~privfed.server.rounds.JobBook`); the quorum stops a job; registration names who is
missing; one node id serves one live process (the dispatcher refuses a second, fences a dead one)."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from privfed.common.bounds import Bounds
from privfed.common.errors import NodeIdInUse, QuorumLost, RemoteProtocolError
from privfed.common.identity import owner_id
from privfed.common.tasks import NccShareReply, OwnerInfo, Refusal, Result, RingMessageTask, Task
from privfed.proto import serde
from privfed.server.contracts import PublicLimits
from privfed.server.dispatcher import Dispatcher, RunOutcome
from privfed.server.nodes import IDENTITY_LIVENESS
from privfed.server.registration import Expected, certificate_nodes, missing, status, wait_for_registration
from privfed.server.rounds import JobBook, may_have_spent
from privfed.server.servicer import decode_results
from privfed.server.strategies import make_strategy

D = 3
BOUNDS = Bounds.of(0.0, 1.0, D)
OWNERS = [owner_id("owner-0", i) for i in range(3)] + [owner_id("owner-1", 3)]


def _tasks():
    return make_strategy("ncc", epsilon=2.0, labels="rr", n_classes=2, bounds=BOUNDS).configure(OWNERS, "r1")


def _reply(rows: int = 1, label: int = 0) -> NccShareReply:
    return NccShareReply(np.zeros((rows, D)), np.full(rows, label, dtype=np.int64))


def test_a_reply_that_breaks_its_contract_rejects_its_owner_and_the_others_are_used():
    tasks = _tasks()
    book = JobBook(PublicLimits(max_rows=2), quorum=2, owner_ids=OWNERS)
    results = {
        tasks[0].task_id: Result(tasks[0].task_id, OWNERS[0], _reply()),
        tasks[1].task_id: Result(tasks[1].task_id, OWNERS[1], _reply(rows=3)),  # beyond the row bound
        tasks[2].task_id: Result(tasks[2].task_id, OWNERS[2], _reply(label=7)),
        tasks[3].task_id: Result(tasks[3].task_id, OWNERS[3], Refusal("budget_exceeded", "spent")),
    }
    usable = book.record(tasks, RunOutcome(results, [], []), silent_nodes=())
    assert [r.owner_id for r in usable] == [OWNERS[0], OWNERS[3]]  # the refusal is an answer, not a share
    assert book.rejected == {
        OWNERS[1]: "too_many_rows: 3 report rows; an owner holds at most 2 rows (public bound)",
        OWNERS[2]: "label_out_of_range: labels in [7, 7], the task's label values are 0..2",  # ⊥ = 2 under rr
    }
    assert book.epsilon_by_owner[OWNERS[0]] > 0 and book.epsilon_by_owner[OWNERS[1]] == 0
    assert book.contributed() == 1 and "2/4 owners rejected" in book.why() and "1/4 owners refused" in book.why()
    assert [t.owner_id for t in book.to_ask(tasks)] == [OWNERS[0], OWNERS[3]]  # never asked again
    with pytest.raises(QuorumLost, match=r"only 1 of 4 owners .* \(--min-owners 2\)"):
        book.check_quorum(silent_owners=set())


def test_owners_whose_node_left_once_they_answered_count_for_that_batch_and_not_before_the_next():
    """A job whose nodes stopped once they had answered its last round (`docker compose stop`, owners first) failed
    with "only 0 of 4 owners are still taking part", every answer in hand: its quorum, checked after the round,
    counted the nodes that left as gone. They count for the batch they answered; a next batch that releases checks
    again before it goes out (before anyone spends more), where they no longer count."""
    tasks = _tasks()
    book = JobBook(PublicLimits(max_rows=2), quorum=3, owner_ids=OWNERS)
    assert book.to_ask(tasks, silent_owners=set()) == tasks
    results = {t.task_id: Result(t.task_id, t.owner_id, _reply()) for t in tasks[:3]}  # owner-1's owner: no answer
    book.record(tasks, RunOutcome(results, [tasks[3].task_id], ["owner-1"]), silent_nodes=["owner-1"])
    left = set(OWNERS)  # every node has left since
    book.check_quorum(left)  # 3 answered the batch: the quorum holds for it
    with pytest.raises(QuorumLost, match=r"only 0 of 4 owners are still taking part"):
        book.to_ask(tasks, silent_owners=left)  # before the next batch's releases
    refused = JobBook(PublicLimits(max_rows=2), quorum=1, owner_ids=OWNERS)
    refused.to_ask(tasks)
    refused.record(tasks, RunOutcome({tasks[0].task_id: Result(tasks[0].task_id, OWNERS[0], Refusal("policy", "no"))},
                                     [], []), silent_nodes=())  # fmt: skip
    with pytest.raises(QuorumLost):  # a refusal is no answer to count
        refused.check_quorum({OWNERS[0], *OWNERS[1:]})


def test_the_releases_asked_whose_answer_never_came_are_what_their_owners_may_have_spent_beyond_the_counted():
    """Walkthrough 10, W10-3: a job stopped mid-step reported ε 0 for the owners whose ledgers had debited that step:
    its report counts the answers that came. It also says what each owner asked for a release whose answer never came
    (lost, rejected, the job stopped first) may have spent; a refusal spent nothing, a release is counted."""
    tasks = _tasks()
    book = JobBook(PublicLimits(max_rows=2), owner_ids=OWNERS)
    book.to_ask(tasks)
    assert book.unanswered_epsilon() == {o: 2.0 for o in OWNERS}  # asked: nothing came yet
    results = {
        tasks[0].task_id: Result(tasks[0].task_id, OWNERS[0], _reply()),
        tasks[1].task_id: Result(tasks[1].task_id, OWNERS[1], _reply(rows=3)),  # rejected: it may have spent
        tasks[2].task_id: Result(tasks[2].task_id, OWNERS[2], Refusal("budget_exceeded", "spent")),
    }
    book.record(tasks, RunOutcome(results, [tasks[3].task_id], ["owner-1"]), silent_nodes=["owner-1"])
    assert book.epsilon_by_owner[OWNERS[0]] == 2.0
    assert book.unanswered_epsilon() == {OWNERS[1]: 2.0, OWNERS[3]: 2.0}
    assert book.to_report()["epsilon_unanswered_by_owner"] == {OWNERS[1]: 2.0, OWNERS[3]: 2.0}
    # a refusal `internal` may come after the debit (a failure computing the release, owner/core.py): it may have spent
    other = JobBook(PublicLimits(max_rows=2), owner_ids=OWNERS)
    other.to_ask(tasks[:1])
    other.record(
        tasks[:1],
        RunOutcome({tasks[0].task_id: Result(tasks[0].task_id, OWNERS[0], Refusal.of("internal"))}, [], []),
        [],
    )
    assert other.unanswered_epsilon() == {OWNERS[0]: 2.0} and other.epsilon_by_owner[OWNERS[0]] == 0.0
    book.to_ask(tasks)  # the same releases asked again (a re-formed ring reuses its release id): each counted once,
    # and the one whose answer came not at all: its owner answers from its record, spending nothing more (A35-4)
    assert book.unanswered_epsilon() == {o: 2.0 for o in OWNERS[1:]}


def test_an_undecodable_answer_and_a_live_node_that_never_answers_are_rejected():
    tasks = _tasks()
    book = JobBook(PublicLimits(max_rows=2), owner_ids=OWNERS)
    bad = serde.result_to_proto(Result(tasks[0].task_id, OWNERS[0], _reply()))
    bad.ncc_share.reports.data = b"\0" * 3  # not the 8 * d bytes its shape says
    good = serde.result_to_proto(Result(tasks[1].task_id, OWNERS[1], _reply()))
    results, rejected = decode_results([bad, good])
    assert [r.owner_id for r in results] == [OWNERS[1]] and [r.code for r in rejected] == ["undecodable"]
    outcome = RunOutcome(
        {tasks[1].task_id: results[0]},
        lost=[tasks[2].task_id, tasks[3].task_id],
        lost_nodes=["owner-1"],
        rejected={tasks[0].task_id: rejected[0]},
    )
    book.record(tasks, outcome, silent_nodes=())
    assert set(book.rejected) == {OWNERS[0], OWNERS[2]}  # owner-1's node is silent: lost, not rejected
    assert book.rejected[OWNERS[2]] == "no_answer: round r1"
    assert book.lost_nodes == {"owner-1"}


def test_the_dispatcher_ends_a_task_whose_answer_did_not_decode_at_once():
    d = Dispatcher()
    d.register("owner-0", [OwnerInfo(o) for o in OWNERS[:3]])
    tasks = _tasks()[:3]
    box: list = []
    runner = threading.Thread(target=lambda: box.append(d.run(tasks, timeout=60)))
    runner.start()
    d.pull("owner-0", 1.0)
    answers = [serde.result_to_proto(Result(t.task_id, t.owner_id, _reply())) for t in tasks]
    answers[2].ncc_share.reports.shape[:] = [5, D]  # the last answer does not decode
    results, rejected = decode_results(answers)
    d.push("owner-0", results, rejected)
    runner.join(5)
    assert not runner.is_alive(), "the round waited for an answer that had come, undecodable"
    (outcome,) = box
    assert set(outcome.results) == {tasks[0].task_id, tasks[1].task_id} and outcome.lost == []
    assert outcome.rejected[tasks[2].task_id].code == "undecodable"


# ---- registration ----------------------------------------------------------------------


def test_waiting_names_the_nodes_and_partition_owners_not_registered(tmp_path, caplog):
    for name in ("ca", "coordinator", "coordinator-key", "owner-0", "owner-0-key", "owner-1", "owner-10", "owner-2"):
        (tmp_path / f"{name}.pem").write_text("")
    assert certificate_nodes(tmp_path) == ("owner-0", "owner-1", "owner-2", "owner-10")
    d = Dispatcher()
    d.register("owner-0", [OwnerInfo(owner_id("owner-0", i)) for i in (0, 1, 2, 5)])
    expected = Expected(owners=8, nodes=("owner-0", "owner-1"), partition=8)
    assert missing(expected, d.owners(), d.nodes()) == (
        "no node registered yet with certificate owner-1; owner indices 3-4, 6-7 of the 8-owner partition not registered"
    )
    assert status(d, expected).startswith("4 of 8 owners registered (nodes: owner-0 with 4); no node registered")
    with caplog.at_level("INFO", logger="privfed.coordinator"):
        assert wait_for_registration(d, expected, timeout=0.35, every=0.1) == 4
    assert caplog.text.count("waiting for owners: 4 of 8 owners registered") >= 2  # at intervals


def test_waiting_names_the_nodes_of_the_last_run_not_back_since_a_restart():
    """Walkthrough 10, W10-6: after a restart the waiting line named only the nodes registered since, not the one of
    the last run it waited for (the service knows them from its store)."""
    d = Dispatcher()
    d.register("hosp-a", [OwnerInfo(owner_id("hosp-a", i)) for i in range(2)])
    d.known_before = frozenset({"hosp-a", "hosp-b"})
    line = status(d, Expected(owners=4))
    assert line.startswith("2 of 4 owners registered (nodes: hosp-a with 2, hosp-b not back since the restart)"), line
    d.register("hosp-b", [OwnerInfo(owner_id("hosp-b", i)) for i in range(2)])
    assert "not back" not in status(d, Expected(owners=4))


# ---- one node id, one live process -----------------------------------------------------


def _keyed(node: str, key: bytes, n: int = 2) -> list[OwnerInfo]:
    return [OwnerInfo(owner_id(node, i), x25519_public_key=key + bytes([i])) for i in range(n)]


def test_a_second_live_process_with_the_same_node_id_is_refused_and_a_dead_one_is_taken_over():
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])
    d.register("owner-0", _keyed("owner-0", b"first"), peer="ipv4:10.0.0.1:1111")
    d.register("owner-0", _keyed("owner-0", b"first"), peer="ipv4:10.0.0.1:2222")  # the same process reconnecting
    now[0] += IDENTITY_LIVENESS / 2
    with pytest.raises(
        NodeIdInUse, match=r"already registered by another live process \(connection ipv4:10.0.0.1:2222"
    ):
        d.register("owner-0", _keyed("owner-0", b"second"), peer="ipv4:10.0.0.2:3333")
    assert d.pull("owner-0", 0.0, peer="ipv4:10.0.0.1:2222") == ([], False)  # the first keeps its place
    now[0] += IDENTITY_LIVENESS + 0.1  # the first went silent: a restart takes over
    d.register("owner-0", _keyed("owner-0", b"second"), peer="ipv4:10.0.0.2:3333")
    with pytest.raises(RemoteProtocolError, match="register again"):  # the old connection is fenced
        d.pull("owner-0", 0.0, peer="ipv4:10.0.0.1:2222")
    with pytest.raises(NodeIdInUse):  # and, registering again, refused: the new process is alive
        d.register("owner-0", _keyed("owner-0", b"first"), peer="ipv4:10.0.0.1:2222")
    assert d.pull("owner-0", 0.0, peer="ipv4:10.0.0.2:3333") == ([], False)


# ---- a node that leaves (it stops cleanly) ------------------------------------------------

A, B = "ipv4:10.0.0.1:1111", "ipv4:10.0.0.2:2222"


def test_a_node_that_leaves_is_counted_no_more_at_once_and_again_once_it_registers(caplog):
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0])  # the clock stands still: nobody is silent for the node timeout
    d.register("owner-0", _keyed("owner-0", b"zero"), peer=A)
    d.register("owner-1", _keyed("owner-1", b"one", n=3), peer=B)
    with caplog.at_level("INFO", logger="privfed.coordinator"):
        d.leave("owner-1", B)
        d.leave("owner-1", B)  # said twice: one line
    assert sorted(d.live_owners()) == [owner_id("owner-0", i) for i in range(2)]
    assert d.silent_nodes() == {"owner-1"} and len(d.owners()) == 5  # registered still, as a silent node
    assert [r.getMessage() for r in caplog.records] == ["node owner-1 left: its 3 owner(s) are no longer counted"]
    with caplog.at_level("INFO", logger="privfed.coordinator"):  # its restart: new keys, taken at once, not fenced
        d.register("owner-1", _keyed("owner-1", b"again", n=3), peer="ipv4:10.0.0.2:3333")
    assert "fenced" not in caplog.records[-1].getMessage() and caplog.records[-1].levelname == "INFO"
    assert len(d.live_owners()) == 5 and d.silent_nodes() == set()


def test_only_the_connection_a_node_registered_from_can_say_it_leaves():
    """The servicer checks the certificate's name against the node id; a process on another connection (a fenced one,
    or a second one with the same certificate) cannot take a live node's owners away."""
    d = Dispatcher(clock=lambda: 0.0)
    d.register("owner-0", _keyed("owner-0", b"zero"), peer=A)
    with pytest.raises(RemoteProtocolError, match="register again"):
        d.leave("owner-0", B)
    with pytest.raises(RemoteProtocolError, match="has not registered"):
        d.leave("owner-1", B)
    assert len(d.live_owners()) == 2


def test_a_batch_waiting_on_a_node_that_leaves_ends_without_it_before_the_node_timeout():
    """As for a node silent for the node timeout, only sooner: its tasks are lost, the node is named lost."""
    now = [0.0]
    d = Dispatcher(clock=lambda: now[0], node_timeout=15.0)
    d.register("owner-0", _keyed("owner-0", b"zero", n=1), peer=A)
    d.register("owner-1", _keyed("owner-1", b"one", n=1), peer=B)
    t0, t1 = (Task(f"t{i}", owner_id(f"owner-{i}", 0), "r", RingMessageTask(b"")) for i in range(2))
    done: list[RunOutcome] = []
    runner = threading.Thread(target=lambda: done.append(d.run([t0, t1], timeout=60)))
    runner.start()
    assert [t.task_id for t in d.pull("owner-0", 5.0, peer=A)[0]] == ["t0"]
    d.push("owner-0", [Result("t0", t0.owner_id, Refusal("internal", "test"))])
    d.leave("owner-1", B)
    now[0] += 1.0  # past the batch's next liveness check, far from the node timeout
    runner.join(5)
    assert not runner.is_alive() and done[0].lost == ["t1"] and done[0].lost_nodes == ["owner-1"]


def test_the_servicer_answers_a_second_process_already_exists():
    from privfed.server.servicer import status_code

    assert status_code(NodeIdInUse("x")).name == "ALREADY_EXISTS"


# ---- a job its owners cannot do ---------------------------------------------------------


@pytest.mark.parametrize(
    "owners,flags,says",
    [
        (3, {}, "each of its 10 rounds asks a fresh group of 1 owner(s) to share (an owner shares once), 10 owners in "
         "all; use --rounds 1 or fewer (2 rounds: each round's error is summed securely over at least 2 owners, but "
         "3 owners over 2 rounds leave 1 to evaluate in a round)"),
        (10, {}, "each round's error is summed securely over at least 2 owners, but 10 owners over 10 rounds "
         "leave 1 to evaluate in a round; use --rounds 5 or fewer, --share-groups all, or more owners"),
        (40, {"group_size": 5}, "10 rounds asks a fresh group of 5 owner(s) to share (an owner shares once), 50 owners "
         "in all; use --rounds 8 or fewer, --group-size 4 or smaller"),
        # walkthrough 6, W6-13: 30 rounds of 1 sharer fit 30 owners, but leave a round 0 to evaluate: 15 is the most
        (30, {"n_rounds": 40}, "40 owners in all; use --rounds 15 or fewer (16 rounds: each round's error is summed"),
    ],
)  # fmt: skip
def test_a_boosting_job_its_owners_cannot_do_is_refused_in_the_flags_terms(owners, flags, says):
    from privfed.common.errors import ConfigError

    strategy = make_strategy("bdt", epsilon=1.0, n_classes=2, bounds=BOUNDS, **flags)
    with pytest.raises(ConfigError, match=f"--task bdt cannot run with {owners} owners") as err:
        strategy.check_feasible(owners)
    assert says in str(err.value)
    assert "group_size" not in str(err.value)  # the flags' names, not the code's
    most = int(re.search(r"use --rounds (\d+) or fewer", str(err.value)).group(1))
    make_strategy("bdt", epsilon=1.0, n_classes=2, bounds=BOUNDS, **{**flags, "n_rounds": most}).check_feasible(owners)
    with pytest.raises(ConfigError):  # the most that run: one more does not
        make_strategy("bdt", epsilon=1.0, n_classes=2, bounds=BOUNDS, **{**flags, "n_rounds": most + 1}).check_feasible(
            owners
        )
    strategy.check_feasible(20 if not flags else 100)


def test_a_boosting_job_asks_at_most_max_rounds():
    """Audit 26, A26-6: with share_groups all a plan holds rounds x owners entries, and nothing bounded the rounds a
    data user's job file asked (50 000 rounds over 1000 owners took 400 MB and 3.6 s of the service's job loop)."""
    from privfed.common.boosting.params import MAX_ROUNDS
    from privfed.common.errors import ConfigError

    make_strategy("bdt", epsilon=1.0, n_classes=2, bounds=BOUNDS, n_rounds=MAX_ROUNDS, share_groups="all")
    with pytest.raises(ConfigError, match=rf"--rounds must be an int in \[1, {MAX_ROUNDS}\], got 50000"):
        make_strategy("bdt", epsilon=1.0, n_classes=2, bounds=BOUNDS, n_rounds=50_000, share_groups="all")


def test_a_resumed_job_names_what_its_interrupted_run_had_owners_spend_that_it_does_not_count_again():
    """Walkthrough 14, W14-2: the interrupted run's report says what each owner may have spent; the resumed run
    names unanswered only what it neither counts nor already names (an owner that answers again from its record is
    counted once, never twice)."""
    tasks = _tasks()
    book = JobBook(PublicLimits(max_rows=2), owner_ids=OWNERS)
    before = {"epsilon_by_owner": {OWNERS[0]: 2.0, OWNERS[1]: 2.0}, "epsilon_unanswered_by_owner": {OWNERS[2]: 2.0}}
    book.carry(may_have_spent(before))
    assert book.unanswered_epsilon() == {OWNERS[0]: 2.0, OWNERS[1]: 2.0, OWNERS[2]: 2.0}
    book.to_ask(tasks[:3])
    results = {t.task_id: Result(t.task_id, t.owner_id, _reply()) for t in tasks[:1]}  # OWNERS[0] answers again
    book.record(tasks[:3], RunOutcome(results, [t.task_id for t in tasks[1:3]], []), silent_nodes=[])
    assert book.epsilon_by_owner[OWNERS[0]] == 2.0  # counted once: by this run's answer
    assert book.unanswered_epsilon() == {OWNERS[1]: 2.0, OWNERS[2]: 2.0}  # asked again, no answer: named once
    assert may_have_spent(None) == {} and may_have_spent({"epsilon_by_owner": {"a": float("inf")}}) == {}
