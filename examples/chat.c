/* A minimal program against the pipit C API: load a model, stream a completion to stdout.
 * Build against an installed pipit:  cc chat.c $(pkg-config --cflags --libs pipit) -o chat
 * Usage: ./chat MODEL "prompt" [max_tokens] */
#include <pipit/pipit.h>
#include <stdio.h>
#include <stdlib.h>

static int32_t on_token(const char* piece, size_t len, int32_t token, void* user) {
  (void)token;
  int* count = (int*)user;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  ++*count;
  return 1; /* keep going */
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL PROMPT [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  pipit_model* model = NULL;
  if (pipit_model_load(argv[1], NULL, &model) != PIPIT_OK) {
    fprintf(stderr, "error: %s\n", pipit_last_error());
    return 1;
  }
  pipit_session* session = NULL;
  pipit_session_options so;  // f16 KV cache
  pipit_session_options_default(&so);
  so.n_threads = 1;
  so.kv_type = PIPIT_KV_DEFAULT;
  if (pipit_session_create(model, &so, &session) != PIPIT_OK) {
    fprintf(stderr, "error: %s\n", pipit_last_error());
    pipit_model_destroy(model);
    return 1;
  }
  pipit_generate_options opt;
  pipit_generate_options_default(&opt);
  opt.temperature = 0.0f; /* greedy: reproducible */
  opt.max_tokens = argc > 3 ? atoi(argv[3]) : 64;
  int count = 0;
  fputs(argv[2], stdout);
  pipit_status st = pipit_session_generate(session, argv[2], 0, &opt, on_token, &count);
  fputs("\n", stdout);
  if (st != PIPIT_OK) fprintf(stderr, "error: %s\n", pipit_last_error());
  fprintf(stderr, "[%d tokens]\n", count);
  pipit_session_destroy(session);
  pipit_model_destroy(model);
  return st == PIPIT_OK ? 0 : 1;
}
