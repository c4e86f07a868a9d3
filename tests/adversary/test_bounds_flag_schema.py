"""A node started with ``--bounds``/``--classes`` reads its rows by the coordinator's schema: the
coordinator must not get to choose that reading afresh at every start (wt-redteam3).

``--bounds`` and ``--classes`` pin only the bounds and the class values; the schema the coordinator
sends at registration decides the rest of how the node's file is read (which header name is which
feature, which column is the label, fill values). Before the fix such a node counted as having
*pinned* its schema, so its ledger's schema decision (issue 20, finding 5) was not checked, and a
coordinator that got the node restarted could send another reading each time:

* **fresh budgets.** Rows are keyed in the ledger by their content *as read* (``row_digests``): the
  same file read with two features swapped gives every row a new account. A one-row node that spent
  its whole budget, restarted under another name (new owner ids) and sent a schema that swaps two
  feature names of the file's header, released again from the same row: its row accounts summed to
  twice the budget.
* **a bit per restart.** A schema that names a feature column as the label makes rows whose value
  there is not a class value fail the check (``schema_mismatch``), a refusal that depends on the row,
  and a new one at every start.

Now the coordinator's schema is recorded and checked as for a node without a local schema: after the
first start another digest is refused without reading the rows. The rows here are one-row files with
a header (``a,b,y``), all bounds [0, 1] and classes 0, 1, as ``--bounds 0:1 --classes 2`` say.
"""

import sqlite3
import subprocess

import numpy as np
from hostile import BUDGET, OwnerProcess, kind, lr_task, owner_command, refusal_code

#: The file's header and each node's one row (a, b, label y): owner-1's b is no class value.
ROWS = {"owner-0": (0.25, 1.0, 0), "owner-1": (0.25, 0.5, 0)}


def _schema(features, label):
    from privfed.common.schema import FederationSchema

    return FederationSchema(
        features=features, lo=(0.0, 0.0), hi=(1.0, 1.0), classes=(0, 1), header=True, label=label
    ).to_json()


HONEST = _schema(("a", "b"), "y")
SWAPPED = _schema(("b", "a"), "y")  # the same bounds and classes: --bounds 0:1 --classes 2 accept it
B_AS_LABEL = _schema(("a", "y"), "b")


class Starts:
    """Nodes on their own files and ledgers, started again and again (a supervisor restarts them)."""

    def __init__(self, tmp_path, coordinator, certs):
        self.tmp, self.coordinator, self.certs = tmp_path, coordinator, certs
        self.started = []
        for node, (a, b, y) in ROWS.items():
            (tmp_path / f"{node}.csv").write_text(f"a,b,y\n{a!r},{b!r},{y}\n")

    def start(self, file_of, name):
        """Node ``name`` on the file and ledger of ``file_of``; returns its owner id once registered."""
        cmd = owner_command(
            self.coordinator.port,
            name,
            data=self.tmp / f"{file_of}.csv",
            n_owners=1,
            ledger=self.tmp / f"{file_of}.sqlite",
            certs=self.certs,
        )
        log_path = self.tmp / f"{name}-{len(self.started)}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self.started.append(
            OwnerProcess(name, proc, log_path, self.tmp / f"{file_of}.sqlite", np.zeros((1, 2)), [0], 7, BUDGET)
        )
        return f"{name}.o00000"

    def ask(self, owner_ids, tag):
        """One LR share at the whole budget per owner: its kind, or the refusal's code."""
        self.coordinator.wait_registered(owner_ids)
        tasks = [lr_task(f"{tag}-{o}", o, d=2, epsilon=BUDGET) for o in owner_ids]
        results = self.coordinator.run(tasks)
        answers = [results[t.task_id] for t in tasks]
        return [refusal_code(r) if kind(r) == "refusal" else kind(r) for r in answers]

    def stop(self):
        for node in self.started:
            node.stop()


def _accounts(ledger):
    conn = sqlite3.connect(ledger)
    try:
        return sorted(e for (e,) in conn.execute("SELECT epsilon FROM accounts"))
    finally:
        conn.close()


def test_a_swapped_reading_of_the_same_file_gives_its_row_no_fresh_budget(tmp_path, coordinator, certs):
    starts = Starts(tmp_path, coordinator, certs)
    try:
        coordinator.schema = HONEST
        first = starts.ask([starts.start("owner-0", "owner-0")], "first")
        starts.stop()
        coordinator.schema = SWAPPED  # restarted under another name: a fresh owner id
        second = starts.ask([starts.start("owner-0", "owner-1")], "swapped")
    finally:
        starts.stop()
    assert first == ["lr_share"], first
    spent = _accounts(tmp_path / "owner-0.sqlite")  # the file's one row: every account it has
    assert sum(spent) <= BUDGET, f"one row spent {spent} of a budget of {BUDGET} (second start: {second})"
    assert second == ["schema_mismatch"], second


def test_a_feature_read_as_the_label_after_a_restart_gives_no_bit_about_the_row(tmp_path, coordinator, certs):
    """Differential: two nodes whose rows differ only in b (1.0, a class value, and 0.5) answer alike."""
    starts = Starts(tmp_path, coordinator, certs)
    try:
        coordinator.schema = HONEST
        first = starts.ask([starts.start(n, n) for n in ROWS], "first")
        starts.stop()
        coordinator.schema = B_AS_LABEL
        second = starts.ask([starts.start(n, n) for n in ROWS], "b-as-label")
    finally:
        starts.stop()
    assert first == ["lr_share", "lr_share"], first
    assert second[0] == second[1], f"the answers tell which row's b is a class value: {dict(zip(ROWS, second))}"
    assert second == ["schema_mismatch", "schema_mismatch"], second
