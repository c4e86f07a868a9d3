"""LDP boosting (seed 002, Wang & Chang, Alg. 2): federated SAMME over perturbed base-learner shares.

``params``: the run's public parameters (:class:`~.params.BoostingParams`, one frozen dataclass with its
constraint table) and the ε of each release; ``releases``: the mechanisms of a run's releases, built once
(:class:`~.releases.ReleasePlan`; the evaluation releases themselves are mechanisms in
:mod:`privfed.common.mechanisms`); ``owner``: what an owner computes and releases from its rows;
``coordinator``: groups, selection of the base learner, SAMME's α; ``loop``: the one SAMME round loop
(:func:`~.loop.run_rounds`) over any owner steps; ``simulation``: every owner in this process
(:func:`~.simulation.simulate`, what the experiments run); ``wire``: the public state a boosting task carries.

Imports go one way: ``params`` <- ``releases`` <- ``owner`` <- ``coordinator`` <- ``loop`` <- ``simulation``,
and ``wire`` takes ``params``, ``releases`` and ``owner``.
"""
