"""Entry point of an owner node container: node i of N, then exec ``privfed owner``.

Owner node i must host logical owners ``slot_ranges(n_owners, nodes)[i]``, present certificate
``owner-<i>`` and keep its own ledger. Its index comes from where it is deployed:
``docker-compose.yml`` declares one service per node (``PRIVFED_NODE_INDEX=0``, ``1``, ...), and in
Kubernetes (``deploy/k8s/``) the StatefulSet pod's ordinal (``--index $(POD_INDEX)``, from the
``apps.kubernetes.io/pod-index`` label). Nothing is shared between nodes to decide it.

Partition record
    ``DIR/federation.json`` in ``--ledger-dir`` records the partition the ledger was made under
    (node count, owner count, data set, seed, rows, test fraction). A later start with another
    partition is refused: it would move logical owners to other ledger files, where their spent
    budget is not recorded. Start a fresh federation (new ledger volume) instead.

Certificate
    With ``--signer HOST:PORT --ca FILE --token-file FILE --tls-dir DIR`` the node enrols first
    (``deploy/enroll.py``): it makes its own key ``DIR/owner-<i>/owner-<i>-key.pem`` (0600) unless
    it has one, and the CA signer certifies it for the node's one-time token; a node that holds
    a valid certificate already (a restart) does not ask again. It then runs ``privfed owner
    --certs DIR/owner-<i>``. Without ``--signer``, pass ``--certs`` yourself.

Usage::

    python -m privfed.deploy.owner_entry --nodes N --index I --ledger-dir DIR \
        [--signer HOST:PORT --ca FILE --token-file FILE --tls-dir DIR] -- OWNER_ARGS...

OWNER_ARGS are ``privfed owner`` arguments without ``--name``, ``--shards`` and ``--ledger``
(nor ``--certs`` with ``--signer``), which this entry point adds; it validates the whole command
with the real CLI parser first.

Threads
    Nodes may share one host (the owner services of ``docker-compose.yml``), so unless OWNER_ARGS
    give ``--threads``, each gets ``--threads`` :func:`~privfed.deploy.threads.threads_per_node` of
    ``--nodes`` (the CPUs it may run on split among them, at least one): N nodes with a BLAS thread
    per CPU each would fight over the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

from privfed.common.errors import ConfigError
from privfed.deploy.threads import threads_per_node

#: The environment variable that gives ``--index`` when the flag is absent (docker-compose.yml).
INDEX_VARIABLE = "PRIVFED_NODE_INDEX"
#: Options that the entry point sets from the slot; the caller must not give them.
_SET_HERE = ("--name", "--shards", "--ledger")
#: ``privfed owner`` options that fix who holds which rows.
_PARTITION = ("n_owners", "dataset", "seed", "n_samples", "test_fraction")


def slot_ranges(n_owners: int, nodes: int) -> list[range]:
    """Logical owners of each node: ``range(i*n//p, (i+1)*n//p)``, contiguous and disjoint."""
    if nodes < 1 or n_owners < nodes:
        raise ConfigError(
            f"need 1 <= nodes <= n_owners, got nodes={nodes} and n_owners={n_owners}; "
            "every owner node must host at least one logical owner"
        )
    return [range(i * n_owners // nodes, (i + 1) * n_owners // nodes) for i in range(nodes)]


def slot_name(index: int) -> str:
    """The node name (and certificate common name) of slot ``index``."""
    return f"owner-{index}"


def check_partition(ledger_dir: Path, partition: dict) -> None:
    """Record ``partition`` in ``ledger_dir/federation.json``, or check it against the record.

    Raises
    ------
    ConfigError
        The ledgers in ``ledger_dir`` were made under another partition.
    """
    ledger_dir.mkdir(parents=True, exist_ok=True)
    record = ledger_dir / "federation.json"
    tmp = ledger_dir / f".federation.{os.getpid()}.{socket.gethostname()}.json"
    tmp.write_text(json.dumps(partition, sort_keys=True) + "\n")
    try:
        os.link(tmp, record)  # atomic: exactly one replica writes the record, complete
    except FileExistsError:
        stored = json.loads(record.read_text())
        changed = {k: (stored.get(k), v) for k, v in partition.items() if stored.get(k) != v}
        if changed:
            what = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(changed.items()))
            raise ConfigError(
                f"the ledgers in {ledger_dir} were made under another partition ({what}); "
                "logical owners would move to ledger files that do not know their spent "
                "budget. Keep the old settings, or start a fresh federation "
                "(`docker compose down -v`, or a new ledger directory)"
            ) from None
    finally:
        tmp.unlink()


def owner_argv(
    index: int, shards: range, ledger_dir: Path, passthrough: list[str], certs: Path | None = None
) -> list[str]:
    """The ``privfed owner`` arguments for slot ``index`` (without the program name)."""
    return [
        "owner",
        "--name",
        f"owner-{index}",
        "--shards",
        f"{shards.start}:{shards.stop}",
        "--ledger",
        str(ledger_dir / f"owner-{index}.sqlite"),
        *(["--certs", str(certs)] if certs is not None else []),
        *passthrough,
    ]


def with_threads(passthrough: list[str], nodes: int) -> list[str]:
    """``passthrough`` and, unless it gives ``--threads``, ``--threads`` for one of ``nodes`` replicas
    on this host (:func:`~privfed.deploy.threads.threads_per_node`: its CPUs split among them)."""
    if any(a.split("=", 1)[0] == "--threads" for a in passthrough):
        return passthrough
    return [*passthrough, "--threads", str(threads_per_node(nodes))]


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m privfed.deploy.owner_entry", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, required=True, help="owner nodes N in the federation")
    parser.add_argument(
        "--index",
        type=int,
        default=os.environ.get(INDEX_VARIABLE),
        help=f"this node's index i in [0, N) (default: ${INDEX_VARIABLE})",
    )
    parser.add_argument("--ledger-dir", type=Path, required=True, help="directory of this node's ledger")
    enrol = parser.add_argument_group("enrolment (deploy/enroll.py)")
    enrol.add_argument("--signer", help="HOST:PORT of the CA signer")
    enrol.add_argument("--ca", type=Path, help="the federation's ca.pem")
    enrol.add_argument("--token-file", type=Path, help="this node's one-time enrolment token")
    enrol.add_argument("--tls-dir", type=Path, help="where this node's key is made (its own volume)")
    enrol.add_argument("--enroll-timeout", type=float, default=300.0, help="seconds to wait for the signer")
    parser.add_argument("owner_args", nargs=argparse.REMAINDER, help="-- then privfed owner arguments")
    args = parser.parse_args(argv)
    given = [f"--{k.replace('_', '-')}" for k in ("signer", "ca", "token_file", "tls_dir") if getattr(args, k)]
    if given and len(given) != 4:
        parser.error("--signer, --ca, --token-file and --tls-dir go together")
    if args.index is None:
        parser.error(f"--index (or ${INDEX_VARIABLE}) is required")
    if not 0 <= args.index < args.nodes:
        parser.error(f"--index must be in [0, {args.nodes}), got {args.index}")
    rest = args.owner_args[1:] if args.owner_args[:1] == ["--"] else args.owner_args
    set_here = _SET_HERE + (("--certs",) if args.signer is not None else ())
    given = [a for a in rest if a.split("=", 1)[0] in set_here]
    if given:
        parser.error(f"{', '.join(given)}: set by the entry point from the node index; remove them")
    if any(a.split("=", 1)[0] == "--data" for a in rest):
        parser.error(
            "--data (an owner's own file) is for a single node on its own machine; run `privfed owner` directly there"
        )
    return args, rest


def main(argv: list[str] | None = None) -> int:
    args, rest = _parse(argv)
    from privfed.deploy.cli import build_parser

    rest = with_threads(rest, args.nodes)
    index, name = args.index, slot_name(args.index)
    certs = None if args.tls_dir is None else args.tls_dir / name
    try:
        # Validate the whole owner command with the real parser before anything is made.
        probe = build_parser("owner").parse_args(owner_argv(index, range(0, 1), args.ledger_dir, rest, certs))
        ranges = slot_ranges(probe.n_owners, args.nodes)
        check_partition(args.ledger_dir, {"nodes": args.nodes} | {k: getattr(probe, k) for k in _PARTITION})
        if args.signer is not None:
            from privfed.deploy.enroll import request

            certs = request(args.signer, args.ca, args.tls_dir, name, args.token_file, timeout=args.enroll_timeout)
    except ConfigError as exc:
        print(f"owner_entry: error: {exc}", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "privfed.deploy.cli", *owner_argv(index, ranges[index], args.ledger_dir, rest, certs)]
    print(
        f"owner_entry: node {index} of {args.nodes}: logical owners {ranges[index].start}..{ranges[index].stop - 1}",
        file=sys.stderr,
        flush=True,
    )
    os.execv(sys.executable, cmd)


if __name__ == "__main__":
    sys.exit(main())
