"""FedDPDR-DPML (seed 004): DP-PCA subspaces, their aggregation, and the objective-perturbed SVM.

``pca``: Gaussian-mechanism covariance and top-k subspace; ``subspace``: weighted subspace
aggregation; ``svm``: objective-perturbed Huber SVM (Chaudhuri et al. Alg. 2).
"""
