"""Parameters declared once (issue 25 item 2): the tables of ``server/parameters.py`` are the only place a
job's flag, constraint and help are written, and ``BoostingParams`` (its own table) is what boosting tasks
carry. These tests walk the tables: every flag is built from its entry, each task's parameter object is its
table, a parameter of another task is refused, every boosting flag reaches the run's parameters and the wire
unchanged (the bdt parameters are that payload), and a bad value is refused alike by the job and by the run."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from privfed.common.boosting import params as boosting
from privfed.common.boosting.wire import config_to_dict
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners import ncc
from privfed.deploy.cli import build_parser, job_config
from privfed.deploy.simulation_config import SimulationConfig
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.server.config import FLAGS, JobConfig
from privfed.server.jobapi import job_config as job_file_config
from privfed.server.jobapi import job_settings
from privfed.server.parameters import (
    BDT,
    BY_TASK,
    COMMON,
    LABEL_SCHEMES,
    LEARNING,
    OWNER_ROWS,
    PARAMETERS,
    PARAMS,
    BdtParams,
    LrParams,
)
from privfed.server.strategies import make_strategy

BOUNDS = Bounds(np.zeros(3), np.ones(3))
#: The run's own fields: its ε, the schema's classes and bounds, the federation's rows bound; never a bdt flag's.
RUN_FIELDS = {"epsilon", "n_classes", "bounds", "max_owner_rows"}

#: Flags a sample needs beside it (the cells encoding's oracle: two classes default to signs, which is k-RR).
NEEDS = {"oracle": ["--stump-encoding", "cells"]}
#: One value, not the default, for every bdt flag that goes into the run's BoostingParams.
BOOST_SAMPLES = {
    "base": "ncc",
    "mechanism": "duchi",
    "labels": "rr",
    "label_fraction": 0.3,
    "param_bound": 2.5,
    "C": 0.5,
    "n_rounds": 3,
    "group_size": 2,
    "n_bins": 4,
    "weight_bound": 3.0,
    "eval_fraction": 0.3,
    "eval_row_bound": 2.0,
    "share_groups": "all",
    "budget_split": "owners",
    "eval_mechanism": "rr",
    "eval_groups": "all",
    "stump_encoding": "cells",
    "oracle": "oue",
    "n_sampled": 2,
}


def test_every_job_field_is_one_entry_of_one_table():
    common = {f.name for f in dataclasses.fields(JobConfig)} - {"params"}
    assert set(COMMON) == common and not set(COMMON) & set(LEARNING) and set(PARAMETERS) == common | set(LEARNING)
    assert set(LEARNING) == {name for table in BY_TASK.values() for name in table}
    for name in LEARNING:  # a flag shared by tasks is one Param, not copies
        assert len({id(table[name]) for table in BY_TASK.values() if name in table}) == 1, name
    assert len(set(FLAGS.values())) == len(FLAGS)
    assert set(LABEL_SCHEMES) == {"auto", *ncc.LABEL_SCHEMES}  # auto: the task's own scheme


def test_each_task_parameter_object_declares_exactly_its_table_and_defaults_to_what_every_surface_gives():
    """A parameter object's fields are its table's, in order; the job left without parameters, the command
    line without flags, a TOML file and a job file without keys all give the object's defaults."""
    for task, cls in PARAMS.items():
        assert [f.name for f in dataclasses.fields(cls)] == list(BY_TASK[task]) and cls.TABLE is BY_TASK[task], task
        defaults = cls()
        assert (
            JobConfig(task=task, epsilon=1.0).params == defaults == JobConfig.from_flat(task=task, epsilon=1.0).params
        )
        assert (
            job_config(build_parser().parse_args(["coordinator", "--task", task, "--epsilon", "1"])).params == defaults
        )
        assert SimulationConfig.from_mapping({"task": task}).job.params == defaults
        assert job_file_config(job_settings({"task": task, "epsilon": 1, "owners": 3}), {}).params == defaults
    assert (PARAMS["ncc"]().labels, BdtParams().labels) == ("auto", "joint")  # each task's own scheme
    assert BdtParams(labels="auto").labels == "joint"  # ncc's auto depends on ε: its strategy resolves it


@pytest.mark.parametrize(
    "task, settings",
    [
        ("ncc", {"mechanism": "duchi", "labels": "clear", "label_fraction": 0.3}),
        ("lr", {"param_bound": 2.0, "C": 0.5}),
        ("feddpdr", {"k": 5, "delta": 1e-6, "basis": "dct", "model": "mc-huber"}),
        ("bdt", {"rounds": 4, "base": "ncc", "labels": "rr", "C": 0.5, "share_groups": "all", "rows_per_owner": 3.0}),
        ("nb", {"n_bins": 4, "smoothing": 0.5}),
    ],
)
def test_flags_a_toml_file_and_a_job_file_give_the_same_job_parameters(task, settings):
    argv = [f"--{k.replace('_', '-')}" if k != "C" else "--C" for k in settings]
    flags = [x for flag, v in zip(argv, settings.values()) for x in (flag, str(v))]
    from_flags = job_config(build_parser().parse_args(["coordinator", "--task", task, "--epsilon", "1", *flags]))
    toml = "\n".join(f"{k} = {v!r}" for k, v in {"task": task, **settings}.items()).replace("'", '"')
    from_toml = SimulationConfig.from_toml(toml).job
    from_file = job_file_config(job_settings({"task": task, "epsilon": 1, "owners": 3, **settings}), {})
    assert from_flags.params == from_toml.params == from_file.params != PARAMS[task]()
    assert from_flags.rows_per_owner == from_toml.rows_per_owner == from_file.rows_per_owner


def test_a_parameter_of_another_task_is_refused_naming_its_flag_wherever_it_comes_from():
    message = re.escape("--rounds is a parameter of --task bdt, not of --task lr: drop it (or use --task bdt)")
    with pytest.raises(ConfigError, match=message):
        JobConfig.from_flat(task="lr", epsilon=1.0, n_rounds=3)
    with pytest.raises(ConfigError, match=message):
        job_config(build_parser().parse_args(["coordinator", "--task", "lr", "--epsilon", "1", "--rounds", "3"]))
    with pytest.raises(ConfigError, match=message):
        SimulationConfig.from_toml('task = "lr"\nrounds = 3\n')
    with pytest.raises(ConfigError, match=message):
        job_file_config(job_settings({"task": "lr", "epsilon": 1, "owners": 3, "rounds": 3}), {})
    with pytest.raises(ConfigError, match=message):
        JobConfig(task="lr", epsilon=1.0).replace(n_rounds=3)
    with pytest.raises(ConfigError, match="--C is a parameter of --task lr and bdt, not of --task ncc"):
        make_strategy("ncc", epsilon=1.0, C=0.5, n_classes=2, bounds=BOUNDS)
    with pytest.raises(ConfigError, match="--task ncc takes NccParams, got LrParams"):
        JobConfig(task="ncc", epsilon=1.0, params=LrParams())


def test_every_task_flag_is_built_from_its_table_entry_with_each_task_default_in_its_help():
    for command in ("simulate", "coordinator"):
        sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
        actions = {a.option_strings[0]: a for a in sub._actions if a.option_strings}
        for param in (OWNER_ROWS | LEARNING).values():
            action = actions[param.flag]
            assert action.help.startswith(param.help) and action.default is None, param.flag  # None: not given
            assert action.choices == param.check.choices and action.type is param.check.parse, param.flag
        assert actions["--labels"].help.endswith("(default: auto for ncc, joint for bdt)")
        rounds = {release: BdtParams(release=release).n_rounds for release in ("shares", "marginals")}
        assert f"(default: {rounds['shares']} for --release shares" in actions["--rounds"].help
        assert f"{rounds['marginals']} for --release marginals" in actions["--rounds"].help


def test_the_bdt_parameters_are_the_wire_payload_with_no_mapping():
    """BdtParams' wire fields are BoostingParams' fields of the same names, every one but the run's own; a
    BoostingParams goes to a job and back unchanged."""
    wire = {name for name, param in BDT.items() if param.wire}
    assert wire == set(BdtParams().wire()) and wire | RUN_FIELDS == set(boosting.WIRE_FIELDS)
    run = boosting.BoostingParams(
        **{name: value for name, value in BOOST_SAMPLES.items() if name not in ("budget_split", "share_groups")},
        epsilon=2.0,
        n_classes=3,
        bounds=BOUNDS,
        max_owner_rows=9,
    )
    job = JobConfig(task="bdt", epsilon=2.0, max_owner_rows=9, params=BdtParams(**{n: getattr(run, n) for n in wire}))
    assert job.boosting_params(n_classes=3, bounds=BOUNDS) == run


def test_every_boosting_flag_reaches_the_run_parameters_and_the_wire():
    wire = {name for name, param in BDT.items() if param.wire}
    assert sorted(BOOST_SAMPLES) == sorted(wire)  # a new wire flag needs a sample here
    defaults = BdtParams()
    for name, value in BOOST_SAMPLES.items():
        assert value != getattr(defaults, name), name
        argv = ["coordinator", "--task", "bdt", "--epsilon", "2", *NEEDS.get(name, []), FLAGS[name], str(value)]
        args = build_parser().parse_args(argv)
        params = make_strategy(job_config(args), n_classes=2, bounds=BOUNDS).params
        assert getattr(params, name) == value, name
        back = serde.boost_config_from_proto(serde.boost_config_to_proto(config_to_dict(params, "run")))
        assert getattr(back.params, name) == value, name


def test_every_wire_parameter_is_a_field_of_the_wire_message_and_only_those():
    fields = set(pb.BoostConfig.DESCRIPTOR.fields_by_name)
    assert {name.lower() for name in boosting.WIRE_FIELDS} == fields - {"run_id"}
    assert [n for n, p in boosting.PARAMETERS.items() if not p.wire] == ["split_points"]


@pytest.mark.parametrize(
    "name, value",
    [("base", "tree"), ("n_rounds", 0), ("n_rounds", 2.5), ("group_size", 0), ("n_bins", 1), ("weight_bound", 0.0),
     ("eval_fraction", 1.0), ("eval_row_bound", -1.0), ("share_groups", "some"), ("budget_split", "rows"),
     ("eval_mechanism", "gauss"), ("mechanism", "gauss"), ("label_fraction", 0.0), ("param_bound", 0.0),
     ("C", 0.0), ("eval_groups", "none"), ("stump_encoding", "bits"), ("oracle", "grr"), ("n_sampled", 0)],
)  # fmt: skip
def test_a_bad_boosting_value_is_refused_alike_by_the_job_and_by_the_run(name, value):
    """The job names the flag, the run names its field; the rest of the one-line message is the same."""
    with pytest.raises(ConfigError) as job:
        BdtParams(**{name: value})
    with pytest.raises(ConfigError) as run:
        boosting.BoostingParams(**({"epsilon": 1.0, "n_classes": 2, "bounds": BOUNDS, "n_rounds": 2} | {name: value}))
    assert str(job.value).startswith(f"{FLAGS[name]} must ")
    assert str(job.value).removeprefix(FLAGS[name]) == str(run.value).removeprefix(name)
