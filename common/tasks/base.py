"""What every task kind is made of, and the envelope every task and reply travels in (transport-free).

A task kind is one :class:`Kind` object, declared once in its family's module (``shares``,
``feddpdr``, ``boosting``, ``steps``) and listed in :data:`privfed.common.tasks.KINDS`. It holds

* ``name``: the kind's key everywhere -- the field of ``pb.Task``'s ``oneof`` on the wire, the key
  of its serde pair (``proto/serde.py``) and of its owner-side validate/compute/fallback
  (``privfed.owner.kinds``);
* ``spec``: the frozen dataclass of its tasks, whose ``ledger_entries()`` are what a task debits
  (``(epsilon, delta, purpose)`` per privacy-relevant part; none for a secure sum's steps);
* ``replies``: the payload types an honest owner answers with (a :class:`Refusal` aside);
* ``contract``: a pure function of (task spec, reply, public limits) that raises
  :class:`~privfed.common.tasks.contract.ContractViolation` unless the reply is one an honest
  owner's release could be; the coordinator checks every reply with it before it uses the reply;
* ``tasks``: the jobs (``--task``) that send it; an owner answers it only in a job announced as one of them;
* ``contribution``: whether its reply is an owner's own contribution to the model (a share), which
  each owner answers on its own: a live node that never answers one is stalling (``no_answer``).
  An evaluation is answered with the rest of its secure sum, a step is the sum's business.

Everything dispatches on a kind by a dictionary lookup, by spec type (:func:`kind_of`) or by name.
No raw row has a field to go in: every payload an owner can send is a kind's reply or a refusal
(the DESIGN.md allowlist).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeAlias, TypeVar

from privfed.common.validation import check_choice

if TYPE_CHECKING:
    from privfed.common.tasks.contract import PublicLimits

#: The refusal code of every task of a job the owner's policy declines (``privfed.owner.policy``).
POLICY_DECLINED = "policy"

REFUSAL_CODES = (
    "budget_exceeded",
    "invalid_task",
    "duplicate_task",
    "already_released",
    POLICY_DECLINED,
    "internal",
    "schema_mismatch",
    "unopened",
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
    POLICY_DECLINED: "the owner's policy does not allow this release; nothing was released",
    "internal": "the owner failed to compute this release; nothing was released",
    "schema_mismatch": "the owner's data does not fit the federation schema; nothing was released",
    "unopened": "what the named owner sealed to this owner did not open; it takes no part in this secure sum",
}

LedgerEntries: TypeAlias = list[tuple[float, float, str]]


class TaskSpec(Protocol):
    """What the spec of every kind has: the ledger entries ``(epsilon, delta, purpose)`` of its release."""

    def ledger_entries(self) -> LedgerEntries: ...


#: What an owner answers a task with: one of its kind's ``replies``, or a :class:`Refusal`.
Payload: TypeAlias = object

S = TypeVar("S", bound=TaskSpec)


@dataclass(frozen=True, eq=False)
class Kind(Generic[S]):
    """One task kind (module docstring)."""

    name: str
    spec: type[S]
    replies: tuple[type, ...]
    contract: Callable[[S, Payload, PublicLimits], None]
    contribution: bool = False
    #: The jobs (``--task``) whose strategies send this kind: an owner refuses a release of any other
    #: job's kind (``invalid_task``), so an announcement -- and a policy's ``tasks`` -- names what is
    #: released. Empty: a secure sum's step, part of whichever job runs the sum.
    tasks: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Kind({self.name!r})"


@dataclass(frozen=True)
class OwnerInfo:
    """What a node registers per logical owner: its id and its ring key. No row count (contract 2):
    a count is private unless noised and debited (see :class:`~privfed.common.tasks.feddpdr.PcaShareTask`)."""

    owner_id: str
    x25519_public_key: bytes = b""  # end-to-end key for ring messages
    key_signature: bytes = b""  # by the node's certificate key over (owner_id, key)


def total_budget(spec: TaskSpec) -> tuple[float, float]:
    """(ε, δ) a task spends in all, by basic composition of its ledger entries."""
    entries = spec.ledger_entries()
    return sum(e for e, _, _ in entries), sum(d for _, d, _ in entries)


@dataclass(frozen=True)
class Task:
    """One owner's task. ``round_id`` names the run its release ids are tied to (e.g. one per gradient-descent
    run, :func:`~privfed.common.tasks.gradient.gradient_release_id`); ``step`` is the coordinator's name for the
    batch within it, for logs only (``"gradient step 2 of 4"``), never on the wire."""

    task_id: str
    owner_id: str
    round_id: str
    spec: TaskSpec
    step: str = field(default="", compare=False)

    @property
    def round_name(self) -> str:
        """The batch's name in the coordinator's and the job's logs: its run, and its step within it if any."""
        return f"{self.round_id} ({self.step})" if self.step else self.round_id


@dataclass(frozen=True)
class Refusal:
    """A task the owner did not answer: a code from :data:`REFUSAL_CODES` and a message (contract 3).

    Build owner-side refusals with :meth:`of`, which gives the fixed text of the code. ``accused`` (code
    ``unopened`` only) names the owner whose sealed key shares did not open at this one (audit 33, A33-2): a fact of
    the message, not of any owner's data.
    """

    code: str
    message: str
    accused: str = ""

    def __post_init__(self) -> None:
        check_choice(self.code, name="refusal code", allowed=REFUSAL_CODES)

    @classmethod
    def of(cls, code: str, detail: str = "", *, accused: str = "") -> Refusal:
        """The fixed text of ``code``, plus ``detail`` (built only from the task and public configuration)."""
        check_choice(code, name="refusal code", allowed=REFUSAL_CODES)
        return cls(code, f"{REFUSAL_TEXTS[code]} ({detail})" if detail else REFUSAL_TEXTS[code], accused)

    def line(self) -> str:
        """``"code: message"``: how a job's books, reports and listings keep a refusal (read back by
        :func:`refusal_parts`)."""
        return f"{self.code}: {self.message}"


def refusal_parts(line: str) -> tuple[str, str]:
    """The code and message of a refusal kept as :meth:`Refusal.line`."""
    code, _, message = line.partition(": ")
    return code, message


@dataclass(frozen=True)
class Result:
    task_id: str
    owner_id: str
    payload: Payload
