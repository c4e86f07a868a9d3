"""Cleaning query rows against a served model's first linear stage (seed 003, Algorithm 1; SPEC §10):
the pure part of ``privfed query`` (:mod:`privfed.owner.query`, step 3), with what the cleaned rows reveal.

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
whose K score columns sum to zero has rank K − 1). A stage whose rank is the number of columns F reads
every column, like ``A_d = I``: ``span(A_d)`` is the whole space and the projection is the identity. A
default FedDPDR job gives every schema of at most 20 encoded columns such a stage (k = F), so the refusal
says so in words (:func:`reads_every_column`), and a ``--max-rank`` that lets it through sends the rows
only after a WARNING that says the same (walkthrough 8, W8-6).

Digits
------
``--max-rank`` bounds the directions a model reads, not the digits of each score: a score is a real number, and
one direction can pack several features (a stage with weights 17^j read five features valued 0..16 from one
score, exactly: audit 18). So the rows sent carry each score rounded to a public grid
(:func:`on_score_grid`): ``2^K`` steps (``--score-bits K``, default :data:`DEFAULT_SCORE_BITS`) across the range
that score takes over the model's bounds, the scores of rows outside the bounds clipped to that range. A row
then tells the coordinator at most ``m·log2(2^K + 1)`` bits (``m ≤ --max-rank + 1`` columns), whatever the
stage; with the defaults at most 34. The grid is the model's bounds and ``A_d`` alone, so a stage scaled up
gains nothing. The cost: ``e_utility`` is ε up to the rounding, and a row whose score lies within half a step
(``2^-(K+1)`` of the range) of the model's threshold can get the other label.

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
label than the linear algebra promises. So the cleaners move their rows inside the bounds instead, along
directions that keep what the cleaning chose: ``projection`` the least-norm row of the box with the same scores
(:class:`~privfed.common.nullspace.StageProjection`, "Inside a box"), the null-space methods the least-norm row
with the same desired *and* confidential scores where the box has one, else the row as cleaned, outside (what it
hides comes first; :func:`null_space_rows_in_box`;
walkthrough 8, W8-8: Algorithm 1's rows left the README schema's box and the model's clipping changed half the
labels). ``privfed query`` logs the e_utility the model sees, after its own preprocessing of the rows sent and of
the query rows (:func:`model_scores`), and warns of the rows whose scores it moved. Raw query rows are not
clipped.

References
----------
K. Xu, S. Shah, T. Cao, C. Maung, H. Schweitzer. Enhancing the Privacy of Predictors. AAAI 2017
(seed 003), Algorithm 1 and Theorem 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from privfed.common.bounds import Bounds, box_scale, flush_tiny
from privfed.common.errors import ConfigError, RemoteProtocolError
from privfed.common.validation import check_choice

if TYPE_CHECKING:
    from privfed.common.nullspace import CleaningResult

#: ``--method`` choices: the training-free projection (default) and the two null-space solvers.
#: (``privfed.common.nullspace.METHODS``, spelled out so that building the CLI parser, which every
#: ``privfed`` command does, does not import scipy; a test checks the two agree.)
QUERY_METHODS = ("projection", "generalized", "subspace")
#: Null-space methods shape the sent rows with A_c, a statistic of --train-data ("What x̃ reveals").
MAP_METHODS = QUERY_METHODS[1:]


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
        ``A_d`` is not an (F, m) matrix with m ≥ 1, has a non-finite entry, or entries so large that its singular
        values overflow (the rank would read 0: matrix_rank's tolerance is then infinite; audit 34, A34-4).
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
    columns = A_d.shape[1]
    # past F + 1 columns the rank (at most F) cannot be what --max-rank must allow: not computed on such a matrix
    computed = columns <= max(max_rank, n_features) + 1
    rank = n_features
    if computed:  # numpy.linalg.matrix_rank's rank, refused where its singular values overflow (audit 34, A34-4)
        sv = np.linalg.svd(A_d, compute_uv=False)
        if not np.all(np.isfinite(sv)):
            raise RemoteProtocolError(
                f"model {model_id!r}: linear stage too large for its rank to be computed (a singular value "
                "overflows); nothing sent"
            )
        rank = int(np.count_nonzero(sv > sv.max() * max(A_d.shape) * np.finfo(float).eps))
    needs = max(rank, columns - 1)  # the least --max-rank that passes both bounds
    if needs > max_rank:  # one message for both bounds, with the number to pass (walkthrough 6, W6-3)
        head = (
            f"model {model_id!r} ({kind[:40]!r}) reads {needs} direction(s) of each row (a linear stage of {columns} "
            f"column(s), {'' if computed else 'at most '}rank {rank}), more than --max-rank {max_rank}; nothing sent. "
        )
        if rank >= n_features:  # cleaning onto the whole space is the identity (walkthrough 8, W8-6)
            raise ConfigError(
                head + f"Pass --max-rank {needs} only if you accept that {reads_every_column(n_features)}"
            )
        raise ConfigError(
            head + f"Pass --max-rank {needs} only if "
            "the model is meant to read that many: a binary lr model reads 1, a K-class lr model K, a feddpdr model "
            "its k"
        )
    return rank


def reads_every_column(n_features: int) -> str:
    """What a stage of rank ``n_features`` means for the rows sent ("Rank"): said by the refusal, and logged as a
    WARNING when ``--max-rank`` lets such a stage through (walkthrough 8, W8-6: a default FedDPDR model of a schema
    of at most 20 encoded columns has k = their number)."""
    return (
        f"this model reads every one of your rows' {n_features} column(s) (a FedDPDR model with k >= columns does): "
        "query cleaning hides nothing, and the coordinator would learn each query row whole."
    )


def model_scores(kind: str, A_d: np.ndarray, bounds: Bounds, rows: np.ndarray) -> np.ndarray:
    """(n, m) the scores the served model's first stage gives ``rows`` *after* its own preprocessing, relative
    to the public centre: an ``lr`` model clips rows to its bounds (``bounds.to_unit``), a ``feddpdr`` one
    (``ball`` scaling) scales ``x − c`` by the bounds' radius R and clips its norm to 1, i.e. reads
    ``(x − c)·min(1, R/‖x − c‖)``, and a ``feddpdr-box`` one (``box`` scaling) scales it by the diagonal
    ``D`` of :func:`~privfed.common.feddpdr.pca.box_scale` and clips that norm: ``(x − c)·min(1, 1/‖D(x − c)‖)``. The owner computes them locally from the GetModel answer to
    report what the rows sent give, not what the linear algebra promised (walkthrough 8, W8-8); another kind
    is read as clipped to the bounds. The kind is the coordinator's word: this is a report, never a bound."""
    rows = np.asarray(rows, dtype=np.float64)
    centre = public_centre(bounds)
    if kind == "feddpdr-box":  # box scaling: a = D (x − c), D = box_scale(bounds), then a's norm clipped to 1
        centred = rows - centre
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.linalg.norm(np.nan_to_num(centred * box_scale(bounds)), axis=1)
            shrink = np.where(norms > 1.0, 1.0 / np.where(norms > 0, norms, 1.0), 1.0)
        read = centred * shrink[:, None]
    elif kind == "feddpdr":
        radius = float(np.sqrt(np.sum(((bounds.hi - bounds.lo) / 2.0) ** 2)))
        centred = rows - centre
        norms = np.linalg.norm(centred, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            shrink = np.where(norms > radius, radius / np.where(norms > 0, norms, 1.0), 1.0)
        read = centred * shrink[:, None]
    else:
        # a bound below TINY read as 0 (flush_tiny): a row clipped to a subnormal bound took the slow path in the gap
        read = np.clip(rows, flush_tiny(bounds.lo), flush_tiny(bounds.hi)) - centre
    return read @ np.asarray(A_d, dtype=np.float64)


def moment_rows(table: np.ndarray) -> np.ndarray:
    """``2C`` rows (``C`` the table's columns) with mean zero and the table's centred cross-products:
    ``[R; −R]/√2`` for the QR factor ``R`` of the centred table (zero rows added when it has fewer
    than ``C`` rows). A centred least-squares fit between any of their columns is the table's
    (:func:`~privfed.common.nullspace.fit_linear_map`: ``‖Q(Ra − b)‖ = ‖Ra − b‖`` for ``Q`` with
    orthonormal columns), and its cost depends on ``C`` alone, not on the row count.

    ``privfed query`` computes them before contacting the coordinator, so the map ``A_c`` it fits
    after ``GetModel`` (when the feature count is known) takes the same time for 300 training rows as
    for 3000 (:mod:`privfed.owner.query`, "Timing"). Values below :data:`~privfed.common.bounds.TINY`, in the
    table and in the moments, are read as 0 (:func:`~privfed.common.bounds.flush_tiny`): the fit's
    arithmetic in the gap takes no subnormal's slow path (``tests/adversary/test_subnormal_query.py``).

    Raises
    ------
    ConfigError
        Fewer than 2 rows.
    """
    table = flush_tiny(table)
    if table.ndim != 2 or table.shape[0] < 2:
        raise ConfigError(f"the owner's training rows must be a 2-D array with at least 2 rows, got {table.shape}")
    C = table.shape[1]
    _, R = np.linalg.qr(table - table.mean(axis=0))
    padded = np.vstack([R, np.zeros((C - R.shape[0], C))])
    return flush_tiny(np.vstack([padded, -padded]) / np.sqrt(2.0))


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
    projected : null-space rows sent outside the model's bounds, since no row inside them has both their desired
        and confidential scores (:func:`null_space_rows_in_box`); 0 for ``projection``.
    """

    rows: np.ndarray
    details: CleaningResult
    centre: np.ndarray
    A_c: np.ndarray | None
    centred: np.ndarray
    projected: int = 0

    @property
    def e_privacy(self) -> np.ndarray | None:
        """Per-row ``‖A_cᵀ(x − x̃)‖²`` against the owner's own A_c (None without one)."""
        if self.A_c is None:
            return None
        return np.sum(((self.centred - self.details.x_clean) @ self.A_c) ** 2, axis=1)


#: ``--score-bits`` default: each score a model reads is sent to 2^16 steps of its range over the bounds ("Digits").
DEFAULT_SCORE_BITS = 16


def on_score_grid(
    centred: np.ndarray,
    A_d: np.ndarray,
    width: np.ndarray,
    bits: int,
    *,
    rows: np.ndarray | None = None,
    centre: np.ndarray | None = None,
) -> np.ndarray:
    """The least-norm rows (centred) whose scores ``A_dᵀz`` are those of ``centred`` on the public grid ("Digits"):
    each score clipped to its range over the box of widths ``width`` around the centre, ``±½|A_d|ᵀwidth``, and
    rounded to ``2^bits`` steps across it; a function of the rounded scores and public values alone.

    With ``rows`` and ``centre`` (``centred = rows − centre``) the scores are read as ``A_dᵀrows − A_dᵀcentre``: the
    centre is the coordinator's (the bounds' midpoint), and ``rows − centre`` rounded each feature on its own at the
    centre's magnitude before any score was taken; a centre at ±2^41 whose offsets cancel in the score read single
    features at 2^-11 (audit 34, A34-3, ``tests/adversary/test_audit34_query_centre_cancellation.py``). Read so, a row's
    products round at its own magnitude, and the centre's are the same for every row."""
    A_d = np.asarray(A_d, dtype=np.float64)
    unit, shift = unit_columns(A_d)  # the same grid, in units where no product of a row overflows (audit 34, A34-1)
    half = 0.5 * (np.abs(unit).T @ np.asarray(width, dtype=np.float64))  # (m,) the scores' half ranges
    if not np.all(np.isfinite(np.ldexp(half, shift))):  # the stage and the bounds alone: refused whatever the rows
        raise ConfigError(
            "the model's scores range past the largest double over its bounds (its linear stage or its bounds are "
            "extreme); nothing sent"
        )  # else the grid values near the range's edge alone would be infinite in the stage's units (audit 34)
    step = np.where(half > 0, 2.0 * half / 2.0**bits, 1.0)
    if rows is not None and centre is not None:
        read = np.asarray(rows, dtype=np.float64) @ unit - np.asarray(centre, dtype=np.float64) @ unit
    else:
        read = np.asarray(centred, dtype=np.float64) @ unit
    scores = np.clip(read, -half, half)
    # A score below a quarter step is on the grid at 0: set so before the division, whose quotient of a tiny score
    # (a raw value ~1e-80 read by a weight ~1e-85) by a step made large by another column's weight is subnormal, a
    # slow path in the gap a coordinator times that the rows sent do not show (audit 29, A29-1). Scores are 0 or
    # at least 2^-653 (flushed rows and stage: ``flush_tiny``, :func:`unit_columns`), so the comparison is on normal
    # numbers.
    scores = np.where(np.abs(scores) < 0.25 * step, 0.0, scores)
    grid = np.ldexp(np.clip(np.rint(scores / step) * step, -half, half), shift)  # in the stage's own units again
    return np.linalg.lstsq(A_d.T, grid.T, rcond=None)[0].T  # the rows of those scores (their nearest, if none has)


def unit_columns(A_d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A_d`` with each column of largest magnitude 1 or more scaled by a power of two to below 1 (exactly: only the
    exponents move), its entries below ``2^-300`` of that magnitude read as 0 first (scaled, they would be subnormal,
    :func:`~privfed.common.bounds.flush_tiny`'s reason), and each column's exponent ``k`` (it was divided by ``2^k``;
    0 for a column left as it is). The scores a column gives, and their range over the box, are scaled by the same
    power, so the score grid (:func:`on_score_grid`), scaled back, is the same, bit for bit, where nothing
    overflows; the rows of those scores are solved on ``A_d`` itself (LAPACK's ``gelsd`` on a scaled stage with zero
    entries takes a subnormal operand, a slow path in the gap: ``tests/adversary/test_audit29_query_grid_gap.py``).

    Why (audit 34, A34-1): the coordinator picks the weights and, without ``--schema``, the bounds and so the centre
    ``c``. Weights near ``2^1000`` and a centre ``2^28`` from the rows made ``M·(x_j − c_j)`` overflow exactly when
    ``x_j`` crossed a threshold it chose, while the row's real score stayed inside its range: two terms overflowing with
    opposite signs gave ``inf − inf = NaN`` (the whole query refused, nothing sent) and one alone the grid's top score,
    so one row told the coordinator on which side of its thresholds two of its features lay, whatever its score. With
    weights below 1 in magnitude a score overflows only for values near ``2^1023 / F``, which are not a row's."""
    A_d = np.asarray(A_d, dtype=np.float64)
    top = np.max(np.abs(A_d), axis=0) if A_d.size else np.zeros(A_d.shape[1:])
    shift = np.maximum(np.frexp(top)[1], 0)  # top < 2^shift: 0 for a column below 1, left as it is
    floor = np.where(shift > 0, np.ldexp(top, -300), 0.0)  # top >= 1 there: a normal number
    return np.ldexp(np.where(np.abs(A_d) < floor, 0.0, A_d), -shift), shift


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
    score_bits: int | None = None,
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
        query rows' scores, or the nearest scores a row inside them has
        (:class:`~privfed.common.nullspace.StageProjection`, "Inside a box").
    score_bits : int >= 1 or None
        With ``bounds``: clean the rows of the same scores on the public grid of ``2^score_bits`` steps
        (:func:`on_score_grid`, "Digits") instead of the query rows; None cleans the query rows themselves.

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
    read = centred  # what the cleaning reads of each row: its scores, on the public grid if asked
    if score_bits is not None and bounds is not None:
        read = on_score_grid(centred, A_d, bounds.hi - bounds.lo, score_bits, rows=queries, centre=centre)
    if method == "projection":
        box = None if bounds is None else (bounds.lo - centre, bounds.hi - centre)
        details = StageProjection(epsilon=epsilon, box=box).fit(A_d).transform_with_details(read)
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
    details = NullSpaceCleaner(epsilon=epsilon, method=method).fit(A_d, A_c).transform_with_details(read)
    projected = 0
    if bounds is not None:
        inside, projected = null_space_rows_in_box(
            details.x_clean, np.asarray(A_d, dtype=np.float64), A_c, bounds.lo - centre, bounds.hi - centre
        )
        details = replace(details, x_clean=inside)
    return CleanedQueries(
        rows=centre + details.x_clean, details=details, centre=centre, A_c=A_c, centred=centred, projected=projected
    )


def null_space_rows_in_box(
    x_clean: np.ndarray, A_d: np.ndarray, A_c: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, int]:
    """Null-space cleaned rows (centred) moved inside the model's box ``a ≤ z ≤ b`` where they leave it and a row of
    the box keeps what Algorithm 1 chose them for; returns the rows and how many stay outside.

    The served model clips what it reads to its bounds (LR; FedDPDR clips the scaled row's norm), so a row
    outside them is read as another row: with a one-hot column or a feature at its bound, Algorithm 1's
    ``x̃`` (which moves every feature) often leaves the box and the model's clipping changed half the labels
    (walkthrough 8, W8-8). The paper's two measures read ``x̃`` only through ``A_dᵀx̃`` and ``A_cᵀx̃``:
    Theorem 1's ``e_utility = ‖A_dᵀ(x − x̃)‖² = ε`` and ``e_privacy = Σ λᵢᶜαᵢ²aᵢ² = ‖A_cᵀ(x − x̃)‖²``
    (seed 003, the equations after Theorem 1). So a row ``x̃`` outside the box is replaced by the least-norm
    row ``z`` of the box with ``[A_d, A_c]ᵀz = [A_d, A_c]ᵀx̃`` (:func:`~privfed.common.nullspace.projection.box_projection`),
    which has the same ``e_utility`` and ``e_privacy`` and which the model reads as it is. When the box has no
    such row, ``x̃`` is sent as it is: what it hides from ``A_c`` comes first, and the model's clipping may change
    its label, which ``privfed query`` counts in a WARNING and in the e_utility it logs (a row of the box with the
    desired scores would tell the confidential scores nearer the raw row's). Rows inside the box are left as they
    are. Each replacement is a function of ``A_dᵀx̃``, ``A_cᵀx̃`` and public values, so the rows sent still depend on a
    query only through ``A_dᵀx`` ("What x̃ reveals"); the box is the coordinator's word, but the raw rows are not
    clipped to it (audit 18).
    """
    rows = np.array(x_clean, dtype=np.float64, copy=True)
    both = np.hstack([A_d, A_c])
    outside = 0
    for i in np.flatnonzero(np.any((rows < a) | (rows > b), axis=1)):
        z = _in_box_with_scores(both, both.T @ rows[i], a, b)
        if z is None:
            outside += 1
        else:
            rows[i] = z
    return rows, outside


def _in_box_with_scores(A: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The least-norm row of the box with the scores ``Aᵀz = s``, None if the box has none
    (:func:`~privfed.common.nullspace.projection.box_projection`: its dual ascent ends away from ``s`` then; not
    ``box_row``, whose BVLS takes a subnormal operand on two or more columns, a slow path in the timed gap)."""
    from privfed.common.nullspace.projection import box_projection

    z = np.clip(box_projection(A, s, a, b), a, b)
    return z if np.linalg.norm(A.T @ z - s) <= 1e-9 * max(1.0, float(np.linalg.norm(s))) else None
