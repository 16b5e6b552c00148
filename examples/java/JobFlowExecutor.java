import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * A JobFlow executor on the JDK alone (Java 8 or later, no dependencies), implementing the
 * whole contract of docs/executor-protocol.md:
 * <ul>
 *   <li>{@code POST {prefix}/{handler}}: signed calls only; {@code syncOrders} answers at once,
 *       {@code rebuildIndex} and {@code waitForCancel} answer 202 and run in the background;</li>
 *   <li>the result of a background run is posted, signed, to the latest call's
 *       {@code reportUrl};</li>
 *   <li>{@code timeoutSeconds} is enforced: the run is stopped and recorded as TIMEOUT;</li>
 *   <li>every execution is remembered by trace id: a repeated call never runs it again;</li>
 *   <li>{@code GET {prefix}/status/{traceId}} and {@code POST {prefix}/cancel/{traceId}},
 *       both signed.</li>
 * </ul>
 * In a Spring Boot service the same logic sits in a {@code @RestController}; see the protocol
 * document's Java section for what differs there.
 *
 * <pre>javac JobFlowExecutor.java && java JobFlowExecutor 9003 "$JOBFLOW_SIGNING_SECRET"</pre>
 * Arguments: port (0 picks a free one; the port is printed), signing secret, optional bind
 * address (default 0.0.0.0) and path prefix (default /internal/job).
 */
public final class JobFlowExecutor {
    static final long MAX_AGE_SECONDS = 300;
    private static final Pattern REPORT_URL = Pattern.compile("\"reportUrl\"\\s*:\\s*\"([^\"]+)\"");
    private static final Pattern MILLIS = Pattern.compile("\"millis\"\\s*:\\s*(\\d+)");
    private static final Pattern TIMEOUT_SECONDS = Pattern.compile("\"timeoutSeconds\"\\s*:\\s*(\\d+)");
    /** The message of a JobResult this class wrote (already JSON-escaped). */
    private static final Pattern MESSAGE = Pattern.compile("\"message\":\"((?:[^\"\\\\]|\\\\.)*)\"");

    private final String prefix;
    private final byte[] secret;
    /** When this process started: {@code startedAt} of status answers. */
    private final String startedAt = Instant.now().toString();
    private final ExecutorService pool = Executors.newCachedThreadPool();
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    /**
     * Every execution by trace id, running or finished. A real service bounds the finished
     * ones (the Rust SDK keeps the last 10,000) and, with several replicas, keeps them in a
     * shared store.
     */
    private final ConcurrentMap<String, Run> runs = new ConcurrentHashMap<String, Run>();

    /** One execution. The first final status set wins; the others are ignored. */
    static final class Run {
        final AtomicReference<String[]> outcome = new AtomicReference<String[]>(); // {status, JobResult JSON}
        final CountDownLatch stopped = new CountDownLatch(1);
        volatile Future<?> work;
        volatile String reportUrl;
        final boolean background;

        Run(boolean background, String reportUrl) {
            this.background = background;
            this.reportUrl = reportUrl;
        }

        String status() {
            String[] o = outcome.get();
            return o == null ? "RUNNING" : o[0];
        }
    }

    JobFlowExecutor(String prefix, String secret) {
        this.prefix = prefix;
        this.secret = secret.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        String secret = args.length > 1 ? args[1] : System.getenv("JOBFLOW_SIGNING_SECRET");
        String host = args.length > 2 ? args[2] : "0.0.0.0";
        String prefix = args.length > 3 ? args[3] : "/internal/job";
        if (secret == null || secret.isEmpty()) {
            throw new IllegalArgumentException("the signing secret is required");
        }
        final JobFlowExecutor executor = new JobFlowExecutor(prefix, secret);
        HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 64);
        server.createContext(prefix + "/", exchange -> {
            try {
                executor.handle(exchange);
            } catch (Exception e) {
                executor.answer(exchange, 500, result(false, "FAILED", "executor error: " + e));
            } finally {
                exchange.close();
            }
        });
        server.setExecutor(Executors.newCachedThreadPool());
        server.start();
        System.out.println("listening on port " + server.getAddress().getPort());
        System.out.flush();
    }

    void handle(HttpExchange exchange) throws Exception {
        String path = exchange.getRequestURI().getPath();
        String rest = path.substring(prefix.length() + 1);
        String method = exchange.getRequestMethod();
        byte[] body = readAll(exchange.getRequestBody());
        boolean status = "GET".equals(method) && rest.startsWith("status/");
        boolean cancel = "POST".equals(method) && rest.startsWith("cancel/");
        if (!status && !"POST".equals(method)) {
            answer(exchange, 405, result(false, "FAILED", "method not allowed"));
            return;
        }
        // Status and cancel are signed with the trace id of their path and an empty body.
        String traceId = status || cancel ? rest.substring(rest.indexOf('/') + 1) : header(exchange, "X-Trace-Id");
        if (!verify(method, path, header(exchange, "X-JobFlow-Timestamp"), traceId, body,
                header(exchange, "X-JobFlow-Signature"))) {
            answer(exchange, 401, result(false, "FAILED", "bad signature"));
            return;
        }
        if (status) {
            Run run = runs.get(traceId);
            answer(exchange, run == null ? 404 : 200, statusAnswer(traceId, run));
        } else if (cancel) {
            cancel(exchange, traceId);
        } else {
            execute(exchange, rest, traceId, new String(body, StandardCharsets.UTF_8));
        }
    }

    private void execute(HttpExchange exchange, String handler, final String traceId, String json) throws IOException {
        String reportUrl = find(REPORT_URL, json);
        Run earlier = runs.get(traceId);
        if (earlier != null) {
            // A repeated call (a failover, a lost answer): never run again.
            String[] outcome = earlier.outcome.get();
            if (outcome == null) {
                earlier.reportUrl = reportUrl;
                answer(exchange, 202, "");
            } else {
                answer(exchange, 200, outcome[1]);
            }
            return;
        }
        long timeoutSeconds = Long.parseLong(orDefault(find(TIMEOUT_SECONDS, json), "0"));
        if ("syncOrders".equals(handler)) {
            int start = Integer.parseInt(header(exchange, "X-Shard-Start"));
            int end = Integer.parseInt(header(exchange, "X-Shard-End"));
            int count = Integer.parseInt(header(exchange, "X-Shard-Count"));
            int mine = 0;
            for (int id = 1; id <= 100; id++) {
                int shard = id % count;
                if (shard >= start && shard <= end) {
                    mine++;
                }
            }
            Run run = new Run(false, reportUrl);
            runs.put(traceId, run);
            finish(traceId, run, "SUCCESS", result(true, "SUCCESS", "java synced " + mine + " orders"));
            answer(exchange, 200, run.outcome.get()[1]);
        } else if ("rebuildIndex".equals(handler) || "waitForCancel".equals(handler)) {
            final long millis = "rebuildIndex".equals(handler)
                    ? Long.parseLong(orDefault(find(MILLIS, json), "200"))
                    : 600_000L;
            final Run run = new Run(true, reportUrl);
            if (runs.putIfAbsent(traceId, run) != null) {
                answer(exchange, 202, "");
                return;
            }
            run.work = pool.submit(() -> work(traceId, run, millis));
            if (timeoutSeconds > 0) {
                timer.schedule(() -> {
                    if (finish(traceId, run, "TIMEOUT", result(false, "TIMEOUT",
                            "aborted after " + timeoutSeconds + "s (timeoutSeconds)"))) {
                        run.work.cancel(true);
                    }
                }, timeoutSeconds, TimeUnit.SECONDS);
            }
            answer(exchange, 202, "");
        } else {
            answer(exchange, 404, result(false, "FAILED", "no handler " + handler));
        }
    }

    /** The background work: here a pause standing for real work, stopped by interruption. */
    private void work(String traceId, Run run, long millis) {
        try {
            Thread.sleep(millis);
            finish(traceId, run, "SUCCESS", result(true, "SUCCESS", "java rebuilt the index in " + millis + " ms"));
        } catch (InterruptedException e) {
            // Stopped by cancel or by the timeout, which record the outcome themselves.
        } finally {
            run.stopped.countDown();
        }
    }

    /** Records the final outcome if none is recorded yet, and reports it for a 202 execution. */
    private boolean finish(String traceId, Run run, String status, String jobResult) {
        if (!run.outcome.compareAndSet(null, new String[] {status, jobResult})) {
            return false;
        }
        if (run.background && run.reportUrl != null) {
            final String url = run.reportUrl;
            pool.submit(() -> report(url, traceId, jobResult));
        }
        return true;
    }

    private void cancel(HttpExchange exchange, String traceId) throws Exception {
        Run run = runs.get(traceId);
        if (run == null) {
            // The cancel overtook its call: remembered as cancelled, so the call is answered
            // CANCELLED when it arrives and the handler never runs.
            Run cancelled = new Run(false, null);
            Run earlier = runs.putIfAbsent(traceId, cancelled);
            if (earlier == null) {
                finish(traceId, cancelled, "CANCELLED",
                        result(false, "CANCELLED", "cancelled before its call arrived"));
                answer(exchange, 200, statusAnswer(traceId, cancelled));
                return;
            }
            run = earlier;
        }
        if (run.outcome.get() == null && run.work != null) {
            run.work.cancel(true);
            // Answered once it has stopped; a handler that does not stop in 10 s is RUNNING.
            if (run.stopped.await(10, TimeUnit.SECONDS)) {
                finish(traceId, run, "CANCELLED", result(false, "CANCELLED", "cancelled"));
            }
        }
        answer(exchange, 200, statusAnswer(traceId, run));
    }

    private String statusAnswer(String traceId, Run run) {
        StringBuilder b = new StringBuilder("{\"traceId\":").append(quote(traceId))
                .append(",\"status\":\"").append(run == null ? "UNKNOWN" : run.status()).append('"');
        String[] outcome = run == null ? null : run.outcome.get();
        if (outcome != null) {
            String message = find(MESSAGE, outcome[1]);
            if (message != null) {
                b.append(",\"message\":\"").append(message).append('"');
            }
        }
        return b.append(",\"startedAt\":\"").append(startedAt).append("\"}").toString();
    }

    /** Posts a background result to the scheduler, signed like a call, trying three times. */
    private void report(String reportUrl, String traceId, String json) {
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        for (int attempt = 1; attempt <= 3; attempt++) {
            try {
                URL url = new URL(reportUrl);
                long ts = System.currentTimeMillis() / 1000;
                HttpURLConnection c = (HttpURLConnection) url.openConnection();
                c.setRequestMethod("POST");
                c.setDoOutput(true);
                c.setConnectTimeout(3000);
                c.setReadTimeout(10000);
                c.setRequestProperty("Content-Type", "application/json");
                c.setRequestProperty("X-Trace-Id", traceId);
                c.setRequestProperty("X-JobFlow-Timestamp", Long.toString(ts));
                c.setRequestProperty("X-JobFlow-Signature", sign("POST", url.getPath(), ts, traceId, body));
                try (OutputStream out = c.getOutputStream()) {
                    out.write(body);
                }
                int status = c.getResponseCode();
                c.disconnect();
                // 200: recorded; 409: settled already. Both are final; retry anything else.
                if (status == 200 || status == 409) {
                    return;
                }
            } catch (Exception e) {
                // Try again below; compensation asks the status endpoint if every try fails.
            }
            try {
                Thread.sleep(500L * attempt);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    boolean verify(String method, String path, String timestamp, String traceId, byte[] body, String signature) throws Exception {
        if (timestamp == null || signature == null) {
            return false;
        }
        long ts;
        try {
            ts = Long.parseLong(timestamp);
        } catch (NumberFormatException e) {
            return false;
        }
        if (Math.abs(System.currentTimeMillis() / 1000 - ts) > MAX_AGE_SECONDS) {
            return false;
        }
        String expected = sign(method, path, ts, traceId == null ? "" : traceId, body);
        return MessageDigest.isEqual(expected.getBytes(StandardCharsets.UTF_8), signature.getBytes(StandardCharsets.UTF_8));
    }

    /** {@code v1=hex(HMAC-SHA256(secret, METHOD\npath\ntimestamp\ntraceId\nbody))}. */
    String sign(String method, String path, long ts, String traceId, byte[] body) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret, "HmacSHA256"));
        mac.update((method + "\n" + path + "\n" + ts + "\n" + traceId + "\n").getBytes(StandardCharsets.UTF_8));
        return "v1=" + hex(mac.doFinal(body));
    }

    /** Lower-case hex, as java.util.HexFormat (Java 17) would give. */
    static String hex(byte[] bytes) {
        char[] digits = "0123456789abcdef".toCharArray();
        char[] out = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            out[2 * i] = digits[(bytes[i] >> 4) & 0xf];
            out[2 * i + 1] = digits[bytes[i] & 0xf];
        }
        return new String(out);
    }

    /**
     * A JobResult: {@code success} and {@code message}, plus {@code status} for the outcomes
     * {@code success} alone cannot express (TIMEOUT, CANCELLED).
     */
    static String result(boolean success, String status, String message) {
        String extra = "SUCCESS".equals(status) || "FAILED".equals(status) ? "" : ",\"status\":\"" + status + "\"";
        return "{\"success\":" + success + extra + ",\"message\":" + quote(message) + "}";
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    void answer(HttpExchange exchange, int status, String json) throws IOException {
        byte[] data = json.getBytes(StandardCharsets.UTF_8);
        if (data.length > 0) {
            exchange.getResponseHeaders().set("Content-Type", "application/json");
        }
        exchange.sendResponseHeaders(status, data.length == 0 ? -1 : data.length);
        if (data.length > 0) {
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(data);
            }
        }
    }

    private static String header(HttpExchange exchange, String name) {
        return exchange.getRequestHeaders().getFirst(name);
    }

    private static String find(Pattern pattern, String text) {
        Matcher m = pattern.matcher(text);
        return m.find() ? m.group(1) : null;
    }

    private static String orDefault(String value, String fallback) {
        return value == null ? fallback : value;
    }

    private static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[8192];
        for (int n; (n = in.read(buf)) > 0; ) {
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }
}
