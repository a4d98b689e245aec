// The endpoints beside generation: POST /tokenize and /detokenize (llama.cpp's shapes) and POST /v1/embeddings
// (OpenAI's shape). Embeddings run on their own single-slot Session, one request at a time, next to the engine:
// they need every token's last hidden state ("final_norm", seen through the context's tensor hook), which the
// engine's batches do not keep.
#include <cstring>

#include "runtime/session.h"
#include "runtime/pooling.h"
#include "server/handlers.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace pipit::server {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxEmbeddingInputs = 256;

std::optional<ApiError> parse_body(const std::string& text, json& body) {
  body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return bad_request("the request body is not valid JSON");
  if (!body.is_object()) return bad_request("the request body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> read_ids(const json& v, const char* param, int n_vocab, std::vector<int32_t>& ids) {
  if (!v.is_array()) return bad_request(fmt("'{}' must be a list of token ids", param), param);
  for (const json& t : v) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      return bad_request(fmt("'{}' holds a value that is not a token id in [0, {})", param, n_vocab), param);
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  return std::nullopt;
}

void handle_tokenize(ServerState& st, const std::string& req, httplib::Response& res) {
  json body;
  if (auto e = parse_body(req, body)) return send_error(res, *e);
  auto it = body.find("content");
  if (it == body.end() || !it->is_string()) return send_error(res, bad_request("'content' must be a string", "content"));
  bool add_special = false, with_pieces = false;
  for (auto [name, out] : {std::pair{"add_special", &add_special}, std::pair{"with_pieces", &with_pieces}}) {
    auto f = body.find(name);
    if (f == body.end() || f->is_null()) continue;
    if (!f->is_boolean()) return send_error(res, bad_request(fmt("'{}' must be a boolean", name), name));
    *out = f->get<bool>();
  }
  const Tokenizer& tok = *st.lm.tokenizer;
  auto ids = tok.encode(it->get_ref<const std::string&>(), add_special);
  if (!ids.is_ok()) return send_error(res, bad_request(ids.status().message(), "content"));
  json tokens = json::array();
  for (int32_t id : *ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    tokens.push_back({{"id", id}, {"piece", tok.decode(std::span<const int32_t>(&id, 1), false)}});
  }
  res.set_content(to_text({{"tokens", std::move(tokens)}}), "application/json");
}

void handle_detokenize(ServerState& st, const std::string& req, httplib::Response& res) {
  json body;
  if (auto e = parse_body(req, body)) return send_error(res, *e);
  auto it = body.find("tokens");
  if (it == body.end()) return send_error(res, bad_request("'tokens' is required", "tokens"));
  std::vector<int32_t> ids;
  if (auto e = read_ids(*it, "tokens", st.policy.n_vocab, ids)) return send_error(res, *e);
  res.set_content(to_text({{"content", st.lm.tokenizer->decode(ids, /*skip_special_tokens=*/false)}}),
                  "application/json");
}

// The pooled embedding of one token sequence.
Result<std::vector<float>> embed(ServerState& st, const std::vector<int32_t>& ids) {
  PIPIT_TRY(st.files.check());
  std::lock_guard<std::mutex> lk(st.embed_mu);
  if (!st.embed_session) {
    SessionOptions so;
    so.n_ctx = st.engine.n_ctx();
    st.embed_pool = std::make_shared<ThreadPool>(st.opt.n_image_threads > 0 ? st.opt.n_image_threads
                                                                           : ThreadPool::default_threads());
    st.embed_session = std::make_unique<Session>(*st.lm.model, so, st.embed_pool);
  }
  return embed_tokens(*st.embed_session, ids, st.pooling);
}

std::string base64(const void* data, size_t n) {
  static const char* kAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kAlpha[v >> 18 & 63];
    out += kAlpha[v >> 12 & 63];
    out += i + 1 < n ? kAlpha[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlpha[v & 63] : '=';
  }
  return out;
}

void handle_embeddings(ServerState& st, const std::string& req, httplib::Response& res) {
  json body;
  if (auto e = parse_body(req, body)) return send_error(res, *e);
  if (st.pooling.mode == PoolingConfig::Mode::kNone) return send_error(res, bad_request(st.pooling.error, "model"));
  std::string format = "float";
  if (auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      return send_error(res, bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format"));
    format = f->get<std::string>();
  }
  const int64_t n_embd = st.lm.model->info().n_embd;
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null() &&
                                        !(d->is_number_integer() && d->get<int64_t>() == n_embd))
    return send_error(res, bad_request(fmt("'dimensions' must be this model's {} (no truncation)", n_embd),
                                       "dimensions"));
  auto in = body.find("input");
  if (in == body.end() || in->is_null()) return send_error(res, bad_request("'input' is required", "input"));
  // input: a string, a list of strings, a list of token ids, or a list of lists of token ids
  std::vector<std::vector<int32_t>> texts;
  const Tokenizer& tok = *st.lm.tokenizer;
  auto add_text = [&](const std::string& s) -> std::optional<ApiError> {
    if (s.empty()) return bad_request("'input' holds an empty string", "input");
    auto ids = tok.encode(s, /*add_special_tokens=*/true);  // as sentence-transformers tokenizes (EOS for Qwen3)
    if (!ids.is_ok()) return bad_request(ids.status().message(), "input");
    texts.push_back(std::move(ids).value());
    return std::nullopt;
  };
  std::optional<ApiError> err;
  if (in->is_string()) {
    err = add_text(in->get<std::string>());
  } else if (in->is_array() && !in->empty() && in->size() <= kMaxEmbeddingInputs) {
    if ((*in)[0].is_number()) {
      texts.emplace_back();
      err = read_ids(*in, "input", st.policy.n_vocab, texts.back());
    } else {
      for (size_t i = 0; i < in->size() && !err; ++i) {
        const json& x = (*in)[i];
        if (x.is_string()) {
          err = add_text(x.get<std::string>());
        } else if (x.is_array() && !x.empty()) {
          texts.emplace_back();
          err = read_ids(x, "input", st.policy.n_vocab, texts.back());
        } else {
          err = bad_request("'input' entries must be strings or non-empty lists of token ids", "input");
        }
      }
    }
  } else {
    err = bad_request(fmt("'input' must be a string or a non-empty list of at most {} inputs", kMaxEmbeddingInputs),
                      "input");
  }
  if (err) return send_error(res, *err);
  json data = json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (int64_t(texts[i].size()) > st.engine.n_ctx())
      return send_error(res, ApiError{400, fmt("input {} has {} tokens; this server's context holds {}", i,
                                               texts[i].size(), st.engine.n_ctx()),
                                      "input", "invalid_request_error", "context_length_exceeded"});
    if (st.stopping) return send_error(res, ApiError{503, "the server is shutting down", "", "server_error"});
    auto e = embed(st, texts[i]);
    if (!e.is_ok()) return send_error(res, from_status(e.status(), "input"));
    n_tokens += int64_t(texts[i].size());
    json v = format == "float" ? json(*e) : json(base64(e->data(), e->size() * sizeof(float)));
    data.push_back({{"object", "embedding"}, {"index", int(i)}, {"embedding", std::move(v)}});
  }
  std::string model = st.opt.model_name;
  if (auto m = body.find("model"); m != body.end() && m->is_string() && !m->get_ref<const std::string&>().empty())
    model = m->get<std::string>();
  res.set_content(to_text({{"object", "list"},
                           {"data", std::move(data)},
                           {"model", model},
                           {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}}),
                  "application/json");
}

}  // namespace

constexpr const char* kExtraRoutes[] = {"/tokenize", "/detokenize", "/v1/embeddings", "/embeddings", "/apply-template"};

bool is_extra_body_route(const std::string& path) {
  for (const char* p : kExtraRoutes)
    if (path == p) return true;
  return false;
}

void add_extra_routes(ServerState& st, const std::function<void(const char* path, BodyHandler handle)>& post) {
  st.pooling = read_pooling_config(st.lm.path);
  st.files = FileWatch::of(st.lm.path);
  post("/tokenize", [&st](const std::string& body, httplib::Response& res) { handle_tokenize(st, body, res); });
  post("/detokenize", [&st](const std::string& body, httplib::Response& res) { handle_detokenize(st, body, res); });
  post("/apply-template", [&st](const std::string& body, httplib::Response& res) { handle_apply_template(st, body, res); });
  for (const char* path : {"/v1/embeddings", "/embeddings"})
    post(path, [&st](const std::string& body, httplib::Response& res) { handle_embeddings(st, body, res); });
}

}  // namespace pipit::server
