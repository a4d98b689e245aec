package dev.pipit;

/**
 * The JNI entry points (bindings/java/jni/pipit_jni.c) over the C API. Handles are the C pointers as longs; the
 * public classes own them. The library is loaded once: from -Dpipit.jni.path (a file) when set, else
 * System.loadLibrary("pipit_jni") (java.library.path; on Android the APK's jniLibs).
 */
final class Native {
  static {
    String path = System.getProperty("pipit.jni.path");
    if (path != null && !path.isEmpty()) System.load(path);
    else System.loadLibrary("pipit_jni");
  }

  private Native() {}

  static native String version();
  static native int apiVersion();

  static native long modelLoad(String path, String device, String precision, boolean mmapWeights);
  static native void modelDestroy(long model);
  static native int modelNVocab(long model);
  static native int modelNCtxMax(long model);
  static native int[] tokenize(long model, String text, boolean addSpecial);
  static native String detokenize(long model, int[] ids, boolean skipSpecial);
  static native String applyChatTemplate(long model, String messagesJson, boolean addGenerationPrompt);

  static native long sessionCreate(long model, int nCtx, int nThreads, int kvType);
  static native void sessionDestroy(long session);
  static native void sessionReset(long session);
  static native void sessionCancel(long session);
  static native String sessionGenerate(long session, String prompt, boolean chat, int maxTokens, float temperature,
      int topK, float topP, float minP, float repeatPenalty, long seed, String[] stop, Session.Bridge bridge);
  static native String sessionFinishReason(long session);
  static native int sessionNPast(long session);
  static native int sessionNCtx(long session);
  static native float[] sessionEval(long session, int[] ids, int nVocab);
  static native float[] embed(long session, String text);
  static native void sessionAttachImage(long session, String path);
  static native void sessionAttachImageBytes(long session, byte[] data);
  static native void sessionAttachAudio(long session, String path);
  static native void sessionAttachAudioBytes(long session, byte[] data);
  static native void sessionAttachAudioPcm(long session, float[] samples);

  static native long serverStart(long model, String host, int port, int nParallel, int nCtx, int nThreads,
      String apiKey, String modelName);
  static native int serverPort(long server);
  static native void serverStop(long server);
}
