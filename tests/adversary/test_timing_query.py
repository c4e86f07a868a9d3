"""``privfed query`` does the same work between ``GetModel`` and ``Predict`` whatever the owner's files hold
(owner/query.py, "Timing").

A coordinator times the gap between its ``GetModel`` answer and the first ``Predict``. The query file was
read in that gap (a missing cell, which the schema fills, took ~3x as long; shorter numbers less), and the
null-space methods fitted ``A_c`` on every training row in it (10x the rows: ~5x the gap);
``bench/timing_paths.py`` told both apart from one timing at 0.94-0.97 accuracy.

Checked without clocks, over real sockets (the hostile coordinator, ``privfed query``'s own code in this
process): in the gap no file is opened, and the calls that do the work there (with the shapes of their
arrays) are the same for owners whose files differ in what the coordinator must not learn. Positive
controls: the old order (the file read after ``GetModel``; ``A_c`` fitted on the rows) is caught.
"""

from __future__ import annotations

import builtins
import functools
import io
import pathlib

import numpy as np
import pytest
from hostile import matrix, pb, tls_files

from privfed.common import nullspace
from privfed.common.schema import FederationSchema, RawTable
from privfed.owner import query, query_client, query_files
from privfed.owner.query import QueryConfig, run_query

F, N_QUERIES, N_TRAIN, BOUND = 4, 30, 40, 4.0
FEATURES = tuple(f"f{i}" for i in range(F))
SCHEMA = FederationSchema(
    FEATURES, (-BOUND,) * F, (BOUND,) * F, (0, 1), header=True, fill=tuple((f, 0.0) for f in FEATURES)
)
PLAIN = FederationSchema(FEATURES, (-BOUND,) * F, (BOUND,) * F, (0, 1), header=True)  # a coordinator's may not fill


def _csv(path, table, *, digits=17, header=False, missing=False):
    lines = [",".join(FEATURES)] if header else []
    for i, row in enumerate(table):
        cells = [f"{v:.{digits}g}" for v in row]
        if missing and i == 3:
            cells[1] = "NA"  # the schema fills it
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def files(tmp_path):
    rng = np.random.Generator(np.random.PCG64(11))
    queries = np.clip(rng.normal(size=(N_QUERIES, F)), -BOUND, BOUND)
    X = np.clip(rng.normal(size=(10 * N_TRAIN, F)), -BOUND, BOUND)
    labels = np.column_stack([X @ np.array([1.0, -2.0, 0.5, 0.0]) > 0, rng.integers(0, 2, len(X))])
    (tmp_path / "schema.json").write_text(SCHEMA.to_json())
    return {
        "17-digit": _csv(tmp_path / "q17.csv", queries),
        "3-digit": _csv(tmp_path / "q3.csv", queries, digits=3),
        "named": _csv(tmp_path / "h.csv", queries, header=True),
        "named-3-digit": _csv(tmp_path / "h3.csv", queries, header=True, digits=3),
        "named-missing": _csv(tmp_path / "hm.csv", queries, header=True, missing=True),
        "train": _csv(tmp_path / "t.csv", np.column_stack([X[:N_TRAIN], labels[:N_TRAIN]])),
        "train-10x": _csv(tmp_path / "t10.csv", np.column_stack([X, labels])),
        "schema": tmp_path / "schema.json",
    }


def _serve(coordinator, schema: FederationSchema | None) -> None:
    A_d = np.array([[1.0], [0.5], [-1.0], [0.25]])
    coordinator.model = pb.GetModelResponse(
        model_id="m",
        kind="lr",
        bounds=matrix(np.stack([np.full(F, -BOUND), np.full(F, BOUND)])),
        linear_stage=matrix(A_d),
        schema="" if schema is None else schema.to_json(),
    )


def _sizes(args) -> tuple:
    """What a call works on: its arrays' shapes, and the length of the text a schema reads."""
    return tuple(
        np.shape(a) if isinstance(a, np.ndarray) else sum(map(len, a.lines))
        for a in args
        if isinstance(a, np.ndarray | RawTable)
    )


@pytest.fixture
def gap(monkeypatch):
    """``gap(run)`` runs ``run()`` and returns what ``privfed query`` did between ``GetModel``'s answer and
    ``Predict``: files opened, and the working calls with their arrays' shapes."""
    state = {"open": False, "trace": []}

    def spy(owner, name, record):
        real = getattr(owner, name)

        @functools.wraps(real)
        def wrapper(*args, **kwargs):
            if state["open"]:
                state["trace"].append(record(name, args))
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    def opened(name, args):
        return ("file", name)

    def worked(name, args):
        return (name, _sizes(args))

    for owner, name in ((builtins, "open"), (io, "open"), (pathlib.Path, "open"), (pathlib.Path, "read_bytes")):
        spy(owner, name, opened)
    for owner, name in (
        (query, "confidential_columns"),
        (query, "clean_queries"),
        (query_files, "split_features"),
        (nullspace, "fit_linear_map"),
        (FederationSchema, "load"),
    ):
        spy(owner, name, worked)
    get_model, predict = query_client.ModelClient.get_model, query_client.ModelClient.predict

    def answered(self, *args, **kwargs):
        reply = get_model(self, *args, **kwargs)
        state["open"] = True
        return reply

    def asked(self, *args, **kwargs):
        state["open"] = False
        return predict(self, *args, **kwargs)

    monkeypatch.setattr(query_client.ModelClient, "get_model", answered)
    monkeypatch.setattr(query_client.ModelClient, "predict", asked)

    def run(go):
        state["trace"] = []
        go()
        assert not state["open"], "no Predict was sent"
        return state["trace"]

    return run


def _query(coordinator, certs, tmp_path, queries, **flags):
    config = QueryConfig(  # the same --out for every run of the arms: --force (W11-8: never over a file without it)
        coordinator=f"127.0.0.1:{coordinator.port}", model_id="m", queries=queries, out=tmp_path / "out.csv",
        force=True, **flags,
    )  # fmt: skip
    return lambda: run_query(config, tls_files(certs, "owner-0"))


SUBSPACE = {"method": "subspace", "allow_confidential_map_leak": True}


@pytest.mark.parametrize(
    "schema, arms",
    [
        (None, [("17-digit", {}), ("3-digit", {})]),
        (SCHEMA, [("named", {"schema": "schema"}), ("named-missing", {"schema": "schema"})]),
        (PLAIN, [("named", {}), ("named-3-digit", {})]),
        (
            None,
            [
                ("17-digit", {"train_data": "train", "confidential_labels": (0,), **SUBSPACE}),
                ("17-digit", {"train_data": "train-10x", "confidential_labels": (0,), **SUBSPACE}),
                ("17-digit", {"train_data": "train", "confidential_labels": (1,), **SUBSPACE}),
            ],
        ),
    ],
    ids=["digits", "own-schema-missing-cell", "their-schema-digits", "subspace-rows-and-label"],
)
def test_the_gap_reads_no_file_and_does_the_same_work_whatever_the_files_hold(
    coordinator, certs, tmp_path, files, gap, schema, arms
):
    _serve(coordinator, schema)
    traces = []
    for queries, flags in arms:
        paths = {k: files[v] if k in ("train_data", "schema") else v for k, v in flags.items()}
        traces.append(gap(_query(coordinator, certs, tmp_path, files[queries], **paths)))
    assert all(trace == traces[0] for trace in traces), traces
    assert not [t for t in traces[0] if t[0] == "file"], traces[0]
    assert any(t[0] == "clean_queries" for t in traces[0])  # the spy saw the gap's work
    assert len(coordinator.predicts) == len(arms)


def test_positive_control_a_fit_on_the_training_rows_in_the_gap_is_caught(
    coordinator, certs, tmp_path, files, gap, monkeypatch
):
    """Without the moments (``A_c`` fitted on the rows themselves, as before), the gap's work differs with
    the training row count."""
    monkeypatch.setattr(query, "moment_rows", lambda table: table)
    _serve(coordinator, None)
    small, large = (
        gap(_query(coordinator, certs, tmp_path, files["17-digit"], train_data=files[t], confidential_labels=(0,),
                   **SUBSPACE))
        for t in ("train", "train-10x")
    )  # fmt: skip
    assert small != large


def test_positive_control_a_query_file_read_in_the_gap_is_caught(coordinator, certs, tmp_path, files, gap, monkeypatch):
    """Reading the query file after ``GetModel`` (as before) opens a file in the gap."""
    read_later = query_files.query_rows

    def query_rows(file, schema, n_features, *, pinned=False):
        return read_later(query_files.read_queries(file.path, None), schema, n_features, pinned=pinned)

    monkeypatch.setattr(query, "query_rows", query_rows)
    _serve(coordinator, None)
    trace = gap(_query(coordinator, certs, tmp_path, files["17-digit"]))
    assert ("file", "read_bytes") in trace or ("file", "open") in trace, trace


def test_positive_control_a_schema_reading_the_owners_own_text_in_the_gap_is_caught(
    coordinator, certs, tmp_path, files, gap, monkeypatch
):
    """Without ``--schema`` the model's schema (one without fill values: owner/query_files.py, "Columns") reads
    the file after ``GetModel``: the text it reads is the numbers in one width. The owner's own text, as
    before, is longer with more digits; with ``--schema`` nothing is read in the gap."""
    (tmp_path / "plain.json").write_text(PLAIN.to_json())
    _serve(coordinator, PLAIN)
    own = gap(_query(coordinator, certs, tmp_path, files["named"], schema=tmp_path / "plain.json"))
    assert not [t for t in own if t[0] == "load"]
    monkeypatch.setattr(query_files, "_fixed_width", lambda raw, numeric: raw)
    long, short = (gap(_query(coordinator, certs, tmp_path, files[name])) for name in ("named", "named-3-digit"))
    assert [t for t in long if t[0] == "load"] and long != short
