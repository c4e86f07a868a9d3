"""LDP boosting (seed 002): federated SAMME over perturbed base-learner shares.

``federated``: the run's public configuration (:class:`FederatedBoosting`), the owner and
coordinator steps of Alg. 2 and the evaluation releases; ``loop``: the one SAMME round loop
(:func:`run_rounds`) over any owner steps; ``simulation``: every owner in this process
(what :meth:`FederatedBoosting.fit` runs); ``wire``: the public state a boosting task carries.
"""
