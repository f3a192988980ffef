"""matmul: C = A B, two general matrices (the first shape of the TRA paper)."""


def reference(A, B):
    return {"C": A @ B}
