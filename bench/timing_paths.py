"""Timing side channels around an owner's releases, measured as an attacker would (``bench/timing_channels.py``
times the release computation itself).

Each case times the same request to owners that differ only in something the attacker must not learn,
the arms interleaved (``bench/timing_stats.py``), and prints per pair the medians, their difference over
the MAD, the KS statistic and the accuracy of a one-timing threshold rule (0.5: chance):

* ``query/*``: ``privfed query`` against a coordinator (the hostile one of ``tests/adversary``: real
  gRPC and mTLS, in this process) that times the gap between its ``GetModel`` answer and the first
  ``Predict``: the owner's work on its files in between. Arms: the query file's text (values of 3
  significant digits instead of 17; one missing cell, which the owner's schema fills), read by no
  schema, by the coordinator's schema or by the owner's own (``--schema``); for the null-space method
  (``subspace``), 10x the training rows, and another confidential label. Rows whose projection
  leaves the model's box (``query/box``) cost more, but that is a function of the rows sent.
* ``secure_sum/*``: the owner's step with its private release in a ring (the leader's first hop) and
  in a pairwise-mask sum (its masked input): zeros, every value at the public bound, at minus it.
* ``ledger/*``: a debit of an owner's 300 row accounts: fresh, nearly spent under an earlier id (the
  release is then recorded on the id only), or held by 4 earlier ids; and a whole answer at a node
  with a policy (``OwnerCore.answer``, the policy's limits counted over the ids that held the rows),
  rows held by an earlier id or not.

Run: ``python bench/timing_paths.py`` (200 repeats per arm, ~1 min) or ``--quick``; ``--cases`` picks
cases by prefix; ``--processes`` runs each query as a ``privfed query`` process of its own (~1 s each:
e.g. ``--cases query --repeats 40 --processes``). Compare within one run; ``uptime`` is printed beside it.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # bench.*
sys.path.append(str(ROOT / "tests" / "adversary"))  # the hostile coordinator
from hostile import (  # type: ignore[import-not-found]
    HostileCoordinator,
    make_federation_certs,
    matrix,
    tls_dir,
    tls_files,
)

from bench.timing_stats import HEADER, interleaved, pair_line, uptime
from privfed.common.bounds import Bounds
from privfed.common.jobinfo import JobInfo
from privfed.common.ledger import Debit, Ledger
from privfed.common.schema import FederationSchema
from privfed.common.secagg.boxes import generate_private_key, local_boxes
from privfed.common.secagg.fixedpoint import FixedPoint
from privfed.common.secagg.inprocess import InProcessSecAgg
from privfed.common.secagg.ring import RingParty, new_session_id
from privfed.common.secagg.ring_topology import check_ring, ring_peers
from privfed.common.tasks import LrShareTask, Task
from privfed.owner.core import OwnerCore
from privfed.owner.data import row_digests
from privfed.owner.local import LocalOwner
from privfed.owner.policy import OwnerPolicy
from privfed.owner.query import QueryConfig, run_query
from privfed.proto import privfed_pb2 as pb

F, N_QUERIES, N_TRAIN, BOUND = 10, 200, 300, 4.0
FEATURES = tuple(f"f{i}" for i in range(F))
#: An arm: ``arm(r)`` does repeat ``r``; returns None (timed whole) or the seconds it measured itself.
Arm = Callable[[int], "float | None"]


# ----------------------------------------------------------------------------- privfed query
def _csv(path: Path, table: np.ndarray, *, digits: int = 17, header: bool = False, missing: bool = False) -> Path:
    lines = [",".join(FEATURES)] if header else []
    for i, row in enumerate(table):
        cells = [f"{v:.{digits}g}" for v in row]
        if missing and i == N_QUERIES // 2:
            cells[3] = ""  # the schema fills it
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


class QueryBench:
    """A hostile coordinator serving one model, stamping when it answers ``GetModel`` and when the
    first ``Predict`` arrives; ``privfed query`` runs in this process (:func:`run_query`)."""

    def __init__(self, tmp: Path, processes: bool) -> None:
        self.tmp = tmp
        self.processes = processes
        self.certs = make_federation_certs(tmp / "certs", owners=1)
        self.hc = HostileCoordinator(self.certs)
        self.tls = tls_files(self.certs, "owner-0")
        self.stamps: list[float] = []
        answer_model, take_rows = self.hc._get_model, self.hc._predict

        def get_model(request: pb.GetModelRequest, context: object) -> pb.GetModelResponse:
            reply = answer_model(request, context)
            self.stamps.append(time.perf_counter())
            return reply

        def predict(request: pb.PredictRequest, context: object) -> pb.PredictResponse:
            self.stamps.append(time.perf_counter())
            self.hc.predicts.clear()
            return take_rows(request, context)

        self.hc._get_model, self.hc._predict = get_model, predict
        rng = np.random.default_rng(3)
        self.A_d = rng.normal(size=(F, 1))
        self.queries = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)

    def serve(self, schema: FederationSchema | None) -> None:
        self.hc.model = pb.GetModelResponse(
            model_id="m",
            kind="lr",
            bounds=matrix(np.stack([np.full(F, -BOUND), np.full(F, BOUND)])),
            linear_stage=matrix(self.A_d),
            schema="" if schema is None else schema.to_json(),
        )

    def arm(self, queries: Path, **flags: object) -> Arm:
        config = QueryConfig(coordinator=f"127.0.0.1:{self.hc.port}", model_id="m", queries=queries,
                             out=self.tmp / "labels.csv", **flags)  # type: ignore[arg-type]  # fmt: skip

        command = [sys.executable, "-m", "privfed.deploy.cli", "query", "--coordinator", config.coordinator,
                   "--name", "owner-0", "--certs", str(tls_dir(self.certs, "owner-0")), "--model-id", "m",
                   "--queries", str(queries), "--out", str(self.tmp / "labels.csv")]  # fmt: skip
        for flag, value in flags.items():
            if value is True:
                command.append("--" + flag.replace("_", "-"))
            elif value is not False:
                text = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
                command += ["--" + flag.replace("_", "-"), text]

        def window(r: int) -> float:
            self.stamps.clear()
            if self.processes:
                subprocess.run(command, check=True, capture_output=True)
            else:
                run_query(config, self.tls)
            return self.stamps[1] - self.stamps[0]

        return window


def query_cases(tmp: Path, processes: bool = False) -> dict[str, tuple[Callable[[], None], dict[str, Arm]]]:
    """Each case: what the coordinator serves, and its arms (the first is the baseline); ``processes``: each
    query a ``privfed query`` process of its own."""
    q = QueryBench(tmp, processes)
    schema = FederationSchema(
        FEATURES, (-BOUND,) * F, (BOUND,) * F, (0, 1), header=True, fill=tuple((f, 0.0) for f in FEATURES)
    )
    (tmp / "schema.json").write_text(schema.to_json())
    plain_schema = FederationSchema(FEATURES, (-BOUND,) * F, (BOUND,) * F, (0, 1), header=True)  # no fill: a
    # coordinator's schema with fill values or categories is refused (owner/query_files.py, "Columns")
    plain = _csv(tmp / "q17.csv", q.queries)
    named = _csv(tmp / "h17.csv", q.queries, header=True)
    rng = np.random.default_rng(4)
    X = np.clip(rng.normal(size=(10 * N_TRAIN, F)), -BOUND, BOUND)
    labels = np.column_stack([X @ rng.normal(size=F) > 0, rng.integers(0, 2, len(X))])
    train = {n: _csv(tmp / f"t{n}.csv", np.column_stack([X[:n], labels[:n]])) for n in (N_TRAIN, 10 * N_TRAIN)}
    subspace = {"method": "subspace", "allow_confidential_map_leak": True}
    edge = _csv(tmp / "edge.csv", np.sign(q.queries) * BOUND)
    return {
        "query/no-schema": (
            lambda: q.serve(None),
            {"17-digit": q.arm(plain), "3-digit": q.arm(_csv(tmp / "q3.csv", q.queries, digits=3))},
        ),
        "query/their-schema": (
            lambda: q.serve(plain_schema),
            {"17-digit": q.arm(named), "3-digit": q.arm(_csv(tmp / "h3t.csv", q.queries, header=True, digits=3))},
        ),
        "query/own-schema": (
            lambda: q.serve(schema),
            {
                "clean": q.arm(named, schema=tmp / "schema.json"),
                "one-missing": q.arm(
                    _csv(tmp / "hm2.csv", q.queries, header=True, missing=True), schema=tmp / "schema.json"
                ),
                "3-digit": q.arm(_csv(tmp / "h3.csv", q.queries, header=True, digits=3), schema=tmp / "schema.json"),
            },
        ),
        "query/subspace": (
            lambda: q.serve(None),
            {
                "300-rows": q.arm(plain, train_data=train[N_TRAIN], confidential_labels=(0,), **subspace),
                "3000-rows": q.arm(plain, train_data=train[10 * N_TRAIN], confidential_labels=(0,), **subspace),
                "other-label": q.arm(plain, train_data=train[N_TRAIN], confidential_labels=(1,), **subspace),
            },
        ),
        "query/box": (lambda: q.serve(None), {"inside": q.arm(plain), "at-bounds": q.arm(edge)}),
    }


# ----------------------------------------------------------------------------- secure sums
RING = ("o0", "o1", "o2", "o3")
FP = FixedPoint(frac_bits=24, n_parties=5, max_abs=8.0)
M = 24  # values per contribution (a boosting evaluation's per-class counts)
VALUES = {"zeros": np.zeros(M), "at+bound": np.full(M, 8.0), "at-bound": np.full(M, -8.0)}


def ring_arms() -> dict[str, Arm]:
    """The leader's ``start``: its release encoded, masked with a fresh secret and sealed to the next party."""
    ring = check_ring(list(RING))
    boxes = local_boxes({p: generate_private_key() for p in ring}, lambda p: ring_peers(ring, p))

    def arm(values: np.ndarray) -> Arm:
        def start(r: int) -> float:
            party = RingParty(RING[0], ring, new_session_id(), FP, boxes[RING[0]])
            t0 = time.perf_counter()
            party.start(values)
            return time.perf_counter() - t0

        return start

    return {name: arm(v) for name, v in VALUES.items()}


def pairwise_arms(repeats: int) -> dict[str, Arm]:
    """An owner's masked input in one round of a pairwise-mask sum of 5 (every owner answers each round)."""

    def arm(values: np.ndarray) -> Arm:
        run = InProcessSecAgg(["o0", "o1", "o2", "o3", "o4"], FP, new_session_id(), rounds=repeats + 2)
        run.key_agreement()

        def masked(r: int) -> float:
            requests = run.server.input_requests()
            t0 = time.perf_counter()
            own = run.owners["o0"].masked_input(requests["o0"], values)
            dt = time.perf_counter() - t0
            others = {o: run.owners[o].masked_input(req, np.zeros(M)) for o, req in requests.items() if o != "o0"}
            run.server.on_unmask(run.unmask(run.server.on_masked({"o0": own, **others})))
            return dt

        return masked

    return {name: arm(v) for name, v in VALUES.items()}


# ----------------------------------------------------------------------------- ledger
D_L = 5
BOUNDS_L = Bounds.of(-1.0, 1.0, D_L)
OWNER = "node-9.o00000"


def _held_rows(ledger: Ledger, keys: list[bytes], earlier: int, spent: float) -> None:
    """``earlier`` ids held the rows of ``keys`` before, the first spending ``spent`` of them."""
    for i in range(earlier):
        ledger.bind_rows(f"node-{i}.o00000", keys)
        ledger.debit_many([Debit(f"node-{i}.o00000", spent if i == 0 else 1e-3, 0.0, "earlier", f"e{i}#0", job="j0")])


def debit_arms() -> dict[str, Arm]:
    """One debit of ``OWNER``'s 300 row accounts, a fresh release id each repeat."""
    rng = np.random.default_rng(5)
    keys = row_digests(rng.normal(size=(N_TRAIN, D_L)), rng.integers(0, 2, N_TRAIN))

    def arm(earlier: int, spent: float) -> Arm:
        ledger = Ledger(":memory:", epsilon_budget=100.0, delta_budget=1.0)
        _held_rows(ledger, keys, earlier, spent)
        ledger.bind_rows(OWNER, keys)

        def debit(r: int) -> None:
            ledger.debit_many([Debit(OWNER, 1e-3, 0.0, "bench", f"r{r}#0")])

        return debit

    return {"fresh": arm(0, 0.0), "spent-earlier": arm(1, 100.0 - 1e-3), "4-earlier-ids": arm(4, 1e-3)}


def first_debit_arms(tmp: Path) -> dict[str, Arm]:
    """The first debit of ``OWNER``'s rows after its process started (the accounts not yet cached), the
    ledger file on ``tmp`` (a tmpfs when there is one: no disk's fsync in the timing)."""
    rng = np.random.default_rng(5)
    keys = row_digests(rng.normal(size=(N_TRAIN, D_L)), rng.integers(0, 2, N_TRAIN))

    def arm(earlier: int) -> Arm:
        def first(r: int) -> float:
            path = tmp / f"first-{earlier}-{r}.sqlite"
            ledger = Ledger(path, epsilon_budget=100.0, delta_budget=1.0)
            _held_rows(ledger, keys, earlier, 1e-3)
            ledger.close()  # the earlier process
            ledger = Ledger(path, epsilon_budget=100.0, delta_budget=1.0)
            ledger.bind_rows(OWNER, keys)
            ledger.load_row_accounts()  # as the owner core does when it starts
            t0 = time.perf_counter()
            ledger.debit_many([Debit(OWNER, 1e-3, 0.0, "bench", "first#0")])
            dt = time.perf_counter() - t0
            ledger.close()
            return dt

        return first

    return {"fresh": arm(0), "held-by-1-id": arm(1)}


def policy_arms() -> dict[str, Arm]:
    """A whole answer (an LR share) at a node with a policy, in an announced job."""
    rng = np.random.default_rng(6)
    X, y = np.clip(rng.normal(size=(N_TRAIN, D_L)), -1, 1), rng.integers(0, 2, N_TRAIN)
    keys = row_digests(X, y)
    policy = OwnerPolicy(max_epsilon_per_job=1e6, max_epsilon_per_day=1e6, max_epsilon_total=1e6)
    job = JobInfo("job-1", "", "lr", 1e6, 1.0, "")

    def arm(earlier: int) -> Arm:
        ledger = Ledger(":memory:", epsilon_budget=1e6, delta_budget=1.0)
        _held_rows(ledger, keys, earlier, 1.0)
        owner = LocalOwner(OWNER, X, y, np.random.default_rng(7), 2, BOUNDS_L, row_keys=tuple(keys))
        core = OwnerCore([owner], ledger, owner_policy=policy)
        spec = LrShareTask("pm", 0.01, 1.0, 1.0, 2, BOUNDS_L)

        def answer(r: int) -> None:
            core.answer([Task(f"t{r}", OWNER, f"round-{r}", spec)], job=job)

        return answer

    return {"rows-new": arm(0), "held-by-1-id": arm(1), "held-by-4-ids": arm(4)}


# ----------------------------------------------------------------------------- driver
def run(prefixes: list[str], repeats: int, seed: int, processes: bool = False) -> None:
    logging.getLogger("privfed").setLevel(logging.ERROR)
    print(uptime())
    print(f"# {repeats} repeats per arm, interleaved; wall times (query: GetModel answered -> first Predict)")
    print(HEADER)
    tmp = Path(tempfile.mkdtemp(prefix="timing-paths-"))
    shm = Path(tempfile.mkdtemp(prefix="timing-paths-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        cases: dict[str, tuple[Callable[[], None], Callable[[], dict[str, Arm]]]] = {
            "secure_sum/ring": (lambda: None, ring_arms),
            "secure_sum/pairwise": (lambda: None, lambda: pairwise_arms(repeats)),
            "ledger/debit": (lambda: None, debit_arms),
            "ledger/first-debit": (lambda: None, lambda: first_debit_arms(shm)),
            "ledger/policy-answer": (lambda: None, policy_arms),
        }
        if any(p.startswith("query") or "query".startswith(p) for p in prefixes):
            for name, (setup, arms) in query_cases(tmp, processes).items():
                cases[name] = (setup, lambda arms=arms: arms)  # type: ignore[misc]
        rng = np.random.default_rng(seed)
        for name, (setup, build) in cases.items():
            if not any(name.startswith(p) for p in prefixes):
                continue
            setup()
            arms = build()
            for warm in arms.values():
                warm(-1)
            times = interleaved(arms, repeats, rng)
            base, *others = arms
            for other in others:
                print(pair_line(name, f"{base} vs {other}", times[base], times[other]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    print(uptime())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="timings per arm (default 200)")
    parser.add_argument("--quick", action="store_true", help="20 repeats: a smoke run")
    parser.add_argument("--cases", default="query,secure_sum,ledger", help="comma-separated case name prefixes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", action="store_true", help="each query in a privfed query process (~1 s each)")
    args = parser.parse_args()
    if args.repeats < 4:
        parser.error("--repeats must be at least 4")
    run([p for p in args.cases.split(",") if p], 20 if args.quick else args.repeats, args.seed, args.processes)


if __name__ == "__main__":
    main()
