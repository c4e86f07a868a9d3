"""Errors shared by every privfed package (STYLE rule 9).

Messages name the parameter, the value received, the allowed range and the fix.
"""


class PrivfedError(Exception):
    """Base class of every error privfed raises on purpose."""


class ConfigError(PrivfedError, ValueError):
    """A parameter, flag or input file is invalid."""


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
