// The input projection's floor on the GPU: cuBLAS SGEMM (exact FP32, the fused kernels'
// projection) at the shapes of issue #18's rows, with W as stored (TN) and pre-transposed (NN),
// and every algorithm cublasLt's heuristic offers for the TN shape (those with a workspace
// split K, and differ from SGEMM by their summation order). Not part of the build:
//
//   nvcc -O2 -arch=sm_90 bench/gpu_projection_floor.cu -lcublasLt -lcublas -o gemm_floor
//
// M = gates * H * directions, N = B * T, K = I; times are medians of 32 runs, CUDA events.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
template <typename F>
float Time(F f) {
  cudaEvent_t s, e;
  cudaEventCreate(&s);
  cudaEventCreate(&e);
  std::vector<float> t;
  for (int r = 0; r < 40; ++r) {
    cudaEventRecord(s);
    f();
    cudaEventRecord(e);
    cudaEventSynchronize(e);
    float ms;
    cudaEventElapsedTime(&ms, s, e);
    if (r >= 8) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
int main() {
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  int shapes[][3] = {{2048, 6400, 512}, {4096, 6400, 512}, {4096, 6400, 1024}, {2048, 800, 512}};
  void* ws;
  size_t wsb = 64 << 20;
  cudaMalloc(&ws, wsb);
  for (auto& sh : shapes) {
    int M = sh[0], N = sh[1], K = sh[2];
    float *A, *At, *B, *C, *C2;
    cudaMalloc(&A, 4ull * M * K);
    cudaMalloc(&At, 4ull * M * K);
    cudaMalloc(&B, 4ull * K * N);
    cudaMalloc(&C, 4ull * M * N);
    cudaMalloc(&C2, 4ull * M * N);
    std::vector<float> ha(M * (size_t)K), hb(K * (size_t)N), hat(M * (size_t)K);
    for (size_t i = 0; i < ha.size(); ++i) ha[i] = ((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < hb.size(); ++i) hb[i] = ((i * 40503u) % 1000) / 1000.0f - 0.5f;
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) hat[(size_t)k * M + m] = ha[(size_t)m * K + k];
    cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(At, hat.data(), hat.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice);
    const float one = 1, zero = 0;
    const double fl = 2.0 * M * N * K;
    float tn = Time(
        [&] { cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &one, A, K, B, K, &zero, C, M); });
    float nn = Time([&] {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, At, M, B, K, &zero, C2, M);
    });
    printf("M=%d N=%d K=%d sgemm TN %.4f (%.1f TF) NN %.4f (%.1f TF)\n", M, N, K, tn, fl / tn / 1e9,
           nn, fl / nn / 1e9);
    // cublasLt, TN, every heuristic algorithm
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F_PEDANTIC, CUDA_R_32F);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, K, M, K);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, K, N, K);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, M, N, M);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                         sizeof(wsb));
    cublasLtMatmulHeuristicResult_t res[16];
    int n = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, res, &n);
    std::vector<float> ref(M * (size_t)N), got(M * (size_t)N);
    cudaMemcpy(ref.data(), C, ref.size() * 4, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) {
      float t = Time([&] {
        cublasLtMatmul(lt, op, &one, A, la, B, lb, &zero, C2, lc, C2, lc, &res[i].algo, ws, wsb, 0);
      });
      cudaMemcpy(got.data(), C2, got.size() * 4, cudaMemcpyDeviceToHost);
      double md = 0;
      for (size_t j = 0; j < got.size(); ++j)
        md = std::max(md, (double)std::abs(got[j] - ref[j]) / (std::abs(ref[j]) + 1e-3));
      printf("  lt algo %d: %.4f ms (%.1f TF) ws %zu max rel diff vs sgemm %.2g\n", i, t,
             fl / t / 1e9, res[i].workspaceSize, md);
    }
    cudaFree(A);
    cudaFree(At);
    cudaFree(B);
    cudaFree(C);
    cudaFree(C2);
  }
}
