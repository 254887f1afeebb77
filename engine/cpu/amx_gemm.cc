#include "engine/cpu/amx_gemm.h"

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/cpu/vector_types.h"

// The AVX-512 set's instructions (the epilogues) and the three AMX extensions.
#define RNNSERVE_TARGET_AMX RNNSERVE_TARGET_AVX512 ",amx-tile,amx-bf16,amx-int8"

namespace rnnserve::engine::cpu {
namespace {

// ldtilecfg's 64-byte operand (palette 1: eight tiles of at most 16 rows of 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes a row, per tile
  uint8_t rows[16] = {};
};

// GCC's tile intrinsics are asm statements that do not say which memory they read: a barrier
// keeps the stores that wrote A, the configuration and the scratch before them.
inline void CompilerBarrier() { asm volatile("" ::: "memory"); }

// Tiles 0-3 are C; with two row tiles, 4-5 are A and 6-7 B; with one, 4 is A and 5-7 B.
TileConfig ConfigFor(int tile_rows, bool one_row_tile) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    const bool b_tile = one_row_tile ? t >= 5 : t >= 6;
    cfg.rows[t] = static_cast<uint8_t>(b_tile ? kAmxDepth : tile_rows);
  }
  return cfg;
}

// Where C tile (row0, group g) goes: group g is columns [16 g, 16 g + 16) of C.
struct TileOut {
  int rows;  // valid rows (<= the tile's)
  int cols;  // valid columns; <= 0: the tile is past n
  int64_t row0, col0;
};

TileOut OutFor(const AmxOperands& op, int64_t row0, int g, int tile_rows) {
  return {static_cast<int>(std::min<int64_t>(tile_rows, op.m - row0)), std::min(16, op.n - 16 * g),
          row0, int64_t{16} * g};
}

// A tile stored at `tmp` (16 rows of 64 bytes) into C: copied (BF16) or dequantised (INT8) as
// the avx512 kernels do, 16 lanes at once: sa * sw * float(sum - za * colsum). The weights'
// scales and column sums are padded to whole panels, so 16 lanes are always there to load.
__attribute__((target(RNNSERVE_TARGET_AVX512))) void Epilogue(const AmxOperands& op,
                                                              const Int8Dequant* dq,
                                                              const unsigned char* tmp,
                                                              const TileOut& o) {
  const size_t bytes = sizeof(float) * o.cols;
  if (dq == nullptr) {
    for (int r = 0; r < o.rows; ++r) {
      std::memcpy(op.c + (o.row0 + r) * op.ldc + o.col0, tmp + 64 * r, bytes);
    }
    return;
  }
  F16 ws;
  I16 cs;
  std::memcpy(&ws, dq->w_scale + o.col0, sizeof(ws));
  std::memcpy(&cs, dq->w_colsum + o.col0, sizeof(cs));
  for (int r = 0; r < o.rows; ++r) {
    I16 sum;
    std::memcpy(&sum, tmp + 64 * r, sizeof(sum));
    const float sa = dq->a_scale[o.row0 + r];
    const int32_t za = dq->a_zero[o.row0 + r];
    const F16 f = sa * ws * __builtin_convertvector(sum - za * cs, F16);
    float* out = op.c + (o.row0 + r) * op.ldc + o.col0;
    if (o.cols == 16) {
      std::memcpy(out, &f, sizeof(f));
    } else {
      std::memcpy(out, &f, bytes);
    }
  }
}

// Tile T into C at (ROW0, group G): straight to C where it is a whole BF16 tile, else through
// the scratch tile.
#define RNNSERVE_AMX_STORE(T, ROW0, G)                              \
  do {                                                              \
    const TileOut o = OutFor(op, ROW0, G, r);                       \
    if (o.cols <= 0) break;                                         \
    if (!kInt8 && o.cols == 16 && o.rows == r) {                    \
      _tile_stored(T, op.c + o.row0 * op.ldc + o.col0, op.ldc * 4); \
    } else {                                                        \
      _tile_stored(T, tmp, 64);                                     \
      Epilogue(op, dq, tmp, o);                                     \
    }                                                               \
  } while (0)

// One tile multiply-add: BF16 pairs (TDPBF16PS) or uint8 x int8 quads (TDPBUSD).
#define RNNSERVE_AMX_DP(D, A, B) \
  do {                           \
    if constexpr (kInt8) {       \
      _tile_dpbusd(D, A, B);     \
    } else {                     \
      _tile_dpbf16ps(D, A, B);   \
    }                            \
  } while (0)

template <bool kInt8>
__attribute__((target(RNNSERVE_TARGET_AMX))) void AmxGemm(const AmxOperands& op,
                                                          const Int8Dequant* dq) {
  const AmxRowTiles rt = AmxRowTilesFor(op.m);
  const int r = rt.tile_rows;
  const int num_panels = (op.n + kPanel - 1) / kPanel;
  const long lda = static_cast<long>(op.lda);
  const unsigned char* a = op.a;
  auto panel_index = [&](int q) { return op.backwards ? num_panels - 1 - q : q; };
  auto panel = [&](int q) {
    return static_cast<const unsigned char*>(op.panels) + panel_index(q) * op.panel_bytes;
  };
  alignas(64) unsigned char tmp[16 * 64];
  const TileConfig cfg = ConfigFor(r, rt.tiles == 1);
  CompilerBarrier();
  // GCC's _tile_loadconfig names 8 of the 64 bytes it reads: this says all of them are.
  asm volatile("" ::"m"(cfg));
  _tile_loadconfig(&cfg);
  if (rt.tiles == 1) {
    // One row tile (a small batch): two panels at a time, four accumulators in flight. The B
    // tiles rotate through 5-7.
    int q = 0;
    for (; q + 1 < num_panels; q += 2) {
      const unsigned char* b0 = panel(q);
      const unsigned char* b1 = panel(q + 1);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int d = 0; d < op.depth; d += kAmxDepth) {
        _tile_loadd(4, a + 4 * d, lda);
        _tile_loadd(5, b0 + 128 * d, 128);
        RNNSERVE_AMX_DP(0, 4, 5);
        _tile_loadd(6, b0 + 128 * d + 64, 128);
        RNNSERVE_AMX_DP(1, 4, 6);
        _tile_loadd(7, b1 + 128 * d, 128);
        RNNSERVE_AMX_DP(2, 4, 7);
        _tile_loadd(5, b1 + 128 * d + 64, 128);
        RNNSERVE_AMX_DP(3, 4, 5);
      }
      const int g0 = 2 * panel_index(q), g1 = 2 * panel_index(q + 1);
      RNNSERVE_AMX_STORE(0, 0, g0);
      RNNSERVE_AMX_STORE(1, 0, g0 + 1);
      RNNSERVE_AMX_STORE(2, 0, g1);
      RNNSERVE_AMX_STORE(3, 0, g1 + 1);
    }
    if (q < num_panels) {
      const unsigned char* b = panel(q);
      _tile_zero(0);
      _tile_zero(1);
      for (int d = 0; d < op.depth; d += kAmxDepth) {
        _tile_loadd(4, a + 4 * d, lda);
        _tile_loadd(5, b + 128 * d, 128);
        _tile_loadd(6, b + 128 * d + 64, 128);
        RNNSERVE_AMX_DP(0, 4, 5);
        RNNSERVE_AMX_DP(1, 4, 6);
      }
      const int g = 2 * panel_index(q);
      RNNSERVE_AMX_STORE(0, 0, g);
      RNNSERVE_AMX_STORE(1, 0, g + 1);
    }
  } else {
    // Row tiles in pairs against one panel's two column groups: 2 x 2 accumulators, each A and
    // B tile used twice.
    for (int q = 0; q < num_panels; ++q) {
      const unsigned char* b = panel(q);
      const int g = 2 * panel_index(q);
      int t = 0;
      for (; t + 1 < rt.tiles; t += 2) {
        const unsigned char* a0 = a + static_cast<int64_t>(t) * r * lda;
        const unsigned char* a1 = a0 + static_cast<int64_t>(r) * lda;
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int d = 0; d < op.depth; d += kAmxDepth) {
          _tile_loadd(4, a0 + 4 * d, lda);
          _tile_loadd(6, b + 128 * d, 128);
          RNNSERVE_AMX_DP(0, 4, 6);
          _tile_loadd(7, b + 128 * d + 64, 128);
          RNNSERVE_AMX_DP(1, 4, 7);
          _tile_loadd(5, a1 + 4 * d, lda);
          RNNSERVE_AMX_DP(2, 5, 6);
          RNNSERVE_AMX_DP(3, 5, 7);
        }
        const int64_t row0 = static_cast<int64_t>(t) * r;
        RNNSERVE_AMX_STORE(0, row0, g);
        RNNSERVE_AMX_STORE(1, row0, g + 1);
        RNNSERVE_AMX_STORE(2, row0 + r, g);
        RNNSERVE_AMX_STORE(3, row0 + r, g + 1);
      }
      if (t < rt.tiles) {
        const unsigned char* a0 = a + static_cast<int64_t>(t) * r * lda;
        _tile_zero(0);
        _tile_zero(1);
        for (int d = 0; d < op.depth; d += kAmxDepth) {
          _tile_loadd(4, a0 + 4 * d, lda);
          _tile_loadd(6, b + 128 * d, 128);
          _tile_loadd(7, b + 128 * d + 64, 128);
          RNNSERVE_AMX_DP(0, 4, 6);
          RNNSERVE_AMX_DP(1, 4, 7);
        }
        const int64_t row0 = static_cast<int64_t>(t) * r;
        RNNSERVE_AMX_STORE(0, row0, g);
        RNNSERVE_AMX_STORE(1, row0, g + 1);
      }
    }
  }
  _tile_release();
  CompilerBarrier();
}
#undef RNNSERVE_AMX_DP
#undef RNNSERVE_AMX_STORE

// Why this process cannot run AMX, "" when it can: CPUID leaf 7 EDX has AMX-BF16 (bit 22),
// AMX-TILE (24) and AMX-INT8 (25); the OS has turned on XSAVE (leaf 1 ECX bit 27) with the tile
// configuration and data (XCR0 bits 17 and 18); Linux (5.16 and later) hands the 8 KiB tile data
// state to a process only when asked, and without it the first tile instruction is a SIGILL.
std::string WhyNoAmx() {
  unsigned eax, ebx, ecx, edx;
  constexpr unsigned kAmx = (1u << 22) | (1u << 24) | (1u << 25);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & kAmx) != kAmx) {
    return "CPUID reports no amx_tile, amx_bf16 and amx_int8";
  }
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) {
    return "the OS has not enabled XSAVE";
  }
  unsigned xcr0_lo, xcr0_hi;
  asm volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  if ((xcr0_lo & kTileState) != kTileState) return "the OS has not enabled the tile state (XCR0)";
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return absl::StrCat("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: ",
                        std::strerror(errno));
  }
  return "";
#else
  return "only Linux's arch_prctl permission is implemented";
#endif
}

}  // namespace

const std::string& AmxUnavailableReason() {
  static const std::string* why = new std::string(WhyNoAmx());
  return *why;
}

bool AmxAvailable() { return AmxUnavailableReason().empty(); }

AmxRowTiles AmxRowTilesFor(int64_t m) {
  const int64_t tiles = std::max<int64_t>(1, (m + 15) / 16);
  return {static_cast<int>((m + tiles - 1) / tiles), static_cast<int>(tiles)};
}

void AmxGemmBf16(const AmxOperands& op) { AmxGemm<false>(op, nullptr); }

void AmxGemmInt8(const AmxOperands& op, const Int8Dequant& dq) { AmxGemm<true>(op, &dq); }

}  // namespace rnnserve::engine::cpu
