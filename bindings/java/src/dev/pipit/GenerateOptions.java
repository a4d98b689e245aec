package dev.pipit;

/**
 * Sampling and stopping for one generation. Sampling left unset takes the model's generation_config.json values (as
 * HF generate() and the server do), else temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1; the
 * seed left unset is a new one per generation. (NaN / Integer.MIN_VALUE / -1 are the C API's "unset".)
 */
public final class GenerateOptions {
  int maxTokens = 256;
  float temperature = Float.NaN;
  int topK = Integer.MIN_VALUE;
  float topP = Float.NaN;
  float minP = Float.NaN;
  float repeatPenalty = Float.NaN;
  long seed = -1;  // PIPIT_SEED_RANDOM (UINT64_MAX)
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

  /** -1: a new seed per generation (the default). */
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
