#include "kiln/backend/cpu/lapack.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kiln/core/error.h"

// LAPACK's Fortran entry points (OpenBLAS exports them; 32-bit integers, the hidden
// string lengths last).
extern "C" {
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
}

namespace kiln::cpu::lapack {
namespace {

void syevd(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
           float* work, const int* lwork, int* iwork, const int* liwork, int* info) {
  ssyevd_(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info, 1, 1);
}
void syevd(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
           double* work, const int* lwork, int* iwork, const int* liwork, int* info) {
  dsyevd_(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info, 1, 1);
}
void gesdd(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
           float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
           int* iwork, int* info) {
  sgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info, 1);
}
void gesdd(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
           double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
           int* iwork, int* info) {
  dgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info, 1);
}

int lapack_int(int64_t v, const char* op) {
  KILN_CHECK(v <= std::numeric_limits<int>::max(), unsupported,
             "[{}] a matrix dimension of {} is too large for LAPACK", op, v);
  return static_cast<int>(v);
}

// Row-major rows x cols at `src` into column-major `dst` (and back: the same with the
// dimensions swapped).
template <typename T>
void transpose_into(const T* src, T* dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

template <typename T>
void identity(T* m, int64_t n) {
  std::fill(m, m + n * n, T(0));
  for (int64_t i = 0; i < n; ++i) m[i * n + i] = T(1);
}

}  // namespace

template <typename T>
void eigh(const T* a, T* w, T* v, int64_t batch, int64_t n, char uplo, const char* op) {
  if (n == 0) return;
  int ni = lapack_int(n, op), info = 0;
  std::vector<T> col(static_cast<size_t>(n * n));
  // The workspace sizes LAPACK asks for (the same for every matrix of the batch).
  T work_size = 0;
  int iwork_size = 0, query = -1;
  syevd("V", &uplo, &ni, col.data(), &ni, w, &work_size, &query, &iwork_size, &query, &info);
  int lwork = static_cast<int>(work_size), liwork = iwork_size;
  std::vector<T> work(static_cast<size_t>(std::max(lwork, 1)));
  std::vector<int> iwork(static_cast<size_t>(std::max(liwork, 1)));
  for (int64_t b = 0; b < batch; ++b) {
    transpose_into(a + b * n * n, col.data(), n, n);
    syevd("V", &uplo, &ni, col.data(), &ni, w + b * n, work.data(), &lwork, iwork.data(), &liwork,
          &info);
    KILN_CHECK(info == 0, value,
               "[{}] the algorithm failed to converge because the input matrix{} is "
               "ill-conditioned or has too many "
               "repeated eigenvalues (LAPACK error code {})",
               op, batch > 1 ? fmt::format(" (batch element {})", b) : "", info);
    transpose_into(col.data(), v + b * n * n, n, n);
  }
}

template <typename T>
void svd(const T* a, T* u, T* s, T* vh, int64_t batch, int64_t m, int64_t n, bool full,
         const char* op) {
  int64_t k = std::min(m, n), ucols = full ? m : k, vrows = full ? n : k;
  if (k == 0) {  // as PyTorch: the full factors of an empty matrix are identities
    for (int64_t b = 0; b < batch; ++b) {
      if (full) identity(u + b * m * m, m);
      if (full) identity(vh + b * n * n, n);
    }
    return;
  }
  for (int64_t i = 0; i < batch * m * n; ++i)
    KILN_CHECK(std::isfinite(a[i]), value,
               "[{}] the algorithm failed to converge because the input matrix contained "
               "non-finite values",
               op);
  int mi = lapack_int(m, op), ni = lapack_int(n, op), ldu = lapack_int(m, op);
  int ldvt = lapack_int(std::max<int64_t>(vrows, 1), op), info = 0;
  const char* jobz = full ? "A" : "S";
  std::vector<T> col(static_cast<size_t>(m * n)), ucol(static_cast<size_t>(m * ucols)),
      vcol(static_cast<size_t>(vrows * n));
  std::vector<int> iwork(static_cast<size_t>(8 * k));
  T work_size = 0;
  int query = -1;
  gesdd(jobz, &mi, &ni, col.data(), &mi, s, ucol.data(), &ldu, vcol.data(), &ldvt, &work_size,
        &query, iwork.data(), &info);
  int lwork = static_cast<int>(work_size);
  std::vector<T> work(static_cast<size_t>(std::max(lwork, 1)));
  for (int64_t b = 0; b < batch; ++b) {
    transpose_into(a + b * m * n, col.data(), m, n);
    gesdd(jobz, &mi, &ni, col.data(), &mi, s + b * k, ucol.data(), &ldu, vcol.data(), &ldvt,
          work.data(), &lwork, iwork.data(), &info);
    KILN_CHECK(info == 0, value, "[{}] the algorithm failed to converge{} (LAPACK error code {})",
               op, batch > 1 ? fmt::format(" for batch element {}", b) : "", info);
    transpose_into(ucol.data(), u + b * m * ucols, ucols, m);
    transpose_into(vcol.data(), vh + b * vrows * n, n, vrows);
  }
}

template void eigh<float>(const float*, float*, float*, int64_t, int64_t, char, const char*);
template void eigh<double>(const double*, double*, double*, int64_t, int64_t, char, const char*);
template void svd<float>(const float*, float*, float*, float*, int64_t, int64_t, int64_t, bool,
                         const char*);
template void svd<double>(const double*, double*, double*, double*, int64_t, int64_t, int64_t, bool,
                          const char*);

}  // namespace kiln::cpu::lapack
