"""Positive controls for the hostile coordinator: an honest owner node registers with it, answers
a valid task with a share, and closes a ring it is given. Without these, a refusal in an attack
test could be the harness's fault rather than the owner's defence."""

import secrets

import numpy as np
from hostile import assert_still_serving, boost_config, kind, ncc_task, stump

D = 2


def test_honest_node_registers_and_answers(coordinator, owners):
    node = owners("owner-0", np.array([[0.2, 0.7], [0.9, 0.1]]), np.array([0, 1]))
    reg = coordinator.registrations[0]
    assert reg.identity == "owner-0" and reg.node_id == "owner-0"
    assert [o.owner_id for o in reg.request.owners] == node.owner_ids
    task = ncc_task(f"t-{secrets.token_hex(3)}", node.owner_ids[0], d=D)
    result = coordinator.run([task])[task.task_id]
    assert kind(result) == "ncc_share", result
    assert_still_serving(coordinator, node, node.owner_ids[1], d=D)


def test_ring_of_two_closes(coordinator, owners):
    node = owners("owner-0", np.array([[0.2, 0.7], [0.9, 0.1]]), np.array([0, 1]))
    out = coordinator.run_ring(node.owner_ids, stump(0, 0.5), boost_config(D, "ctl"), round_id="ring1")
    # an honest configuration and a public threshold: the ring must close (else the harness, not
    # the owner's defence, would be what refuses the attacks' rings)
    assert out.total is not None, (out.answers, node.log()[-2000:])
    assert out.total.shape == (2,)
    assert node.alive()


def test_the_harness_knows_which_row_each_owner_holds(tmp_path):
    """The attack tests compare what they reconstruct with each owner's row; the split they assume
    (``OwnerProcess.rows``) must be the one the owner code makes of its file."""
    import inspect

    from hostile import OwnerProcess, write_rows

    from privfed.owner.data import build_owners, load_owner_file

    X = np.array([[0.3, 0.8], [0.6, 0.1], [0.45, 0.55], [0.5, 0.5]])
    y = np.array([1, 0, 1, 0])
    path = write_rows(tmp_path / "rows.csv", X, y)
    load_params = inspect.signature(load_owner_file).parameters
    ds = load_owner_file(str(path), "0:1", 2) if len(load_params) > 3 else load_owner_file(str(path), "0:1")
    kw = (
        {"node_id": "owner-0"} if "node_id" in inspect.signature(build_owners).parameters else {"id_prefix": "owner-0."}
    )
    built = build_owners(ds, n_owners=4, shards=range(4), seed=7, rng_kind="seeded", rng_seed=7, **kw)
    assumed = OwnerProcess("owner-0", None, tmp_path / "x.log", tmp_path / "x.sqlite", X, y, 7, 2.0).rows()
    assert [o.owner_id for o in built] == list(assumed)
    for o in built:
        np.testing.assert_array_equal(o.X[0], assumed[o.owner_id][0])
        assert int(o.y[0]) == assumed[o.owner_id][1]
