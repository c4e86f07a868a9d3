"""An owner node: dials out to the coordinator, hosts logical owners, answers tasks.

The node reconnects with jittered exponential backoff while the coordinator is not up (or
restarts), gives up with a clear error after ``connect_timeout`` seconds of continuous
failure, and stops cleanly at the coordinator's shutdown signal or on SIGTERM. A daemon (``privfed
owner --policy``: issue 26, item 2) serves job after job: it outlives the coordinator's shutdown
signal and its restarts, and stops on SIGTERM only. A node without a policy takes part in one job: a
service's next job it refuses, and exits (:meth:`OwnerNode._another_job`).

Nothing a coordinator sends can make the node exit (issue 9, item 7): each task is decoded alone
(``serde.task_or_refusal``) and answered by the owner core (:class:`~privfed.owner.core.OwnerCore`,
the one gate: validate, debit, compute, secure-sum mods); a bad task is refused and the rest of the
batch proceeds. The node only moves the core's input and output: pulls, pushes and relays.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import grpc
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.common.secagg.boxes import generate_private_key
from privfed.common.secagg.ring import Outbound
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.common.tasks import POLICY_DECLINED, JoinAccepted, Refusal, Result, Task, kind_of
from privfed.owner.core import OwnerCore
from privfed.owner.data import DataFileWatch
from privfed.owner.keys import OwnerKeys
from privfed.owner.ledger_seen import record_seen
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy, PolicyFile
from privfed.owner.push_parts import push_parts
from privfed.owner.registration import DeferredOwners, SignedOwners, signed_owner_infos
from privfed.owner.retry import CALL_REFUSED, FORGOTTEN, RETRYABLE, ConnectError, in_words, retry
from privfed.owner.session import SESSION_RETRY_BASE, SESSION_RETRY_CAP, NodeSession, stoppable
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.jobwire import job_info_from_proto
from privfed.proto.transport import (
    LEAVE_TIMEOUT,
    MAX_MESSAGE_BYTES,
    PULL_TIMEOUT,
    PULL_WAIT,
    PUSH_PULL_TIMEOUT,
    PUSH_TIMEOUT,
    REGISTER_TIMEOUT,
    RELAY_TIMEOUT,
    Backoff,
    TlsFiles,
    channel_credentials,
    channel_options,
    peer_identity,
)

_T = TypeVar("_T")
log = logging.getLogger("privfed.owner")
#: The rule a policy refusal's text names (:func:`privfed.owner.core.policy_rule`: "... released (rule X)").
_RULE = re.compile(r"\(rule (\w+)\)")

CHUNK = 200  # at most this many results per PushResults: keeps messages small
PUSH_EVERY = 1.0  # seconds: push at least this often during long work so the node stays visibly alive
#: What the coordinator answers a long poll with: PullTasks's, or a PushResults's that pulled.
Poll = pb.PullTasksResponse | pb.PushResultsResponse
#: The most earlier jobs whose answers a daemon keeps until it hears how they ended (:meth:`OwnerNode._hear_ended`).
ENDED_KEPT = 16


def _without_result(job: str, node_id: str, answered: int) -> str:
    """The line of a job that ended without its result after the node answered in it (``job``: "job ID")."""
    return (
        f"{job} ended without its result at the coordinator (failed or stopped; its report says why), after node "
        f"{node_id} answered {answered} task(s); what was released is debited in the ledger"
    )


class EndedJobs:
    """The jobs the coordinator said ended, heard by the node's main thread or a batch's heartbeat (walkthrough 11,
    W11-9): the ids of the last :data:`ENDED_KEPT` (a batch of one stops), and those heard outside the main loop's
    replies, for it to log (:meth:`OwnerNode._hear_ended`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: deque[str] = deque(maxlen=ENDED_KEPT)
        self._unlogged: list[pb.JobEnded] = []

    def note(self, ended: Iterable[pb.JobEnded], *, log: bool) -> None:
        """Keep ``ended``; ``log``: also for the main loop to log (heard by a push or the heartbeat)."""
        with self._lock:
            for e in ended:
                self._ids.append(e.job_id)
                if log:
                    self._unlogged.append(e)
            del self._unlogged[:-ENDED_KEPT]  # as many as the coordinator keeps for a node

    def over(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._ids

    def take_unlogged(self) -> list[pb.JobEnded]:
        with self._lock:
            taken, self._unlogged = self._unlogged, []
            return taken


class OwnerNode:
    def __init__(
        self,
        *,
        node_id: str,
        target: str,
        tls: TlsFiles | None,
        owners: list[LocalOwner] | DeferredOwners,
        ledger: Ledger,
        connect_timeout: float = 60.0,
        target_name_override: str | None = None,
        allow_clear_labels: bool = False,
        work_rows: int | None = None,
        owner_policy: OwnerPolicy | None = None,
        daemon: bool = False,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        session: bool = True,
        data_watch: DataFileWatch | None = None,
        policy_file: PolicyFile | None = None,
        stop_event: threading.Event | None = None,
    ):
        self.node_id = node_id
        #: The policy's file (``--policy``), read again at a new job when it changed; it overrides ``owner_policy``.
        self._policy_file = policy_file
        if policy_file is not None:
            owner_policy = policy_file.policy
        #: The data file the rows were read from (``--data``), checked at each new job and registration.
        self._data_watch = data_watch
        #: The last job whose start was logged (:meth:`_take_job`), and what the node answered in it.
        self._job_logged: str | None = None
        #: What the node answered in the jobs it was asked in before the current one, kept until it hears how they
        #: ended (:meth:`_hear_ended`; at most ``ENDED_KEPT`` of them).
        self._answered_in: dict[str, int] = {}
        #: The current job, once the node heard how it ended: a job is logged as ended once, however often the
        #: coordinator says so (audit 28, A28-1b: each repeat in a reply was a log line).
        self._job_heard: str | None = None
        #: The jobs the coordinator said ended (:class:`EndedJobs`): a batch of one stops (:meth:`_answer_in_order`).
        self._ended = EndedJobs()
        self._released = 0
        self._refused: Counter[str] = Counter()
        #: Why a node of one job exits 2 though the coordinator ended the job: it released nothing, every task
        #: refused, or the job failed at the coordinator (else None).
        self.job_unfinished: str | None = None
        #: Whether to push and poll over a Session stream (False: unary calls only).
        self._use_session = session
        self._session: NodeSession | None = None
        self._session_backoff = Backoff()  # between sessions that break in a row
        #: A coordinator that refused a session (UNIMPLEMENTED: none, or all it serves are open) gets
        #: unary calls until then (time.monotonic()), growing between refusals in a row.
        self._unary_until = 0.0
        self._refused_backoff = Backoff(base=SESSION_RETRY_BASE, cap=SESSION_RETRY_CAP)
        self._owner_policy = owner_policy
        self._daemon = daemon
        #: The job the coordinator announced with the tasks last taken (None: none announced).
        self._job: JobInfo | None = None
        #: The first job a node without a policy took part in (:meth:`_another_job`); None: none yet.
        self._first_job: str | None = None
        self._target = target
        self._tls = tls
        self._deferred = owners if isinstance(owners, DeferredOwners) else None
        self._owner_ids = list(owners.owner_ids) if isinstance(owners, DeferredOwners) else [o.owner_id for o in owners]
        #: The node's fatal error (its rows do not fit the federation schema), or None.
        self.fatal: str | None = None
        self._schema_digest = ""  # the digest of the schema the deferred owners' rows were read by ("": none)
        self._ledger = ledger
        self._allow_clear_labels = allow_clear_labels
        self._work_rows = work_rows
        self._connect_timeout = connect_timeout
        self._max_message_bytes = max_message_bytes  # the coordinator's bound: registrations above it go in parts
        self._override = target_name_override
        self.stop_event = stop_event or threading.Event()  # the command line sets it on SIGTERM
        self._unsent: list = []
        # One X25519 key per logical owner for end-to-end ring messages (privfed.owner.registration).
        self._x25519 = {oid: generate_private_key() for oid in self._owner_ids}
        self._keys = OwnerKeys(self._x25519, tls.read()[0] if tls is not None else None)
        self._signed: SignedOwners | None = None  # what the node registers (made at its first registration)
        #: Registrations are made one at a time (a batch's heartbeat registers too: :meth:`_heartbeat`), and counted:
        #: a thread told the coordinator forgot the node registers only if no other did meanwhile.
        self._registering = threading.RLock()
        self._registrations = 0
        signer = load_pem_private_key(tls.read()[2], password=None) if tls is not None else None
        self._sign = None if signer is None else lambda owner, session, pk: sign_public_key(signer, pk, owner, session)
        #: The owner core (None until a node with its own file has loaded its rows).
        self._core = None if isinstance(owners, DeferredOwners) else self._make_core(list(owners))

    def _make_core(self, owners: list[LocalOwner]) -> OwnerCore:
        return OwnerCore(
            owners,
            self._ledger,
            keys=self._keys,
            allow_clear_labels=self._allow_clear_labels,
            sign=self._sign,
            owner_policy=self._owner_policy,
            work_rows=self._work_rows,
            coordinator=peer_identity(self._target, self._tls, self._override),  # what its ledger records
            on_debited=lambda: record_seen(self._ledger),  # before the releases leave: a crash does not lose them
        )

    def _channel(self) -> grpc.Channel:
        opts = channel_options(self._override)
        if self._tls is None:
            return grpc.insecure_channel(self._target, options=opts)
        return grpc.secure_channel(self._target, channel_credentials(self._tls), options=opts)

    def _retry(self, call: Callable[[], _T], what: str) -> _T | None:
        return retry(call, what, target=self._target, connect_timeout=self._connect_timeout, stop_event=self.stop_event)

    def _register(self, stub: pb_grpc.CoordinatorStub) -> None:
        """Register (again), after closing the node's session: one opened before is over with the registration it
        was opened under (a restarted coordinator's died with it, and its next exchange would fail and register
        the node a second time: a walkthrough saw each node registered twice after a service restart)."""
        with self._registering:
            if self._session is not None:
                self._session.close()
                self._session = None
            if self._signed is None:  # the same keys on every (re-)registration: signed once
                self._signed = signed_owner_infos(self.node_id, self._owner_ids, self._x25519, self._tls)
            requests = self._signed.requests(self.node_id, self._max_message_bytes)

            def send() -> pb.RegisterNodeResponse:  # every part again on a retry (part 0 starts it over)
                for request in requests:
                    reply = stub.RegisterNode(request, timeout=REGISTER_TIMEOUT)
                return reply

            reply = self._retry(send, "register")
            if reply is not None:
                self._registrations += 1
                log.info("node %s registered %d owner(s) with %s", self.node_id, len(self._owner_ids), self._target)
                self._receive_schema(reply.schema, stub)
                if self._data_watch is not None:
                    self._data_watch.check()

    def _register_again(self, stub: pb_grpc.CoordinatorStub, seen: int) -> None:
        """Register again, unless another thread did since it saw ``seen`` registrations (both were told the
        coordinator forgot the node: once is enough)."""
        with self._registering:
            if self._registrations == seen:
                self._register(stub)

    def _receive_schema(self, text: str, stub: pb_grpc.CoordinatorStub) -> None:
        """Load deferred owners' rows against the coordinator's schema (once: a re-registration
        keeps them). A schema that does not parse, or rows that do not fit it, make the node fatal; so does a
        re-registration that brings another schema than the one the rows were read by (a service restarted
        with another schema file: the node released on, its rows read by the old one, until a walkthrough
        saw it; it now refuses every task, as a node started against that schema would). The node keeps calling
        while it reads the rows (:meth:`_beating`; walkthrough 11, W11-4: 2 000 000 rows took 40 s, and the
        coordinator called the node silent and counted its owners out meanwhile)."""
        if self._deferred is None or self.fatal is not None:
            return
        try:
            schema = FederationSchema.parse(text, source="the coordinator's federation schema") if text else None
            digest = "" if schema is None else schema.digest()
            if self._core is not None:
                if digest != self._schema_digest:
                    raise ConfigError(
                        f"the coordinator's federation schema changed (sha256 {self._schema_digest[:12] or 'none'} "
                        f"-> {digest[:12] or 'none'}) since this node read its rows by it; nothing more is released"
                    )
                return
            with self._beating(stub, register=False):  # the registration in hand holds the lock a new one takes
                owners = self._deferred.load(schema, self._ledger)
                if sorted(o.owner_id for o in owners) != sorted(self._owner_ids):
                    raise ConfigError("the loaded owners are not the registered ones")  # a bug of the caller
                self._core = self._make_core(owners)  # rows above --work-rows: the operator's error, as off the schema
            self._schema_digest = digest
        except ConfigError as exc:
            self.fatal = str(exc)
            log.error("%s; this node refuses every task (schema_mismatch) and exits", exc)
            return
        log.info("rows of %d owner(s) fit the federation schema", len(owners))

    def _refuse_all(
        self, stub: pb_grpc.CoordinatorStub, tasks: Iterable[Task | Result], refusal: Refusal | None = None
    ) -> bool:
        """Answer every task pulled with ``refusal`` (a fatal node's ``schema_mismatch`` by default), but a ring hop,
        which gets no answer of its own (its kind has no replies); True once at least one was refused (the
        coordinator now knows), so the node may exit."""
        refusal = Refusal.of("schema_mismatch") if refusal is None else refusal
        refused = [
            Result(t.task_id, t.owner_id, refusal) for t in tasks if isinstance(t, Task) and kind_of(t.spec).replies
        ]
        if refused:
            self._push(stub, refused)
        return bool(refused)

    def _another_job(self, stub: pb_grpc.CoordinatorStub, reply: Poll) -> bool:
        """Whether a node without a policy (one job: README, "privfed serve") was just asked for a second job's
        releases: it then refuses them (``policy``, the reason in words) and exits; a service queues job after
        job for every registered node, and such a node's operator agreed to one."""
        if self._daemon or self._job is None or not reply.tasks:
            return False
        if self._first_job is None:
            self._first_job = self._job.job_id
        if self._job.job_id == self._first_job:
            return False
        why = f"node {self.node_id} takes part in one job ({self._first_job}) without --policy, and has exited"
        self._refuse_all(stub, self._decode(reply.tasks), Refusal.of(POLICY_DECLINED, why))
        log.info("job %s is not this node's job (%s; without --policy a node takes part in one); node %s exits",
                 self._job.job_id, self._first_job, self.node_id)  # fmt: skip
        return True

    def _push(self, stub: pb_grpc.CoordinatorStub, results: list[Result]) -> None:
        """Push the results not yet acknowledged and ``results``, in order, in parts that each fit the
        coordinator's message bound (:func:`push_parts`). A coordinator that forgot the node (it restarted:
        :data:`FORGOTTEN`) gets the part again once the node registered again. A part the coordinator refuses
        otherwise is dropped, logged, and the parts after it still go: each call is judged alone (a result too
        large for any message refuses its part only)."""
        self._unsent.extend(results)
        for n, request in push_parts(self.node_id, self._unsent, self._max_message_bytes):
            try:
                self._push_part(stub, request)
            except ConnectError as exc:
                if exc.code not in CALL_REFUSED:  # self._unsent keeps this part and the rest
                    raise
                log.warning("coordinator refused %d result(s), dropped (already debited): %s", n, exc)
            del self._unsent[:n]

    def _push_part(self, stub: pb_grpc.CoordinatorStub, request: pb.PushResultsRequest) -> None:
        """One part of :meth:`_push`, retried, and sent again once the node registered again if the coordinator
        forgot it (:data:`FORGOTTEN`)."""

        def call() -> pb.PushResultsResponse:
            return stub.PushResults(request, timeout=PUSH_TIMEOUT)

        seen = self._registrations
        try:
            reply = self._retry(call, "push")
        except ConnectError as exc:
            if exc.code != FORGOTTEN:
                raise
            log.info("the coordinator does not know node %s (%s); it registers again", self.node_id, exc)
            self._register_again(stub, seen)  # unless the batch's heartbeat did meanwhile
            reply = self._retry(call, "push")
        if reply is not None:
            self._note_ended(reply.ended)

    def _push_and_pull(self, stub: pb_grpc.CoordinatorStub, results: list[Result]) -> Poll | None:
        """Push the last results of a pass (or none: a poll) and take the node's next tasks in the same
        exchange (a long poll, as PullTasks: one message pair per node per round, issue 27), over the
        node's Session stream, or PushResults calls without one; results that do not fit one message
        go first in parts of their own (:func:`push_parts`), the last part takes the tasks. If an
        exchange fails, the results it and the later parts carried go again as pushes alone
        (:meth:`_push`, retried) and None is returned: the caller polls. After a failure that may have
        lost the answer, the node registers again, so the coordinator queues its unanswered tasks once
        more, as after a failed PullTasks, and it does so before those pushes: a coordinator that restarted
        meanwhile knows the node only then (a walkthrough's nodes pushed first, were refused "has not registered"
        and dropped their results); a broken session is opened again with the next exchange."""
        self._unsent.extend(results)
        parts = push_parts(
            self.node_id, self._unsent, self._max_message_bytes, pull=True, wait_ms=int(PULL_WAIT * 1000)
        )
        try:
            if self._session is None and self._sessions_on():
                self._session = NodeSession(stub, PUSH_PULL_TIMEOUT, self.stop_event)
            for k, (n, request) in enumerate(parts):
                reply = (
                    self._session.exchange(request)
                    if self._session is not None
                    else stoppable(stub.PushResults, request, timeout=PUSH_PULL_TIMEOUT, stop=self.stop_event)
                )
                del self._unsent[:n]  # recorded by the coordinator
                if k < len(parts) - 1:  # a part before the last: the jobs it heard ended (the last one's: the caller)
                    self._note_ended(reply.ended)
        except grpc.RpcError as exc:
            broken = self._end_session(exc)
            if self.stop_event.is_set() and not self._unsent:  # stopping, with nothing to deliver: no more calls
                return None
            if exc.code() in RETRYABLE:
                log.info(
                    "lost the coordinator while sending answers and asking for tasks: %s; sending the answers on their "
                    "own",
                    in_words(exc.code()),
                )
            else:  # walkthrough 11, W11-10: a revoked node's refusal read "lost the coordinator ...: PERMISSION_DENIED"
                log.info("the coordinator refused this node's answers and request for tasks: %s: %s",
                         exc.code().name, exc.details())  # fmt: skip
            # A call or session that broke may have taken tasks whose answer never came: registering
            # again queues them once more (a call the coordinator refused took nothing).
            if broken or exc.code() in RETRYABLE or exc.code() == FORGOTTEN:
                self._register(stub)
            if self._unsent:
                self._push(stub, [])
            return None
        self._session_backoff.attempt = 0
        if self._session is not None:
            self._refused_backoff.attempt = 0
        return reply

    def _sessions_on(self) -> bool:
        """Whether to push and poll over a Session stream now."""
        return self._use_session and time.monotonic() >= self._unary_until

    def _end_session(self, exc: grpc.RpcError) -> bool:
        """Close a broken session (True if there was one the coordinator serves). A coordinator that
        refuses sessions (UNIMPLEMENTED: it has none, or every one it serves is open; it took nothing)
        gets unary calls for a while (``_refused_backoff``, up to SESSION_RETRY_CAP s), then a session again."""
        if self._session is None:
            return False
        self._session.close()
        self._session = None
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
            delay = self._refused_backoff.next_delay()
            self._unary_until = time.monotonic() + delay
            log.info("the coordinator serves no session now (%s); unary calls for %.1f s", exc.details(), delay)
            return False
        self.stop_event.wait(
            self._session_backoff.next_delay()
        )  # a session that breaks at once is not reopened at once
        return True

    def _relay(self, stub: pb_grpc.CoordinatorStub, outbounds: Sequence[Outbound]) -> list[Task | Result]:
        """Send sealed envelopes; returns the tasks the coordinator had queued for this node."""
        if not outbounds:
            return []
        request = pb.RelayRequest(
            node_id=self.node_id, envelopes=[pb.Envelope(recipient=o.recipient, data=o.to_bytes()) for o in outbounds]
        )
        try:
            reply = self._retry(lambda: stub.Relay(request, timeout=RELAY_TIMEOUT), "relay")
        except ConnectError as exc:
            if exc.code not in CALL_REFUSED:
                raise
            log.warning("coordinator refused %d ring envelope(s), dropped: %s", len(outbounds), exc)
            return []
        if reply is None:
            return []
        self._take_job(reply)
        return self._decode(reply.tasks)

    def _take_job(self, reply: Poll | pb.RelayResponse) -> None:
        """Note the job a response's tasks belong to; a malformed announcement counts as none (a
        node with a policy then refuses the tasks: rule ``unannounced``)."""
        if not reply.tasks:
            return
        try:
            self._job = job_info_from_proto(reply.job, reply.HasField("job"))
        except RemoteProtocolError as exc:
            log.warning("%s", exc)
            self._job = None
        if self._job is not None and self._job.job_id != self._job_logged and (self._daemon or not self._job_logged):
            self._new_job(self._job)  # a node of one job: its first job only (it refuses the next and exits)

    def _new_job(self, job: JobInfo) -> None:
        """A job's first tasks: one INFO line naming it (walkthrough 4, S2: a daemon's log said nothing per job),
        and a check of the data file the rows were read from (:class:`~privfed.owner.data.DataFileWatch`)."""
        if self._job_logged is not None and self._job_heard != self._job_logged:
            self._answered_in[self._job_logged] = self._released
            for old in list(self._answered_in)[:-ENDED_KEPT]:
                del self._answered_in[old]
        self._job_logged = job.job_id
        self._released, self._refused = 0, Counter()
        if self._policy_file is not None and (policy := self._policy_file.current()) is not self._owner_policy:
            self._owner_policy = policy  # before any of the job's tasks is judged
            if self._core is not None:
                self._core.owner_policy = policy
        log.info(
            "job %s%s: task %s, epsilon %g, delta %g per owner; node %s is asked to take part",
            job.job_id,
            f" of data user {job.data_user}" if job.data_user else "",
            job.task,
            job.epsilon,
            job.delta,
            self.node_id,
        )
        if self._data_watch is not None:
            self._data_watch.check()

    @staticmethod
    def _decode(protos: Iterable[pb.Task]) -> list[Task | Result]:
        """Each task decoded alone: a Task, or the Result refusing a task that cannot be decoded."""
        items: list[Task | Result] = []
        for m in protos:
            task, refusal = serde.task_or_refusal(m)
            if task is not None:
                items.append(task)
            elif refusal is not None:
                reason = refusal.payload.message if isinstance(refusal.payload, Refusal) else refusal.payload
                log.warning("refusing task %s for %s: %s", m.task_id, m.owner_id, reason)
                items.append(refusal)
        return items

    @contextlib.contextmanager
    def _beating(self, stub: pb_grpc.CoordinatorStub, *, register: bool = True) -> Iterator[None]:
        """:meth:`_heartbeat` while the block runs (a long batch, or the rows read after registering)."""
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(stub, done, register), daemon=True)
        beat.start()
        try:
            yield
        finally:
            done.set()
            beat.join()

    def _heartbeat(self, stub: pb_grpc.CoordinatorStub, done: threading.Event, register: bool = True) -> None:
        """While a long batch is computed, an empty push every PUSH_EVERY s keeps the node visibly alive. A
        coordinator that does not know the node (it restarted: :data:`FORGOTTEN`) gets it registered again at once,
        the batch still in hand (walkthrough 11, W11-2: a node 200 000 rows an owner was refused once a second, a
        WARNING each in the service's log, and registered again only when its batch ended, a minute later; the
        queued job waited for it meanwhile). The batch's last exchange comes after the heartbeat ends
        (:meth:`_answer`), so a registration here never closes a session in use. ``register`` False: a refusal is
        left to the node's next call (the heartbeat of a registration's own work). The heartbeat hears which jobs
        ended (:meth:`_note_ended`): a batch of one stops (walkthrough 11, W11-9)."""
        request = pb.PushResultsRequest(node_id=self.node_id, hear_ended=True)
        while not done.wait(PUSH_EVERY):
            seen = self._registrations
            try:
                self._note_ended(stub.PushResults(request, timeout=PUSH_TIMEOUT).ended)
            except grpc.RpcError as exc:
                if exc.code() != FORGOTTEN or not register:
                    log.debug("heartbeat failed: %s", exc.code().name)
                    continue
                log.info("the coordinator does not know node %s (it restarted); it registers again, its batch "
                         "still in hand", self.node_id)  # fmt: skip
                try:
                    self._register_again(stub, seen)
                except ConnectError as err:  # it gave up (stopped): the batch's own pushes try again
                    log.debug("registering from the heartbeat failed: %s", err)

    def _answer(self, stub: pb_grpc.CoordinatorStub, tasks: Iterable[Task | Result]) -> Poll | None:
        """Answer ``tasks`` (:meth:`_answer_in_order`); returns the coordinator's answer to the
        last push if it brought the next tasks (None: the node polls)."""
        tasks = list(tasks)
        if len(tasks) <= 1:  # one task or a relayed ring hop: answered in milliseconds
            ready = self._answer_in_order(stub, tasks)
        else:
            with self._beating(stub):
                ready = self._answer_in_order(stub, tasks)
        return self._push_and_pull(stub, ready) if ready else None

    def _answer_in_order(self, stub: pb_grpc.CoordinatorStub, tasks: list[Task | Result]) -> list[Result]:
        """Answer tasks batch by batch through the owner core (``OwnerCore.chunk_end``), relaying each
        batch's envelopes at once; tasks the relay call brings back are answered in this same pass.
        Results are pushed in chunks of at most CHUNK or every PUSH_EVERY s; the results not pushed yet are
        returned, for the last push, which also takes the node's next tasks (:meth:`_answer`)."""
        core = self._core
        if core is None:  # registered, rows not loaded yet: nothing can be answered
            return []
        ready: list[Result] = []
        last_push, i = time.monotonic(), 0
        seen: set[str] = set()  # task ids of this pass: a copy is refused, never answered twice
        while i < len(tasks):
            if self.stop_event.is_set():
                log.info("stopping: %d task(s) left unanswered, nothing released for them", len(tasks) - i)
                break
            if self._job_ended():
                log.info("job %s ended at the coordinator; node %s stops its batch: %d task(s) left unanswered, "
                         "nothing released for them, and %d answer(s) made not sent", self._job_id(), self.node_id,
                         len(tasks) - i, len(ready))  # fmt: skip
                return []
            end = core.chunk_end(tasks, i)
            answer = core.answer(tasks[i:end], seen=seen, job=self._job)
            self._count(answer.results)
            ready += answer.results
            tasks += self._relay(stub, answer.outbound)
            i = end
            if len(ready) >= CHUNK or (ready and time.monotonic() - last_push >= PUSH_EVERY):
                self._push(stub, ready)
                ready, last_push = [], time.monotonic()
        return ready

    def _note_ended(self, ended: Iterable[pb.JobEnded]) -> None:
        """Keep the jobs a push or the batch's heartbeat heard ended, for the batch loop and :meth:`_hear_ended`."""
        self._ended.note(ended, log=True)

    def _job_ended(self) -> bool:
        """Whether the coordinator said the current batch's job is over (walkthrough 11, W11-9: a node went on for 4
        minutes with the releases of a job its restarted service had failed, and the next job waited for it)."""
        return self._job is not None and self._ended.over(self._job.job_id)

    def _job_id(self) -> str:
        return self._job.job_id if self._job is not None else "(unannounced)"

    def _count(self, results: Iterable[Result]) -> None:
        """Count the job's answers: releases (and a secure sum's answers), and refusals by code. An acceptance of
        the job (its accept round) is neither: nothing was released. The policy's declines of a batch are one INFO
        line (walkthrough 5, F11: a WARNING per owner, a thousand per job for a node of a thousand shards)."""
        declined: Counter[str] = Counter()
        for r in results:
            if isinstance(r.payload, Refusal):
                self._refused[r.payload.code] += 1
                if r.payload.code == POLICY_DECLINED:
                    rule = _RULE.search(r.payload.message)
                    declined[f"rule {rule.group(1)}" if rule else r.payload.message] += 1
            elif not isinstance(r.payload, JoinAccepted):
                self._released += 1
        if declined:  # walkthrough 6, W6-6: one line, by rule, not the refusal's text repeated with a bare count
            log.info(
                "job %s: this node's policy declines it (%s); nothing released",
                self._job_id(),
                ", ".join(f"{why}: {n} owner(s)" for why, n in sorted(declined.items())),
            )

    def _job_over(self, failed: bool) -> int:
        """A node of one job told that its job is over: 0, or 2 if it released nothing, every task it was sent
        refused (walkthrough 4, m6: it exited 0 with every owner's budget spent and the job failed, and a cron job
        could not tell), or if it released in a job the coordinator says ended without its result (``failed``:
        such a node exited 0 too). A node the job never asked anything exits 0, as when a coordinator waiting
        for its owners is stopped. Local only: the coordinator already has the refusals."""
        if self.fatal is not None:
            return 2
        job = "its job" if self._job is None else "job " + self._job.job_id
        if self._released == 0 and self._refused:
            codes = ", ".join(f"{code}: {n}" for code, n in self._refused.most_common())
            self.job_unfinished = (
                f"node {self.node_id} released nothing in {job}"
                f": every one of the {sum(self._refused.values())} task(s) it was sent was refused ({codes})"
            )
        elif failed and self._released:
            self.job_unfinished = _without_result(job, self.node_id, self._released)
        if self.job_unfinished is not None:
            log.error("%s", self.job_unfinished)
            return 2
        return 0

    def _hear_ended(self, reply: Poll) -> None:
        """Log how the jobs this node was asked in ended, as ``privfed serve`` tells its nodes (walkthrough 7, W7-11:
        a daemon never said that a job its owners paid for failed; a node of one job did). A WARNING for a job
        that ended without its result after the node released in it: its owners paid for nothing. Each such job
        heard, what the ledger holds is recorded beside it (:mod:`~privfed.owner.ledger_seen`)."""
        self._ended.note(reply.ended, log=False)
        heard = False
        for ended in [*self._ended.take_unlogged(), *reply.ended]:
            if ended.job_id == self._job_logged:
                if self._job_heard == ended.job_id:
                    continue
                self._job_heard, answered = ended.job_id, self._released
            elif ended.job_id in self._answered_in:
                answered = self._answered_in.pop(ended.job_id)
            else:  # a job this process was not asked in (a restarted service tells its last run's nodes of one it failed)
                continue
            heard, job = True, f"job {ended.job_id}"
            if ended.failed and answered:
                log.warning("%s", _without_result(job, self.node_id, answered))
            elif ended.failed:
                log.info("%s ended without its result at the coordinator; node %s released nothing in it", job,
                         self.node_id)  # fmt: skip
            elif answered:
                log.info("%s done at the coordinator; node %s answered %d task(s) in it", job, self.node_id, answered)
            else:
                log.info("%s done at the coordinator; node %s released nothing in it", job, self.node_id)
        if heard:
            record_seen(self._ledger)

    def _pull(self, stub: pb_grpc.CoordinatorStub) -> pb.PullTasksResponse | None:
        """A long poll for the node's tasks; None after a failed one (the node registered again), or once the node
        stops (it gives the poll up at once: :func:`~privfed.owner.session.stoppable`)."""
        try:
            request = pb.PullTasksRequest(node_id=self.node_id, wait_ms=int(PULL_WAIT * 1000))
            return stoppable(stub.PullTasks, request, timeout=PULL_TIMEOUT, stop=self.stop_event)
        except grpc.RpcError as exc:
            if self.stop_event.is_set():  # given up, or failed while the node stops: nothing more to ask
                return None
            if exc.code() == FORGOTTEN:  # coordinator restarted and forgot us
                self._register(stub)
                return None
            if exc.code() not in RETRYABLE:
                raise ConnectError(f"pull refused: {exc.code().name}: {exc.details()}") from exc
            log.info("lost the coordinator (%s); reconnecting", exc.code().name)
            self._register(stub)
            return None

    def run(self) -> int:
        """Serve until the coordinator says the job is over (0; 2 if the node released nothing, every task
        refused: :meth:`_job_over`) or SIGTERM (0); a fatal node (see :class:`DeferredOwners`) returns 2 once it has
        refused a batch of tasks or is stopped. On any of these the node tells the coordinator it leaves
        (:meth:`_leave`); a node that raises (it lost the coordinator for good) does not.

        The node's next tasks come with the answer to its last push of a batch, or else from a long
        poll (:meth:`_push_and_pull`: over the node's Session stream, or PullTasks without one)."""
        with self._channel() as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            try:
                code = self._serve(stub)
            finally:
                if self._session is not None:
                    self._session.close()
            self._leave(stub)
            return code

    def _leave(self, stub: pb_grpc.CoordinatorStub) -> None:
        """Tell the coordinator this node is stopping: a push with ``leaving`` and nothing else (it carries nothing
        of any owner's), sent on the connection the node registered from, the only one it is taken from. The
        coordinator then counts the node's owners no more at once: without it, it counted them for its node timeout,
        and a job starting meanwhile counted them, asked them and waited for them (a walkthrough's boosting job lost
        its evaluation group so). One try, a short deadline: a coordinator that does not hear it counts the owners
        until its node timeout, as those of a node that lost its connection. A fatal node (its rows do not fit the
        federation schema) says so (``schema_mismatch``, the fact its refusals carry: walkthrough 11, W11-3)."""
        leaving = pb.PushResultsRequest(node_id=self.node_id, leaving=True, schema_mismatch=self.fatal is not None)
        try:
            stub.PushResults(leaving, timeout=LEAVE_TIMEOUT)
        except grpc.RpcError as exc:
            log.info("node %s could not tell the coordinator it leaves (%s); its owners are counted until the "
                     "coordinator's node timeout", self.node_id, exc.code().name)  # fmt: skip
            return
        log.info("node %s told the coordinator it leaves", self.node_id)

    def _serve(self, stub: pb_grpc.CoordinatorStub) -> int:
        self._register(stub)
        reply: Poll | None = None
        while not self.stop_event.is_set():
            if self.fatal is not None and self._daemon:  # its rows fit no job of this service (at its first
                # registration or a later one): it stops now, not at the next job
                log.info("node %s stops: it can answer no job of this service (%s)", self.node_id, self.fatal)
                return 2
            if reply is None:
                reply = self._push_and_pull(stub, []) if self._sessions_on() else self._pull(stub)
                if reply is None:
                    continue
            self._hear_ended(reply)
            if reply.shutdown and self._daemon:
                log.info("the coordinator stopped; node %s waits for it (a daemon until SIGTERM)", self.node_id)
                if self.stop_event.wait(PULL_WAIT):
                    break  # stopped meanwhile: not one more registration with a coordinator that is gone
                self._register(stub)
                reply = None
                continue
            if reply.shutdown:
                log.info("coordinator ended the job; node %s exits", self.node_id)
                return self._job_over(reply.job_failed)
            self._take_job(reply)
            if self._another_job(stub, reply):
                return 0
            if self.fatal is not None:
                if self._refuse_all(stub, self._decode(reply.tasks)):
                    return 2
                reply = None
                continue
            reply = self._answer(stub, self._decode(reply.tasks))
        log.info("node %s stopping on request", self.node_id)
        return 0 if self.fatal is None else 2
