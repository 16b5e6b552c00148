package jobflow.executor;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.ServerSocket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.Map;

/**
 * Registration in a real Nacos server (rnacos, found through $RNACOS_BIN as the other suites
 * find it): listed with its prefix and gone on close, registered again once Nacos forgot it,
 * a wrong password refused, an unreachable Nacos named. Run by scripts/sdk-java.sh.
 */
public final class NacosRegistrationTest {
    private NacosRegistrationTest() {}

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    static final class Rnacos implements AutoCloseable {
        final String addr;
        final Process process;
        final String[] auth;

        /**
         * Starts rnacos and waits for it to answer (with auth, to log its admin in). rnacos
         * sometimes panics while it initialises its store when the box is busy, and then
         * refuses the admin login for good: such a start is given up after 20 s and rnacos
         * started afresh (three starts at most), as the Rust suites' harness does.
         */
        Rnacos(String... auth) throws Exception {
            String bin = System.getenv("RNACOS_BIN");
            if (bin == null) {
                throw new IllegalStateException("RNACOS_BIN is not set (scripts/conformance.sh sets it)");
            }
            this.auth = auth;
            for (int start = 1;; start++) {
                int port = freePort();
                while (port + 1000 > 65535) {
                    port = freePort();
                }
                File dir = Files.createTempDirectory("rnacos").toFile();
                File log = new File(dir, "rnacos.log");
                ProcessBuilder pb = new ProcessBuilder(bin).directory(dir).redirectErrorStream(true).redirectOutput(log);
                Map<String, String> env = pb.environment();
                env.put("RNACOS_HTTP_PORT", Integer.toString(port));
                env.put("RNACOS_GRPC_PORT", Integer.toString(port + 1000));
                env.put("RNACOS_HTTP_CONSOLE_PORT", Integer.toString(freePort()));
                env.put("RNACOS_DATA_DIR", new File(dir, "data").getPath());
                env.put("RUST_LOG", "warn");
                if (auth.length == 2) {
                    env.put("RNACOS_ENABLE_OPEN_API_AUTH", "true");
                    env.put("RNACOS_INIT_ADMIN_USERNAME", auth[0]);
                    env.put("RNACOS_INIT_ADMIN_PASSWORD", auth[1]);
                }
                String at = "127.0.0.1:" + port;
                Process started = pb.start();
                Exception last = answers(at, started);
                if (last == null) {
                    this.addr = at;
                    this.process = started;
                    return;
                }
                started.destroyForcibly();
                String said = new String(Files.readAllBytes(log.toPath()), StandardCharsets.UTF_8);
                if (start == 3) {
                    throw new IllegalStateException("rnacos did not answer: " + last + "\nIts log:\n" + said);
                }
                System.err.println("rnacos start " + start + " did not answer (" + last + "); starting afresh. Its log:\n" + said);
            }
        }

        /** Waits up to 20 s for rnacos at `at` to answer; `null` once it does, else the last error. */
        private Exception answers(String at, Process started) throws InterruptedException {
            long deadline = System.currentTimeMillis() + 20_000;
            while (true) {
                try {
                    hosts(at, "nobody");
                    return null;
                } catch (IOException | RuntimeException e) {
                    if (System.currentTimeMillis() > deadline || !started.isAlive()) {
                        return e;
                    }
                    Thread.sleep(100);
                }
            }
        }

        List<?> hosts(String service) throws IOException {
            return hosts(addr, service);
        }

        List<?> hosts(String at, String service) throws IOException {
            String query = "serviceName=" + service;
            if (auth.length == 2) {
                HttpURLConnection login = (HttpURLConnection) new URL("http://" + at + "/nacos/v1/auth/login?username="
                        + auth[0] + "&password=" + auth[1]).openConnection();
                login.setRequestMethod("POST");
                query += "&accessToken=" + ((Map<?, ?>) Json.parse(read(login.getInputStream()))).get("accessToken");
            }
            HttpURLConnection c = (HttpURLConnection) new URL("http://" + at + "/nacos/v1/ns/instance/list?" + query).openConnection();
            return (List<?>) ((Map<?, ?>) Json.parse(read(c.getInputStream()))).get("hosts");
        }

        void forget(String service, int port) throws IOException {
            HttpURLConnection c = (HttpURLConnection) new URL("http://" + addr + "/nacos/v1/ns/instance?serviceName=" + service
                    + "&ip=127.0.0.1&port=" + port + "&ephemeral=true").openConnection();
            c.setRequestMethod("DELETE");
            read(c.getInputStream());
        }

        @Override
        public void close() {
            process.destroyForcibly();
        }
    }

    static String read(InputStream in) throws IOException {
        try (InputStream input = in) {
            byte[] all = new byte[0];
            byte[] buf = new byte[8192];
            int n;
            while ((n = input.read(buf)) > 0) {
                byte[] grown = new byte[all.length + n];
                System.arraycopy(all, 0, grown, 0, all.length);
                System.arraycopy(buf, 0, grown, all.length, n);
                all = grown;
            }
            return new String(all, StandardCharsets.UTF_8);
        }
    }

    interface Check {
        boolean ok() throws Exception;
    }

    static void waitFor(String what, Check check) throws Exception {
        long deadline = System.currentTimeMillis() + 10_000;
        while (!check.ok()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(100);
        }
    }

    static void listedWithItsPrefixAndGoneOnClose() throws Exception {
        try (Rnacos nacos = new Rnacos()) {
            NacosRegistration r = NacosRegistration.builder(nacos.addr, "orders", "127.0.0.1", 18423).pathPrefix("/jobs").register();
            List<?> hosts = nacos.hosts("orders");
            Map<?, ?> h = (Map<?, ?>) hosts.get(0);
            JobExecutorTest.check(hosts.size() == 1 && h.get("port").equals(18423L) && Boolean.TRUE.equals(h.get("healthy"))
                    && Boolean.TRUE.equals(h.get("ephemeral"))
                    && "/jobs".equals(((Map<?, ?>) h.get("metadata")).get("jobflow.path-prefix")), "listed " + hosts);
            r.close();
            waitFor("the instance to leave", () -> nacos.hosts("orders").isEmpty());
        }
    }

    static void registeredAgainOnceForgottenThroughASecondAddress() throws Exception {
        try (Rnacos nacos = new Rnacos()) {
            String dead = "127.0.0.1:" + freePort();
            NacosRegistration r = NacosRegistration.builder(dead + "," + nacos.addr, "kept", "127.0.0.1", 18425).register();
            try {
                JobExecutorTest.check(((Map<?, ?>) ((Map<?, ?>) nacos.hosts("kept").get(0)).get("metadata")).isEmpty(), "no prefix announced");
                nacos.forget("kept", 18425);
                JobExecutorTest.check(nacos.hosts("kept").isEmpty(), "forgotten");
                // The next beat (rnacos asks for one every 5 s) finds it forgotten.
                waitFor("registered again", () -> nacos.hosts("kept").size() == 1);
            } finally {
                r.close();
            }
        }
    }

    static void aWrongPasswordIsRefusedAndTheRightOneRegisters() throws Exception {
        try (Rnacos nacos = new Rnacos("jobflow", "s3cret-pass")) {
            try {
                NacosRegistration.builder(nacos.addr, "secured", "127.0.0.1", 18427).credentials("jobflow", "wrong").register();
                JobExecutorTest.check(false, "a wrong password registers");
            } catch (NacosRegistration.NacosException e) {
                JobExecutorTest.check(e.getMessage().contains("login refused"), e.getMessage());
            }
            NacosRegistration r = NacosRegistration.builder(nacos.addr, "secured", "127.0.0.1", 18427)
                    .credentials("jobflow", "s3cret-pass").register();
            try {
                JobExecutorTest.check(nacos.hosts("secured").size() == 1, "registered with the right password");
            } finally {
                r.close();
            }
        }
    }

    static void anUnreachableNacosIsNamed() throws Exception {
        String dead = "127.0.0.1:" + freePort();
        try {
            NacosRegistration.builder(dead, "nowhere", "127.0.0.1", 1).timeoutMillis(1000).register();
            JobExecutorTest.check(false, "registered with no Nacos");
        } catch (NacosRegistration.NacosException e) {
            JobExecutorTest.check(e.getMessage().contains(dead), e.getMessage());
        }
    }

    public static void main(String[] args) throws Exception {
        listedWithItsPrefixAndGoneOnClose();
        registeredAgainOnceForgottenThroughASecondAddress();
        aWrongPasswordIsRefusedAndTheRightOneRegisters();
        anUnreachableNacosIsNamed();
        System.out.println("NacosRegistrationTest: 4 passed");
    }
}
