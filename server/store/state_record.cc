#include "server/store/state_record.h"

#include <cstring>
#include <variant>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server::store {
namespace {

static_assert(ABSL_IS_LITTLE_ENDIAN,
              "the record format is little-endian; so is every host we build for");
static_assert(sizeof(float) == 4);

constexpr char kMagic[4] = {'R', 'N', 'S', 'Q'};
constexpr uint32_t kMaxRank = 4;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}
void PutString(std::string* out, absl::string_view s) {
  Put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

// Reads from an untrusted buffer; every read checks what is left.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  template <typename T>
  bool Get(T* v) {
    if (rest_.size() < sizeof(T)) return false;
    std::memcpy(v, rest_.data(), sizeof(T));
    rest_.remove_prefix(sizeof(T));
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n = 0;
    if (!Get(&n) || rest_.size() < n) return false;
    s->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  bool GetBytes(size_t n, void* to) {
    if (rest_.size() < n) return false;
    std::memcpy(to, rest_.data(), n);
    rest_.remove_prefix(n);
    return true;
  }
  size_t left() const { return rest_.size(); }

 private:
  absl::string_view rest_;
};

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("sequence record from the store is invalid: ", what));
}

}  // namespace

StateShapes StateShapesOf(const engine::Model& model) {
  StateShapes shapes;
  for (const engine::Layer& layer : model.layers) {
    const auto* r = std::get_if<engine::RecurrentSpec>(&layer.spec);
    if (r == nullptr) continue;
    std::vector<engine::Shape>& s = shapes[layer.name];
    for (size_t d = 0; d < r->directions.size(); ++d) {
      s.push_back({1, r->output_size()});
      if (r->cell == engine::CellType::kLstm) s.push_back({1, r->hidden_size});
    }
  }
  return shapes;
}

std::string EncodeRecord(const SequenceRecord& record) {
  std::string out;
  size_t floats = 0;
  for (const auto& [name, states] : record.states) {
    for (const engine::Tensor& t : states) floats += static_cast<size_t>(t.num_elements());
  }
  out.reserve(64 + record.owner.size() + record.client.size() + 4 * floats +
              64 * record.states.size());
  out.append(kMagic, sizeof(kMagic));
  Put<uint16_t>(&out, kRecordFormat);
  Put<uint16_t>(&out, 0);
  Put<int64_t>(&out, record.model_version);
  Put<int64_t>(&out, record.steps);
  Put<uint64_t>(&out, record.epoch);
  PutString(&out, record.owner);
  PutString(&out, record.client);
  Put<uint32_t>(&out, static_cast<uint32_t>(record.states.size()));
  for (const auto& [name, states] : record.states) {
    PutString(&out, name);
    Put<uint32_t>(&out, static_cast<uint32_t>(states.size()));
    for (const engine::Tensor& t : states) {
      Put<uint32_t>(&out, static_cast<uint32_t>(t.rank()));
      for (int64_t d : t.shape()) Put<int64_t>(&out, d);
      out.append(reinterpret_cast<const char*>(t.f32()),
                 static_cast<size_t>(t.num_elements()) * sizeof(float));
    }
  }
  return out;
}

namespace {

// The header; *layers: how many layers of states follow in `in`.
absl::StatusOr<SequenceRecord> ReadHeader(Reader& in, uint32_t* layers) {
  char magic[4];
  if (!in.GetBytes(sizeof(magic), magic) || std::memcmp(magic, kMagic, sizeof(magic)) != 0) {
    return Bad("it does not start with \"RNSQ\"");
  }
  uint16_t format = 0, flags = 0;
  if (!in.Get(&format) || !in.Get(&flags)) return Bad("truncated header");
  if (format != kRecordFormat) {
    return Bad(absl::StrCat("format version ", format, "; this server reads ", kRecordFormat));
  }
  SequenceRecord r;
  if (!in.Get(&r.model_version) || !in.Get(&r.steps) || !in.Get(&r.epoch) ||
      !in.GetString(&r.owner) || !in.GetString(&r.client) || !in.Get(layers)) {
    return Bad("truncated header");
  }
  if (r.steps < 0) return Bad(absl::StrCat("negative steps ", r.steps));
  return r;
}

}  // namespace

absl::StatusOr<SequenceRecord> DecodeHeader(absl::string_view bytes) {
  Reader in(bytes);
  uint32_t layers = 0;
  return ReadHeader(in, &layers);
}

absl::StatusOr<SequenceRecord> DecodeRecord(absl::string_view bytes, const StateShapes& shapes) {
  Reader in(bytes);
  uint32_t layers = 0;
  auto header = ReadHeader(in, &layers);
  if (!header.ok()) return header.status();
  SequenceRecord r = *std::move(header);
  if (layers > shapes.size()) {
    return Bad(absl::StrCat(layers, " layers of states; the model has ", shapes.size()));
  }
  for (uint32_t l = 0; l < layers; ++l) {
    std::string name;
    uint32_t count = 0;
    if (!in.GetString(&name) || !in.Get(&count)) return Bad("truncated layer header");
    const auto want = shapes.find(name);
    if (want == shapes.end()) {
      return Bad(absl::StrCat("states for '", name, "', which is no recurrent layer of the model"));
    }
    if (count != want->second.size() || r.states.count(name) > 0) {
      return Bad(absl::StrCat("layer '", name, "' has ", count, " states, expected ",
                              want->second.size()));
    }
    std::vector<engine::Tensor>& states = r.states[name];
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t rank = 0;
      if (!in.Get(&rank) || rank == 0 || rank > kMaxRank) return Bad("bad state rank");
      engine::Shape shape(rank);
      for (int64_t& d : shape) {
        if (!in.Get(&d)) return Bad("truncated state shape");
      }
      if (shape != want->second[i]) {
        return Bad(absl::StrCat("layer '", name, "' state ", i, " is ", engine::ShapeString(shape),
                                ", expected ", engine::ShapeString(want->second[i])));
      }
      const size_t n = static_cast<size_t>(engine::NumElements(shape));
      if (in.left() < n * sizeof(float)) return Bad("truncated state values");
      engine::Tensor t = engine::Tensor::Float(shape);
      in.GetBytes(n * sizeof(float), t.f32());
      states.push_back(std::move(t));
    }
  }
  if (in.left() != 0) return Bad(absl::StrCat(in.left(), " bytes after the last state"));
  return r;
}

}  // namespace rnnserve::server::store
