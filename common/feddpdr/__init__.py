"""FedDPDR-DPML (seed 004): DP-PCA subspaces, their aggregation, and the phase-2 classifiers.

``choices``: the public options of a job (classifiers, row scalings, defaults, ledger entries);
``pca``: Gaussian-mechanism covariance and top-k subspace; ``basis``: public bases; ``subspace``:
weighted subspace aggregation; ``svm``: the seed's one-vs-rest objective-perturbed Huber SVM and the
owner's phase-2 release; ``multiclass``: one-budget multiclass objective perturbation (the multiclass
Huber SVM, softmax); ``solver``: the total minimiser behind both (AMP); ``centroid``: DP class sums;
``model``: the coordinator's aggregation and the fitted model.
"""
