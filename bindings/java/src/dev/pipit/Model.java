package dev.pipit;

/**
 * A loaded model (a .pipit file, a .gguf file or a HuggingFace checkpoint folder), shared by any number of
 * {@link Session}s and {@link Server}s on any threads. Close it after them; try-with-resources does:
 *
 * <pre>{@code
 * try (Model model = Model.load("model.pipit");
 *      Session session = model.newSession()) {
 *   session.generate("Once upon a time", new GenerateOptions().maxTokens(64), (piece, token) -> {
 *     System.out.print(piece);
 *     return true;  // false stops
 *   });
 * }
 * }</pre>
 */
public final class Model implements AutoCloseable {
  /** Where and how the model runs; the defaults are the CPU and exact f32 arithmetic. */
  public static final class Options {
    String device;
    String precision;
    boolean mmapWeights;

    /** "cpu" (the default), "opencl" or "opencl:N". */
    public Options device(String device) {
      this.device = device;
      return this;
    }

    /** "exact" (the default) or "fast" (bf16 products where the CPU has them). */
    public Options precision(String precision) {
      this.precision = precision;
      return this;
    }

    /**
     * true: use the weights in place from the file mapping (a faster start and less memory, a slower decode; the
     * CLI's --mmap). false (the default): copy them into 2 MiB pages at load.
     */
    public Options mmapWeights(boolean mmapWeights) {
      this.mmapWeights = mmapWeights;
      return this;
    }
  }

  private long handle;

  private Model(long handle) {
    this.handle = handle;
  }

  public static Model load(String path) {
    return load(path, new Options());
  }

  public static Model load(String path, Options options) {
    if (path == null) throw new NullPointerException("path");
    return new Model(Native.modelLoad(path, options.device, options.precision, options.mmapWeights));
  }

  long handle() {
    if (handle == 0) throw new IllegalStateException("the model is closed");
    return handle;
  }

  /** A new conversation with the default context (min(model maximum, 4096)) and threads (physical cores). */
  public Session newSession() {
    return new Session(this, new Session.Options());
  }

  public Session newSession(Session.Options options) {
    return new Session(this, options);
  }

  public int vocabSize() {
    return Native.modelNVocab(handle());
  }

  public int maxContext() {
    return Native.modelNCtxMax(handle());
  }

  public int[] tokenize(String text, boolean addSpecial) {
    return Native.tokenize(handle(), text, addSpecial);
  }

  public String detokenize(int[] ids, boolean skipSpecial) {
    return Native.detokenize(handle(), ids, skipSpecial);
  }

  /** The model's chat template over a JSON array of {"role", "content"} messages. */
  public String applyChatTemplate(String messagesJson, boolean addGenerationPrompt) {
    return Native.applyChatTemplate(handle(), messagesJson, addGenerationPrompt);
  }

  /** Frees the weights. Sessions and servers of the model must be closed first. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      Native.modelDestroy(handle);
      handle = 0;
    }
  }
}
