#include "engine/cpu/quant_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cpu/amx_gemm.h"
#include "engine/cpu/quant_kernels.h"

namespace rnnserve::engine::cpu {
namespace {

constexpr int64_t kRowBlock = 120;  // rows of A converted at once, kept hot across the panels
// AMX: 16 whole row tiles (256 KiB of A at H=512, in L2), so each panel of B is read from
// memory half as often as with 120 rows.
constexpr int64_t kAmxRowBlock = 256;

CpuKernelSet ActiveSet() {
  const auto set = ActiveCpuKernelSet();
  return set.ok() ? *set : CpuKernelSet::kPlain;
}

bool CpuHasBf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}

bool CpuHasVnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") != 0;
}

const Bf16Table& Bf16Kernels() {
  static const Bf16Table& table = Bf16TableFor(ActiveSet(), CpuHasBf16());
  return table;
}

const Int8Table& Int8Kernels() {
  static const Int8Table& table = Int8TableFor(ActiveSet(), CpuHasVnni());
  return table;
}

// Whether PackedWeights run on AMX tiles (their panels then padded to whole tile depths).
bool AmxRuns() { return ActiveSet() == CpuKernelSet::kAmx; }

// Depth words (pairs or quads) a panel stores: padded to whole tiles where AMX runs.
int PanelDepth(int words, bool amx) {
  return amx ? (words + kAmxDepth - 1) / kAmxDepth * kAmxDepth : words;
}

uint16_t ToBf16(float x) { return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(x)); }

// Calls tile(i, rows, p, cols) for every micro-tile of rows [i0, i1) (equal heights of at most
// max_rows, as PanelGemm cuts them) and every panel p, in the panel order `backwards` asks.
template <typename Tile>
void ForEachTile(int64_t i0, int64_t i1, int n, int max_rows, bool backwards, Tile&& tile) {
  const int num_panels = (n + kPanel - 1) / kPanel;
  const int64_t tiles = (i1 - i0 + max_rows - 1) / max_rows;
  for (int q = 0; q < num_panels; ++q) {
    const int p = backwards ? num_panels - 1 - q : q;
    const int cols = std::min(kPanel, n - p * kPanel);
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t i = i0 + (i1 - i0) * t / tiles;
      const int rows = static_cast<int>(i0 + (i1 - i0) * (t + 1) / tiles - i);
      tile(i, rows, p, cols);
    }
  }
}

// Row blocks of equal height (see PanelGemm): block(i0, i1).
template <typename Block>
void ForEachRowBlock(int64_t m, Block&& block, int64_t max_rows = kRowBlock) {
  const int64_t blocks = (m + max_rows - 1) / max_rows;
  const int64_t block_rows = blocks > 0 ? (m + blocks - 1) / blocks : 0;
  for (int64_t i0 = 0; i0 < m; i0 += block_rows) block(i0, std::min(m, i0 + block_rows));
}

// Rows [i0, i1) of A rounded to bfloat16 pairs, `words` pairs a row (zero past k), and zero
// rows after them up to `rows` rows in all.
void ConvertPairs(const float* a, int64_t lda, int64_t i0, int64_t i1, int k, int words,
                  int64_t rows, GemmScratch* s) {
  const size_t bytes = static_cast<size_t>(rows) * words * 4;
  if (s->a.size() < bytes) s->a.resize(bytes);
  uint16_t* out = reinterpret_cast<uint16_t*>(s->a.data());
  for (int64_t i = i0; i < i1; ++i) {
    uint16_t* row = out + (i - i0) * 2 * words;
    for (int l = 0; l < k; ++l) row[l] = ToBf16(a[i * lda + l]);
    std::fill(row + k, row + 2 * words, uint16_t{0});
  }
  std::fill(out + (i1 - i0) * 2 * words, out + rows * 2 * words, uint16_t{0});
}

// Rows [i0, i1) of A quantised to uint8, ldq bytes a row (zero past k), each row with its own
// scale and zero point: the range [min(a, 0), max(a, 0)] onto 0 .. 255; zero rows after them
// up to `rows` rows in all.
void Quantise(const float* a, int64_t lda, int64_t i0, int64_t i1, int k, int64_t ldq, int64_t rows,
              GemmScratch* s) {
  if (s->a.size() < static_cast<size_t>(rows * ldq)) s->a.resize(rows * ldq);
  if (s->a_scale.size() < static_cast<size_t>(i1 - i0)) {
    s->a_scale.resize(i1 - i0);
    s->a_zero.resize(i1 - i0);
  }
  std::fill(s->a.data() + (i1 - i0) * ldq, s->a.data() + rows * ldq, uint8_t{0});
  for (int64_t i = i0; i < i1; ++i) {
    // Eigen's packet min, max and rint (round half to even, as std::nearbyint) vectorise what
    // would be scalar loops: at B=1 this runs on every step.
    const Eigen::Map<const Eigen::ArrayXf> x(a + i * lda, k);
    const float lo = std::min(0.0f, x.minCoeff()), hi = std::max(0.0f, x.maxCoeff());
    const float scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
    const float inv = 1.0f / scale;
    const int32_t zero = static_cast<int32_t>(std::nearbyint(-lo * inv));
    uint8_t* q = s->a.data() + (i - i0) * ldq;
    Eigen::Map<Eigen::Array<uint8_t, Eigen::Dynamic, 1>>(q, k) =
        ((x * inv).rint() + static_cast<float>(zero)).max(0.0f).min(255.0f).cast<uint8_t>();
    std::fill(q + k, q + ldq, uint8_t{0});
    s->a_scale[i - i0] = scale;
    s->a_zero[i - i0] = zero;
  }
}

}  // namespace

const char* CpuWeightsName(CpuWeights weights) {
  switch (weights) {
    case CpuWeights::kFp32:
      break;
    case CpuWeights::kBf16:
      return "bf16";
    case CpuWeights::kInt8:
      return "int8";
  }
  return "fp32";
}

std::string CpuWeightsPath(CpuWeights weights) {
  std::string vector_path;
  switch (weights) {
    case CpuWeights::kFp32:
      return "fp32";
    case CpuWeights::kBf16:
      vector_path = Bf16Kernels().pairs_a ? "avx512_bf16 vdpbf16ps" : "widened to fp32";
      if (!AmxRuns()) return absl::StrCat("bf16 (", vector_path, ")");
      return absl::StrCat("bf16 (amx_bf16 tdpbf16ps; ", vector_path, " below ", kAmxMinRows,
                          " rows)");
    case CpuWeights::kInt8:
      vector_path = &Int8Kernels() == &Int8TableFor(CpuKernelSet::kAvx512, true)
                        ? "avx512_vnni vpdpbusd"
                        : "int32 multiply-add";
      if (!AmxRuns()) return absl::StrCat("int8 (", vector_path, ")");
      return absl::StrCat("int8 (amx_int8 tdpbusd; ", vector_path, " below ", kAmxMinRows,
                          " rows)");
  }
  return "fp32";
}

PackedWeights PackedWeights::Pack(const float* b, int64_t ldb, int n, int k, CpuWeights mode) {
  PackedWeights w;
  w.mode_ = mode;
  w.n_ = n;
  w.k_ = k;
  w.amx_ = mode != CpuWeights::kFp32 && AmxRuns();
  const size_t panels = (n + kPanel - 1) / kPanel;
  switch (mode) {
    case CpuWeights::kFp32:
      w.f32_ = PackPanels(b, ldb, n, k);
      break;
    case CpuWeights::kBf16: {
      w.depth_ = PanelDepth((k + 1) / 2, w.amx_);
      const size_t k2 = w.depth_;
      w.bf16_.assign(panels * k2 * kPanel * 2, 0);
      for (int j = 0; j < n; ++j) {
        uint16_t* dst = w.bf16_.data() + (j / kPanel) * k2 * kPanel * 2 + (j % kPanel) * 2;
        for (int l = 0; l < k; ++l) dst[(l / 2) * kPanel * 2 + l % 2] = ToBf16(b[j * ldb + l]);
      }
      break;
    }
    case CpuWeights::kInt8: {
      w.depth_ = PanelDepth((k + 3) / 4, w.amx_);
      const size_t k4 = w.depth_;
      w.i8_.assign(panels * k4 * kPanel * 4, 0);
      w.scale_.assign(panels * kPanel, 0.0f);
      w.colsum_.assign(panels * kPanel, 0);
      for (int j = 0; j < n; ++j) {
        const float* row = b + j * ldb;
        float amax = 0.0f;
        for (int l = 0; l < k; ++l) amax = std::max(amax, std::abs(row[l]));
        const float scale = amax > 0.0f ? amax / 127.0f : 1.0f;
        int8_t* dst = w.i8_.data() + (j / kPanel) * k4 * kPanel * 4 + (j % kPanel) * 4;
        int32_t sum = 0;
        for (int l = 0; l < k; ++l) {
          const float q = std::clamp(std::nearbyint(row[l] / scale), -127.0f, 127.0f);
          dst[(l / 4) * kPanel * 4 + l % 4] = static_cast<int8_t>(q);
          sum += static_cast<int32_t>(q);
        }
        w.scale_[j] = scale;
        w.colsum_[j] = sum;
      }
      break;
    }
  }
  return w;
}

int64_t PackedWeights::bytes() const {
  return static_cast<int64_t>(f32_.size() * sizeof(float) + bf16_.size() * sizeof(uint16_t) +
                              i8_.size() + scale_.size() * sizeof(float) +
                              colsum_.size() * sizeof(int32_t));
}

void PackedWeights::Gemm(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc,
                         bool backwards, GemmScratch* scratch) const {
  if (n_ == 0 || m == 0) return;
  switch (mode_) {
    case CpuWeights::kFp32:
      return PanelGemm(a, lda, m, k_, f32_.data(), n_, c, ldc, backwards);
    case CpuWeights::kBf16:
      return GemmBf16(a, lda, m, c, ldc, backwards, scratch);
    case CpuWeights::kInt8:
      return GemmInt8(a, lda, m, c, ldc, backwards, scratch);
  }
}

void PackedWeights::GemmBf16(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc,
                             bool backwards, GemmScratch* scratch) const {
  const int64_t k2 = (k_ + 1) / 2;
  if (amx_ && m >= kAmxMinRows) {
    ForEachRowBlock(
        m,
        [&](int64_t i0, int64_t i1) {
          const AmxRowTiles rt = AmxRowTilesFor(i1 - i0);
          ConvertPairs(a, lda, i0, i1, k_, depth_, int64_t{rt.tiles} * rt.tile_rows, scratch);
          AmxGemmBf16({.a = scratch->a.data(),
                       .lda = int64_t{4} * depth_,
                       .m = i1 - i0,
                       .panels = bf16_.data(),
                       .panel_bytes = int64_t{4} * depth_ * kPanel,
                       .depth = depth_,
                       .n = n_,
                       .c = c + i0 * ldc,
                       .ldc = ldc,
                       .backwards = backwards});
        },
        kAmxRowBlock);
    return;
  }
  const Bf16Table& table = Bf16Kernels();
  ForEachRowBlock(m, [&](int64_t i0, int64_t i1) {
    if (table.pairs_a) ConvertPairs(a, lda, i0, i1, k_, k2, i1 - i0, scratch);
    ForEachTile(i0, i1, n_, table.max_rows, backwards, [&](int64_t i, int rows, int p, int cols) {
      const uint16_t* panel = bf16_.data() + int64_t{p} * depth_ * kPanel * 2;
      float* out = c + i * ldc + p * kPanel;
      if (table.pairs_a) {
        const uint32_t* pairs = reinterpret_cast<const uint32_t*>(scratch->a.data());
        table.by_rows[rows](pairs + (i - i0) * k2, k2, panel, k_, out, ldc, cols);
      } else {
        table.by_rows[rows](a + i * lda, lda, panel, k_, out, ldc, cols);
      }
    });
  });
}

void PackedWeights::GemmInt8(const float* a, int64_t lda, int64_t m, float* c, int64_t ldc,
                             bool backwards, GemmScratch* scratch) const {
  const int k4 = (k_ + 3) / 4;
  if (amx_ && m >= kAmxMinRows) {
    ForEachRowBlock(
        m,
        [&](int64_t i0, int64_t i1) {
          const AmxRowTiles rt = AmxRowTilesFor(i1 - i0);
          Quantise(a, lda, i0, i1, k_, int64_t{4} * depth_, int64_t{rt.tiles} * rt.tile_rows,
                   scratch);
          AmxGemmInt8({.a = scratch->a.data(),
                       .lda = int64_t{4} * depth_,
                       .m = i1 - i0,
                       .panels = i8_.data(),
                       .panel_bytes = int64_t{4} * depth_ * kPanel,
                       .depth = depth_,
                       .n = n_,
                       .c = c + i0 * ldc,
                       .ldc = ldc,
                       .backwards = backwards},
                      {.a_scale = scratch->a_scale.data(),
                       .a_zero = scratch->a_zero.data(),
                       .w_scale = scale_.data(),
                       .w_colsum = colsum_.data()});
        },
        kAmxRowBlock);
    return;
  }
  const Int8Table& table = Int8Kernels();
  const int64_t ldq = 4 * static_cast<int64_t>(k4);
  ForEachRowBlock(m, [&](int64_t i0, int64_t i1) {
    Quantise(a, lda, i0, i1, k_, ldq, i1 - i0, scratch);
    ForEachTile(i0, i1, n_, table.max_rows, backwards, [&](int64_t i, int rows, int p, int cols) {
      const Int8Dequant dq{.a_scale = scratch->a_scale.data() + (i - i0),
                           .a_zero = scratch->a_zero.data() + (i - i0),
                           .w_scale = scale_.data() + p * kPanel,
                           .w_colsum = colsum_.data() + p * kPanel};
      table.by_rows[rows](scratch->a.data() + (i - i0) * ldq, ldq,
                          i8_.data() + static_cast<int64_t>(p) * depth_ * kPanel * 4, k4, dq,
                          c + i * ldc + p * kPanel, ldc, cols);
    });
  });
}

}  // namespace rnnserve::engine::cpu
