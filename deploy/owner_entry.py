"""Entry point of an owner container: find this replica's index, then exec ``privfed owner``.

``docker compose`` scales a service to N identical replicas and gives none of them an index
(no environment variable, and the container's hostname is its id). Owner node i must host
logical owners ``slot_ranges(n_owners, nodes)[i]``, present certificate ``owner-<i>`` and keep
its own ledger, so the index is derived here, inside the container:

Slots
    ``--slots DIR`` is a directory in a volume shared by the replicas (``/enroll/slots``).
    Each replica takes the lowest i in ``[0, nodes)`` whose ``slot-<i>.lock`` it can lock with
    ``flock(LOCK_EX | LOCK_NB)``. Locks on one kernel are atomic, so two replicas never get the
    same slot; the lock belongs to the open file, which is inherited across ``exec`` and held by
    ``privfed owner`` until it exits, so a replaced container takes the slot its predecessor
    left, and with it that slot's ledger. Nothing has to be cleaned up after a crash.

Partition record
    ``DIR/federation.json`` in ``--ledger-dir`` records the partition the ledgers were made
    under (node count, owner count, data set, seed, rows, test fraction). A later start with
    another partition is refused: it would move logical owners to other ledger files, where
    their spent budget is not recorded. Start a fresh federation (new ledger volume) instead.

Certificate
    With ``--enroll EXCHANGE --tls-dir DIR`` the replica, once it holds slot i, makes its own
    key ``DIR/owner-<i>/owner-<i>-key.pem`` (mode 0600, in a directory no other container
    mounts) and has the CA signer sign a request for ``owner-<i>`` through its socket in the
    exchange directory, passing the open file that holds the slot's lock as the proof that it
    holds slot i (``deploy/enroll.py``); it then runs ``privfed owner --certs DIR/owner-<i>``. So
    no replica ever sees another node's key, nor the CA's, and none gets another slot's
    certificate. Without ``--enroll``, pass ``--certs`` yourself.

Usage (the owner services of ``docker-compose.yml``)::

    python -m privfed.deploy.owner_entry --nodes N --slots DIR --ledger-dir DIR \
        [--enroll DIR --tls-dir DIR] -- OWNER_ARGS...

OWNER_ARGS are ``privfed owner`` arguments without ``--name``, ``--shards`` and ``--ledger``
(nor ``--certs`` with ``--enroll``), which this entry point adds; it validates the whole command
with the real CLI parser first.

Threads
    The replicas share one host, so unless OWNER_ARGS give ``--threads``, each gets ``--threads``
    :func:`~privfed.deploy.threads.threads_per_node` of ``--nodes`` (the host's CPUs split among
    them, at least one): N nodes with a BLAS thread per CPU each would fight over the cores.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import socket
import sys
from pathlib import Path

from privfed.common.errors import ConfigError
from privfed.deploy.threads import threads_per_node

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


def slot_lock(slots: Path, index: int) -> Path:
    """The lock file whose holder is slot ``index`` (the CA signer checks it too, ``deploy/enroll.py``)."""
    return slots / f"slot-{index}.lock"


def claim_slot(slots: Path, nodes: int) -> tuple[int, int]:
    """Lock the lowest free ``slot-<i>.lock`` in ``slots``; return ``(i, fd)``.

    The returned file descriptor holds the lock and is inheritable: keep it open (and exec) for
    as long as the slot is in use.

    Raises
    ------
    ConfigError
        Every slot is held: more replicas are running than ``nodes``.
    """
    slots.mkdir(parents=True, exist_ok=True)
    for i in range(nodes):
        fd = os.open(slot_lock(slots, i), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} pid {os.getpid()}\n".encode())
        os.set_inheritable(fd, True)
        return i, fd
    raise ConfigError(
        f"all {nodes} owner slots in {slots} are taken: more owner replicas run than --nodes "
        f"({nodes}); scale with PRIVFED_NODES (it sets deploy.replicas and --nodes together)"
    )


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
    parser.add_argument("--nodes", type=int, required=True, help="owner node replicas (slots)")
    parser.add_argument("--slots", type=Path, required=True, help="shared directory of slot lock files")
    parser.add_argument("--ledger-dir", type=Path, required=True, help="directory of owner-<i>.sqlite ledgers")
    parser.add_argument("--enroll", type=Path, help="exchange directory of the CA signer (deploy/enroll.py)")
    parser.add_argument("--tls-dir", type=Path, help="with --enroll: where this node's key is made (not shared)")
    parser.add_argument("--enroll-timeout", type=float, default=300.0, help="seconds to wait for the certificate")
    parser.add_argument("owner_args", nargs=argparse.REMAINDER, help="-- then privfed owner arguments")
    args = parser.parse_args(argv)
    if (args.enroll is None) != (args.tls_dir is None):
        parser.error("--enroll and --tls-dir go together")
    rest = args.owner_args[1:] if args.owner_args[:1] == ["--"] else args.owner_args
    set_here = _SET_HERE + (("--certs",) if args.enroll is not None else ())
    given = [a for a in rest if a.split("=", 1)[0] in set_here]
    if given:
        parser.error(f"{', '.join(given)}: set by the entry point from the slot; remove them")
    if any(a.split("=", 1)[0] == "--data" for a in rest):
        parser.error(
            "--data (an owner's own file) is for a single node on its own machine; run `privfed owner` directly there"
        )
    return args, rest


def main(argv: list[str] | None = None) -> int:
    args, rest = _parse(argv)
    from privfed.deploy.cli import build_parser

    rest = with_threads(rest, args.nodes)

    try:
        # Validate the whole owner command with the real parser before claiming anything.
        certs = None if args.tls_dir is None else args.tls_dir / "owner-0"
        probe = build_parser("owner").parse_args(owner_argv(0, range(0, 1), args.ledger_dir, rest, certs))
        ranges = slot_ranges(probe.n_owners, args.nodes)
        check_partition(args.ledger_dir, {"nodes": args.nodes} | {k: getattr(probe, k) for k in _PARTITION})
        index, lock_fd = claim_slot(args.slots, args.nodes)
        if args.enroll is not None:
            from privfed.deploy.enroll import enroll

            # The slot's lock goes with the request: the signer signs owner-<i> only for its holder.
            certs = enroll(args.enroll, args.tls_dir, slot_name(index), lock_fd, timeout=args.enroll_timeout)
    except ConfigError as exc:
        print(f"owner_entry: error: {exc}", file=sys.stderr)
        return 2
    cmd = [sys.executable, "-m", "privfed.deploy.cli", *owner_argv(index, ranges[index], args.ledger_dir, rest, certs)]
    print(
        f"owner_entry: slot {index} of {args.nodes}: logical owners {ranges[index].start}..{ranges[index].stop - 1}",
        file=sys.stderr,
        flush=True,
    )
    os.execv(sys.executable, cmd)  # the slot's lock fd stays open in privfed owner


if __name__ == "__main__":
    sys.exit(main())
