"""Errors shared by every privfed package (STYLE rule 9).

Messages name the parameter, the value received, the allowed range and the fix.
"""


def reason(exc: BaseException) -> str:
    """An error's words for a message that already names the file: an ``OSError``'s own text
    ("No such file or directory"), not Python's "[Errno 2] No such file or directory: 'path'"."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


class PrivfedError(Exception):
    """Base class of every error privfed raises on purpose."""


class ConfigError(PrivfedError, ValueError):
    """A parameter, flag or input file is invalid."""


class ConfigTypeError(ConfigError, TypeError):
    """A parameter has the wrong type (a string or ``bool`` where a number belongs).

    Both a :class:`ConfigError` and a ``TypeError``, as scikit-learn's ``InvalidParameterError`` is
    both a ``ValueError`` and a ``TypeError``: STYLE rule 4 asks for a ``TypeError``, rule 9 for an
    error inside the privfed hierarchy. Raised by :mod:`privfed.common.validation`.
    """


class BudgetExceeded(PrivfedError):
    """A release would spend more privacy budget than the owner has left.

    Raised *before* any computation or release; nothing has left the owner.
    """


class ProtocolError(PrivfedError):
    """A protocol state machine received or was asked to do something out of order."""


class LocalProtocolError(ProtocolError):
    """This party broke the protocol (a bug here, or a misuse of the API)."""


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol: unexpected, malformed, replayed or oversized message."""


class Unopened(RemoteProtocolError):
    """What ``sender`` sealed to this owner did not open (authenticate): its key shares in a pairwise-mask secure
    sum. The owner refuses with the code ``unopened`` naming ``sender`` (audit 33, A33-2), so the coordinator can
    leave the sender out instead of reading the refusal as this owner's failure."""

    def __init__(self, message: str, sender: str) -> None:
        super().__init__(message)
        self.sender = sender


class RoundFailed(PrivfedError):
    """A job could not complete a round, though every parameter was valid.

    Raised by the coordinator's round logic when the federation, not the configuration, is at
    fault: too few owners registered, no owner released a share, a ring secure sum failed
    ``MAX_RING_ATTEMPTS`` times, no learner was better than chance. The message says what was
    received and what to change (more owners, a larger epsilon, a longer timeout). Never raised
    by a servicer: it concerns the coordinator's job, not a node's call.
    """


class JobAborted(PrivfedError):
    """The job was stopped (SIGTERM) while waiting for owners or with a round in flight."""


class ResourceExhausted(PrivfedError):
    """A call would make the coordinator hold more than a public limit (a relay queue beyond its
    per-recipient or total bound); nothing was queued. Servicers answer RESOURCE_EXHAUSTED."""


class RingClosed(RemoteProtocolError):
    """A relay names a ring session that is not open (any more): FAILED_PRECONDITION, so a node
    can tell a ring the coordinator gave up on (drop the envelope) from a malformed call."""


class NodeIdInUse(RemoteProtocolError):
    """A second process registers a node id whose first process is alive: ALREADY_EXISTS, so the
    second one can tell a duplicate certificate from a malformed call (issue 23, item 4)."""


class TooFewParties(RoundFailed):
    """A secure sum lost all but one of its parties (or all): a sum of one owner's release is that release, so it
    sums nothing. ``dropped``: the parties it dropped, in its ring's order. A boosting round skips its learner then
    (:data:`~privfed.common.boosting.loop.NOT_EVALUATED`); other callers fail as for any round."""

    def __init__(self, message: str, dropped: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.dropped = dropped


class QuorumLost(RoundFailed):
    """Fewer owners than the job's quorum (``--min-owners``) are still taking part: the job stops
    before a later round spends anyone's budget (issue 23, item 2)."""


class EpsilonOutOfRange(ConfigError):
    """A mechanism was asked for an ε outside its public floor and ceiling (SPEC §12).

    Raised when the mechanism is built, from public parameters only, so an owner refuses the task
    with its fixed ``invalid_task`` code before anything is debited or computed
    (:func:`privfed.common.mechanisms.snapping.check_epsilon_range`).
    """
