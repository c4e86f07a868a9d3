"""Owner side of LDP boosting over the network (seed 002 Alg. 2): shares with SAMME weights,
and the owner's evaluation release fed into the ring secure sum through the sans-I/O ``RingParty``.

An evaluation is a release (issue 9 item 1, contract 4). :meth:`RingDriver.evaluate` validates
the task against the run's public configuration, computes the owner's ``(err_sum, w_sum)`` with
every row's weight clipped to the public row bound ``b``, adds Laplace noise ``Lap(2 b / ε)``
calibrated to that bound (:func:`privfed.common.boosting.federated.noisy_contributions`; the sensitivity
argument -- ε-DP for every row, ε-LDP for a one-row owner -- is in :mod:`privfed.common.boosting.federated`,
"Evaluation releases") and commits
the debit in the ledger *before* the party's first envelope is produced. The noisy pair is cached
per (owner, release id): a ring re-formed for the same (run, round) gets the same pair and no new
debit, so re-forming rings, choosing two-party rings or repeating sessions teaches a coordinator
nothing beyond the one release. Ring membership does not matter for privacy; the ring only keeps
individual noisy pairs from a curious relay. After a restart the cache is gone: the ledger's
record of the release then makes the owner refuse (a fresh draw would be a second release under
the same debit). A new run id is a new release, debited like any other: the ledger bounds the
total over runs, nothing bounds the number of runs.

SAMME weights are applied incrementally (:func:`history_weights`): a node keeps, per (run, owner),
the weights after the rounds it applied and the digest of the config and those rounds
(:func:`history_digests`); a task's history must extend that prefix, and only its new rounds are
applied. A history that rewrites an applied round is refused (:class:`HistoryRewritten`, code
``invalid_task``); a restarted node, or a run it no longer keeps, recomputes from the full history.
Every learner in a history is still checked against the run's public configuration
(:func:`check_history`). The weights are not a release: they only ever leave inside a noised,
debited share or evaluation, whose sensitivity does not depend on them.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from privfed.common.errors import (
    BudgetExceeded,
    ConfigError,
    LocalProtocolError,
    PrivfedError,
    ProtocolError,
    RemoteProtocolError,
)
from privfed.common.identity import node_of
from privfed.common.ledger import Debit, Ledger
from privfed.common.messages import (
    BoostEvaluateTask,
    BoostShareReply,
    BoostShareTask,
    PeerKey,
    Refusal,
    RingJoined,
    RingSpec,
    RingTotal,
    Task,
    boost_release_epsilons,
)
from privfed.common.secagg.boxes import Box, verify_public_key
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.ring import Inbound, Outbound, RingParty
from privfed.proto import serde

if TYPE_CHECKING:  # common/boosting imports scipy: loaded once a boosting task arrives
    from privfed.common.boosting.federated import FederatedBoosting
    from privfed.common.boosting.wire import BoostConfig, BoostHistory, KeptRound, Learner
    from privfed.owner.handlers import LocalOwner

log = logging.getLogger("privfed.owner")

OWNER_NODE_NAME = re.compile(r"owner-\d+")  # the names `privfed certs` gives owner node certificates
#: Ledger labels of a boosting share (``privfed.common.messages.boost_release_epsilons``).
SHARE_LABELS = ("boost-share", "boost-share-features", "boost-share-labels")


class AlreadyReleased(RemoteProtocolError):
    """The coordinator asked for an evaluation release this owner already made and can't repeat
    (another round of a run that evaluates once, or a release whose cached value a restart lost)."""


def boost_share(owner: LocalOwner, spec: BoostShareTask) -> BoostShareReply:
    """The perturbed share of this round's base learner, with this owner's SAMME weights."""
    from privfed.common.learners.ncc import NccShare
    from privfed.common.learners.stump_encodings import SampledReports

    check_history(owner, spec.config, spec.history)
    fb = spec.config.booster
    share = fb.owner_release(owner.X, owner.y, history_weights(owner, spec.config, spec.history), rng=owner.rng)
    if isinstance(share, NccShare):
        return BoostShareReply(reports=share.reports, labels=share.labels)
    if isinstance(share, SampledReports):  # a sampled stump encoding: integer reports and the sampled coordinates
        return BoostShareReply(reports=share.reports, labels=np.zeros(0, dtype=np.int64), coordinates=share.coordinates)
    return BoostShareReply(reports=np.asarray(share).reshape(1, -1), labels=np.zeros(0, dtype=np.int64))


def share_key(task: Task) -> str:
    """Where a node caches the boosting share of ``task`` (``LocalOwner.boost_released``): its run id,
    or run id and round when every owner shares in every round (``share_groups="all"``)."""
    spec = task.spec
    if not isinstance(spec, BoostShareTask) or spec.config.booster.shares_per_owner == 1:
        return task.round_id
    return f"{task.round_id}#r{spec.history.round}"


def shares_released(ledger: Ledger, owner_id: str, spec: BoostShareTask, run_id: str) -> int:
    """How many shares ``owner_id`` released in run ``run_id``: its ledger entries of the share's first label.

    An owner releases at most ``FederatedBoosting.shares_per_owner`` shares in a run (1, or T at
    ``share_epsilon / T`` each under ``share_groups="all"``), each debited before it leaves.
    """
    purpose = f"{spec.ledger_entries()[0][2]}:{run_id}"
    return sum(1 for h in ledger.history(owner_id) if h["purpose"] == purpose)


def check_one_role(ledger: Ledger, owner_id: str, config: BoostConfig, role: str) -> None:
    """Under ``budget_split="owners"`` an owner releases in one role per run, at the whole ε: refuse a
    share (``role="share"``) after an evaluation of the run, and an evaluation after a share.

    Raises :class:`AlreadyReleased` (refusal ``already_released``); nothing is computed or debited.
    """
    if config.booster.budget_split != "owners":
        return
    other = f"boost-eval:{config.run_id}:" if role == "share" else tuple(f"{lb}:{config.run_id}" for lb in SHARE_LABELS)
    if any(h["purpose"].startswith(other) for h in ledger.history(owner_id)):
        raise AlreadyReleased(
            f"boosting run {config.run_id!r} splits its budget between owners: {owner_id} already released "
            f"{'an evaluation' if role == 'share' else 'a share'} in it"
        )


class HistoryRewritten(RemoteProtocolError):
    """A task's history does not extend the rounds this node already applied for the run (another
    learner, α, E or W in one of them, fewer kept rounds, or another config under the run id)."""


#: Runs whose applied history a node keeps per owner (the latest ones); a task of an older run
#: recomputes its weights from the full history, as a restarted node does.
APPLIED_RUNS = 4


@dataclass(frozen=True)
class AppliedHistory:
    """An owner's SAMME weights after the first ``n_kept`` rounds of a run, and the digest of the
    run's config and those rounds (:func:`history_digests`) they came from."""

    n_kept: int
    digest: bytes
    weights: np.ndarray


def history_digests(config: BoostConfig, kept: Sequence[KeptRound]) -> list[bytes]:
    """SHA-256 chain over the run's config and its kept rounds: entry k digests the first k rounds.

    Each link hashes the previous digest and the round's deterministic wire form
    (``proto/serde.py``), so a digest names one exact prefix of one run's history.
    """
    h = hashlib.sha256(
        b"privfed-boost-history\0" + serde.boost_config_to_proto(config).SerializeToString(deterministic=True)
    )
    out = [h.digest()]
    for r in kept:
        h = hashlib.sha256(out[-1] + serde.kept_round_to_proto(r).SerializeToString(deterministic=True))
        out.append(h.digest())
    return out


def _applied_prefix(owner: LocalOwner, config: BoostConfig, digests: list[bytes]) -> AppliedHistory | None:
    """What this node applied for ``owner`` in the run, checked to be a prefix of the task's history."""
    applied = owner.boost_applied.get(config.run_id)
    if applied is not None and (applied.n_kept >= len(digests) or digests[applied.n_kept] != applied.digest):
        raise HistoryRewritten(
            f"boosting run {config.run_id!r}: the task's history does not extend the {applied.n_kept} "
            "round(s) this node applied for the run"
        )
    return applied


def check_history(owner: LocalOwner, config: BoostConfig, history: BoostHistory) -> None:
    """A task's history against the run's public configuration and what this node applied.

    The round is in ``[len(kept), n_rounds)``, every kept learner has the run's kind and shape
    (``FederatedBoosting.check_learner``; α, E and W are finite by construction of the history),
    and the history extends the rounds this node applied for ``owner`` in the run.

    Raises
    ------
    ConfigError
        A learner that does not fit the run.
    RemoteProtocolError
        A round outside the run; :class:`HistoryRewritten` for a history that rewrites applied rounds.
    """
    fb = config.booster
    if not history.round < fb.n_rounds:
        raise RemoteProtocolError(
            f"boosting round {history.round} is not in [{len(history.kept)}, {fb.n_rounds}) "
            f"({len(history.kept)} kept learners, {fb.n_rounds} rounds in the run)"
        )
    for r in history.kept:
        fb.check_learner(r.learner)
    _applied_prefix(owner, config, history_digests(config, history.kept))


def history_weights(owner: LocalOwner, config: BoostConfig, history: BoostHistory) -> np.ndarray:
    """``owner``'s SAMME row weights after ``history``'s kept rounds, applying only the rounds this
    node has not applied for the run yet (all of them after a restart), and remembering the result.

    Raises :class:`HistoryRewritten` if ``history`` does not extend what was applied (the weights
    are then not touched). The returned array is read-only: it is also the node's cached state.
    """
    from privfed.common.boosting.wire import apply_rounds

    digests = history_digests(config, history.kept)
    applied = _applied_prefix(owner, config, digests)
    start, w = (0, np.ones(owner.X.shape[0])) if applied is None else (applied.n_kept, applied.weights)
    w = apply_rounds(w, history.kept[start:], owner.X, owner.y)
    w.setflags(write=False)
    cache = owner.boost_applied
    cache.pop(config.run_id, None)
    cache[config.run_id] = AppliedHistory(len(history.kept), digests[-1], w)
    while len(cache) > APPLIED_RUNS:
        cache.pop(next(iter(cache)))
    return w


#: What starting one evaluation gives: the answer to its task (a member's join, or None for the
#: leader, which answers with the total later) and the envelopes to relay.
Evaluated = tuple["RingJoined | None", list[Outbound]]
P = TypeVar("P")  # a secure sum's party
T = TypeVar("T")  # what starting it gives


def evaluation_refusal(owner_id: str, exc: Exception) -> Refusal:
    """The refusal a coordinator gets for an evaluation that failed with ``exc`` (whatever the
    secure sum): the code's fixed text (contract 3), the exception's message to the log only."""
    from privfed.owner.handlers import TaskRefused

    if isinstance(exc, TaskRefused):
        code, detail = exc.code, exc.detail
    elif isinstance(exc, BudgetExceeded):
        code, detail = "budget_exceeded", ""
    elif isinstance(exc, AlreadyReleased):
        code, detail = "already_released", ""
    elif isinstance(exc, (ConfigError, ProtocolError, ValueError)):
        code, detail = "invalid_task", ""
    else:
        log.error("evaluation for %s failed", owner_id, exc_info=exc)
        code, detail = "internal", ""
    log.warning("refusing evaluation for %s (%s): %s", owner_id, code, exc)
    return Refusal.of(code, detail)


class RingDriver:
    """Holds the ring parties of the logical owners hosted by this node, and their evaluation releases.

    Parameters
    ----------
    keys : dict
        owner_id -> X25519 private key (ring end-to-end boxes).
    ca_pem : bytes or None
        The federation CA. ``None`` (``--insecure``) skips the check of peers' key signatures:
        byte-capture tests only, never a deployment.
    ledger : Ledger
        The node's ledger; every evaluation release is debited here before it leaves.
    """

    def __init__(
        self,
        keys: dict[str, X25519PrivateKey],
        ca_pem: bytes | None,
        ledger: Ledger,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not isinstance(ledger, Ledger):
            raise ConfigError(f"RingDriver needs the node's Ledger, got {type(ledger).__name__}")
        self._keys = keys  # owner_id -> X25519 private key
        self.ca = x509.load_pem_x509_certificate(ca_pem) if ca_pem else None
        self._ledger = ledger
        self._clock = clock
        self._parties: dict[str, RingParty] = {}  # owner_id -> its party in the current session
        self._verified: dict[tuple[str, str, bytes, bytes], bytes] = {}
        self._sessions: dict[
            str, tuple[tuple[str, ...], dict[str, bytes]]
        ] = {}  # session id -> (ring, certificates), sent once per node
        self._released: dict[tuple[str, str], tuple[int, np.ndarray]] = {}  # (owner, release id) -> (round, pair)
        self._runs: dict[str, BoostConfig] = {}  # run id -> the config this node first saw for it

    # ------------------------------------------------------------------ validation
    def note_share(self, config: BoostConfig) -> None:
        """Remember the config of a run's share task: its evaluations must carry the same one."""
        self._check_run_config(config)

    def _check_run_config(self, config: BoostConfig) -> None:
        seen = self._runs.setdefault(config.run_id, config)
        if seen != config:
            raise RemoteProtocolError(
                f"boosting run {config.run_id!r}: this task's config differs from the one this node "
                "already saw for the run"
            )

    def _session(self, ring_spec: RingSpec) -> tuple[tuple[str, ...], dict[str, bytes]]:
        if ring_spec.ring:
            self._sessions = {ring_spec.session_id: (ring_spec.ring, ring_spec.certificates)}
        if ring_spec.session_id not in self._sessions:
            raise ConfigError(f"ring session {ring_spec.session_id} arrived without its ring order")
        return self._sessions[ring_spec.session_id]

    def own_key(self, owner_id: str) -> X25519PrivateKey:
        """The long-lived X25519 key of an owner this node hosts (its end-to-end boxes)."""
        try:
            return self._keys[owner_id]
        except KeyError as exc:
            raise ConfigError(f"this node holds no key for {owner_id!r}") from exc

    def peer_key(self, certificates: Mapping[str, bytes], peer: PeerKey) -> bytes:
        """A peer's end-to-end key, accepted only if signed by the certificate of the node its id
        names (skipped without a CA); verified once and cached."""
        cache_key = (peer.owner_id, peer.node_id, peer.x25519_public_key, peer.key_signature)
        if cache_key in self._verified:
            return self._verified[cache_key]
        if self.ca is not None:
            # Only an owner node's certificate may vouch for a ring key: the coordinator holds a
            # CA-issued certificate too, and must not be able to list itself as a peer's node.
            if not OWNER_NODE_NAME.fullmatch(peer.node_id):
                raise RemoteProtocolError(
                    f"peer {peer.owner_id!r} is said to live on {peer.node_id!r}, which is not an owner node"
                )
            # And only the node that owns the id (contract 1): owner-1 must not vouch for owner-0's owners.
            if node_of(peer.owner_id) != peer.node_id:
                raise RemoteProtocolError(
                    f"peer {peer.owner_id!r} is not an owner of node {peer.node_id!r}; "
                    "its key must be signed by the node its id names"
                )
            pem = certificates.get(peer.node_id)
            if pem is None:
                raise ConfigError(f"no certificate for node {peer.node_id!r} of peer {peer.owner_id!r}")
            verify_public_key(
                x509.load_pem_x509_certificate(pem),
                self.ca,
                peer.owner_id,
                peer.x25519_public_key,
                peer.key_signature,
                now=self._clock(),
                cert_identity=peer.node_id,
            )
        self._verified[cache_key] = peer.x25519_public_key
        return peer.x25519_public_key

    def _check_task(self, owner: LocalOwner, spec: BoostEvaluateTask) -> tuple[FederatedBoosting, int, Learner]:
        """(run config, round, learner) of a valid evaluate task; raises ConfigError/RemoteProtocolError."""
        fb = spec.config.booster
        if fb.bounds.d != owner.X.shape[1]:
            raise ConfigError(
                f"task bounds describe {fb.bounds.d} features, this owner's schema has {owner.X.shape[1]}"
            )
        self._check_run_config(spec.config)
        check_one_role(self._ledger, owner.owner_id, spec.config, "evaluate")
        self._check_against_share(owner.owner_id, spec.config)
        check_history(owner, spec.config, spec.history)
        fb.check_learner(spec.learner)
        return fb, spec.history.round, spec.learner

    def _check_against_share(self, owner_id: str, config: BoostConfig) -> None:
        """If this owner released a share in the run, its debits must be the share part of this config.

        So a coordinator can't release a share under one ε split and then ask for evaluations
        under another: the run's total per owner stays ``config.booster.epsilon`` (the ledger keeps the
        share's entries under ``<label>:<run id>``, ``privfed.owner.handlers``; one per share, at most
        ``shares_per_owner`` of them, each at ``share_round_epsilon``).
        """
        run = config.run_id
        purposes = {f"{label}:{run}": label for label in SHARE_LABELS}
        debited = sorted(
            (purposes[h["purpose"]], h["epsilon"]) for h in self._ledger.history(owner_id) if h["purpose"] in purposes
        )
        if not debited:
            return
        expected = {label: eps for eps, _, label in boost_release_epsilons(config)}
        counts = Counter(label for label, _ in debited)
        same = (
            set(counts) == set(expected)
            and len(set(counts.values())) == 1
            and max(counts.values()) <= config.booster.shares_per_owner
            and all(x == expected[a] or math.isclose(x, expected[a], rel_tol=1e-9) for a, x in debited)
        )
        if not same:
            raise RemoteProtocolError(
                f"boosting run {run!r}: this config's share budget {sorted(expected.items())} differs from "
                f"the share this owner released in the run {debited}"
            )

    # ------------------------------------------------------------------ the release
    def release_of(self, owner_id: str, release_id: str) -> np.ndarray | None:
        """The noisy (err_sum, w_sum) this process released under ``release_id`` (the owner's own audit)."""
        cached = self._released.get((owner_id, release_id))
        return None if cached is None else cached[1].copy()

    def _party(self, owner: LocalOwner, spec: BoostEvaluateTask) -> RingParty:
        """The ring party of one evaluate task; nothing is computed from rows yet."""
        ring = spec.ring
        # The ring order and certificates come once per node and session: keep them even if this
        # owner's own task is refused, the node's other members of the ring need them.
        order, certificates = self._session(ring)
        fb = spec.config.booster
        if owner.owner_id not in order:
            raise RemoteProtocolError(f"{owner.owner_id} is not in the ring of session {ring.session_id}")
        if len(order) < 2:
            raise RemoteProtocolError("a ring needs at least 2 parties")
        bound = min(float(ring.max_abs), fb.contribution_bound)
        try:
            fixed_point = FixedPoint(frac_bits=ring.frac_bits, n_parties=ring.n_parties, max_abs=bound)
        except (TypeError, ValueError) as exc:
            raise RemoteProtocolError(f"ring encoding is unusable: {exc}") from exc
        peers = {p.owner_id: p for p in ring.peers}
        try:
            boxes = {
                pid: Box(owner.owner_id, self._keys[owner.owner_id], pid, self.peer_key(certificates, peers[pid]))
                for pid in peers
                if pid != owner.owner_id
            }
            return RingParty(owner.owner_id, order, ring.session_id, fixed_point, boxes)
        except KeyError as exc:
            raise ConfigError(f"ring session {ring.session_id}: no key for {exc}") from exc
        except ValueError as exc:  # an unparsable certificate or key from the coordinator
            if isinstance(exc, ConfigError):
                raise
            raise RemoteProtocolError(f"ring session {ring.session_id}: unusable peer material: {exc}") from exc

    def _cached(self, owner_id: str, spec: BoostEvaluateTask, round_no: int) -> np.ndarray | None:
        cached = self._released.get((owner_id, spec.release_id))
        if cached is None:
            return None
        if cached[0] != round_no:
            raise AlreadyReleased(
                f"{owner_id} already evaluated round {cached[0]} of run "
                f"{spec.config.run_id!r}, which evaluates once per owner"
            )
        return cached[1]

    def _draw(
        self, owner: LocalOwner, spec: BoostEvaluateTask, fb: FederatedBoosting, learner: Learner
    ) -> tuple[Debit, np.ndarray]:
        """The noisy pair of a release not made yet, and its debit (not committed)."""
        if self._ledger.has_released(owner.owner_id, spec.release_id):
            raise AlreadyReleased(
                f"{owner.owner_id} released {spec.release_id!r} before this process started; "
                "the noisy value is gone and a fresh draw would be a second release"
            )
        epsilon = fb.eval_round_epsilon
        self._ledger.check(owner.owner_id, epsilon)  # BudgetExceeded before any computation
        w = history_weights(owner, spec.config, spec.history)
        pair = fb.evaluation_release(np.array([fb.evaluation_sums(learner, owner.X, owner.y, w)]), rng=owner.rng)[0]
        return Debit(owner.owner_id, epsilon, 0.0, spec.release_id, spec.release_id), pair

    def contribute_many(
        self,
        items: Sequence[tuple[LocalOwner, BoostEvaluateTask]],
        prepare: Callable[[LocalOwner, BoostEvaluateTask], P],
        start: Callable[[LocalOwner, BoostEvaluateTask, P, np.ndarray], T],
    ) -> list[T | Exception]:
        """Contribute the evaluation releases of many tasks to a secure sum, their new releases
        debited in ONE transaction; the secure sum's protocol only enters through two callbacks.

        ``prepare(owner, spec)`` builds the protocol's party (nothing computed from rows yet; it may
        raise to refuse); then each task's release is taken from the cache or drawn and debited
        (:meth:`_draw`, the same noise and ledger entry whatever the protocol), clipped to the secure
        sum's public range (post-processing), and ``start(owner, spec, party, pair)`` gives the
        protocol the pair. Returns, per item, what ``start`` returned or the exception that refuses
        it (the caller answers with a refusal). One bad item never spoils the others.
        """
        outcomes: list[T | Exception | None] = [None] * len(items)
        prepared: dict[int, tuple[P, float, int]] = {}
        draws: list[tuple[int, tuple[str, str], Debit, np.ndarray, int]] = []
        pending: set[tuple[str, str]] = set()
        for i, (owner, spec) in enumerate(items):
            try:
                party = prepare(owner, spec)  # first: it may keep session data the node's other owners need
                fb, round_no, learner = self._check_task(owner, spec)
                prepared[i] = (party, min(float(spec.ring.max_abs), fb.contribution_bound), round_no)
                key = (owner.owner_id, spec.release_id)
                if self._cached(owner.owner_id, spec, round_no) is None and key not in pending:
                    debit, pair = self._draw(owner, spec, fb, learner)
                    draws.append((i, key, debit, pair, round_no))
                    pending.add(key)
            except Exception as exc:  # noqa: BLE001 - refused alone; the caller maps it to a refusal
                if not isinstance(exc, (PrivfedError, ValueError)):
                    log.exception("evaluate task for %s failed", owner.owner_id)
                outcomes[i] = exc
                prepared.pop(i, None)
        errors = self._ledger.debit_many([d for _, _, d, _, _ in draws]) if draws else []
        for (_, key, _, pair, round_no), error in zip(draws, errors):
            if error is None:
                self._released[key] = (round_no, pair)
        for i, (party, bound, round_no) in prepared.items():
            owner, spec = items[i]
            try:
                pair = self._cached(owner.owner_id, spec, round_no)
                if pair is None:  # its debit was refused: the error of the draw that tried
                    error = next(
                        e for (j, key, _, _, _), e in zip(draws, errors) if key == (owner.owner_id, spec.release_id)
                    )
                    if error is None or isinstance(error, LocalProtocolError):
                        raise AlreadyReleased(str(error))
                    raise error
                # Clipping the noisy pair to the secure sum's public range is post-processing of the release.
                outcomes[i] = start(owner, spec, party, np.clip(pair, -bound, bound))
            except Exception as exc:  # noqa: BLE001 - as above
                if not isinstance(exc, (PrivfedError, ValueError)):
                    log.exception("evaluate task for %s failed", owner.owner_id)
                outcomes[i] = exc
        return [LocalProtocolError("evaluation not started") if o is None else o for o in outcomes]

    def evaluate_many(self, items: Sequence[tuple[LocalOwner, BoostEvaluateTask]]) -> list[Evaluated | Exception]:
        """Start the ring parties of many evaluate tasks (:meth:`contribute_many`).

        Returns, per item, ``(payload, outbound)`` as :meth:`evaluate` returns, or the exception
        that refuses it. Every pair that leaves was committed to the ledger (or cached from an
        earlier commit) before its party starts.
        """

        def start(owner: LocalOwner, spec: BoostEvaluateTask, party: RingParty, pair: np.ndarray) -> Evaluated:
            self._replace_party(owner.owner_id, party)
            out = party.start(pair)
            # Members answer at once; the leader answers with the total when the ring closes.
            return (None if party.index == 0 else RingJoined(spec.ring.session_id)), out

        return self.contribute_many(items, self._party, start)

    def evaluate(self, owner: LocalOwner, spec: BoostEvaluateTask) -> Evaluated:
        """Start this owner's party: returns (result payload or None, outbound envelopes).

        The owner's noisy pair is debited (or taken from the cache of this (run, round)) before
        the party produces anything.

        Raises
        ------
        ConfigError, RemoteProtocolError
            The task does not fit the run's public configuration, this owner or its ring
            (:class:`AlreadyReleased` for a release already made that can't be repeated).
        BudgetExceeded
            The release would overspend; nothing was computed, recorded or sent.
        """
        (outcome,) = self.evaluate_many([(owner, spec)])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def start_evaluations(
        self, items: Sequence[tuple[LocalOwner, BoostEvaluateTask]]
    ) -> list[tuple[Refusal | None, RingJoined | RingTotal | None, list[Outbound]]]:
        """:meth:`evaluate_many` (one ledger transaction for all new releases) with every failure
        turned into the refusal a coordinator gets: per item ``(refusal, None, [])`` or
        ``(None, payload, outbound envelopes)``.

        The one place that maps an evaluation's errors to refusal codes (:func:`evaluation_refusal`),
        for the gRPC node and the in-process transport alike. A refused evaluation sends no envelope
        (contract 4); the refusal text is the code's fixed text (contract 3): an exception's message
        may quote private values, so it goes to the log only.
        """
        from privfed.owner.handlers import check_boost_config

        answers: list[tuple[Refusal | None, RingJoined | RingTotal | None, list[Outbound]]] = [
            (None, None, []) for _ in items
        ]
        checked = []
        for i, (owner, spec) in enumerate(items):
            try:
                check_boost_config(owner, spec.config)  # public checks only, before any row is read
                checked.append(i)
            except Exception as exc:  # noqa: BLE001 - nothing a task does may take the node down
                answers[i] = (evaluation_refusal(owner.owner_id, exc), None, [])
        try:
            outcomes: list[Evaluated | Exception] = self.evaluate_many([items[i] for i in checked])
        except Exception as exc:  # noqa: BLE001 - e.g. a ledger that cannot record (full disk): nothing released
            outcomes = [exc] * len(checked)
        for i, outcome in zip(checked, outcomes):
            if isinstance(outcome, Exception):
                answers[i] = (evaluation_refusal(items[i][0].owner_id, outcome), None, [])
            else:
                answers[i] = (None, *outcome)
        return answers

    def start_evaluation(
        self, owner: LocalOwner, spec: BoostEvaluateTask
    ) -> tuple[Refusal | None, RingJoined | RingTotal | None, list[Outbound]]:
        """:meth:`start_evaluations` of one task."""
        return self.start_evaluations([(owner, spec)])[0]

    def _replace_party(self, owner_id: str, party: RingParty) -> None:
        """``party`` is the owner's party now. A previous one still running belongs to a session the
        coordinator gave up on (it re-forms a ring only after the attempt's deadline): it times out."""
        old = self._parties.get(owner_id)
        if old is not None and old.session_id != party.session_id:
            old.on_timeout()
            if old.failure_reason:
                log.info("ring session %s abandoned: %s", old.session_id, old.failure_reason)
        self._parties[owner_id] = party

    def deliver(self, owner_id: str, data: bytes) -> tuple[RingTotal | None, list[Outbound]]:
        """A relayed envelope for ``owner_id``: returns (RingTotal or None, outbound envelopes).

        The leader's total answers its evaluate task, and its RESULT envelopes go to every member
        (the seed paper's "distributes to all other data owners"), whose machines then end DONE
        with the same total; a member's party is forgotten once done.
        """
        party = self._parties.get(owner_id)
        if party is None:
            log.warning("ring message for %s, which is in no ring here: dropped", owner_id)
            return None, []
        try:
            out = party.on_message(Inbound.from_bytes(data))
        except ProtocolError as exc:
            log.warning("ring party %s failed: %s", owner_id, exc)
            return None, []
        total = party.result()
        if total is None:
            return None, out
        self._parties.pop(owner_id)
        if party.index == 0:
            return RingTotal(party.session_id, np.asarray(total)), out
        log.debug("ring session %s closed for %s", party.session_id, owner_id)
        return None, out
