"""The in-process transport: every owner node in this process, called directly (no sockets).

:class:`InProcessTransport` implements :class:`privfed.server.strategies.base.Transport` the way
Flower's simulation ``Grid`` and h11's ``ConnectionPair`` join two sides in memory: a node's tasks
go to its real owner core (:class:`privfed.owner.core.OwnerCore`, one batch per node, with that
node's real ledger, so every release is debited before it is computed), and ring envelopes travel
as bytes through the coordinator's own relay rules (:class:`privfed.server.relay.Relay`, the
dispatcher's: an open session, a sender the node hosts, members only, ``HOP`` senders recorded);
each is delivered at once to its recipient's core as the ring-message task a node would pull.
Secure sums are the same driver and machines as the gRPC transport's
(:class:`privfed.server.securesum.RelayedTransport` over
:class:`privfed.common.secagg.transitions.SecureSum`, ring or pairwise masks, with every step
answered by each node's core), so strategies run here exactly the code they run in a federation,
with refusals, silent owners, re-formed rings and dropped owners.

The owners of a silent node (``silent_nodes=``) never answer and their envelopes are lost: a
dead node, which :meth:`InProcessTransport.silent_owners` reports once one of its tasks went
unanswered (as the dispatcher notices a node only when it stops polling). Ring keys are
X25519 keys per owner, unsigned (``OwnerKeys(..., ca_pem=None)``): nothing relays them here, so
there is no coordinator that could swap them; the signature checks run in the protocol and
integration tests.

This is the per-owner path. The experiments with 10^4 owners run the same SAMME loop over
vectorised simulated owners (:func:`privfed.common.boosting.simulation.simulate`);
a test checks the two give the same model at ε = ∞.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privfed.common.errors import ConfigError
from privfed.common.identity import node_of
from privfed.common.ledger import Ledger
from privfed.common.secagg.boxes import generate_private_key, public_bytes
from privfed.common.secagg.ring import Outbound
from privfed.common.tasks import PeerKey, Result, RingMessageTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.keys import OwnerKeys
from privfed.owner.local import LocalOwner
from privfed.server.relay import Relay
from privfed.server.securesum import RelayedTransport
from privfed.server.strategies.base import Fold


class InProcessTransport(RelayedTransport):
    """Owner nodes in this process behind the :class:`Transport` interface (module docstring).

    Parameters
    ----------
    owners : sequence of LocalOwner
        Every logical owner; its node is the node part of its id (``owner-0.o00003``).
    ledgers : mapping node id -> Ledger
        Each node's ledger (e.g. ``Ledger(":memory:", ...)`` or a file in a temp dir).
    silent_nodes : iterable of str
        Nodes that never answer (their owners' tasks unanswered, envelopes to them lost).
    allow_clear_labels : bool
        As ``privfed owner --allow-clear-labels``.
    work_rows : int, optional
        As ``privfed owner --work-rows``, for every node.
    secure_sum : {"auto", "ring", "secagg"}
        The default secure sum (:class:`~privfed.server.securesum.RelayedTransport`): the steps of a
        pairwise-mask sum go to each node's core as the owner node's dispatch sends them.
    owner_keys : bool
        Give each owner its X25519 key (default). ``False`` for one-round tasks only (the chunked
        reference, :mod:`privfed.deploy.reference`): making a key is ~40 us of scalar multiplication,
        the largest single cost of building an owner there, and no secure sum can then run.
    """

    def __init__(
        self,
        owners: Sequence[LocalOwner],
        ledgers: Mapping[str, Ledger],
        *,
        silent_nodes: Iterable[str] = (),
        allow_clear_labels: bool = False,
        secure_sum: str = "auto",
        owner_keys: bool = True,
        work_rows: int | None = None,
    ) -> None:
        super().__init__(secure_sum)
        self.owners = {o.owner_id: o for o in owners}
        self._node = {oid: node_of(oid) for oid in self.owners}
        if missing := sorted(set(self._node.values()) - set(ledgers)):
            raise ConfigError(f"no ledger for node(s) {missing}; every node debits its own ledger")
        self.ledgers = dict(ledgers)
        self.silent = {oid for oid, node in self._node.items() if node in set(silent_nodes)}
        self._noticed: set[str] = set()  # silent nodes that left a task unanswered
        self.allow_clear_labels = allow_clear_labels
        keys = {oid: generate_private_key() for oid in self.owners} if owner_keys else {}
        self._peer_keys = {oid: PeerKey(oid, self._node[oid], public_bytes(k), b"") for oid, k in keys.items()}
        self.cores = {
            node: OwnerCore(
                [o for o in self.owners.values() if self._node[o.owner_id] == node],
                ledger,
                keys=OwnerKeys({o: k for o, k in keys.items() if self._node[o] == node}, None),
                allow_clear_labels=allow_clear_labels,
                work_rows=work_rows,
            )
            for node, ledger in self.ledgers.items()
        }
        self.relay = Relay()
        self._relayed = itertools.count()
        self.opened: list[tuple[str, ...]] = []  # every ring opened, in order (tests read it)

    @classmethod
    def with_ledgers(
        cls,
        owners: Sequence[LocalOwner],
        *,
        epsilon_budget: float,
        delta_budget: float = 0.0,
        ledger_dir: Path | None = None,
        **options: Any,
    ) -> InProcessTransport:
        """One fresh ledger per node: SQLite files in ``ledger_dir``, or in memory."""
        nodes = sorted({node_of(o.owner_id) for o in owners})
        ledgers = {
            n: Ledger(
                ":memory:" if ledger_dir is None else Path(ledger_dir) / f"{n}.sqlite",
                epsilon_budget=epsilon_budget,
                delta_budget=delta_budget,
            )
            for n in nodes
        }
        return cls(owners, ledgers, **options)

    # ------------------------------------------------------------------ Transport
    def run_tasks(self, tasks: list[Task], timeout: float | None = None, *, stalls: str | None = None) -> list[Result]:
        """Answer ``tasks`` node by node, in order, as each owner node does (``privfed.owner.node``);
        nothing waits here, so neither ``timeout`` nor ``stalls`` changes anything."""
        results: list[Result] = []
        self.fold_tasks(tasks, results.extend)
        return results

    def fold_tasks(self, tasks: list[Task], fold: Fold, timeout: float | None = None) -> None:
        """As :meth:`run_tasks`, each node's batch of answers handed to ``fold`` as it is computed
        (then the ring envelopes' answers): the replies of a round are never all held at once."""
        by_node: dict[str, list[Task]] = {}
        for t in tasks:
            if t.owner_id not in self.owners:
                raise ConfigError(f"task {t.task_id!r} is for owner {t.owner_id!r}, which is not in this federation")
            if t.owner_id in self.silent:
                self._noticed.add(self._node[t.owner_id])
            else:
                by_node.setdefault(self._node[t.owner_id], []).append(t)
        outbound: list[tuple[str, Outbound]] = []
        for node, node_tasks in by_node.items():
            core, seen, start = self.cores[node], set[str](), 0
            while start < len(node_tasks):  # batch by batch, as a node answers a pull: bounded temporaries
                end = core.chunk_end(node_tasks, start)
                answer = core.answer(node_tasks[start:end], seen=seen)
                fold(answer.results)
                outbound += [(node, out) for out in answer.outbound]
                start = end
        if outbound:
            fold(self._route(outbound))

    def silent_owners(self) -> set[str]:
        return {oid for oid in self.silent if self._node[oid] in self._noticed}

    # ------------------------------------------------------------------ what RelayedTransport needs
    def peer_key(self, owner_id: str) -> PeerKey:
        if owner_id not in self._peer_keys:
            raise ConfigError(f"owner {owner_id!r} has no key here: this transport was made without owner keys")
        return self._peer_keys[owner_id]

    def certificates(self) -> dict[str, bytes]:
        return {}

    def open_ring(self, session_id: str, members: Sequence[str]) -> None:
        self.relay.open(session_id, members)
        self.opened.append(tuple(members))

    def close_ring(self, session_id: str) -> None:
        self.relay.close(session_id)  # nothing waits here: envelopes are delivered at once

    def hop_senders(self, session_id: str) -> set[str]:
        return self.relay.hop_senders(session_id)

    def complaints(self, session_id: str) -> set[tuple[str, str]]:
        return self.relay.complaints(session_id)

    def release_of(self, owner_id: str, release_id: str) -> np.ndarray | None:
        """The release an owner made under ``release_id`` and keeps (its own audit), e.g. an evaluation pair."""
        cached = self.owners[owner_id].released.get(release_id)
        return None if cached is None else np.array(cached.payload, copy=True)

    # ------------------------------------------------------------------ the relay
    def _route(self, outbound: list[tuple[str, Outbound]]) -> list[Result]:
        """Relay ``(sending node, envelope)`` s as bytes through :attr:`relay` (its rules raise on a
        breach) to their recipients' cores, as the ring-message tasks a node pulls; the leader's
        total answers its evaluate task. Envelopes to a silent node are lost."""
        results, queue = [], deque(outbound)
        while queue:
            node, out = queue.popleft()
            data = out.to_bytes()
            (envelope,) = self.relay.accept(node, [(out.recipient, data)], self._node.get)
            if envelope.accused or envelope.recipient in self.silent:  # a complaint is the relay's (A33-2)
                continue
            hop = Task(f"relay-{next(self._relayed)}", envelope.recipient, "ring", RingMessageTask(data))
            recipient_node = self._node[envelope.recipient]
            answer = self.cores[recipient_node].answer([hop])
            results += answer.results
            queue.extend((recipient_node, o) for o in answer.outbound)
        return results
