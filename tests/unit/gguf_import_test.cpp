// GGUF import: files written by the test writer (gguf_test_writer.h, an independent description of llama.cpp's
// conversion) from known checkpoints load and reproduce their logits — llama-arch with the q/k permutation
// (stories260k, and the llama test model with Llama 3 rope_freqs), qwen3 in bf16, Q8_0 / Q4_0 tensors used in place — the
// GGUF vocabulary becomes the same tokenizer.json the HF checkpoint has, and broken files give clear errors.
#include <gtest/gtest.h>

#include <fstream>

#include "convert/gguf_import.h"
#include "core/panels.h"
#include "format/gguf.h"
#include "format/pipit_format.h"
#include "tests/unit/convert_test_util.h"
#include "tests/unit/gguf_test_writer.h"
#ifdef PIPIT_WITH_TOKENIZER
#include "tokenizer/tokenizer.h"
#endif

namespace pipit {
namespace {

void expect_same_logits(const std::string& model, const std::string& gguf, double tol) {
  auto ids = test::golden_ids(model);
  LoadedModel hf = test::load_or_fail(test::model_dir(model));
  LoadedModel gg = test::load_or_fail(gguf);
  const auto want = test::all_logits(*hf.model, ids);
  const auto got = test::all_logits(*gg.model, ids);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(test::max_abs_diff(got.data(), want.data(), int64_t(want.size())).max_abs, tol) << model;
}

// stories260k as F32 GGUF: llama arch, so q/k rows are permuted in the file and must be un-permuted on import.
TEST(GgufImport, LlamaPermutedQkReproducesLogits) {
  test::ScratchDir d("gguf");
  test::hf_to_gguf(test::model_dir("stories260k"), d.path("s.gguf"), {.with_llama2c_tokenizer = true});
  expect_same_logits("stories260k", d.path("s.gguf"), 0.0);
  // without the un-permutation the logits would differ: check the file really is permuted
  auto f = GgufFile::open(d.path("s.gguf"));
  ASSERT_TRUE(f.is_ok());
  auto raw = f->tensor(*f->find_tensor("blk.0.attn_q.weight"));
  auto hf = SafetensorsFile::open(test::model_dir("stories260k") + "/model.safetensors");
  Tensor q = *hf->get("model.layers.0.self_attn.q_proj.weight");
  EXPECT_NE(std::memcmp(raw->data(), q.data(), q.nbytes()), 0);
}

// The llama test model: GQA, head_dim 32, Llama 3 RoPE scaling stored as rope_freqs (recovered into rope_scaling).
TEST(GgufImport, Llama3RopeFreqsRecovered) {
  test::ScratchDir d("gguf");
  test::hf_to_gguf(test::model_dir("llama"), d.path("l.gguf"));
  auto c = open_checkpoint(d.path("l.gguf"));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  const auto& rs = c->config["rope_scaling"];
  ASSERT_TRUE(rs.is_object()) << c->config.dump();
  EXPECT_EQ(rs["rope_type"], "llama3");
  EXPECT_DOUBLE_EQ(rs["factor"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(rs["low_freq_factor"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(rs["high_freq_factor"].get<double>(), 4.0);
  EXPECT_EQ(rs["original_max_position_embeddings"].get<int64_t>(), 1024);
  expect_same_logits("llama", d.path("l.gguf"), 0.0);
}

TEST(GgufImport, Qwen3Bf16AndQwen2Reproduce) {
  test::ScratchDir d("gguf");
  for (const char* m : {"qwen3", "qwen2"}) {
    const std::string out = d.path(std::string(m) + ".gguf");
    test::hf_to_gguf(test::model_dir(m), out);
    expect_same_logits(m, out, 0.0);
  }
}

// Q8_0 / Q4_0 tensors are used in place (no requantization) and give exactly what a q8 / q4 .pipit of the same
// model gives (the same reference quantizer made both).
TEST(GgufImport, QuantizedTensorsAreUsedInPlace) {
  test::ScratchDir d("gguf");
  test::write_bytes(d.path("r.json"), R"({"rules": [{"pattern": "model.embed_tokens.weight", "dtype": "source"}]})");
  auto ids = test::golden_ids("qwen3");
  for (const char* q : {"q8", "q4"}) {
    const bool q4 = std::string(q) == "q4";
    test::hf_to_gguf(test::model_dir("qwen3"), d.path("q.gguf"), {.q8 = !q4, .q4 = q4});
    auto c = open_checkpoint(d.path("q.gguf"));
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    const Tensor& w = c->tensors.at("model.layers.0.mlp.down_proj.weight");
    EXPECT_EQ(w.dtype(), q4 ? DType::Q4_0 : DType::Q8_0);
    EXPECT_NE(dynamic_cast<MmapStorage*>(w.storage().get()), nullptr) << "not a view of the file";
    // the same model converted by pipit, quantized everywhere except the embedding
    test::convert_or_fail(test::model_dir("qwen3"), d.path("q.pipit"), q, 2, d.path("r.json"));
    LoadedModel a = test::load_or_fail(d.path("q.gguf"));
    LoadedModel b = test::load_or_fail(d.path("q.pipit"));
    const auto la = test::all_logits(*a.model, ids), lb = test::all_logits(*b.model, ids);
    EXPECT_EQ(test::max_abs_diff(la.data(), lb.data(), int64_t(la.size())).max_abs, 0.0) << q;
    // GGUF -> .pipit keeps the quantized bytes ("auto" = no requantization), in the default cpu target's panels
    test::convert_or_fail(d.path("q.gguf"), d.path("g.pipit"), "auto");
    auto p = PipitFile::open(d.path("g.pipit"));
    ASSERT_TRUE(p.is_ok());
    const Tensor& pt = p->tensors().at("model.layers.0.mlp.down_proj.weight");
    ASSERT_EQ(pt.dtype(), dtype_panel_of(w.dtype()));
    std::vector<uint8_t> plain(w.nbytes());
    unpack_panel_rows(pt.dtype(), pt.data(), pt.dim(-1), 0, pt.rows(), plain.data());
    EXPECT_EQ(std::memcmp(plain.data(), w.data(), w.nbytes()), 0);
  }
}

// The SentencePiece vocabulary of stories260k's GGUF becomes the tokenizer.json of its HF checkpoint: same vocab,
// same merges in the same order, same normalizer / decoder / post-processor.
TEST(GgufImport, LlamaVocabBecomesHfTokenizer) {
  test::ScratchDir d("gguf");
  test::hf_to_gguf(test::model_dir("stories260k"), d.path("s.gguf"), {.with_llama2c_tokenizer = true});
  auto f = GgufFile::open(d.path("s.gguf"));
  ASSERT_TRUE(f.is_ok());
  auto t = gguf_tokenizer_to_hf(*f);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto got = nlohmann::json::parse(t->tokenizer_json);
  auto want = nlohmann::json::parse(test::read_bytes(test::model_dir("stories260k") + "/tokenizer.json"));
  EXPECT_EQ(got["model"]["vocab"], want["model"]["vocab"]);
  EXPECT_EQ(got["model"]["merges"], want["model"]["merges"]);
  for (const char* k : {"normalizer", "pre_tokenizer", "post_processor", "decoder", "added_tokens"})
    EXPECT_EQ(got[k], want[k]) << k;
  for (const char* k : {"unk_token", "byte_fallback", "fuse_unk"}) EXPECT_EQ(got["model"][k], want["model"][k]) << k;
  auto cfg = nlohmann::json::parse(t->tokenizer_config_json);
  EXPECT_EQ(cfg["bos_token"], "<s>");
  EXPECT_EQ(cfg["add_bos_token"], true);
#ifdef PIPIT_WITH_TOKENIZER
  LoadedModel lm = test::load_or_fail(d.path("s.gguf"));
  ASSERT_TRUE(lm.tokenizer);
  auto ids = lm.tokenizer->encode("Once upon a time", true);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
#endif
}

// A byte-level (gpt2-style) vocabulary with the qwen2 pre-tokenizer.
TEST(GgufImport, Gpt2VocabBecomesByteLevelTokenizer) {
  test::GgufWriter g;
  g.str("general.architecture", "qwen2");
  g.str("tokenizer.ggml.model", "gpt2");
  g.str("tokenizer.ggml.pre", "qwen2");
  g.strs("tokenizer.ggml.tokens", {"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "<|im_start|>", "<|endoftext|>"});
  g.i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3, 3});
  g.strs("tokenizer.ggml.merges", {"a b", "\xc4\xa0 ab"});
  g.u32("tokenizer.ggml.eos_token_id", 6);
  g.str("tokenizer.chat_template", "{{ messages }}");
  const std::string bytes = g.bytes();
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, "mem");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  auto t = gguf_tokenizer_to_hf(*f);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto j = nlohmann::json::parse(t->tokenizer_json);
  EXPECT_EQ(j["model"]["merges"], nlohmann::json({"a b", "\xc4\xa0 ab"}));
  EXPECT_EQ(j["model"]["vocab"]["\xc4\xa0" "ab"], 4);
  EXPECT_EQ(j["normalizer"]["type"], "NFC");
  EXPECT_EQ(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"].get<std::string>().substr(0, 16),
            "(?i:'s|'t|'re|'v");
  EXPECT_EQ(j["added_tokens"].size(), 2u);
  EXPECT_EQ(j["post_processor"], nullptr);  // no BOS for gpt2-style by default
  auto cfg = nlohmann::json::parse(t->tokenizer_config_json);
  EXPECT_EQ(cfg["chat_template"], "{{ messages }}");
  EXPECT_EQ(cfg["eos_token"], "<|endoftext|>");
#ifdef PIPIT_WITH_TOKENIZER
  auto tok = Tokenizer::load(t->tokenizer_json, t->tokenizer_config_json);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto ids = (*tok)->encode("ab ab<|im_start|>", false);
  ASSERT_TRUE(ids.is_ok()) << ids.status().message();
  EXPECT_EQ(*ids, (std::vector<int32_t>{2, 4, 5}));
#endif
  // an unknown pre-tokenizer is reported by name
  test::GgufWriter g2;
  g2.str("tokenizer.ggml.model", "gpt2");
  g2.str("tokenizer.ggml.pre", "exotic-pre");
  g2.strs("tokenizer.ggml.tokens", {"a"});
  g2.strs("tokenizer.ggml.merges", {});
  const std::string b2 = g2.bytes();
  auto f2 = GgufFile::parse(reinterpret_cast<const uint8_t*>(b2.data()), b2.size(), nullptr, "mem");
  ASSERT_TRUE(f2.is_ok());
  auto t2 = gguf_tokenizer_to_hf(*f2);
  ASSERT_FALSE(t2.is_ok());
  EXPECT_NE(t2.status().message().find("exotic-pre"), std::string::npos);
}

#ifdef PIPIT_WITH_TOKENIZER
// Real byte-level vocabularies (testdata/tokenizers qwen3, llama3) written into GGUF the way llama.cpp stores them
// (tokens by id, token types, "a b" merges, tokenizer.ggml.pre) come back as tokenizers that reproduce the HF
// reference ids on all 200 golden cases, with and without special tokens.
TEST(GgufImport, RealByteLevelVocabsReproduceGoldenIds) {
  struct Case {
    const char* dir;
    const char* pre;
    int64_t bos;
  };
  for (const Case& k : {Case{"qwen3", "qwen2", -1}, Case{"llama3", "llama-bpe", 128000}}) {
    const std::string dir = test::testdata() + "/tokenizers/" + k.dir;
    auto tj = nlohmann::json::parse(test::read_bytes(dir + "/tokenizer.json"));
    auto tc = nlohmann::json::parse(test::read_bytes(dir + "/tokenizer_config.json"));
    const std::string bytes = test::byte_level_vocab_gguf(tj, tc, k.pre, k.bos);
    auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr, k.dir);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto texts = gguf_tokenizer_to_hf(*f);
    ASSERT_TRUE(texts.is_ok()) << texts.status().message();
    auto tok = Tokenizer::load(texts->tokenizer_json, texts->tokenizer_config_json);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    EXPECT_EQ((*tok)->config().chat_template, tc["chat_template"].get<std::string>());
    std::ifstream cases(dir + "/cases.jsonl");
    std::string line;
    int n = 0, bad = 0;
    while (std::getline(cases, line)) {
      auto c = nlohmann::json::parse(line);
      const std::string text = c["text"];
      auto a = (*tok)->encode(text, false), b = (*tok)->encode(text, true);
      ASSERT_TRUE(a.is_ok() && b.is_ok());
      const bool ok = *a == c["ids"].get<std::vector<int32_t>>() && *b == c["ids_special"].get<std::vector<int32_t>>();
      if (!ok && bad++ < 3) ADD_FAILURE() << k.dir << ": ids differ for " << c["text"].dump();
      ++n;
    }
    EXPECT_EQ(n, 200) << k.dir;
    EXPECT_EQ(bad, 0) << k.dir;
  }
}
#endif

// ---- broken files ----

std::string minimal_gguf(uint32_t tensor_type = 0, std::vector<uint64_t> ne = {32, 2}) {
  test::GgufWriter g;
  g.str("general.architecture", "llama");
  g.u64("some.u64", 7);
  g.f64("some.f64", 0.5);
  g.i32s("some.arr", {1, 2, 3});
  const GgmlTypeInfo* ti = ggml_type_info(tensor_type);
  uint64_t n = 1;
  for (auto d : ne) n *= d;
  g.tensor("t.weight", tensor_type, ne, std::string(size_t(n / uint64_t(ti->block_elems) * uint64_t(ti->block_bytes)), '\1'));
  return g.bytes();
}

std::string& parse_keep() {
  static std::string keep;
  return keep;
}
Result<GgufFile> parse(const std::string& b) {
  parse_keep() = b;
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(parse_keep().data()), parse_keep().size(), nullptr,
                         "bad.gguf");
}

void expect_error(const Status& st, const std::string& fragment) {
  ASSERT_FALSE(st.is_ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
}

TEST(GgufErrors, EveryTruncationIsAnError) {
  const std::string good = minimal_gguf();
  ASSERT_TRUE(parse(good).is_ok()) << parse(good).status().message();
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = parse(good.substr(0, n));
    ASSERT_FALSE(f.is_ok()) << "accepted a file cut to " << n << " of " << good.size();
  }
}

TEST(GgufErrors, UnsupportedTypeIsNamed) {
  const std::string b = minimal_gguf(16, {256, 2});  // IQ2_XXS: a known type pipit does not run
  auto f = parse(b);
  ASSERT_TRUE(f.is_ok()) << f.status().message();  // the directory is fine; using the tensor is not
  auto t = f->tensor(f->tensors()[0]);
  expect_error(t.status(), "IQ2_XXS is not supported");
  // and through the importer, with the tensor's name
  test::ScratchDir d("gguf");
  test::GgufWriter g;
  g.str("general.architecture", "qwen3");
  for (auto [k, v] : {std::pair<const char*, uint32_t>{"embedding_length", 64}, {"block_count", 1},
                      {"feed_forward_length", 64}, {"attention.head_count", 2}})
    g.u32(std::string("qwen3.") + k, v);
  g.tensor("token_embd.weight", 0, {64, 8}, std::string(64 * 8 * 4, '\0'));
  g.tensor("blk.0.ffn_down.weight", 16, {256, 64}, std::string(64 * 66, '\0'));
  g.write(d.path("k.gguf"));
  auto c = open_checkpoint(d.path("k.gguf"));
  expect_error(c.status(), "IQ2_XXS is not supported");
  expect_error(c.status(), "blk.0.ffn_down.weight");
}

// The K-quant and other llama.cpp block types are views of the mapping with their bytes as stored; the errors a
// broken K-type tensor can give (unknown type id, a row that is not whole super-blocks, a file cut inside a
// super-block) name the tensor.
TEST(GgufImport, BlockTypesAreViewsOfTheFile) {
  const std::pair<uint32_t, DType> types[] = {
      {3, DType::Q4_1},  {6, DType::Q5_0},  {7, DType::Q5_1},  {10, DType::Q2_K},   {11, DType::Q3_K},
      {12, DType::Q4_K}, {13, DType::Q5_K}, {14, DType::Q6_K}, {15, DType::Q8_K}, {20, DType::IQ4_NL},
      {23, DType::IQ4_XS}};
  for (auto [id, dt] : types) {
    const std::string b = minimal_gguf(id, {512, 3});
    auto f = parse(b);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto t = f->tensor(f->tensors()[0]);
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    EXPECT_EQ(t->dtype(), dt) << id;
    EXPECT_EQ(t->shape(), (std::vector<int64_t>{3, 512}));
    EXPECT_EQ(int64_t(t->nbytes()), 3 * dtype_row_bytes(dt, 512));
    const GgmlTypeInfo* ti = ggml_type_info(id);
    EXPECT_EQ(ti->block_elems, dtype_info(dt).block_elems) << ti->name;
    EXPECT_EQ(ti->block_bytes, dtype_info(dt).block_bytes) << ti->name;
    // in place: the tensor's bytes are the file's, at the data section offset
    EXPECT_EQ(t->data(), reinterpret_cast<const uint8_t*>(parse_keep().data()) + f->data_offset()) << ti->name;
  }
}

TEST(GgufErrors, BrokenKQuantTensorsAreNamed) {
  // unknown type id
  {
    std::string b = minimal_gguf(12, {256, 2});
    // the type id sits right after the dims of the only tensor: find it by its value 12 after the name
    const size_t at = b.find("t.weight") + 8 + 4 + 2 * 8;
    ASSERT_EQ(uint8_t(b[at]), 12);
    b[at] = 99;
    expect_error(parse(b).status(), "unknown ggml type 99");
    expect_error(parse(b).status(), "'t.weight'");
  }
  // a row of 100 is not whole 256-weight super-blocks
  {
    test::GgufWriter g;
    g.str("general.architecture", "llama");
    g.tensor("blk.3.ffn_up.weight", 14, {100, 2}, std::string(210, '\0'));
    auto st = parse(g.bytes()).status();
    expect_error(st, "blk.3.ffn_up.weight");
    expect_error(st, "not a multiple of the Q6_K block size 256");
  }
  // cut inside the last super-block
  {
    const std::string b = minimal_gguf(13, {256, 2});  // Q5_K: 2 x 176 bytes at the end
    auto st = parse(b.substr(0, b.size() - 100)).status();
    expect_error(st, "'t.weight'");
    expect_error(st, "truncated");
  }
}

TEST(GgufErrors, LyingHeadersGiveClearErrors) {
  const std::string good = minimal_gguf();
  std::string b = good;
  b[0] = 'X';
  expect_error(parse(b).status(), "bad magic");
  b = good;
  b[4] = 1;
  expect_error(parse(b).status(), "version 1");
  b = good;
  b[4] = 0, b[7] = 3;
  expect_error(parse(b).status(), "big-endian");
  b = good;
  const uint64_t many = uint64_t(1) << 40;
  std::memcpy(b.data() + 16, &many, 8);  // n_kv
  expect_error(parse(b).status(), "cannot fit");
  b = good;
  std::memcpy(b.data() + 8, &many, 8);  // n_tensors
  expect_error(parse(b).status(), "cannot fit");
  // a string length past the end: the first key's length
  b = good;
  std::memcpy(b.data() + 24, &many, 8);
  expect_error(parse(b).status(), "past the end");
  // tensor offset past the end / misaligned: the offset is the last 8 bytes of the tensor info
  {
    const size_t name_at = good.find("t.weight");
    const size_t off_at = name_at + 8 + 4 + 16 + 4;
    b = good;
    const uint64_t far = 1 << 20;
    std::memcpy(b.data() + off_at, &far, 8);
    expect_error(parse(b).status(), "past the end of the file");
    b = good;
    const uint64_t odd = 3;
    std::memcpy(b.data() + off_at, &odd, 8);
    expect_error(parse(b).status(), "not a multiple of the alignment");
    b = good;
    const uint32_t bad_type = 99;
    std::memcpy(b.data() + off_at - 4, &bad_type, 4);
    expect_error(parse(b).status(), "unknown ggml type 99");
    b = good;
    const uint32_t five = 5;
    std::memcpy(b.data() + name_at + 8, &five, 4);
    expect_error(parse(b).status(), "5 dimensions");
  }
  // a Q8_0 tensor whose row is not whole blocks
  expect_error(parse(minimal_gguf(8, {33, 2})).status(), "not a multiple");
  // unknown metadata value type
  {
    test::GgufWriter g;
    g.u32("x", 1);
    b = g.bytes();
    const uint32_t t = 13;
    std::memcpy(b.data() + 24 + 8 + 1, &t, 4);
    expect_error(parse(b).status(), "unknown type 13");
  }
  // duplicate keys
  {
    test::GgufWriter g;
    g.u32("x", 1);
    g.u32("x", 2);
    expect_error(parse(g.bytes()).status(), "appears twice");
  }
}

// Arrays are views of the file's bytes (GgufValue::at, str_at), read on demand; every element is still checked when
// the file is opened, and an error inside an array names the offset in the file, not in the array.
TEST(GgufErrors, ArraysAreCheckedViewsAndTheirErrorsNameFileOffsets) {
  test::GgufWriter g;
  g.strs("v.tokens", {"a", "", "long token with spaces", "z"});
  g.i32s("v.ints", {-1, 0, 7});
  g.f32s("v.floats", {0.5f, -2.0f});
  std::string b = g.bytes();
  {
    auto f = parse(b);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    const GgufValue* t = f->find("v.tokens");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->arr_size(), 4u);
    EXPECT_EQ(t->str_at(0), "a");
    EXPECT_EQ(t->str_at(1), "");
    EXPECT_EQ(t->str_at(2), "long token with spaces");
    EXPECT_EQ(t->at(3).s, "z");
    EXPECT_EQ(t->at(3).type, GgufType::kString);
    EXPECT_EQ(t->str_at(4), "") << "past the end";
    EXPECT_EQ(t->to_string(), "[4 x string: \"a\" \"\" \"long token with spaces\" \"z\"]");
    const GgufValue* i = f->find("v.ints");
    ASSERT_EQ(i->arr_size(), 3u);
    EXPECT_EQ(i->at(0).as_int(), -1);
    EXPECT_EQ(i->at(2).as_int(), 7);
    EXPECT_EQ(i->str_at(0), "") << "not strings";
    EXPECT_EQ(f->find("v.floats")->at(1).as_double(), -2.0);
  }
  // the third token's length runs past the end: the error gives the file's offset of that length and its size
  const size_t third = b.find("long token") - 8;
  const uint64_t huge = uint64_t(1) << 30;
  std::string bad = b;
  std::memcpy(bad.data() + third, &huge, 8);
  expect_error(parse(bad).status(), "at byte " + std::to_string(third + 8) + " runs past the end of the file (" +
                                        std::to_string(bad.size()) + " bytes)");
  // cut inside the last token's length (the count of 4 still fits the bytes left): where the file ends
  const size_t cut = third + 8 + 22 + 3;
  expect_error(parse(b.substr(0, cut)).status(), "file ends at byte " + std::to_string(cut));
  // a bool array with a 2 in it
  {
    test::GgufWriter h;
    h.i32s("v.flags", {0, 1});
    std::string c = h.bytes();
    const uint32_t kBool = 7;
    const size_t type_at = c.find("v.flags") + 7 + 4;  // after the key and the value type: the element type
    std::memcpy(c.data() + type_at, &kBool, 4);  // i32 elements 0, 1 read as 8 bools: 0 0 0 0 1 0 0 0
    ASSERT_TRUE(parse(c).is_ok()) << "the count is 2, so the first two bytes are the bools";
    c[type_at + 4 + 8] = 2;  // the first bool
    expect_error(parse(c).status(), "bool value 2");
  }
}

TEST(GgufErrors, UnsupportedArchitectureAndMissingMetadata) {
  test::ScratchDir d("gguf");
  test::GgufWriter g;
  g.str("general.architecture", "mamba");
  g.write(d.path("m.gguf"));
  expect_error(open_checkpoint(d.path("m.gguf")).status(), "'mamba' is not supported");
  test::GgufWriter h;
  h.str("general.architecture", "llama");
  h.u32("llama.embedding_length", 64);
  h.write(d.path("h.gguf"));
  expect_error(open_checkpoint(d.path("h.gguf")).status(), "llama.block_count");
}

}  // namespace
}  // namespace pipit
