package dev.pipit;

import java.nio.charset.StandardCharsets;

/**
 * One conversation (its KV cache). One thread generates at a time; {@link #cancel()} may be called from any other.
 * Close it before its model.
 */
public final class Session implements AutoCloseable {
  /** Context size, threads and KV cache type; zeros are the defaults. */
  public static final class Options {
    int nCtx;
    int nThreads;
    int kvType;

    /** Tokens the context holds (0: min(model maximum, 4096)). */
    public Options contextSize(int n) {
      nCtx = n;
      return this;
    }

    /** 0: physical cores. */
    public Options threads(int n) {
      nThreads = n;
      return this;
    }

    /** KV cache type: KV_DEFAULT (f16), KV_F32, KV_F16 or KV_Q8_0. */
    public Options kvType(int t) {
      kvType = t;
      return this;
    }
  }

  public static final int KV_DEFAULT = 0, KV_F32 = 1, KV_F16 = 2, KV_Q8_0 = 3;

  private final Model model;  // kept reachable while the session lives
  private long handle;

  Session(Model model, Options o) {
    this.model = model;
    this.handle = Native.sessionCreate(model.handle(), o.nCtx, o.nThreads, o.kvType);
  }

  private long handle() {
    if (handle == 0) throw new IllegalStateException("the session is closed");
    return handle;
  }

  /** Called by the native code with each piece's UTF-8 bytes. */
  static final class Bridge {
    private final TokenListener listener;

    Bridge(TokenListener listener) {
      this.listener = listener;
    }

    boolean onPiece(byte[] utf8, int token) {
      return listener == null || listener.onToken(new String(utf8, StandardCharsets.UTF_8), token);
    }
  }

  /**
   * Continues the conversation with raw text (a BOS is added at the start of a session) and returns the generated
   * text; pieces reach {@code listener} (may be null) as they are generated.
   */
  public synchronized String generate(String prompt, GenerateOptions options, TokenListener listener) {
    return run(prompt, false, options, listener);
  }

  public String generate(String prompt, GenerateOptions options) {
    return generate(prompt, options, null);
  }

  /**
   * Answers a conversation given as a JSON array of messages ({"role": ..., "content": ...}, the whole conversation
   * so far; an image is a {"type": "image"} content part, attached before with {@link #attachImage}); the model's
   * chat template renders it and the part shared with the previous call is not evaluated again.
   */
  public synchronized String chat(String messagesJson, GenerateOptions options, TokenListener listener) {
    return run(messagesJson, true, options, listener);
  }

  private String run(String prompt, boolean chat, GenerateOptions o, TokenListener listener) {
    if (prompt == null) throw new NullPointerException("prompt");
    if (o == null) o = new GenerateOptions();
    return Native.sessionGenerate(handle(), prompt, chat, o.maxTokens, o.temperature, o.topK, o.topP, o.minP,
        o.repeatPenalty, o.seed, o.stop, new Bridge(listener));
  }

  /**
   * From any thread: stops the generation running now at its next token (or prefill chunk); it returns normally
   * with {@link #finishReason()} "cancelled". No effect when none runs.
   */
  public void cancel() {
    long h = handle;  // not synchronized: generate() holds the lock
    if (h != 0) Native.sessionCancel(h);
  }

  /** "stop", "length" or "cancelled": why the last generation ended. */
  public synchronized String finishReason() {
    return Native.sessionFinishReason(handle());
  }

  /** Forget the conversation. */
  public synchronized void reset() {
    Native.sessionReset(handle());
  }

  public synchronized int tokensInContext() {
    return Native.sessionNPast(handle());
  }

  public synchronized int contextSize() {
    return Native.sessionNCtx(handle());
  }

  /**
   * Appends tokens to the conversation and evaluates them without sampling; returns the last token's raw logits
   * (one per vocabulary entry). A later {@link #generate} continues after them.
   */
  public synchronized float[] eval(int[] ids) {
    return Native.sessionEval(handle(), ids, model.vocabSize());
  }

  /**
   * The text's embedding, pooled as the checkpoint's sentence-transformers files say (as the server's
   * /v1/embeddings). Resets the conversation. A model without a pooling config throws (UNSUPPORTED).
   */
  public synchronized float[] embed(String text) {
    return Native.embed(handle(), text);
  }

  /** An image file (or data: URL) for the next generation of a vision-language model. */
  public synchronized void attachImage(String path) {
    Native.sessionAttachImage(handle(), path);
  }

  /** An image's file bytes (PNG, JPEG, ...) for the next generation of a vision-language model. */
  public synchronized void attachImage(byte[] data) {
    Native.sessionAttachImageBytes(handle(), data);
  }

  /**
   * An audio file (WAV, FLAC, OGG, MP3, ...) for the next generation of a model with audio input (Gemma 4): a
   * {"type": "audio"} content part, or a placeholder before a raw prompt's text. Decoded here (a bad file throws).
   */
  public synchronized void attachAudio(String path) {
    Native.sessionAttachAudio(handle(), path);
  }

  /** An audio file's bytes, as {@link #attachAudio(String)}. */
  public synchronized void attachAudio(byte[] data) {
    Native.sessionAttachAudioBytes(handle(), data);
  }

  /** Mono float samples at 16 kHz in [-1, 1], as {@link #attachAudio(String)}. */
  public synchronized void attachAudio(float[] samples16k) {
    Native.sessionAttachAudioPcm(handle(), samples16k);
  }

  @Override
  public synchronized void close() {
    if (handle != 0) {
      long h = handle;
      handle = 0;
      Native.sessionDestroy(h);
    }
  }
}
