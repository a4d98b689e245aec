// llama.cpp's greedy continuation with its token ids, for make_llamacpp_gguf.py: the steps of llama.cpp's
// examples/simple (tokenize with BOS, one prompt batch, greedy sampler, stop at end-of-generation), printing
// one JSON line {"prompt_ids": [...], "ids": [...]} so the test can replay llama.cpp's tokens through pipit.
// Built by make_llamacpp_gguf.py against a llama.cpp build (include/ and libllama); not part of pipit.
// usage: llama_greedy MODEL.gguf N_PREDICT PROMPT
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  const int n_predict = std::atoi(argv[2]);
  const std::string prompt = argv[3];
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_prompt = -llama_tokenize(vocab, prompt.c_str(), prompt.size(), nullptr, 0, true, true);
  std::vector<llama_token> toks(n_prompt);
  if (llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), true, true) < 0) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = n_prompt + n_predict;
  cp.n_batch = n_prompt;
  cp.n_threads = cp.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  llama_sampler* smpl = llama_sampler_chain_init(llama_sampler_chain_default_params());
  llama_sampler_chain_add(smpl, llama_sampler_init_greedy());
  std::vector<llama_token> out;
  llama_batch batch = llama_batch_get_one(toks.data(), toks.size());
  llama_token next;
  for (int i = 0; i < n_predict; ++i) {
    if (llama_decode(ctx, batch)) return 1;
    next = llama_sampler_sample(smpl, ctx, -1);
    if (llama_vocab_is_eog(vocab, next)) break;
    out.push_back(next);
    batch = llama_batch_get_one(&next, 1);
  }
  std::printf("{\"prompt_ids\": [");
  for (size_t i = 0; i < toks.size(); ++i) std::printf("%s%d", i ? ", " : "", toks[i]);
  std::printf("], \"ids\": [");
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("]}\n");
  llama_sampler_free(smpl);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
