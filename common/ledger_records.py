"""The ledger's values: budgets, debits, standings, and the budget test every debit passes
(``privfed.common.ledger`` module docstring, "Floating point"). Pure data, no file."""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from privfed.common.errors import BudgetExceeded, ConfigError
from privfed.common.validation import check_non_negative, check_probability

#: Relative tolerance on the budget comparison (``privfed.common.ledger`` docstring, "Floating point").
REL_TOL = 1e-12


def fmt_amount(x: float) -> str:
    """An ε or δ as messages print it."""
    return "inf" if math.isinf(x) else f"{x:.12g}"


@dataclass(frozen=True, order=False)
class Budget:
    """An (ε, δ) pair, ordered jointly: ``a <= b`` iff ``a.epsilon <= b.epsilon`` and
    ``a.delta <= b.delta`` (a partial order, as diffprivlib's ``Budget``).

    ε may be ``math.inf`` (a non-private release); δ is a finite non-negative number.
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_non_negative(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "delta", check_non_negative(self.delta, name="delta"))

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget(self.epsilon + other.epsilon, self.delta + other.delta)

    def __le__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def __ge__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return other <= self

    def __lt__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return self <= other and self != other

    def __gt__(self, other: Budget) -> bool:
        if not isinstance(other, Budget):
            return NotImplemented
        return other < self

    def __str__(self) -> str:
        return f"(epsilon={fmt_amount(self.epsilon)}, delta={fmt_amount(self.delta)})"


@dataclass(frozen=True)
class Recipient:
    """Whom a release went to, as the owner knew it when it debited the release (walkthrough 4, M4); recorded
    in the owner's own ledger and nowhere else (``privfed.common.ledger_file``, schema version 5).

    It is what the owner was told or checked, not private data: nothing the owner sends, refuses or answers
    depends on it (the owner core stamps one per batch on every debit, whatever its rows).

    Parameters
    ----------
    data_user : str
        The identity (certificate name) of the data user who submitted the job, as the job's announcement
        names it (:class:`~privfed.common.jobinfo.JobInfo`); empty: the coordinator's operator ran the job, or
        no job was announced.
    coordinator : str
        The coordinator the owner node's session is with, as its channel authenticated it
        (:func:`privfed.proto.transport.peer_identity`); empty: not known (an in-process coordinator).
    """

    data_user: str = ""
    coordinator: str = ""

    def __post_init__(self) -> None:
        for name in ("data_user", "coordinator"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"recipient {name} must be text ('' when unknown), got {getattr(self, name)!r}")


#: The recipient of a release nobody named (a release recorded before ledger schema 5 reads as this too).
UNKNOWN_RECIPIENT = Recipient()


@dataclass(frozen=True)
class Debit:
    """One entry of :meth:`Ledger.debit_many`; validated when built.

    ``nonprivate=True`` records a release without DP guarantee (module docstring, "Non-private
    entries"); its ε and δ must be 0.
    """

    owner_id: str
    epsilon: float
    delta: float
    purpose: str
    release_id: str
    nonprivate: bool = False
    job: str = ""  # the announced job the release is made for (empty: none)
    recipient: Recipient = UNKNOWN_RECIPIENT  # whom the release goes to (recorded locally only)
    #: Positions of the owner's rows the release may not read (the owner's policy keeps them out, each by
    #: what the ids that held it released: ``privfed.owner.policy``); the ledger keeps out those that cannot
    #: afford it as well (:class:`RowsUnused`).
    rows_out: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        require_name("owner_id", self.owner_id)
        require_name("purpose", self.purpose)
        require_name("release_id", self.release_id)
        object.__setattr__(self, "epsilon", check_non_negative(self.epsilon, name="epsilon", allow_inf=True))
        object.__setattr__(self, "delta", check_probability(self.delta, name="delta"))
        if not isinstance(self.nonprivate, bool):
            raise ConfigError(f"nonprivate must be a bool, got {self.nonprivate!r}")
        object.__setattr__(self, "rows_out", frozenset(int(i) for i in self.rows_out))
        if not isinstance(self.recipient, Recipient):
            raise ConfigError(f"recipient must be a Recipient, got {type(self.recipient).__name__}")
        if self.nonprivate and (self.epsilon != 0 or self.delta != 0):
            raise ConfigError(
                f"a non-private entry is counted apart from the budget: its epsilon and delta must be "
                f"0, got ({self.epsilon!r}, {self.delta!r}); debit the private part separately"
            )


#: The columns of table ``releases`` that make a recorded release (:func:`release_dict`), in this order.
RELEASE_COLUMNS = "release_id, purpose, epsilon, delta, ts, nonprivate, job, data_user, coordinator"


def release_dict(row: Sequence[Any]) -> dict[str, Any]:
    """One recorded release, read as :data:`RELEASE_COLUMNS`, as :meth:`Ledger.history` and
    :func:`~privfed.common.ledger_file.read_accounts` give it."""
    release_id, purpose, epsilon, delta, ts, nonprivate, job, data_user, coordinator = row
    return {
        "release_id": release_id,
        "purpose": purpose,
        "epsilon": epsilon,
        "delta": delta,
        "ts": ts,
        "nonprivate": bool(nonprivate),
        "job": job,
        "data_user": data_user,
        "coordinator": coordinator,
    }


@dataclass(frozen=True)
class RowsUnused:
    """An outcome of :meth:`Ledger.debit_many` (not an error): the entry is recorded on the owner's id, and on
    the accounts of its rows but ``rows``, the positions of those that cannot afford it (or that the entry keeps
    out, ``Debit.rows_out``): the release is made from the other rows alone. If no row is left the owner sends its
    kind's data-independent fallback, the release of no rows (computed from the rows all the same and dropped,
    for the time it takes: ``privfed.owner.compute``).

    Whether a request is refused depends on the owner id's own record alone, which the coordinator knows
    (it asked for every release in it); whether a row has spent its budget depends on which rows the owner
    holds, so it may change only what the release is made of, never whether one is made. This is an
    individual privacy filter (V. Feldman, T. Zrnic, "Individual Privacy Accounting via a Rényi Filter",
    NeurIPS 2021): a row whose account cannot afford a release drops out of it, by its own account alone, and a
    refusal never says that a row was spent before (a row-membership bit; found by wt-redteam2). Before audit 16
    one such row kept every row of the owner out: the release then jumped from the rows' to no rows' on one
    row's history (0.94 advantage at a debited 0.2 for 64-row owners' DP-PCA shares)."""

    owner_id: str
    release_id: str
    rows: tuple[int, ...]


def require_name(name: str, value: object) -> str:
    """``value`` if it is a non-empty string, else a :class:`ConfigError` naming ``name``."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string, got {value!r}")
    return value


def fits(spent: float, request: float, budget: float) -> bool:
    """Whether ``request`` on top of ``spent`` stays within ``budget`` up to :data:`REL_TOL`."""
    return spent + request <= budget * (1.0 + REL_TOL)


def used_up(spent: float, budget: float) -> bool:
    """Whether an account that spent ``spent`` of ``budget`` can afford no more ε but a rounding: what it has left
    is at most the :data:`REL_TOL` share of the budget by which :func:`fits` lets a sum pass the budget. Never while
    the budget is ∞ (it affords any ε)."""
    return not math.isinf(budget) and budget - spent <= budget * REL_TOL


def remaining_of(budget: Budget, spent: Budget) -> Budget:
    """``budget - spent`` per component, never negative; ∞ while the budget is ∞."""
    eps = math.inf if math.isinf(budget.epsilon) else max(0.0, budget.epsilon - spent.epsilon)
    return Budget(eps, max(0.0, budget.delta - spent.delta))


@dataclass(frozen=True)
class Standing:
    """An owner's record at one moment (:meth:`Ledger.standings`): what it spent, its budget and
    the ids of its releases (a set that answers ``in`` and ``len`` in O(1) and lists the ids only when
    iterated: :class:`~privfed.common.ledger_file.ReleaseIds`)."""

    spent: Budget
    budget: Budget
    release_ids: AbstractSet[str]


def refusal(owner_id: str, request: Budget, spent: Budget, budget: Budget, purpose: str) -> BudgetExceeded | None:
    """The refusal of ``request`` on top of ``spent`` against ``budget`` (None: it fits)."""
    if fits(spent.epsilon, request.epsilon, budget.epsilon) and fits(spent.delta, request.delta, budget.delta):
        return None
    what = f" for {purpose!r}" if purpose else ""
    return BudgetExceeded(
        f"owner {owner_id!r}: release{what} of {request} refused: spent {spent} + request exceeds "
        f"budget {budget}; nothing was released or recorded"
    )
