#include "models/keras/keras_zip.h"

#include <zip.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_json.h"

namespace rnnserve::models::keras {
namespace {

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipCloser>;

absl::Status Bad(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

bool UnsafeEntryName(const std::string& entry) {
  if (entry.empty() || entry[0] == '/' || entry.find('\\') != std::string::npos ||
      entry.find('\0') != std::string::npos) {
    return true;
  }
  if (entry.size() > 1 && entry[1] == ':') return true;  // C:...
  size_t start = 0;
  while (start <= entry.size()) {
    size_t end = entry.find('/', start);
    if (end == std::string::npos) end = entry.size();
    if (entry.compare(start, end - start, "..") == 0 && end - start == 2) return true;
    start = end + 1;
  }
  return false;
}

// Reads a member whose stat was checked against the limits.
absl::StatusOr<std::string> ReadMember(zip_t* zip, const std::string& name, zip_int64_t index,
                                       int64_t size) {
  std::unique_ptr<zip_file_t, FileCloser> f(zip_fopen_index(zip, index, 0));
  if (!f) {
    return Bad(name, absl::StrCat("cannot open zip entry ", index, ": ", zip_strerror(zip)));
  }
  std::string out(static_cast<size_t>(size), '\0');
  int64_t got = 0;
  while (got < size) {
    const zip_int64_t n =
        zip_fread(f.get(), out.data() + got, static_cast<zip_uint64_t>(size - got));
    if (n < 0) {
      return Bad(name, absl::StrCat("corrupt zip entry ", zip_get_name(zip, index, 0), ": ",
                                    zip_file_strerror(f.get())));
    }
    if (n == 0) break;
    got += n;
  }
  if (got != size) {
    return Bad(name, absl::StrCat("zip entry ", zip_get_name(zip, index, 0), " holds ", got,
                                  " bytes, its header declares ", size, " (truncated?)"));
  }
  return out;
}

absl::StatusOr<Json> ParseJson(const std::string& text, const std::string& what) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON: ", e.what()));
  }
}

// Appends the arrays of `group` (own vars by index, then sub-layers) to `out`.
absl::Status CollectVars(const Hdf5File& f, const std::string& group, int depth,
                         std::vector<Array>* out) {
  if (depth > 16) return Bad(f.path(), absl::StrCat(group, " is nested too deeply"));
  auto children = f.Children(group);
  if (!children.ok()) return children.status();
  const std::string vars = absl::StrCat(group, "/vars");
  if (f.IsGroup(vars)) {
    auto names = f.Children(vars);
    if (!names.ok()) return names.status();
    std::map<int, std::string> by_index;
    for (const std::string& n : *names) {
      int i = -1;
      if (!absl::SimpleAtoi(n, &i) || i < 0 || by_index.count(i)) {
        return Bad(f.path(), absl::StrCat(vars, "/", n, ": expected variables named 0, 1, ..."));
      }
      by_index[i] = n;
    }
    int expect = 0;
    for (const auto& [i, n] : by_index) {
      if (i != expect++) {
        return Bad(f.path(), absl::StrCat(vars, ": variable ", expect - 1, " is missing"));
      }
      auto a = f.ReadArray(absl::StrCat(vars, "/", n));
      if (!a.ok()) return a.status();
      out->push_back(std::move(*a));
    }
  }
  std::vector<std::string> subs;
  for (const std::string& c : *children) {
    if (c != "vars" && f.IsGroup(absl::StrCat(group, "/", c))) subs.push_back(c);
  }
  auto rank = [](const std::string& s) {
    return s == "forward_layer" ? 0 : s == "backward_layer" ? 1 : 2;
  };
  std::stable_sort(subs.begin(), subs.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  for (const std::string& s : subs) {
    if (auto st = CollectVars(f, absl::StrCat(group, "/", s), depth + 1, out); !st.ok()) return st;
  }
  return absl::OkStatus();
}

// Keras's naming.to_snake_case: "SimpleRNN" -> "simple_rnn", "Conv1D" -> "conv1d".
std::string ToSnakeCase(const std::string& cls) {
  std::string s;
  for (char c : cls) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') s += c;
  }
  // (.)([A-Z][a-z]+) -> \1_\2
  std::string a;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && std::isupper(static_cast<unsigned char>(s[i])) && i + 1 < s.size() &&
        std::islower(static_cast<unsigned char>(s[i + 1]))) {
      a += '_';
    }
    a += s[i];
  }
  // ([a-z])([A-Z]) -> \1_\2, then lower case.
  std::string b;
  for (size_t i = 0; i < a.size(); ++i) {
    if (i > 0 && std::islower(static_cast<unsigned char>(a[i - 1])) &&
        std::isupper(static_cast<unsigned char>(a[i]))) {
      b += '_';
    }
    b += static_cast<char>(std::tolower(static_cast<unsigned char>(a[i])));
  }
  return b;
}

}  // namespace

absl::StatusOr<WeightSource> Keras3Weights(const Hdf5File& file, const Json& model_config) {
  const std::string model_cls = Get<std::string>(model_config, "class_name", "");
  const Json* cfg = Find(model_config, "config");
  const Json* layers = cfg ? (cfg->is_array() ? cfg : Find(*cfg, "layers")) : nullptr;
  if (!layers || !layers->is_array()) {
    return Bad(file.path(), "the model config has no layer list");
  }
  std::map<std::string, std::string> key_of;  // layer name -> group under /layers
  std::map<std::string, int> used;
  for (const Json& layer : *layers) {
    const std::string cls = Get<std::string>(layer, "class_name", "");
    if (model_cls == "Sequential" && cls == "InputLayer") continue;
    const Json* lcfg = Find(layer, "config");
    const std::string name =
        Get<std::string>(layer, "name", lcfg ? Get<std::string>(*lcfg, "name", "") : "");
    std::string key = ToSnakeCase(cls);
    auto [it, fresh] = used.try_emplace(key, 0);
    if (!fresh) key = absl::StrCat(key, "_", ++it->second);
    key_of[name] = key;
  }
  return WeightSource(
      [&file, key_of](const std::string& layer) -> absl::StatusOr<std::vector<Array>> {
        std::vector<Array> arrays;
        auto it = key_of.find(layer);
        if (it == key_of.end()) {
          return Bad(file.path(), absl::StrCat("layer '", layer, "' is not in the model config"));
        }
        const std::string group = absl::StrCat("/layers/", it->second);
        if (!file.IsGroup(group)) return arrays;  // a layer without weights
        if (auto s = CollectVars(file, group, 0, &arrays); !s.ok()) return s;
        return arrays;
      });
}

namespace {

// An opened archive whose entries passed the checks; reads entries within their limits.
// `bytes` must outlive it.
class Archive {
 public:
  static absl::StatusOr<Archive> Open(const std::string& bytes, const std::string& name,
                                      const ZipLimits& limits);
  bool Has(const std::string& entry) const { return members_.count(entry) > 0; }
  absl::StatusOr<std::string> Read(const std::string& entry) const {
    const auto& [index, size] = members_.at(entry);
    return ReadMember(zip_.get(), name_, index, size);
  }

 private:
  Archive(ZipPtr zip, std::string name) : zip_(std::move(zip)), name_(std::move(name)) {}
  ZipPtr zip_;
  std::string name_;
  std::map<std::string, std::pair<zip_int64_t, int64_t>> members_;  // name -> index, size
};

absl::StatusOr<Archive> Archive::Open(const std::string& bytes, const std::string& name,
                                      const ZipLimits& limits) {
  // Local file header or end-of-central-directory signature; 22 bytes is the smallest zip.
  if (bytes.size() < 22 || bytes.compare(0, 2, "PK") != 0) {
    return Bad(name, "not a valid .keras zip archive (bad signature)");
  }
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (!src) {
    zip_error_fini(&error);
    return absl::InternalError(absl::StrCat(name, ": cannot read the archive"));
  }
  ZipPtr zip(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!zip) {
    const std::string why = zip_error_strerror(&error);
    zip_source_free(src);
    zip_error_fini(&error);
    return Bad(name, absl::StrCat("not a valid .keras zip archive (", why, ")"));
  }
  zip_error_fini(&error);
  Archive archive(std::move(zip), name);

  const zip_int64_t n = zip_get_num_entries(archive.zip_.get(), 0);
  if (n < 0 || n > limits.max_entries) {
    return Bad(name,
               absl::StrCat("zip has ", n, " entries, at most ", limits.max_entries, " expected"));
  }
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive.zip_.get(), i, 0, &st) < 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE)) {
      return Bad(name, absl::StrCat("cannot read zip entry ", i));
    }
    const std::string entry(st.name);
    if (UnsafeEntryName(entry)) {
      return Bad(name, absl::StrCat("zip entry '", entry,
                                    "' has an unsafe path (absolute or with '..'): refused"));
    }
    const int64_t size = static_cast<int64_t>(st.size);
    const bool json = entry == "config.json" || entry == "metadata.json";
    const int64_t cap = json ? limits.max_json_bytes : limits.max_weights_bytes;
    if (size > cap) {
      return Bad(name, absl::StrCat("zip entry '", entry, "' declares ", size,
                                    " bytes, more than the limit of ", cap));
    }
    if ((st.valid & ZIP_STAT_COMP_SIZE) && size > limits.ratio_floor_bytes &&
        size / std::max<int64_t>(1, static_cast<int64_t>(st.comp_size)) > limits.max_ratio) {
      return Bad(name, absl::StrCat("zip entry '", entry, "' inflates ", st.comp_size, " bytes to ",
                                    size, " (a zip bomb?): refused"));
    }
    archive.members_[entry] = {i, size};
  }
  for (const char* need : {"config.json", "model.weights.h5"}) {
    if (!archive.Has(need)) {
      return Bad(name, absl::StrCat("no ", need, " in the archive (is it a Keras 3 .keras file?)"));
    }
  }
  return archive;
}

absl::StatusOr<std::string> ReadZipFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

absl::StatusOr<engine::Model> LoadKerasZipBytes(const std::string& bytes, const std::string& name,
                                                const ZipLimits& limits) {
  auto archive = Archive::Open(bytes, name, limits);
  if (!archive.ok()) return archive.status();
  auto read = [&](const std::string& entry) { return archive->Read(entry); };
  auto has = [&](const std::string& entry) { return archive->Has(entry); };
  auto config_text = read("config.json");
  if (!config_text.ok()) return config_text.status();
  auto config = ParseJson(*config_text, absl::StrCat(name, ": config.json"));
  if (!config.ok()) return config.status();

  KerasSource source{.file = name, .format = "keras", .keras_version = "3"};
  if (has("metadata.json")) {
    auto meta_text = read("metadata.json");
    if (!meta_text.ok()) return meta_text.status();
    auto meta = ParseJson(*meta_text, absl::StrCat(name, ": metadata.json"));
    if (!meta.ok()) return meta.status();
    source.keras_version = Get<std::string>(*meta, "keras_version", "3");
  }
  auto weights_bytes = read("model.weights.h5");
  if (!weights_bytes.ok()) return weights_bytes.status();
  auto h5 = Hdf5File::OpenImage(*weights_bytes, absl::StrCat(name, ": model.weights.h5"));
  if (!h5.ok()) return h5.status();
  weights_bytes->clear();
  weights_bytes->shrink_to_fit();
  auto weights = Keras3Weights(*h5, *config);
  if (!weights.ok()) return weights.status();
  return BuildModel(*config, source, *weights);
}

absl::StatusOr<engine::Model> LoadKerasZip(const std::string& path, const LoadOptions& options) {
  auto bytes = ReadZipFile(path);
  if (!bytes.ok()) return bytes.status();
  return LoadKerasZipBytes(*bytes, path);
}

absl::StatusOr<Json> ReadKerasZipConfig(const std::string& path) {
  auto bytes = ReadZipFile(path);
  if (!bytes.ok()) return bytes.status();
  auto archive = Archive::Open(*bytes, path, ZipLimits{});
  if (!archive.ok()) return archive.status();
  auto text = archive->Read("config.json");
  if (!text.ok()) return text.status();
  return ParseJson(*text, absl::StrCat(path, ": config.json"));
}

}  // namespace rnnserve::models::keras
