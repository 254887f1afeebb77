#pragma once

// Subnormal floats flushed to zero on the calling thread while the guard lives: results (FTZ)
// and operands (DAZ), as TensorFlow's CPU kernels run (its thread pools set both) and as
// onnxruntime does with set_denormal_as_zero. On Intel cores every operation that produces or
// reads a subnormal takes a microcode assist of a hundred cycles or more, so a recurrent layer
// whose cell state or gate products decay towards zero can run an order of magnitude slower.
// Values below FLT_MIN (1.2e-38) become 0, far inside every tolerance the engine promises.

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace rnnserve::engine::cpu {

class ScopedFlushDenormals {
 public:
#if defined(__x86_64__) || defined(__i386__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
  ScopedFlushDenormals() = default;
#endif
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr unsigned kFlushToZero = 0x8000;     // MXCSR.FZ
  static constexpr unsigned kDenormalsAreZero = 0x40;  // MXCSR.DAZ
  const unsigned saved_;
#endif
};

}  // namespace rnnserve::engine::cpu
