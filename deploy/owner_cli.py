"""The owner side's commands of the ``privfed`` command line: ``privfed owner`` (an owner node hosting one or many
logical owners, every release debited in its ledger first) and ``privfed query`` (clean query rows locally,
then ask a served model for labels). The typed configs they build are run by ``owner/``.
"""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from privfed.deploy.argtypes import address, positive_float, positive_int
from privfed.deploy.job_flags import add_data
from privfed.deploy.signals import set_on_signals
from privfed.deploy.tlsflags import add_tls as _add_tls
from privfed.deploy.tlsflags import tls_files as _tls

if TYPE_CHECKING:
    from privfed.owner.main import OwnerConfig


def add_owner(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "owner",
        help="run an owner node hosting one or many logical owners",
        description="Serve a coordinator with this node's logical owners: the shards of a built-in data "
        "set (--dataset) or the node's own rows (--data). Every release is debited in --ledger first.",
    )
    p.add_argument("--coordinator", type=address, required=True, help="HOST:PORT of the coordinator")
    p.add_argument(
        "--name",
        required=True,
        help="node identity: the CN of its certificate (e.g. hospital-a from privfed certs --names, or owner-<i>); "
        "its owners' ids are NAME.o00000, NAME.o00001, ...",
    )
    _add_tls(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--data",
        help="this owner's own rows (CSV: features then label; or NPZ with X, y as numbers: class values and "
        "categories that are text need CSV)",
    )
    declared = p.add_mutually_exclusive_group()
    declared.add_argument(
        "--schema",
        type=Path,
        help="the federation schema file; must be the coordinator's (same sha256). Default: the schema the "
        "coordinator sends at registration",
    )
    declared.add_argument(
        "--bounds",
        help="shorthand schema for --data: public bounds lo:hi (e.g. -1:16) or a JSON file {lo: [...], hi: [...]}, "
        "with class values 0..K-1 (--classes); must match the coordinator's schema",
    )
    p.add_argument(
        "--classes",
        type=int,
        default=2,
        help="with --bounds: the public number of classes K; labels must be 0..K-1",
    )
    p.add_argument(
        "--allow-clear-labels",
        action="store_true",
        help="answer tasks that ask for labels in the clear (NCC, boosting with the ncc base); each such "
        "release is recorded in the ledger as non-private. Off: they are refused",
    )
    p.add_argument(
        "--work-rows",
        type=positive_int,
        metavar="P",
        help="declare P rows public for each hosted owner (a power of two, at least its rows): every computation "
        "works on P rows, so a coordinator timing the answers cannot tell the owners' row counts, at P/n times "
        "the work, and for nearest-centroid shares (ncc) P/n times the reports' noise. Default: each count's "
        "power-of-two cell, which the timing shows",
    )
    p.add_argument("--n-owners", type=positive_int, default=1, help="logical owners in the whole federation partition")
    p.add_argument("--shards", default="1", help="logical owners hosted here: A:B (owners A..B-1), or a count K")
    p.add_argument("--ledger", type=Path, required=True, help="SQLite privacy ledger of this node")
    p.add_argument(
        "--epsilon-budget", type=float, required=True, help="each hosted owner's total epsilon (inf: unlimited)"
    )
    p.add_argument("--delta-budget", type=float, default=0.0, help="each hosted owner's total delta (DP-PCA needs > 0)")
    p.add_argument("--rng", choices=("seeded", "secure"), default="secure", help="noise stream (seeded: tests only)")
    p.add_argument(
        "--connect-timeout",
        type=positive_float,
        default=None,
        help="seconds to keep trying to reach the coordinator (default 120; a --policy daemon keeps trying until "
        "SIGTERM, so it takes none)",
    )
    p.add_argument("--target-name", help="TLS name to expect from the coordinator when dialing an address")
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="BLAS/OpenMP threads of this node's computations. Default: OPENBLAS_NUM_THREADS or OMP_NUM_THREADS "
        "if set, else every CPU this process may use (a node alone on its machine has them to itself, and its "
        "larger products, e.g. d x d covariances for DP-PCA, gain from them). Launchers that start several nodes "
        "on one host give each its share (privfed simulate, owner_entry: CPUs // nodes, at least 1)",
    )
    p.add_argument(
        "--policy",
        type=Path,
        help="the node's policy (TOML: tasks, max_epsilon_per_job, max_delta_per_job, max_epsilon_per_day, "
        "max_epsilon_total, data_users, schema_sha256); with it the node is a daemon serving job after job "
        "(privfed serve) until SIGTERM. Without it: one job, then exit",
    )
    add_data(p, dataset_group=source)
    p.set_defaults(func=_owner)


def add_query(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "query",
        help="clean query rows locally (projection onto what the model reads by default; "
        "null-space cleaning on opt-in), then ask a served model for labels",
    )
    from privfed.deploy.query_flags import add_arguments as add_query_arguments

    add_query_arguments(p)
    p.set_defaults(func=_query)


def owner_config(args: argparse.Namespace) -> OwnerConfig:
    """The :class:`~privfed.owner.main.OwnerConfig` of a parsed ``privfed owner`` command line."""
    from dataclasses import fields

    from privfed.common.errors import ConfigError
    from privfed.owner.main import OwnerConfig

    if args.policy is not None and args.connect_timeout is not None:
        raise ConfigError(
            "--connect-timeout does nothing with --policy: a daemon keeps trying to reach its coordinator until "
            "SIGTERM (drop it)"
        )
    from privfed.common.validation import check_non_negative, check_probability

    check_non_negative(args.epsilon_budget, name="--epsilon-budget", allow_inf=True)  # the flag's name, not the field's
    check_probability(args.delta_budget, name="--delta-budget")
    given = {f.name: getattr(args, f.name) for f in fields(OwnerConfig)}
    if given["connect_timeout"] is None:
        del given["connect_timeout"]  # OwnerConfig's default
    return OwnerConfig(**given)


def _owner(args: argparse.Namespace) -> int:
    from privfed.deploy.threads import host_threads, pin_threads

    pin_threads(args.threads or host_threads())  # first: numpy is not loaded yet (build_parser("owner") needs none)
    from privfed.common.identity import check_node_name
    from privfed.owner.main import run_owner

    check_node_name(args.name)
    tls = _tls(args, args.name)
    if tls is not None:
        import logging

        from privfed.deploy.tlsflags import warn_expiry

        warn_expiry(tls, args.name, logging.getLogger("privfed.owner"))
    stop = threading.Event()
    set_on_signals(stop)  # not Event.set in the handler: it can wait for itself (W11-11)
    return run_owner(owner_config(args), tls, stop)


def _query(args: argparse.Namespace) -> int:
    from privfed.deploy.query_flags import query_config
    from privfed.owner.query import run_query

    return run_query(query_config(args), _tls(args, args.name))
