"""Walkthrough 15: null-space cleaning (``privfed query --method subspace``) with the schema's own label named
confidential.

A researcher following "Private prediction (query cleaning)" passed ``--confidential-labels 0``, which the log
itself names ``0 visits (the schema's label, as its class index)``: the label the served model predicts. The query
ran, logged ``mean e_privacy 0.07137 against the local A_c`` and printed the model's labels, which are that same
label: the coordinator learns the "confidential" label from its own answer, whatever the cleaning. Nothing said so.
A label the model is asked to predict cannot be hidden from it; the run should stop before contact (as an index
past the label columns is), naming the column.

Fixed: ``read_training`` refuses such an index before contact (``owner/query_files.py``).
"""

import subprocess
import sys

SCHEMA = """features = ["a", "b", "c"]
classes = ["no", "yes"]
label = "outcome"
[bounds]
lo = [0.0, 0.0, 0.0]
hi = [1.0, 1.0, 1.0]
"""


def test_confidential_label_that_is_the_models_own_label_is_refused_before_contact(tmp_path):
    (tmp_path / "schema.toml").write_text(SCHEMA)
    rows = [(0.1 * (k % 10), 0.05 * (k % 20), 0.3, "yes" if k % 3 else "no", k % 2) for k in range(40)]
    (tmp_path / "train.csv").write_text(
        "a,b,c,outcome,secret\n" + "".join(f"{a},{b},{c},{o},{s}\n" for a, b, c, o, s in rows)
    )
    (tmp_path / "queries.csv").write_text("a,b,c\n0.2,0.4,0.3\n0.9,0.1,0.3\n")
    proc = subprocess.run(
        [
            sys.executable, "-c", "import sys; from privfed.deploy.cli import main; sys.exit(main())", "query",
            "--coordinator", "127.0.0.1:9", "--insecure", "--model-id", "lr-eps4",
            "--queries", str(tmp_path / "queries.csv"), "--schema", str(tmp_path / "schema.toml"),
            "--method", "subspace", "--train-data", str(tmp_path / "train.csv"),
            "--confidential-labels", "0",  # 0 outcome (the schema's label), 1 secret
            "--allow-confidential-map-leak",
        ],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    error = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2, proc.stderr[-2000:]
    # refused before the coordinator (nothing listens on port 9) is dialled, naming the flag and the column
    assert "unreachable" not in error, error
    assert "--confidential-labels" in error and "outcome" in error, error
