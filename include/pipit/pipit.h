/* pipit C API — the only public, stable header.
 *
 * Load a model once (pipit_model_load), share it between threads, and create one session per conversation.
 * Every function returns a pipit_status; on failure pipit_last_error() gives a message for the calling thread.
 * Handles are opaque. No C++ exception crosses this boundary. Strings are UTF-8.
 *
 *   pipit_model* m; pipit_session* s;
 *   if (pipit_model_load("model.pipit", NULL, &m) != PIPIT_OK) { puts(pipit_last_error()); return 1; }
 *   pipit_session_create(m, NULL, &s);
 *   pipit_session_generate(s, "Once upon a time", 0, NULL, on_token, NULL);
 *   pipit_session_destroy(s); pipit_model_destroy(m);
 */
#ifndef PIPIT_PIPIT_H
#define PIPIT_PIPIT_H

#include <stddef.h>
#include <math.h> /* NAN */
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The API this header describes. 2: options structs carry struct_size (below), generation can be cancelled from
 * another thread, the OpenAI server runs inside the process, memory is estimated before loading. 3: audio input
 * (pipit_session_attach_audio, _audio_bytes, _audio_pcm). */
#define PIPIT_API_VERSION 4

typedef enum pipit_status {
  PIPIT_OK = 0,
  PIPIT_ERR_INVALID_ARGUMENT = 1,
  PIPIT_ERR_NOT_FOUND = 2,
  PIPIT_ERR_IO = 3,
  PIPIT_ERR_FORMAT = 4,
  PIPIT_ERR_UNSUPPORTED = 5,
  PIPIT_ERR_OUT_OF_RANGE = 6, /* e.g. prompt longer than the context */
  PIPIT_ERR_INTERNAL = 7,
  PIPIT_ERR_CANCELLED = 8,
  PIPIT_ERR_UNAVAILABLE = 9,
  PIPIT_ERR_BUFFER_TOO_SMALL = 10 /* the *_out size tells how much is needed */
} pipit_status;

typedef struct pipit_model pipit_model;
typedef struct pipit_session pipit_session;

/* Message for the last failure on this thread ("" when none). Valid until the next pipit call on this thread. */
const char* pipit_last_error(void);
const char* pipit_version(void);
/* PIPIT_API_VERSION of the header the library was built with: a program checks it is at least the one it was
 * compiled against (pipit_api_version() >= PIPIT_API_VERSION) before calling newer functions. */
int32_t pipit_api_version(void);

/* Options structs that can grow. Each begins with `struct_size`, which the matching *_options_default(&o) macro sets
 * to sizeof the struct as the caller's header declares it (it calls *_options_init(&o, sizeof o), which fills in
 * the defaults, writing no more than that size). The library reads only the first struct_size bytes
 * and uses its defaults for fields past them, so a program compiled against an older header keeps working with a
 * newer library; a newer header's fields that this library does not know must be zero (else
 * PIPIT_ERR_UNSUPPORTED names the struct). A struct_size of 0 (not initialised) is PIPIT_ERR_INVALID_ARGUMENT,
 * except for pipit_model_options, whose first field was `reserved = 0` in API version 1. Why a size field rather
 * than setter functions: options stay plain C structs (designated initialisers, no allocation, one call), and the
 * growth rule is one line for every struct. */

/* Log messages of the library (the in-process server's request lines and its errors): by default none is printed.
 * level: 0 error, 1 warning, 2 info. The callback may be called from any of the library's threads at once; it must
 * not call back into pipit. NULL turns logging off. */
typedef void (*pipit_log_callback)(int32_t level, const char* message, void* user);
void pipit_set_log_callback(pipit_log_callback callback, void* user);

/* ---- models ---- */
typedef struct pipit_model_options {
  uint32_t struct_size; /* pipit_model_options_default() sets it; 0 means API version 1's layout (the fields below) */
  /* Where the decoder runs: NULL or "cpu" (the default), "opencl" or "opencl:N" (the N-th OpenCL device; `pipit
   * inspect --devices` lists them). A missing OpenCL runtime or device is an error from pipit_model_load. */
  const char* device;
  /* NULL or "exact" (the default): f16 / bf16 weights are multiplied in f32, as the goldens. "fast": where the CPU
   * has bf16 dot products (AVX512-BF16, Arm BF16) f16 / bf16 matrices become bf16 and each matmul's activations are
   * rounded to bf16 once (relative error about 2^-9 per factor; about 2x the prefill speed); elsewhere the same as
   * "exact". Quantized weights are unaffected. As the CLI's --precision. */
  const char* precision;
  /* 0 (the default): the weights the CPU reads as stored (a .pipit's panels, f16 / f32 matrices) are copied out of
   * the file mapping into 2 MiB pages at load, for the fastest decode. 1: they are used in place from the page cache
   * (the CLI's --mmap): a faster start and less memory for a large file, a slower decode (4 KiB pages; measured -7%
   * tok/s for a 0.6B q4 model and -11..15% for a 4B one). API version 4. */
  int32_t mmap_weights;
} pipit_model_options;
void pipit_model_options_init(pipit_model_options* o, size_t size);
#define pipit_model_options_default(o) pipit_model_options_init((o), sizeof *(o))

/* path: HF checkpoint directory, .pipit or .gguf file. options may be NULL. */
pipit_status pipit_model_load(const char* path, const pipit_model_options* options, pipit_model** out);
void pipit_model_destroy(pipit_model* model);
int32_t pipit_model_n_vocab(const pipit_model* model);
int32_t pipit_model_n_ctx_max(const pipit_model* model);
/* Prompt cache shared by the model's sessions: each text generation stores its session's KV (the conversation so
 * far) in RAM, and a later generation in any session of this model whose prompt starts with a stored one evaluates
 * only the rest (a session reuses its own context without it). Least recently used entries go first beyond
 * budget_mib MiB; 0 turns it off (the default) and drops what was stored. Not while the model's sessions generate. */
pipit_status pipit_model_set_prompt_cache(pipit_model* model, size_t budget_mib);

/* Memory pressure (an app's onTrimMemory): drops the model's prompt cache entries (keeping its budget) and gives
 * freed heap pages back to the system. Not while the model's sessions generate. */
pipit_status pipit_model_trim(pipit_model* model);

/* ---- tokenizer and chat template (thread-safe) ---- */
/* Writes up to `capacity` ids; *n_out receives the count needed (PIPIT_ERR_BUFFER_TOO_SMALL when > capacity). */
pipit_status pipit_tokenize(const pipit_model* model, const char* text, size_t text_len, int32_t add_special,
                            int32_t* ids, size_t capacity, size_t* n_out);
/* Writes a NUL-terminated string; *len_out receives its length without the NUL. */
pipit_status pipit_detokenize(const pipit_model* model, const int32_t* ids, size_t n_ids, int32_t skip_special,
                              char* buf, size_t capacity, size_t* len_out);
/* messages_json: a JSON array of {"role": ..., "content": ...}. */
pipit_status pipit_chat_template_apply(const pipit_model* model, const char* messages_json,
                                       int32_t add_generation_prompt, char* buf, size_t capacity, size_t* len_out);

/* ---- sessions (one per conversation; a session is used by one thread at a time) ---- */
typedef struct pipit_session_options {
  uint32_t struct_size; /* set by pipit_session_options_default() */
  int32_t n_ctx;     /* 0: min(model max, 4096) */
  int32_t n_threads; /* 0: physical cores */
  int32_t kv_type;   /* KV cache dtype: PIPIT_KV_DEFAULT (0) = f16 as llama.cpp, PIPIT_KV_F32 (exact), PIPIT_KV_F16,
                        PIPIT_KV_Q8_0 (q8_0 blocks of 32: the model's head_dim a multiple of 32) */
  int32_t mtp;       /* speculative decoding with the model's own multi-token-prediction head (Qwen3.5's mtp.*
                        layer): guesses per verification pass, 0 (default) off, at most 16. The output is the same as
                        without. A model without the head is PIPIT_ERR_UNSUPPORTED at session creation. It takes
                        precedence over pipit_session_set_speculation. */
} pipit_session_options;
enum { PIPIT_KV_DEFAULT = 0, PIPIT_KV_F32 = 1, PIPIT_KV_F16 = 2, PIPIT_KV_Q8_0 = 3 };
void pipit_session_options_init(pipit_session_options* o, size_t size);
#define pipit_session_options_default(o) pipit_session_options_init((o), sizeof *(o))

/* ---- memory, before loading ---- */
/* What loading `path` and one session per parallel sequence would take at most: the peak resident memory with the
 * context full (bytes). The file's header and tensor table are read, nothing else: the estimate is cheap, and the
 * app can choose a smaller context or model before it risks being killed. `pipit inspect --memory -c N` prints the
 * same figures. Measured against peak RSS in bench/memory_estimate.sh (within 10% on the test models). */
typedef struct pipit_memory_estimate {
  uint32_t struct_size;       /* the caller sets sizeof(pipit_memory_estimate); no more than that is written */
  uint64_t weights;           /* the tensors the model uses, towers included */
  uint64_t tower_weights;     /* of which the vision / audio towers */
  uint64_t kv_cache;          /* K/V cache of every sequence at n_ctx */
  uint64_t activations;       /* one prefill chunk and the logits */
  uint64_t tower_activations; /* the largest media input (image, video, audio clip) at its processor's largest */
  uint64_t tokenizer;         /* the tokenizer's tables */
  uint64_t runtime;           /* code, stacks, allocator */
  uint64_t load_transient;    /* parsing tokenizer.json while loading */
  uint64_t total;             /* the peak: runtime + weights + max(session parts, load_transient) */
} pipit_memory_estimate;
/* session: n_ctx (0: min(model max, 4096)) and kv_type are read (NULL: defaults); n_parallel >= 1 sequences. */
pipit_status pipit_estimate_memory(const char* path, const pipit_session_options* session, int32_t n_parallel,
                                   pipit_memory_estimate* out);

pipit_status pipit_session_create(pipit_model* model, const pipit_session_options* options, pipit_session** out);
void pipit_session_destroy(pipit_session* session);
/* Forget the conversation (KV cache and history). */
pipit_status pipit_session_reset(pipit_session* session);

/* Sampling fields left at PIPIT_MODEL_DEFAULT (floats) / PIPIT_MODEL_DEFAULT_INT (top_k) take the model's
 * generation_config.json value, as HF generate() and the server do, else the value named below; seed
 * PIPIT_SEED_RANDOM draws a new seed per generation (pipit_session_last_seed() says which, to repeat it).
 * pipit_generate_options_default() sets all of them so. */
#define PIPIT_MODEL_DEFAULT NAN
#define PIPIT_MODEL_DEFAULT_INT INT32_MIN
#define PIPIT_SEED_RANDOM UINT64_MAX
typedef struct pipit_generate_options {
  uint32_t struct_size; /* set by pipit_generate_options_default() */
  int32_t max_tokens;   /* default 256 */
  float temperature;    /* default: the model's, else 0.8; 0 = greedy */
  int32_t top_k;        /* default: the model's, else 40; 0 = off */
  float top_p;          /* default: the model's, else 0.95 */
  float min_p;          /* default: the model's, else 0.05 */
  float repeat_penalty; /* default: the model's, else 1.0 */
  uint64_t seed;        /* default PIPIT_SEED_RANDOM */
  const char* const* stop; /* stop strings */
  size_t n_stop;
} pipit_generate_options;
void pipit_generate_options_init(pipit_generate_options* o, size_t size);
#define pipit_generate_options_default(o) pipit_generate_options_init((o), sizeof *(o))

/* Called for each piece of generated text (valid UTF-8, may be empty). Return 0 to stop generating. */
typedef int32_t (*pipit_token_callback)(const char* piece, size_t len, int32_t token, void* user);

/* Generates a continuation of the conversation so far plus `prompt`:
 *  use_chat_template = 0: prompt is raw text appended to the session (BOS added at the start of a session);
 *  use_chat_template = 1: prompt is a JSON array of messages (the whole conversation); it is rendered with the
 *  model's chat template and the KV cache is reused for the part shared with the previous call.
 * options and callback may be NULL. */
pipit_status pipit_session_generate(pipit_session* session, const char* prompt, int32_t use_chat_template,
                                    const pipit_generate_options* options, pipit_token_callback callback, void* user);

/* Why the last pipit_session_generate ended: "stop" (end of sequence or a stop string), "length" (max_tokens, or
 * the context is full: then pipit_session_n_past() == pipit_session_n_ctx() and the next generate is refused
 * with PIPIT_ERR_OUT_OF_RANGE; reset, or start a shorter conversation), "cancelled" (the callback returned 0);
 * "" before the first generation and after an error. Valid until the next call on the session. */
const char* pipit_session_finish_reason(const pipit_session* session);
/* The seed the last pipit_session_generate sampled with (a new one when its options said PIPIT_SEED_RANDOM): pass
 * it as options.seed to get the same text again. 0 before the first generation. */
uint64_t pipit_session_last_seed(const pipit_session* session);

/* From any thread: stops the generation that `session` is running now. It ends at the next token, or during a long
 * prompt at the end of the current prefill chunk (512 tokens), with PIPIT_OK and finish reason "cancelled"; the
 * text delivered so far, and the prompt evaluated so far, stay in the conversation. The flag is cleared when a
 * generation starts, so a cancel with no generation running has no effect. The session must stay alive until the
 * call returns (do not destroy it concurrently). */
pipit_status pipit_session_cancel(pipit_session* session);
/* Tokens the session's context holds, and how many it can hold. */
int32_t pipit_session_n_past(const pipit_session* session);
int32_t pipit_session_n_ctx(const pipit_session* session);
/* The last generation's prompt: its tokens, those whose KV was reused (the session's own context or the model's
 * prompt cache) and those evaluated (counted by the forward passes). Any pointer may be NULL. */
pipit_status pipit_session_prompt_stats(const pipit_session* session, int32_t* n_prompt, int32_t* n_reused,
                                        int32_t* n_evaluated);

/* ---- tokens, logits and embeddings ---- */
/* Appends `ids` to the session's context and evaluates them (no sampling). With `logits` non-NULL, the last token's
 * raw logits (pipit_model_n_vocab() floats; `capacity` in floats) are written there. A later raw-text generate
 * continues after these tokens. */
pipit_status pipit_session_eval(pipit_session* session, const int32_t* ids, size_t n_ids, float* logits,
                                size_t capacity);
/* A text's embedding (n_embd floats; *n_out receives the count), pooled as the checkpoint's sentence-transformers
 * files say (modules.json: mean, last-token or CLS pooling, optional L2 normalisation), as the server's
 * /v1/embeddings. It uses the session's context: the conversation is reset. A checkpoint without a pooling config
 * is PIPIT_ERR_UNSUPPORTED (a chat model was not trained to put a sentence's meaning in one vector). */
pipit_status pipit_embed(pipit_session* session, const char* text, size_t text_len, float* out, size_t capacity,
                         size_t* n_out);

/* Speculative decoding for the session's generations: n_draft tokens guessed per verification pass (0: off, at
 * most 16), by `draft` (a model sharing this model's vocabulary, e.g. a small Qwen3 for a big one; the session
 * makes its own context for it) or, with draft NULL, by prompt lookup (tokens copied from earlier in the
 * conversation). The output is the same as without, greedy or seeded sampling (a draft model's guesses are its
 * greedy tokens, each checked by sampling the model's own token as plain decoding would). The draft model must
 * outlive the session (or the next call here). */
pipit_status pipit_session_set_speculation(pipit_session* session, pipit_model* draft, int32_t n_draft);
/* The last generation's guesses and how many of them were accepted. Any pointer may be NULL. */
pipit_status pipit_session_speculation_stats(const pipit_session* session, int64_t* drafted, int64_t* accepted);

/* Structured output for the session's next generations, as the server's response_format: the answer follows a GBNF
 * grammar (root rule "root"; pipit_session_set_grammar) or is JSON valid under a JSON schema given as its text
 * (pipit_session_set_json_schema), token by token, and ends when the grammar is complete. Checked here: a malformed
 * grammar or schema is PIPIT_ERR_INVALID_ARGUMENT naming the problem (the session keeps its previous setting).
 * NULL or "" turns it off. */
pipit_status pipit_session_set_grammar(pipit_session* session, const char* gbnf);
pipit_status pipit_session_set_json_schema(pipit_session* session, const char* schema_json);

/* Log-probabilities for the session's next generations: for each generated token, its log-probability under the
 * model's raw logits (before sampling settings) and the n_top (0..20) most likely tokens with theirs; -1 (the
 * default) records none. */
pipit_status pipit_session_set_logprobs(pipit_session* session, int32_t n_top);
/* OpenAI's logit_bias for the session's next generations: biases[i] (in [-100, 100]; -100 bans the token) added to
 * token tokens[i]'s logit before sampling. n = 0 clears it. The arrays are copied. */
pipit_status pipit_session_set_logit_bias(pipit_session* session, const int32_t* tokens, const float* biases,
                                          size_t n);
/* The last generation's records: how many (one per generated token), and the i-th: its token and log-probability,
 * and up to `capacity` of its most likely tokens (*n_top receives how many there are). Any output may be NULL. */
int32_t pipit_session_n_logprobs(const pipit_session* session);
pipit_status pipit_session_logprob(const pipit_session* session, int32_t i, int32_t* token, float* logprob,
                                   int32_t* top_tokens, float* top_logprobs, int32_t capacity, int32_t* n_top);

/* Attaches an image (file path, or a data: URL) for the next generation of a vision-language model; it fills the
 * next image placeholder of the conversation (use_chat_template = 1: a {"type": "image"} content part; raw
 * prompts: a placeholder is put before the new text). The image is decoded and encoded at that generation; a
 * placeholder count that does not match the images is an error then (an image that cannot be read is dropped). A conversation with images is evaluated
 * from its start at each generation. PIPIT_ERR_UNSUPPORTED for text-only models. */
pipit_status pipit_session_attach_image(pipit_session* session, const char* path);
/* The same for an image in memory (PNG, JPEG, ... file bytes), copied before the call returns. */
pipit_status pipit_session_attach_image_bytes(pipit_session* session, const void* data, size_t size);
/* Attaches a video as its decoded frames (n_frames image paths or data: URLs, in order, at `fps` frames per second;
 * copied before the call returns) for the next generation of a model with video input (Qwen3.5). It fills the next
 * video placeholder of the conversation (use_chat_template = 1: a {"type": "video"} content part; raw prompts: one
 * is put before the new text); frames are sampled, processed and encoded at that generation as HF's video processor
 * does (at most its max_frames, 768 by default, are kept). PIPIT_ERR_UNSUPPORTED for models without video input. */
pipit_status pipit_session_attach_video_frames(pipit_session* session, const char* const* frames, int32_t n_frames,
                                               double fps);
/* The same for a video file (MP4, MOV, WebM, MKV, AVI, ...: a path, or a data:video/...;base64 URL), decoded with
 * FFmpeg's libraries at the file's own frame rate; only the sampled frames are converted, a distant one reached by a
 * keyframe seek. Clips longer than 1 hour are refused at the generation. PIPIT_ERR_UNSUPPORTED for models without
 * video input and for builds without FFmpeg (pass frames there). */
pipit_status pipit_session_attach_video(pipit_session* session, const char* source);
/* The same for a video file's bytes in memory, copied before the call returns. */
pipit_status pipit_session_attach_video_bytes(pipit_session* session, const void* data, size_t size);

/* Attaches an audio clip for the next generation of a model with audio input (Gemma 4); it fills the next audio
 * placeholder of the conversation (use_chat_template = 1: a {"type": "audio"} content part; raw prompts: a
 * placeholder is put before the new text), which becomes <|audio>, one <|audio|> per 40 ms, <audio|> as HF's
 * processor writes it. A file (WAV, FLAC, OGG, MP3, ...: libsndfile; resampled to 16 kHz mono with libsoxr) is
 * decoded here, so a bad one is an error at once (truncated, 0 samples, not audio, longer than the model takes:
 * 30 s for Gemma 4); the clip is encoded at the next generation. A conversation with audio is evaluated from its
 * start at each generation, as one with images. PIPIT_ERR_UNSUPPORTED for models without audio input, and for files
 * when the library was built without libsndfile / libsoxr (the PCM form still works). Since API version 3. */
pipit_status pipit_session_attach_audio(pipit_session* session, const char* path);
/* The same for an audio file in memory (its bytes, copied before the call returns). */
pipit_status pipit_session_attach_audio_bytes(pipit_session* session, const void* data, size_t size);
/* The same for raw PCM: n_samples mono float samples at 16 kHz in [-1, 1] (copied; finite values only). */
pipit_status pipit_session_attach_audio_pcm(pipit_session* session, const float* samples, size_t n_samples);

/* ---- the OpenAI-compatible server inside the process (as `pipit serve`, sharing the loaded model) ----
 * An app runs the engine in its own process and talks to it over loopback HTTP from any UI (WebView, React Native,
 * Flutter): POST /v1/chat/completions (streamed or not), /v1/completions, /v1/embeddings, GET /v1/models, /health,
 * the chat page at /; docs/server.md. The model must outlive the server. Built without the server (no
 * cpp-httplib), pipit_server_start is PIPIT_ERR_UNSUPPORTED. */
typedef struct pipit_server pipit_server;
typedef struct pipit_server_options {
  uint32_t struct_size;  /* set by pipit_server_options_default() */
  const char* host;      /* NULL: "127.0.0.1" (loopback only; another address exposes the model to the network) */
  int32_t port;          /* 0 (the default): any free port, see pipit_server_port() */
  int32_t n_parallel;    /* sequences decoded at once (default 2) */
  int32_t n_ctx;         /* context per sequence (0: min(model max, 4096)) */
  int32_t n_threads;     /* 0: physical cores */
  int32_t kv_type;       /* PIPIT_KV_* */
  const char* api_key;   /* NULL or "": none; else clients send "Authorization: Bearer <key>" */
  const char* model_name; /* the id /v1/models lists (NULL: "pipit") */
  size_t prompt_cache_mib; /* RAM for finished requests' KV, reused by requests sharing a prefix (default 256) */
  int32_t mtp;             /* guesses per decode step from the model's own multi-token-prediction head (Qwen3.5), as
                              `pipit serve --mtp --mtp-n N`: 0 (default) off, at most 16; a model without the head is
                              PIPIT_ERR_UNSUPPORTED */
} pipit_server_options;
void pipit_server_options_init(pipit_server_options* o, size_t size);
#define pipit_server_options_default(o) pipit_server_options_init((o), sizeof *(o))
/* Starts serving on a thread of its own; returns when the socket listens (a port in use is PIPIT_ERR_UNAVAILABLE). */
pipit_status pipit_server_start(pipit_model* model, const pipit_server_options* options, pipit_server** out);
int32_t pipit_server_port(const pipit_server* server);
/* Stops serving: requests in flight are cancelled, their connections closed, and every thread and buffer of the
 * server is freed before it returns. NULL is a no-op. */
void pipit_server_stop(pipit_server* server);

#ifdef __cplusplus
}
#endif

#endif /* PIPIT_PIPIT_H */
