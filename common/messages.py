"""Domain messages exchanged between the coordinator and owners (transport-free).

These frozen dataclasses are what strategies and the owner core see; ``proto/serde.py`` maps
them to and from protobuf. Every payload an owner can send is listed here: registration data,
perturbed shares and refusals (the DESIGN.md allowlist). No raw row has a field to go in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.feddpdr.choices import ROW_SCALINGS, SVM_MODELS, ledger_entries
from privfed.common.secagg.messages import (
    InputRequest,
    KeyAdvert,
    KeyShares,
    MaskedInput,
    ShareKeysRequest,
    UnmaskReply,
    UnmaskRequest,
)
from privfed.common.validation import check_choice, check_positive

if TYPE_CHECKING:  # the boosting types import scipy (common/boosting/): only once a task needs them
    from privfed.common.boosting.wire import BoostConfig, BoostHistory, Learner

LABEL_MODES = ("clear", "rr")
REFUSAL_CODES = (
    "budget_exceeded",
    "invalid_task",
    "duplicate_task",
    "already_released",
    "policy",
    "internal",
    "schema_mismatch",
)

#: The fixed text of each refusal code. A refusal says its code, this text and at most a detail
#: built from the task's own fields and the owner's public configuration (its feature count, its
#: declared classes, its flags): never from rows, labels, counts or the ledger's spent amount, so
#: a refusal is not a release (issue 9, contract 3). The full reason goes to the owner's local log.
REFUSAL_TEXTS = {
    "budget_exceeded": "the owner's privacy budget does not cover this release; nothing was released",
    "invalid_task": "the task is invalid for this owner; nothing was released",
    "duplicate_task": "a task with this id was already received; nothing was released for the copy",
    "already_released": "this release was already made; a release is never made twice",
    "policy": "the owner's policy does not allow this release; nothing was released",
    "internal": "the owner failed to compute this release; nothing was released",
    "schema_mismatch": "the owner's data does not fit the federation schema; nothing was released",
}


@dataclass(frozen=True)
class OwnerInfo:
    """What a node registers per logical owner: its id and its ring key. No row count (contract 2):
    a count is private unless noised and debited (see :class:`PcaShareTask`)."""

    owner_id: str
    x25519_public_key: bytes = b""  # end-to-end key for ring messages
    key_signature: bytes = b""  # by the node's certificate key over (owner_id, key)


@dataclass(frozen=True)
class PeerKey:
    owner_id: str
    node_id: str
    x25519_public_key: bytes
    key_signature: bytes


@dataclass(frozen=True)
class NccShareTask:
    """Release every row once, perturbed, for nearest-centroid learning (seed 002 §3.5.1)."""

    mechanism: str
    epsilon: float
    labels: str
    label_epsilon: float
    n_classes: int
    bounds: Bounds

    def __post_init__(self) -> None:
        check_choice(self.labels, name="labels", allowed=LABEL_MODES)

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        entries = [(self.epsilon, 0.0, "ncc-features")]
        if self.labels == "rr":
            entries.append((self.label_epsilon, 0.0, "ncc-labels"))
        return entries


@dataclass(frozen=True)
class LrShareTask:
    """Release one perturbed local logistic-regression model (seed 002 §3.5.2)."""

    mechanism: str
    epsilon: float
    param_bound: float
    c: float
    n_classes: int
    bounds: Bounds

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return [(self.epsilon, 0.0, "lr-model")]


@dataclass(frozen=True)
class PcaShareTask:
    """Release a DP-PCA subspace (seed 004 Alg. 2; SPEC §7) and a DP row count.

    The count ``n_i`` weights the owner's subspace (and later its SVM) in the aggregate
    ``n_i / sum n``. It is released by the two-sided geometric mechanism at ``count_epsilon``
    (sensitivity 1 under add/remove of a row), a separate ledger entry next to the DP-PCA
    ``(epsilon, delta)``; the coordinator reuses the noisy count for the SVM phase, so it is
    released once per FedDPDR run (issue 9, contract 7). ``count_epsilon = inf`` releases the
    exact count and needs an infinite budget.
    """

    epsilon: float
    delta: float
    k: int
    bounds: Bounds
    count_epsilon: float
    scaling: str  # public row scaling into the unit ball (privfed.common.feddpdr.pca.ROW_SCALINGS)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "count_epsilon", check_positive(self.count_epsilon, name="count_epsilon", allow_inf=True)
        )
        check_choice(self.scaling, name="scaling", allowed=ROW_SCALINGS)

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return [(self.epsilon, self.delta, "dp-pca"), (self.count_epsilon, 0.0, "dp-count")]


@dataclass(frozen=True, eq=False)
class SvmShareTask:
    """Release FedDPDR-DPML's phase-2 classifier on rows projected onto ``subspace`` (seed 004 Alg. 3).

    ``model`` (:data:`privfed.common.feddpdr.choices.SVM_MODELS`, no default: the task names it)
    says what is released and debited (:func:`privfed.common.feddpdr.choices.ledger_entries`): one
    ``(epsilon, delta)`` entry for the one-budget models (``centroid``, ``mc-huber``, ``softmax``), one
    pure-epsilon entry per one-vs-rest problem for ``ovr-huber`` (``delta`` must be 0). ``lam`` is the
    seed's regulariser of ``ovr-huber``; the one-budget objective-perturbation models take theirs from
    epsilon (:func:`privfed.common.feddpdr.multiclass.privacy_split`). ``scaling`` is the public row scaling.
    """

    epsilon: float
    lam: float
    n_classes: int
    bounds: Bounds
    subspace: np.ndarray | None  # (d, k) global subspace, None = no reduction (DPML)
    delta: float
    model: str
    scaling: str

    def __post_init__(self) -> None:
        check_choice(self.model, name="model", allowed=SVM_MODELS)
        check_choice(self.scaling, name="scaling", allowed=ROW_SCALINGS)

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return ledger_entries(self.model, self.epsilon, self.delta, self.n_classes)


def boost_release_epsilons(config: BoostConfig) -> list[tuple[float, float, str]]:
    """Ledger entries of one boosting share (seed 002 Alg. 2): the share part of the run's ε, or 1/T of it.

    ``BoostingParams.share_round_epsilon``: ``(1 - eval_fraction) ε`` for the one share of an owner,
    ``1/T`` of it for each of the T shares under ``share_groups="all"``. NCC splits it between features
    and labels by :func:`~privfed.common.learners.ncc.split_label_budget`, the one split the share's
    mechanisms use too (``ReleasePlan.release_mechanism``, ``label_rr``); at ε = ∞ both parts
    are ∞, never NaN.
    """
    from privfed.common.learners.ncc import split_label_budget

    fb = config.params
    if fb.base != "ncc":
        return [(fb.share_round_epsilon, 0.0, "boost-share")]
    features, labels = split_label_budget(fb.share_round_epsilon, fb.labels, fb.label_fraction)
    if fb.labels != "rr":
        return [(features, 0.0, "boost-share")]
    return [(features, 0.0, "boost-share-features"), (labels, 0.0, "boost-share-labels")]


def boost_eval_epsilon(config: BoostConfig) -> float:
    """ε of one evaluation release of a boosting run (``BoostingParams.eval_round_epsilon``)."""
    return config.params.eval_round_epsilon


@dataclass(frozen=True, eq=False)
class BoostShareTask:
    """Release one perturbed share for this round's base learner, with SAMME weights the owner
    computes from the public ``history``.

    An owner releases in at most one round of a run, where the run is named by the task's round
    id: a coordinator that sends another run id gets another release, and it is debited like any
    other -- the owner's ledger bounds the total over all runs, nothing bounds the number of runs.
    """

    config: BoostConfig
    history: BoostHistory

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return boost_release_epsilons(self.config)


@dataclass(frozen=True, eq=False)
class RingSpec:
    session_id: str
    ring: tuple[str, ...]
    frac_bits: int
    n_parties: int
    max_abs: float
    peers: tuple[PeerKey, ...]
    certificates: dict[str, bytes]  # node_id -> PEM bytes


@dataclass(frozen=True, eq=False)
class BoostEvaluateTask:
    """The new learner's local weighted error and weight sum, noised and debited, into the ring.

    The pair is a release (issue 9, contract 4): every row's weight clipped to the run's
    ``eval_row_bound`` b, Laplace noise ``Lap(2 b / ε)`` at ε = :func:`boost_eval_epsilon` of the
    config (row-level DP, LDP for a one-row owner; :class:`privfed.common.mechanisms.laplace.ErrorPairLaplace`), debited under
    :attr:`release_id` before the ring's first envelope leaves. One release per (run, round) -- per run under
    ``eval_groups="disjoint"`` -- whatever ring it is asked for; a re-formed ring gets the same
    noisy pair. ``history.round`` is the 0-based round.

    ``learner`` may also be given in its saved-model form (``learner.to_dict()``, what callers
    passed before the typed wire); it is turned into the learner here, once.
    """

    config: BoostConfig
    history: BoostHistory
    learner: Learner
    ring: RingSpec
    #: Pairwise-mask secure sum: this round's step-2 request (``ring.ring`` and ``ring.peers`` empty,
    #: ``ring.session_id`` the secagg session); None for the ring.
    secagg: InputRequest | None = None

    @property
    def round(self) -> int:
        return self.history.round

    @property
    def release_id(self) -> str:
        """The ledger key of this evaluation release: ``boost-eval:<run id>:<round>`` (or ``:once``)."""
        slot = self.round if self.config.params.eval_groups == "all" else "once"
        return f"boost-eval:{self.config.run_id}:{slot}"

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return [(boost_eval_epsilon(self.config), 0.0, "boost-eval")]


@dataclass(frozen=True)
class RingMessageTask:
    data: bytes

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return []


@dataclass(frozen=True, eq=False)
class SecAggKeysTask:
    """The key agreement of a pairwise-mask secure sum (:mod:`privfed.common.secagg.pairwise`).

    ``request`` None: step 0, draw and sign the session's mask key (the reply is a
    :class:`KeyAdvert`). Otherwise step 1 (the reply is :class:`KeyShares`), with the neighbours'
    long-lived box keys (``peers``) and, in the first task of a node per session, the owner
    nodes' certificates (as :class:`RingSpec` carries them). Not a release: no ledger entry.
    """

    session_id: str
    frac_bits: int
    n_parties: int
    max_abs: float
    request: ShareKeysRequest | None = None
    peers: tuple[PeerKey, ...] = ()
    certificates: dict[str, bytes] = field(default_factory=dict)

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return []


@dataclass(frozen=True, eq=False)
class SecAggUnmaskTask:
    """Step 3 of a pairwise-mask secure sum round: the shares the coordinator needs to unmask the
    sum (never one owner's input; the machine refuses requests that would reveal one)."""

    session_id: str
    request: UnmaskRequest

    def ledger_entries(self) -> list[tuple[float, float, str]]:
        return []


TaskSpec = (
    NccShareTask
    | LrShareTask
    | PcaShareTask
    | SvmShareTask
    | BoostShareTask
    | BoostEvaluateTask
    | RingMessageTask
    | SecAggKeysTask
    | SecAggUnmaskTask
)


def total_budget(spec: TaskSpec) -> tuple[float, float]:
    """(ε, δ) a task spends in all, by basic composition of its ledger entries."""
    entries = spec.ledger_entries()
    return sum(e for e, _, _ in entries), sum(d for _, d, _ in entries)


@dataclass(frozen=True)
class Task:
    task_id: str
    owner_id: str
    round_id: str
    spec: TaskSpec


@dataclass(frozen=True)
class Refusal:
    """A task the owner did not answer: a code from :data:`REFUSAL_CODES` and a message (contract 3).

    Build owner-side refusals with :meth:`of`, which gives the fixed text of the code.
    """

    code: str
    message: str

    def __post_init__(self) -> None:
        check_choice(self.code, name="refusal code", allowed=REFUSAL_CODES)

    @classmethod
    def of(cls, code: str, detail: str = "") -> Refusal:
        """The fixed text of ``code``, plus ``detail`` (built only from the task and public configuration)."""
        check_choice(code, name="refusal code", allowed=REFUSAL_CODES)
        return cls(code, f"{REFUSAL_TEXTS[code]} ({detail})" if detail else REFUSAL_TEXTS[code])


@dataclass(frozen=True)
class NccShareReply:
    reports: np.ndarray  # (m, d) perturbed rows in [-1, 1]-space
    labels: np.ndarray  # (m,) clear or randomized-response labels


@dataclass(frozen=True)
class LrShareReply:
    reports: np.ndarray  # (1, p) perturbed parameter vector in [-1, 1]-space


@dataclass(frozen=True)
class PcaShareReply:
    subspace: np.ndarray  # (d, k)
    noisy_count: int  # the row count through the geometric mechanism (may be <= 0)


@dataclass(frozen=True)
class SvmShareReply:
    coef: np.ndarray  # (K, k + 1): DP coefficients, or DP class sums for model "centroid" (the coordinator sums them)


@dataclass(frozen=True)
class BoostShareReply:
    reports: np.ndarray  # (1, p) stump share / LR parameters, or (m, d + 1) weighted NCC rows
    labels: np.ndarray  # (m,) NCC labels, else empty
    coordinates: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))  # sampled stump encodings


@dataclass(frozen=True)
class RingJoined:
    session_id: str


@dataclass(frozen=True)
class RingTotal:
    session_id: str
    values: np.ndarray


Payload = (
    Refusal
    | NccShareReply
    | LrShareReply
    | PcaShareReply
    | SvmShareReply
    | BoostShareReply
    | RingJoined
    | RingTotal
    | KeyAdvert  # pairwise-mask secure sum, step 0: a signed mask public key
    | KeyShares  # step 1: Shamir shares sealed end-to-end to each neighbour
    | MaskedInput  # step 2: the owner's debited release, masked in Z_2^64
    | UnmaskReply  # step 3: shares of survivors' self-mask seeds and dropped owners' keys
)


@dataclass(frozen=True)
class Result:
    task_id: str
    owner_id: str
    payload: Payload
