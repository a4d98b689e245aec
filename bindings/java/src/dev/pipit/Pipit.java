package dev.pipit;

/** The library as a whole. */
public final class Pipit {
  private Pipit() {}

  /** The engine's version, e.g. "0.1.0". */
  public static String version() {
    return Native.version();
  }

  /** PIPIT_API_VERSION of the C API the native library was built with. */
  public static int apiVersion() {
    return Native.apiVersion();
  }
}
