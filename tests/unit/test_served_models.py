"""Served models a user can use (issue 24): every task's model.json reloads with its id, label values
and schema; Predict and GetModel carry label values and probabilities over real gRPC;
``--load-model`` serves under the training id with no training flags; ``privfed export`` writes a
scikit-learn classifier that predicts label values from raw rows without any network code."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from privfed.common.dataset_files import read_table
from privfed.common.learners.exported import TrainedClassifier
from privfed.common.learners.trained import probabilities
from privfed.common.schema import FederationSchema
from privfed.deploy.cli import main
from privfed.deploy.reference import even_parts, reference_model
from privfed.proto import privfed_pb2 as pb
from privfed.proto import privfed_pb2_grpc as pb_grpc
from privfed.proto import serde
from privfed.server.app import CoordinatorServer
from privfed.server.config import JobConfig
from privfed.server.models import load_model, save_model

sys.path.insert(0, str(Path(__file__).parents[1]))
from served_model import served_model  # noqa: E402

SCHEMA = """features = ["size", "colour", "weight"]
classes = ["pear", "apple", "plum"]
label = "fruit"
[bounds]
lo = [0, 0]
hi = [10, 5]
[categories]
colour = ["green", "red"]
[fill]
weight = 2.5
"""
CENTRES = {"pear": (7.0, 3.5), "apple": (5.0, 2.0), "plum": (2.0, 1.0)}
COLOUR = {"pear": "green", "apple": "red", "plum": "red"}


@pytest.fixture(scope="module")
def fruit(tmp_path_factory):
    """A file of 300 rows (text labels, a categorical column), its schema and data set."""
    tmp = tmp_path_factory.mktemp("fruit")
    rng = np.random.default_rng(7)
    labels = rng.choice(list(CENTRES), size=300)
    lines = ["fruit,weight,colour,size"]
    for label in labels:
        size, weight = np.array(CENTRES[label]) + rng.normal(0, 0.6, 2)
        colour = COLOUR[label] if rng.random() < 0.8 else rng.choice(["green", "red"])
        lines.append(f"{label},{weight:.3f},{colour},{size:.3f}")
    (tmp / "fruit.csv").write_text("\n".join(lines) + "\n")
    schema = FederationSchema.parse(SCHEMA)
    return tmp, schema, schema.dataset(read_table(tmp / "fruit.csv"))


@pytest.mark.parametrize("task", ["ncc", "lr", "feddpdr", "bdt", "nb"])
def test_every_task_writes_a_model_json_that_reloads_with_its_id_and_label_values(fruit, task, tmp_path):
    _, schema, ds = fruit
    job = JobConfig.from_flat(
        task=task, epsilon=1.0, owners=30, **{"feddpdr": {"k": 2}, "bdt": {"n_rounds": 3}}.get(task, {})
    )
    model = reference_model(job, ds, even_parts(ds.n, 30, 0))
    path = save_model(tmp_path / "model.json", model, model_id=f"{task}-eps1", task=task, schema=schema)
    doc = json.loads(path.read_text())
    assert (doc["model_id"], doc["task"], doc["classes"]) == (f"{task}-eps1", task, ["pear", "apple", "plum"])
    loaded = load_model(path)
    assert loaded.model_id == f"{task}-eps1" and loaded.schema == schema
    np.testing.assert_array_equal(loaded.model.predict(ds.X), model.predict(ds.X))
    proba = probabilities(loaded.model, ds.X)
    if task == "feddpdr":
        assert proba is None  # its scores are not probabilities
    else:
        assert proba.shape == (ds.n, 3) and np.allclose(proba.sum(axis=1), 1.0)
        assert np.array_equal(np.argmax(proba, axis=1), np.asarray(model.predict(ds.X)))


def test_predict_and_get_model_carry_label_values_probabilities_and_the_schema(fruit):
    _, schema, ds = fruit
    lr = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    dpdr = reference_model(JobConfig.from_flat(task="feddpdr", epsilon=1.0, owners=1, k=2), ds, even_parts(ds.n, 1, 0))
    server = CoordinatorServer(tls=None)
    server.models.put("lr-eps1", lr, schema=schema)
    server.models.put("dpdr", dpdr, schema=schema)
    port = server.start("127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.CoordinatorStub(channel)
            described = stub.GetModel(pb.GetModelRequest(model_id="lr-eps1"), timeout=10)
            assert list(described.classes) == ["pear", "apple", "plum"] and described.probabilities
            assert FederationSchema.parse(described.schema) == schema
            rows = serde.reports_to_proto(ds.X[:20])
            reply = stub.Predict(pb.PredictRequest(model_id="lr-eps1", rows=rows, probabilities=True), timeout=10)
            expected = [schema.classes[i] for i in lr.predict(ds.X[:20])]
            assert list(reply.label_values) == expected and list(reply.labels) == lr.predict(ds.X[:20]).tolist()
            proba = serde.matrix_from_proto(reply.probabilities)
            assert proba.shape == (20, 3) and np.array_equal(np.argmax(proba, axis=1), reply.labels)
            plain = stub.Predict(pb.PredictRequest(model_id="lr-eps1", rows=rows), timeout=10)
            assert list(plain.label_values) == expected and not plain.HasField("probabilities")
            assert not stub.GetModel(pb.GetModelRequest(model_id="dpdr"), timeout=10).probabilities
            with pytest.raises(grpc.RpcError) as info:
                stub.Predict(pb.PredictRequest(model_id="dpdr", rows=rows, probabilities=True), timeout=10)
            assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "has no class probabilities" in info.value.details()
    finally:
        server.stop(0)


def test_the_exported_classifier_reads_raw_rows_and_needs_no_network_code(fruit, tmp_path, capsys):
    import pandas as pd
    from sklearn.base import clone

    tmp, schema, ds = fruit
    model = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    path = save_model(tmp_path / "model.json", model, model_id="lr-eps1", task="lr", schema=schema)
    clf = TrainedClassifier.from_file(str(path))
    raw = pd.read_csv(tmp / "fruit.csv")
    labels = clf.predict(raw.drop(columns="fruit"))  # columns in the file's order, colour as text
    assert labels.tolist() == [schema.classes[i] for i in model.predict(ds.X)]
    assert clf.score(raw[["colour", "size", "weight"]], raw["fruit"]) == pytest.approx(
        float(np.mean(labels == raw["fruit"].to_numpy()))
    )
    assert clf.predict(ds.X[:5]).tolist() == labels[:5].tolist()  # the model's own columns work too
    gap = raw.drop(columns="fruit").head(2).assign(weight=[None, None])  # missing: the schema's fill
    assert clf.predict(gap).shape == (2,)
    assert clone(clf).fit().predict(ds.X[:3]).tolist() == labels[:3].tolist()  # sklearn's contract
    out = tmp_path / "model.pkl"
    assert main(["export", "--model", str(path), "--out", str(out)]) == 0
    assert "as a scikit-learn classifier (predict, predict_proba" in capsys.readouterr().out
    use = (
        "import sys, pickle, pandas as pd\n"
        "sys.modules['grpc'] = None  # no network code may be needed\n"
        f"clf = pickle.load(open({str(out)!r}, 'rb'))\n"
        f"raw = pd.read_csv({str(tmp / 'fruit.csv')!r})\n"
        "print(','.join(clf.predict(raw.drop(columns='fruit'))))\n"
        "print(clf.predict_proba(raw.drop(columns='fruit')).shape)\n"
        "print(any(m.startswith('privfed.proto') or m.startswith('privfed.server') for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", use], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert printed == [",".join(labels), "(300, 3)", "False"]


def test_export_names_a_missing_folder_or_model_in_words(fruit, tmp_path, capsys):
    _, schema, ds = fruit
    model = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    path = save_model(tmp_path / "model.json", model, model_id="lr-eps1", task="lr", schema=schema)
    assert main(["export", "--model", str(path), "--out", str(tmp_path / "no" / "model.pkl")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'no' / 'model.pkl'}: its folder {tmp_path / 'no'} does not exist" in err
    assert main(["export", "--model", str(tmp_path / "none.json"), "--out", str(tmp_path / "m.pkl")]) == 2
    err = capsys.readouterr().err
    assert "none.json" in err and "No such file or directory" in err and "Errno" not in err
    assert not list(tmp_path.glob("*.pkl*"))  # nothing half-written is left
    (tmp_path / "exports").mkdir()  # a folder as --out (walkthrough 4: "readme.partial: Is a directory", left behind)
    assert main(["export", "--model", str(path), "--out", str(tmp_path / "exports")]) == 2
    assert f"--out {tmp_path / 'exports'} is a folder; name the file to write" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.partial"))


def test_export_never_replaces_an_earlier_file_unless_forced(fruit, tmp_path, capsys):
    """Walkthrough 6, W6-14: a re-run replaced an earlier export without a word (``privfed job model`` refuses)."""
    _, schema, ds = fruit
    model = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    path = save_model(tmp_path / "model.json", model, model_id="lr-eps1", task="lr", schema=schema)
    out = tmp_path / "model.pkl"
    out.write_bytes(b"an earlier export")
    assert main(["export", "--model", str(path), "--out", str(out)]) == 2
    assert f"--out {out} exists; give another file, or --force to replace it (nothing was written)" in (
        capsys.readouterr().err
    )
    assert out.read_bytes() == b"an earlier export" and not list(tmp_path.glob("*.partial"))
    assert main(["export", "--model", str(path), "--out", str(out), "--force"]) == 0
    assert TrainedClassifier.from_file(str(path)).predict(ds.X[:3]).tolist() == (
        pickle.loads(out.read_bytes()).predict(ds.X[:3]).tolist()
    )
    assert not list(tmp_path.glob("*.partial"))


def test_load_model_serves_under_the_training_id_with_no_training_flags(fruit, tmp_path):
    _, schema, ds = fruit
    model = reference_model(JobConfig(task="lr", epsilon=1.0, owners=1), ds, even_parts(ds.n, 1, 0))
    run_dir = tmp_path / "20240101T000000Z"  # a run directory's timestamp is not the model's id
    run_dir.mkdir()
    path = save_model(run_dir / "model.json", model, model_id="lr-eps1", task="lr", schema=schema)
    with served_model(path, "lr-eps1", ["--insecure"]) as port, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.CoordinatorStub(channel)
        reply = stub.Predict(pb.PredictRequest(model_id="lr-eps1", rows=serde.reports_to_proto(ds.X[:4])), timeout=10)
        assert list(reply.label_values) == [schema.classes[i] for i in model.predict(ds.X[:4])]


def test_a_store_holds_its_last_used_models_and_reads_the_others_back(fruit, tmp_path):
    from privfed.common.errors import ConfigError
    from privfed.server.models import ModelStore

    _, schema, ds = fruit
    model = reference_model(JobConfig.from_flat(task="ncc", epsilon=1.0, owners=30), ds, even_parts(ds.n, 30, 0))
    saved = {
        f"job{i}": save_model(tmp_path / f"job{i}.json", model, model_id=f"job{i}", task="ncc", schema=schema)
        for i in range(4)
    }
    reads = []

    def load(model_id, data_user):
        if data_user not in (None, "alice"):
            return None  # the service's: another data user's model is not read
        reads.append(model_id)
        return (load_model(saved[model_id]), "alice") if model_id in saved else None

    store = ModelStore(load=load, keep=2)
    for i in range(3):
        store.put(f"job{i}", model, schema=schema)
    assert list(store._models) == ["job1", "job2"]  # the least recently used went first
    store.entry("job1")  # used: now the most recent
    store.put("job3", model, schema=schema)
    assert list(store._models) == ["job1", "job3"] and reads == []
    assert store.entry("job0").classes == ("pear", "apple", "plum") and reads == ["job0"]  # read back from its file
    store.entry("job0")
    assert reads == ["job0"] and list(store._models) == ["job3", "job0"]  # held again: read once
    with pytest.raises(ConfigError, match="no model 'job9'"):
        store.entry("job9")
    # a job's model serves its data user (and callers that are no data user); to another it does not exist
    assert store.entry("job0", "alice").data_user == "alice" and store.entry("job0", None) is not None
    store.put("bobs", model, schema=schema, data_user="bob")
    store.put("standalone", model, schema=schema)  # no job, no data user: anyone's
    with pytest.raises(ConfigError, match=r"no model 'bobs'; served models: \['standalone'\]"):
        store.predict("bobs", np.zeros((1, 2)), "alice")
    assert store.entry("standalone", "bob").data_user == ""
    with pytest.raises(ConfigError, match="no model 'job1'"):
        store.entry("job1", "bob")  # not read: not bob's
    assert "job1" not in store._models


def test_a_missing_model_names_no_other_data_users_ids_and_says_why_a_job_has_none(fruit, tmp_path):
    """Walkthrough 8, W8-11: an owner node's query of a failed job was told "served models: [...]" with every data
    user's model ids (each a submission time); nobody was told that a failed, cancelled or deleted job has none."""
    from privfed.common.errors import ConfigError
    from privfed.server.models import ModelStore

    _, schema, ds = fruit
    model = reference_model(JobConfig.from_flat(task="ncc", epsilon=1.0, owners=30), ds, even_parts(ds.n, 30, 0))
    store = ModelStore()
    store.put("20261129T024321049351Z-aba4", model, schema=schema, data_user="alice")
    store.put("20261129T024356719723Z-e481", model, schema=schema, data_user="bob")

    def refusal(data_user):
        with pytest.raises(ConfigError) as refused:
            store.entry("20261129T024357086991Z-f15f", data_user)  # bob's failed job: no model
        return str(refused.value)

    owner = refusal(None)
    assert "aba4" not in owner and "e481" not in owner and "served models" not in owner, owner
    for text in (owner, refusal("bob"), refusal("alice")):
        assert text.startswith("no model '20261129T024357086991Z-f15f'") and "\n" not in text, text
        assert "A job that failed, was cancelled or was deleted has no model" in text, text
    assert "['20261129T024356719723Z-e481']" in refusal("bob") and "aba4" not in refusal("bob")
    assert "['20261129T024321049351Z-aba4']" in refusal("alice") and "e481" not in refusal("alice")
    store.put("standalone", model, schema=schema)  # a model of no job is anyone's, and named to anyone
    assert "served models: ['standalone']." in refusal(None)
    assert "served models: ['20261129T024356719723Z-e481', 'standalone']." in refusal("bob")
