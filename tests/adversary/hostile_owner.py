"""A hostile owner node for issue 23: the real wire schema, a real owner certificate, and every
answer in the test's hands, against a real coordinator.

:class:`HostileOwner` is a gRPC client with mTLS under an owner node's certificate: it registers
its logical owners (with X25519 keys signed by that certificate, as an honest node does), polls for
tasks and answers each with whatever its ``answer`` function returns for the decoded task: a
payload of any shape, with any values the wire can carry, or ``None`` to stall (never answer while
it keeps polling, so the coordinator sees a live node). :data:`ATTACKS` holds the answers of the
issue's table and of its test list.

Run as a script, it plays one row of the issue's table end to end: a real ``privfed coordinator``
process, an honest ``privfed owner`` node process hosting every owner but the last, and this
hostile node hosting the last one (``--attack none``: the honest node hosts all of them)::

    python tests/adversary/hostile_owner.py --task ncc --attack huge --owners 400 --epsilon 8

It prints the coordinator's exit code, its last stderr line, and the report's status, accuracy
and ``rejected_owners``.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from privfed.common.identity import owner_id
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.signed_keys import sign_public_key
from privfed.common.tasks import (
    JoinAccepted,
    LrShareReply,
    LrShareTask,
    NccShareReply,
    Payload,
    PcaShareReply,
    Result,
    SvmShareReply,
    SvmShareTask,
    Task,
    kind_of,
)
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.proto.transport import (
    PULL_TIMEOUT,
    PULL_WAIT,
    PUSH_TIMEOUT,
    REGISTER_TIMEOUT,
    TlsFiles,
    channel_credentials,
    channel_options,
)

#: Seconds a hostile node keeps trying to register while the coordinator is not up.
CONNECT_TIMEOUT = 60.0
RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

#: What an attack answers one task with: a payload of any shape, or None (stall: never answer).
Answer = Callable[[Task], Payload | None]


def _lr_width(spec: LrShareTask) -> int:
    return (spec.bounds.d + 1) * (1 if spec.n_classes == 2 else spec.n_classes)


def _svm_width(spec: SvmShareTask) -> int:
    return (spec.bounds.d if spec.subspace is None else spec.subspace.shape[1]) + 1


def by_kind(answers: Mapping[str, Callable[[Any], Payload]]) -> Answer:
    """An attack that answers tasks of the kinds named in ``answers`` (by kind name, from the task's
    spec) and stalls on every other; it takes part in the job's accept round (``join``) unless ``answers``
    says how else to answer it, so that its attack reaches the releases."""
    answers = {"join": lambda spec: JoinAccepted(), **answers}

    def answer(task: Task) -> Payload | None:
        make = answers.get(kind_of(task.spec).name)
        return None if make is None else make(task.spec)

    return answer


ATTACKS: dict[str, Answer] = {
    # One report at +2^41 in every coordinate (the wire's range is below 2^42), labelled 0: what
    # dragged the NCC accuracy from 0.655 to 0.472 and LR's from 0.555 to 0.488.
    "huge": by_kind(
        {
            "ncc_share": lambda s: NccShareReply(np.full((1, s.bounds.d), 2.0**41), np.zeros(1, dtype=np.int64)),
            "lr_share": lambda s: LrShareReply(np.full((1, _lr_width(s)), 2.0**41)),
        }
    ),
    # 20 000 in-range rows (every value +1, the top of [-1, 1]), all labelled class 0.
    "rows": by_kind(
        {"ncc_share": lambda s: NccShareReply(np.ones((20_000, s.bounds.d)), np.zeros(20_000, dtype=np.int64))}
    ),
    # One in-range row with label 7 (a 2-class job's labels are 0 and 1).
    "label": by_kind({"ncc_share": lambda s: NccShareReply(np.zeros((1, s.bounds.d)), np.array([7], dtype=np.int64))}),
    # A reply three columns wider than the schema's ``d`` (NCC rows, or LR's parameter vector).
    "width": by_kind(
        {
            "ncc_share": lambda s: NccShareReply(np.zeros((1, s.bounds.d + 3)), np.zeros(1, dtype=np.int64)),
            "lr_share": lambda s: LrShareReply(np.zeros((1, _lr_width(s) + 3))),
        }
    ),
    # NaN where the wire carries float64 (reports are grid indices and cannot hold one): a DP-PCA
    # subspace of NaN with an honest-looking count, or an SVM release of NaN.
    "nan": by_kind(
        {
            "pca_share": lambda s: PcaShareReply(np.full((s.bounds.d, s.k), math.nan), noisy_count=5),
            "svm_share": lambda s: SvmShareReply(np.full((s.n_classes, _svm_width(s)), math.nan)),
        }
    ),
    # A well-formed DP-PCA subspace (the first k axes) with a row count of 10^12, which would take
    # all of the weighted projector average if it were believed.
    "count": by_kind({"pca_share": lambda s: PcaShareReply(np.eye(s.bounds.d, s.k), noisy_count=10**12)}),
    # Never answer (the node keeps polling: the coordinator sees it alive).
    "stall": by_kind({}),
}


class HostileOwner:
    """An owner node speaking the real protocol whose answers ``answer`` decides (module docstring).

    Parameters
    ----------
    target : str
        ``HOST:PORT`` of the coordinator.
    tls : TlsFiles or None
        The node's CA, certificate and key (None: ``--insecure``).
    name : str
        The node id (its certificate's common name).
    indices : list of int
        The logical owners it registers: ``<name>.o<index>``.
    answer : Answer
        Called once per task; its payload is pushed, None stalls.
    """

    def __init__(self, target: str, tls: TlsFiles | None, name: str, indices: list[int], answer: Answer):
        self.target, self.tls, self.name, self.answer = target, tls, name, answer
        self.owner_ids = [owner_id(name, i) for i in indices]
        self.tasks: list[Task] = []
        self.registered = threading.Event()
        self.shutdown = threading.Event()
        self.error: grpc.RpcError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hostile-{name}", daemon=True)

    def start(self) -> HostileOwner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=PULL_TIMEOUT + 2)

    def _channel(self) -> grpc.Channel:
        if self.tls is None:
            return grpc.insecure_channel(self.target, options=channel_options())
        return grpc.secure_channel(self.target, channel_credentials(self.tls), options=channel_options())

    def register_request(self) -> pb.RegisterNodeRequest:
        """The node's registration, with ring keys signed by its certificate key as an honest node's."""
        cert, signer = b"", None
        if self.tls is not None:
            _, cert, key = self.tls.read()
            signer = load_pem_private_key(key, password=None)
        owners = []
        for oid in self.owner_ids:
            pub = public_bytes(generate_private_key())
            sig = sign_public_key(signer, pub, oid) if signer is not None else b""
            owners.append(pb.OwnerInfo(owner_id=oid, x25519_public_key=pub, key_signature=sig))
        return pb.RegisterNodeRequest(node_id=self.name, node_certificate=cert, owners=owners)

    def _run(self) -> None:
        with self._channel() as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            deadline = time.monotonic() + CONNECT_TIMEOUT
            while not self.registered.is_set():
                try:
                    stub.RegisterNode(self.register_request(), timeout=REGISTER_TIMEOUT, wait_for_ready=True)
                    self.registered.set()
                except grpc.RpcError as exc:  # the coordinator is not up yet: try again, as an honest node does
                    self.error = exc
                    if exc.code() not in RETRY or time.monotonic() > deadline or self._stop.wait(0.2):
                        return
            while not self._stop.is_set():
                try:
                    reply = stub.PullTasks(
                        pb.PullTasksRequest(node_id=self.name, wait_ms=int(PULL_WAIT * 1000)), timeout=PULL_TIMEOUT
                    )
                except grpc.RpcError as exc:  # the coordinator is gone: the job is over for us too
                    self.error = exc
                    return
                if reply.shutdown:
                    self.shutdown.set()
                    return
                results = []
                for m in reply.tasks:
                    task, _ = serde.task_or_refusal(m)
                    if task is None:
                        continue
                    self.tasks.append(task)
                    payload = self.answer(task)
                    if payload is not None:
                        results.append(serde.result_to_proto(Result(task.task_id, task.owner_id, payload)))
                if results:
                    try:
                        stub.PushResults(
                            pb.PushResultsRequest(node_id=self.name, results=results), timeout=PUSH_TIMEOUT
                        )
                    except grpc.RpcError as exc:  # a refused push: keep polling like an honest node
                        self.error = exc


# ----------------------------------------------------------------------------- one row of the table
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _privfed(*args: str) -> list[str]:
    return [sys.executable, "-m", "privfed.deploy.cli", *args]


def play_row(
    task: str, attack: str, owners: int, epsilon: float, out: Path, *, seed: int = 0, extra: tuple[str, ...] = ()
) -> dict:
    """Run one federation: a real coordinator, an honest node with owners ``0 .. owners - 2`` (all of
    them for ``attack="none"``) and a hostile node with the last; returns what happened."""
    from privfed.deploy.certs import make_certs

    certs = Path(make_certs(out / "certs", owners=2))
    port = _free_port()
    common = ("--dataset", "synthetic", "--seed", str(seed))
    coordinator = subprocess.Popen(
        _privfed(
            "coordinator",
            "--task",
            task,
            "--owners",
            str(owners),
            "--epsilon",
            repr(epsilon),
            "--certs",
            str(certs),
            "--listen",
            f"127.0.0.1:{port}",
            "--out",
            str(out / "runs"),
            "--register-timeout",
            "120",
            "--round-timeout",
            "60",
            *common,
            *extra,
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    honest_owners = owners if attack == "none" else owners - 1
    with open(out / "owner-0.log", "w") as log:
        honest = subprocess.Popen(
            _privfed(
                "owner",
                "--coordinator",
                f"127.0.0.1:{port}",
                "--name",
                "owner-0",
                "--certs",
                str(certs),
                "--ledger",
                str(out / "owner-0.sqlite"),
                "--epsilon-budget",
                repr(epsilon),
                "--delta-budget",
                "1e-3",
                "--n-owners",
                str(owners),
                "--shards",
                f"0:{honest_owners}",
                "--rng",
                "seeded",
                *common,
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    hostile = None
    if attack != "none":
        tls = TlsFiles.in_dir(certs, "owner-1")
        hostile = HostileOwner(f"127.0.0.1:{port}", tls, "owner-1", [owners - 1], ATTACKS[attack]).start()
    try:
        stdout, stderr = coordinator.communicate(timeout=600)
    finally:
        if hostile is not None:
            hostile.stop()
        try:
            honest.wait(timeout=30)
        except subprocess.TimeoutExpired:
            honest.kill()
    reports = sorted((out / "runs").glob("*/report.json"))
    report = json.loads(reports[-1].read_text()) if reports else None
    return {
        "task": task,
        "attack": attack,
        "exit_code": coordinator.returncode,
        "last_stderr_line": (stderr.strip().splitlines() or [""])[-1],
        "stdout": stdout.strip(),
        "report": None if report is None else str(reports[-1]),
        "status": None if report is None else report.get("status"),
        "accuracy": None if report is None else report.get("accuracy"),
        "rejected_owners": None if report is None else report.get("rejected_owners"),
        "error": None if report is None else report.get("error"),
        "honest_node_exit": honest.returncode,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="ncc")
    p.add_argument("--attack", default="none", choices=["none", *ATTACKS])
    p.add_argument("--owners", type=int, default=400)
    p.add_argument("--epsilon", type=float, default=8.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="working directory (default: a temporary one)")
    a, extra = p.parse_known_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="hostile-owner-"))
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    row = play_row(a.task, a.attack, a.owners, a.epsilon, out, seed=a.seed, extra=tuple(extra))
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(row, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
