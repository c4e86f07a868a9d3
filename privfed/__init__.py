"""privfed: federated learning with local differential privacy, from Python.

The package's parts live in the repository's top-level folders (``privfed.common`` is ``common/``,
``privfed.server`` is ``server/``, ...; pyproject.toml maps them). This module is the public
Python API: a simulated federation run from a typed config, and the in-process estimators::

    import privfed

    job = privfed.JobConfig(task="ncc", epsilon=4.0, dataset="breast_cancer", owners=20)
    boost = privfed.JobConfig(task="bdt", epsilon=4.0, owners=200, params=privfed.BdtParams(n_rounds=5))
    report = privfed.simulate(privfed.SimulationConfig(job=job, epsilons=(1.0, 4.0), processes=2))
    report["points"][0]["accuracy"]

    model = privfed.LdpNearestCentroid(epsilon=4.0, bounds=(0.0, 16.0), random_state=0).fit(X, y)
    model.predict_proba(X[:3])

    trained = privfed.TrainedClassifier.from_file("runs/<timestamp>/eps-4/model.json")
    trained.predict(X[:3])  # label values; raw rows are read by the federation schema

Names are imported on first use (PEP 562), so ``import privfed.owner.main`` -- an owner node --
loads none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: privfed's version, read by the packaging (pyproject.toml's ``dynamic`` version) and by the reports
#: (``privfed.server.report.version_info``) without ``importlib.metadata``, which loads email and zipfile
#: (1.2 MB in an idle coordinator; issue 27).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from privfed.common.learners.estimators import LdpLogisticRegression, LdpNearestCentroid
    from privfed.common.learners.exported import TrainedClassifier
    from privfed.common.schema import FederationSchema
    from privfed.deploy.simulate import simulate
    from privfed.deploy.simulation_config import SimulationConfig
    from privfed.server.config import JobConfig
    from privfed.server.parameters import BdtParams, FeddpdrParams, LrParams, NccParams

#: Public name -> the module that defines it.
_EXPORTS = {
    "simulate": "privfed.deploy.simulate",
    "SimulationConfig": "privfed.deploy.simulation_config",
    "JobConfig": "privfed.server.config",
    "NccParams": "privfed.server.parameters",
    "LrParams": "privfed.server.parameters",
    "FeddpdrParams": "privfed.server.parameters",
    "BdtParams": "privfed.server.parameters",
    "FederationSchema": "privfed.common.schema",
    "LdpNearestCentroid": "privfed.common.learners.estimators",
    "LdpLogisticRegression": "privfed.common.learners.estimators",
    "TrainedClassifier": "privfed.common.learners.exported",
}

__all__ = [
    "BdtParams",
    "FederationSchema",
    "FeddpdrParams",
    "JobConfig",
    "LdpLogisticRegression",
    "LdpNearestCentroid",
    "LrParams",
    "NccParams",
    "SimulationConfig",
    "TrainedClassifier",
    "simulate",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'privfed' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
