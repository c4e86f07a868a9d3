"""Audit 35: nothing of a file's faults reaches the coordinator (walkthrough 11, W11-10 now names every column's
first fault in one refusal: the node's own log, never the wire).

Two ``privfed owner`` processes over real mTLS sockets, each with a 3000-row file and no local schema, get the hostile
coordinator's schema (feature ``a`` read as categories ``0`` and ``1``): owner-0's file holds one value outside them
(a ``2`` in line 10), owner-1's two faults (a ``2`` in line 2900 and a non-numeric ``b`` in line 1500), so their
refusals name one fault and two. Compared: every answer each gives to the same tasks (code, text, size) and every
push it makes (results, ``leaving``, ``schema_mismatch``, size).
"""

from __future__ import annotations

import subprocess

import numpy as np
from hostile import OwnerProcess, ncc_task, owner_command, refusal_code, without_local_schema

from privfed.common.schema import FederationSchema

N_ROWS = 3000


def _write(path, faults: dict[int, tuple[int, str]]) -> None:
    rng = np.random.default_rng(5)  # the same rows for both, but for the faults
    a, x, y = rng.integers(0, 2, N_ROWS), rng.uniform(0.0, 1.0, (N_ROWS, 2)), rng.integers(0, 2, N_ROWS)
    cells = [[str(ai), f"{v[0]:.6f}", f"{v[1]:.6f}", str(label)] for ai, v, label in zip(a, x, y)]
    for line, (col, text) in faults.items():
        cells[line][col] = text
    path.write_text("a,b,c,label\n" + "\n".join(",".join(c) for c in cells) + "\n")


def test_a_refused_files_faults_do_not_reach_the_coordinator(tmp_path, coordinator, certs):
    coordinator.schema = FederationSchema(
        features=("a", "b", "c"),
        lo=(0.0, 0.0),
        hi=(1.0, 1.0),
        classes=(0, 1),
        categories=(("a", ("0", "1")),),
        header=True,
        label="label",
    ).to_json()
    pushes: dict[str, list[tuple[int, bool, bool, int]]] = {"owner-0": [], "owner-1": []}
    push = coordinator._push

    def recording(request, context):  # every push a node makes, as it arrives
        pushes[request.node_id].append(
            (len(request.results), request.leaving, request.schema_mismatch, request.ByteSize())
        )
        return push(request, context)

    coordinator._push = recording
    files = {"owner-0": {10: (0, "2")}, "owner-1": {2900: (0, "2"), 1500: (1, "x")}}
    nodes = {}
    try:
        for name, faults in files.items():
            data = tmp_path / f"{name}.csv"
            _write(data, faults)
            cmd = without_local_schema(
                owner_command(
                    coordinator.port, name, data=data, n_owners=2, ledger=tmp_path / f"{name}.sqlite", certs=certs
                )
            )
            log_path = tmp_path / f"{name}.log"
            with open(log_path, "w") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            nodes[name] = OwnerProcess(name, proc, log_path, tmp_path / f"{name}.sqlite", np.zeros((1, 4)),
                                       np.zeros(1), 7, 2.0)  # fmt: skip
        owners = [f"{n}.o{i:05d}" for n in nodes for i in range(2)]
        coordinator.wait_registered(owners)
        tasks = [ncc_task(f"t-{o}", o, d=4, n_classes=3) for o in owners]
        results = coordinator.run(tasks)
        for node in nodes.values():
            node.proc.wait(timeout=30)  # a node whose rows do not fit exits once it has said so
    finally:
        for node in nodes.values():
            node.stop()
    answers = {
        o: (refusal_code(results[f"t-{o}"]), results[f"t-{o}"].refusal.message, results[f"t-{o}"].ByteSize())
        for o in owners
    }
    assert answers["owner-0.o00000"][0] == "schema_mismatch", answers
    assert len(set(answers.values())) == 1, answers
    assert pushes["owner-0"] == pushes["owner-1"], pushes
    assert any(leaving and mismatch for _, leaving, mismatch, _ in pushes["owner-0"]), pushes
    logs = {n: node.log() for n, node in nodes.items()}
    assert "2 faults" in logs["owner-1"] and "2 faults" not in logs["owner-0"], logs  # the faults: the owner's own
