// PyTorch checkpoints: a pytorch_model.bin written by torch.save (tests/data/make_pytorch_bin.py, run here with
// Debian's python3-torch) converts and reproduces the safetensors logits; the safe unpickler rejects globals and
// opcodes outside the state-dict subset, and truncated or lying archives, with errors that name the problem.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "convert/pickle.h"
#include "convert/torch_checkpoint.h"
#include "convert/zip_reader.h"
#include "tests/unit/convert_test_util.h"

namespace pipit {
namespace {

// Builds the fixture for `model` once per test run (under the build dir); "" when python3-torch is missing.
std::string torch_fixture(const std::string& model) {
#ifdef PIPIT_BINARY_DIR
  const std::string out = std::string(PIPIT_BINARY_DIR) + "/testdata/pytorch_" + model;
#else
  const std::string out = "/tmp/pipit_testdata/pytorch_" + model;
#endif
  if (file_exists(out + "/pytorch_model.bin") && file_exists(out + "/legacy.bin")) return out;
  if (std::system("/usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1") != 0) return "";
  // ctest runs these tests as separate processes in parallel: each writes a private folder and renames it into
  // place, so no test ever maps a pytorch_model.bin that another is still writing (a SIGSEGV in CI before this).
  const std::string tmp = out + ".tmp." + std::to_string(::getpid());
  const std::string cmd = std::string("/usr/bin/python3 ") + PIPIT_SOURCE_DIR + "/tests/data/make_pytorch_bin.py " +
                          test::model_dir(model) + " " + tmp + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);  // fails when another process got there first: theirs is complete
  if (ec) std::filesystem::remove_all(tmp, ec);
  return out;
}

TEST(TorchCheckpoint, BinReproducesSafetensorsLogits) {
  for (const char* model : {"qwen3", "llama"}) {
    const std::string dir = torch_fixture(model);
    if (dir.empty()) GTEST_SKIP() << "python3-torch is not installed";
    auto c = open_checkpoint(dir);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->format, "pytorch");
    bool skipped_int64 = false, copied_strided = false;
    for (auto& n : c->notes) {
      skipped_int64 |= n.find("position_ids") != std::string::npos && n.find("LongStorage") != std::string::npos;
      copied_strided |= n.find("o_proj") != std::string::npos;
    }
    EXPECT_TRUE(skipped_int64);
    EXPECT_TRUE(copied_strided);
    // fused q/k/v storage: views at storage offsets, still in the mapping
    EXPECT_NE(dynamic_cast<MmapStorage*>(c->tensors.at("model.layers.0.self_attn.k_proj.weight").storage().get()),
              nullptr);

    auto ids = test::golden_ids(model);
    LoadedModel st = test::load_or_fail(test::model_dir(model));
    LoadedModel pt = test::load_or_fail(dir);
    const auto want = test::all_logits(*st.model, ids), got = test::all_logits(*pt.model, ids);
    EXPECT_EQ(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, 0.0) << model;

    test::ScratchDir d("pt");
    test::convert_or_fail(dir, d.path("m.pipit"), "auto");
    LoadedModel pp = test::load_or_fail(d.path("m.pipit"));
    const auto conv = test::all_logits(*pp.model, ids);
    EXPECT_EQ(test::max_abs_diff(conv.data(), want.data(), int64_t(want.size())).max_abs, 0.0) << model;
  }
}

TEST(TorchCheckpoint, LegacyFormatIsRejectedClearly) {
  const std::string dir = torch_fixture("qwen3");
  if (dir.empty()) GTEST_SKIP() << "python3-torch is not installed";
  auto c = open_checkpoint(dir + "/legacy.bin");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("legacy"), std::string::npos) << c.status().message();
}

TEST(TorchCheckpoint, EveryTruncationIsAnError) {
  const std::string dir = torch_fixture("qwen3");
  if (dir.empty()) GTEST_SKIP() << "python3-torch is not installed";
  const std::string bytes = test::read_bytes(dir + "/pytorch_model.bin");
  // every cut in the last 64 KB (central directory, data.pkl, last storages) and a sample before
  for (size_t n = 0; n < bytes.size(); n += (n + 70000 < bytes.size() ? 997 : 1)) {
    std::vector<std::string> notes;
    auto r = parse_torch_checkpoint(reinterpret_cast<const uint8_t*>(bytes.data()), n, nullptr, "cut", &notes);
    ASSERT_FALSE(r.is_ok()) << "accepted an archive cut to " << n << " of " << bytes.size();
  }
}

// ---- the unpickler on hand-made pickles ----

Result<PickleObjects> run(const std::string& p) {
  return unpickle(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "test.pkl");
}
// String literals keep their embedded NUL bytes (a std::string made from a char* would stop at the first one).
template <size_t N>
Result<PickleObjects> run(const char (&p)[N]) {
  return run(std::string(p, N - 1));
}

void expect_error(const Status& st, const std::string& fragment) {
  ASSERT_FALSE(st.is_ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
}

// A minimal state dict {"w": tensor} the way torch.save writes it.
std::string state_dict_pickle() {
  using namespace std::string_literals;
  std::string p = "\x80\x02}q\x00(X\x01\x00\x00\x00wq\x01"s;
  p += "ctorch._utils\n_rebuild_tensor_v2\nq\x02(";
  p += "(X\x07\x00\x00\x00storageq\x03" "ctorch\nFloatStorage\nq\x04X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu"
       "K\x06tQ"s;
  p += "K\x00K\x02K\x03\x86K\x03K\x01\x86\x89" "ccollections\nOrderedDict\n)Rtq\x05Rq\x06u."s;
  return p;
}

TEST(Pickle, StateDictSubset) {
  auto r = run(state_dict_pickle());
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto sd = torch_state_dict(*r, "test.pkl");
  ASSERT_TRUE(sd.is_ok()) << sd.status().message();
  ASSERT_EQ(sd->size(), 1u);
  const auto& t = (*sd)[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.storage_key, "0");
  EXPECT_EQ(t.storage_type, "torch.FloatStorage");
  EXPECT_EQ(t.storage_numel, 6);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.stride, (std::vector<int64_t>{3, 1}));
}

TEST(Pickle, ForbiddenGlobalsAndOpcodesAreNamed) {
  expect_error(run("\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00lsR.").status(), "global 'os.system'");
  expect_error(run("\x80\x02" "cbuiltins\neval\n.").status(), "'builtins.eval'");
  expect_error(run("\x80\x04\x8c\x02os\x8c\x06system\x93.").status(), "'os.system'");  // STACK_GLOBAL
  expect_error(run("\x80\x02(cos\nsystem\no.").status(), "'os.system'");
  expect_error(run("\x80\x02" "I1\n.").status(), "INT");  // text opcodes are not in the subset
  expect_error(run("\x80\x02]\x81.").status(), "NEWOBJ");
  expect_error(run("\x80\x02\xff.").status(), "opcode 0xff");
  // allowed globals may not be called with arbitrary arguments
  expect_error(run("\x80\x02" "ccollections\nOrderedDict\nK\x01\x85R.").status(), "OrderedDict with arguments");
  expect_error(run("\x80\x02" "ctorch\nFloatStorage\n)R.").status(), "not allowed");
}

TEST(Pickle, MalformedStreamsAreErrors) {
  expect_error(run("").status(), "truncated");
  expect_error(run("\x80\x02").status(), "truncated");
  expect_error(run("\x80\x02X\xff\x00\x00\x00" "ab").status(), "past the end");
  expect_error(run("\x80\x02" "0.").status(), "empty stack");
  expect_error(run("\x80\x02h\x05.").status(), "memo index 5");
  expect_error(run("\x80\x02" "e.").status(), "no MARK");
  expect_error(run("\x80\x02K\x01K\x02.").status(), "STOP");
  expect_error(run("\x80\x02(K\x01s.").status(), "empty stack");
  expect_error(run("\x80\x02K\x00K\x01K\x02s.").status(), "non-dict");
  expect_error(run("\x80\x02\x8a\x09" "123456789.").status(), "64 bits");
  expect_error(run("\x80\x02(X\x03\x00\x00\x00" "abcK\x01K\x02K\x03K\x04tQ.").status(), "persistent id");
  expect_error(run("\x80\x02" "cos").status(), "newline");
  expect_error(run("\x80\x02K\x01K\x02K\x03(\x87.").status(), "too few values");  // TUPLE3 across a MARK (fuzz find)
  // a dict without tensors
  auto r = run("\x80\x02}X\x01\x00\x00\x00" "aK\x01s.");
  ASSERT_TRUE(r.is_ok());
  expect_error(torch_state_dict(*r, "t").status(), "no tensors");
  // deep nesting does not recurse (objects refer to each other by index)
  std::string deep = "\x80\x02";
  for (int i = 0; i < 100000; ++i) deep += "]";
  for (int i = 0; i < 99999; ++i) deep += "a";
  deep += ".";
  EXPECT_TRUE(run(deep).is_ok());
  // a list appended to itself: no ownership cycle to leak
  EXPECT_TRUE(run("\x80\x02]q\x00h\x00" "a.").is_ok());
}

TEST(Zip, BadArchivesAreErrors) {
  std::string z(30, '\0');  // no end-of-central-directory record
  expect_error(ZipArchive::parse(reinterpret_cast<const uint8_t*>(z.data()), z.size(), "z").status(), "end-of-central");
  // an EOCD whose central directory lies past the end
  std::string e = "PK\x05\x06";
  e += std::string(6, '\0') + std::string("\x01\x00", 2) + std::string("\x2e\x00\x00\x00", 4) +
       std::string("\xff\x00\x00\x00", 4) + std::string(2, '\0');
  expect_error(ZipArchive::parse(reinterpret_cast<const uint8_t*>(e.data()), e.size(), "z").status(), "outside");
}

}  // namespace
}  // namespace pipit
