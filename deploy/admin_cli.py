"""The owner operators' commands of the ``privfed`` command line: ``privfed certs`` (a federation CA
and mTLS certificates, or one-time enrolment tokens) and ``privfed ledger show`` (a node's privacy
ledger, read-only)."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from privfed.common.errors import PrivfedError
from privfed.deploy.argtypes import positive_int

if TYPE_CHECKING:
    from privfed.common.ledger_records import Budget
    from privfed.owner.policy import Headroom

_K = TypeVar("_K", bound=Hashable)


def add_certs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("certs", help="make a federation CA and mTLS certificates")
    p.add_argument("--out", type=Path, required=True, help="directory for the CA and one directory per party")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--owners", type=positive_int, help="owner node certificates owner-0..owner-<N-1>")
    who.add_argument(
        "--names",
        nargs="+",
        metavar="NAME",
        help="owner node certificates with these names (e.g. hospital-a hospital-b): each node runs with "
        "--name NAME, and its owners' ids start with NAME",
    )
    who.add_argument(
        "--tokens",
        type=positive_int,
        metavar="N",
        help="no keys but the CA's: one-time enrolment tokens for the coordinator and owner-0..owner-<N-1> in "
        "OUT/tokens/<role>/; each party makes its own key and enrols with the CA signer (README, Kubernetes)",
    )
    who.add_argument(
        "--reissue",
        nargs="+",
        metavar="NAME",
        help="a new key and certificate for these existing parties (owner nodes, data users, coordinator) under the "
        "same CA, to renew them or because a key leaked; the old certificates are listed in "
        "OUT/revoked-certificates.txt, which privfed serve refuses",
    )
    p.add_argument(
        "--data-user",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="data-user certificate NAMEs (several, or the flag repeated): each may submit jobs to a coordinator service "
        "(privfed submit) and nothing else; node certificates cannot submit",
    )
    p.add_argument("--san", action="append", default=[], help="extra coordinator name or IP (repeatable)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--force",
        action="store_true",
        help="replace an existing CA and every key in --out (certificates already handed out stop working)",
    )
    mode.add_argument(
        "--add",
        action="store_true",
        help="keep the CA and existing pairs in --out; issue only the missing ones (e.g. a larger --owners)",
    )
    p.set_defaults(func=_certs)


def add_ledger(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ledger", help="inspect or back up an owner node's privacy ledger (read-only)")
    what = p.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    show = what.add_parser(
        "show",
        help="spent and remaining epsilon/delta per owner, totals by job and by recipient, and the releases",
        description="Read a ledger file without changing it: each owner's budget, spent and remaining "
        "(epsilon, delta), remaining being the least of its id's own and its most-spent row's (a row's budget "
        "follows it across owner ids), and how many of its rows are spent; the most one owner spent per job and "
        "per recipient (the data user who submitted the job and the coordinator the node's session was with); "
        "and the releases in debit order, each with its recipient.",
    )
    show.add_argument("--ledger", type=Path, required=True, help="the SQLite ledger file of an owner node")
    show.add_argument("--owner", action="append", help="only this owner id (repeatable; default: every owner)")
    show.add_argument(
        "--policy",
        type=Path,
        help="the node's policy file (privfed owner --policy): also show what one new job may still ask of each owner "
        "before the policy declines it, per job, for the last 24 hours and in total",
    )
    show.add_argument(
        "--json",
        action="store_true",
        help="print JSON instead of tables (epsilon and delta as numbers; null: infinite): per owner, remaining "
        "(what a new release can take from every row), id_remaining (its id's own record's) and rows (count, "
        "spent, least_remaining; null: no rows recorded for the id)",
    )
    show.set_defaults(func=_ledger_show)
    backup = what.add_parser(
        "backup",
        help="copy a ledger consistently, beside the node that writes it",
        description="Write a consistent copy of a ledger file to a new file (0600), the releases still in its "
        "write-ahead log included, while its node runs: a plain cp of the .sqlite file misses those. Restoring "
        "a copy forgets every release made after it, handing that budget back: restore only the latest copy.",
    )
    backup.add_argument("--ledger", type=Path, required=True, help="the SQLite ledger file of an owner node")
    backup.add_argument("--out", type=Path, required=True, help="the new file to write the copy to")
    backup.set_defaults(func=_ledger_backup)


def _certs(args: argparse.Namespace) -> int:
    from privfed.common.identity import check_node_name
    from privfed.deploy.certs import make_certs

    if args.reissue is not None:
        return _reissue(args)
    users = [check_node_name(n, flag="--data-user") for n in args.data_user]
    if args.tokens is not None:
        from privfed.deploy.tokens import mint, party_roles

        if args.san:
            raise PrivfedError(
                "--san goes with certificates made here; with --tokens the coordinator enrols, and its names "
                "are the signer's --coordinator-san (python -m privfed.deploy.enroll serve)"
            )
        make_certs(args.out, owners=0, force=args.force, add=args.add, flat=False, coordinator=False)
        roles = party_roles([f"owner-{i}" for i in range(args.tokens)], users)
        minted = mint(args.out, roles, replace=args.force)
        print(
            f"CA in {args.out}/ca (give it to the CA signer only); new one-time tokens in {args.out}/tokens: "
            f"{', '.join(sorted(minted)) or 'none (every party has one)'}; give party X only {args.out}/tokens/ROLE/X"
        )
        return 0
    if args.owners is None and args.names is None and not args.data_user:
        raise PrivfedError(
            "say whose certificates to make: --owners N, --names NAME ..., --tokens N, or --data-user NAME"
        )
    names = None if args.names is None else [check_node_name(n, flag="--names") for n in args.names]
    if names is not None and len(set(names)) != len(names):
        raise PrivfedError(f"--names must be distinct, got {names}")
    owners = len(names) if names else (args.owners or 0)
    out = make_certs(
        args.out,
        owners=owners,
        owner_names=names,
        sans=args.san,
        force=args.force,
        add=args.add,
        data_users=users,
    )
    what = (
        "issued the missing certificates under the existing CA"
        if args.add
        else f"wrote the CA to {out}/ca (keep it offline)"
    )
    print(f"{what}; one directory per party under {out}: give party X only {out}/X")
    _print_expiries(out)
    return 0


def _reissue(args: argparse.Namespace) -> int:
    """``privfed certs --reissue NAME ...`` (walkthrough 9, W9-2 and W9-3)."""
    from privfed.deploy.certs import COORDINATOR, REVOKED_FILE, party_dir, reissue

    if args.data_user or args.san or args.force or args.add:
        raise PrivfedError("--reissue takes no --data-user, --san, --force or --add: it renews the parties named")
    done = reissue(args.out, args.reissue)
    for name, old, new in done:
        print(
            f"reissued {name}: new key and certificate in {party_dir(args.out, name)} (serial {new.serial_number:X}, "
            f"expires {new.not_valid_after_utc:%Y-%m-%d}); the old one (serial {old.serial_number:X}) is listed in "
            f"{args.out / REVOKED_FILE}"
        )
    listed = party_dir(args.out, COORDINATOR) / REVOKED_FILE
    print(
        f"next: give each party its new directory and restart it with it "
        f"({', '.join(str(party_dir(args.out, n)) for n, _, _ in done)}); the coordinator service refuses the old "
        f"certificates as soon as it reads {listed if listed.exists() else args.out / REVOKED_FILE}: privfed serve "
        f"reads {REVOKED_FILE} in its --certs directory by default, again whenever it changes (copy it there if the "
        "service runs on another machine, or pass --revoked-certificates FILE)"
    )
    return 0


def _print_expiries(out: Path) -> None:
    """When the CA and each party's certificate in ``out`` expire (W9-3: nothing said so)."""
    from privfed.deploy.certs import CA_DIR, expiries

    ends = expiries(out)
    print("expiry (UTC; renew a party with privfed certs --out DIR --reissue NAME before it):")
    for name, end in ends:
        print(f"  {'the CA' if name == CA_DIR else name:<24} {end:%Y-%m-%d %H:%M}")


def _fmt(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _json_number(x: float) -> float | None:
    """ε or δ as a JSON number: 12 significant digits (a sum of debits such as 3 x 1e-5 prints as
    3e-05, not 3.0000000000000004e-05); None (null) for infinity, which JSON has no number for."""
    return None if math.isinf(x) else float(f"{x:.12g}")


def _ledger_backup(args: argparse.Namespace) -> int:
    from privfed.common.ledger_file import backup_file

    releases = backup_file(args.ledger, args.out)
    print(f"ledger {args.ledger}: {releases} release(s) copied to {args.out}", flush=True)
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    from privfed.common.ledger import read_accounts

    accounts = read_accounts(args.ledger)
    if args.owner:
        missing = sorted(set(args.owner) - {a.owner_id for a in accounts})
        if missing:
            raise PrivfedError(f"ledger {args.ledger}: no release recorded for owner(s) {', '.join(missing)}")
        accounts = [a for a in accounts if a.owner_id in set(args.owner)]
    headroom = {} if args.policy is None else _headroom(args.ledger, args.policy, [a.owner_id for a in accounts])
    rows_out = {} if args.policy is None else _rows_out(args.ledger, args.policy, headroom)
    if args.json:

        def budget(b: Any) -> dict[str, float | None]:
            return {"epsilon": _json_number(b.epsilon), "delta": _json_number(b.delta)}

        print(
            json.dumps(
                [
                    {
                        "owner_id": a.owner_id,
                        "budget": budget(a.budget),
                        "spent": budget(a.spent),
                        "remaining": budget(a.remaining),
                        "id_remaining": budget(a.id_remaining),
                        "rows": None
                        if a.rows is None
                        else {
                            "count": a.rows.count,
                            "spent": a.rows.spent,
                            "least_remaining": budget(a.rows.least_remaining),
                        },
                        "nonprivate_releases": a.nonprivate,
                        "by_recipient": [
                            {
                                "data_user": user,
                                "coordinator": coordinator,
                                "jobs": sorted(g["jobs"]),
                                "releases": g["releases"],
                                "epsilon": _json_number(g["epsilon"]),
                                "delta": _json_number(g["delta"]),
                            }
                            for (user, coordinator), g in _grouped([a], _recipient).items()
                        ],
                        "releases": [
                            r | {"epsilon": _json_number(r["epsilon"]), "delta": _json_number(r["delta"])}
                            for r in a.releases
                        ],
                    }
                    | (
                        {}
                        if args.policy is None
                        else {
                            "policy": {
                                **_headroom_json(headroom[a.owner_id], a.remaining.epsilon),
                                "rows": rows_out.get(a.owner_id),
                            }
                        }
                    )
                    for a in accounts
                ],
                indent=2,
            )
        )
        return 0
    print(f"ledger {args.ledger}: {len(accounts)} owner(s) with releases")
    header = (
        "owner",
        "eps budget",
        "eps spent",
        "eps left",
        "delta budget",
        "delta spent",
        "delta left",
        "rows spent",
        "releases",
    )
    rows = [
        (
            a.owner_id,
            _fmt(a.budget.epsilon),
            _fmt(a.spent.epsilon),
            _fmt(a.remaining.epsilon),
            _fmt(a.budget.delta),
            _fmt(a.spent.delta),
            _fmt(a.remaining.delta),
            "-" if a.rows is None else f"{a.rows.spent} of {a.rows.count}",
            f"{len(a.releases)}" + (f" ({a.nonprivate} non-private)" if a.nonprivate else ""),
        )
        for a in accounts
    ]
    _table([header, *rows], indent="")
    if any(a.remaining < a.id_remaining for a in accounts):
        print(
            "where eps or delta left is below budget - spent, the id's rows spent that budget under these or earlier "
            "owner ids (the budget follows the rows): a release beyond it is made without the rows it exceeds, from the "
            "data-independent fallback when that is all of them, and is still listed as a release"
        )
    if args.policy is not None:
        print(
            f"\nwhat one new job may still ask of each owner before its policy ({args.policy}) declines it, and what "
            "it may spend (the least of that and the budget left); eps, the day's grows again as releases pass 24 hours:"
        )
        header = (
            "owner",
            "eps per job",
            "eps day left",
            "eps total left",
            "policy allows",
            "a job may spend",
            "rows kept out",
        )
        _table(
            [
                header,
                *[
                    (
                        a.owner_id,
                        _fmt((h := headroom[a.owner_id]).per_job),
                        _fmt(max(0.0, h.day)),
                        _fmt(max(0.0, h.total)),
                        _fmt(h.epsilon),
                        _fmt(min(h.epsilon, a.remaining.epsilon)),
                        _fmt_rows_out(rows_out.get(a.owner_id)),
                    )
                    for a in accounts
                ],
            ],
            indent="",
        )
        print(
            "rows kept out: of the rows the id held in its last run, those the policy leaves out of a job asking what "
            "it allows the id, each row counted with what it can have spent under every id that held it (the "
            "policy's limits follow the rows); 'no room': those it leaves out of any job now (until their releases pass "
            "24 hours; under the total limit, for good); '-': no rows, or a ledger older than schema 6"
        )
    jobs = _grouped(accounts, lambda r: r.get("job", ""))
    if jobs:
        print("\nby job (most any one owner spent in it; '-': releases of no announced job):")
        header = ("job", "owners", "releases", "eps per owner", "delta per owner", "first", "last")
        _table([header, *[(job or "-", *_totals(j), j["first"], j["last"]) for job, j in jobs.items()]])
        print(
            "\nby recipient (most any one owner released to it; '-': none named, e.g. an operator's job, or "
            "not recorded: ledger schema < 5):"
        )
        header = ("data user", "coordinator", "jobs", "owners", "releases", "eps per owner", "delta per owner")
        _table(
            [
                header,
                *[
                    (user or "-", coordinator or "-", str(len(g["jobs"])), *_totals(g))
                    for (user, coordinator), g in _grouped(accounts, _recipient).items()
                ],
            ]
        )
    for job in jobs:
        print(f"\nreleases of job {job or '-'} (debit order):")
        for a in accounts:
            for r in a.releases:
                if r.get("job", "") != job:
                    continue
                kind = "NON-PRIVATE" if r["nonprivate"] else f"eps={_fmt(r['epsilon'])} delta={_fmt(r['delta'])}"
                user, coordinator = _recipient(r)
                print(
                    f"  {a.owner_id}  {r['ts']}  {r['purpose']}  {kind}  release {r['release_id']}  "
                    f"to {user or '-'} via {coordinator or '-'}"
                )
    return 0


def _headroom(ledger: Path, policy_file: Path, owner_ids: list[str]) -> dict[str, Headroom]:
    """Each owner's :class:`~privfed.owner.policy.Headroom` under the policy file, from the ledger file read
    without writing by the query the node's policy reads (``privfed.common.ledger_releases.read_spent``)."""
    from privfed.common.ledger_releases import read_spent
    from privfed.owner.policy import OwnerPolicy

    policy = OwnerPolicy.read(policy_file)
    day, total = read_spent(ledger, owner_ids, since="-1 day"), read_spent(ledger, owner_ids)

    def spent(owner_id: str) -> Callable[..., Budget]:  # the two sums headroom asks for: the day's and the total
        return lambda other_than=None, since=None: (total if since is None else day)[owner_id]

    return {o: policy.headroom(spent(o)) for o in owner_ids}


def _rows_out(ledger: Path, policy_file: Path, headroom: dict[str, Headroom]) -> dict[str, dict[str, int] | None]:
    """For each owner id, how many of the rows it held in its last run the policy keeps out of a job asking what it
    allows the id (``kept_out``), and of any job (``no_room``), of ``count``: each row by what it can have spent
    (``privfed.common.ledger_releases.read_row_spending``, the node's count); None: no rows recorded, or a file
    older than schema 6 (walkthrough 8, W8-5: nothing showed that most rows sat out every release)."""
    from privfed.common.ledger_records import REL_TOL
    from privfed.common.ledger_releases import read_row_spending
    from privfed.owner.policy import OwnerPolicy

    policy = OwnerPolicy.read(policy_file)
    out: dict[str, dict[str, int] | None] = {}
    for owner_id, groups in read_row_spending(ledger, list(headroom)).items():
        if not groups:
            out[owner_id] = None
            continue
        allows = headroom[owner_id].epsilon
        limits = (policy.max_epsilon_per_day, policy.max_epsilon_total)
        tol = REL_TOL * max([1.0, *(v for v in limits if math.isfinite(v))])
        count = kept = none = 0
        for n, day, total in groups:
            room = policy.headroom(lambda other_than=None, since=None, d=day, t=total: t if since is None else d)
            count += n
            kept += n if room.epsilon < allows - tol else 0
            none += n if room.epsilon <= tol else 0
        out[owner_id] = {"count": count, "kept_out": kept, "no_room": none}
    return out


def _fmt_rows_out(rows: dict[str, int] | None) -> str:
    if rows is None:
        return "-"
    return f"{rows['kept_out']} of {rows['count']}" + (f" ({rows['no_room']} no room)" if rows["no_room"] else "")


def _headroom_json(h: Headroom, budget_left: float) -> dict[str, float | None]:
    return {
        "epsilon_per_job": _json_number(h.per_job),
        "epsilon_day_left": _json_number(max(0.0, h.day)),
        "epsilon_total_left": _json_number(max(0.0, h.total)),
        "epsilon_policy_allows": _json_number(h.epsilon),
        "epsilon_a_job_may_spend": _json_number(min(h.epsilon, budget_left)),
    }


def _recipient(release: dict[str, Any]) -> tuple[str, str]:
    """Whom a recorded release went to: (data user, coordinator), '' where unknown."""
    return release.get("data_user", ""), release.get("coordinator", "")


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> None:
    """Print ``rows`` (the header first) in left-aligned columns."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(indent + "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())


def _totals(group: dict[str, Any]) -> tuple[str, str, str, str]:
    """A group's owners, releases, and the most (epsilon, delta) one owner spent in it, as printed."""
    return str(len(group["owners"])), str(group["releases"]), _fmt(group["epsilon"]), _fmt(group["delta"])


def _grouped(accounts: list[Any], key: Callable[[dict[str, Any]], _K]) -> dict[_K, dict[str, Any]]:
    """Releases grouped by ``key`` (the job they were made for, whom they went to), in order of each group's
    first release: its owners, jobs, releases, the most (epsilon, delta) one owner spent in it (the owner's
    releases in it summed with ``fsum``), and its first and last debit."""
    groups: dict[_K, dict[str, Any]] = {}
    spent: dict[tuple[_K, str], list[dict[str, Any]]] = {}
    for a in accounts:
        for r in a.releases:
            k = key(r)
            g = groups.setdefault(k, {"owners": set(), "jobs": set(), "releases": 0, "first": r["ts"], "last": r["ts"]})
            g["owners"].add(a.owner_id)
            g["jobs"].add(r.get("job", ""))
            g["releases"] += 1
            g["first"], g["last"] = min(g["first"], r["ts"]), max(g["last"], r["ts"])
            spent.setdefault((k, a.owner_id), []).append(r)
    for (k, _owner), releases in spent.items():
        g = groups[k]
        g["epsilon"] = max(g.get("epsilon", 0.0), math.fsum(r["epsilon"] for r in releases))
        g["delta"] = max(g.get("delta", 0.0), math.fsum(r["delta"] for r in releases))
    return dict(sorted(groups.items(), key=lambda kv: kv[1]["first"]))
