package dev.pipit;

/** An error from the engine: {@link #getMessage()} is the engine's own text, {@link #status()} its pipit_status. */
public class PipitException extends RuntimeException {
  /** pipit_status codes (include/pipit/pipit.h). */
  public static final int INVALID_ARGUMENT = 1, NOT_FOUND = 2, IO = 3, FORMAT = 4, UNSUPPORTED = 5,
      OUT_OF_RANGE = 6, INTERNAL = 7, CANCELLED = 8, UNAVAILABLE = 9, BUFFER_TOO_SMALL = 10;

  private final int status;

  public PipitException(int status, String message) {
    super(message);
    this.status = status;
  }

  public int status() {
    return status;
  }
}
