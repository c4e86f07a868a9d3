"""The flags every command that runs a job shares: ``--task`` with the learning parameters of every task
(:func:`add_learning`, from the tables of ``server/parameters.py``) and the built-in data set and its split
(:func:`add_data`), for ``privfed simulate``, ``coordinator``, ``owner`` and ``serve``.
"""

from __future__ import annotations

import argparse

#: Every built-in data set (common.datasets.BUILTINS: a string here, so parsing a command line loads no numpy).
DATASETS = "synthetic, digits, breast_cancer, mnist5k, wine, iris, fair, anes96, star98"


def add_learning(p: argparse.ArgumentParser) -> None:
    """``--task``, the owners' rows and every task's parameters, one flag each, from their tables
    (``server/parameters.py``): its text read by the parameter's constraint, its choices and its help, with
    its default per task (the parameter objects' fields) written into the help. A flag not given is None,
    so that only the flags given reach the job (a parameter of another task is refused: ``JobConfig.from_flat``).
    (Imported here: the tables load the learners and numpy, which only the commands that learn need;
    ``privfed owner`` parses its flags before numpy loads, :mod:`privfed.deploy.threads`.)"""
    from privfed.server.parameters import LEARNING, OWNER_ROWS, TASKS

    p.add_argument("--task", choices=TASKS, default="ncc", help="what the federation learns (README, Tasks)")
    for name, param in (OWNER_ROWS | LEARNING).items():
        parse = param.check.parse
        assert param.flag is not None and parse is not None  # every task parameter has a flag
        p.add_argument(param.flag, type=parse, choices=param.check.choices, help=_with_defaults(name, param.help))


def _with_defaults(name: str, help: str) -> str:
    """``help`` and the parameter's default in each task that takes it, unless the help says it already."""
    from dataclasses import fields

    from privfed.server.parameters import PARAMS

    if "default" in help:
        return help
    defaults = {t: f.default for t, cls in PARAMS.items() for f in fields(cls) if f.name == name}
    if not defaults or None in defaults.values():
        return help
    if len(set(map(str, defaults.values()))) == 1:
        return f"{help} (default: {next(iter(defaults.values()))})"
    return f"{help} (default: {', '.join(f'{v} for {t}' for t, v in defaults.items())})"


def add_data(p: argparse.ArgumentParser, *, dataset_group: argparse._MutuallyExclusiveGroup | None = None) -> None:
    (dataset_group or p).add_argument("--dataset", default="synthetic", help=f"built-in data set: {DATASETS}")
    p.add_argument(
        "--n-samples",
        type=int,
        default=None,
        help="rows of the synthetic data set (default: its own 10000; privfed simulate: enough for one "
        "training row per owner when --owners needs more)",
    )
    p.add_argument("--seed", type=int, default=0, help="split/partition seed (and noise seed with --rng seeded)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="share of the rows in the public test split")
