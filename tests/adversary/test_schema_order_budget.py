"""Audit 11: a row's budget survives a federation schema that lists the same features or classes in another order.

The ledger keeps an account per row, keyed by a digest of the row *as the schema reads it*
(:func:`privfed.owner.data.row_digests`): its feature columns in the schema's order, its label as the index of
its class in the schema's list. A node's operator who pins the federation's schema file (``--schema``) takes the
federation's next version of it as it comes; a version that only lists the features (``features = ["b", "a"]``)
or the classes (``classes = [1, 0]``) in another order reads every row of the file to the same values by name, so
every release is the same function of the row, but before the fix the row's digest changed and it spent a fresh
budget: a one-row node that spent its whole budget under the first version, restarted under the second (another
``--name``, hence a fresh owner id), released from the same row again: its row accounts summed to twice the
budget (``tests/adversary/test_bounds_flag_schema.py`` closed the same reset for a schema the coordinator sends;
this one the operator pins, so it is accepted).

Now the ledger records the layout the rows were first digested in (the encoded feature names and the class
values, :meth:`privfed.common.ledger.Ledger.row_layout`), and rows read by a schema whose layout is a
permutation of it are digested in the recorded layout (:func:`privfed.owner.data.in_layout`): the second start's
release is the data-independent fallback, recorded on its id alone. A schema that adds or drops a feature or a
class still makes every row a new row (README, "Budgets follow the rows": a row whose values change).

Over the real wire: a real ``privfed owner`` process per start, on the same file and ledger, and the hostile
coordinator of ``hostile.py`` sending each start the schema that node pins.
"""

import sqlite3
import subprocess

import numpy as np
from hostile import BUDGET, OwnerProcess, kind, lr_task, owner_command, refusal_code, without_local_schema

#: The file: a header and one row, its label 1.
CSV = "a,b,y\n0.25,0.75,1\n"


def _schema(features, classes):
    from privfed.common.schema import FederationSchema

    d = len(features)
    return FederationSchema(
        features=features, lo=(0.0,) * d, hi=(1.0,) * d, classes=classes, header=True, label="y"
    ).to_json()


FIRST = _schema(("a", "b"), (0, 1))
#: The federation's next version: the same features and classes, listed in another order.
REORDERED = _schema(("b", "a"), (1, 0))


def _pinned(cmd, schema_file):
    """``privfed owner`` as hostile.py starts it, with ``--schema FILE`` instead of ``--bounds``/``--classes``."""
    return [*without_local_schema(cmd), "--schema", str(schema_file)]


def _accounts(ledger):
    conn = sqlite3.connect(ledger)
    try:
        return sorted(e for (e,) in conn.execute("SELECT epsilon FROM accounts WHERE key LIKE 'row:%'"))
    finally:
        conn.close()


def _release_from_rows(tmp_path, coordinator, certs, name, schema, tag):
    """Start node ``name`` pinning ``schema`` on the one file and ledger, ask for an LR share at the whole
    budget and stop it: the answer's kind (or refusal code)."""
    schema_file = tmp_path / f"{tag}.json"
    schema_file.write_text(schema)
    coordinator.schema = schema
    ledger = tmp_path / "node.sqlite"
    cmd = _pinned(
        owner_command(coordinator.port, name, data=tmp_path / "rows.csv", n_owners=1, ledger=ledger, certs=certs),
        schema_file,
    )
    log_path = tmp_path / f"{tag}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    node = OwnerProcess(name, proc, log_path, ledger, np.zeros((1, 2)), [0], 7, BUDGET)
    try:
        owner = f"{name}.o00000"
        coordinator.wait_registered([owner])
        task = lr_task(f"{tag}-{owner}", owner, d=2, epsilon=BUDGET)
        result = coordinator.run([task])[task.task_id]
        return refusal_code(result) if kind(result) == "refusal" else kind(result)
    finally:
        node.stop()


def test_a_schema_listing_features_and_classes_in_another_order_gives_no_row_a_fresh_budget(
    tmp_path, coordinator, certs
):
    (tmp_path / "rows.csv").write_text(CSV)
    first = _release_from_rows(tmp_path, coordinator, certs, "owner-0", FIRST, "first")
    second = _release_from_rows(tmp_path, coordinator, certs, "owner-1", REORDERED, "reordered")
    assert first == second == "lr_share", (first, second)  # no refusal tells the row was spent: the fallback
    spent = _accounts(tmp_path / "node.sqlite")
    assert sum(spent) <= BUDGET * (1 + 1e-9), f"the file's one row spent {spent} of a budget of {BUDGET}"


def _digests(ledger, text, schema_json):
    """The row digests a node on ``ledger`` binds for the file ``text`` read by ``schema_json`` (as main's load)."""
    from privfed.common.schema import FederationSchema, RawTable
    from privfed.owner.data import check_owner_rows, in_layout, row_digests, row_layout

    lines = tuple(text.splitlines())
    data = check_owner_rows(
        RawTable("f.csv", lines, tuple(range(1, len(lines) + 1))), FederationSchema.parse(schema_json)
    )
    return row_digests(*in_layout(data, ledger.row_layout(row_layout(data))))


def test_the_recorded_layout_follows_the_schema_versions_in_process(tmp_path):
    """v1, v1 reordered (the same digests), v2 adding a feature (new rows: its layout is recorded), then v2
    reordered: the digests of v2."""
    from privfed.common.ledger import Ledger

    ledger = Ledger(tmp_path / "l.sqlite", epsilon_budget=1.0)
    two, three = "a,b,y\n0.25,0.75,1\n0.0,-0.0,0\n", "a,b,c,y\n0.25,0.75,0.5,1\n0.0,-0.0,1.0,0\n"
    try:
        v1, v1_reordered = _digests(ledger, two, FIRST), _digests(ledger, two, REORDERED)
        v2 = _digests(ledger, three, _schema(("a", "b", "c"), (0, 1)))
        v2_reordered = _digests(ledger, three, _schema(("c", "a", "b"), (1, 0)))
    finally:
        ledger.close()
    assert v1 == v1_reordered
    assert not set(v2) & set(v1)  # another feature: new rows
    assert v2_reordered == v2
