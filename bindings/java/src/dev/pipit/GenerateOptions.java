package dev.pipit;

/** Sampling and stopping for one generation; the defaults are the C API's (temperature 0.8, top-k 40, ...). */
public final class GenerateOptions {
  int maxTokens = 256;
  float temperature = 0.8f;
  int topK = 40;
  float topP = 0.95f;
  float minP = 0.05f;
  float repeatPenalty = 1.0f;
  long seed = 0;
  String[] stop = new String[0];

  public GenerateOptions maxTokens(int n) {
    maxTokens = n;
    return this;
  }

  /** 0: greedy. */
  public GenerateOptions temperature(float t) {
    temperature = t;
    return this;
  }

  /** 0: off. */
  public GenerateOptions topK(int k) {
    topK = k;
    return this;
  }

  public GenerateOptions topP(float p) {
    topP = p;
    return this;
  }

  public GenerateOptions minP(float p) {
    minP = p;
    return this;
  }

  public GenerateOptions repeatPenalty(float p) {
    repeatPenalty = p;
    return this;
  }

  public GenerateOptions seed(long s) {
    seed = s;
    return this;
  }

  /** Stop strings (not included in the output). */
  public GenerateOptions stop(String... s) {
    stop = s.clone();
    return this;
  }
}
