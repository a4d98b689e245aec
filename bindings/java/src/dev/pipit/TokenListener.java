package dev.pipit;

/** Receives each piece of generated text (valid UTF-8 text, possibly empty) on the generating thread. */
@FunctionalInterface
public interface TokenListener {
  /** Return false to stop generating (finish reason "cancelled"). */
  boolean onToken(String piece, int token);
}
