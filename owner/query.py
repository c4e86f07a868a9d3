"""``privfed query``: private prediction with cleaned query rows (seed 003, Algorithm 1; SPEC §10).

An owner wants labels for its query rows from a model the coordinator serves. The coordinator is
not trusted (issue 9): each row is cleaned here, before anything leaves the process, and what
leaves is bounded below ("What x̃ reveals").

1. Read the query rows (and, for the null-space methods only, this owner's training rows):
   :mod:`privfed.owner.query_files`, which also says which of their columns are features ("Columns").
2. ``GetModel``: the model's kind, public bounds (so F) and first linear stage ``A_d`` (F×m_d, data
   space; :func:`privfed.server.servicer.model_linear_stage`). All three come from the
   coordinator, so :func:`check_linear_stage` refuses a stage with a non-finite entry, of
   numerical rank above ``--max-rank``, or with more than ``--max-rank + 1`` columns ("Rank").
3. Clean around the public centre ``c`` (the midpoint of the bounds, "Centring"):
   ``x̃ = c + clean(x − c)``, every row at once, with ``--method``:

   * ``projection`` (default): :class:`~privfed.common.nullspace.StageProjection`, the
     projection of ``x − c`` onto ``span(A_d)``, shrunk so that ``e_utility = ε``. Uses no
     training data. A projection outside the model's public bounds (which the served model would
     clip, reading another row) becomes the least-norm row inside them with the same scores.
   * ``subspace`` / ``generalized``: :class:`~privfed.common.nullspace.NullSpaceCleaner` against
     ``A_c = fit_linear_map(X_own, Y_c)``, the owner's least-squares map to its confidential
     labels (Algorithm 1). ``Y_c``, ``A_c`` and the raw rows never leave this process, but the
     cleaned rows reveal ``A_c``'s directions, so these methods need
     ``--allow-confidential-map-leak``.
4. ``Predict`` with the cleaned rows in chunks (:mod:`privfed.owner.query_client`); print or write the
   label values, and class probabilities with ``--probabilities``.

The refusals in steps 1-3 (bad flags, a stage over the bound, non-finite cleaned rows) are one-line
errors, exit status 2, and come before any row is sent.

What x̃ reveals
--------------
``x̃`` is the query the user chose to send. Every cleaning here is ``x̃ − c = g(A_dᵀ(x − c))``:
the kept and removed components have coefficients that are linear in ``A_dᵀ(x − c)`` (for the
null-space cleaner ``cᵢ = (A_dᵀvᵢ)ᵀA_dᵀ(x − c)/γᵢ`` when γᵢ > 0, and the γᵢ = 0 components
always go), and ``t``, α, β are functions of those coefficients. So about ``x`` the coordinator
learns ``A_dᵀx`` (``c`` and ``A_d`` are public: it sent them) and nothing outside what the model
reads: at most ``rank(A_d) ≤ --max-rank`` linear functions of each row, fewer when ε > 0. This
holds to rounding (~1e-15 relative) for ``projection`` and ``subspace``; the ``generalized``
solver's ill-conditioned ``M = B_c + ηI`` lets ~2e-8 relative of ``x``'s other directions into
``x̃`` (just below the wire grid for rows of norm ~10, not for larger ones).

What else shapes ``g``:

* ``projection``: only ``A_d`` and ε. The rows sent are a function of the query rows and public
  values; nothing about the owner's training rows or its confidential labels goes with them.
* null-space methods: also ``A_c``, a non-private statistic of the training rows. At ε = 0 with
  ``m_d + m_c ≤ F`` (maps in general position) every γ is 0 or ∞ and ``x̃ − c`` lies in
  ``(I − P_c)span(A_d)``, ``P_c`` the projector onto ``span(A_c)``: from one cleaned row and
  ``A_d`` the coordinator reads ``P_cA_d``; with one confidential label that is the direction of
  ``A_c`` itself, and a coordinator that serves stages ``e_1 … e_F`` across runs reads all of
  ``span(A_c)``. Hence the explicit opt-in. (Against the paper's fixed adversary that applies
  ``A_c`` to ``x̃`` this is what buys "complete privacy", ``A_cᵀ(x̃ − c) = 0``; against an
  adversary who knows the method both methods reveal the same ``A_dᵀx`` at ε = 0, and the
  paper's refitting attack does exactly as well against either:
  ``privfed experiment nullspace`` reports ``clean_attack`` and ``projection_attack``.)

The guarantee is therefore about the owner's training data and its confidential labels: with
``projection`` (default) no statistic of them is sent; the owner's exact training mean never is,
whatever the method (it was the centre before issue 9; see "Centring").

Rank
----
A model that reads ``m`` directions of a row learns ``m`` linear functions of every row it is
sent. A stage ``A_d = I`` (F directions) would make even perfect cleaning send each row whole,
so the owner states how many directions it accepts: ``--max-rank``, default 1, which is what a
binary lr model reads (``coef_`` has one row for two classes, ``LinearModel.data_linear_stage``).
A K-class lr model reads K and a feddpdr model its subspace dimension k (the federation's ``--k``;
the coordinator's word for it is not evidence), so for those the owner passes ``--max-rank``.
The kind in the GetModel answer is the coordinator's claim and plays no part in the bound. The
bound is on the numerical rank (:func:`numpy.linalg.matrix_rank`'s default tolerance; the
cleaners use the same one, so a direction below it is treated as one the model ignores and is
removed, never sent). The number of columns is bounded too, by ``--max-rank + 1``: an honest
stage has one column per direction it reads, plus at most one redundant column (a K-class stage
whose K score columns sum to zero has rank K − 1).

Centring
--------
Cleaning acts on ``x − c`` and adds ``c`` back. ``c`` is the midpoint of the model's public
bounds, never a statistic of the owner's rows: with the training mean ``x̄`` as centre (before
issue 9) every sent row lay in ``x̄ + W`` for a fixed ``rank(A_d)``-dimensional ``W``: once a few
rows show ``W``, each row gives away ``x̄``'s part outside ``W``, and a row whose desired signal
is below ε was ``x̄`` itself.
``c`` only moves the origin of the linear algebra: ``x − x̃ = (x − c) − g(x − c)``, so Theorem 1
(``e_utility = ε``) and exact label preservation at ε = 0 hold for any ``c``. The local ``A_c``
is still fitted centred at the training mean (:func:`~privfed.common.nullspace.fit_linear_map`):
that only removes the intercept from its slope, and ``x̄`` itself goes nowhere.

No clipping
-----------
Cleaned rows are sent as they are, *not* clipped to the public bounds: clipping moves ``x̃`` along
directions ``A_d`` reads (breaking ``e_utility = ε``, and label preservation at ε = 0) and, for
the null-space methods, along directions ``A_c`` reads. The served model applies its own public
preprocessing on its side: LR clips rows to the bounds, FedDPDR scales by the bounds' radius and
clips row norms to 1. A row (raw or cleaned) outside the bounds can therefore get a different
label than the linear algebra promises; the number of cleaned values outside the bounds is
logged. (``projection`` never lengthens ``x − c``, so an in-bounds row stays inside FedDPDR's
unit ball; LR's box can still be left along ``A_d``.) Raw query rows are not clipped either.

Wire
----
Rows travel as int64 indices on the 2^-20 grid (proto ``Reports``); the rounding moves each
decision score by at most ``max_j Σ_i |A_d[i, j]| · 2^-21``, so a label can differ from the raw
row's only for a row whose score is that close to a decision boundary. What leaves this process:
the model id, then the cleaned rows.

References
----------
K. Xu, S. Shah, T. Cao, C. Maung, H. Schweitzer. Enhancing the Privacy of Predictors. AAAI 2017
(seed 003), Algorithm 1 and Theorem 1.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.validation import check_choice, check_int, check_non_negative
from privfed.owner.query_files import confidential_columns, pinned_schema, query_rows, read_table
from privfed.proto.transport import TlsFiles

if TYPE_CHECKING:
    from privfed.common.nullspace import CleaningResult

log = logging.getLogger("privfed.query")

#: ``--max-rank`` default: a binary LR model reads one direction of a row (module docstring, "Rank").
DEFAULT_MAX_RANK = 1
#: ``--method`` choices: the training-free projection (default) and the two null-space solvers.
#: (``privfed.common.nullspace.METHODS``, spelled out so that building the CLI parser, which every
#: ``privfed`` command does, does not import scipy; a test checks the two agree.)
QUERY_METHODS = ("projection", "generalized", "subspace")
#: Null-space methods shape the sent rows with A_c, a statistic of --train-data ("What x̃ reveals").
MAP_METHODS = QUERY_METHODS[1:]


# ---------------------------------------------------------------------------- configuration
@dataclass(frozen=True, kw_only=True)
class QueryConfig:
    """One ``privfed query`` run, validated when built (the CLI builds it from its flags:
    :mod:`privfed.deploy.query_flags`). Errors name the flag.

    Attributes
    ----------
    coordinator : str
        ``HOST:PORT`` of the coordinator serving the model.
    model_id : str
        Id of the served model.
    queries : Path
        Query rows: CSV (F feature columns, then optional label columns, ignored) or NPZ with ``X``.
    target_name : str or None
        TLS name to expect from the coordinator when dialing an address.
    train_data : Path or None
        Null-space methods only: this owner's rows, F feature columns then label columns.
    confidential_labels : tuple of int or None
        Null-space methods only: distinct 0-based indices among the label columns of ``train_data``.
    utility_loss : float >= 0
        ``--utility-loss`` (formerly ``--clean-epsilon``): the squared change of the model's scores
        allowed per row, ``||A_dᵀ(x − x̃)||²`` (the paper's e_utility = ε, not a DP ε); 0 keeps every
        desired score.
    method : {"projection", "generalized", "subspace"}
        Module docstring, step 3.
    allow_confidential_map_leak : bool
        Required by the null-space methods ("What x̃ reveals").
    max_rank : int >= 1
        Largest rank of a linear stage the owner sends rows through ("Rank").
    out : Path or None
        CSV to write the label values to (header: the schema's label name, else ``label``); None prints them.
    probabilities : bool
        ``--probabilities``: also ask for class probabilities (refused for a model without them).
    schema : Path or None
        ``--schema``: the federation schema as the owner holds it ("Columns"); the model must read
        rows by it, and the query file is read by it, not by the coordinator's word.

    Raises
    ------
    ConfigError
        A value out of range, or a null-space method without its opt-in, ``train_data`` or
        ``confidential_labels`` (checked before anything is read or sent).
    """

    coordinator: str
    model_id: str
    queries: Path
    target_name: str | None = None
    train_data: Path | None = None
    confidential_labels: tuple[int, ...] | None = None
    utility_loss: float = 0.0
    method: str = "projection"
    allow_confidential_map_leak: bool = False
    max_rank: int = DEFAULT_MAX_RANK
    out: Path | None = None
    probabilities: bool = False
    schema: Path | None = None

    def __post_init__(self) -> None:
        utility_loss = check_non_negative(
            self.utility_loss,
            name="--utility-loss",
            fix="it is the squared change of the model's scores allowed per row; 0 keeps every desired score",
        )
        object.__setattr__(self, "utility_loss", utility_loss)
        max_rank = check_int(
            self.max_rank, name="--max-rank", minimum=1, fix="it counts the directions of a row the model may read"
        )
        object.__setattr__(self, "max_rank", max_rank)
        check_choice(self.method, name="--method", allowed=QUERY_METHODS)
        if self.confidential_labels is not None:
            cols = tuple(check_int(c, name="--confidential-labels index", minimum=0) for c in self.confidential_labels)
            if not cols or len(set(cols)) != len(cols):
                raise ConfigError(
                    f"--confidential-labels needs at least one index, each >= 0 and none repeated, got {cols}"
                )
            object.__setattr__(self, "confidential_labels", cols)
        self._check_method_flags()

    @property
    def training(self) -> tuple[Path, tuple[int, ...]] | None:
        """``(train_data, confidential_labels)`` for a null-space method; None for ``projection``,
        which uses no training data."""
        if self.method not in MAP_METHODS or self.train_data is None or self.confidential_labels is None:
            return None
        return self.train_data, self.confidential_labels

    def _check_method_flags(self) -> None:
        """Flag combinations, checked before anything is read or sent."""
        if self.method in MAP_METHODS:
            if not self.allow_confidential_map_leak:
                raise ConfigError(
                    f"--method {self.method} shapes the sent rows with a map fitted on --train-data, "
                    "whose directions the coordinator can then read (a non-private statistic of your "
                    "rows); pass --allow-confidential-map-leak to accept that, or use --method projection"
                )
            given = (("--train-data", self.train_data), ("--confidential-labels", self.confidential_labels))
            missing = [flag for flag, value in given if value is None]
            if missing:
                raise ConfigError(
                    f"--method {self.method} needs {' and '.join(missing)} (the confidential map is "
                    "fitted on your rows); or use --method projection, which needs neither"
                )
        elif self.train_data is not None or self.confidential_labels is not None:
            log.info("--method projection uses no training data: --train-data/--confidential-labels are ignored")


# ---------------------------------------------------------------------------- cleaning (pure)
def public_centre(bounds: Bounds) -> np.ndarray:
    """The centring point: the midpoint of the model's public bounds (module docstring, "Centring")."""
    return (bounds.lo + bounds.hi) / 2.0


def check_linear_stage(model_id: str, kind: str, A_d: np.ndarray, n_features: int, *, max_rank: int) -> int:
    """Refuse a linear stage the owner will not send rows through; returns its numerical rank.

    A served model learns ``A_dᵀx`` for every row it is sent, whatever the cleaning: ``A_d`` is the
    coordinator's choice, so its size is bounded here by the owner's public ``max_rank``
    (module docstring, "Rank"). Checked before any row is cleaned or sent.

    Raises
    ------
    RemoteProtocolError
        ``A_d`` is not an (F, m) matrix with m ≥ 1 or has a non-finite entry.
    ConfigError
        ``A_d`` has numerical rank above ``max_rank`` (:func:`numpy.linalg.matrix_rank`'s default
        tolerance, the one the cleaners use to tell read directions from ignored ones), or more
        than ``max_rank + 1`` columns.
    """
    A_d = np.asarray(A_d)
    if A_d.ndim != 2 or A_d.shape[0] != n_features or A_d.shape[1] < 1:
        raise RemoteProtocolError(
            f"model {model_id!r}: linear stage of shape {A_d.shape} does not fit its "
            f"{n_features} features; nothing sent"
        )
    bad = int(np.count_nonzero(~np.isfinite(A_d)))
    if bad:
        raise RemoteProtocolError(f"model {model_id!r}: linear stage has {bad} non-finite value(s); nothing sent")
    fix = (
        "a binary lr model needs 1, a K-class lr model K, a feddpdr model its k: pass --max-rank N only if "
        "the model is meant to read N directions"
    )
    if A_d.shape[1] > max_rank + 1:
        raise ConfigError(
            f"model {model_id!r} ({kind[:40]!r}) has a linear stage with {A_d.shape[1]} columns, "
            f"more than --max-rank {max_rank} allows ({max_rank + 1}); nothing sent ({fix})"
        )
    rank = int(np.linalg.matrix_rank(A_d))
    if rank > max_rank:
        raise ConfigError(
            f"model {model_id!r} ({kind[:40]!r}) has a linear stage of rank {rank}, more than "
            f"--max-rank {max_rank}; nothing sent ({fix})"
        )
    return rank


@dataclass(frozen=True)
class CleanedQueries:
    """Cleaned rows (data space), the trace of the cleaning and the owner's local quantities.

    Attributes
    ----------
    rows : (n, F) ``c + clean(x − c)``: what is sent.
    details : the cleaner's trace on the centred rows ``x − c``.
    centre : (F,) ``c``, the public centre (midpoint of the model's bounds).
    A_c : (F, m_c) the confidential map fitted locally (never sent), or None for ``projection``.
    centred : (n, F) the raw rows minus ``c`` (never sent).
    """

    rows: np.ndarray
    details: CleaningResult
    centre: np.ndarray
    A_c: np.ndarray | None
    centred: np.ndarray

    @property
    def e_privacy(self) -> np.ndarray | None:
        """Per-row ``‖A_cᵀ(x − x̃)‖²`` against the owner's own A_c (None without one)."""
        if self.A_c is None:
            return None
        return np.sum(((self.centred - self.details.x_clean) @ self.A_c) ** 2, axis=1)


def clean_queries(
    queries: np.ndarray,
    A_d: np.ndarray,
    X_own: np.ndarray | None = None,
    Y_conf: np.ndarray | None = None,
    *,
    centre: np.ndarray,
    epsilon: float,
    method: str = "projection",
    bounds: Bounds | None = None,
) -> CleanedQueries:
    """Clean query rows against ``A_d`` around the public ``centre`` (module docstring).

    Parameters
    ----------
    queries : (n, F) raw query rows.
    A_d : (F, m_d) the served model's first linear stage (data space), already checked by
        :func:`check_linear_stage`.
    X_own : (n_own, F) the owner's own rows; Y_conf : (n_own, m_c) their confidential labels.
        Null-space methods only (the local ``A_c`` is fitted on them); ignored by ``projection``.
    centre : (F,) the public centre ``c`` (:func:`public_centre`); never a statistic of ``X_own``.
    epsilon : float ≥ 0, the requested ``e_utility`` per row (0 keeps every desired score).
    method : "projection", "subspace" or "generalized".
    bounds : the model's public bounds, or None. ``projection`` then keeps every cleaned row inside them
        (the served model clips its input, so a row outside would be read as another row), with the
        clipped query rows' scores (:class:`~privfed.common.nullspace.StageProjection`, "Inside a box").

    Raises
    ------
    ConfigError
        Shapes that do not match, non-finite values, a confidential map that is all zeros, a
        null-space method without training rows.
    """
    check_choice(method, name="method", allowed=QUERY_METHODS)
    from privfed.common.nullspace import NullSpaceCleaner, StageProjection, fit_linear_map  # scipy.linalg

    queries = np.asarray(queries, dtype=np.float64)
    centre = np.asarray(centre, dtype=np.float64)
    if centre.shape != (np.shape(A_d)[0],) or not np.all(np.isfinite(centre)):
        raise ConfigError(f"centre must be a finite vector of length F = {np.shape(A_d)[0]}, got shape {centre.shape}")
    centred = queries - centre
    if method == "projection":
        box = None if bounds is None else (bounds.lo - centre, bounds.hi - centre)
        details = StageProjection(epsilon=epsilon, box=box).fit(A_d).transform_with_details(centred)
        return CleanedQueries(rows=centre + details.x_clean, details=details, centre=centre, A_c=None, centred=centred)
    if X_own is None or Y_conf is None:
        raise ConfigError(
            f"method {method!r} fits the confidential map on the owner's rows: pass --train-data "
            "and --confidential-labels (or use --method projection, which needs neither)"
        )
    X_own = np.asarray(X_own, dtype=np.float64)
    Y_conf = np.asarray(Y_conf, dtype=np.float64)
    if X_own.ndim != 2 or X_own.shape[0] < 2:
        raise ConfigError(f"the owner's training rows must be a 2-D array with at least 2 rows, got {X_own.shape}")
    # A_c may centre at the training mean internally: it is a slope, and only c below touches x̃.
    A_c = fit_linear_map(X_own, Y_conf)
    details = NullSpaceCleaner(epsilon=epsilon, method=method).fit(A_d, A_c).transform_with_details(centred)
    return CleanedQueries(rows=centre + details.x_clean, details=details, centre=centre, A_c=A_c, centred=centred)


def run_query(config: QueryConfig, tls: TlsFiles | None) -> int:
    """``privfed query``: check the model, clean locally, ask the served model, print or write the
    label values (and, with ``--probabilities``, the class probabilities)."""
    from privfed.owner.query_client import ModelClient, answers_csv, channel, write_answers

    if not Path(config.queries).is_file():
        raise ConfigError(f"--queries {config.queries}: file not found")
    training = config.training
    train_table = None if training is None else read_table(training[0], "--train-data")
    with channel(config.coordinator, tls, config.target_name) as ch:
        client = ModelClient(ch, config.coordinator)
        model = client.get_model(config.model_id)
        if config.probabilities and not model.probabilities:
            raise ConfigError(
                f"model {config.model_id!r} ({model.kind[:40]!r}) has no class probabilities; nothing sent"
            )
        F = model.bounds.d
        rank = check_linear_stage(config.model_id, model.kind, model.A_d, F, max_rank=config.max_rank)
        log.info(
            "model %r (%r): F = %d features, first linear stage A_d of shape %s and rank %d (--max-rank %d)",
            config.model_id,
            model.kind,
            F,
            model.A_d.shape,
            rank,
            config.max_rank,
        )
        schema = (
            model.schema if config.schema is None else pinned_schema(config.schema, model.schema, F, config.model_id)
        )
        queries = query_rows(config.queries, schema, F, pinned=config.schema is not None)
        X_own = Y_conf = None
        if training is not None and train_table is not None:
            X_own, Y_conf = confidential_columns(training, train_table, F)
        cleaned = clean_queries(
            queries,
            model.A_d,
            X_own,
            Y_conf,
            centre=public_centre(model.bounds),
            epsilon=config.utility_loss,
            method=config.method,
            bounds=model.bounds,
        )
        if not np.all(np.isfinite(cleaned.rows)):
            raise ConfigError(
                f"cleaning against model {config.model_id!r}'s linear stage gave non-finite rows "
                "(is its scale extreme?); nothing sent"
            )
        _log_cleaning(config, cleaned, queries, rank, X_own, Y_conf)
        _, outside = model.bounds.clip(cleaned.rows)
        if outside:
            log.warning(
                "%d cleaned value(s) lie outside the public bounds; they are sent unclipped (clipping "
                "would undo the cleaning), and the model's own clipping may change those rows' labels",
                outside,
            )
        answers = client.predict(config.model_id, cleaned.rows, probabilities=config.probabilities)
    log.info("%d label(s) from %d Predict call(s)", len(answers.values), answers.calls)
    label = (model.schema.label if model.schema is not None else None) or "label"
    lines = answers_csv(answers, model.classes, label)
    write_answers(lines, config.out, None if config.probabilities else label)
    return 0


def _log_cleaning(
    config: QueryConfig,
    cleaned: CleanedQueries,
    queries: np.ndarray,
    rank: int,
    X_own: np.ndarray | None,
    Y_conf: np.ndarray | None,
) -> None:
    changed = int(np.count_nonzero(np.any(cleaned.rows != queries, axis=1)))
    n = queries.shape[0]
    mean_utility = float(np.mean(cleaned.details.e_utility)) if n else 0.0
    if X_own is not None and Y_conf is not None:
        e_privacy = cleaned.e_privacy
        log.info(
            "cleaned %d of %d query row(s) (utility loss %g, %s, A_c from %d own row(s) and %d "
            "confidential label(s)): mean e_utility %.6g, mean e_privacy %.6g against the local A_c",
            changed,
            n,
            config.utility_loss,
            config.method,
            X_own.shape[0],
            Y_conf.shape[1],
            mean_utility,
            float(np.mean(e_privacy)) if n and e_privacy is not None else 0.0,
        )
        return
    log.info(
        "cleaned %d of %d query row(s) (utility loss %g, projection onto the model's %d direction(s)): "
        "mean e_utility %.6g",
        changed,
        n,
        config.utility_loss,
        rank,
        mean_utility,
    )
