"""``privfed owner``: load this node's rows, open its ledger, serve the coordinator.

Owner ids are ``<--name>.o<index>`` (``privfed.common.identity``): the node's certificate name
decides which owners it speaks for."""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from privfed.common.dataset_files import existing_file, read_schema
from privfed.common.datasets import Dataset
from privfed.common.errors import ConfigError, PrivfedError
from privfed.common.files import sole_writer
from privfed.common.identity import owner_id
from privfed.common.ledger import Ledger
from privfed.common.ledger_rows import RowLayout
from privfed.common.schema import FederationSchema, RawTable
from privfed.common.schema.table import LoadedRows, split_line
from privfed.common.schema.values import is_numeral
from privfed.common.work_rows import check_declared_rows, work_rows
from privfed.owner.data import (
    DataFileWatch,
    build_owners,
    check_owner_rows,
    federation_split,
    pad_load_work,
    pad_refused_load,
    parse_shards,
    read_owner_rows,
    row_layout,
    shorthand_schema,
)
from privfed.owner.ledger_seen import check_seen, record_seen
from privfed.owner.local import LocalOwner
from privfed.owner.node import OwnerNode
from privfed.owner.policy import PolicyFile
from privfed.owner.registration import DeferredOwners
from privfed.owner.retry import ConnectError
from privfed.proto.transport import TlsFiles

log = logging.getLogger("privfed.owner")

#: Seconds a node whose rows fail its ``--bounds``/``--classes`` check tries to reach the coordinator to report
#: it (at most ``--connect-timeout``) before it exits with the error anyway.
REPORT_TIMEOUT = 10.0


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
    data : str or None
        ``--data``: the owner's own rows (None: a partition of the built-in ``dataset``, simulation).
    schema : Path or None
        ``--schema``: the federation schema file; it must be the coordinator's (same digest).
    bounds : str or None; classes : int
        ``--bounds``, ``--classes``: shorthand for a schema with these public bounds and class
        values ``0 .. K-1``; it must match the coordinator's in features, bounds and classes.
        With neither, the rows are checked against the schema the coordinator sends.
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
    work_rows : int or None
        ``--work-rows``: the row count declared public for each hosted owner, a power of two at least its rows;
        every computation works on that many rows, so no answer's time tells the owners' counts (None: the time
        shows each count's power-of-two cell; ``docs/owner-limits.md``).
    policy : Path or None
        ``--policy``: the node's policy file (:mod:`privfed.owner.policy`). With one the node is a
        daemon: it serves job after job, waits for a coordinator that stops or restarts (no
        ``--connect-timeout``) and exits on SIGTERM only. None: one job, as before.
    """

    coordinator: str
    name: str
    ledger: Path
    epsilon_budget: float
    delta_budget: float = 0.0
    data: str | None = None
    schema: Path | None = None
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
    work_rows: int | None = None
    policy: Path | None = None


def agreed_schema(
    local: FederationSchema | None, remote: FederationSchema | None, *, from_file: bool
) -> FederationSchema:
    """The schema an owner checks its rows against: the coordinator's (``remote``), which a local
    one must match: by digest if it comes from ``--schema`` (``from_file``), else (``--bounds``,
    ``--classes``) in features, bounds and classes."""
    if remote is None or local is None:
        only = remote if remote is not None else local
        if only is None:
            raise ConfigError("no federation schema: the coordinator sent none; give --schema FILE or --bounds")
        return only
    differences = local.differences(remote, names=from_file)
    if from_file and local.digest() != remote.digest():
        raise ConfigError(
            f"--schema (sha256 {local.digest()[:12]}) is not the coordinator's schema (sha256 "
            f"{remote.digest()[:12]}): {', '.join(differences) or 'formatting'}; use the federation's schema file"
        )
    if differences:
        raise ConfigError(
            f"--bounds/--classes do not match the coordinator's federation schema: {', '.join(differences)}; "
            "use the federation's schema file (--schema)"
        )
    return remote


def checked_rows(
    rows: RawTable,
    schema: FederationSchema,
    ledger: Ledger,
    *,
    pinned: bool,
    read: list[LoadedRows] | None = None,
    pad_refused: Callable[[ConfigError], None] | None = None,
) -> Dataset:
    """``rows`` checked against ``schema``, the decision recorded in the node's ledger first (issue 20,
    finding 5: "the schema decision is persisted").

    A node given no local schema checks its rows against the coordinator's. Its ledger records the
    digest of the first schema it checked and whether the rows fitted; after a restart, a schema
    with another digest is refused without the rows being read (a ConfigError: the node refuses
    every task with ``schema_mismatch``), so a coordinator that gets the node restarted learns
    nothing new -- only the first schema's check tells one bit. A schema file the operator pins
    (``--schema``: ``pinned``) is the operator's decision and is checked. ``--bounds``/``--classes`` pin
    the bounds and classes only: the coordinator's schema still decides how the file is read (which
    header name is which feature, the label column), and a new reading at each start would give every
    row a new account (``row_digests`` hash the rows as read) and a new bit; so it is recorded and
    checked as if the node had no local schema (wt-redteam3, ``tests/adversary/test_bounds_flag_schema.py``).
    ``read``: gets the rows as the schema read them (:func:`~privfed.owner.data.check_owner_rows`); ``pad_refused``:
    called when the rows were read and did not fit, before the error is raised (audit 26: the time of a refusal
    must not count the rows either, :func:`~privfed.owner.data.pad_refused_load`).
    """
    digest = schema.digest()
    recorded = ledger.schema_decision()
    if recorded is not None and recorded[0] != digest and not pinned:
        raise ConfigError(
            f"the coordinator's federation schema (sha256 {digest[:12]}) is not the one this node's ledger recorded "
            f"(sha256 {recorded[0][:12]}): refused without reading the rows; to accept a new schema, give it "
            "with --schema FILE"
        )
    dataset: Dataset | None = None
    error: ConfigError | None = None
    try:
        dataset = check_owner_rows(rows, schema, log_to=log, read=read)
    except ConfigError as exc:
        error = exc
        if pad_refused is not None:
            pad_refused(exc)
    if recorded != (digest, dataset is not None):
        try:
            ledger.record_schema(digest, dataset is not None)
        except sqlite3.Error as exc:  # e.g. a full disk: the check's outcome must not show either way
            raise ConfigError(
                f"ledger {ledger.path} cannot record the schema decision ({exc}); nothing is answered"
            ) from exc
    if error is not None or dataset is None:
        raise error or ConfigError("the rows were not checked")
    return dataset


def hosted_owners(
    config: OwnerConfig, ledger: Ledger | None = None, watch: DataFileWatch | None = None
) -> list[LocalOwner] | DeferredOwners:
    """The logical owners this node hosts: its shards of a built-in partition, or -- with
    ``--data`` -- owners whose rows are checked against the federation schema the coordinator
    sends at registration (:class:`~privfed.owner.registration.DeferredOwners`).

    The file is read, and checked against a local schema (``--schema``, or ``--bounds`` and
    ``--classes``), before the node dials out, so a malformed file fails at once. A file that fails the
    operator's own ``--schema`` stops the node there: the coordinator is told nothing, not even the one bit
    "this node's file does not fit" (README, Privacy). One that fails ``--bounds``/``--classes`` is still
    reported (the node registers and refuses every task), as the coordinator's schema decides how it is read. Every check of
    the rows against a schema they are read by is recorded in the node's ledger when the owners are
    loaded (:func:`checked_rows`): ``--schema``'s, or the coordinator's (with ``--bounds`` too). Under ``--rng
    seeded`` the owners' noise streams follow the releases ``ledger`` (the node's) holds when they are built
    (:func:`~privfed.owner.data.owner_generator`). ``watch``: the data file's watch (made before it is read),
    told how many rows the node answers from once they are loaded."""
    local = read_schema(config.schema) if config.schema is not None else None
    if not config.data:
        train, _ = federation_split(
            config.dataset, seed=config.seed, test_fraction=config.test_fraction, n_samples=config.n_samples
        )
        return build_node_owners(config, train, n_owners=config.n_owners, ledger=ledger)
    rows = read_owner_rows(config.data)
    if local is None and config.bounds is not None:
        local = shorthand_schema(rows, config.bounds, config.classes)
    early: ConfigError | None = None
    counted: int | None = None  # the file's rows as the local schema reads them (None: no local schema, or unread)
    if local is not None:
        try:
            counted = int(check_owner_rows(rows, local).X.shape[0])
        except ConfigError as exc:
            if config.schema is not None:  # the operator's schema: stop before dialing out, tell no one
                raise
            early = ConfigError(f"{exc}; --bounds means class values 0..K-1 (--classes K)")
            log.error("%s; telling the coordinator (up to %g s)", early, REPORT_TIMEOUT)
    try:  # a file's owners are this node's alone: the partition has B (or K) of them
        count = int(config.shards.rpartition(":")[2])
    except ValueError:
        count = 0  # parse_shards says what is wrong
    if count < 1 and ":" not in config.shards and config.shards.strip().lstrip("-").isdigit():
        raise ConfigError(
            f"--shards {config.shards}: with --data it is how many owners share the file's rows (at least 1)"
        )
    shards = parse_shards(config.shards, count)
    # Before it dials out: the rows a local schema read (walkthrough 4, m10: the lines, a header counted as a row,
    # let --shards 2 of a 1-row file register and then refuse every task as schema_mismatch), else the file's lines
    # (the coordinator's schema decides whether the first is a header).
    bound, unit = (len(rows.lines), "line(s)") if counted is None else (counted, "row(s)")
    if counted is None and shards.stop == bound and _names_only(rows):  # walkthrough 14, W14-10: registered, then
        raise ConfigError(  # refused every task as "schema_mismatch"
            f"--shards {config.shards}: the first of the {bound} line(s) in {config.data} holds no number, so it is "
            f"a header and the file holds {bound - 1} row(s): {shards.stop} owners cannot have a row each; give "
            f"--shards at most {bound - 1} (if that line is a row, give --schema FILE: its header setting says so)"
        )
    if shards.stop > bound:
        raise ConfigError(
            f"--shards {config.shards}: {bound} {unit} in {config.data} cannot give "
            f"{shards.stop} owners a row each; give --shards at most the file's rows"
        )
    if config.work_rows is not None and shards.stop:  # before it dials out: at least the lines but a header
        check_declared_rows(config.work_rows, -(-(len(rows.lines) - 1 if counted is None else counted) // shards.stop))
    if shards.start != 0:  # owners A..B-1 of B: the file's other rows hosted nowhere, or by a node given 0:A
        raise ConfigError(
            f"--shards {config.shards!r} with --data: a node hosts all of its file's rows, split among K owners "
            "(--shards K); to split a file between nodes, split the file (a row served by two nodes has two "
            "ledgers, hence two budgets)"
        )

    def load(remote: FederationSchema | None, ledger: Ledger) -> list[LocalOwner]:
        if early is not None:  # --bounds: the recorded schema will be the coordinator's
            raise early
        schema = agreed_schema(local, remote, from_file=config.schema is not None)
        read: list[LoadedRows] = []
        dataset = checked_rows(
            rows,
            schema,
            ledger,
            pinned=config.schema is not None,
            read=read,
            pad_refused=lambda exc: pad_refused_load(rows, schema, shards.stop, config.work_rows, exc),
        )
        if watch is not None:
            watch.rows = int(dataset.X.shape[0])
        own = row_layout(dataset)  # its rows' digests in the layout the ledger recorded (ledger_rows, "Layout")
        layout = None if own is None else ledger.row_layout(own)
        owners = build_node_owners(config, dataset, n_owners=shards.stop, layout=layout, ledger=ledger)
        cells = sum(config.work_rows or work_rows(o.n_rows) for o in owners)  # public: each owner's cell
        pad_load_work(  # the time follows the cells, not the rows: every step above, done to copies
            rows,
            schema,
            dataset,
            cells,
            slow=read[0].slow,
            n_owners=shards.stop,
            seed=config.seed,
            layout=layout,
            start=read[0].trigger,  # the copies begin where the rows' fast reader stopped (audit 35, A35-2)
        )
        return owners

    return DeferredOwners(tuple(owner_id(config.name, i) for i in shards), load, None if early is None else str(early))


def _names_only(rows: RawTable) -> bool:
    """Whether the first line of an owner's CSV holds no number: a header, as a schema without a ``header`` setting
    reads it (:func:`~privfed.common.schema.table.load_rows`), known before the coordinator's schema is."""
    return (
        bool(rows.lines) and not rows.positional and not any(is_numeral(c.strip()) for c in split_line(rows.lines[0]))
    )


def build_node_owners(
    config: OwnerConfig,
    train: Dataset,
    *,
    n_owners: int,
    layout: RowLayout | None = None,
    ledger: Ledger | None = None,
) -> list[LocalOwner]:
    """The node's shards (``--shards``) of an even partition of ``train`` into ``n_owners``; its rows digested in
    ``layout`` (:func:`~privfed.owner.data.in_layout`); a seeded noise stream past ``ledger``'s releases."""
    return build_owners(
        train,
        node_id=config.name,
        n_owners=n_owners,
        shards=parse_shards(config.shards, n_owners),
        seed=config.seed,
        rng_kind=config.rng,
        rng_seed=config.seed,
        rng_stream=0 if ledger is None or config.rng != "seeded" else ledger.release_count(),
        layout=layout,
    )


def run_owner(config: OwnerConfig, tls: TlsFiles | None, stop: threading.Event | None = None) -> int:
    """Load the node's rows, open its ledger and serve the coordinator until the job ends (0), or until ``stop`` is
    set: the command line sets it on SIGTERM (:func:`privfed.deploy.signals.set_on_signals`).
    The node is its ledger's one writer process (:func:`~privfed.common.files.sole_writer`)."""
    policy = PolicyFile(config.policy) if config.policy is not None else None
    if config.rng == "seeded":
        log.warning(
            "--rng seeded: this node's noise is a function of --seed (PCG64, not a cryptographic generator), "
            "which whoever knows or recovers the seed can remove: for tests and reproducible simulations only"
        )
    for path, what in ((config.data, "file"), (config.schema, "schema file")):  # before the ledger is made (W14-9)
        if path:
            existing_file(path, what)
    with sole_writer(config.ledger):
        ledger = Ledger(config.ledger, epsilon_budget=config.epsilon_budget, delta_budget=config.delta_budget)
        try:
            _say_what_the_ledger_holds(ledger)
            check_seen(ledger)  # not an older copy put back, nor a ledger made anew (walkthrough 7, W7-5)
            record_seen(ledger)
            watch = DataFileWatch.before_reading(config.data) if config.data else None
            try:
                return _serve(config, tls, policy, hosted_owners(config, ledger, watch), ledger, watch, stop)
            finally:
                record_seen(ledger)
        finally:
            ledger.close()


def _say_what_the_ledger_holds(ledger: Ledger) -> None:
    """One line at the start: how many releases the ledger holds and when the last was made, so an owner who put an
    older copy back sees what it forgot (walkthrough 7, W7-5: a restored backup handed back the budget spent since
    it was made, and nothing at the start said what the ledger held)."""
    last = ledger.last_release()
    if last is None:
        log.info("ledger %s: no release recorded yet", ledger.path)
        return
    count, when, job = last
    log.info(
        "ledger %s: %d release(s) recorded, the last at %s UTC%s (a ledger put back from an older copy forgets the "
        "releases made since, and gives their budget back)",
        ledger.path,
        count,
        when,
        f" for job {job}" if job else "",
    )


def _serve(
    config: OwnerConfig,
    tls: TlsFiles | None,
    policy: PolicyFile | None,
    owners: list[LocalOwner] | DeferredOwners,
    ledger: Ledger,
    watch: DataFileWatch | None = None,
    stop: threading.Event | None = None,
) -> int:
    refused_rows = isinstance(owners, DeferredOwners) and owners.error is not None
    node = OwnerNode(
        node_id=config.name,
        target=config.coordinator,
        tls=tls,
        owners=owners,
        ledger=ledger,
        # a node whose rows were refused only reports that (schema_mismatch): it waits less for the coordinator
        connect_timeout=min(config.connect_timeout, REPORT_TIMEOUT)
        if refused_rows
        else (math.inf if policy is not None else config.connect_timeout),
        target_name_override=config.target_name,
        allow_clear_labels=config.allow_clear_labels,
        work_rows=config.work_rows,
        policy_file=policy,
        daemon=policy is not None and not refused_rows,
        data_watch=watch,
        stop_event=stop,
    )
    if config.allow_clear_labels:
        log.warning(
            "--allow-clear-labels: tasks asking for clear labels are answered; each such release is "
            "recorded in the ledger as non-private (purpose 'clear-labels')"
        )
    if isinstance(owners, DeferredOwners):
        log.info(
            "node %s hosts %d logical owner(s) of its own file %s", config.name, len(owners.owner_ids), config.data
        )
    else:
        log.info(
            "node %s hosts %d logical owner(s), %d row(s)", config.name, len(owners), sum(o.X.shape[0] for o in owners)
        )
    try:
        code = node.run()
    except ConnectError as exc:
        if isinstance(owners, DeferredOwners) and owners.error is not None:  # the data error matters more
            raise ConfigError(f"{owners.error} (and the coordinator could not be told: {exc})") from exc
        raise PrivfedError(str(exc)) from exc
    if node.fatal is not None:  # already reported to the coordinator (schema_mismatch refusals)
        raise ConfigError(node.fatal)
    if node.job_unfinished is not None:  # every task refused (the budget spent, ...), or the job failed: exit 2
        raise PrivfedError(node.job_unfinished)
    return code
