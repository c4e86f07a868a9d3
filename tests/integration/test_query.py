"""Private prediction end to end (issues 4 and 9): `privfed query` as a real process against models
a real federation trained (owner processes, mTLS), served by the coordinator.

What is checked, on what the coordinator actually received (the served models are wrapped in a
subclass that keeps every batch of rows ``Predict`` hands them):

* ``--utility-loss 0`` keeps the desired labels, for every method: the tool's labels equal the
  model's labels for the raw rows, and ``A_dᵀ(x − x̃)`` is zero up to the 2^-20 wire grid (LR and
  FedDPDR).
* the default ``projection`` sends nothing outside what the model reads (``x̃ − c`` lies in
  ``span(A_d)`` up to the grid, ``c`` the public centre) and reads no training file.
* the null-space methods (opt-in, ``--allow-confidential-map-leak``) hide the confidential
  labels from the owner's own least-squares predictor ``A_c``: its guess is the same for every
  received row (``A_cᵀ(x̃ − c) = 0`` up to the grid), while on the raw rows it is clearly better
  than the mean (so the check can fail), and ``e_privacy > 0`` for every row.
* a positive budget is spent exactly: ``e_utility = ε`` per row around the public centre,
  measured on the received rows.
* the model's stage is checked before anything is sent (issue 9 item 5): a stage reading more
  directions than ``--max-rank`` (a FedDPDR model with k = 5 against the default 1; an LR model
  whose stage is the identity) is a one-line error, exit 2, and no row reaches the model.
* wire capture (``--insecure`` through a recording proxy): neither a raw query value nor a
  confidential label crosses the wire; a leaky variant of the tool (cleaner bypassed, labels sent)
  is caught by the same search. The needles: each raw value as test_wire_capture encodes it,
  each raw row whole (int64 grid indices as ``Predict`` would carry it, float64, float32), each
  confidential label column whole (see ``label_needles``), and the entries of ``A_c``. The
  positive control is caught by the whole-row grid needles (50 of 50 rows) and the label-column
  needle; the per-value float needles alone would miss it, since rows travel as grid indices.
  Chance 4-byte float32 matches: ~10^3 needles in ~10^4 captured bytes, expected ~2e-3 per run;
  models trained at ε = ∞ and fixed queries make every run send the same bytes.

Query rows are test rows that lie inside the public bounds: both models apply their own public
preprocessing (LR clips to the bounds), so the label-preservation identity is about in-bounds rows
(owner/query.py, "No clipping"). The models are trained at ε = ∞ so every run is deterministic.
"""

import dataclasses
import math
import socket
import subprocess
import sys

import numpy as np
import pytest
from fedharness import Federation
from test_wire_capture import needles

from privfed.common.bounds import Bounds
from privfed.common.learners.logistic import LinearModel
from privfed.common.nullspace import fit_linear_map
from privfed.deploy.certs import make_certs
from privfed.deploy.tcpproxy import RecordingProxy
from privfed.owner.data import build_owners, federation_split
from privfed.owner.query_cleaning import DEFAULT_SCORE_BITS, public_centre
from privfed.proto.serde import GRID_BITS
from privfed.server.app import CoordinatorServer
from privfed.server.models import model_linear_stage
from privfed.server.strategies import make_strategy

pytestmark = pytest.mark.slow

N_SAMPLES, SEED, N_QUERIES, K = 2000, 3, 50, 5
DATASET = ["--dataset", "synthetic", "--n-samples", str(N_SAMPLES), "--seed", str(SEED), "--test-fraction", "0.25"]
GRID_STEP = 2.0**-GRID_BITS


def recording(model):
    """The same model as an instance of a subclass that keeps every batch of rows it predicts.

    A real subclass (not a mock): ``model_linear_stage``'s isinstance checks and the model's own
    ``predict`` run unchanged."""
    base = type(model)

    class Recording(base):
        def predict(self, X):
            self.received.append(np.array(X, dtype=np.float64))
            return base.predict(self, X)

    rec = Recording.__new__(Recording)
    rec.__dict__.update(model.__dict__)
    object.__setattr__(rec, "received", [])
    return rec


@dataclasses.dataclass
class Served:
    fed: Federation
    insecure: CoordinatorServer
    models: dict  # served (recording) models
    trained: dict  # the same models as trained, for reference predictions
    queries: np.ndarray  # (N_QUERIES, F) raw query rows
    conf_queries: np.ndarray  # their confidential labels (known to the test only)
    X_own: np.ndarray  # owner-0's rows and confidential labels, as in train.csv
    conf_own: np.ndarray
    bounds: object
    files: dict


def confidential_labels(X, mu, W):
    """Labels an adversary would want: signs of random linear functions of the features."""
    return ((X - mu) @ W > 0).astype(np.int64)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("query")
    train, test = federation_split("synthetic", seed=SEED, test_fraction=0.25, n_samples=N_SAMPLES)
    own = build_owners(
        train, node_id="owner-0", n_owners=2, shards=range(0, 1), seed=SEED, rng_kind="seeded", rng_seed=SEED
    )[0]
    rng = np.random.Generator(np.random.PCG64(404))
    W = rng.standard_normal((train.d, 2))
    mu = train.X.mean(axis=0)
    conf_own = confidential_labels(own.X, mu, W)
    inside = np.flatnonzero(np.all(np.abs(test.X) < test.bounds.hi, axis=1))
    pick = np.sort(rng.choice(inside, N_QUERIES, replace=False))
    queries, conf_queries = test.X[pick], confidential_labels(test.X[pick], mu, W)
    files = {"train": tmp / "train.csv", "queries": tmp / "queries.csv"}
    # train.csv: F features, then the desired label and two confidential labels (columns 1, 2).
    np.savetxt(files["train"], np.column_stack([own.X, own.y, conf_own]), delimiter=",", fmt="%.17g")
    # queries.csv: the F features only (without --schema a label column is refused: the model says which
    # columns are features; tests/adversary/test_query_columns_attack.py reads labels past under --schema).
    np.savetxt(
        files["queries"],
        queries,
        delimiter=",",
        fmt="%.17g",
        header=",".join(f"f{j}" for j in range(train.d)),
        comments="",
    )

    fed = Federation(tmp)
    insecure = CoordinatorServer(tls=None)
    insecure.start("127.0.0.1:0")
    try:
        for i in range(2):
            fed.spawn(
                f"owner-{i}",
                n_owners=2,
                shards=f"{i}:{i + 1}",
                budget=math.inf,
                dataset=DATASET,
                extra=["--delta-budget", "2e-5"],  # two feddpdr jobs at delta 1e-5
            )
        lr = fed.run(
            make_strategy(
                "lr", solver="local", mechanism="pm", epsilon=math.inf, n_classes=2, bounds=test.bounds, param_bound=8.0
            ),
            2,
        )
        dpdr = fed.run(
            make_strategy("feddpdr", epsilon=math.inf, n_classes=2, bounds=test.bounds, k=K, scaling="ball"), 2
        )
        # the "box" row scaling (each feature by its own half-range): affine too, its own linear stage
        box = fed.run(
            make_strategy("feddpdr", epsilon=math.inf, n_classes=2, bounds=test.bounds, k=K, scaling="box"), 2
        )
        assert lr.answered == 2 and dpdr.answered == 2 and box.answered == 2
        # a hostile stage: an "lr" model with one class per feature reads every direction (A_d ∝ I)
        eye = LinearModel(np.eye(train.d), np.zeros(train.d), test.bounds, list(range(train.d)))
        # a stage of rank 1 but bounds whose midpoint (the centre) the 2^-20 wire grid cannot carry
        far = Bounds(test.bounds.lo + 2.0**43, test.bounds.hi + 2.0**43)
        far_lr = LinearModel(lr.model.coef_, lr.model.intercept_, far, lr.model.classes)
        models = {
            "lr": recording(lr.model),
            "dpdr": recording(dpdr.model),
            "dpdr-box": recording(box.model),
            "eye": recording(eye),
            "far": recording(far_lr),
        }
        for model_id, model in models.items():
            fed.server.models.put(model_id, model)
            insecure.models.put(model_id, model)
        trained = {"lr": lr.model, "dpdr": dpdr.model, "dpdr-box": box.model}
        yield Served(fed, insecure, models, trained, queries, conf_queries, own.X, conf_own, test.bounds, files)
    finally:
        insecure.stop(0)
        fed.close()


MAP_METHODS = ("subspace", "generalized")
MAX_RANK = {"dpdr": ["--max-rank", str(K)], "dpdr-box": ["--max-rank", str(K)]}


def query_cmd(
    port,
    model_id,
    files,
    *,
    certs=None,
    epsilon=0.0,
    method="projection",
    extra=(),
    module=("-m", "privfed.deploy.cli"),
):
    cmd = [
        sys.executable,
        *module,
        "query",
        "--coordinator",
        f"127.0.0.1:{port}",
        "--model-id",
        model_id,
        "--queries",
        str(files["queries"]),
        "--utility-loss",
        repr(epsilon),
        "--method",
        method,
        *MAX_RANK.get(model_id, []),
    ]
    if method in MAP_METHODS:
        cmd += ["--train-data", str(files["train"]), "--confidential-labels", "1,2", "--allow-confidential-map-leak"]
    cmd += list(extra)
    return cmd + (["--insecure"] if certs is None else ["--certs", str(certs), "--name", "owner-0"])


def run(cmd, *, check=True):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def received(served, model_id):
    rows = np.concatenate(served.models[model_id].received)
    served.models[model_id].received.clear()
    return rows


def grid_slack(A):
    """Largest change of a linear score from rounding a row to the wire grid (±half a step)."""
    return float(np.max(np.sum(np.abs(A), axis=0))) * GRID_STEP / 2 + 1e-12


def score_slack(A, bounds):
    """Largest change of a score the model reads: half a step of its public grid (``--score-bits``,
    owner/query_cleaning.py "Digits": 2^K steps of its range over the bounds), then the wire grid's."""
    half = 0.5 * np.abs(A).T @ (bounds.hi - bounds.lo)
    return float(np.max(half)) / 2**DEFAULT_SCORE_BITS + grid_slack(A)


def assert_complete_privacy(served, rows):
    """The owner's A_c guesses the same for every received row (ε = 0); on the raw rows it does better
    than the mean."""
    A_c = fit_linear_map(served.X_own, served.conf_own)
    x_bar, y_bar = served.X_own.mean(axis=0), served.conf_own.mean(axis=0)
    centre = public_centre(served.bounds)
    y = served.conf_queries

    def mse(pred):
        return np.mean((pred - y) ** 2, axis=0)

    from_mean = mse(np.broadcast_to(y_bar, y.shape))
    from_raw = mse(y_bar + (served.queries - x_bar) @ A_c)
    assert np.all(from_raw < 0.6 * from_mean), (from_raw, from_mean)  # the attack works on raw rows
    assert np.mean(((y_bar + (served.queries - x_bar) @ A_c) > 0.5) == y) >= 0.85
    # With m_d + m_c ≤ F and maps in general position every γ is 0 or ∞ (common/nullspace/cleaner.py), so what
    # survives cleaning is invisible to A_c: its guess from a received row is one constant, the
    # guess from the public centre, up to the wire grid. This also pins the centring at c.
    assert np.max(np.abs((rows - centre) @ A_c)) <= grid_slack(A_c)
    e_privacy = np.sum(((served.queries - rows) @ A_c) ** 2, axis=1)
    assert np.all(e_privacy > 1e-3), e_privacy.min()


def assert_labels_kept(served, model_id, proc, rows):
    model = served.trained[model_id]
    labels = np.array(proc.stdout.split(), dtype=np.int64)
    assert rows.shape == served.queries.shape
    assert np.all(np.any(np.abs(rows - served.queries) > 1e-3, axis=1)), "every row was changed"
    _, A_d = model_linear_stage(model)
    assert np.max(np.abs((served.queries - rows) @ A_d)) <= score_slack(A_d, served.bounds)
    assert labels.tolist() == model.predict(served.queries).tolist()
    assert f"cleaned {N_QUERIES} of {N_QUERIES} query row(s)" in proc.stderr
    return A_d


@pytest.mark.parametrize("model_id", ["lr", "dpdr", "dpdr-box"])
def test_projection_keeps_labels_and_sends_only_what_the_model_reads(served, model_id):
    """The default: no training file is read, and x̃ − c lies in span(A_d) up to the wire grid."""
    proc = run(query_cmd(served.fed.port, model_id, served.files, certs=served.fed.certs))
    rows = received(served, model_id)
    A_d = assert_labels_kept(served, model_id, proc, rows)
    _, sv, Vt = np.linalg.svd(A_d.T)
    ignored = Vt[np.linalg.matrix_rank(A_d) :].T  # directions the model does not read
    assert np.max(np.abs((rows - public_centre(served.bounds)) @ ignored)) <= GRID_STEP * math.sqrt(A_d.shape[0])


@pytest.mark.parametrize("model_id", ["lr", "dpdr", "dpdr-box"])
def test_exact_null_space_keeps_labels_and_hides_confidential_ones(served, model_id):
    proc = run(query_cmd(served.fed.port, model_id, served.files, certs=served.fed.certs, method="subspace"))
    rows = received(served, model_id)
    assert_labels_kept(served, model_id, proc, rows)
    assert_complete_privacy(served, rows)


@pytest.mark.parametrize("method", ["projection", *MAP_METHODS])
def test_positive_budget_is_spent_exactly(served, tmp_path, method):
    eps = 0.05
    out = tmp_path / "labels.csv"
    run(
        query_cmd(
            served.fed.port,
            "lr",
            served.files,
            certs=served.fed.certs,
            epsilon=eps,
            method=method,
            extra=["--out", str(out)],
        )
    )
    rows = received(served, "lr")
    model = served.trained["lr"]
    _, A_d = model_linear_stage(model)
    centre = public_centre(served.bounds)
    s_total = np.sum(((served.queries - centre) @ A_d) ** 2, axis=1)
    assert np.count_nonzero(s_total > eps) >= 0.9 * N_QUERIES, "most rows have more desired signal than ε"
    e_utility = np.sum(((served.queries - rows) @ A_d) ** 2, axis=1)
    expected = np.minimum(s_total, eps)  # a row whose whole signal is below ε is cleaned to c
    slack = 2 * math.sqrt(eps) * score_slack(A_d, served.bounds) + score_slack(A_d, served.bounds) ** 2
    assert np.max(np.abs(e_utility - expected)) <= slack
    assert out.read_text().splitlines()[0] == "label"
    written = np.loadtxt(out, skiprows=1, dtype=np.int64)
    assert written.tolist() == model.predict(rows).tolist()


# ---------------------------------------------------------------------------- wire capture
def grid_row(row):
    return np.rint(row * 2.0**GRID_BITS).astype("<i8").tobytes()


def row_needles(Q):
    """Whole raw rows as a ``Predict`` would carry them (int64 grid indices, ``Reports``) and as
    float64/float32 arrays. Single grid indices are not needles: a cleaned value lands on a raw
    value's grid point with probability ~1e-7, and there are ~10^6 (raw, cleaned) pairs."""
    return [
        enc(r)
        for r in Q
        for enc in (grid_row, lambda r: r.astype("<f8").tobytes(), lambda r: r.astype("<f4").tobytes())
    ]


def label_needles(Y, *, one_byte: bool):
    """Each confidential label column as a whole, in every encoding it would take if sent: float64,
    int64, int32, int64 grid indices (``Reports``), decimal text, and (``one_byte``) one byte per
    label (protobuf packed varints of 0/1). A single label is no needle: 0 and 1 as int64 or
    float64 are runs of zero bytes with at most one set byte, found in any capture. One-byte
    encodings are used only for the owner's long training columns: the query rows' 50-label
    columns could match the 50 one-byte labels of the PredictResponse by chance correlation."""
    out = []
    for col in np.asarray(Y).T:
        out += [
            col.astype("<f8").tobytes(),
            col.astype("<i8").tobytes(),
            col.astype("<i4").tobytes(),
            grid_row(col.astype(np.float64)),
            ",".join(map(str, col)).encode(),
            "\n".join(map(str, col)).encode(),
        ]
        if one_byte:
            out.append(col.astype("u1").tobytes())
    return out


def secrets_needles(served):
    A_c = fit_linear_map(served.X_own, served.conf_own)
    return {
        "raw query values": needles(served.queries, served.bounds),
        "raw query rows": row_needles(served.queries),
        "confidential labels": label_needles(served.conf_own, one_byte=True)
        + label_needles(served.conf_queries, one_byte=False),
        "A_c": [np.float64(v).tobytes() for v in A_c.ravel()],
    }


def capture(served, model_id, *, method="projection", module=("-m", "privfed.deploy.cli")):
    proxy = RecordingProxy("127.0.0.1", served.insecure.port).start()
    try:
        proc = run(query_cmd(proxy.port, model_id, served.files, method=method, module=module), check=False)
    finally:
        proxy.stop()
    served.models[model_id].received.clear()
    return proc, proxy.captured


def hits(captured, served):
    return {what: sum(n in captured for n in found) for what, found in secrets_needles(served).items()}


@pytest.mark.parametrize("method", ["projection", "subspace"])
@pytest.mark.parametrize("model_id", ["lr", "dpdr"])
def test_no_raw_query_or_confidential_label_on_the_wire(served, model_id, method):
    proc, captured = capture(served, model_id, method=method)
    assert proc.returncode == 0, proc.stderr
    assert len(captured) > N_QUERIES * served.queries.shape[1] * 8, "the proxy recorded the cleaned rows"
    assert hits(captured, served) == {"raw query values": 0, "raw query rows": 0, "confidential labels": 0, "A_c": 0}


LEAKY = """
import dataclasses, sys
import grpc
import numpy as np
from privfed.deploy import cli
from privfed.owner import query, query_client
from privfed.proto import privfed_pb2 as pb, serde

honest_clean, honest_predict, honest_read, kept = (
    query.clean_queries, query_client.ModelClient.predict, query.read_training, {}
)

def read_and_keep(path, own_schema, **kw):  # the training table as read: its last two columns, the confidential labels
    table = honest_read(path, own_schema, **kw)
    kept["labels"] = table[:, -2:]
    return table

def clean_nothing(queries, A_d, X_own=None, Y_conf=None, **kw):  # bug 1: the raw rows go out
    return dataclasses.replace(honest_clean(queries, A_d, X_own, Y_conf, **kw), rows=np.asarray(queries, float))

def predict_and_leak(self, model_id, rows, **kw):  # bug 2: a confidential label column sent as rows
    out = honest_predict(self, model_id, rows, **kw)
    try:
        self._stub.Predict(pb.PredictRequest(model_id=model_id, rows=serde.reports_to_proto(kept["labels"][:, :1])),
                           timeout=10)
    except grpc.RpcError:
        pass
    return out

query.clean_queries, query_client.ModelClient.predict, query.read_training = clean_nothing, predict_and_leak, read_and_keep
sys.exit(cli.main(sys.argv[1:]))
"""


def test_positive_control_a_leaky_tool_is_caught(served):
    proc, captured = capture(served, "lr", method="subspace", module=("-c", LEAKY))
    assert proc.returncode == 0, proc.stderr
    found = hits(captured, served)
    assert found["raw query rows"] >= N_QUERIES, found  # every raw row, as grid indices
    assert found["confidential labels"] >= 1, found  # the leaked column


# ---------------------------------------------------------------------------- errors
def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_errors_are_one_line_messages(served, tmp_path):
    port, files, certs = served.fed.port, served.files, served.fed.certs
    cases = [
        (query_cmd(port, "nope", files, certs=certs), "GetModel: the coordinator refused: no model 'nope'"),
        (
            query_cmd(port, "lr", files, certs=certs, method="subspace", extra=["--confidential-labels", "3"]),
            "valid indices 0..2",
        ),
        (query_cmd(port, "eye", files, certs=certs), f"'eye' ('lr') reads {served.bounds.d} direction(s) of each row"),
        (
            query_cmd(port, "eye", files, certs=certs, extra=["--max-rank", "3"]),
            f"reads {served.bounds.d} direction(s) of each row (a linear stage of {served.bounds.d} column(s), rank "
            f"{served.bounds.d}), more than --max-rank 3; nothing sent. Pass --max-rank {served.bounds.d} only if",
        ),
        (
            query_cmd(port, "dpdr", files, certs=certs, extra=["--max-rank", "1"]),
            f"'dpdr' ('feddpdr') reads {K} direction(s) of each row (a linear stage of {K} column(s), rank {K})",
        ),
        (
            query_cmd(port, "dpdr", files, certs=certs, extra=["--max-rank", str(K - 1)]),
            f"rank {K}), more than --max-rank {K - 1}; nothing sent. Pass --max-rank {K} only if",
        ),
        (query_cmd(port, "far", files, certs=certs), "below 2^42 in magnitude to go on the wire"),
        (query_cmd(port, "lr", {**files, "queries": tmp_path / "missing.csv"}, certs=certs), "file not found"),
        (query_cmd(free_port(), "lr", files, certs=certs), "unreachable"),
        # another federation's CA: the cause in one line, as privfed owner says it (walkthrough 14, W14-6: the
        # handshake's raw text, "unreachable ... SSL_ERROR_SSL ...", while the coordinator ran)
        (query_cmd(port, "lr", files, certs=make_certs(tmp_path / "rogue", owners=1)), "not signed by this node's CA"),
    ]
    for cmd, message in cases:
        proc = run(cmd, check=False)
        assert proc.returncode == 2, proc.stderr
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("privfed query: error: ") and message in last, proc.stderr
    assert all(m.received == [] for m in served.models.values()), "nothing was predicted"
