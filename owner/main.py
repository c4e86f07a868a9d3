"""``privfed owner``: load this node's rows, open its ledger, serve the coordinator.

Owner ids are ``<--name>.o<index>`` (``privfed.common.identity``): the node's certificate name
decides which owners it speaks for."""

from __future__ import annotations

import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from privfed.common.errors import PrivfedError
from privfed.common.ledger import Ledger
from privfed.owner.data import build_owners, federation_split, load_owner_file, parse_shards
from privfed.owner.handlers import LocalOwner
from privfed.owner.node import ConnectError, OwnerNode
from privfed.proto.transport import TlsFiles

log = logging.getLogger("privfed.owner")


@dataclass(frozen=True, kw_only=True)
class OwnerConfig:
    """One owner node as ``privfed owner`` starts it; built by ``deploy/cli.py`` from the flags
    (nothing below ``deploy/`` sees an argparse Namespace). Every field is the node's own
    configuration; only ``name`` and the owner ids derived from it are ever sent.

    Parameters
    ----------
    coordinator : str
        ``--coordinator HOST:PORT``.
    name : str
        ``--name``: the node's identity, the CN of its certificate; owner ids are ``<name>.o<i>``.
    ledger : Path; epsilon_budget : float; delta_budget : float
        ``--ledger``, ``--epsilon-budget``, ``--delta-budget``: the node's SQLite privacy ledger
        and each hosted owner's total (ε, δ).
    data : str or None; bounds : str or None; classes : int
        ``--data``, ``--bounds``, ``--classes``: the owner's own rows, their public bounds and the
        public number of classes. None: a partition of the built-in ``dataset`` (simulation).
    shards : str
        ``--shards``: ``A:B`` (owners A..B-1 of the partition) or a count K.
    dataset : str; n_owners : int; seed : int; test_fraction : float; n_samples : int or None
        ``--dataset``, ``--n-owners``, ``--seed``, ``--test-fraction``, ``--n-samples``: the
        built-in data set's public split and partition.
    rng : {"seeded", "secure"}
        ``--rng``: the noise stream (``seeded`` from ``seed``, reproducible simulations only).
    connect_timeout : float
        ``--connect-timeout``, seconds to reach the coordinator.
    target_name : str or None
        ``--target-name``: the TLS name to expect from the coordinator.
    allow_clear_labels : bool
        ``--allow-clear-labels``: answer tasks asking for clear labels (non-private ledger entries).
    """

    coordinator: str
    name: str
    ledger: Path
    epsilon_budget: float
    delta_budget: float = 0.0
    data: str | None = None
    bounds: str | None = None
    classes: int = 2
    shards: str = "1"
    dataset: str = "synthetic"
    n_owners: int = 1
    seed: int = 0
    test_fraction: float = 0.2
    n_samples: int | None = None
    rng: str = "secure"
    connect_timeout: float = 120.0
    target_name: str | None = None
    allow_clear_labels: bool = False


def load_owners(config: OwnerConfig) -> list[LocalOwner]:
    """The logical owners this node hosts: from its own file, or its shards of a built-in partition."""
    if config.data:
        train = load_owner_file(config.data, config.bounds, config.classes)
        try:  # a file's owners are this node's alone: the partition has B (or K) of them
            count = int(config.shards.rpartition(":")[2])
        except ValueError:
            count = 0  # parse_shards says what is wrong
        shards = parse_shards(config.shards, count)
        n_owners = shards.stop
    else:
        train, _ = federation_split(
            config.dataset, seed=config.seed, test_fraction=config.test_fraction, n_samples=config.n_samples
        )
        n_owners, shards = config.n_owners, parse_shards(config.shards, config.n_owners)
    return build_owners(
        train,
        node_id=config.name,
        n_owners=n_owners,
        shards=shards,
        seed=config.seed,
        rng_kind=config.rng,
        rng_seed=config.seed,
    )


def run_owner(config: OwnerConfig, tls: TlsFiles | None) -> int:
    """Load the node's rows, open its ledger and serve the coordinator until the job ends (0)."""
    owners = load_owners(config)
    ledger = Ledger(config.ledger, epsilon_budget=config.epsilon_budget, delta_budget=config.delta_budget)
    node = OwnerNode(
        node_id=config.name,
        target=config.coordinator,
        tls=tls,
        owners=owners,
        ledger=ledger,
        connect_timeout=config.connect_timeout,
        target_name_override=config.target_name,
        allow_clear_labels=config.allow_clear_labels,
    )
    if config.allow_clear_labels:
        log.warning(
            "--allow-clear-labels: tasks asking for clear labels are answered; each such release is "
            "recorded in the ledger as non-private (purpose 'clear-labels')"
        )
    signal.signal(signal.SIGTERM, lambda *_: node.stop_event.set())
    log.info(
        "node %s hosts %d logical owner(s), %d row(s)", config.name, len(owners), sum(o.X.shape[0] for o in owners)
    )
    try:
        return node.run()
    except ConnectError as exc:
        raise PrivfedError(str(exc)) from exc
    finally:
        ledger.close()
