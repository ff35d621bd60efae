"""MaSF in-distribution test: the statistic (Numba kernels and references) and the run on a model."""
