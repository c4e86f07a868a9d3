"""A hostile coordinator for issue 9: the real wire schema, the real certificates, honest owner
node processes, and every choice a coordinator makes (which tasks, which rings, which relay)
in the test's hands.

The server implements ``privfed_pb2_grpc.CoordinatorServicer`` with mTLS under the
coordinator's own certificate, so an honest ``privfed owner`` process cannot tell it from the
real coordinator. It

* records every registration (the raw ``RegisterNodeRequest``, and the verified CN of the caller);
* hands out whatever raw ``pb.Task`` protos a test queues (so a test can send malformed ones:
  wrong byte counts, duplicate task ids, absurd ε, unknown fields);
* answers a push that pulls (``PushResultsRequest.pull``: a node's last push of a batch) with the
  node's queued tasks, as a ``PullTasks`` would, after whatever ``on_push`` hands back for it; can
  make the next ``fail_push_pulls`` such pushes fail (UNAVAILABLE) before recording anything;
* records every pushed ``pb.Result`` and every relayed envelope, and routes envelopes to the
  recipient's node (``relay=True``) or refuses them (``relay=False``);
* answers ``GetModel`` with whatever linear stage the test chose and records ``Predict`` rows.

Helpers build ``BoostEvaluate`` tasks for chosen rings from the keys and certificates the nodes
registered, run one ring session and return its total, and read an owner's ledger (a copy of the
SQLite file, so the running owner is not disturbed) to compare with what left.

Nothing here is mocked: the owner side is the real ``privfed owner`` command in its own process.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np

from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.merkle import MerkleTree
from privfed.common.secagg.ring import Inbound
from privfed.common.secagg.signed_keys import key_tree
from privfed.deploy.commands import owner_argv
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto.transport import TlsFiles, server_credentials, server_options

#: Budget of every honest owner in these tests (issue 9: "budget ε=2").
BUDGET = 2.0
#: How long a test waits for an honest node to do something before it fails.
WAIT = 30.0
#: Grid of the wire's ``Reports`` (proto/serde.py GRID_BITS).
GRID_BITS = 20


# ----------------------------------------------------------------------------- certificates
def make_federation_certs(out: Path, owners: int) -> Path:
    """``privfed certs``'s function (deploy/certs.py ``make_certs``) into ``out``."""
    from privfed.deploy.certs import make_certs

    return Path(make_certs(out, owners=owners))


def tls_dir(certs: Path, name: str) -> Path:
    """The directory a service named ``name`` is given: its own subdirectory if the certificate
    layout has one (ca.pem and only that party's pair), else the flat directory."""
    own = certs / name
    if (own / f"{name}.pem").is_file():
        return own
    return certs


def tls_files(certs: Path, name: str) -> TlsFiles:
    return TlsFiles.in_dir(tls_dir(certs, name), name)


def cert_pem(certs: Path, name: str) -> bytes:
    return (tls_dir(certs, name) / f"{name}.pem").read_bytes()


def cert_key(certs: Path, name: str):
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    return load_pem_private_key((tls_dir(certs, name) / f"{name}-key.pem").read_bytes(), password=None)


# ----------------------------------------------------------------------------- owner processes
def write_rows(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    """An owner's own data file: CSV, features then one integer label column."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    lines = [",".join([*(repr(float(v)) for v in row), str(int(lab))]) for row, lab in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def rows_by_owner(n_rows: int, seed: int) -> list[int]:
    """Which row of the data file logical owner i of a ``--shards n_rows`` node holds (one row each).

    The node partitions its file with ``privfed.common.datasets.partition`` (seeded), so the test
    computes the same split instead of guessing it."""
    from privfed.common.datasets import partition

    return [int(p[0]) for p in partition(n_rows, n_rows, seed=seed)]


@dataclass
class OwnerProcess:
    name: str
    proc: subprocess.Popen
    log_path: Path
    ledger: Path
    X: np.ndarray
    y: np.ndarray
    seed: int
    budget: float
    shards: int | None = None  # logical owners of the node (None: one per row)

    @property
    def owner_ids(self) -> list[str]:
        return [f"{self.name}.o{i:05d}" for i in range(self.shards or self.X.shape[0])]

    def rows(self) -> dict[str, tuple[np.ndarray, int]]:
        """owner id -> (its one row, its label)."""
        order = rows_by_owner(self.X.shape[0], self.seed)
        return {oid: (self.X[order[i]], int(self.y[order[i]])) for i, oid in enumerate(self.owner_ids)}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def owner_command(
    port: int,
    name: str,
    *,
    data: Path,
    n_owners: int,
    ledger: Path,
    certs: Path | None,
    budget: float = BUDGET,
    seed: int = 7,
    lo: float = 0.0,
    hi: float = 1.0,
    classes: int = 2,
    extra: tuple[str, ...] = (),
    rng: str = "seeded",
) -> list[str]:
    """``privfed owner`` as tests/integration/fedharness.py's ``owner_cmd`` spawns it, on its own file
    (``rng="secure"``: the deployment's AES-CTR stream, no seed)."""
    cmd = [
        *owner_argv(f"127.0.0.1:{port}", name),
        "--data",
        str(data),
        "--bounds",
        f"{lo}:{hi}",
        "--shards",
        str(n_owners),
        "--ledger",
        str(ledger),
        "--epsilon-budget",
        repr(budget),
        "--delta-budget",
        "1e-3",
        *(["--rng", "seeded", "--seed", str(seed)] if rng == "seeded" else ["--rng", rng]),
        *([] if "--policy" in extra else ["--connect-timeout", "20"]),  # a daemon takes none
        *extra,
    ]
    if _owner_flag("--classes"):  # the number of classes is public configuration (contract 3)
        cmd += ["--classes", str(classes)]
    return cmd + (["--insecure"] if certs is None else ["--certs", str(tls_dir(certs, name))])


def without_local_schema(cmd: list[str]) -> list[str]:
    """``cmd`` (an :func:`owner_command`) minus ``--bounds`` and ``--classes``: the node checks its rows against the
    schema the coordinator sends, or against a ``--schema FILE`` the caller adds."""
    out, skip = [], False
    for part in cmd:
        if skip:
            skip = False
        elif part in ("--bounds", "--classes"):
            skip = True
        elif not part.startswith("--bounds="):
            out.append(part)
    return out


def _owner_flag(flag: str) -> bool:
    """Whether ``privfed owner`` has ``flag`` (the tests run while the owner CLI changes)."""
    from privfed.deploy.cli import build_parser

    owner = build_parser()._subparsers._group_actions[0].choices["owner"]
    return flag in owner._option_string_actions


def spawn_owner(
    tmp: Path,
    port: int,
    name: str,
    X,
    y,
    *,
    certs: Path,
    budget: float = BUDGET,
    seed: int = 7,
    classes: int = 2,
    extra: tuple[str, ...] = (),
    rng: str = "seeded",
    lo: float = 0.0,
    hi: float = 1.0,
    shards: int | None = None,
) -> OwnerProcess:
    """``shards``: how many logical owners the node's rows are split into (None: one per row)."""
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    data = write_rows(tmp / f"{name}.csv", X, y)
    ledger = tmp / f"{name}.sqlite"
    log_path = tmp / f"{name}.log"
    cmd = owner_command(
        port,
        name,
        data=data,
        n_owners=shards or X.shape[0],
        ledger=ledger,
        certs=certs,
        budget=budget,
        seed=seed,
        classes=classes,
        extra=extra,
        rng=rng,
        lo=lo,
        hi=hi,
    )
    with open(log_path, "a") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    partition_seed = seed if rng == "seeded" else 0  # a secure node takes no --seed: its partition uses the default 0
    return OwnerProcess(name, proc, log_path, ledger, X, np.asarray(y), partition_seed, budget, shards)


# ----------------------------------------------------------------------------- ledger (read-only)
def ledger_history(path: Path, owner_id: str, budget: float = BUDGET) -> list[dict]:
    """An owner's releases as ``privfed.common.ledger.Ledger.history`` gives them, read from a
    consistent snapshot of the file (SQLite's online backup over a read-only connection), so the
    running owner's connection stays the only writer of the original."""
    from privfed.common.ledger import Ledger

    copy_dir = Path(path).parent / f".ledger-copy-{secrets.token_hex(4)}"
    copy_dir.mkdir()
    try:
        copy = copy_dir / "ledger.sqlite"
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        dst = sqlite3.connect(str(copy))
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        budget_row = _stored_budget(copy)
        eps, delta = budget_row if budget_row else (budget, 1e-3)
        with Ledger(copy, epsilon_budget=eps, delta_budget=delta) as ledger:
            return ledger.history(owner_id)
    finally:
        shutil.rmtree(copy_dir, ignore_errors=True)


def _stored_budget(path: Path):
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute("SELECT epsilon_budget, delta_budget FROM owners LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def spent_epsilon(history: list[dict]) -> float:
    """Σ ε over the private entries of a history (non-private entries are counted apart)."""
    return math.fsum(h["epsilon"] for h in history if not h.get("nonprivate") and math.isfinite(h["epsilon"]))


# ----------------------------------------------------------------------------- the hostile server
@dataclass
class Registration:
    node_id: str  # what the node claimed
    identity: str | None  # the verified CN of its certificate
    request: pb.RegisterNodeRequest


@dataclass
class RelayCall:
    node_id: str
    identity: str | None
    envelopes: list  # (recipient, data bytes)


class _Servicer(pb_grpc.CoordinatorServicer):
    def __init__(self, hc: HostileCoordinator):
        self._hc = hc

    def RegisterNode(self, request, context):
        return self._hc._register(request, _identity(context))

    def PullTasks(self, request, context):
        self._hc._stall(context)
        return self._hc._pull(request.node_id, min(request.wait_ms / 1000.0, 1.0), context.is_active)

    def PushResults(self, request, context):
        return self._hc._push(request, context)

    def Session(self, requests, context):
        """PushResults over a stream (``HostileCoordinator.sessions``); without: UNIMPLEMENTED, as a
        coordinator from before sessions (the node then uses its unary calls)."""
        if not self._hc.sessions:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this coordinator has no Session stream")
        with self._hc._cv:
            self._hc.sessions_opened += 1
        for request in requests:
            yield self._hc._push(request, context)

    def Relay(self, request, context):
        return self._hc._relay(request, _identity(context), context)

    def Predict(self, request, context):
        return self._hc._predict(request, context)

    def GetModel(self, request, context):
        return self._hc._get_model(request, context)


def _identity(context) -> str | None:
    names = context.auth_context().get("x509_common_name")
    return names[0].decode() if names else None


@dataclass
class HostileCoordinator:
    """The fake coordinator. ``relay`` decides whether envelopes are routed (True) or refused."""

    certs: Path
    relay: bool = True
    registrations: list[Registration] = field(default_factory=list)
    results: list[pb.Result] = field(default_factory=list)
    relays: list[RelayCall] = field(default_factory=list)
    predicts: list[pb.PredictRequest] = field(default_factory=list)
    get_models: list[pb.GetModelRequest] = field(default_factory=list)
    model: pb.GetModelResponse | None = None
    shutdown: bool = False
    bind_port: int = 0  # 0: any free port
    schema: str = ""  # the federation schema (canonical JSON) sent at registration; "" sends none
    job: pb.JobInfo | None = None  # the job announced with every batch of tasks; None announces none
    #: ``on_push(request)`` -> raw task protos handed back in the answer to that push, if it pulls
    on_push: Callable[[pb.PushResultsRequest], list[pb.Task]] | None = None
    fail_push_pulls: int = 0  # this many of the next pushes that pull fail with UNAVAILABLE, unrecorded
    push_pulls: int = 0  # pushes that asked for the next tasks (recorded or failed)
    pushed_tasks: list[str] = field(default_factory=list)  # ids of the tasks handed out in push answers
    sessions: bool = False  # serve Session streams (False: UNIMPLEMENTED, nodes use unary calls)
    sessions_opened: int = 0
    stall_pulls: bool = False  # hold every call that pulls unanswered (until cleared or stopped), the stream kept open
    stalled: int = 0  # pushes held so

    def __post_init__(self):
        self._cv = threading.Condition()
        self._queues: dict[str, list[pb.Task]] = {}
        self._owner_node: dict[str, str] = {}
        self._owners: dict[str, pb.OwnerInfo] = {}
        self._certificates: dict[str, bytes] = {}
        # Each node's key tree as the real coordinator rebuilds it: leaves in registration order.
        self._leaves: dict[str, list[str]] = {}
        self._trees: dict[str, MerkleTree] = {}
        self._tree_signatures: dict[str, bytes] = {}
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=server_options())
        pb_grpc.add_CoordinatorServicer_to_server(_Servicer(self), self._server)
        self.port = self._server.add_secure_port(
            f"127.0.0.1:{self.bind_port}", server_credentials(tls_files(self.certs, "coordinator"))
        )
        self._server.start()

    def stop(self) -> None:
        with self._cv:
            self.shutdown = True
            self._cv.notify_all()
        self._server.stop(0.5).wait()

    # ---- RPCs ----------------------------------------------------------------------------
    def _register(self, request, identity):
        with self._cv:
            self.registrations.append(
                Registration(request.node_id, identity, pb.RegisterNodeRequest.FromString(request.SerializeToString()))
            )
            self._queues.setdefault(request.node_id, [])
            leaves = self._leaves.setdefault(request.node_id, []) if request.part else []
            self._leaves[request.node_id] = leaves
            self._trees.pop(request.node_id, None)
            self._tree_signatures[request.node_id] = bytes(request.key_tree_signature)
            for o in request.owners:
                self._owner_node[o.owner_id] = request.node_id
                self._owners[o.owner_id] = o
                leaves.append(o.owner_id)
            self._certificates[request.node_id] = bytes(request.node_certificate)
            self._cv.notify_all()
        return pb.RegisterNodeResponse(session_id="hostile", schema=self.schema)

    def _pull(self, node_id: str, wait: float, active: Callable[[], bool] = lambda: True):
        """The node's queued tasks, after waiting up to ``wait`` s for one; none for a call its node gave up
        (``active``: a node that stops cancels its poll), which the real coordinator does not hand tasks to either."""
        deadline = time.monotonic() + wait
        with self._cv:
            queue = self._queues.setdefault(node_id, [])
            while not queue and not self.shutdown:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            if not active():
                return pb.PullTasksResponse(shutdown=self.shutdown, job=self.job)
            tasks, queue[:] = list(queue), []
            return pb.PullTasksResponse(tasks=tasks, shutdown=self.shutdown and not tasks, job=self.job)

    def _stall(self, context) -> None:
        """Hold a call that pulls while ``stall_pulls`` is set (until it is cleared or the coordinator stops)."""
        with self._cv:
            if self.stall_pulls:
                self.stalled += 1
                self._cv.notify_all()
                self._cv.wait_for(lambda: not self.stall_pulls or self.shutdown or not context.is_active())

    def _push(self, request, context):
        if request.pull:
            self._stall(context)
        with self._cv:
            self.push_pulls += request.pull
            fail = request.pull and self.fail_push_pulls > 0
            self.fail_push_pulls -= fail
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "this coordinator dropped a push that pulls")
        with self._cv:
            self.results.extend(pb.Result.FromString(r.SerializeToString()) for r in request.results)
            if request.pull and self.on_push is not None:
                self._queues.setdefault(request.node_id, [])[:0] = self.on_push(request)
            self._cv.notify_all()
        if not request.pull:
            return pb.PushResultsResponse(accepted=len(request.results))
        taken = self._pull(request.node_id, min(request.wait_ms / 1000.0, 1.0), context.is_active)
        with self._cv:
            self.pushed_tasks += [t.task_id for t in taken.tasks]
        return pb.PushResultsResponse(
            accepted=len(request.results), tasks=taken.tasks, shutdown=taken.shutdown, job=self.job
        )

    def _relay(self, request, identity, context):
        with self._cv:
            self.relays.append(
                RelayCall(request.node_id, identity, [(e.recipient, bytes(e.data)) for e in request.envelopes])
            )
            self._cv.notify_all()
            if not self.relay:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this coordinator relays nothing")
            for e in request.envelopes:
                node = self._owner_node.get(e.recipient)
                if node is not None:
                    self._queues[node].append(
                        pb.Task(
                            task_id=f"relay-{secrets.token_hex(6)}",
                            owner_id=e.recipient,
                            round_id="ring",
                            ring_message=pb.RingMessageTask(data=e.data),
                        )
                    )
            caller = self._queues.setdefault(request.node_id, [])
            tasks, caller[:] = list(caller), []
            self._cv.notify_all()
            return pb.RelayResponse(accepted=len(request.envelopes), tasks=tasks)

    def _predict(self, request, context):
        with self._cv:
            self.predicts.append(pb.PredictRequest.FromString(request.SerializeToString()))
        n = request.rows.shape[0] if request.rows.shape else 0
        return pb.PredictResponse(labels=[0] * n)

    def _get_model(self, request, context):
        with self._cv:
            self.get_models.append(request)
        if self.model is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"no model {request.model_id!r}")
        return self.model

    # ---- what a test does ----------------------------------------------------------------
    def wait_registered(self, owner_ids, timeout: float = WAIT) -> None:
        want = set(owner_ids)
        with self._cv:
            if not self._cv.wait_for(lambda: want <= set(self._owner_node), timeout):
                raise AssertionError(f"owners {sorted(want - set(self._owner_node))} did not register in {timeout} s")

    def node_of(self, owner_id: str) -> str:
        with self._cv:
            return self._owner_node[owner_id]

    def owner_info(self, owner_id: str) -> pb.OwnerInfo:
        with self._cv:
            return self._owners[owner_id]

    def peer_key(self, owner_id: str) -> pb.PeerKey:
        """The registered key of ``owner_id`` with its proof, as an honest coordinator hands it on:
        its own signature, or its inclusion path in its node's signed key tree."""
        with self._cv:
            info, node = self._owners[owner_id], self._owner_node[owner_id]
            key = pb.PeerKey(owner_id=owner_id, node_id=node, x25519_public_key=info.x25519_public_key)
            if info.key_signature or not self._tree_signatures.get(node):
                key.key_signature = info.key_signature
                return key
            leaves = self._leaves[node]
            if node not in self._trees:
                self._trees[node] = key_tree([(o, bytes(self._owners[o].x25519_public_key)) for o in leaves])
            tree, index = self._trees[node], leaves.index(owner_id)
            key.key_signature = self._tree_signatures[node]
            key.key_index, key.key_tree_size, key.key_path = index, tree.size, tree.path(index)
            return key

    def send(self, tasks, node: str | None = None) -> None:
        """Queue raw task protos, all in one PullTasks answer per node (a batch)."""
        with self._cv:
            for t in tasks:
                self._queues[node or self._owner_node[t.owner_id]].append(t)
            self._cv.notify_all()

    def wait_results(
        self, task_ids, timeout: float = WAIT, *, count: int | None = None, since: int = 0
    ) -> list[pb.Result]:
        """Results whose task id is in ``task_ids``, among those pushed after the first ``since``,
        once ``count`` (default: one per id) arrived."""
        ids = list(task_ids)
        want = len(ids) if count is None else count
        mine = lambda: [r for r in self.results[since:] if r.task_id in ids]  # noqa: E731
        with self._cv:
            self._cv.wait_for(lambda: len(mine()) >= want, timeout)
            return mine()

    def run(self, tasks, timeout: float = WAIT) -> dict[str, pb.Result]:
        """Send a batch and wait for one new result per task id (by task id; last one wins)."""
        with self._cv:
            since = len(self.results)
        self.send(tasks)
        return {r.task_id: r for r in self.wait_results([t.task_id for t in tasks], timeout, since=since)}

    def ring_spec(self, session: str, ring: list[str], *, max_abs: float, peers=None) -> pb.RingSpec:
        """A ring of registered owners with their registered keys and node certificates."""
        fp = FixedPoint.choose(n_parties=len(ring), max_abs=max_abs)
        peer_ids = ring if peers is None else peers
        peer_keys = [self.peer_key(o) for o in peer_ids]
        with self._cv:
            certs = [pb.NodeCertificate(node_id=n, pem=pem) for n, pem in self._certificates.items() if pem]
        return pb.RingSpec(
            session_id=session,
            ring=list(ring),
            frac_bits=fp.frac_bits,
            n_parties=fp.n_parties,
            max_abs=max_abs,
            peers=peer_keys,
            certificates=certs,
        )

    def run_ring(
        self,
        ring: list[str],
        learner,
        config,
        *,
        round_id: str,
        history=None,
        max_abs: float = 8.0,
        timeout: float = WAIT,
    ) -> RingOutcome:
        """One ring session over ``ring``: BoostEvaluate tasks to every member, wait for the
        leader's total (or every member's refusal)."""
        session = secrets.token_hex(16)
        history = history or empty_history()
        spec = self.ring_spec(session, ring, max_abs=max_abs)
        tasks = [
            boost_evaluate(f"{round_id}-{secrets.token_hex(4)}", o, round_id, config, history, learner, spec)
            for o in ring
        ]
        ids = [t.task_id for t in tasks]
        self.send(tasks)
        leader = ids[0]
        deadline = time.monotonic() + timeout

        def done():
            got = {r.task_id: r for r in self.results if r.task_id in ids}
            total = got.get(leader) is not None and got[leader].WhichOneof("kind") in ("ring_total", "refusal")
            refused = any(r.WhichOneof("kind") == "refusal" for r in got.values())
            return total or (refused and len(got) == len(ids))

        with self._cv:
            self._cv.wait_for(done, max(0.0, deadline - time.monotonic()))
            got = {r.task_id: r for r in self.results if r.task_id in ids}
        return RingOutcome(session, ring, {t.owner_id: got.get(t.task_id) for t in tasks})

    def relays_from(self, node_id: str, session: str | None = None) -> list[tuple[str, bytes]]:
        """Envelopes a node relayed (optionally only those of one ring session, by header)."""
        out = []
        with self._cv:
            for call in self.relays:
                if call.node_id != node_id:
                    continue
                for recipient, data in call.envelopes:
                    if session is None or _session_of(data) == session:
                        out.append((recipient, data))
        return out


def _session_of(data: bytes) -> str | None:
    try:
        return Inbound.from_bytes(data).session_id
    except Exception:  # noqa: BLE001 - a hostile test may relay garbage
        return None


@dataclass
class RingOutcome:
    session: str
    ring: list[str]
    answers: dict  # owner id -> pb.Result or None

    @property
    def total(self) -> np.ndarray | None:
        leader = self.answers.get(self.ring[0])
        if leader is not None and leader.WhichOneof("kind") == "ring_total":
            return np.asarray(leader.ring_total.values, dtype=float)
        return None

    def refusals(self) -> dict[str, pb.Refusal]:
        return {o: r.refusal for o, r in self.answers.items() if r is not None and r.WhichOneof("kind") == "refusal"}


# ----------------------------------------------------------------------------- task builders
def matrix(a) -> pb.Matrix:
    a = np.ascontiguousarray(a, dtype="<f8")
    return pb.Matrix(shape=list(a.shape), data=a.tobytes())


def bounds_matrix(d: int, lo: float = 0.0, hi: float = 1.0) -> pb.Matrix:
    return matrix(np.stack([np.full(d, lo), np.full(d, hi)]))


def ncc_task(
    task_id: str,
    owner_id: str,
    *,
    d: int,
    epsilon: float = 0.1,
    labels: str = "rr",
    label_epsilon: float = 0.05,
    n_classes: int = 2,
    mechanism: str | int = "pm",
    round_id: str = "r",
    bounds: pb.Matrix | None = None,
) -> pb.Task:
    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=round_id,
        ncc_share=pb.NccShareTask(
            mechanism=pb.MechanismSpec(
                name=wire_enum("Mechanism", mechanism) if isinstance(mechanism, str) else mechanism, epsilon=epsilon
            ),
            labels=wire_enum("LabelScheme", labels),
            label_epsilon=label_epsilon,
            n_classes=n_classes,
            bounds=bounds if bounds is not None else bounds_matrix(d),
        ),
    )


def lr_task(
    task_id: str,
    owner_id: str,
    *,
    d: int,
    epsilon: float,
    param_bound: float = 1.0,
    n_classes: int = 2,
    round_id: str | None = None,
    bounds: pb.Matrix | None = None,
) -> pb.Task:
    """An LR share task (PM, C = 1); its round id is the task id unless given."""
    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=task_id if round_id is None else round_id,
        lr_share=pb.LrShareTask(
            mechanism=pb.MechanismSpec(name=pb.MECHANISM_PM, epsilon=epsilon),
            param_bound=param_bound,
            c=1.0,
            n_classes=n_classes,
            bounds=bounds if bounds is not None else bounds_matrix(d),
        ),
    )


def svm_task(
    task_id: str,
    owner_id: str,
    *,
    d: int,
    epsilon: float,
    lam: float,
    bounds: pb.Matrix | None = None,
    k: int | None = None,
    model: str = "ovr-huber",
    delta: float = 1e-5,
) -> pb.Task:
    """FedDPDR's phase 2 as the seed has it (``model``: a one-vs-rest Huber SVM, or another of ``SVM_MODELS``,
    at ``delta`` if it spends one) on the public subspace of the first ``k`` axes (all ``d`` by default), rows
    scaled into the unit ball; its round id is the task id."""
    from privfed.common.feddpdr.choices import DELTA_MODELS
    from privfed.proto.serde_shares import SVM_MODEL

    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=task_id,
        svm_share=pb.SvmShareTask(
            epsilon=epsilon,
            lam=lam,
            n_classes=2,
            bounds=bounds if bounds is not None else bounds_matrix(d),
            subspace=matrix(np.eye(d)[:, : d if k is None else k]),
            delta=delta if model in DELTA_MODELS else 0.0,
            model=SVM_MODEL.to_proto(model),
            scaling=pb.ROW_SCALING_BALL,
            rows=8,  # ovr-huber's public row count
        ),
    )


def boost_config(
    d: int,
    run_id: str,
    *,
    epsilon: float = 0.5,
    base: str = "stump",
    labels: str = "rr",
    n_classes: int = 2,
    weight_bound: float = 1.0,
    n_bins: int = 2,
    n_rounds: int = 4,
):
    """A boosting configuration exactly as the coordinator's strategy sends it
    (``privfed.common.boosting.wire.config_to_dict``, a ``BoostConfig``)."""
    from privfed.common.boosting.params import BoostingParams
    from privfed.common.boosting.wire import config_to_dict
    from privfed.common.bounds import Bounds

    fb = BoostingParams(
        base=base,
        epsilon=epsilon,
        mechanism="pm",
        n_classes=n_classes,
        bounds=Bounds(np.zeros(d), np.ones(d)),
        n_rounds=n_rounds,
        group_size=1,
        n_bins=n_bins,
        weight_bound=weight_bound,
        labels=labels,
    )
    return config_to_dict(fb, run_id)


def empty_history(round_no: int = 0):
    """The history of a run with nothing kept, as sent with round ``round_no``'s tasks (common/boosting/wire.py)."""
    from privfed.common.boosting import wire as boostwire

    return boostwire.at_round(boostwire.empty_history(), round_no)


def boost_share(task_id: str, owner_id: str, round_id: str, config, history=None) -> pb.Task:
    from privfed.proto import serde

    history = history or empty_history()
    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=round_id,
        boost_share=pb.BoostShareTask(
            config=serde.boost_config_to_proto(config), history=serde.boost_history_to_proto(history)
        ),
    )


def boost_evaluate(task_id: str, owner_id: str, round_id: str, config, history, learner, ring: pb.RingSpec) -> pb.Task:
    from privfed.proto import serde

    return pb.Task(
        task_id=task_id,
        owner_id=owner_id,
        round_id=round_id,
        boost_evaluate=pb.BoostEvaluateTask(
            config=serde.boost_config_to_proto(config),
            history=serde.boost_history_to_proto(history),
            learner=serde.learner_to_proto(learner),
            ring=ring,
        ),
    )


def stump(attribute: int, threshold: float, leaves=(0, 1), *, threshold_index: int = 1):
    """A stump learner with a threshold of the coordinator's choosing."""
    from privfed.common.learners.stump import Stump

    return Stump(attribute, int(threshold_index), float(threshold), tuple(leaves), 0.0)


def grid_stump(attribute: int, index: int, n_bins: int, leaves=(0, 1), lo: float = 0.0, hi: float = 1.0):
    """A stump at public threshold ``index`` of ``n_bins`` on [lo, hi] (SPEC §6), computed as the
    owner computes it, so the owner's learner check accepts it."""
    from privfed.common.bounds import Bounds
    from privfed.common.learners.stump import thresholds

    t = float(thresholds(Bounds(np.full(attribute + 1, lo), np.full(attribute + 1, hi)), n_bins)[attribute, index - 1])
    return stump(attribute, t, leaves, threshold_index=index)


def kind(result: pb.Result | None) -> str | None:
    return None if result is None else result.WhichOneof("kind")


def refusal_code(result: pb.Result) -> str:
    """The code of a refusal, as Python names it (``common/tasks/base.py`` REFUSAL_CODES)."""
    from privfed.proto import serde

    return serde.REFUSAL_CODE.from_proto(result.refusal.code, "refusal code")


def wire_enum(name: str, choice: str) -> int:
    """The wire value of one of the Python side's public choices (``proto/serde_arrays.py`` WireEnum):
    ``wire_enum("Mechanism", "pm")``."""
    prefix = "".join(f"_{c}" if c.isupper() else c.upper() for c in name).lstrip("_")
    return pb.DESCRIPTOR.enum_types_by_name[name].values_by_name[f"{prefix}_{choice.upper().replace('-', '_')}"].number


def wait_until(predicate, timeout: float = WAIT, every: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


def rss_mb(pid: int | None = None) -> float:
    """Resident set size of a process (default: this one) in MB, from /proc."""
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc status")


def assert_still_serving(coordinator, node, owner_id, *, d):
    """After an attack: the node process is alive and a normal task gets a normal answer (a share,
    or — if the attack spent the owner's budget — a well-formed ``budget_exceeded`` refusal)."""
    assert node.alive(), f"node {node.name} died:\n{node.log()[-3000:]}"
    task = ncc_task(f"normal-{secrets.token_hex(4)}", owner_id, d=d, epsilon=0.05, label_epsilon=0.01)
    result = coordinator.run([task]).get(task.task_id)
    assert result is not None, f"no answer to a normal task from {owner_id}:\n{node.log()[-3000:]}"
    if kind(result) == "refusal":
        assert refusal_code(result) == "budget_exceeded", result.refusal
    else:
        assert kind(result) == "ncc_share"
        assert len(result.ncc_share.labels) == 1
    assert node.alive()
    return result


def assert_one_release_per_run(coordinator, node, owner_id, make, *, released_kind: str, epsilon: float, run: str):
    """A release kind whose ledger entry carries the run's release id (lr_gradient, nb): ``make(task_id,
    owner_id, run, variant)`` builds its task (variant 0: the first; 1, 2: the same run asked again, as it
    was and changed). The first is debited ``epsilon``; asking again in ``run`` is refused
    (``already_released``) and debits nothing; under new runs each release is debited again until the
    budget is spent (``budget_exceeded``), one release id per run."""
    first = coordinator.run([make(f"{run}-a", owner_id, run, 0)])[f"{run}-a"]
    assert kind(first) == released_kind, first
    assert spent_epsilon(ledger_history(node.ledger, owner_id)) == epsilon
    for variant in (0, 1):
        again = coordinator.run([make(f"{run}-again{variant}", owner_id, run, variant)])[f"{run}-again{variant}"]
        assert kind(again) == "refusal" and refusal_code(again) == "already_released", again
    assert spent_epsilon(ledger_history(node.ledger, owner_id)) == epsilon
    released = 1
    for i in range(10):
        other = f"{run}-{i}"
        result = coordinator.run([make(f"{other}-a", owner_id, other, 0)])[f"{other}-a"]
        if kind(result) == "refusal":
            assert refusal_code(result) == "budget_exceeded", result
            break
        assert kind(result) == released_kind, result
        released += 1
    history = ledger_history(node.ledger, owner_id)
    assert released == BUDGET / epsilon and spent_epsilon(history) <= BUDGET * (1 + 1e-9), history
    assert len({h["release_id"] for h in history}) == released  # one release id per run
    return first


def assert_refused_alike(coordinator, node, owner_ids, tasks_of: dict) -> None:
    """Each hostile task (name -> ``make(owner_id)``) is refused by every owner of ``owner_ids`` (whose rows
    differ) with the same refusal, and nothing is debited."""
    for name, make in tasks_of.items():
        tasks = [make(o) for o in owner_ids]
        results = coordinator.run(tasks)
        answers = [results[t.task_id] for t in tasks]
        assert all(kind(r) == "refusal" for r in answers), (name, answers)
        assert all(r.refusal == answers[0].refusal for r in answers), name
    assert all(ledger_history(node.ledger, o) == [] for o in owner_ids)


# ----------------------------------------------------------------------------- pytest fixtures
# Imported by the conftest files of tests/adversary and tests/fuzz.
import pytest  # noqa: E402


@pytest.fixture
def certs(tmp_path):
    return make_federation_certs(tmp_path / "certs", owners=3)


@pytest.fixture
def coordinator(certs):
    hc = HostileCoordinator(certs)
    yield hc
    hc.stop()


@pytest.fixture
def real_coordinator(certs):
    """The real coordinator server, with mTLS (for attacks by a node)."""
    from privfed.server.app import CoordinatorServer

    server = CoordinatorServer(tls=tls_files(certs, "coordinator"), node_timeout=15.0)
    server.start("127.0.0.1:0")
    yield server
    server.dispatcher.shutdown()
    server.stop(0)


@pytest.fixture
def owners(tmp_path, coordinator, certs):
    """``owners(name, X, y, **kw)`` spawns an honest ``privfed owner`` node against the hostile
    coordinator and waits until its owners registered."""
    spawned = []

    def spawn(name, X, y, *, wait=True, **kw):
        proc = spawn_owner(tmp_path, coordinator.port, name, X, y, certs=certs, **kw)
        spawned.append(proc)
        if wait:
            try:
                coordinator.wait_registered(proc.owner_ids)
            except AssertionError:
                raise AssertionError(f"{name} did not register; its log:\n{proc.log()}") from None
        return proc

    yield spawn
    coordinator.shutdown = True
    for proc in spawned:
        proc.stop()
