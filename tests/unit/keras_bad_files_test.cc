// Broken Keras files give a load error that names the file and the problem, never a crash and
// never a half-loaded model. The bad files are made here from good fixtures.

#include <hdf5.h>
#include <zip.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "models/keras/keras_zip.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

namespace fs = std::filesystem;
using testing::SourcePath;

constexpr char kH5[] = "tests/fixtures/keras/Keras2LstmLastOutput/model.h5";
constexpr char kKeras[] = "tests/fixtures/keras/Keras3LstmHardSigmoid/model.keras";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A path in the temporary directory that no other test uses (ctest runs tests in parallel).
fs::path TempPath(const std::string& name) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return fs::path(::testing::TempDir()) / (std::string(test->name()) + "_" + name);
}

std::string Temp(const std::string& name, const std::string& bytes) {
  const fs::path p = TempPath(name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

std::string CopyOf(const std::string& relative, const std::string& name) {
  return Temp(name, ReadAll(SourcePath(relative)));
}

// Expects a failed load whose message names the file and contains `problem`.
void ExpectLoadError(const std::string& path, const std::string& problem) {
  auto m = models::LoadModelFile(path);
  ASSERT_FALSE(m.ok()) << path << " loaded";
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find(fs::path(path).filename().string()), std::string::npos) << msg;
  EXPECT_NE(msg.find(problem), std::string::npos) << msg;
}

// Runs `edit` on an HDF5 file opened for writing.
template <typename F>
void EditH5(const std::string& path, F edit) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  edit(f);
  H5Fclose(f);
}

constexpr char kKernel[] = "/model_weights/lstm/lstm/lstm_cell/kernel:0";

TEST(KerasBadFiles, TruncatedH5) {
  const std::string bytes = ReadAll(SourcePath(kH5));
  ExpectLoadError(Temp("truncated.h5", bytes.substr(0, bytes.size() / 2)), "truncated");
}

TEST(KerasBadFiles, WrongMagicH5) {
  ExpectLoadError(Temp("magic.h5", std::string(4096, 'x')), "not an HDF5 file");
}

TEST(KerasBadFiles, EmptyFile) {
  ExpectLoadError(Temp("empty.h5", ""), "not an HDF5 file");
  ExpectLoadError(Temp("empty.keras", ""), "not a valid .keras zip");
}

TEST(KerasBadFiles, MissingLayerGroupNamesTheLayer) {
  const std::string path = CopyOf(kH5, "missing_group.h5");
  EditH5(path, [](hid_t f) { ASSERT_GE(H5Ldelete(f, "/model_weights/lstm", H5P_DEFAULT), 0); });
  ExpectLoadError(path, "layer 'lstm'");
}

TEST(KerasBadFiles, MissingWeightDatasetIsNamed) {
  const std::string path = CopyOf(kH5, "missing_dataset.h5");
  EditH5(path, [](hid_t f) { ASSERT_GE(H5Ldelete(f, kKernel, H5P_DEFAULT), 0); });
  ExpectLoadError(path, "missing dataset");
}

TEST(KerasBadFiles, MissingModelConfigSaysWeightsOnly) {
  const std::string path = CopyOf(kH5, "no_config.h5");
  EditH5(path, [](hid_t f) { ASSERT_GE(H5Adelete(f, "model_config"), 0); });
  ExpectLoadError(path, "no model_config");
}

TEST(KerasBadFiles, MalformedModelConfigJson) {
  const std::string path = CopyOf(kH5, "bad_json.h5");
  EditH5(path, [](hid_t f) {
    H5Adelete(f, "model_config");
    const std::string text = "{\"class_name\": \"Sequential\", \"config\": {\"layers\": [";
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text.size());
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "model_config", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, text.data());
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
  });
  ExpectLoadError(path, "invalid JSON");
}

// Replaces `dataset` with a float dataset of `dims` holding `fill`.
void Replace(hid_t f, const char* dataset, std::vector<hsize_t> dims, float fill,
             bool chunked = false) {
  ASSERT_GE(H5Ldelete(f, dataset, H5P_DEFAULT), 0);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    std::vector<hsize_t> chunk(dims.size(), 1);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  }
  const hid_t d = H5Dcreate2(f, dataset, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  if (!chunked) {
    hsize_t n = 1;
    for (hsize_t x : dims) n *= x;
    std::vector<float> v(n, fill);
    v[0] = 0.25f;
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  }
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

TEST(KerasBadFiles, KernelShapeMismatchNamesLayerAndExpectedShape) {
  const std::string path = CopyOf(kH5, "shape.h5");
  EditH5(path, [](hid_t f) { Replace(f, kKernel, {4, 20}, 0.5f); });
  ExpectLoadError(path, "expected [I, 28]");
}

TEST(KerasBadFiles, NanWeightsAreRefused) {
  const std::string path = CopyOf(kH5, "nan.h5");
  EditH5(path, [](hid_t f) {
    Replace(f, kKernel, {4, 28}, std::numeric_limits<float>::quiet_NaN());
  });
  ExpectLoadError(path, "non-finite");
}

TEST(KerasBadFiles, HugeDeclaredDatasetSizeIsRefusedUnread) {
  const std::string path = CopyOf(kH5, "huge.h5");
  EditH5(path, [](hid_t f) { Replace(f, kKernel, {hsize_t{1} << 20, hsize_t{1} << 20}, 0, true); });
  ExpectLoadError(path, "implausible size");
}

// Writes a zip holding `entries` (name -> bytes).
std::string MakeZip(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>& entries) {
  const std::string path = TempPath(name).string();
  fs::remove(path);
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  EXPECT_NE(z, nullptr);
  std::vector<std::string> keep;
  keep.reserve(entries.size());
  for (const auto& [entry, bytes] : entries) {
    keep.push_back(bytes);
    zip_source_t* s = zip_source_buffer(z, keep.back().data(), keep.back().size(), 0);
    EXPECT_GE(zip_file_add(z, entry.c_str(), s, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8), 0) << entry;
  }
  EXPECT_EQ(zip_close(z), 0);
  return path;
}

// The members of the good .keras fixture.
std::vector<std::pair<std::string, std::string>> GoodMembers() {
  std::vector<std::pair<std::string, std::string>> out;
  int err = 0;
  zip_t* z = zip_open(SourcePath(kKeras).c_str(), ZIP_RDONLY, &err);
  for (const char* name : {"config.json", "metadata.json", "model.weights.h5"}) {
    zip_stat_t st;
    zip_stat(z, name, 0, &st);
    std::string bytes(st.size, '\0');
    zip_file_t* f = zip_fopen(z, name, 0);
    zip_fread(f, bytes.data(), st.size);
    zip_fclose(f);
    out.emplace_back(name, bytes);
  }
  zip_discard(z);
  return out;
}

TEST(KerasBadFiles, RebuiltGoodZipLoads) {
  auto m = models::LoadModelFile(MakeZip("good.keras", GoodMembers()));
  EXPECT_TRUE(m.ok()) << m.status();
}

TEST(KerasBadFiles, TruncatedKerasZip) {
  const std::string bytes = ReadAll(SourcePath(kKeras));
  ExpectLoadError(Temp("truncated.keras", bytes.substr(0, bytes.size() * 2 / 3)),
                  "not a valid .keras zip");
}

TEST(KerasBadFiles, WrongMagicKeras) {
  ExpectLoadError(CopyOf(kH5, "h5_named.keras"), "not a valid .keras zip");
}

TEST(KerasBadFiles, ZipWithoutConfigJson) {
  auto members = GoodMembers();
  members.erase(members.begin());
  ExpectLoadError(MakeZip("no_config.keras", members), "no config.json");
}

TEST(KerasBadFiles, ZipPathTraversalIsRefused) {
  for (const char* evil : {"../evil.txt", "assets/../../evil.txt", "/etc/evil"}) {
    auto members = GoodMembers();
    members.emplace_back(evil, "x");
    ExpectLoadError(MakeZip("traversal.keras", members), "unsafe path");
  }
}

TEST(KerasBadFiles, ZipBombIsRefusedBeforeInflating) {
  auto members = GoodMembers();
  members.emplace_back("assets/padding.bin", std::string(size_t{32} << 20, '\0'));
  ExpectLoadError(MakeZip("bomb.keras", members), "zip bomb");
}

TEST(KerasBadFiles, OversizedDeclaredEntryIsRefused) {
  models::keras::ZipLimits limits;
  limits.max_json_bytes = 16;  // smaller than the real config.json
  const std::string bytes = ReadAll(SourcePath(kKeras));
  auto m = models::keras::LoadKerasZipBytes(bytes, "limits.keras", limits);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("more than the limit"), std::string::npos) << m.status();
}

TEST(KerasBadFiles, WeightsMemberThatIsNotHdf5) {
  auto members = GoodMembers();
  members[2].second = "definitely not hdf5";
  ExpectLoadError(MakeZip("bad_weights.keras", members), "not an HDF5 file");
}

TEST(KerasBadFiles, MissingVariableInKerasWeights) {
  auto members = GoodMembers();
  const std::string h5 = Temp("weights_edit.h5", members[2].second);
  EditH5(h5, [](hid_t f) { ASSERT_GE(H5Ldelete(f, "/layers/lstm/cell/vars/1", H5P_DEFAULT), 0); });
  members[2].second = ReadAll(h5);
  ExpectLoadError(MakeZip("missing_var.keras", members), "variable 1 is missing");
}

}  // namespace
}  // namespace rnnserve
