// A main() for a libFuzzer target built without libFuzzer (any compiler): runs the target on
// every file of the given corpus directories, then on `--mutations N` inputs made from them by
// random byte edits (fixed seed: the same run every time). ctest runs it on the committed
// corpora, so CI replays them and a short mutation run on every build; the long coverage-guided
// runs are tests/fuzz/run_fuzz.sh (clang).
//
//   <target>_replay [--mutations N] [--seed S] DIR...

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// One to four edits: flip a bit, set a byte to an edge value, insert or erase a run, or copy a
// run from elsewhere in the input.
std::string Mutate(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t n = s.size();
    const size_t at = n == 0 ? 0 : rng() % n;
    switch (rng() % 5) {
      case 0:
        if (n > 0) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1: {
        static const unsigned char kEdges[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
        if (n > 0) s[at] = static_cast<char>(kEdges[rng() % sizeof(kEdges)]);
        break;
      }
      case 2:
        s.insert(at, 1 + rng() % 8, static_cast<char>(rng()));
        break;
      case 3:
        if (n > 0) s.erase(at, 1 + rng() % std::min<size_t>(n - at, 16));
        break;
      default:
        if (n > 1) {
          const size_t from = rng() % n;
          const size_t len = 1 + rng() % std::min<size_t>(n - from, 32);
          s.insert(at, s.substr(from, len));
        }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  uint64_t seed = 1;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) {
      mutations = std::strtol(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::error_code ec;
      for (const auto& entry : std::filesystem::directory_iterator(argv[i], ec)) {
        if (!entry.is_regular_file()) continue;
        std::ifstream in(entry.path(), std::ios::binary);
        inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
      if (ec) {
        std::fprintf(stderr, "%s: %s\n", argv[i], ec.message().c_str());
        return 2;
      }
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no corpus files given\n");
    return 2;
  }
  for (const std::string& input : inputs) Run(input);
  std::mt19937_64 rng(seed);
  for (long m = 0; m < mutations; ++m) Run(Mutate(inputs[rng() % inputs.size()], rng));
  std::printf("%zu corpus inputs and %ld mutations ran\n", inputs.size(), mutations);
  return 0;
}
