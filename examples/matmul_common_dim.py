"""matmul_common_dim: C = A B with one large common dimension."""


def reference(A, B):
    return {"C": A @ B}
