"""``privfed owner``: load this node's rows, open its ledger, serve the coordinator.

Owner ids are ``<--name>.o<index>`` (``privfed.common.identity``): the node's certificate name
decides which owners it speaks for."""

from __future__ import annotations

import logging
import signal

from privfed.common.errors import PrivfedError
from privfed.common.ledger import Ledger
from privfed.owner.data import build_owners, federation_split, load_owner_file, parse_shards
from privfed.owner.node import ConnectError, OwnerNode

log = logging.getLogger("privfed.owner")


def run_owner(args, tls) -> int:
    if args.data:
        ds = load_owner_file(args.data, args.bounds, args.classes)
        shards = parse_shards(args.shards, int(args.shards.split(":")[-1]) if ":" in args.shards else int(args.shards))
        owners = build_owners(
            ds,
            node_id=args.name,
            n_owners=shards.stop,
            shards=shards,
            seed=args.seed,
            rng_kind=args.rng,
            rng_seed=args.seed,
        )
    else:
        train, _ = federation_split(
            args.dataset, seed=args.seed, test_fraction=args.test_fraction, n_samples=args.n_samples
        )
        owners = build_owners(
            train,
            node_id=args.name,
            n_owners=args.n_owners,
            shards=parse_shards(args.shards, args.n_owners),
            seed=args.seed,
            rng_kind=args.rng,
            rng_seed=args.seed,
        )
    ledger = Ledger(args.ledger, epsilon_budget=args.epsilon_budget, delta_budget=args.delta_budget)
    node = OwnerNode(
        node_id=args.name,
        target=args.coordinator,
        tls=tls,
        owners=owners,
        ledger=ledger,
        connect_timeout=args.connect_timeout,
        target_name_override=args.target_name,
        allow_clear_labels=args.allow_clear_labels,
    )
    if args.allow_clear_labels:
        log.warning(
            "--allow-clear-labels: tasks asking for clear labels are answered; each such release is "
            "recorded in the ledger as non-private (purpose 'clear-labels')"
        )
    signal.signal(signal.SIGTERM, lambda *_: node.stop_event.set())
    log.info("node %s hosts %d logical owner(s), %d row(s)", args.name, len(owners), sum(o.X.shape[0] for o in owners))
    try:
        return node.run()
    except ConnectError as exc:
        raise PrivfedError(str(exc)) from exc
    finally:
        ledger.close()
