"""Issue 20, finding 5: a restarted node gives no new bit about its rows through the schema.

An owner started with ``--data`` and no local schema checks its rows against the schema the
coordinator sends at registration; rows that do not fit make it refuse every task with
``schema_mismatch``. Before the fix a coordinator that got the node restarted (a supervisor does
that) learned one more bit per start: a bisection over the class values recovered a one-row
owner's 10-class label in 4 restarts, with no ledger entry. Now the node records in its ledger the
schema digest it accepted or refused, and after a restart a schema with another digest is refused
without the rows being read: only the first start tells anything (one bit per ledger file, the
documented limit), and every decision is on the record.

The test runs the bisection against two one-row owners on two nodes, labels 7 and 2, with the
same schemas: from the second start on, both must answer alike.
"""

import sqlite3
import subprocess

import numpy as np
from hostile import OwnerProcess, kind, ncc_task, owner_command, refusal_code, without_local_schema, write_rows

D = 2
LABELS = {"owner-0": 7, "owner-1": 2}
CLASSES = list(range(10))


#: A class value no owner holds: a schema of one candidate class still lists two classes.
SPARE = 99


def _schema(classes):
    from privfed.common.schema import FederationSchema

    return FederationSchema(
        features=tuple(f"x{i}" for i in range(D)), lo=(0.0,) * D, hi=(1.0,) * D, classes=(*classes, SPARE)
    ).to_json()


def test_a_new_schema_after_a_restart_is_refused_without_reading_the_rows(tmp_path, coordinator, certs):
    files = {
        n: write_rows(tmp_path / f"{n}.csv", np.array([[0.25, 0.5]]), np.array([lab])) for n, lab in LABELS.items()
    }
    started = []

    def start_both():
        nodes = {}
        for name, data in files.items():
            cmd = without_local_schema(
                owner_command(
                    coordinator.port, name, data=data, n_owners=1, ledger=tmp_path / f"{name}.sqlite", certs=certs
                )
            )
            log_path = tmp_path / f"{name}-{len(started)}.log"
            with open(log_path, "w") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            nodes[name] = OwnerProcess(
                name, proc, log_path, tmp_path / f"{name}.sqlite", np.zeros((1, D)), np.zeros(1), 7, 2.0
            )
            started.append(nodes[name])
        coordinator.wait_registered([f"{n}.o00000" for n in nodes])
        tasks = [ncc_task(f"t{len(started)}-{n}", f"{n}.o00000", d=D, n_classes=len(classes) + 1) for n in nodes]
        results = coordinator.run(tasks)
        for node in nodes.values():
            node.stop()
        return {
            n: "fits" if kind(results[t.task_id]) == "ncc_share" else refusal_code(results[t.task_id])
            for n, t in zip(nodes, tasks)
        }

    answers = []
    candidates = CLASSES
    try:
        while len(candidates) > 1:  # the bisection, driven by owner-0's answers
            classes = candidates[: len(candidates) // 2]
            coordinator.schema = _schema(classes)
            answers.append(start_both())
            candidates = classes if answers[-1]["owner-0"] == "fits" else candidates[len(candidates) // 2 :]
    finally:
        for node in started:
            node.stop()
    recovered = candidates[0]
    assert 3 <= len(answers) <= 4
    assert recovered != LABELS["owner-0"], f"the label came back in {len(answers)} starts: {answers}"
    for later in answers[1:]:  # after the first start, the answer does not depend on the label
        assert later["owner-0"] == later["owner-1"] == "schema_mismatch", answers
    for name in LABELS:  # every decision is on the node's record
        conn = sqlite3.connect(tmp_path / f"{name}.sqlite")
        try:
            rows = conn.execute("SELECT digest, accepted FROM schema_decisions ORDER BY seq").fetchall()
        finally:
            conn.close()
        assert len(rows) == 1, rows  # the first schema; the later ones were refused against it
