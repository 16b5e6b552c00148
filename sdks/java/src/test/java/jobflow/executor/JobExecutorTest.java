package jobflow.executor;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import javax.servlet.FilterChain;
import javax.servlet.ReadListener;
import javax.servlet.ServletInputStream;
import javax.servlet.ServletOutputStream;
import javax.servlet.WriteListener;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import jobflow.executor.spring.JobFlowHandler;
import jobflow.executor.spring.JobFlowHandlers;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * The Java SDK without a scheduler: the protocol's signature vector, JSON, the call parsed,
 * the memory of executions, handlers that stop or do not, the servlet filter, and handlers
 * found on Spring beans. A plain main (no test framework is needed to build the SDK): every
 * method named test* runs; any failure ends it with an AssertionError.
 */
public final class JobExecutorTest {
    static final String SECRET = "s3cret";

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void testTheSignatureOfTheProtocolExample() {
        byte[] body = "{\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\",\"jobName\":\"order-sync\"}".getBytes(StandardCharsets.UTF_8);
        String want = "v1=a2d5a056476b16333e35d275ad4d8d0d8476492edb2e89cebf24a7ba34ca13f2";
        byte[] s = SECRET.getBytes(StandardCharsets.UTF_8);
        String trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        check(want.equals(Signatures.sign(s, "POST", "/internal/job/syncOrders", "1700000000", trace, body)), "signature");
        check(Signatures.verify(s, "POST", "/internal/job/syncOrders", "1700000000", want, trace, body, 1700000000 + 300), "300 s old accepted");
        check(!Signatures.verify(s, "POST", "/internal/job/syncOrders", "1700000000", want, trace, body, 1700000000 + 301), "301 s old refused");
        check(!Signatures.verify("x".getBytes(StandardCharsets.UTF_8), "POST", "/internal/job/syncOrders", "1700000000", want, trace, body, 1700000000), "other secret refused");
        check(!Signatures.verify(s, "POST", "/internal/job/other", "1700000000", want, trace, body, 1700000000), "other path refused");
        check(!Signatures.verify(s, "POST", "/internal/job/syncOrders", null, null, trace, body, 1700000000), "unsigned refused");
    }

    static void testJsonRoundTrips() {
        String text = "{\"a\":[1,2.5,\"x\\n\\u00e9\",true,null],\"b\":{\"c\":\"订单\"}}";
        check(Json.write(Json.parse(text)).equals("{\"a\":[1,2.5,\"x\\né\",true,null],\"b\":{\"c\":\"订单\"}}"), Json.write(Json.parse(text)));
        for (String bad : new String[] {"{", "{\"a\" 1}", "[1,]", "tru", "\"open", "1 2"}) {
            try {
                Json.parse(bad);
                throw new AssertionError("parsed " + bad);
            } catch (IllegalArgumentException expected) {
                // refused
            }
        }
    }

    static String call(String trace, int timeout) {
        return "{\"traceId\":\"" + trace + "\",\"executionId\":\"job:20260101020000:2-3\",\"jobName\":\"job\",\"handler\":\"work\","
                + "\"triggerType\":\"CRON\",\"fireTime\":\"2026-01-01T02:00:00Z\",\"shardStart\":2,\"shardEnd\":3,\"shardCount\":4,"
                + "\"shardStrategy\":\"CUSTOM\",\"retryCount\":1,\"timeoutSeconds\":" + timeout + ",\"jobParams\":{\"batch\":5},"
                + "\"shardItems\":{\"2\":\"Shanghai\"},\"reportUrl\":\"\"}";
    }

    static JobExecutor.Answer signed(JobExecutor ex, String method, String path, String trace, String body) {
        byte[] raw = body.getBytes(StandardCharsets.UTF_8);
        String ts = Long.toString(Instant.now().getEpochSecond());
        Map<String, String> h = new HashMap<>();
        h.put("x-trace-id", trace);
        h.put("x-jobflow-timestamp", ts);
        h.put("x-jobflow-signature", Signatures.sign(SECRET.getBytes(StandardCharsets.UTF_8), method, path, ts, trace, raw));
        Function<String, String> header = name -> h.get(name.toLowerCase());
        return ex.handle(method, path, header, raw);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> json(JobExecutor.Answer a) {
        return (Map<String, Object>) Json.parse(a.body);
    }

    static void testTheCallParsedIntoTheContext() {
        JobExecutor ex = new JobExecutor(SECRET);
        List<JobContext> seen = new ArrayList<>();
        ex.handler("work", ctx -> {
            seen.add(ctx);
            return null;
        });
        check(signed(ex, "POST", "/internal/job/work", "t1", call("t1", 30)).status == 200, "answered");
        JobContext ctx = seen.get(0);
        List<Long> owned = new ArrayList<>();
        for (long i = 0; i < 8; i++) {
            if (ctx.ownsId(i)) {
                owned.add(i);
            }
        }
        check(owned.toString().equals("[2, 3, 6, 7]"), "owned " + owned);
        check(ctx.getFireTime().equals(Instant.parse("2026-01-01T02:00:00Z")), "fire time");
        check("Shanghai".equals(ctx.getShardItems().get(2)), "shard items");
        check(((Map<?, ?>) ctx.getJobParams()).get("batch").equals(5L), "params");
        check(signed(ex, "POST", "/internal/job/work", "t2", "{\"traceId\":\"t2\"}").status == 400, "not a call");
        check(ex.handle("POST", "/internal/job/work", n -> null, call("t3", 30).getBytes(StandardCharsets.UTF_8)).status == 401, "unsigned");
    }

    static void testARepeatedCallRunsTheHandlerOnce() {
        JobExecutor ex = new JobExecutor(SECRET);
        AtomicInteger runs = new AtomicInteger();
        ex.handler("work", ctx -> "run " + runs.incrementAndGet());
        String first = signed(ex, "POST", "/internal/job/work", "t1", call("t1", 30)).body;
        String second = signed(ex, "POST", "/internal/job/work", "t1", call("t1", 30)).body;
        check(first.equals(second) && first.contains("run 1") && runs.get() == 1, first + " / " + second);
    }

    static void testAnInterruptibleHandlerStopsAtItsTimeout() {
        JobExecutor ex = new JobExecutor(SECRET);
        ex.handler("work", ctx -> {
            Thread.sleep(5000);
            return "too late";
        });
        long began = System.nanoTime();
        Map<String, Object> got = json(signed(ex, "POST", "/internal/job/work", "t1", call("t1", 1)));
        check("TIMEOUT".equals(got.get("status")) && Boolean.FALSE.equals(got.get("success")), got.toString());
        check(Duration.ofNanos(System.nanoTime() - began).getSeconds() < 3, "answered at the timeout");
    }

    static void testAHandlerThatIgnoresItsStopIsReportedRunningUntilItReturns() throws Exception {
        JobExecutor ex = new JobExecutor(SECRET).stopWait(Duration.ofMillis(300));
        CountDownLatch release = new CountDownLatch(1);
        ex.handler("work", ctx -> {
            while (true) {
                try {
                    release.await();
                    return "finished anyway";
                } catch (InterruptedException ignored) {
                    // a handler that will not stop
                }
            }
        });
        check(signed(ex, "POST", "/internal/job/work", "t1", call("t1", 1)).status == 202, "202 past its timeout");
        check("RUNNING".equals(json(signed(ex, "GET", "/internal/job/status/t1", "t1", "")).get("status")), "status RUNNING");
        check("RUNNING".equals(json(signed(ex, "POST", "/internal/job/cancel/t1", "t1", "")).get("status")), "cancel RUNNING");
        release.countDown();
        for (int i = 0; i < 200 && "RUNNING".equals(json(signed(ex, "GET", "/internal/job/status/t1", "t1", "")).get("status")); i++) {
            Thread.sleep(10);
        }
        check("TIMEOUT".equals(json(signed(ex, "GET", "/internal/job/status/t1", "t1", "")).get("status")), "TIMEOUT once returned");
    }

    static void testFinishedExecutionsAreForgottenByAgeAndCountNeverRunningOnes() throws Exception {
        JobExecutor ex = new JobExecutor(SECRET).keepFinished(2, Duration.ZERO, 4);
        CountDownLatch release = new CountDownLatch(1);
        ex.backgroundHandler("hold", ctx -> {
            release.await();
            return null;
        });
        ex.handler("work", ctx -> null);
        signed(ex, "POST", "/internal/job/hold", "running", call("running", 30));
        for (String id : new String[] {"a", "b", "c"}) {
            signed(ex, "POST", "/internal/job/work", id, call(id, 30));
            Thread.sleep(2);
        }
        check(signed(ex, "GET", "/internal/job/status/a", "a", "").status == 404, "the oldest-finished forgotten");
        for (String id : new String[] {"b", "c", "running"}) {
            check(signed(ex, "GET", "/internal/job/status/" + id, id, "").status == 200, id + " remembered");
        }
        release.countDown();
    }

    static Object proxy(Class<?> type, Map<String, Function<Object[], Object>> answers) {
        return Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, args) -> {
            Function<Object[], Object> f = answers.get(m.getName());
            if (f != null) {
                return f.apply(args);
            }
            Class<?> r = m.getReturnType();
            if (r == boolean.class) {
                return Boolean.FALSE;
            }
            if (r == int.class) {
                return Integer.valueOf(0);
            }
            if (r == long.class) {
                return Long.valueOf(0);
            }
            return null;
        });
    }

    static void testTheServletFilterServesItsPathsAndPassesTheOthersOn() throws Exception {
        JobExecutor ex = new JobExecutor(SECRET).handler("work", ctx -> "shards " + ctx.getShardStart() + "-" + ctx.getShardEnd());
        JobFlowFilter filter = new JobFlowFilter(ex);
        byte[] body = call("f1", 30).getBytes(StandardCharsets.UTF_8);
        String ts = Long.toString(Instant.now().getEpochSecond());
        Map<String, String> headers = new HashMap<>();
        headers.put("x-trace-id", "f1");
        headers.put("x-jobflow-timestamp", ts);
        headers.put("x-jobflow-signature", Signatures.sign(SECRET.getBytes(StandardCharsets.UTF_8), "POST", "/internal/job/work", ts, "f1", body));
        for (String uri : new String[] {"/internal/job/work", "/orders"}) {
            ByteArrayInputStream in = new ByteArrayInputStream(body);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int[] status = {0};
            boolean[] passed = {false};
            Map<String, Function<Object[], Object>> req = new HashMap<>();
            req.put("getRequestURI", a -> uri);
            req.put("getMethod", a -> "POST");
            req.put("getHeader", a -> headers.get(((String) a[0]).toLowerCase()));
            req.put("getInputStream", a -> new ServletInputStream() {
                public int read() { return in.read(); }
                public boolean isFinished() { return in.available() == 0; }
                public boolean isReady() { return true; }
                public void setReadListener(ReadListener l) {}
            });
            Map<String, Function<Object[], Object>> res = new HashMap<>();
            res.put("setStatus", a -> { status[0] = (Integer) a[0]; return null; });
            res.put("getOutputStream", a -> new ServletOutputStream() {
                public void write(int b) { out.write(b); }
                public boolean isReady() { return true; }
                public void setWriteListener(WriteListener l) {}
            });
            Map<String, Function<Object[], Object>> chain = new HashMap<>();
            chain.put("doFilter", a -> { passed[0] = true; return null; });
            filter.doFilter((HttpServletRequest) proxy(HttpServletRequest.class, req),
                    (HttpServletResponse) proxy(HttpServletResponse.class, res), (FilterChain) proxy(FilterChain.class, chain));
            if (uri.equals("/orders")) {
                check(passed[0] && status[0] == 0, "other paths go down the chain");
            } else {
                check(!passed[0] && status[0] == 200 && out.toString("UTF-8").contains("shards 2-3"), status[0] + " " + out);
            }
        }
    }

    /** Bean methods in lite mode (no @Configuration): Spring 4.3's class enhancement predates Java 17. */
    public static class SpringConfig {
        @Bean
        public JobExecutor jobExecutor() {
            return new JobExecutor(SECRET);
        }

        @Bean
        public static JobFlowHandlers jobFlowHandlers(JobExecutor executor) {
            return new JobFlowHandlers(executor);
        }

        @Bean
        public OrderJobs orderJobs() {
            return new OrderJobs();
        }
    }

    public static class OrderJobs {
        @JobFlowHandler("syncOrders")
        public String syncOrders(JobContext ctx) {
            return "synced shards " + ctx.getShardStart() + "-" + ctx.getShardEnd() + " of " + ctx.getShardCount();
        }
    }

    static void testSpringBeanMethodsAnnotatedAreHandlers() {
        try (AnnotationConfigApplicationContext spring = new AnnotationConfigApplicationContext(SpringConfig.class)) {
            JobExecutor ex = spring.getBean(JobExecutor.class);
            Map<String, Object> got = json(signed(ex, "POST", "/internal/job/syncOrders", "s1", call("s1", 30)));
            check("synced shards 2-3 of 4".equals(got.get("message")), got.toString());
        }
    }

    /** A scheduler's log endpoint on the JDK's server: every batch's body and signature check. */
    static final class LogScheduler implements AutoCloseable {
        final com.sun.net.httpserver.HttpServer server;
        final java.util.List<Map<String, Object>> batches = new java.util.concurrent.CopyOnWriteArrayList<>();
        volatile boolean signed = true;

        @SuppressWarnings("unchecked")
        LogScheduler() throws java.io.IOException {
            server = com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress("127.0.0.1", 0), 0);
            server.createContext("/", x -> {
                byte[] body = NacosRegistrationTest.read(x.getRequestBody()).getBytes(StandardCharsets.UTF_8);
                String path = x.getRequestURI().getRawPath();
                if (path.endsWith("/logs")) {
                    String ts = x.getRequestHeaders().getFirst("X-JobFlow-Timestamp");
                    String sig = x.getRequestHeaders().getFirst("X-JobFlow-Signature");
                    String trace = x.getRequestHeaders().getFirst("X-Trace-Id");
                    signed &= Signatures.sign(SECRET.getBytes(StandardCharsets.UTF_8), "POST", path, ts, trace, body).equals(sig);
                    batches.add((Map<String, Object>) Json.parse(new String(body, StandardCharsets.UTF_8)));
                }
                x.sendResponseHeaders(200, 2);
                x.getResponseBody().write("{}".getBytes(StandardCharsets.UTF_8));
                x.close();
            });
            server.start();
        }

        String reportUrl(String trace) {
            return "http://127.0.0.1:" + server.getAddress().getPort() + "/api/v1/jobs/executions/" + trace + "/result";
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    static void testWhatAHandlerLogsGoesWithTheAnswerInOrderWithTheEnd() throws Exception {
        try (LogScheduler s = new LogScheduler()) {
            JobExecutor ex = new JobExecutor(SECRET).handler("work", ctx -> {
                ctx.log("loading 300 orders");
                ctx.log("WARN", "order 17 skipped");
                return "done";
            });
            String body = call("l1", 30).replace("\"reportUrl\":\"\"", "\"reportUrl\":\"" + s.reportUrl("l1") + "\"");
            JobExecutor.Answer answer = signed(ex, "POST", "/internal/job/work", "l1", body);
            check(answer.status == 200, "answered");
            Map<?, ?> logs = (Map<?, ?>) json(answer).get("logs");
            StringBuilder got = new StringBuilder();
            for (Object l : (java.util.List<?>) logs.get("lines")) {
                Map<?, ?> line = (Map<?, ?>) l;
                got.append(line.get("seq")).append(' ').append(line.get("level")).append(' ').append(line.get("message")).append('|');
            }
            check(got.toString().equals("1 INFO loading 300 orders|2 WARN order 17 skipped|"), got.toString());
            check(logs.get("end").toString().equals("{lines=2, droppedBytes=0}"), String.valueOf(logs.get("end")));
            // A repeated call after the end carries the log again; nothing went on its own.
            check(signed(ex, "POST", "/internal/job/work", "l1", body).body.equals(answer.body), "carried again");
            Thread.sleep(1500);
            check(s.batches.isEmpty(), "no request of its own: " + s.batches);
        }
    }

    static void testTheRestStaysWithTheShipperWhileABatchIsOnItsWay() {
        ExecutionLog log = new ExecutionLog(ExecutionLog.DEFAULT_BOUND);
        log.push("INFO", "loading");
        check(log.beginSend(), "a batch on its way");
        log.end();
        check(log.takeRest(ExecutionLog.CARRY_BYTES) == null, "not taken meanwhile");
        log.endSend();
        check(log.takeRest(ExecutionLog.CARRY_BYTES) != null, "taken once the batch is answered");
        check(!log.beginSend(), "the shipper stops once the rest is taken");
    }

    static void testALongResultLeavesItsLogToTheShipper() {
        check(ExecutionLog.carryRoom(40) == ExecutionLog.CARRY_BYTES, "room for a short result");
        check(ExecutionLog.carryRoom(60 * 1024) == 0, "no room past the answer bound");
        ExecutionLog log = new ExecutionLog(ExecutionLog.DEFAULT_BOUND);
        log.push("INFO", "done");
        log.end();
        check(log.takeRest(ExecutionLog.carryRoom(60 * 1024)) == null && !log.isCarried(), "left to the shipper");
    }

    static void testARestPastTheCarryBoundIsShippedOnItsOwnSignedWithTheEnd() throws Exception {
        try (LogScheduler s = new LogScheduler()) {
            StringBuilder big = new StringBuilder();
            for (int i = 0; i < ExecutionLog.LINE_CHARS; i++) {
                big.append('x');
            }
            JobExecutor ex = new JobExecutor(SECRET).handler("work", ctx -> {
                for (int i = 0; i < 3; i++) {
                    ctx.log(big.toString());
                }
                return "done";
            });
            String body = call("v1", 30).replace("\"reportUrl\":\"\"", "\"reportUrl\":\"" + s.reportUrl("v1") + "\"");
            JobExecutor.Answer answer = signed(ex, "POST", "/internal/job/work", "v1", body);
            check(answer.status == 200 && !json(answer).containsKey("logs"), "answered without the log");
            long deadline = System.currentTimeMillis() + 10_000;
            while (s.batches.isEmpty() || !s.batches.get(s.batches.size() - 1).containsKey("end")) {
                check(System.currentTimeMillis() < deadline, "no end shipped: " + s.batches.size());
                Thread.sleep(20);
            }
            int lines = 0;
            for (Map<String, Object> b : s.batches) {
                lines += ((java.util.List<?>) b.get("lines")).size();
            }
            check(lines == 3, "lines " + lines);
            check(s.batches.get(s.batches.size() - 1).get("end").toString().equals("{lines=3, droppedBytes=0}"),
                    String.valueOf(s.batches.get(s.batches.size() - 1).get("end")));
            check(s.signed, "every batch signed");
        }
    }

    static void testAHandlerThatLogsNothingSendsNothing() throws Exception {
        try (LogScheduler s = new LogScheduler()) {
            JobExecutor ex = new JobExecutor(SECRET).handler("work", ctx -> "done");
            String body = call("q1", 30).replace("\"reportUrl\":\"\"", "\"reportUrl\":\"" + s.reportUrl("q1") + "\"");
            signed(ex, "POST", "/internal/job/work", "q1", body);
            Thread.sleep(1500);
            check(s.batches.isEmpty(), "batches " + s.batches);
        }
    }

    static void testPastItsBoundAnExecutionCountsWhatItDroppedAndSaysSoLast() {
        ExecutionLog log = new ExecutionLog(10);
        for (String m : new String[] {"12345", "123456", "12345"}) {
            log.push("INFO", m);
        }
        log.end();
        log.push("INFO", "after the end");
        Map<String, Object> batch = log.next();
        StringBuilder got = new StringBuilder();
        for (Object l : (java.util.List<?>) batch.get("lines")) {
            got.append(((Map<?, ?>) l).get("message")).append('|');
        }
        check(got.toString().equals("12345|12345|6 bytes of log dropped: past this execution's bound of 10 bytes|"), got.toString());
        check(batch.get("end").toString().equals("{lines=3, droppedBytes=6}"), String.valueOf(batch.get("end")));
    }

    static void testABatchStaysUnderTheSchedulersBodyLimitWhateverItsLines() {
        // The whole 1 MiB bound logged at once, in long lines that JSON escapes six-fold.
        ExecutionLog log = new ExecutionLog(ExecutionLog.DEFAULT_BOUND);
        StringBuilder control = new StringBuilder();
        for (int i = 0; i < ExecutionLog.LINE_CHARS; i++) {
            control.append('\u0001');
        }
        for (int i = 0; i < 64; i++) {
            log.push("INFO", control.toString());
        }
        log.end();
        int shipped = 0;
        while (shipped < 64) {
            Map<String, Object> batch = log.next();
            int size = Json.write(batch).getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
            check(size < 1024 * 1024, "a batch of " + size + " bytes");
            java.util.List<?> lines = (java.util.List<?>) batch.get("lines");
            shipped += lines.size();
            log.shipped(((Number) ((Map<?, ?>) lines.get(lines.size() - 1)).get("seq")).longValue());
        }
        check(shipped == 64, "shipped " + shipped);
    }

    static void testTheLastBatchWaitsAShareOfASecondSetByTheTraceId() {
        // The same vector in every SDK: the spread is the FNV-1a hash of the trace id.
        check(ExecutionLog.spreadMillis("4bf92f3577b34da6a3ce929d0e0e4736") == 618, "spread");
        check(ExecutionLog.spreadMillis("a") == 996, "spread of a");
    }

    public static void main(String[] args) throws Exception {
        int failed = 0;
        int ran = 0;
        for (Method m : JobExecutorTest.class.getDeclaredMethods()) {
            if (!m.getName().startsWith("test")) {
                continue;
            }
            ran++;
            try {
                m.invoke(null);
                System.out.println("ok " + m.getName());
            } catch (java.lang.reflect.InvocationTargetException e) {
                failed++;
                System.out.println("FAILED " + m.getName() + ": " + e.getCause());
                e.getCause().printStackTrace(System.out);
            }
        }
        System.out.println(ran + " tests, " + failed + " failed");
        if (failed > 0) {
            throw new AssertionError(failed + " of " + ran + " tests failed");
        }
    }
}
