/* JNI glue for the dev.pipit classes (bindings/java/src): each native method of dev.pipit.Native calls the C API
 * (include/pipit/pipit.h) and turns a failure into a dev.pipit.PipitException carrying pipit_last_error(). Handles
 * travel as jlong. Only the C API and the JNI header are used, so the same file builds for Android (NDK) and for a
 * desktop JDK. Strings go in and out as UTF-8 bytes through java.lang.String, not JNI's "modified UTF-8", so
 * characters outside the BMP and NUL survive. */
#include <jni.h>
#include <stdlib.h>
#include <string.h>

#include "pipit/pipit.h"

#define JNI_FN(name) Java_dev_pipit_Native_##name

/* ---- strings and errors ---- */

static void throw_status(JNIEnv* env, pipit_status st, const char* message) {
  if ((*env)->ExceptionCheck(env)) return; /* a Java exception (a listener's) is already on its way */
  jclass cls = (*env)->FindClass(env, "dev/pipit/PipitException");
  if (!cls) return;
  jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V");
  jstring msg = (*env)->NewStringUTF(env, message && *message ? message : "pipit error");
  if (!ctor || !msg) return;
  jobject ex = (*env)->NewObject(env, cls, ctor, (jint)st, msg);
  if (ex) (*env)->Throw(env, (jthrowable)ex);
}

/* Throws for a failed status; returns 1 when it did. */
static int check(JNIEnv* env, pipit_status st) {
  if (st == PIPIT_OK) return 0;
  throw_status(env, st, pipit_last_error());
  return 1;
}

static void throw_oom(JNIEnv* env) { throw_status(env, PIPIT_ERR_UNAVAILABLE, "out of memory in the JNI glue"); }

/* A Java string as NUL-terminated UTF-8 (free with free()); NULL for a null string or on failure (then an
 * exception is pending). Goes through String.getBytes(UTF_8): real UTF-8, not modified UTF-8. */
static char* utf8_of(JNIEnv* env, jstring s, size_t* len_out) {
  if (!s) return NULL;
  jclass cls = (*env)->GetObjectClass(env, s);
  jmethodID get_bytes = (*env)->GetMethodID(env, cls, "getBytes", "(Ljava/lang/String;)[B");
  jstring cs = (*env)->NewStringUTF(env, "UTF-8");
  if (!get_bytes || !cs) return NULL;
  jbyteArray arr = (jbyteArray)(*env)->CallObjectMethod(env, s, get_bytes, cs);
  if (!arr || (*env)->ExceptionCheck(env)) return NULL;
  jsize n = (*env)->GetArrayLength(env, arr);
  char* out = (char*)malloc((size_t)n + 1);
  if (!out) {
    throw_oom(env);
    return NULL;
  }
  (*env)->GetByteArrayRegion(env, arr, 0, n, (jbyte*)out);
  out[n] = '\0';
  (*env)->DeleteLocalRef(env, arr);
  if (len_out) *len_out = (size_t)n;
  return out;
}

static jbyteArray bytes_of(JNIEnv* env, const char* s, size_t n) {
  jbyteArray arr = (*env)->NewByteArray(env, (jsize)n);
  if (arr && n) (*env)->SetByteArrayRegion(env, arr, 0, (jsize)n, (const jbyte*)s);
  return arr;
}

/* UTF-8 bytes as a java.lang.String (new String(bytes, "UTF-8")). */
static jstring string_of(JNIEnv* env, const char* s, size_t n) {
  jbyteArray arr = bytes_of(env, s, n);
  if (!arr) return NULL;
  jclass cls = (*env)->FindClass(env, "java/lang/String");
  jmethodID ctor = (*env)->GetMethodID(env, cls, "<init>", "([BLjava/lang/String;)V");
  jstring cs = (*env)->NewStringUTF(env, "UTF-8");
  if (!ctor || !cs) return NULL;
  jstring out = (jstring)(*env)->NewObject(env, cls, ctor, arr, cs);
  (*env)->DeleteLocalRef(env, arr);
  return out;
}

/* A C API call that writes a string into a caller's buffer: grows the buffer on PIPIT_ERR_BUFFER_TOO_SMALL. */
typedef pipit_status (*string_call)(const void* ctx, char* buf, size_t cap, size_t* len);

static jstring call_string(JNIEnv* env, string_call f, const void* ctx) {
  size_t cap = 4096, len = 0;
  char* buf = (char*)malloc(cap);
  if (!buf) return throw_oom(env), NULL;
  pipit_status st = f(ctx, buf, cap, &len);
  if (st == PIPIT_ERR_BUFFER_TOO_SMALL) {
    free(buf);
    cap = len + 1;
    buf = (char*)malloc(cap);
    if (!buf) return throw_oom(env), NULL;
    st = f(ctx, buf, cap, &len);
  }
  jstring out = NULL;
  if (!check(env, st)) out = string_of(env, buf, len);
  free(buf);
  return out;
}

/* ---- library ---- */

JNIEXPORT jstring JNICALL JNI_FN(version)(JNIEnv* env, jclass cls) {
  (void)cls;
  const char* v = pipit_version();
  return string_of(env, v, strlen(v));
}

JNIEXPORT jint JNICALL JNI_FN(apiVersion)(JNIEnv* env, jclass cls) {
  (void)env, (void)cls;
  return pipit_api_version();
}

/* ---- models ---- */

JNIEXPORT jlong JNICALL JNI_FN(modelLoad)(JNIEnv* env, jclass cls, jstring path, jstring device, jstring precision,
                                          jboolean mmap_weights) {
  (void)cls;
  char* p = utf8_of(env, path, NULL);
  char* d = utf8_of(env, device, NULL);
  char* q = utf8_of(env, precision, NULL);
  pipit_model* m = NULL;
  if (p && !(*env)->ExceptionCheck(env)) {
    pipit_model_options o;
    pipit_model_options_default(&o);
    o.device = d;
    o.precision = q;
    o.mmap_weights = mmap_weights ? 1 : 0;
    check(env, pipit_model_load(p, &o, &m));
  }
  free(p), free(d), free(q);
  return (jlong)(intptr_t)m;
}

JNIEXPORT void JNICALL JNI_FN(modelDestroy)(JNIEnv* env, jclass cls, jlong model) {
  (void)env, (void)cls;
  pipit_model_destroy((pipit_model*)(intptr_t)model);
}

JNIEXPORT jint JNICALL JNI_FN(modelNVocab)(JNIEnv* env, jclass cls, jlong model) {
  (void)env, (void)cls;
  return pipit_model_n_vocab((const pipit_model*)(intptr_t)model);
}

JNIEXPORT jint JNICALL JNI_FN(modelNCtxMax)(JNIEnv* env, jclass cls, jlong model) {
  (void)env, (void)cls;
  return pipit_model_n_ctx_max((const pipit_model*)(intptr_t)model);
}

JNIEXPORT jintArray JNICALL JNI_FN(tokenize)(JNIEnv* env, jclass cls, jlong model, jstring text, jboolean add_special) {
  (void)cls;
  size_t len = 0, n = 0;
  char* t = utf8_of(env, text, &len);
  if (!t) return NULL;
  const pipit_model* m = (const pipit_model*)(intptr_t)model;
  pipit_status st = pipit_tokenize(m, t, len, add_special, NULL, 0, &n);
  int32_t* ids = NULL;
  if (st == PIPIT_ERR_BUFFER_TOO_SMALL) {
    ids = (int32_t*)malloc((n ? n : 1) * sizeof(int32_t));
    st = ids ? pipit_tokenize(m, t, len, add_special, ids, n, &n) : PIPIT_ERR_UNAVAILABLE;
  }
  jintArray out = NULL;
  if (!check(env, st)) {
    out = (*env)->NewIntArray(env, (jsize)n);
    if (out && n) (*env)->SetIntArrayRegion(env, out, 0, (jsize)n, (const jint*)ids);
  }
  free(ids), free(t);
  return out;
}

struct detok_ctx {
  const pipit_model* m;
  const int32_t* ids;
  size_t n;
  int32_t skip;
};

static pipit_status detok_call(const void* c, char* buf, size_t cap, size_t* len) {
  const struct detok_ctx* d = (const struct detok_ctx*)c;
  return pipit_detokenize(d->m, d->ids, d->n, d->skip, buf, cap, len);
}

JNIEXPORT jstring JNICALL JNI_FN(detokenize)(JNIEnv* env, jclass cls, jlong model, jintArray ids, jboolean skip) {
  (void)cls;
  if (!ids) return throw_status(env, PIPIT_ERR_INVALID_ARGUMENT, "detokenize: ids is null"), NULL;
  jsize n = (*env)->GetArrayLength(env, ids);
  jint* a = (*env)->GetIntArrayElements(env, ids, NULL);
  if (!a) return NULL;
  struct detok_ctx c = {(const pipit_model*)(intptr_t)model, (const int32_t*)a, (size_t)n, skip};
  jstring out = call_string(env, detok_call, &c);
  (*env)->ReleaseIntArrayElements(env, ids, a, JNI_ABORT);
  return out;
}

struct template_ctx {
  const pipit_model* m;
  const char* messages;
  int32_t add_generation_prompt;
};

static pipit_status template_call(const void* c, char* buf, size_t cap, size_t* len) {
  const struct template_ctx* t = (const struct template_ctx*)c;
  return pipit_chat_template_apply(t->m, t->messages, t->add_generation_prompt, buf, cap, len);
}

JNIEXPORT jstring JNICALL JNI_FN(applyChatTemplate)(JNIEnv* env, jclass cls, jlong model, jstring messages,
                                                    jboolean add_generation_prompt) {
  (void)cls;
  char* msg = utf8_of(env, messages, NULL);
  if (!msg) return NULL;
  struct template_ctx c = {(const pipit_model*)(intptr_t)model, msg, add_generation_prompt};
  jstring out = call_string(env, template_call, &c);
  free(msg);
  return out;
}

/* ---- sessions ---- */

JNIEXPORT jlong JNICALL JNI_FN(sessionCreate)(JNIEnv* env, jclass cls, jlong model, jint n_ctx, jint n_threads,
                                              jint kv_type) {
  (void)cls;
  pipit_session_options o;
  pipit_session_options_default(&o);
  o.n_ctx = n_ctx;
  o.n_threads = n_threads;
  o.kv_type = kv_type;
  pipit_session* s = NULL;
  check(env, pipit_session_create((pipit_model*)(intptr_t)model, &o, &s));
  return (jlong)(intptr_t)s;
}

JNIEXPORT void JNICALL JNI_FN(sessionDestroy)(JNIEnv* env, jclass cls, jlong session) {
  (void)env, (void)cls;
  pipit_session_destroy((pipit_session*)(intptr_t)session);
}

JNIEXPORT void JNICALL JNI_FN(sessionReset)(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  check(env, pipit_session_reset((pipit_session*)(intptr_t)session));
}

JNIEXPORT void JNICALL JNI_FN(sessionCancel)(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  check(env, pipit_session_cancel((pipit_session*)(intptr_t)session));
}

/* The generation's state for the token callback: the Java bridge to call and the text so far. */
struct gen_ctx {
  JNIEnv* env;
  jobject bridge;
  jmethodID on_piece;
  char* text;
  size_t len, cap;
  int failed; /* out of memory, or the listener threw */
};

static int32_t on_token(const char* piece, size_t len, int32_t token, void* user) {
  struct gen_ctx* g = (struct gen_ctx*)user;
  JNIEnv* env = g->env;
  if (g->len + len + 1 > g->cap) {
    size_t cap = (g->len + len + 1) * 2;
    char* t = (char*)realloc(g->text, cap);
    if (!t) {
      g->failed = 1;
      return 0;
    }
    g->text = t, g->cap = cap;
  }
  memcpy(g->text + g->len, piece, len);
  g->len += len;
  jbyteArray arr = bytes_of(env, piece, len);
  if (!arr) {
    g->failed = 1;
    return 0;
  }
  jboolean go = (*env)->CallBooleanMethod(env, g->bridge, g->on_piece, arr, (jint)token);
  (*env)->DeleteLocalRef(env, arr); /* one local reference per token otherwise: a long answer overflows the frame */
  if ((*env)->ExceptionCheck(env)) {
    g->failed = 1;
    return 0;
  }
  return go ? 1 : 0;
}

JNIEXPORT jstring JNICALL JNI_FN(sessionGenerate)(JNIEnv* env, jclass cls, jlong session, jstring prompt, jboolean chat,
                                                  jint max_tokens, jfloat temperature, jint top_k, jfloat top_p,
                                                  jfloat min_p, jfloat repeat_penalty, jlong seed, jobjectArray stop,
                                                  jobject bridge) {
  (void)cls;
  char* p = utf8_of(env, prompt, NULL);
  if (!p) return NULL;
  jsize n_stop = stop ? (*env)->GetArrayLength(env, stop) : 0;
  char** stops = (char**)calloc((size_t)n_stop + 1, sizeof(char*));
  struct gen_ctx g = {env, bridge, NULL, NULL, 0, 0, 0};
  jstring out = NULL;
  if (!stops) {
    throw_oom(env);
    goto done;
  }
  for (jsize i = 0; i < n_stop; ++i) {
    jstring s = (jstring)(*env)->GetObjectArrayElement(env, stop, i);
    stops[i] = s ? utf8_of(env, s, NULL) : NULL;
    if ((*env)->ExceptionCheck(env)) goto done;
  }
  jclass bc = (*env)->GetObjectClass(env, bridge);
  g.on_piece = (*env)->GetMethodID(env, bc, "onPiece", "([BI)Z");
  if (!g.on_piece) goto done;
  pipit_generate_options o;
  pipit_generate_options_default(&o);
  o.max_tokens = max_tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repeat_penalty = repeat_penalty;
  o.seed = (uint64_t)seed;
  o.stop = (const char* const*)stops;
  o.n_stop = (size_t)n_stop;
  pipit_status st = pipit_session_generate((pipit_session*)(intptr_t)session, p, chat, &o, on_token, &g);
  if ((*env)->ExceptionCheck(env)) goto done; /* the listener threw: that exception goes to the caller */
  if (g.failed) {
    throw_oom(env);
    goto done;
  }
  if (check(env, st)) goto done;
  out = string_of(env, g.text ? g.text : "", g.len);
done:
  if (stops)
    for (jsize i = 0; i < n_stop; ++i) free(stops[i]);
  free(stops), free(p), free(g.text);
  return out;
}

JNIEXPORT jstring JNICALL JNI_FN(sessionFinishReason)(JNIEnv* env, jclass cls, jlong session) {
  (void)cls;
  const char* r = pipit_session_finish_reason((const pipit_session*)(intptr_t)session);
  return string_of(env, r, strlen(r));
}

JNIEXPORT jint JNICALL JNI_FN(sessionNPast)(JNIEnv* env, jclass cls, jlong session) {
  (void)env, (void)cls;
  return pipit_session_n_past((const pipit_session*)(intptr_t)session);
}

JNIEXPORT jint JNICALL JNI_FN(sessionNCtx)(JNIEnv* env, jclass cls, jlong session) {
  (void)env, (void)cls;
  return pipit_session_n_ctx((const pipit_session*)(intptr_t)session);
}

static jfloatArray float_array(JNIEnv* env, const float* v, size_t n) {
  jfloatArray out = (*env)->NewFloatArray(env, (jsize)n);
  if (out && n) (*env)->SetFloatArrayRegion(env, out, 0, (jsize)n, v);
  return out;
}

JNIEXPORT jfloatArray JNICALL JNI_FN(sessionEval)(JNIEnv* env, jclass cls, jlong session, jintArray ids,
                                                  jint n_vocab) {
  (void)cls;
  if (!ids) return throw_status(env, PIPIT_ERR_INVALID_ARGUMENT, "eval: ids is null"), NULL;
  jsize n = (*env)->GetArrayLength(env, ids);
  jint* a = (*env)->GetIntArrayElements(env, ids, NULL);
  float* logits = (float*)malloc((size_t)(n_vocab > 0 ? n_vocab : 1) * sizeof(float));
  jfloatArray out = NULL;
  if (!a || !logits) {
    if (!logits) throw_oom(env);
  } else if (!check(env, pipit_session_eval((pipit_session*)(intptr_t)session, (const int32_t*)a, (size_t)n, logits,
                                            (size_t)n_vocab))) {
    out = float_array(env, logits, (size_t)n_vocab);
  }
  if (a) (*env)->ReleaseIntArrayElements(env, ids, a, JNI_ABORT);
  free(logits);
  return out;
}

JNIEXPORT jfloatArray JNICALL JNI_FN(embed)(JNIEnv* env, jclass cls, jlong session, jstring text) {
  (void)cls;
  size_t len = 0, n = 0;
  char* t = utf8_of(env, text, &len);
  if (!t) return NULL;
  pipit_session* s = (pipit_session*)(intptr_t)session;
  jfloatArray out = NULL;
  pipit_status st = pipit_embed(s, t, len, NULL, 0, &n); /* sizes the vector; evaluates nothing */
  if (st == PIPIT_ERR_BUFFER_TOO_SMALL && n > 0) {
    float* v = (float*)malloc(n * sizeof(float));
    if (!v) {
      throw_oom(env);
    } else {
      if (!check(env, pipit_embed(s, t, len, v, n, &n))) out = float_array(env, v, n);
      free(v);
    }
  } else {
    check(env, st);
  }
  free(t);
  return out;
}

JNIEXPORT void JNICALL JNI_FN(sessionAttachImage)(JNIEnv* env, jclass cls, jlong session, jstring path) {
  (void)cls;
  char* p = utf8_of(env, path, NULL);
  if (!p) return;
  check(env, pipit_session_attach_image((pipit_session*)(intptr_t)session, p));
  free(p);
}

JNIEXPORT void JNICALL JNI_FN(sessionAttachImageBytes)(JNIEnv* env, jclass cls, jlong session, jbyteArray data) {
  (void)cls;
  if (!data) return throw_status(env, PIPIT_ERR_INVALID_ARGUMENT, "attachImage: data is null");
  jsize n = (*env)->GetArrayLength(env, data);
  jbyte* b = (*env)->GetByteArrayElements(env, data, NULL);
  if (!b) return;
  check(env, pipit_session_attach_image_bytes((pipit_session*)(intptr_t)session, b, (size_t)n));
  (*env)->ReleaseByteArrayElements(env, data, b, JNI_ABORT);
}

JNIEXPORT void JNICALL JNI_FN(sessionAttachAudio)(JNIEnv* env, jclass cls, jlong session, jstring path) {
  (void)cls;
  char* p = utf8_of(env, path, NULL);
  if (!p) return;
  check(env, pipit_session_attach_audio((pipit_session*)(intptr_t)session, p));
  free(p);
}

JNIEXPORT void JNICALL JNI_FN(sessionAttachAudioBytes)(JNIEnv* env, jclass cls, jlong session, jbyteArray data) {
  (void)cls;
  if (!data) return throw_status(env, PIPIT_ERR_INVALID_ARGUMENT, "attachAudio: data is null");
  jsize n = (*env)->GetArrayLength(env, data);
  jbyte* b = (*env)->GetByteArrayElements(env, data, NULL);
  if (!b) return;
  check(env, pipit_session_attach_audio_bytes((pipit_session*)(intptr_t)session, b, (size_t)n));
  (*env)->ReleaseByteArrayElements(env, data, b, JNI_ABORT);
}

JNIEXPORT void JNICALL JNI_FN(sessionAttachAudioPcm)(JNIEnv* env, jclass cls, jlong session, jfloatArray samples) {
  (void)cls;
  if (!samples) return throw_status(env, PIPIT_ERR_INVALID_ARGUMENT, "attachAudio: samples is null");
  jsize n = (*env)->GetArrayLength(env, samples);
  jfloat* f = (*env)->GetFloatArrayElements(env, samples, NULL);
  if (!f) return;
  check(env, pipit_session_attach_audio_pcm((pipit_session*)(intptr_t)session, f, (size_t)n));
  (*env)->ReleaseFloatArrayElements(env, samples, f, JNI_ABORT);
}

/* ---- the in-process server ---- */

JNIEXPORT jlong JNICALL JNI_FN(serverStart)(JNIEnv* env, jclass cls, jlong model, jstring host, jint port,
                                            jint n_parallel, jint n_ctx, jint n_threads, jstring api_key,
                                            jstring model_name) {
  (void)cls;
  char* h = utf8_of(env, host, NULL);
  char* k = utf8_of(env, api_key, NULL);
  char* n = utf8_of(env, model_name, NULL);
  pipit_server* srv = NULL;
  if (!(*env)->ExceptionCheck(env)) {
    pipit_server_options o;
    pipit_server_options_default(&o);
    o.host = h;
    o.port = port;
    o.n_parallel = n_parallel;
    o.n_ctx = n_ctx;
    o.n_threads = n_threads;
    o.api_key = k;
    o.model_name = n;
    check(env, pipit_server_start((pipit_model*)(intptr_t)model, &o, &srv));
  }
  free(h), free(k), free(n);
  return (jlong)(intptr_t)srv;
}

JNIEXPORT jint JNICALL JNI_FN(serverPort)(JNIEnv* env, jclass cls, jlong server) {
  (void)env, (void)cls;
  return pipit_server_port((const pipit_server*)(intptr_t)server);
}

JNIEXPORT void JNICALL JNI_FN(serverStop)(JNIEnv* env, jclass cls, jlong server) {
  (void)env, (void)cls;
  pipit_server_stop((pipit_server*)(intptr_t)server);
}
