"""The schema over the wire, with real parts: a coordinator server sends its federation schema at
registration; an owner node whose own file fits it answers a task, one whose file does not answers
every task with the fixed schema_mismatch refusal (no data in it) and exits 2."""

import threading
from pathlib import Path

import numpy as np
import pytest

from privfed.common.ledger import Ledger
from privfed.common.schema import FederationSchema
from privfed.common.tasks import REFUSAL_TEXTS, NccShareReply, NccShareTask, Refusal
from privfed.owner.main import OwnerConfig, hosted_owners
from privfed.owner.node import OwnerNode
from privfed.owner.registration import DeferredOwners
from privfed.server.app import CoordinatorServer
from privfed.server.strategies.base import new_tasks

SCHEMA = FederationSchema.parse('features = ["a", "b"]\nclasses = [-1, 3, 7]\n[bounds]\nlo = 0\nhi = 10\n')


@pytest.fixture
def server():
    server = CoordinatorServer(tls=None, node_timeout=5.0, schema=SCHEMA)
    port = server.start("127.0.0.1:0")
    yield server, port
    server.stop(grace=0)


def _node(
    tmp_path: Path, port: int, name: str, rows: str, daemon: bool = False
) -> tuple[list[OwnerNode], threading.Thread, list[int]]:
    (tmp_path / f"{name}.csv").write_text(rows)
    config = OwnerConfig(
        coordinator=f"127.0.0.1:{port}",
        name=name,
        ledger=tmp_path / f"{name}.db",
        epsilon_budget=4.0,
        data=str(tmp_path / f"{name}.csv"),
        shards="2",
        rng="seeded",
        connect_timeout=10.0,
    )
    owners = hosted_owners(config)
    assert isinstance(owners, DeferredOwners) and owners.error is None  # no local schema: checked after registering
    nodes: list[OwnerNode] = []
    codes: list[int] = []

    def serve() -> None:  # the ledger's SQLite connection belongs to the node's thread
        node = OwnerNode(
            node_id=name,
            target=config.coordinator,
            tls=None,
            owners=owners,
            ledger=Ledger(config.ledger, epsilon_budget=4.0),
            daemon=daemon,
        )
        nodes.append(node)
        codes.append(node.run())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return nodes, thread, codes


def test_owners_receive_the_schema_and_a_file_that_does_not_fit_is_refused_with_a_fixed_text(server, tmp_path):
    srv, port = server
    good, good_thread, good_codes = _node(tmp_path, port, "owner-0", "b,a,y\n2,1,3\n5,4,7\n1,6,7\n2,2,3\n")
    bad, bad_thread, bad_codes = _node(tmp_path, port, "owner-1", "a,b,y\n1,2,3\n4,5,9\n")
    assert srv.dispatcher.wait_for_owners(4, timeout=20) == 4
    spec = NccShareTask("pm", 2.0, "rr", 0.5, SCHEMA.n_classes, SCHEMA.bounds)
    outcome = srv.dispatcher.run(new_tasks(sorted(srv.dispatcher.owners()), "r1", spec), timeout=20)
    payloads = {r.owner_id: r.payload for r in outcome.results.values()}
    assert len(payloads) == 4
    for i in range(2):
        assert isinstance(payloads[f"owner-0.o{i:05d}"], NccShareReply)
        assert payloads[f"owner-1.o{i:05d}"] == Refusal("schema_mismatch", REFUSAL_TEXTS["schema_mismatch"])
    # the good node's labels went by value: classes 3 and 7 are indices 1 and 2 of [-1, 3, 7] (and 3, the rr k-RR's
    # ⊥ "no row" output, common/learners/ncc_rr.py)
    labels = np.concatenate([payloads[f"owner-0.o{i:05d}"].labels for i in range(2)])
    assert set(labels.tolist()) <= {0, 1, 2, SCHEMA.n_classes} and len(labels) == 4
    bad_thread.join(timeout=10)
    assert (
        bad_codes == [2]
        and bad[0].fatal == "owner-1.csv: line 3: label 9 is not a class of the federation schema (classes [-1, 3, 7])"
    )
    srv.dispatcher.shutdown()
    good_thread.join(timeout=10)
    assert good_codes == [0] and good[0].fatal is None


def test_a_daemon_whose_file_does_not_fit_stops_at_once_rather_than_wait_for_a_job(server, tmp_path):
    """A daemon (``--policy``) serves a service's jobs, which may be long in coming: one whose rows do not fit the
    service's schema stops (2) as soon as it has the schema, instead of holding its node id until a job arrives."""
    srv, port = server
    bad, bad_thread, bad_codes = _node(tmp_path, port, "owner-1", "a,b,y\n1,2,3\n4,5,9\n", daemon=True)
    bad_thread.join(timeout=20)
    assert not bad_thread.is_alive() and bad_codes == [2] and "label 9" in (bad[0].fatal or "")


def test_a_node_that_reads_its_rows_after_registering_keeps_calling_while_it_reads_them(tmp_path, monkeypatch):
    """Walkthrough 11, W11-4: a node of 2 000 000 rows registered, then read and checked them for 40 s on its one
    thread, making no call: the service logged it silent (a WARNING: "it exited, or hangs") and counted its owners
    out meanwhile. It keeps calling (the heartbeat of a long batch) while it reads them."""
    import dataclasses
    import time

    import privfed.owner.node as node_module

    monkeypatch.setattr(node_module, "PUSH_EVERY", 0.2)
    srv = CoordinatorServer(tls=None, node_timeout=1.0, schema=SCHEMA)
    port = srv.start("127.0.0.1:0")
    (tmp_path / "owner-0.csv").write_text("b,a,y\n2,1,3\n5,4,7\n1,6,7\n2,2,3\n")
    config = OwnerConfig(
        coordinator=f"127.0.0.1:{port}", name="owner-0", ledger=tmp_path / "owner-0.db", epsilon_budget=4.0,
        data=str(tmp_path / "owner-0.csv"), shards="2", rng="seeded", connect_timeout=10.0,
    )  # fmt: skip
    owners = hosted_owners(config)
    assert isinstance(owners, DeferredOwners)

    def slow_load(schema, ledger):  # a large file: 3 s to read, three node timeouts
        time.sleep(3.0)
        return owners.load(schema, ledger)

    nodes: list[OwnerNode] = []

    def serve() -> None:
        node = OwnerNode(
            node_id="owner-0", target=config.coordinator, tls=None, owners=dataclasses.replace(owners, load=slow_load),
            ledger=Ledger(config.ledger, epsilon_budget=4.0), daemon=True,
        )  # fmt: skip
        nodes.append(node)
        node.run()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert srv.dispatcher.wait_for_owners(2, timeout=20) == 2
        states = []
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            states.append(srv.dispatcher.node_states().get("owner-0"))
            time.sleep(0.1)
        assert "silent" not in states, states
        assert nodes and nodes[0].fatal is None
    finally:
        if nodes:
            nodes[0].stop_event.set()
        thread.join(timeout=15)
        srv.stop(grace=0)


def test_the_coordinator_is_told_that_a_daemon_leaves_because_its_file_does_not_fit(server, tmp_path, caplog):
    """Walkthrough 11, W11-3: a daemon whose file did not fit the service's schema left, and the service logged only
    "node hosp-d left: its 10 owner(s) are no longer counted", as for an owner who stopped their node on purpose:
    the operator waiting for a new hospital saw it come and go. The leave says why, as the fixed code the node's
    refusals carry (nothing about the rows)."""
    import logging

    caplog.set_level(logging.INFO, logger="privfed")
    srv, port = server
    bad, bad_thread, bad_codes = _node(tmp_path, port, "owner-1", "a,b,y\n1,2,3\n4,5,9\n", daemon=True)
    bad_thread.join(timeout=20)
    assert bad_codes == [2]
    left = [r for r in caplog.records if r.name == "privfed.coordinator" and "node owner-1 left" in r.getMessage()]
    assert len(left) == 1, [r.getMessage() for r in caplog.records]
    assert left[0].levelno == logging.WARNING and "schema_mismatch" in left[0].getMessage(), left[0].getMessage()
    assert "label 9" not in left[0].getMessage() and "line 3" not in left[0].getMessage()  # the node's own log says
