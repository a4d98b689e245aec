package dev.pipit;

import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java binding end to end on stories260k (a real tiny trained model): a greedy story identical to `pipit run`,
 * a cancel from another thread, the in-process server over HTTP, errors as PipitException, and no leak over 100
 * load / generate / close cycles (an RSS bound).
 *
 * <p>Usage: java -cp pipit.jar:pipit_test.jar dev.pipit.PipitTest PIPIT_BINARY TESTDATA
 */
public final class PipitTest {
  private static int failures = 0;

  private static void check(boolean ok, String what) {
    System.out.println((ok ? "ok   " : "FAIL ") + what);
    if (!ok) failures++;
  }

  public static void main(String[] args) throws Exception {
    String pipit = args[0];
    String model = args[1] + "/models/stories260k";
    check(Pipit.apiVersion() >= 2, "api version " + Pipit.apiVersion());
    check(!Pipit.version().isEmpty(), "version " + Pipit.version());
    greedyMatchesCli(pipit, model);
    mmapWeightsGiveTheSameTokens(model);
    cancelFromAnotherThread(model);
    inProcessServer(model);
    errors(model);
    noLeaks(model);
    if (failures > 0) {
      System.out.println(failures + " check(s) failed");
      System.exit(1);
    }
    System.out.println("all checks passed");
  }

  private static String runCli(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
    p.getOutputStream().close();
    byte[] out = p.getInputStream().readAllBytes();
    check(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, "pipit run exits 0");
    return new String(out, StandardCharsets.UTF_8);
  }

  static void greedyMatchesCli(String pipit, String model) throws Exception {
    String prompt = "Once upon a time";
    String cli = runCli(pipit, "run", "-m", model, "-p", prompt, "-n", "48", "--temp", "0");
    try (Model m = Model.load(model); Session s = m.newSession()) {
      StringBuilder streamed = new StringBuilder();
      List<Integer> tokens = new ArrayList<>();
      String text = s.generate(prompt, new GenerateOptions().maxTokens(48).temperature(0), (piece, token) -> {
        streamed.append(piece);
        tokens.add(token);
        return true;
      });
      check(text.equals(streamed.toString()), "returned text == streamed pieces");
      check(tokens.size() == 48, "48 tokens streamed (" + tokens.size() + ")");
      check(cli.trim().equals((prompt + text).trim()), "greedy story == `pipit run`:\n  java: " + prompt + text
          + "\n  cli:  " + cli.trim());
      check(s.finishReason().equals("length"), "finish reason length");
      int[] ids = m.tokenize(prompt, true);
      check(ids.length > 1 && m.detokenize(ids, true).equals(prompt), "tokenize / detokenize round trip");
      try (Session e = m.newSession()) {
        float[] logits = e.eval(ids);
        int best = 0;
        for (int i = 1; i < logits.length; ++i) if (logits[i] > logits[best]) best = i;
        check(logits.length == m.vocabSize() && best == tokens.get(0),
            "eval: " + logits.length + " logits, argmax " + best + " == the first greedy token " + tokens.get(0));
      }
    }
  }

  // Options.mmapWeights(true): the weights used in place from the file mapping give the copied weights' tokens
  static void mmapWeightsGiveTheSameTokens(String model) throws Exception {
    String[] text = new String[2];
    for (int i = 0; i < 2; ++i) {
      try (Model m = Model.load(model, new Model.Options().mmapWeights(i == 1)); Session s = m.newSession()) {
        text[i] = s.generate("Once upon a time", new GenerateOptions().maxTokens(16).temperature(0));
      }
    }
    check(!text[0].isEmpty() && text[0].equals(text[1]), "mmapWeights(true) gives the same greedy text: " + text[0]
        + " / " + text[1]);
  }

  static void cancelFromAnotherThread(String model) throws Exception {
    try (Model m = Model.load(model); Session s = m.newSession()) {
      CountDownLatch started = new CountDownLatch(1);
      AtomicInteger count = new AtomicInteger();
      AtomicReference<String> result = new AtomicReference<>();
      AtomicReference<Throwable> error = new AtomicReference<>();
      Thread gen = new Thread(() -> {
        try {
          // a context's worth of tokens: far longer than the cancel takes to arrive
          result.set(s.generate("Once upon a time", new GenerateOptions().maxTokens(100000).temperature(0.8f)
              .seed(7), (piece, token) -> {
                if (count.incrementAndGet() == 5) started.countDown();
                return true;
              }));
        } catch (Throwable t) {
          error.set(t);
        }
      });
      gen.start();
      check(started.await(60, TimeUnit.SECONDS), "generation started");
      s.cancel();
      gen.join(60000);
      check(!gen.isAlive() && error.get() == null, "generate returned after cancel: " + error.get());
      check(s.finishReason().equals("cancelled"), "finish reason cancelled (" + s.finishReason() + ")");
      check(count.get() < s.contextSize() - 8, "stopped early: " + count.get() + " tokens");
      // the session goes on after a cancel
      String more = s.generate(" The end.", new GenerateOptions().maxTokens(4).temperature(0));
      check(s.finishReason().equals("length") && !more.isEmpty(), "generates again after the cancel");
      // a listener returning false stops too
      s.reset();
      AtomicInteger n = new AtomicInteger();
      s.generate("Once", new GenerateOptions().maxTokens(50), (piece, token) -> n.incrementAndGet() < 3);
      check(n.get() == 3 && s.finishReason().equals("cancelled"), "listener false stops after 3 tokens");
      // a listener's exception reaches the caller, and the session stays usable
      boolean thrown = false;
      try {
        s.generate("Once", new GenerateOptions().maxTokens(50), (piece, token) -> {
          throw new IllegalStateException("from the listener");
        });
      } catch (IllegalStateException e) {
        thrown = e.getMessage().equals("from the listener");
      }
      check(thrown, "a listener's exception propagates");
    }
  }

  static String http(String method, String url, String body) throws Exception {
    HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
    c.setRequestMethod(method);
    c.setConnectTimeout(10000);
    c.setReadTimeout(60000);
    if (body != null) {
      c.setDoOutput(true);
      c.setRequestProperty("Content-Type", "application/json");
      try (OutputStream o = c.getOutputStream()) {
        o.write(body.getBytes(StandardCharsets.UTF_8));
      }
    }
    int code = c.getResponseCode();
    InputStream in = code < 400 ? c.getInputStream() : c.getErrorStream();
    String text = in == null ? "" : new String(in.readAllBytes(), StandardCharsets.UTF_8);
    return code + " " + text;
  }

  static void inProcessServer(String model) throws Exception {
    try (Model m = Model.load(model)) {
      int port;
      try (Server srv = Server.start(m, new Server.Options().port(0).modelName("stories"));
           Session s = m.newSession()) {
        port = srv.port();
        check(port > 0, "server listens on port " + port);
        String base = "http://127.0.0.1:" + port;
        String models = http("GET", base + "/v1/models", null);
        check(models.startsWith("200 ") && models.contains("\"stories\""), "GET /v1/models: " + models);
        String r = http("POST", base + "/v1/completions",
            "{\"prompt\": \"Once upon a time\", \"max_tokens\": 16, \"temperature\": 0}");
        check(r.startsWith("200 ") && r.contains("\"choices\"") && r.contains("\"finish_reason\":\"length\""),
            "POST /v1/completions: " + r);
        // the same greedy text as the binding's own session of the same model
        String own = s.generate("Once upon a time", new GenerateOptions().maxTokens(16).temperature(0));
        check(r.contains(own.replace("\n", "\\n").replace("\"", "\\\"")), "server text == session text");
        String bad = http("POST", base + "/v1/completions", "{\"prompt\": ");
        check(bad.startsWith("400 "), "a malformed request gets 400: " + bad);
      }
      boolean refused = false;
      try {
        http("GET", "http://127.0.0.1:" + port + "/health", null);
      } catch (java.io.IOException e) {
        refused = true;
      }
      check(refused, "the port is closed after close()");
    }
  }

  static void errors(String model) {
    try {
      Model.load(model + "/no-such-file.pipit");
      check(false, "loading a missing file throws");
    } catch (PipitException e) {
      check(e.status() == PipitException.NOT_FOUND || e.status() == PipitException.IO,
          "missing file: PipitException " + e.status() + ": " + e.getMessage());
    }
    try (Model m = Model.load(model); Session s = m.newSession()) {
      try {
        s.attachImage(new byte[] {1, 2, 3});
        check(false, "an image for a text-only model throws");
      } catch (PipitException e) {
        check(e.status() == PipitException.UNSUPPORTED, "image on a text model: " + e.getMessage());
      }
      try {
        s.attachAudio(new float[] {0.0f, 0.1f});
        check(false, "audio for a model without audio input throws");
      } catch (PipitException e) {
        check(e.status() == PipitException.UNSUPPORTED, "audio on a text model: " + e.getMessage());
      }
      try {
        s.embed("hello");
        check(false, "embed without a pooling config throws");
      } catch (PipitException e) {
        check(e.status() == PipitException.UNSUPPORTED, "embed without a pooling config: " + e.getMessage());
      }
      try {
        s.chat("not json", new GenerateOptions(), null);
        check(false, "malformed chat messages throw");
      } catch (PipitException e) {
        check(e.status() == PipitException.INVALID_ARGUMENT, "malformed chat messages: " + e.getMessage());
      }
    }
  }

  static long rssKib() throws Exception {
    for (String line : Files.readAllLines(Paths.get("/proc/self/status")))
      if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
    return -1;
  }

  static void noLeaks(String model) throws Exception {
    long after20 = 0;
    for (int i = 0; i < 100; ++i) {
      try (Model m = Model.load(model); Session s = m.newSession()) {
        s.generate("Once upon a time", new GenerateOptions().maxTokens(8).seed(i));
      }
      if (i == 19) {
        System.gc();
        after20 = rssKib();
      }
    }
    System.gc();
    long after100 = rssKib();
    // a leaked model or session per cycle would be 80 x (its mapping or its KV cache, ~0.6 MiB) >= 48 MiB
    check(after100 - after20 < 16 * 1024, "100 load/generate/close cycles: RSS " + after20 / 1024 + " MiB after 20, "
        + after100 / 1024 + " MiB after 100");
  }
}
