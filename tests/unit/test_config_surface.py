"""One configuration surface (issue 24): TOML keys are exactly the flags' names (a walk over every
flag of ``privfed simulate``), every combination of flags that would do nothing is refused with one
line, node names are free-form, and ``privfed ledger show`` prints numbers and survives a closed pipe."""

import json
import math
import subprocess
import sys

import pytest

from privfed.common.errors import ConfigError
from privfed.common.identity import check_node_name, owner_id
from privfed.common.ledger import Ledger
from privfed.deploy.cli import build_parser, main, simulation_config
from privfed.deploy.simulation_config import JOB_KEYS, KEYS, SimulationConfig
from privfed.server.parameters import BY_TASK

KEYS_TO_FIELDS = JOB_KEYS | {key: key for key in KEYS if key not in JOB_KEYS}

#: One non-default value per flag of ``privfed simulate`` (TOML value, flag text) and the flags it
#: needs beside it. A flag missing here fails the walk: every flag must have its TOML key.
SAMPLES = {
    "owners": (30, "30", []),
    "min_owners": (12, "12", []),
    "processes": (3, "3", []),
    "data": (["a.csv", "b.csv"], ["a.csv", "b.csv"], ["--schema", "s.toml"]),
    "epsilon": ([1.0, math.inf], "1,inf", []),
    "repeats": (2, "2", []),
    "out": ("elsewhere", "elsewhere", []),
    "insecure": (True, None, []),
    "rng": ("secure", "secure", []),
    "work_rows": (1024, "1024", []),
    "node_timeout": (5.0, "5", []),
    "round_timeout": (60.0, "60", []),
    "no_progress": (True, None, []),
    "task": ("lr", "lr", []),
    "mechanism": ("duchi", "duchi", []),
    "labels": ("clear", "clear", []),
    "label_fraction": (0.3, "0.3", []),
    "param_bound": (2.0, "2", []),
    "C": (0.5, "0.5", []),
    "k": (5, "5", []),
    "delta": (1e-6, "1e-6", []),
    "lam": (0.1, "0.1", []),
    "basis": ("dct", "dct", []),
    "model": ("mc-huber", "mc-huber", []),
    "scaling": ("ball", "ball", []),
    "solver": ("local", "local", []),
    "smoothing": (0.5, "0.5", ["--release", "marginals"]),  # bdt's first: its marginal release's
    "release": ("marginals", "marginals", []),
    "base": ("ncc", "ncc", []),
    "rounds": (4, "4", []),
    "group_size": (3, "3", []),
    "n_bins": (3, "3", []),
    "weight_bound": (2.0, "2", []),
    "rows_per_owner": (3.0, "3", []),
    "eval_fraction": (0.3, "0.3", []),
    "eval_row_bound": (2.0, "2", []),
    "max_owner_rows": (7, "7", []),
    "share_groups": ("all", "all", []),
    "budget_split": ("owners", "owners", []),
    "eval_mechanism": ("rr", "rr", []),
    "ring_timeout": (9.0, "9", []),
    "secure_sum": ("ring", "ring", []),
    "eval_groups": ("all", "all", []),
    "stump_encoding": ("cells", "cells", []),
    "oracle": ("oue", "oue", []),
    "n_sampled": (2, "2", []),
    "schema": ("s.toml", "s.toml", ["--data", "a.csv"]),
    "dataset": ("digits", "digits", []),
    "n_samples": (500, "500", []),
    "seed": (3, "3", []),
    "test_fraction": (0.25, "0.25", []),
}


def _simulate_actions():
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["simulate"]
    return [a for a in sub._actions if a.option_strings and a.dest not in ("help", "config")]


def test_every_simulate_flag_has_a_toml_key_that_sets_what_the_flag_sets():
    actions = _simulate_actions()
    assert sorted(a.dest for a in actions) == sorted(SAMPLES) == sorted(KEYS)
    for action in actions:
        flag, key = action.option_strings[0], action.dest
        value, text, extra = SAMPLES[key]
        task = (
            value if key == "task" else next((t for t, table in BY_TASK.items() if KEYS_TO_FIELDS[key] in table), "ncc")
        )
        argv = ["simulate", "--task", task, *extra, flag] + (
            [] if text is None else [text] if isinstance(text, str) else text
        )
        from_flags = simulation_config(build_parser().parse_args(argv))
        doc = {key: value, "task": task}
        doc |= {e.lstrip("-").replace("-", "_"): v for e, v in zip(extra[::2], extra[1::2])}
        if "data" in doc and not isinstance(doc["data"], list):
            doc["data"] = [doc["data"]]
        assert SimulationConfig.from_mapping(doc) == from_flags, flag
        hyphenated = {k.replace("_", "-"): v for k, v in doc.items()}  # TOML keys may keep the flag's dashes
        assert SimulationConfig.from_mapping(hyphenated) == from_flags, flag


def test_field_names_that_are_not_flag_names_are_refused_with_the_flag_name():
    with pytest.raises(ConfigError) as info:
        SimulationConfig.from_toml('task = "bdt"\nn_rounds = 4\nc = 0.5\n', source="run.toml")
    message = str(info.value)
    assert message.startswith("run.toml: unknown key(s) ['c', 'n_rounds'] (c is --C: write C; n_rounds is --rounds")
    assert SimulationConfig.from_toml('task = "bdt"\nrounds = 4\nC = 0.5\n').job.task_options()["n_rounds"] == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["coordinator", "--owners", "4", "--epsilon", "1", "--insecure", "--resume"],
            "--resume needs --journal FILE",
        ),
        (
            ["coordinator", "--owners", "4", "--epsilon", "1", "--insecure", "--journal", "j.db"],
            "--journal checkpoints boosting rounds; --task ncc runs one round and has nothing to resume",
        ),
        (["coordinator", "--epsilon", "1", "--insecure"], "--owners required to train (or --load-model FILE"),
        (
            ["coordinator", "--load-model", "m.json", "--epsilon", "1", "--owners", "3", "--insecure"],
            "--load-model serves a saved model; --epsilon, --owners do nothing with it (drop them)",
        ),
        (
            ["coordinator", "--load-model", "m.json", "--epsilon", "1", "--insecure"],
            "--load-model serves a saved model; --epsilon does nothing with it (drop it)",
        ),
        (
            ["simulate", "--schema", "s.toml", "--data", "a.csv", "b.csv", "c.csv", "--processes", "5"],
            "--processes is the number of --data files (3), got 5: each file has its own owner node process",
        ),
        (
            ["simulate", "--schema", "s.toml", "--data", "a.csv", "b.csv", "c.csv", "--owners", "2"],
            "--owners 2 is fewer than the 3 --data files: each file's node hosts at least one owner",
        ),
        (
            ["owner", "--coordinator", "h:1", "--name", "hospital a", "--ledger", "l", "--epsilon-budget", "1"],
            "--name 'hospital a' cannot name an owner node: use letters, digits, '-' and '_'",
        ),
        (["certs", "--out", "c", "--names", "a", "coordinator"], "--names 'coordinator' cannot name an owner node"),
    ],
)
def test_a_combination_that_would_do_nothing_is_refused_in_one_line(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"privfed {argv[0]}: error: {message}"), err


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["simulate", "--epsilon", "1,,2"], "an empty item between commas"),
        (["simulate", "--epsilon", "1,2,"], "an empty item between commas"),
        (["query", "--coordinator", "127.0.0.1", "--model-id", "m", "--queries", "q.csv"], "must be HOST:PORT"),
        (["owner", "--coordinator", "h:0", "--name", "a", "--ledger", "l", "--epsilon-budget", "1"], "HOST:PORT"),
        (["coordinator", "--listen", "0.0.0.0", "--insecure"], "must be HOST:PORT"),
    ],
)
def test_empty_epsilon_items_and_addresses_without_a_port_are_refused(argv, fragment, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2 and fragment in capsys.readouterr().err


def test_node_names_are_free_form_and_owner_ids_derive_from_them(tmp_path):
    assert check_node_name("hospital-a") == "hospital-a" and owner_id("hospital-a", 3) == "hospital-a.o00003"
    for bad in ("", "a.b", "-a", "a b", "x" * 65, "CA"):
        with pytest.raises(ConfigError):
            check_node_name(bad)
    assert main(["certs", "--out", str(tmp_path / "c"), "--names", "hospital-a", "hospital_b"]) == 0
    for name in ("hospital-a", "hospital_b"):
        assert (tmp_path / "c" / name / f"{name}.pem").is_file()
        assert (tmp_path / "c" / name / f"{name}-key.pem").stat().st_mode & 0o077 == 0


@pytest.fixture
def ledger_file(tmp_path):
    path = tmp_path / "node.sqlite"
    with Ledger(path, epsilon_budget=math.inf, delta_budget=1e-4) as ledger:
        for k in range(3):
            ledger.debit("n.o1", 1.0, 1e-5, purpose="dp-pca", release_id=f"r{k}")
        for k in range(40):
            ledger.debit(f"n.o{k + 2:02d}", 0.5, 0.0, purpose="ncc", release_id=f"s{k}")
    return path


def test_ledger_json_gives_numbers_and_null_for_infinity(ledger_file, capsys):
    assert main(["ledger", "show", "--ledger", str(ledger_file), "--owner", "n.o1", "--json"]) == 0
    (owner,) = json.loads(capsys.readouterr().out)
    assert owner["spent"] == {"epsilon": 3.0, "delta": 3e-05}  # not 3.0000000000000004e-05
    assert owner["budget"]["epsilon"] is None and owner["remaining"]["epsilon"] is None  # unlimited
    assert owner["releases"][0]["epsilon"] == 1.0 and owner["releases"][0]["delta"] == 1e-05


def test_ledger_show_ends_quietly_when_the_reader_closes_the_pipe(ledger_file):
    cmd = f"{sys.executable} -m privfed.deploy.cli ledger show --ledger {ledger_file} | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert done.stdout.startswith("ledger ") and done.stderr == "", done.stderr
    assert done.returncode == 0


def test_the_dataset_flags_help_lists_every_built_in_data_set():
    """``--dataset``'s help is a string (a command line is parsed before numpy loads); it names them all."""
    from privfed.common.datasets import BUILTINS
    from privfed.deploy.job_flags import DATASETS

    assert sorted(DATASETS.split(", ")) == sorted(BUILTINS)
