"""What a task kind declares to the owner core (issue 20 item 1), and what it may see.

A *release kind* (a task that reads rows and lets something leave) declares

* ``validate(task, spec, view)``: sees only the task and a :class:`PublicView` -- the owner's
  public configuration (schema bounds, declared classes), the node's policy, the ledger's
  record of this owner (with the debits of tasks accepted earlier in the batch) and what the owner
  released before. It raises :class:`Refused` (or a ``ConfigError``, ``BudgetExceeded``...) to
  refuse, or returns a :class:`~privfed.owner.local.Cached` release to send again. Nothing in a
  ``PublicView`` holds a row, so whether a task is refused is a function of public inputs;
* ``debits(task, spec)``: its ledger entries, committed before ``compute`` runs;
* ``compute(task, spec, owner)``: the release, from the rows. It must be *total*: whatever it
  raises, or a non-finite result, is replaced by ``fallback(spec, public, n_rows, rng)``, the same
  mechanism around a data-independent value (the owner core, "Totality");
* optionally ``mod(spec)``: the secure sum the release goes through (the evaluation pair of
  boosting: ring or pairwise masks), as a Flower mod wraps a ClientApp's reply.

A *step kind* (a secure sum's protocol message: a ring hop, a key agreement, an unmasking) reads
no row and releases nothing of its own; it is handed to its mod's ``step``. The *join kind* (the accept
round) reads no row and releases nothing either: the owner core answers it from the job's announcement
and the node's policy.

The rest of a kind -- its spec and reply types, ledger entries and reply contract -- is declared
once in :mod:`privfed.common.tasks`; an owner kind names it (``kind``) and is registered under its name.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.ledger import Debit, Ledger, Standing
from privfed.common.tasks import Kind, Payload, Result, Task, TaskSpec
from privfed.owner.local import Cached, LocalOwner, PublicConfig, Release
from privfed.owner.once import NeverAgain

if TYPE_CHECKING:
    from privfed.common.boosting.wire import BoostConfig
    from privfed.common.secagg.ring import Outbound

#: Ledger purpose of the non-private entry recorded with every clear-label release.
CLEAR_LABELS = "clear-labels"


S = TypeVar("S", bound=TaskSpec)


class Refused(Exception):
    """A task refused before anything was computed; ``detail`` holds only task and public facts."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Policy:
    """The node's own choices (flags of ``privfed owner``)."""

    allow_clear_labels: bool = False


#: Boosting runs whose config a node keeps (the latest used); a task of a run it forgot is refused.
KEPT_RUNS = 64


@dataclass
class NodeState:
    """Public state a node keeps across tasks: functions of the tasks it received, never of rows.
    Bounded however many jobs a long-lived node serves: the configs of the :data:`KEPT_RUNS` runs
    used last, and the ids of the runs before them, which are never taken again."""

    #: boosting run id -> the config this node first saw for it (a run's evaluations must carry it)
    runs: dict[str, BoostConfig] = field(default_factory=dict)
    forgotten_runs: NeverAgain = field(default_factory=NeverAgain)


class LedgerView:
    """One owner's ledger, read only, with the debits of tasks accepted earlier in the batch
    (``pending``): a second task of the batch sees the first one's entries as if committed."""

    def __init__(
        self, ledger: Ledger, owner_id: str, pending: Sequence[Debit] = (), standing: Standing | None = None
    ) -> None:
        self._ledger = ledger
        self._owner_id = owner_id
        self._pending = pending
        #: the owner's record read for the whole batch (``Ledger.standings``); None: query it
        self._standing = standing

    def check(self, epsilon: float, delta: float = 0.0) -> None:
        """Raise ``BudgetExceeded`` unless the owner can afford ``(epsilon, delta)`` more."""
        eps = math.fsum([d.epsilon for d in self._pending] + [epsilon])
        dlt = math.fsum([d.delta for d in self._pending] + [delta])
        self._ledger.check(self._owner_id, eps, dlt, standing=self._standing)

    def has_release_id(self, release_id: str) -> bool:
        if any(d.release_id == release_id for d in self._pending):
            return True
        if self._standing is not None:
            return release_id in self._standing.release_ids
        return self._ledger.has_release_id(self._owner_id, release_id)

    def history(self) -> list[dict[str, Any]]:
        """The owner's entries (``Ledger.history``), then the pending ones."""
        pending = [
            {"release_id": d.release_id, "purpose": d.purpose, "epsilon": d.epsilon, "delta": d.delta}
            for d in self._pending
        ]
        return self._ledger.history(self._owner_id) + pending


@dataclass(frozen=True)
class PublicView:
    """What a kind's ``validate`` sees: no row, no label, no weight (module docstring)."""

    owner_id: str
    config: PublicConfig
    policy: Policy
    ledger: LedgerView
    node: NodeState
    #: boosting run id -> (rounds applied, their digest) for this owner (``privfed.owner.history``)
    applied: Mapping[str, tuple[int, bytes]]
    #: release key -> a release this owner already made (it may be sent again)
    cached: Mapping[str, Cached]


def check_schema(bounds: Bounds, view: PublicView) -> None:
    """A task's bounds must be the owner's public bounds (issue 20 item 4): the same feature count
    and the same numbers. Bounds a task chooses are never used for sensitivity."""
    if not isinstance(bounds, Bounds):
        raise Refused("invalid_task", "the task's bounds must be a Bounds")
    n = view.config.n_features
    if bounds.d != n:
        raise Refused("invalid_task", f"task bounds describe {bounds.d} features; this owner's schema has {n}")
    public = view.config.bounds
    if not (np.array_equal(bounds.lo, public.lo) and np.array_equal(bounds.hi, public.hi)):
        raise Refused("invalid_task", "task bounds differ from the public bounds of this owner's schema")


def check_classes(n_classes: object, view: PublicView) -> None:
    """A task's class count must be the one the owner's data set declares (never the labels held)."""
    if n_classes != view.config.n_classes:
        raise Refused(
            "invalid_task", f"task says {n_classes!r} classes; this owner's data set declares {view.config.n_classes}"
        )


#: Public limits of the scalar sensitivity parameters a task may carry (issue 20 item 4): constants
#: every owner holds. A value outside is refused; none of them ever comes from the rows.
SENSITIVITY_LIMITS = {
    "param_bound": (2.0**-20, 2.0**20),  # LR: parameter clip
    "weight_bound": (2.0**-20, 2.0**20),  # boosting shares: an owner's (or a row's) weight clip, in rows
    "eval_row_bound": (2.0**-20, 2.0**20),  # boosting evaluations: a row's weight clip b
    "max_owner_rows": (1, 10**9),  # boosting evaluations: sizes the public clip range M
    "lam": (2.0**-20, 2.0**20),  # FedDPDR's SVM regulariser: its solver's work grows like 1/sqrt(lam)
    "svm_rows": (1, 2**40),  # ovr-huber's public row count m: the solver's work grows like sqrt(cell / m)
    # LR's inverse regulariser: the fit multiplies rows by it, and C = 2^-1000 (or a subnormal) made those products
    # underflow for the rows near the middle of their bounds (audit 9, tests/adversary/test_underflow_parameters.py)
    "C": (2.0**-40, 2.0**40),
}


def check_limit(name: str, value: float) -> None:
    lo, hi = SENSITIVITY_LIMITS[name]
    if not lo <= value <= hi:
        raise Refused("invalid_task", f"{name}={value!r} is outside the public range [{lo:g}, {hi:g}]")


class SecureSum(Protocol):
    """A secure sum a release goes through (``TaskKind.mod``): a ring, or pairwise masks."""

    def prepare(self, owner_id: str, spec: Any) -> Any:
        """The owner's party for ``spec``, built from public material only; raises to refuse."""
        ...

    def start(self, task: Task, party: Any, values: np.ndarray) -> tuple[Payload | None, list[Outbound]]:
        """Give the party the owner's (debited) release: the task's answer, if any now, and envelopes."""
        ...

    def step(self, task: Task) -> tuple[Result | None, list[Outbound]]:
        """A protocol message for a hosted owner: the answer it gives, if any, and envelopes."""
        ...


class TaskKind(ABC, Generic[S]):
    """A release kind (module docstring). Subclasses set ``kind``, the task kind they answer."""

    #: The kind's declaration (:mod:`privfed.common.tasks`): its name, spec, replies, contract.
    kind: ClassVar[Kind[Any]]
    #: At most this many of its tasks are computed between two relays of a node's envelopes (one
    #: ledger transaction each): releases that read many rows come in small batches.
    batch: ClassVar[float] = 16
    #: ``validate`` reads the spec and the owner's public configuration (``view.config``) alone and
    #: returns None when it accepts: the owner core then validates each spec object once per
    #: owner configuration (a node's tasks of a round share the spec decoded once; issue 27).
    spec_only: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return self.kind.name

    def mod(self, spec: S) -> str | None:
        """The secure sum this release goes through, by name; None: answered directly."""
        return None

    def releases_clear_labels(self, spec: S) -> bool:
        """Whether the release carries labels without randomized response (owner opt-in only)."""
        return False

    @abstractmethod
    def validate(self, task: Task, spec: S, view: PublicView) -> Cached | None:
        """Refuse (raise) or accept ``task``; a :class:`Cached` release is sent again, not recomputed."""

    def debits(self, task: Task, spec: S) -> list[Debit]:
        """One ledger entry per privacy-relevant part of the release (``spec.ledger_entries()``),
        plus a non-private entry when it carries clear labels."""
        debits = [
            Debit(task.owner_id, eps, delta, f"{label}:{task.round_id}", f"{task.task_id}#{j}")
            for j, (eps, delta, label) in enumerate(spec.ledger_entries())
        ]
        if self.releases_clear_labels(spec):
            debits.append(
                Debit(
                    task.owner_id,
                    0.0,
                    0.0,
                    f"{CLEAR_LABELS}:{task.round_id}",
                    f"{task.task_id}#{CLEAR_LABELS}",
                    nonprivate=True,
                )
            )
        return debits

    @abstractmethod
    def compute(self, task: Task, spec: S, owner: LocalOwner) -> Release:
        """The release from the owner's rows (pure computation; total: see the module docstring)."""

    def compute_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        """The releases of several of its tasks at once, in order (``owners[i]`` answers
        ``tasks[i]``); None: computed one by one with ``compute`` (the default). A node hosting
        many owners computes a batch's releases together (issue 27): the same mechanism on each
        owner's own values, an independent draw per owner. Totality is the core's, per release:
        if this raises, every task is computed alone; a release that is not sendable is
        replaced by its fallback."""
        return None

    @abstractmethod
    def fallback(self, spec: S, public: PublicConfig, n_rows: int, rng: np.random.Generator) -> Release:
        """The same release around a data-independent value: what leaves if ``compute`` fails."""

    def fallback_many(self, tasks: Sequence[Task], owners: Sequence[LocalOwner]) -> list[Release] | None:
        """The fallbacks of several of its tasks at once, in order, drawn from each group's first owner's
        generator (as ``compute_many``); None: one by one with ``fallback`` (the default). Every debited
        release draws its fallback, used or not (:mod:`privfed.owner.compute`, "Timing"), so a kind that
        computes a batch together draws the batch's fallbacks together too."""
        return None

    def released(self, task: Task, spec: S, release: Release, owner: LocalOwner, node: NodeState) -> None:
        """Called once a fresh release was made (e.g. to keep it for sending again)."""

    def mod_input(self, spec: S, release: Release) -> np.ndarray:
        """What the mod is given of the release (kinds with a mod)."""
        raise ConfigError(f"task kind {self.name} goes through no secure sum")


class StepKind:
    """A secure sum's protocol message (module docstring): handed to its mod, no ledger entry."""

    def __init__(self, kind: Kind[Any], mod: str, batch: float) -> None:
        self.kind = kind
        self.mod = mod
        self.batch = batch

    @property
    def name(self) -> str:
        return self.kind.name


class JoinKind:
    """The accept round's task (:mod:`privfed.common.tasks.join`): answered by the owner core from the job's
    announcement, the node's policy and the owner's ledger totals alone (``OwnerCore._check_job``, the check every
    release of the job passes first), with an empty acceptance or that check's refusal. No row, no debit."""

    #: Any number at once: nothing is computed.
    batch: ClassVar[float] = math.inf

    def __init__(self, kind: Kind[Any]) -> None:
        self.kind = kind

    @property
    def name(self) -> str:
        return self.kind.name


OwnerKind = TaskKind[Any] | StepKind | JoinKind
