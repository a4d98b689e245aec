package dev.pipit;

/**
 * The OpenAI-compatible HTTP server inside this process, over an already loaded model: any UI (a WebView, React
 * Native, Flutter, another process on the device) talks to it on a loopback port. Close it before the model.
 *
 * <pre>{@code
 * try (Server server = Server.start(model, new Server.Options())) {   // port 0: any free port
 *   String base = "http://127.0.0.1:" + server.port() + "/v1";        // POST base + "/chat/completions"
 * }
 * }</pre>
 */
public final class Server implements AutoCloseable {
  /** Listening address and capacity; the defaults are loopback, any free port, 2 parallel sequences. */
  public static final class Options {
    String host = "127.0.0.1";
    int port = 0;
    int parallel = 2;
    int nCtx = 0;
    int nThreads = 0;
    String apiKey;
    String modelName = "pipit";

    public Options host(String h) {
      host = h;
      return this;
    }

    /** 0: any free port ({@link Server#port()} tells which). */
    public Options port(int p) {
      port = p;
      return this;
    }

    public Options parallel(int n) {
      parallel = n;
      return this;
    }

    public Options contextSize(int n) {
      nCtx = n;
      return this;
    }

    public Options threads(int n) {
      nThreads = n;
      return this;
    }

    /** Clients must send "Authorization: Bearer KEY". */
    public Options apiKey(String k) {
      apiKey = k;
      return this;
    }

    public Options modelName(String n) {
      modelName = n;
      return this;
    }
  }

  private final Model model;
  private long handle;

  private Server(Model model, long handle) {
    this.model = model;
    this.handle = handle;
  }

  /** Starts serving; returns once the port listens. */
  public static Server start(Model model, Options o) {
    return new Server(model, Native.serverStart(model.handle(), o.host, o.port, o.parallel, o.nCtx, o.nThreads,
        o.apiKey, o.modelName));
  }

  public static Server start(Model model, int port) {
    return start(model, new Options().port(port));
  }

  public synchronized int port() {
    if (handle == 0) throw new IllegalStateException("the server is stopped");
    return Native.serverPort(handle);
  }

  /** Stops serving: requests in flight are cancelled and every thread of the server is joined. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      long h = handle;
      handle = 0;
      Native.serverStop(h);
    }
  }
}
