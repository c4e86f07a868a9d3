"""Parameters declared once (issue 25 item 2): the tables of ``server/parameters.py`` are the only place a
job's flag, constraint and help are written, and ``BoostingParams`` (its own table) is what boosting tasks
carry. These tests walk the tables: every flag is built from its entry, every boosting flag reaches the
run's parameters and the wire unchanged, and a bad value is refused alike by the job and by the run."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privfed.common.boosting import params as boosting
from privfed.common.boosting.wire import config_to_dict
from privfed.common.bounds import Bounds
from privfed.common.errors import ConfigError
from privfed.common.learners import ncc
from privfed.deploy.cli import build_parser, job_config
from privfed.proto import privfed_pb2 as pb
from privfed.proto import serde
from privfed.server.config import FLAGS, JobConfig
from privfed.server.parameters import BDT, BY_TASK, COMMON, LABEL_SCHEMES, LEARNING, PARAMETERS
from privfed.server.strategies import make_strategy

BOUNDS = Bounds(np.zeros(3), np.ones(3))
DEFAULTS = {f.name: f.default for f in dataclasses.fields(JobConfig)}

#: One value, not the default, for every bdt flag that goes into the run's BoostingParams (c is C there).
BOOST_SAMPLES = {
    "base": "ncc",
    "mechanism": "duchi",
    "labels": "rr",
    "label_fraction": 0.3,
    "param_bound": 2.5,
    "c": 0.5,
    "n_rounds": 3,
    "group_size": 2,
    "n_bins": 4,
    "weight_bound": 3.0,
    "eval_fraction": 0.3,
    "eval_row_bound": 2.0,
    "max_owner_rows": 7,
    "share_groups": "all",
    "budget_split": "owners",
    "eval_mechanism": "rr",
}


def test_every_job_field_is_one_entry_of_one_table():
    assert set(PARAMETERS) == set(DEFAULTS) and not set(COMMON) & set(LEARNING)
    assert set(LEARNING) == {name for table in BY_TASK.values() for name in table}
    for name in LEARNING:  # a flag shared by tasks is one Param, not copies
        assert len({id(table[name]) for table in BY_TASK.values() if name in table}) == 1, name
    assert len(set(FLAGS.values())) == len(FLAGS)
    assert set(LABEL_SCHEMES) == {"auto", *ncc.LABEL_SCHEMES}  # auto: the task's own scheme


@pytest.mark.parametrize("command", ["simulate", "coordinator"])
def test_every_task_flag_is_built_from_its_table_entry(command):
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    actions = {a.option_strings[0]: a for a in sub._actions if a.option_strings}
    for name, param in LEARNING.items():
        action = actions[param.flag]
        assert (action.help, action.default) == (param.help, DEFAULTS[name]), param.flag
        assert action.choices == param.check.choices and action.type is param.check.parse, param.flag


def test_every_boosting_flag_reaches_the_run_parameters_and_the_wire():
    wire = {name for name, param in BDT.items() if param.wire}
    assert sorted(BOOST_SAMPLES) == sorted(wire)  # a new wire flag needs a sample here
    assert {"C" if n == "c" else n for n in wire} <= set(boosting.WIRE_FIELDS)
    for name, value in BOOST_SAMPLES.items():
        assert value != DEFAULTS[name], name
        args = build_parser().parse_args(["coordinator", "--task", "bdt", "--epsilon", "2", FLAGS[name], str(value)])
        params = make_strategy(job_config(args), n_classes=2, bounds=BOUNDS).params
        field = "C" if name == "c" else name
        assert getattr(params, field) == value, name
        back = serde.boost_config_from_proto(serde.boost_config_to_proto(config_to_dict(params, "run")))
        assert getattr(back.params, field) == value, name


def test_every_wire_parameter_is_a_field_of_the_wire_message_and_only_those():
    fields = set(pb.BoostConfig.DESCRIPTOR.fields_by_name)
    assert {name.lower() for name in boosting.WIRE_FIELDS} == fields - {"run_id"}
    assert [n for n, p in boosting.PARAMETERS.items() if not p.wire] == ["split_points"]


@pytest.mark.parametrize(
    "name, value",
    [("base", "tree"), ("n_rounds", 0), ("n_rounds", 2.5), ("group_size", 0), ("n_bins", 1), ("weight_bound", 0.0),
     ("eval_fraction", 1.0), ("eval_row_bound", -1.0), ("max_owner_rows", 0), ("share_groups", "some"),
     ("budget_split", "rows"), ("eval_mechanism", "gauss"), ("mechanism", "gauss"), ("label_fraction", 0.0),
     ("param_bound", 0.0), ("c", 0.0)],
)  # fmt: skip
def test_a_bad_boosting_value_is_refused_alike_by_the_job_and_by_the_run(name, value):
    """The job names the flag, the run names its field; the rest of the one-line message is the same."""
    field = "C" if name == "c" else name
    with pytest.raises(ConfigError) as job:
        JobConfig(task="bdt", epsilon=1.0, **{name: value})
    with pytest.raises(ConfigError) as run:
        boosting.BoostingParams(**({"epsilon": 1.0, "n_classes": 2, "bounds": BOUNDS, "n_rounds": 2} | {field: value}))
    assert str(job.value).startswith(f"{FLAGS[name]} must ")
    assert str(job.value).removeprefix(FLAGS[name]) == str(run.value).removeprefix(field)
