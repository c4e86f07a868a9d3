"""``privfed experiment NAME``: each module exposes ``add_arguments(parser)`` and
``run(args) -> Path`` (the run directory holding JSON + PNG)."""

EXPERIMENTS = {
    "nullspace": "privfed.deploy.experiments.nullspace",
    "feddpdr-k": "privfed.deploy.experiments.feddpdr",
    "feddpdr-epsilon": "privfed.deploy.experiments.feddpdr",
    "feddpdr-n": "privfed.deploy.experiments.feddpdr",
    "feddpdr-uneven": "privfed.deploy.experiments.feddpdr",
    "feddpdr-time": "privfed.deploy.experiments.feddpdr",
    "stump-hit-rate": "privfed.deploy.experiments.boosting",
    "bdt-error": "privfed.deploy.experiments.boosting",
    "boosted-ncc": "privfed.deploy.experiments.boosting",
    "lr-epsilon": "privfed.deploy.experiments.ldp_models",
    "ncc-epsilon": "privfed.deploy.experiments.ldp_models",
    "mechanism-mse": "privfed.deploy.experiments.ldp_models",
    "select-map": "privfed.deploy.experiments.map_selection",
    "pca-svm": "privfed.deploy.experiments.baselines",
    "tabular": "privfed.deploy.experiments.tabular",
    "feddpdr-scaling": "privfed.deploy.experiments.feddpdr_scaling",
}
