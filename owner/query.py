"""``privfed query``: private prediction with cleaned query rows (seed 003, Algorithm 1; SPEC §10).

An owner wants labels for its query rows from a model the coordinator serves. The coordinator is
not trusted (issue 9): each row is cleaned here, before anything leaves the process, and what
leaves is bounded (:mod:`privfed.owner.query_cleaning`, "What x̃ reveals").

1. Read the query rows (and, for the null-space methods only, this owner's training rows), before
   the coordinator is contacted ("Timing"): :mod:`privfed.owner.query_files`, which also says which
   of their columns are features ("Columns").
2. ``GetModel``: the model's kind, public bounds (so F) and first linear stage ``A_d`` (F×m_d, data
   space; :func:`privfed.server.models.model_linear_stage`). All three come from the coordinator,
   so :func:`~privfed.owner.query_cleaning.check_linear_stage` refuses a stage with a non-finite
   entry, of numerical rank above ``--max-rank``, or with more than ``--max-rank + 1`` columns
   (:mod:`~privfed.owner.query_cleaning`, "Rank").
3. Clean around the public centre ``c`` (the midpoint of the bounds;
   :mod:`privfed.owner.query_cleaning`, which says what the cleaned rows reveal):
   ``x̃ = c + clean(x − c)``, every row at once, with ``--method``:

   * ``projection`` (default): :class:`~privfed.common.nullspace.StageProjection`, the
     projection of ``x − c`` onto ``span(A_d)``, shrunk so that ``e_utility = ε``. Uses no
     training data. A projection outside the model's public bounds (which the served model would
     clip, reading another row) becomes the least-norm row inside them with the same scores.
   * ``subspace`` / ``generalized``: :class:`~privfed.common.nullspace.NullSpaceCleaner` against
     ``A_c = fit_linear_map(X_own, Y_c)``, the owner's least-squares map to its confidential
     labels (Algorithm 1), fitted from the rows' moments ("Timing"). ``Y_c``, ``A_c`` and the raw
     rows never leave this process, but the cleaned rows reveal ``A_c``'s directions, so these
     methods need ``--allow-confidential-map-leak``. A row outside the model's bounds becomes the
     least-norm row inside them with the same desired and confidential scores, else a row inside them
     with the desired scores whose confidential ones are nearest
     (:func:`~privfed.owner.query_cleaning.null_space_rows_in_box`).

   The e_utility logged is the model's: its scores of the rows sent against those of the query rows, each
   after the model's own clipping (:func:`~privfed.owner.query_cleaning.model_scores`); the rows whose
   scores moved more than ``--utility-loss`` and the score grid allow are counted in a WARNING
   (walkthrough 8, W8-8). A stage that reads every column (rank F) is refused in words that say the rows
   would go out whole, and sent through only after a WARNING (W8-6).
4. ``Predict`` with the cleaned rows in chunks (:mod:`privfed.owner.query_client`); print or write the
   label values, and class probabilities with ``--probabilities``.

The refusals in steps 1-3 (bad flags, a stage over the bound, non-finite cleaned rows) are one-line
errors, exit status 2, and come before any row is sent.

Timing
------
The coordinator sees when ``GetModel`` is asked and when the first ``Predict`` arrives: the owner's
work in between is a timing channel (``bench/timing_paths.py``, ``query/*``). So every read of the
owner's files that needs no word of the coordinator is done before it is contacted (step 1): the
query file is parsed (by ``--schema`` too), and the training rows are reduced to their moments
(:func:`~privfed.owner.query_cleaning.moment_rows`, ``2C`` rows for ``C`` columns), from which
``A_c`` is fitted once F is known; both files' values below 2^-300, and the moments', are read as 0 there
(:func:`~privfed.common.bounds.flush_tiny`: a subnormal's arithmetic in the gap takes the CPU's slow path;
``tests/adversary/test_subnormal_query.py``). A schema the model names (no ``--schema``) can only read the file
after ``GetModel``: it reads the query's numbers rewritten in one width
(:mod:`privfed.owner.query_files`), so its time follows the row and column counts, not the digits.
Between the two calls: public checks, that reading, the cleaning (whose work is a function of
``A_dᵀx``, hence of the rows sent: a row projected outside the model's box costs more, and it is
sent), the encoding. What is logged of the cleaning (:func:`_log_cleaning`: the model's scores of the raw rows
against the rows sent) is computed once the connection is closed: squared in the gap, a raw value the rows sent do
not show (1e-80 read by a stage weight of 1e-80) took the slow path (audit 28), and squared after the last ``Predict``
but before the close, in the gap from the coordinator's last answer to the connection's end (audit 34, A34-2). Measured (200 interleaved repeats, in process over loopback, one timing's
accuracy): 3 against 17 significant digits, a missing cell filled by ``--schema``, another
confidential label: 0.42-0.60 (before: 0.74, 0.95, 0.53); digits read by the model's schema 0.61
(0.90). Not closed: the reading before contact leaves the CPU's caches colder the larger it was:
10x the training rows make the gap's own CPU time ~25% longer (0.15-0.3 ms; 0.72-0.91, before 0.94
at 9 ms). As separate ``privfed query`` processes all of these are at chance: the gap also holds
~150-290 ms of imports (scipy, on the first cleaning), whose spread hides them; a caller of
:func:`run_query` in a long-lived process has no such cover.

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

from privfed.common.dataset_files import read_schema
from privfed.common.errors import ConfigError
from privfed.common.validation import check_choice, check_int, check_non_negative
from privfed.owner.query_cleaning import (
    DEFAULT_SCORE_BITS,
    MAP_METHODS,
    QUERY_METHODS,
    CleanedQueries,
    check_linear_stage,
    clean_queries,
    model_scores,
    moment_rows,
    public_centre,
    reads_every_column,
)
from privfed.owner.query_files import (
    check_confidential_labels,
    confidential_columns,
    pinned_schema,
    query_rows,
    read_queries,
    read_training,
)
from privfed.proto.transport import TlsFiles

if TYPE_CHECKING:
    from privfed.owner.query_client import ModelDescription

log = logging.getLogger("privfed.query")

#: ``--max-rank`` default: a binary LR model reads one direction of a row (:mod:`.query_cleaning`, "Rank").
DEFAULT_MAX_RANK = 1


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
        Null-space methods only: this owner's rows, F feature columns then label columns; under ``schema``
        read by it (:func:`~privfed.owner.query_files.read_training`).
    confidential_labels : tuple of int or None
        Null-space methods only: distinct 0-based indices among the label columns of ``train_data``.
    utility_loss : float >= 0
        ``--utility-loss`` (formerly ``--clean-epsilon``): the squared change of the model's scores
        allowed per row, ``||A_dᵀ(x − x̃)||²`` (the paper's e_utility = ε, not a DP ε); 0 keeps every
        desired score.
    method : {"projection", "generalized", "subspace"}
        Module docstring, step 3.
    allow_confidential_map_leak : bool
        Required by the null-space methods (:mod:`.query_cleaning`, "What x̃ reveals").
    max_rank : int >= 1
        Largest rank of a linear stage the owner sends rows through (:mod:`.query_cleaning`, "Rank").
    score_bits : int in [1, 52]
        Each score the model reads goes out on a public grid of ``2^score_bits`` steps of its range over the
        model's bounds (:mod:`.query_cleaning`, "Digits").
    out : Path or None
        CSV to write the label values to (header: the schema's label name, else ``label``); None prints them.
    probabilities : bool
        ``--probabilities``: also ask for class probabilities (refused for a model without them).
    schema : Path or None
        ``--schema``: the federation schema as the owner holds it ("Columns"); the model must read
        rows by it, and the query file is read by it, not by the coordinator's word.
    force : bool
        ``--force``: replace an existing ``out`` (without it such an ``out`` stops the run, nothing sent).

    Raises
    ------
    ConfigError
        A value out of range, a null-space method without its opt-in, ``train_data`` or
        ``confidential_labels``, or ``projection`` with either of them (checked before anything is read or sent).
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
    score_bits: int = DEFAULT_SCORE_BITS
    out: Path | None = None
    probabilities: bool = False
    schema: Path | None = None
    force: bool = False

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
        score_bits = check_int(
            self.score_bits,
            name="--score-bits",
            minimum=1,
            maximum=52,
            fix="each score the model reads is sent to 2^N steps of its range over the bounds",
        )
        object.__setattr__(self, "score_bits", score_bits)
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
        elif given := [
            flag
            for flag, value in (("--train-data", self.train_data), ("--confidential-labels", self.confidential_labels))
            if value is not None
        ]:  # a flag that would do nothing is refused, not ignored (README, conventions)
            raise ConfigError(
                f"--method {self.method} uses no training data: {' and '.join(given)} would do nothing; leave "
                f"{'them' if len(given) > 1 else 'it'} out, or choose --method subspace or generalized"
            )


def run_query(config: QueryConfig, tls: TlsFiles | None) -> int:
    """``privfed query``: read the owner's files, check the model, clean locally, ask the served model,
    print or write the label values (and, with ``--probabilities``, the class probabilities)."""
    from privfed.owner.query_client import answers_out

    with answers_out(config.out, config.force):  # --out checked before anything is read or sent
        return _run_query(config, tls)


def _run_query(config: QueryConfig, tls: TlsFiles | None) -> int:
    from privfed.owner.query_client import ModelClient, answers_csv, channel, write_answers

    own_schema = None if config.schema is None else read_schema(config.schema)
    query_file = read_queries(config.queries, own_schema)
    training = config.training
    train_rows, train_moments = 0, None
    if training is not None:
        train_table = read_training(training[0], own_schema, confidential=training[1])
        # the indices against the label columns the file can have, before contact: F is the schema's, else >= 1
        check_confidential_labels(training, train_table, own_schema.d if own_schema is not None else None)
        train_rows, train_moments = train_table.shape[0], moment_rows(train_table)
    with channel(config.coordinator, tls, config.target_name) as ch:
        client = ModelClient(ch, config.coordinator)
        model = client.get_model(config.model_id)
        # From here to Predict the coordinator times the owner ("Timing"): no file is read.
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
        if rank >= F:  # the --max-rank the refusal named, given: the rows go out whole (walkthrough 8, W8-6)
            log.warning(
                "model %r: %s The rows go out as --max-rank %d allows.",
                config.model_id,
                "T" + reads_every_column(F)[1:],
                config.max_rank,
            )
        schema = (
            model.schema
            if own_schema is None
            else pinned_schema(own_schema, model.schema, model.bounds, config.model_id)
        )
        queries = query_rows(query_file, schema, F, pinned=own_schema is not None)
        X_own = Y_conf = None
        if training is not None and train_moments is not None:
            X_own, Y_conf = confidential_columns(training, train_moments, F)
        cleaned = clean_queries(
            queries,
            model.A_d,
            X_own,
            Y_conf,
            centre=public_centre(model.bounds),
            epsilon=config.utility_loss,
            method=config.method,
            bounds=model.bounds,
            score_bits=config.score_bits,
        )
        if not np.all(np.isfinite(cleaned.rows)):
            raise ConfigError(
                f"cleaning against model {config.model_id!r}'s linear stage gave non-finite rows "
                "(is its scale extreme?); nothing sent"
            )
        answers = client.predict(config.model_id, cleaned.rows, probabilities=config.probabilities)
    # after the connection closed: its scores of the raw rows are no work in a gap a coordinator times (audit 28,
    # A28-6b: a raw value the rows sent do not show, squared before the first Predict, took the CPU's slow path; audit
    # 34, A34-2: so it did after the last one, before the close, which the coordinator sees as it sees its answer go)
    _log_cleaning(config, cleaned, queries, rank, train_rows, Y_conf, model)
    log.info("%d label(s) from %d Predict call(s)", len(answers.values), answers.calls)
    label = (model.schema.label if model.schema is not None else None) or "label"
    lines = answers_csv(answers, model.classes, label)
    write_answers(lines, config.out, None if config.probabilities else label, config.force)
    return 0


def _log_cleaning(
    config: QueryConfig,
    cleaned: CleanedQueries,
    queries: np.ndarray,
    rank: int,
    train_rows: int,
    Y_conf: np.ndarray | None,
    model: ModelDescription,
) -> None:
    """Log what the cleaning did, as the model will read the rows (module docstring, step 3; walkthrough 8, W8-8)."""
    changed = int(np.count_nonzero(np.any(cleaned.rows != queries, axis=1)))
    n = queries.shape[0]
    moved = model_scores(model.kind, model.A_d, model.bounds, cleaned.rows) - model_scores(
        model.kind, model.A_d, model.bounds, queries
    )
    e_utility = np.sum(moved**2, axis=1)  # after the model's clipping, of both rows (walkthrough 8, W8-8)
    mean_utility = float(np.mean(e_utility)) if n else 0.0
    if Y_conf is not None:
        e_privacy = cleaned.e_privacy
        log.info(
            "cleaned %d of %d query row(s) (utility loss %g, %s, A_c from %d own row(s) and %d "
            "confidential label(s)): mean e_utility %.6g as the model reads the rows (after its clipping), "
            "mean e_privacy %.6g against the local A_c (||A_c^T (x - x_cleaned)||^2: how far the cleaning moved "
            "your own linear prediction of the confidential labels, in their squared units)",
            changed,
            n,
            config.utility_loss,
            config.method,
            train_rows,
            Y_conf.shape[1],
            mean_utility,
            float(np.mean(e_privacy)) if n and e_privacy is not None else 0.0,
        )
        if cleaned.projected:
            log.warning(
                "%d of %d cleaned row(s) left the model's bounds, and no row inside them has the same prediction and "
                "hides the confidential label as well: they were sent as cleaned, outside the bounds; the model clips "
                "them, so their labels may differ from the query rows' (the mean e_utility above counts it)",
                cleaned.projected,
                n,
            )
    else:
        log.info(
            "cleaned %d of %d query row(s) (utility loss %g, projection onto the model's %d direction(s)): "
            "mean e_utility %.6g as the model reads the rows (after its clipping)",
            changed,
            n,
            config.utility_loss,
            rank,
            mean_utility,
        )
    # a row whose scores moved past the loss asked and the score grid's rounding may get another label
    half = 0.5 * (np.abs(model.A_d).T @ (model.bounds.hi - model.bounds.lo))
    step = float(np.linalg.norm(2.0 * half / 2.0**config.score_bits))
    far = int(np.count_nonzero(np.sqrt(e_utility) > np.sqrt(config.utility_loss) + step + 1e-9 * (1.0 + half.max())))
    if far:
        log.warning(
            "%d of %d row(s) will be read by the model with other scores than your query rows have, by more than "
            "--utility-loss %g allows (the model clips values outside its bounds, the rows sent or your own): the "
            "labels printed for them may not be the labels the model gives your rows",
            far,
            n,
            config.utility_loss,
        )
