"""FedDPDR-DPML (seed 004): DP-PCA subspaces, their aggregation, and the objective-perturbed SVM.

``pca``: Gaussian-mechanism covariance and top-k subspace; ``subspace``: weighted subspace
aggregation; ``svm``: objective-perturbed Huber SVM (Chaudhuri et al. Alg. 2), the one-budget softmax and
the pipeline; ``centroid``: DP class sums summed by the coordinator (the default phase-2 classifier).
"""
