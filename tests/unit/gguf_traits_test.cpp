// The GGUF traits registry (models/gguf_traits.h): a family's GGUF knowledge is a record registered beside it, and
// convert/ reads it. A test-only arch registered here (no change to convert/) is imported through the shared
// llama-family path with its flags and hooks applied; a test-only projector receives the mmproj; the errors list
// what is registered; every family's record is found by its llama.cpp name; a vocabulary type and a pre-tokenizer
// registered here serve gguf_tokenizer_to_hf.
#include <gtest/gtest.h>

#include <cstring>

#include "convert/gguf_import.h"
#include "models/gguf_traits.h"
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_test_writer.h"

namespace pipit {
namespace {

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// "toyarch": llama.cpp's generic layout, plus a renamed per-layer norm stored as 1 + w and a config key of its own.
Status toy_config(const GgufArchInput& in, nlohmann::json& cfg, std::vector<std::string>& notes) {
  PIPIT_ASSIGN_OR_RETURN(int64_t k, in.m.get_int("toy_key"));
  cfg["toy_field"] = k * in.n_layer;
  notes.push_back("toyarch: hook ran");
  return Status::ok();
}
const GgufArchRegistrar kToy({.gguf = "toyarch", .model_type = "toy_text", .hf_class = "ToyForCausalLM",
                              .shifted_norms = true,
                              .layer_names = {{"ffn_norm.weight", "pre_feedforward_layernorm.weight"}},
                              .config = toy_config});

Status toy_projector(Checkpoint& c, const GgufFile& text, const GgufFile& mm, const GgufTools& tools) {
  PIPIT_ASSIGN_OR_RETURN(int64_t d, gguf_clip_int(mm, "vision.toy_depth"));
  c.config["toy_depth"] = d;
  c.config["toy_can_widen_f32"] = tools.can_widen(DType::F32);
  return Status::ok();
}
const GgufProjectorRegistrar kToyProjector("toy_merger", toy_projector);

void write_toy(const std::string& path, bool with_key) {
  test::GgufWriter g;
  g.str("general.architecture", "toyarch");
  for (auto [k, v] : std::vector<std::pair<const char*, uint32_t>>{
           {"embedding_length", 4}, {"block_count", 2}, {"feed_forward_length", 8}, {"attention.head_count", 2}})
    g.u32(std::string("toyarch.") + k, v);
  if (with_key) g.u32("toyarch.toy_key", 5);
  g.tensor("token_embd.weight", 0, {4, 3}, f32_bytes(std::vector<float>(12, 0.5f)));
  g.tensor("blk.0.ffn_norm.weight", 0, {4}, f32_bytes({1.5f, 2.0f, 1.0f, 0.25f}));
  g.tensor("blk.1.attn_norm.weight", 0, {4}, f32_bytes({3.0f, 1.0f, 1.0f, 1.0f}));
  g.tensor("blk.1.mystery.weight", 0, {4}, f32_bytes({0, 0, 0, 0}));
  g.write(path);
}

TEST(GgufTraits, ARecordBesideTheModelIsAllANewArchNeeds) {
  test::ScratchDir d("gguf_traits");
  write_toy(d.path("toy.gguf"), true);
  auto c = open_gguf_checkpoint(d.path("toy.gguf"));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->config["model_type"], "toy_text");
  EXPECT_EQ(c->config["architectures"][0], "ToyForCausalLM");
  EXPECT_EQ(c->config["toy_field"].get<int64_t>(), 10);  // the hook saw the metadata and the layer count
  EXPECT_EQ(c->config["head_dim"].get<int64_t>(), 2);    // the shared path: embedding_length / head_count
  // the arch's name comes before the shared table's (ffn_norm is post_attention_layernorm there)
  ASSERT_TRUE(c->tensors.count("model.layers.0.pre_feedforward_layernorm.weight"));
  EXPECT_FALSE(c->tensors.count("model.layers.0.post_attention_layernorm.weight"));
  // norms stored as 1 + w come back as w (f32); other tensors stay views
  const Tensor& n0 = c->tensors.at("model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(n0.dtype(), DType::F32);
  EXPECT_EQ(std::vector<float>(n0.ptr<float>(), n0.ptr<float>() + 4), (std::vector<float>{0.5f, 1.0f, 0.0f, -0.75f}));
  EXPECT_EQ(c->tensors.at("model.layers.1.input_layernorm.weight").ptr<float>()[0], 2.0f);
  EXPECT_EQ(c->tensors.at("model.embed_tokens.weight").dim(0), 3);
  const auto& notes = c->notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(), "toyarch: hook ran"), notes.end());
  EXPECT_NE(std::find(notes.begin(), notes.end(), "skipped unknown tensor 'blk.1.mystery.weight'"), notes.end());
  // the hook's error reaches the caller as it is
  write_toy(d.path("nokey.gguf"), false);
  auto bad = open_gguf_checkpoint(d.path("nokey.gguf"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("missing metadata 'toyarch.toy_key'"), std::string::npos)
      << bad.status().message();
}

TEST(GgufTraits, ProjectorsAreFoundByType) {
  test::ScratchDir d("gguf_traits");
  write_toy(d.path("toy.gguf"), true);
  for (const char* type : {"toy_merger", "no_such_merger"}) {
    test::GgufWriter g;
    g.str("general.architecture", "clip");
    g.str("clip.projector_type", type);
    g.u32("clip.vision.toy_depth", 3);
    g.write(d.path("mm.gguf"));
    auto c = open_gguf_checkpoint(d.path("toy.gguf"), d.path("mm.gguf"));
    if (std::string(type) == "toy_merger") {
      ASSERT_TRUE(c.is_ok()) << c.status().message();
      EXPECT_EQ(c->config["toy_depth"].get<int64_t>(), 3);
      EXPECT_TRUE(c->config["toy_can_widen_f32"].get<bool>());
    } else {
      ASSERT_FALSE(c.is_ok());
      // every registered type is listed, sorted
      EXPECT_NE(c.status().message().find("projector type 'no_such_merger' is not supported (gemma4v, "
                                          "qwen2.5vl_merger, qwen2vl_merger, qwen3vl_merger, toy_merger are)"),
                std::string::npos)
          << c.status().message();
    }
  }
}

// "toyvocab": a vocabulary type of a family's own, and "toy-pre": a byte-level BPE pre-tokenizer.
Status toy_vocab(const GgufFile& f, const std::vector<std::string>& tokens, int64_t unk, nlohmann::json& tj,
                 nlohmann::json& bpe) {
  tj["normalizer"] = {{"type", "NFC"}};
  bpe["merges"] = nlohmann::json::array({tokens[0] + " " + tokens[1]});
  return Status::ok();
}
std::vector<int64_t> toy_eog(const GgufFile& f, int64_t n_vocab) { return {1, n_vocab - 1}; }
const GgufVocabRegistrar kToyVocab({.model = "toyvocab", .tokenizer_class = "ToyTokenizer", .force_bos = true,
                                    .build = toy_vocab, .eog_ids = toy_eog});
const GgufPreTokenizerRegistrar kToyPre({.names = {"toy-pre", "toy-pre-alias"}, .regex = "\\s+", .nfc = true});

Result<HfTokenizerTexts> toy_tokenizer(const test::ScratchDir& d, const std::string& model, const std::string& pre) {
  test::GgufWriter g;
  g.str("general.architecture", "toyarch");
  g.str("tokenizer.ggml.model", model);
  if (!pre.empty()) g.str("tokenizer.ggml.pre", pre);
  g.strs("tokenizer.ggml.tokens", {"a", "b", "ab"});
  g.strs("tokenizer.ggml.merges", {"a b"});
  g.u32("tokenizer.ggml.bos_token_id", 0);
  g.boolean("tokenizer.ggml.add_bos_token", false);
  g.write(d.path("v.gguf"));
  auto f = GgufFile::open(d.path("v.gguf"));
  if (!f.is_ok()) return f.status();
  EXPECT_EQ(gguf_vocab_eog_ids(*f, 3), (model == "toyvocab" ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{}));
  return gguf_tokenizer_to_hf(*f);
}

TEST(GgufTraits, VocabulariesAndPreTokenizersAreFoundByName) {
  test::ScratchDir d("gguf_traits");
  auto t = toy_tokenizer(d, "toyvocab", "");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const auto tj = nlohmann::json::parse(t->tokenizer_json), tc = nlohmann::json::parse(t->tokenizer_config_json);
  EXPECT_EQ(tj["normalizer"]["type"], "NFC");
  EXPECT_EQ(tj["model"]["merges"][0], "a b");
  EXPECT_EQ(tc["tokenizer_class"], "ToyTokenizer");
  EXPECT_TRUE(tc["add_bos_token"].get<bool>());  // forced, whatever the file says
  // a pre-tokenizer by any of its names
  auto p = toy_tokenizer(d, "gpt2", "toy-pre-alias");
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto pj = nlohmann::json::parse(p->tokenizer_json);
  EXPECT_EQ(pj["normalizer"]["type"], "NFC");
  EXPECT_EQ(pj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], "\\s+");
  EXPECT_FALSE(nlohmann::json::parse(p->tokenizer_config_json)["add_bos_token"].get<bool>());
  // unknown names list what is registered
  auto bad = toy_tokenizer(d, "nosuch", "");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tokenizer model 'nosuch' is not supported (gpt2, llama, gemma4, toyvocab "
                                        "are)"),
            std::string::npos)
      << bad.status().message();
  auto bad_pre = toy_tokenizer(d, "gpt2", "nosuch-pre");
  ASSERT_FALSE(bad_pre.is_ok());
  EXPECT_NE(bad_pre.status().message().find("(default, gpt2, llama-bpe, qwen2, qwen35, toy-pre are)"),
            std::string::npos)
      << bad_pre.status().message();
}

TEST(GgufTraits, EveryFamilyIsRegisteredByItsLlamaCppName) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3", "qwen3moe", "smollm3", "qwen2vl", "qwen35", "gpt-oss",
                           "qwen3vl", "gemma4"}) {
    const GgufArch* a = find_gguf_arch(arch);
    ASSERT_NE(a, nullptr) << arch;
    EXPECT_EQ(a->gguf, arch);
    EXPECT_FALSE(a->model_type.empty()) << arch;
  }
  for (const char* p : {"qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "gemma4v"})
    EXPECT_NE(find_gguf_projector(p), nullptr) << p;
  EXPECT_EQ(find_gguf_arch("mamba"), nullptr);
  const auto names = gguf_arch_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

}  // namespace
}  // namespace pipit
