"""The flags of ``privfed query`` and the :class:`~privfed.owner.query.QueryConfig` they build.

argparse stays in ``deploy/`` (issue 10): the parser turns text into values, and
:class:`QueryConfig` checks them (ranges, the null-space methods' opt-in and inputs) with errors
that name the flag, before anything is read or sent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privfed.deploy.argtypes import address
from privfed.owner.query import DEFAULT_MAX_RANK, QueryConfig
from privfed.owner.query_cleaning import DEFAULT_SCORE_BITS, QUERY_METHODS


class _DeprecatedAlias(argparse._StoreAction):
    """Stores like ``store``; given as ``--clean-epsilon`` (the old name) it warns once on stderr."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if option_string == "--clean-epsilon":
            print(
                "privfed query: warning: --clean-epsilon is deprecated (it is a utility loss, not a privacy "
                "epsilon); use --utility-loss",
                file=sys.stderr,
            )
        super().__call__(parser, namespace, values, option_string)


def parse_columns(text: str) -> tuple[int, ...]:
    """``"0,2"`` -> ``(0, 2)``: 0-based label-column indices (their range is QueryConfig's check)."""
    try:
        return tuple(int(c) for c in text.split(",") if c.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--confidential-labels takes 0-based column indices separated by commas (e.g. 1,2), got {text!r}"
        ) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``privfed query`` flags; :func:`query_config` builds the run's configuration from them."""
    p.add_argument("--coordinator", type=address, required=True, help="HOST:PORT of the coordinator serving the model")
    p.add_argument(
        "--name", default="owner-0", help="this node's identity: the CN of its certificate (e.g. hospital-a)"
    )
    p.add_argument("--certs", type=Path, help="directory written by `privfed certs`")
    p.add_argument("--insecure", action="store_true", help="no TLS (byte-capture tests only)")
    p.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")
    p.add_argument("--model-id", required=True, help="id of the served model")
    p.add_argument(
        "--queries",
        type=Path,
        required=True,
        help="query rows: CSV (the F feature columns only; label columns after them only with --schema) or NPZ with X",
    )
    p.add_argument(
        "--train-data",
        type=Path,
        help="null-space methods only: this owner's own rows, CSV with F feature columns then label "
        "columns, or NPZ with X, y (with --schema: read by the schema, as the owner's rows are, its label "
        "columns being those besides the features); they never leave this process, but the cleaned rows reveal "
        "the directions of the map fitted on them (see --allow-confidential-map-leak)",
    )
    p.add_argument(
        "--confidential-labels",
        type=parse_columns,
        help="null-space methods only: 0-based indices among the label columns of --train-data (comma-separated; "
        "with --schema the log names each column's index)",
    )
    p.add_argument(
        "--utility-loss",
        "--clean-epsilon",
        dest="utility_loss",
        type=float,
        default=0.0,
        action=_DeprecatedAlias,
        help="the squared change of the model's scores allowed per row, ||A_d^T (x - x~)||^2 (the paper's "
        "e_utility; not a privacy epsilon): finite and >= 0; 0 keeps every desired score (default). "
        "--clean-epsilon is its old, deprecated name",
    )
    p.add_argument(
        "--probabilities",
        action="store_true",
        help="also print each class's probability (refused for a model that has none)",
    )
    p.add_argument(
        "--method",
        choices=QUERY_METHODS,
        default="projection",
        help="'projection' (default): send only what the model reads, no training data used; "
        "'subspace' (robust) or 'generalized' (SPEC as written): null-space cleaning against "
        "a confidential map fitted on --train-data",
    )
    p.add_argument(
        "--allow-confidential-map-leak",
        action="store_true",
        help="needed by the null-space methods: the rows they send let the coordinator read the "
        "directions of the confidential map, a non-private statistic of --train-data",
    )
    p.add_argument(
        "--max-rank",
        type=int,
        default=DEFAULT_MAX_RANK,
        help="refuse a model whose linear stage reads more than this many directions of a row, >= 1 "
        "(default %(default)s: a binary lr model; a K-class lr model needs K, feddpdr its k)",
    )
    p.add_argument(
        "--score-bits",
        type=int,
        default=DEFAULT_SCORE_BITS,
        help="each score the model reads is sent rounded to 2^N steps of its range over the model's bounds, so a "
        "row tells at most N bits per score whatever the model (default %(default)s; 1..52)",
    )
    p.add_argument(
        "--schema",
        type=Path,
        help="the federation schema file as this owner holds it: the model must read rows by it (same sha256) "
        "and the query file is read by it, so the coordinator cannot name another column a feature; without "
        "it, keep only the feature columns in --queries",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="write the label values to this CSV instead of printing them (header: the schema's label name, "
        "else 'label'; with --probabilities one column per class); never over an existing file unless --force",
    )
    p.add_argument("--force", action="store_true", help="replace --out if it exists")


def query_config(args: argparse.Namespace) -> QueryConfig:
    """The :class:`QueryConfig` of parsed ``privfed query`` flags (raises its ConfigError)."""
    return QueryConfig(
        coordinator=args.coordinator,
        model_id=args.model_id,
        queries=args.queries,
        target_name=args.target_name,
        train_data=args.train_data,
        confidential_labels=args.confidential_labels,
        utility_loss=args.utility_loss,
        method=args.method,
        allow_confidential_map_leak=args.allow_confidential_map_leak,
        max_rank=args.max_rank,
        score_bits=args.score_bits,
        out=args.out,
        probabilities=args.probabilities,
        schema=args.schema,
        force=args.force,
    )
