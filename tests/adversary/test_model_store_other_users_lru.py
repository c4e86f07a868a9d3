"""Audit 25, finding F1 (low): a data user's refused request for another data user's model id moves that model
to the front of the coordinator's memory (``ModelStore.entry``: ``move_to_end`` runs before ``serves``).

The store holds the ``keep`` models used last (``privfed serve``: 16) and reads older ones back from disk. bob asks
for alice's job id (GetModel or Predict); he is told "no model", as for an id that does not exist, but alice's
model, if held, now counts as used last, so the next model put evicts another one instead: bob's own, or a third
data user's. Two consequences, both across data users:

* bob keeps alice's model held and has carol's evicted (carol's next request reads it from disk);
* bob learns whether alice's job id names a model held in memory (a job of hers that finished or was used
  lately): he asks for her id, then has a model of his own put (his next job ends) and times his own least
  recently used model (a disk read is the model's size in time, ``test_data_user_isolation.py``). A missing id
  moves nothing, and his model stays held.

Checked here with no clock, on the store's state. Fixed (server/models.py, ``ModelStore.entry``): the entry moves to
the end only when it serves the caller.
"""

from __future__ import annotations

import pytest

from privfed.common.errors import ConfigError
from privfed.server.models import ModelStore

#: No clock, no child process, no socket.
pytestmark = pytest.mark.in_process

CLASSES = ("a", "b")


def _store() -> ModelStore:
    store = ModelStore(load=lambda model_id, data_user: None, keep=2)
    store.put("alices", object(), classes=CLASSES, data_user="alice")
    store.put("carols", object(), classes=CLASSES, data_user="carol")
    return store


def _bob_asks(store: ModelStore, model_id: str) -> None:
    with pytest.raises(ConfigError, match=f"no model {model_id!r}"):
        store.entry(model_id, "bob")


def test_control_bobs_request_for_a_missing_id_moves_nothing():
    store = _store()
    _bob_asks(store, "missing-id")
    store.put("bobs", object(), classes=CLASSES, data_user="bob")
    assert list(store._models) == ["carols", "bobs"]  # alice's, used least recently, went first


def test_bobs_refused_request_for_alices_model_does_not_keep_it_held():
    store = _store()
    _bob_asks(store, "alices")
    store.put("bobs", object(), classes=CLASSES, data_user="bob")
    assert list(store._models) == ["carols", "bobs"], list(store._models)  # as for a missing id
