"""The coordinator's typed job configuration (issue 10): flags -> JobConfig -> strategy, and the
one-line errors of ``privfed coordinator``."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import signal

import numpy as np
import pytest

from privfed.common.boosting.params import N_BINS
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError, RoundFailed
from privfed.deploy.cli import build_parser, job_config, main
from privfed.server.config import DEFAULT_WEIGHT_BOUND, FLAGS, JobConfig
from privfed.server.main import coordinator_strategy, run_coordinator
from privfed.server.parameters import BY_TASK, COMMON, NccParams
from privfed.server.strategies import LrStrategy, make_strategy
from privfed.server.strategies.ldp_gd import LdpGdStrategy

COORDINATOR = ["coordinator", "--owners", "4", "--epsilon", "1"]
BOUNDS = Bounds(np.zeros(3), np.ones(3))


def parsed(*flags: str):
    return build_parser().parse_args([*COORDINATOR, *flags])


def task_of(field: str) -> str:
    """A task that takes the parameter ``field`` (bdt for a common field)."""
    return next((task for task, table in BY_TASK.items() if field in table), "bdt")


@pytest.fixture
def keep_sigterm():
    """``privfed coordinator`` installs its own SIGTERM handler; give the test runner its own back."""
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


# ---- validation ------------------------------------------------------------------------


def test_the_defaults_are_valid_and_the_config_is_frozen():
    config = JobConfig(task="ncc", epsilon=math.inf)
    assert config.params == NccParams() and config.task_options()["labels"] == "auto"  # by ε, in the strategy
    assert JobConfig(task="bdt", epsilon=1.0).share_weight_bound == DEFAULT_WEIGHT_BOUND
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epsilon = 2.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.task_params.mechanism = "duchi"  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("task", "svm", "--task"),
        ("mechanism", "gauss", "--mechanism"),
        ("labels", "plain", "--labels"),
        ("base", "tree", "--base"),
        ("epsilon", 0.0, "--epsilon"),
        ("epsilon", -1.0, "--epsilon"),
        ("epsilon", math.nan, "--epsilon"),
        ("label_fraction", 1.0, "--label-fraction"),
        ("C", 0.0, "--C"),
        ("param_bound", math.inf, "--param-bound"),
        ("k", 0, "--k"),
        ("delta", 1.0, "--delta"),
        ("lam", -0.1, "--lam"),
        ("basis", "pca", "--basis"),
        ("model", "svm", "--model"),
        ("scaling", "unit", "--scaling"),
        ("n_rounds", 0, "--rounds"),
        ("n_rounds", 2.5, "--rounds"),
        ("group_size", 0, "--group-size"),
        ("n_bins", 1, "--n-bins"),
        ("weight_bound", 0.0, "--weight-bound"),
        ("weight_bound", math.inf, "--weight-bound"),
        ("rows_per_owner", 0.0, "--rows-per-owner"),
        ("eval_fraction", 0.0, "--eval-fraction"),
        ("eval_row_bound", 0.0, "--eval-row-bound"),
        ("max_owner_rows", 0, "--max-owner-rows"),
        ("ring_timeout", 0.0, "--ring-timeout"),
        ("seed", -1, "--seed"),
        ("n_samples", 0, "--n-samples"),
        ("test_fraction", 0.0, "--test-fraction"),
        ("owners", 0, "--owners"),
        ("round_timeout", 0.0, "--round-timeout"),
        ("register_timeout", -1.0, "--register-timeout"),
        ("node_timeout", math.inf, "--node-timeout"),
        ("dataset", "", "--dataset"),
        ("dataset", "rows.csv", "--dataset"),
        ("listen", "", "--listen"),
        ("owners", True, "--owners"),
    ],
)
def test_every_invalid_value_is_a_config_error_naming_the_flag_and_the_value(field, value, flag):
    with pytest.raises(ConfigError) as info:
        JobConfig.from_flat(**{"task": task_of(field), "epsilon": 1.0, field: value})
    message = str(info.value)
    assert message.startswith(f"{flag} must ") and repr(value) in message, message


def test_replace_validates_again():
    with pytest.raises(ConfigError, match="--epsilon"):
        JobConfig(task="lr", epsilon=1.0).replace(epsilon=0.0)


@pytest.mark.parametrize(
    "weight_bound, rows_per_owner, expected, source",
    [
        (7.0, 3.0, 7.0, "--weight-bound"),  # explicit wins
        (None, 2.5, 3.0, "--rows-per-owner"),  # ceil(rows)
        (None, 0.4, 1.0, "--rows-per-owner"),  # at least one row
        (None, None, DEFAULT_WEIGHT_BOUND, "default"),
    ],
)
def test_the_share_weight_bound_is_explicit_or_derived_from_public_rows_or_the_default(
    weight_bound, rows_per_owner, expected, source
):
    config = JobConfig.from_flat(task="bdt", epsilon=1.0, weight_bound=weight_bound, rows_per_owner=rows_per_owner)
    assert config.share_weight_bound == expected and config.weight_bound_source == source
    assert config.to_report()["share_weight_bound"] == expected


# ---- from the command line to the strategy ---------------------------------------------


def test_every_field_has_a_coordinator_flag():
    args = parsed()
    for name, flag in FLAGS.items():
        assert hasattr(args, flag.lstrip("-").replace("-", "_")), (name, flag)
    assert {f.name for f in dataclasses.fields(JobConfig)} - {"params"} == set(COMMON)


def test_coordinator_task_bdt_uses_the_configured_weight_bound(caplog):
    strategy, _, _ = coordinator_strategy(
        job_config(
            parsed(
                "--task",
                "bdt",
                "--weight-bound",
                "7",
                "--rounds",
                "3",
                "--n-bins",
                "5",
                "--eval-fraction",
                "0.4",
                "--C",
                "2",
            )
        )
    )
    booster = strategy.params
    assert (booster.weight_bound, booster.n_rounds, booster.n_bins, booster.eval_fraction, booster.C) == (
        7.0,
        3,
        5,
        0.4,
        2.0,
    )
    strategy, _, _ = coordinator_strategy(job_config(parsed("--task", "bdt", "--rows-per-owner", "2.5")))
    assert strategy.params.weight_bound == 3.0 and strategy.params.max_owner_rows == 3
    strategy, _, _ = coordinator_strategy(
        job_config(parsed("--task", "bdt", "--release", "shares", "--rows-per-owner", "1", "--epsilon", "4"))
    )
    assert (strategy.params.max_owner_rows, strategy.params.eval_mechanism, strategy.params.n_bins) == (
        1,
        "rr",
        N_BINS,
    )
    with caplog.at_level(logging.WARNING, logger="privfed.coordinator"):
        strategy, _, _ = coordinator_strategy(job_config(parsed("--task", "bdt")))
    assert strategy.params.weight_bound == DEFAULT_WEIGHT_BOUND
    assert "neither --weight-bound nor --rows-per-owner" in caplog.text  # the default is never silent


def test_flags_reach_the_single_round_strategies():
    strategy, _, test = coordinator_strategy(
        job_config(
            parsed("--task", "lr", "--solver", "local", "--param-bound", "8", "--C", "0.5", "--mechanism", "duchi")
        )
    )
    assert isinstance(strategy, LrStrategy) and test is not None and strategy.n_classes == len(test.classes)
    assert (strategy.param_bound, strategy.C, strategy.mechanism, strategy.epsilon) == (8.0, 0.5, "duchi", 1.0)
    gd, _, _ = coordinator_strategy(job_config(parsed("--task", "lr", "--param-bound", "8", "--mechanism", "duchi")))
    assert isinstance(gd, LdpGdStrategy)  # --solver gd, the default
    assert (gd.param_bound, gd.mechanism, gd.epsilon, gd.gd.param_bound) == (8.0, "duchi", 1.0, 8.0)


def test_the_feddpdr_basis_flag_reaches_the_strategy():
    """--basis dct: the public DCT basis, no DP-PCA phase, the classifier gets all of epsilon."""
    strategy, _, _ = coordinator_strategy(
        job_config(parsed("--task", "feddpdr", "--dataset", "digits", "--basis", "dct"))
    )
    assert strategy.basis == "dct"
    assert strategy.budget_split()["svm"] == strategy.epsilon
    paper, _, _ = coordinator_strategy(job_config(parsed("--task", "feddpdr", "--dataset", "digits")))
    assert paper.basis == "dp-pca" and paper.budget_split()["svm"] < paper.epsilon


def test_the_feddpdr_model_and_scaling_flags_reach_the_strategy_and_have_one_default():
    """--model and --scaling go command line -> JobConfig -> strategy -> every task; left out, all of
    them take the one default that privfed.common.feddpdr.choices declares."""
    from privfed.common.feddpdr.choices import DEFAULT_ROW_SCALING, DEFAULT_SVM_MODEL

    argv = ("--task", "feddpdr", "--dataset", "digits", "--model", "mc-huber", "--scaling", "normalise")
    strategy, _, _ = coordinator_strategy(job_config(parsed(*argv)))
    assert (strategy.model, strategy.scaling) == ("mc-huber", "normalise")
    config = job_config(parsed("--task", "feddpdr", "--dataset", "digits"))
    default, _, _ = coordinator_strategy(config)
    assert (config.task_options()["model"], default.model) == (DEFAULT_SVM_MODEL, DEFAULT_SVM_MODEL)
    assert (config.task_options()["scaling"], default.scaling) == (DEFAULT_ROW_SCALING, DEFAULT_ROW_SCALING)


def test_the_task_name_shorthand_builds_the_same_strategy_as_a_job_config():
    config = JobConfig.from_flat(task="bdt", epsilon=2.0, n_rounds=2, weight_bound=4.0, seed=5)
    a = make_strategy(config, n_classes=2, bounds=BOUNDS)
    b = make_strategy(
        "bdt", epsilon=2.0, n_rounds=2, weight_bound=4.0, seed=5, group_size=None, n_classes=2, bounds=BOUNDS
    )
    assert a.params == b.params
    with pytest.raises(TypeError):
        make_strategy(config, n_classes=2, bounds=BOUNDS, epsilon=3.0)  # a JobConfig is the whole job


# ---- one-line errors --------------------------------------------------------------------


def test_an_invalid_flag_value_is_one_line_naming_the_flag(capsys, keep_sigterm):
    assert main([*COORDINATOR, "--insecure", "--task", "bdt", "--rounds", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "privfed coordinator: error: --rounds must be an int in [1, 1000], got 0"
    assert main([*COORDINATOR, "--insecure", "--task", "lr", "--rounds", "3"]) == 2  # boosting's, not lr's
    err = capsys.readouterr().err.strip()
    assert err == (
        "privfed coordinator: error: --rounds is a parameter of --task bdt, not of --task lr: drop it (or use --task bdt)"
    )


def test_a_failed_job_is_one_line_exit_2_not_a_traceback(capsys, tmp_path, keep_sigterm):
    code = main(
        [
            "coordinator",
            "--owners",
            "1",
            "--epsilon",
            "1",
            "--insecure",
            "--listen",
            "127.0.0.1:0",
            "--register-timeout",
            "0.2",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("privfed coordinator: error: only 0 of 1 owners registered")
    assert "--register-timeout" in err[0]  # says what to change
    with pytest.raises(RoundFailed):  # a failed round, not a configuration error
        run_coordinator(
            JobConfig(task="ncc", epsilon=1.0, owners=1, listen="127.0.0.1:0", register_timeout=0.2, out=tmp_path), None
        )


def test_nothing_of_argparse_below_deploy_in_the_coordinator():
    """server/ takes a JobConfig; only deploy/ parses flags (offline experiments keep their own parsers)."""
    import ast
    from pathlib import Path

    import privfed.server

    offenders = []
    for path in Path(privfed.server.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "argparse"]
    assert offenders == []


@pytest.mark.parametrize(
    ("flat", "after_release"),
    [
        (dict(task="ncc"), False),
        (dict(task="nb"), False),
        (dict(task="bdt", release="marginals"), False),
        (dict(task="lr", solver="local"), False),  # one round: every budget it will spend is spent by then
        (dict(task="lr", solver="gd"), True),  # later groups have not spent yet: stop before they do
        (dict(task="bdt", release="shares"), True),
        (dict(task="feddpdr"), True),
    ],
)
def test_the_default_quorum_is_half_the_owners_and_one_round_jobs_are_not_checked_after_their_release(
    flat, after_release
):
    """Walkthrough 13, W13-4: a one-round job's quorum was 1, so a service's ncc job ran on the 5 of its 455 owners
    whose policies still took it, they paid, and it was listed done. Half the owners now, checked before the release;
    after it, only for the multi-round jobs (a one-round job's owners have all paid by then)."""
    config = JobConfig.from_flat(epsilon=1.0, owners=100, **flat)
    assert (config.quorum, config.quorum_after_release) == (50, after_release)
    assert JobConfig.from_flat(epsilon=1.0, owners=100, min_owners=7, **flat).quorum == 7


def test_the_report_names_the_feddpdr_k_the_schema_resolves_and_where_it_came_from(tmp_path, keep_sigterm):
    """FedDPDR's k None is the strategy's default (20, or every feature if fewer): the report says the k
    the job ran with once the schema is known, not null; a k given is reported as given."""
    config = JobConfig(task="feddpdr", epsilon=1.0)
    assert config.to_report()["k"] is None and "k_source" not in config.to_report()  # no schema yet
    assert (config.to_report(d=4)["k"], config.to_report(d=4)["k_source"]) == (4, "default")
    assert config.to_report(d=64)["k"] == 20
    given = JobConfig.from_flat(task="feddpdr", epsilon=1.0, k=3).to_report(d=64)
    assert (given["k"], given["k_source"]) == (3, "--k")
    assert "k_source" not in JobConfig(task="ncc", epsilon=1.0).to_report(d=4)
    code = main(
        [*COORDINATOR, "--insecure", "--task", "feddpdr", "--dataset", "iris", "--listen", "127.0.0.1:0"]
        + ["--register-timeout", "0.2", "--out", str(tmp_path)]
    )
    assert code == 2  # nobody registered; the report is written all the same
    (report,) = tmp_path.glob("**/report.json")
    config_report = json.loads(report.read_text())["config"]
    assert (config_report["k"], config_report["k_source"]) == (4, "default")  # iris: 4 features


def test_gradient_descent_with_fewer_owners_than_one_step_needs_is_warned_about():
    """lr by gradient descent averages at least MIN_GROUP owners' gradients a step (walkthrough 4: one owner ran
    without a word and served a model below chance); with fewer it says to use the local models."""
    from privfed.server.main import coordinator_strategy

    said = []
    for owners, epsilon, solver in (
        (1, 1.0, "gd"),
        (24, 3.0, "gd"),
        (25, 1.0, "gd"),
        (3, math.inf, "gd"),
        (3, 1.0, "local"),
    ):
        coordinator_strategy(
            JobConfig.from_flat(task="lr", epsilon=epsilon, owners=owners, solver=solver), warn=said.append
        )
    assert len(said) == 2 and all(
        "at least 25 owners a step" in s and "--shards" in s and "--solver local" in s for s in said
    )
    assert "with 1 owner(s)" in said[0] and "with 24 owner(s)" in said[1]


@pytest.mark.parametrize(
    ("flags", "warned"),
    [
        ((), True),  # synthetic: 20 features, k = min(20, d) = d
        (("--k", "5"), False),
        (("--basis", "identity"), False),
    ],
)
def test_feddpdr_warns_when_its_dp_pca_keeps_every_column(flags, warned):
    """Walkthrough 8, W8-7: with k = d the DP-PCA subspace is every direction, a rotation the classifier does not
    need, and it took half of epsilon (0.64 against 0.72 with the identity basis at epsilon 1, 10 repeats)."""
    said: list[str] = []
    coordinator_strategy(job_config(parsed("--task", "feddpdr", *flags)), said.append)
    line = "feddpdr: k = 20 keeps every one of the rows' 20 encoded columns, so DP-PCA reduces nothing"
    assert any(line in w for w in said) == warned, said
