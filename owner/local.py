"""The logical owners a node hosts: private rows and generator, public configuration, and what
the owner remembers of the releases it made.

Two halves, kept apart so that code which decides about a task cannot read a row by accident
(:mod:`privfed.owner.kinds.base`, ``PublicView``): :class:`PublicConfig` is what the federation
schema says about the owner (feature count, public bounds, declared classes), the only thing a
task kind's ``validate`` sees of it; :class:`LocalOwner` adds the rows, the noise generator and
the per-owner caches, which only ``compute`` touches.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds, flush_tiny
from privfed.common.errors import ConfigError
from privfed.common.tasks import Payload
from privfed.common.validation import check_int

if TYPE_CHECKING:
    from privfed.owner.history import AppliedHistory

#: What a release kind computes: a reply message, or (the boosting evaluation pair) the values a
#: secure sum adds.
Release = Payload | np.ndarray
#: Releases an owner keeps for sending again (the latest ones; module docstring of ``privfed.owner.core``).
KEPT_RELEASES = 64


@dataclass(frozen=True)
class PublicConfig:
    """An owner's public configuration: the schema's public bounds (and so its feature count) and
    the number of classes its data set declares. Every bound a task uses must be these."""

    bounds: Bounds
    n_classes: int

    def __post_init__(self) -> None:
        if not isinstance(self.bounds, Bounds):
            raise ConfigError(f"an owner's public bounds must be a Bounds, got {type(self.bounds).__name__}")
        check_int(self.n_classes, name="n_classes", minimum=2)

    @property
    def n_features(self) -> int:
        return self.bounds.d


@dataclass(frozen=True)
class Cached:
    """A release already made, kept to be sent again: the payload and the tag its kind checks
    a repeated request against (e.g. the boosting round of an evaluation pair)."""

    payload: Release
    tag: object = None


@dataclass
class LocalOwner:
    """One logical owner hosted by a node.

    Parameters
    ----------
    owner_id : str
    X, y : arrays (n, d), (n,)
        The private rows and class indices; read by ``compute`` only. Values below
        :data:`~privfed.common.bounds.TINY` in magnitude are read as 0 (:func:`~privfed.common.bounds.flush_tiny`):
        a subnormal's arithmetic is slower, and would tell a coordinator timing the answer that a row holds one.
    rng : numpy.random.Generator
        The owner's noise stream.
    n_classes : int
        Classes its data set declares (public).
    bounds : Bounds
        The schema's public bounds (public): a task whose bounds differ is refused.
    row_keys : tuple of bytes
        One digest per row (:func:`privfed.owner.data.row_digests`): the ledger keeps an account per
        row, so a row's spent budget follows it into any partition (issue 20, finding 4). Empty:
        the owner is accounted under its id only.
    """

    owner_id: str
    X: np.ndarray
    y: np.ndarray
    rng: np.random.Generator
    n_classes: int
    bounds: Bounds
    row_keys: tuple[bytes, ...] = field(default=(), repr=False, compare=False)
    #: run id -> the SAMME weights this node applied for the run (``privfed.owner.history.history_weights``)
    boost_applied: dict[str, AppliedHistory] = field(default_factory=dict, repr=False, compare=False)
    #: release key -> the release sent under it (a boosting run's share, an evaluation pair): asked
    #: again, it is sent again, never recomputed (no new draw, no debit). In memory: a restarted
    #: node refuses instead (``already_released``), its ledger holds the release id.
    released: OrderedDict[str, Cached] = field(default_factory=OrderedDict, repr=False, compare=False)
    #: What a task kind's ``validate`` may see of this owner.
    public: PublicConfig = field(init=False, repr=False, compare=False)
    #: Whose rows a release is computed from (:attr:`work_owner`): this owner, or its stand-in if it has none.
    _work_owner: LocalOwner | None = field(default=None, init=False, repr=False, compare=False)
    #: A view's owner and the positions of its rows there (:meth:`without`); None: an owner, not a view.
    rows_of: tuple[LocalOwner, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.public = PublicConfig(self.bounds, self.n_classes)
        self.X = flush_tiny(self.X)  # no subnormal reaches a release's arithmetic (audit 8)
        if self.row_keys and len(self.row_keys) != np.asarray(self.X).shape[0]:
            raise ConfigError(f"owner {self.owner_id}: {len(self.row_keys)} row keys for {len(self.X)} rows")
        if np.asarray(self.X).shape[0] == 0:
            self._work_owner = self._stand_in()

    def _stand_in(self) -> LocalOwner:
        """One public row (the bounds' midpoint, class 0) that an owner of no rows computes from and drops.

        Why: an owner's row count is private, and 0 shares the first public cell with 1
        (:func:`privfed.common.work_rows.work_rows`), but each kind's computation of no rows takes a shortcut
        (an early return, an exception into the fallback) that a coordinator timing the answer sees
        (``tests/adversary/test_differential_zero_rows.py``). So an owner of no rows does a one-row owner's
        work on this row and answers what its kind defines for no data -- its fallback of no rows, the same
        mechanism on an empty set -- as an owner whose rows cannot afford a release does
        (:mod:`privfed.owner.compute`, "Timing"; Haeberlen, Pierce, Narayan, USENIX Security 2011, §5).
        It draws from the owner's generator and applies the owner's boosting rounds (the same dict: which
        rounds were applied is public, ``PublicView.applied``)."""
        row = ((self.bounds.lo + self.bounds.hi) / 2.0)[None, :]
        stand_in = LocalOwner(self.owner_id, row, np.zeros(1, dtype=np.int64), self.rng, self.n_classes, self.bounds)
        stand_in.boost_applied = self.boost_applied
        return stand_in

    def without(self, rows_out: frozenset[int]) -> LocalOwner:
        """This owner's rows but those at the positions ``rows_out``, for one release
        (``privfed.owner.compute.release_from``): the rows the ledger's individual filter or the owner's
        policy keeps out of it (:class:`~privfed.common.ledger_records.RowsUnused`). The view draws from this
        owner's generator and keeps its releases; its SAMME weights are this owner's at its rows
        (:func:`~privfed.owner.history.history_weights`). A release of it is the release of those rows alone:
        its work, its count's cell and its shape are theirs, so a row left out changes nothing the release
        shows (audit 16)."""
        out = np.zeros(self.n_rows, dtype=bool)
        out[np.fromiter(rows_out, dtype=np.int64, count=len(rows_out))] = True
        kept = np.flatnonzero(~out)
        view = LocalOwner(
            self.owner_id, self.X[kept], self.y[kept], self.rng, self.n_classes, self.bounds, released=self.released
        )
        view.rows_of = (self, kept)
        return view

    @property
    def work_owner(self) -> LocalOwner:
        """The owner a release is computed from: this one, or (no rows) its stand-in, whose release is dropped.
        Read from the rows held now (the same calls either way); the stand-in is made when the owner is."""
        if self.n_rows:
            return self
        if self._work_owner is None:  # rows taken away after the owner was made
            self._work_owner = self._stand_in()
        return self._work_owner

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    def remember(self, key: str, cached: Cached) -> None:
        """Keep ``cached`` under ``key`` (the latest :data:`KEPT_RELEASES` releases)."""
        self.released.pop(key, None)
        self.released[key] = cached
        while len(self.released) > KEPT_RELEASES:
            self.released.popitem(last=False)
