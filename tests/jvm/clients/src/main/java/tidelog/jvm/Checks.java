package tidelog.jvm;

import java.util.Properties;

/** Machine-checkable results: each check prints one line "CHECK name ok" or "CHECK name FAIL why";
 * the driving pytest reads them. A failed check does not stop the program. */
final class Checks {
  interface Body {
    String run() throws Exception;
  }

  private static int failures;

  private Checks() {}

  static void run(String name, Body body) {
    try {
      String detail = body.run();
      System.out.println("CHECK " + name + " ok" + (detail == null ? "" : " " + detail));
    } catch (Throwable t) {
      failures++;
      Throwable root = t;
      while (root.getCause() != null && root.getCause() != root) root = root.getCause();
      String why = (t.getClass().getSimpleName() + ": " + t.getMessage()
          + (root != t ? " <- " + root.getClass().getSimpleName() + ": " + root.getMessage() : ""))
          .replace('\n', ' ');
      System.out.println("CHECK " + name + " FAIL " + why);
      t.printStackTrace();
    }
    System.out.flush();
  }

  static void expect(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static void done() {
    System.out.println("DONE failures=" + failures);
    System.out.flush();
    System.exit(0);
  }

  static Properties props(String bootstrap, Object... kv) {
    Properties p = new Properties();
    p.put("bootstrap.servers", bootstrap);
    for (int i = 0; i < kv.length; i += 2) p.put(kv[i], String.valueOf(kv[i + 1]));
    return p;
  }
}
