"""``privfed experiment NAME``: each module exposes ``add_arguments(parser)`` and
``run(args) -> Path`` (the run directory holding JSON + PNG)."""

EXPERIMENTS = {
    "nullspace": "privfed.server.experiments.nullspace",
    "feddpdr-k": "privfed.server.experiments.feddpdr",
    "feddpdr-epsilon": "privfed.server.experiments.feddpdr",
    "feddpdr-n": "privfed.server.experiments.feddpdr",
    "feddpdr-uneven": "privfed.server.experiments.feddpdr",
    "feddpdr-time": "privfed.server.experiments.feddpdr",
    "stump-hit-rate": "privfed.server.experiments.boosting",
    "bdt-error": "privfed.server.experiments.boosting",
    "boosted-ncc": "privfed.server.experiments.boosting",
}
