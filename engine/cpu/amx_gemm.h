#pragma once

// The amx kernel set's BF16 and INT8 GEMMs (Intel AMX tiles, Sapphire Rapids and later), behind
// PackedWeights (quant_gemm.h) when ActiveCpuKernelSet() is kAmx. Internal to engine/cpu.
//
// The weights stay in PackedWeights' panels ([panel][depth][32][2] bfloat16 pairs,
// [panel][depth][32][4] int8 quads) with the depth per panel rounded up to kAmxDepth words and
// zero-filled: a B tile is 16 depth words x 16 columns, read from a panel with a row stride of
// 128 bytes (half a panel row). A is converted by the caller, row by row, to bfloat16 pairs or
// uint8 quads (quant_gemm.cc), kAmxDepth-word padded and with its rows padded with zeros to
// whole row tiles (AmxRowTiles). C tiles are 16 columns of `tile_rows` rows: TDPBF16PS sums
// the pairs' products in FP32 (round to nearest even, denormals flushed); TDPBUSD sums
// uint8 x int8 products exactly in int32, the same integers as vpdpbusd, dequantised as the
// avx512 kernels do. Each call loads its own tile configuration and releases the tiles before it
// returns. Single-threaded: callers split the columns between threads.

#include <cstdint>
#include <string>

#include "engine/cpu/quant_kernels.h"

namespace rnnserve::engine::cpu {

// Depth words (bfloat16 pairs or int8 quads) of one tile: 64 bytes a row.
inline constexpr int kAmxDepth = 16;
// Fewer rows of A than this run the avx512 kernels: a tile operation costs about as much for
// one row as for sixteen, and a vector dot product does one row's work in fewer cycles.
inline constexpr int64_t kAmxMinRows = 4;

// CPUID reports amx_tile, amx_bf16 and amx_int8, the OS enables the tile state (XCR0), and Linux
// grants this process the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
// asked for once). Thread-safe.
bool AmxAvailable();
// Which of those failed, in words; "" where AMX runs.
const std::string& AmxUnavailableReason();

// How AMX cuts m rows of A: `tiles` row tiles of `tile_rows` (<= 16) rows, heights as equal as
// whole tiles allow (20 rows are two tiles of 10). A holds tiles * tile_rows rows.
struct AmxRowTiles {
  int tile_rows;
  int tiles;
};
AmxRowTiles AmxRowTilesFor(int64_t m);

// The panels of one PackedWeights and where C goes: C[i, j] for i < m, j < n.
struct AmxOperands {
  const uint8_t* a;     // A converted: AmxRowTilesFor(m) rows, lda bytes apart
  int64_t lda;          // bytes, a multiple of 64
  int64_t m;            // rows of A and C
  const void* panels;   // PackedWeights' panels
  int64_t panel_bytes;  // bytes from one panel to the next
  int depth;            // depth words per panel, a multiple of kAmxDepth
  int n;                // columns of C
  float* c;
  int64_t ldc;     // floats
  bool backwards;  // the panels last to first (PanelGemm)
};

// C = A . B^T from bfloat16 pairs.
void AmxGemmBf16(const AmxOperands& op);
// C from uint8 A and int8 B; dq points at row 0 of A's scales and zero points and at column 0
// of the weights' scales and column sums, which hold whole panels (zero past n).
void AmxGemmInt8(const AmxOperands& op, const Int8Dequant& dq);

}  // namespace rnnserve::engine::cpu
