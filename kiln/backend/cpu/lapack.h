#pragma once
// Batched symmetric eigendecomposition and SVD through the host's LAPACK (OpenBLAS
// ships it), on dense row-major host buffers. The CPU backend calls these directly and
// the CUDA backend on host copies (Note [Decompositions on the host]). LAPACK's own
// choices (eigenvector and singular vector signs) are kept, so results match PyTorch's
// CPU results for the same input.

#include <cstdint>

namespace kiln::cpu::lapack {

/** `batch` symmetric n x n matrices `a` (only the triangle named by uplo, 'L' or 'U', is
 * read): ascending eigenvalues into w [batch, n], orthonormal eigenvectors into v
 * [batch, n, n] (one per column). A value Error names `op` when LAPACK does not converge. */
template <typename T>
void eigh(const T* a, T* w, T* v, int64_t batch, int64_t n, char uplo, const char* op);

/** `batch` m x n matrices a = U diag(S) Vh with k = min(m, n): u [batch, m, full ? m : k],
 * s [batch, k] (descending), vh [batch, full ? n : k, n]. */
template <typename T>
void svd(const T* a, T* u, T* s, T* vh, int64_t batch, int64_t m, int64_t n, bool full,
         const char* op);

}  // namespace kiln::cpu::lapack
