// GET /props, /slots and /metrics: the endpoints tools written for llama-server probe (its web UI, Prometheus,
// load balancers). Read-only; none shows a prompt or an answer, so nothing of one client reaches another.
#include <sstream>

#include "server/handlers.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace pipit::server {

using json = nlohmann::json;

namespace {

const char* reasoning_name(ReasoningFormat f) {
  return f == ReasoningFormat::kNone ? "none" : f == ReasoningFormat::kDeepseek ? "deepseek" : "auto";
}

json props_json(const ServerState& st) {
  const SamplerParams& d = st.policy.defaults;
  const std::string tmpl = st.lm.tokenizer ? st.lm.tokenizer->config().chat_template : "";
  return {{"default_generation_settings",
           {{"n_ctx", st.engine.n_ctx()},
            {"params", {{"temperature", d.temperature}, {"top_p", d.top_p}, {"top_k", d.top_k}, {"min_p", d.min_p},
                        {"repeat_penalty", d.repetition_penalty}, {"n_predict", st.engine.n_ctx()}}}}},
          {"total_slots", st.engine.n_slots()},
          {"model_alias", st.opt.model_name},
          {"chat_template", tmpl},
          {"modalities", {{"vision", st.policy.accepts_images}, {"video", st.policy.accepts_videos}, {"audio", st.policy.accepts_audio}}},
          {"reasoning_format", reasoning_name(st.opt.reasoning_format)},
          {"build_info", "pipit-" PIPIT_VERSION}};
}

json slots_json(const ServerState& st) {
  json out = json::array();
  const std::vector<bool> busy = st.engine.busy_slots();
  for (size_t i = 0; i < busy.size(); ++i)
    out.push_back({{"id", int(i)}, {"n_ctx", st.engine.n_ctx()}, {"is_processing", bool(busy[i])}});
  return out;
}

// Prometheus text format 0.0.4: "# HELP", "# TYPE", then "name value" per metric.
std::string metrics_text(const ServerState& st) {
  const Engine::Stats s = st.engine.stats();
  const PromptCache::Stats c = st.engine.cache_stats();
  std::ostringstream os;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    os << "# HELP pipit_" << name << " " << help << "\n# TYPE pipit_" << name << " " << type << "\npipit_" << name
       << " " << v << "\n";
  };
  metric("requests_completed_total", "counter", "Requests finished since start.", double(s.completed));
  metric("tokens_generated_total", "counter", "Tokens generated since start.", double(s.tokens_generated));
  metric("prompt_tokens_evaluated_total", "counter", "Prompt tokens evaluated by forward passes.",
         double(s.prompt_tokens_evaluated));
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens whose KV came from the prompt cache.",
         double(s.prompt_tokens_cached));
  metric("speculative_drafted_total", "counter", "Speculative guesses verified.", double(s.spec_drafted));
  metric("speculative_accepted_total", "counter", "Speculative guesses accepted.", double(s.spec_accepted));
  metric("requests_processing", "gauge", "Requests holding a slot now.", s.active);
  metric("requests_deferred", "gauge", "Requests waiting for a slot.", s.queued);
  metric("slots", "gauge", "KV-cache slots (--parallel).", st.engine.n_slots());
  metric("prompt_cache_bytes", "gauge", "Bytes held by the prompt cache.", double(c.bytes));
  metric("prompt_cache_hits_total", "counter", "Prompt cache lookups that reused a prefix.", double(c.hits));
  return os.str();
}

}  // namespace

void add_probe_routes(ServerState& st, httplib::Server& http, const Authorizer& authorized) {
  http.Get("/props", [&st, authorized](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req, res)) res.set_content(to_text(props_json(st)), "application/json");
  });
  http.Get("/slots", [&st, authorized](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req, res)) res.set_content(to_text(slots_json(st)), "application/json");
  });
  http.Get("/metrics", [&st, authorized](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req, res)) res.set_content(metrics_text(st), "text/plain; version=0.0.4");
  });
}

}  // namespace pipit::server
