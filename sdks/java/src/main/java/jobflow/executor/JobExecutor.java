package jobflow.executor;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The executor protocol of docs/executor-protocol.md around handlers, independent of the web
 * server: {@link JobFlowServer} (the JDK's own HTTP server), {@link JobFlowFilter} (any servlet
 * container) and the Spring integration serve it.
 *
 * <p>For every call it checks the signature, parses the call into a {@link JobContext}, runs the
 * handler on its own thread, stops it at the job's {@code timeoutSeconds} or on a cancel,
 * remembers the execution by trace id so a repeated call never runs it twice, answers status and
 * cancel, and reports results (signed) when the caller does not read them.
 *
 * <p>Stopping: a Java thread cannot be killed. A stopped handler's thread is interrupted and
 * {@link JobContext#isStopped()} turns true; the executor waits up to 10 s for the handler to
 * return. A handler that does not return in that time is reported truthfully as still RUNNING
 * (status, cancel, and a 202 to a waiting call) until it does, so the scheduler never runs a
 * retry beside it.
 */
public final class JobExecutor {
    /** Finished executions remembered at least, by default. */
    public static final int KEEP_FINISHED = 10_000;
    /** How long finished executions are remembered at least, by default. */
    public static final Duration KEEP_FINISHED_FOR = Duration.ofMinutes(10);
    /** Finished executions remembered at most, by default. */
    public static final int KEEP_FINISHED_AT_MOST = 1_000_000;

    private static final Logger LOG = Logger.getLogger(JobExecutor.class.getName());

    /** An answer to a request: HTTP status and JSON body. */
    public static final class Answer {
        public final int status;
        public final String body;
        final String reportTraceId;

        Answer(int status, Object body, String reportTraceId) {
            this.status = status;
            this.body = Json.write(body);
            this.reportTraceId = reportTraceId;
        }
    }

    private static final class Registered {
        final JobHandler handler;
        final boolean background;

        Registered(JobHandler handler, boolean background) {
            this.handler = handler;
            this.background = background;
        }
    }

    private static final class Entry {
        String reportUrl;
        boolean reportWhenDone;
        JobResult result;
        JobResult stopReason;
        boolean stuck;
        JobContext ctx;
        Future<?> run;
    }

    private final byte[] secret;
    private final String prefix;
    private final Map<String, Registered> handlers = new ConcurrentHashMap<>();
    private final Instant startedAt = Instant.now();
    private final Map<String, Entry> entries = new LinkedHashMap<>();
    private final LinkedHashMap<String, Instant> finished = new LinkedHashMap<>();
    private Instant rememberedSince = startedAt;
    private int keepAtLeast = KEEP_FINISHED;
    private Duration keepFor = KEEP_FINISHED_FOR;
    private int keepAtMost = KEEP_FINISHED_AT_MOST;
    private Duration stopWait = Duration.ofSeconds(10);
    private volatile int logBound = ExecutionLog.DEFAULT_BOUND;
    /** Logs carried in answers lately, for repeated calls. */
    private final CarriedLogs carried = new CarriedLogs(8 * 1024 * 1024);
    private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "jobflow-handler");
        t.setDaemon(true);
        return t;
    });
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "jobflow-timer");
        t.setDaemon(true);
        return t;
    });

    /**
     * An executor that accepts only calls signed with {@code secret} (the scheduler's
     * {@code executor.signing_secret}); {@code null} accepts unsigned calls, which lets anyone
     * who reaches the executor run its handlers: a trusted network only.
     */
    public JobExecutor(String secret) {
        this(secret, DEFAULT_PATH_PREFIX);
    }

    /** Where the scheduler calls executors unless told otherwise. */
    public static final String DEFAULT_PATH_PREFIX = "/internal/job";

    /** As {@link #JobExecutor(String)}, serving {@code pathPrefix} instead of /internal/job. */
    public JobExecutor(String secret, String pathPrefix) {
        this.secret = secret == null ? null : secret.getBytes(StandardCharsets.UTF_8);
        this.prefix = pathPrefix.replaceAll("/+$", "");
    }

    /** Registers a handler whose call waits for its result. */
    public JobExecutor handler(String name, JobHandler handler) {
        handlers.put(name, new Registered(handler, false));
        return this;
    }

    /** Registers a handler whose call is answered 202 at once; its result is reported. */
    public JobExecutor backgroundHandler(String name, JobHandler handler) {
        handlers.put(name, new Registered(handler, true));
        return this;
    }

    /** How many finished executions are remembered at least, for how long, and at most. */
    public synchronized JobExecutor keepFinished(int atLeast, Duration forAtLeast, int atMost) {
        this.keepAtLeast = atLeast;
        this.keepFor = forAtLeast;
        this.keepAtMost = atMost;
        return this;
    }

    /** How long a stopped handler is waited for before it is reported as still running. */
    public JobExecutor stopWait(Duration wait) {
        this.stopWait = wait;
        return this;
    }

    public String getPathPrefix() {
        return prefix;
    }

    /** Whether this executor serves {@code path}. */
    public boolean serves(String path) {
        return path.startsWith(prefix + "/");
    }

    /**
     * Answers one request under the prefix. {@code header} looks headers up by name
     * (case-insensitive); {@code path} is the raw request path, as signed.
     */
    public Answer handle(String method, String path, Function<String, String> header, byte[] body) {
        String rest;
        try {
            rest = URLDecoder.decode(path.substring(prefix.length() + 1).replace("+", "%2B"), "UTF-8");
        } catch (java.io.UnsupportedEncodingException e) {
            throw new IllegalStateException(e);
        }
        if ("GET".equals(method) && rest.startsWith("status/")) {
            String id = rest.substring("status/".length());
            return signed(method, path, header, id, new byte[0]) ? status(id) : refused();
        }
        if ("POST".equals(method) && rest.startsWith("cancel/")) {
            String id = rest.substring("cancel/".length());
            return signed(method, path, header, id, new byte[0]) ? cancel(id) : refused();
        }
        if ("POST".equals(method) && !rest.contains("/")) {
            return call(rest, path, header, body);
        }
        return new Answer(404, JobResult.failure("no route " + method + " " + path).toJson(), null);
    }

    /**
     * The server could not deliver {@code answer} (the caller went away): a result the caller
     * missed is reported to the scheduler instead.
     */
    public void undelivered(Answer answer) {
        if (answer.reportTraceId == null) {
            return;
        }
        Entry e;
        synchronized (this) {
            e = entries.get(answer.reportTraceId);
        }
        if (e != null && e.result != null) {
            final Entry entry = e;
            threads.submit(() -> report(entry.reportUrl, answer.reportTraceId, entry.result));
        }
    }

    private Answer refused() {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("message", "missing or wrong signature");
        return new Answer(401, body, null);
    }

    private boolean signed(String method, String path, Function<String, String> header, String traceId, byte[] body) {
        return secret == null || Signatures.verify(secret, method, path, header.apply("X-JobFlow-Timestamp"),
                header.apply("X-JobFlow-Signature"), traceId, body, Instant.now().getEpochSecond());
    }

    private Map<String, Object> statusJson(String id, String status, String message) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("traceId", id);
        out.put("status", status);
        out.put("startedAt", startedAt.toString());
        out.put("rememberedSince", rememberedSince.toString());
        if (message != null) {
            out.put("message", message);
        }
        return out;
    }

    private synchronized Answer status(String id) {
        Entry e = entries.get(id);
        if (e == null) {
            return new Answer(404, statusJson(id, "UNKNOWN", null), null);
        }
        if (e.result == null) {
            return new Answer(200, statusJson(id, "RUNNING", null), null);
        }
        return new Answer(200, statusJson(id, e.result.finalStatus(), e.result.getMessage()), null);
    }

    private Answer cancel(String id) {
        Entry e;
        synchronized (this) {
            e = entries.get(id);
            if (e == null) {
                // The cancel overtook its call: remembered, and the call never runs.
                e = new Entry();
                e.reportUrl = "";
                entries.put(id, e);
                finish(id, e, JobResult.cancelled());
                return new Answer(200, statusJson(id, "CANCELLED", null), null);
            }
        }
        stop(id, e, JobResult.cancelled());
        long deadline = System.nanoTime() + stopWait.plusSeconds(1).toNanos();
        synchronized (this) {
            while (e.result == null) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return new Answer(200, statusJson(id, "RUNNING", null), null);
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return new Answer(200, statusJson(id, "RUNNING", null), null);
                }
            }
        }
        return status(id);
    }

    private Answer call(String name, String path, Function<String, String> header, byte[] body) {
        String traceId = header.apply("X-Trace-Id");
        if (!signed("POST", path, header, traceId == null ? "" : traceId, body)) {
            return new Answer(401, JobResult.failure("missing or wrong signature").toJson(), null);
        }
        JobContext ctx;
        try {
            Object parsed = Json.parse(new String(body, StandardCharsets.UTF_8));
            if (!(parsed instanceof Map)) {
                throw new IllegalArgumentException("not an object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> call = (Map<String, Object>) parsed;
            ctx = new JobContext(call);
        } catch (RuntimeException e) {
            return new Answer(400, JobResult.failure("not a JobFlow call: " + e.getMessage()).toJson(), null);
        }
        Registered registered = handlers.get(name);
        if (registered == null) {
            return new Answer(404, JobResult.failure("no handler " + name).toJson(), null);
        }
        String id = ctx.getTraceId();
        Entry e;
        synchronized (this) {
            Entry known = entries.get(id);
            if (known != null) {
                if (known.result != null) {
                    return new Answer(200, withLog(id, known.result), null);
                }
                // Repeated while the first run goes on: its result goes to the latest caller.
                known.reportUrl = ctx.getReportUrl();
                known.reportWhenDone = true;
                return new Answer(202, JobResult.ok("running").toJson(), null);
            }
            e = new Entry();
            e.ctx = ctx;
            if (logBound > 0) {
                ctx.log = new ExecutionLog(logBound);
                String target = ctx.getReportUrl().endsWith("/result")
                        ? ctx.getReportUrl().substring(0, ctx.getReportUrl().length() - "/result".length()) + "/logs"
                        : null;
                if (target != null) {
                    ExecutionLog log = ctx.log;
                    threads.submit(() -> shipLog(target, id, log));
                }
            }
            e.reportUrl = ctx.getReportUrl();
            e.reportWhenDone = registered.background;
            entries.put(id, e);
            start(id, e, registered.handler);
        }
        if (registered.background) {
            return new Answer(202, JobResult.ok("accepted").toJson(), null);
        }
        synchronized (this) {
            while (e.result == null && !e.stuck) {
                try {
                    wait();
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (e.result != null) {
                return new Answer(200, withLog(id, e.result), id);
            }
            // Too slow to stop: the scheduler waits for the report.
            e.reportWhenDone = true;
            return new Answer(202, JobResult.ok("running").toJson(), null);
        }
    }

    /** Starts the handler and its timeout. Holds this. */
    private void start(String id, Entry e, JobHandler handler) {
        final Entry entry = e;
        e.run = threads.submit(() -> {
            JobResult r;
            try {
                r = JobResult.of(handler.handle(entry.ctx));
            } catch (InterruptedException ie) {
                r = JobResult.failure("handler interrupted");
            } catch (Throwable t) {
                LOG.log(Level.WARNING, "handler " + entry.ctx.getHandler() + " threw (trace_id=" + id + ")", t);
                r = JobResult.failure("handler threw " + t.getClass().getSimpleName() + ": " + t.getMessage());
            }
            returned(id, entry, r);
        });
        int timeout = e.ctx.getTimeoutSeconds();
        if (timeout > 0) {
            timers.schedule(() -> stop(id, entry, JobResult.timedOut(timeout)), timeout, TimeUnit.SECONDS);
        }
    }

    /** Asks the handler to stop for {@code reason}; marks it stuck if it has not returned after the stop wait. */
    private void stop(String id, Entry e, JobResult reason) {
        synchronized (this) {
            if (e.result != null || e.stopReason != null) {
                return;
            }
            e.stopReason = reason;
            e.ctx.stop();
            e.run.cancel(true);
        }
        timers.schedule(() -> {
            synchronized (this) {
                if (e.result == null) {
                    LOG.warning("handler " + e.ctx.getHandler() + " did not stop within " + stopWait
                            + "; reported RUNNING until it returns (trace_id=" + id + ")");
                    e.stuck = true;
                    notifyAll();
                }
            }
        }, stopWait.toMillis(), TimeUnit.MILLISECONDS);
    }

    private void returned(String id, Entry e, JobResult r) {
        JobResult result;
        boolean report;
        if (e.ctx.log != null) {
            e.ctx.log.end();
            // The rest of the log goes with the result, and is remembered a while for a
            // repeated call (a scheduler that stopped before storing the answer calls again).
            if (e.ctx.getReportUrl().endsWith("/result")) {
                JobResult outcome;
                synchronized (this) {
                    outcome = e.stopReason != null ? e.stopReason : r;
                }
                int resultBytes = Json.write(outcome.toJson()).getBytes(StandardCharsets.UTF_8).length;
                Map<String, Object> rest = e.ctx.log.takeRest(ExecutionLog.carryRoom(resultBytes));
                if (rest != null) {
                    carried.keep(id, rest);
                }
            }
        }
        synchronized (this) {
            result = e.stopReason != null ? e.stopReason : r;
            finish(id, e, result);
            report = e.reportWhenDone;
        }
        if (report) {
            report(e.reportUrl, id, result);
        }
    }

    /** Records the result and forgets the oldest-finished beyond the memory's bounds. Holds this. */
    private void finish(String id, Entry e, JobResult result) {
        e.result = result;
        Instant now = Instant.now();
        finished.put(id, now);
        Iterator<Map.Entry<String, Instant>> it = finished.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry<String, Instant> oldest = it.next();
            boolean tooMany = finished.size() > keepAtMost;
            boolean overCount = finished.size() > keepAtLeast;
            if (!(tooMany || (overCount && Duration.between(oldest.getValue(), now).compareTo(keepFor) > 0))) {
                break;
            }
            it.remove();
            entries.remove(oldest.getKey());
            if (oldest.getValue().isAfter(rememberedSince)) {
                rememberedSince = oldest.getValue();
            }
        }
        notifyAll();
    }

    /** {@code result} as sent, with the rest of its execution's log when it carries one. */
    private Map<String, Object> withLog(String traceId, JobResult result) {
        Map<String, Object> out = result.toJson();
        Map<String, Object> rest = carried.get(traceId);
        if (rest != null) {
            out.put("logs", rest);
        }
        return out;
    }

    /**
     * The logs carried lately, by trace id, within a byte budget, oldest forgotten first: a
     * scheduler that took an answer and stopped before storing it calls again, and the
     * repeated call's answer carries the log again.
     */
    static final class CarriedLogs {
        private final long budget;
        private long bytes;
        private final LinkedHashMap<String, Map.Entry<Map<String, Object>, Integer>> logs = new LinkedHashMap<>();

        CarriedLogs(long budget) {
            this.budget = budget;
        }

        synchronized void keep(String traceId, Map<String, Object> rest) {
            if (logs.containsKey(traceId)) {
                return;
            }
            int size = Json.write(rest).getBytes(StandardCharsets.UTF_8).length;
            logs.put(traceId, new java.util.AbstractMap.SimpleImmutableEntry<>(rest, size));
            bytes += size;
            Iterator<Map.Entry<String, Map.Entry<Map<String, Object>, Integer>>> it = logs.entrySet().iterator();
            while (bytes > budget && it.hasNext()) {
                bytes -= it.next().getValue().getValue();
                it.remove();
            }
        }

        synchronized Map<String, Object> get(String traceId) {
            Map.Entry<Map<String, Object>, Integer> kept = logs.get(traceId);
            return kept == null ? null : kept.getKey();
        }
    }

    /**
     * How many bytes of log messages each execution keeps and ships (default 1 MiB; 0: none).
     */
    public JobExecutor logBound(int bytes) {
        this.logBound = bytes;
        return this;
    }

    /**
     * Ships an execution's log to {@code target}: what was logged every second while the
     * handler runs, the rest with the end once it has finished, in order; a failed batch is
     * sent again with a growing wait, for up to ten minutes after the end. A handler that
     * logged nothing sends nothing.
     */
    private void shipLog(String target, String traceId, ExecutionLog log) {
        int failures = 0;
        long endedAt = 0;
        boolean spread = false;
        try {
            // The first batch waits a period (or the end): a handler that ends within it sends
            // its whole log with its result.
            log.idle(1000);
            while (true) {
                if (log.isCarried()) {
                    return;
                }
                if (endedAt == 0 && log.isEnded()) {
                    endedAt = System.nanoTime();
                }
                Map<String, Object> batch = log.next();
                @SuppressWarnings("unchecked")
                Map<String, Object> end = batch == null ? null : (Map<String, Object>) batch.get("end");
                if (end != null && ((Long) end.get("lines")) == 0) {
                    return; // nothing was logged: nothing is sent
                }
                if (end != null && !spread) {
                    // Executions that end together would ship their last batches together, in the
                    // scheduler's busiest moment: the last batch waits a share of a second.
                    spread = true;
                    Thread.sleep(ExecutionLog.spreadMillis(traceId));
                    continue;
                }
                if (batch == null) {
                    log.idle(1000);
                    continue;
                }
                @SuppressWarnings("unchecked")
                List<Map<String, Object>> lines = (List<Map<String, Object>>) batch.get("lines");
                if (!log.beginSend()) {
                    return;
                }
                int status;
                try {
                    status = post(target, traceId, Json.write(batch).getBytes(StandardCharsets.UTF_8));
                } finally {
                    log.endSend();
                }
                if (status == 200) {
                    failures = 0;
                    if (!lines.isEmpty()) {
                        log.shipped((Long) lines.get(lines.size() - 1).get("seq"));
                    }
                    if (end != null) {
                        return;
                    }
                    log.idle(1000);
                } else if (status >= 400 && status < 500) {
                    LOG.warning("log of " + traceId + " refused with " + status + "; dropped");
                    return;
                } else {
                    if (endedAt != 0 && System.nanoTime() - endedAt > TimeUnit.MINUTES.toNanos(10)) {
                        LOG.warning("log of " + traceId + " could not be shipped; dropped");
                        return;
                    }
                    failures++;
                    Thread.sleep(Math.min(250L << Math.min(failures, 10), 30_000L));
                }
            }
        } catch (InterruptedException stopping) {
            Thread.currentThread().interrupt();
        }
    }

    /** POSTs {@code body} to {@code url}, signed; the answer's status, or -1 when none came. */
    private int post(String url, String traceId, byte[] body) {
        try {
            HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
            c.setRequestMethod("POST");
            c.setConnectTimeout(5000);
            c.setReadTimeout(10000);
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            c.setRequestProperty("X-Trace-Id", traceId);
            if (secret != null) {
                String ts = Long.toString(Instant.now().getEpochSecond());
                c.setRequestProperty("X-JobFlow-Timestamp", ts);
                c.setRequestProperty("X-JobFlow-Signature",
                        Signatures.sign(secret, "POST", URI.create(url).getRawPath(), ts, traceId, body));
            }
            try (OutputStream out = c.getOutputStream()) {
                out.write(body);
            }
            int status = c.getResponseCode();
            InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream();
            if (in != null) {
                in.close();
            }
            return status;
        } catch (IOException e) {
            LOG.fine("POST " + url + " failed: " + e);
            return -1;
        }
    }

    /**
     * POSTs {@code result} to {@code reportUrl}, signed; retried with backoff on no answer or a
     * 5xx, stopped at any other answer. True when the scheduler took it (200) or had it (409).
     */
    public boolean report(String reportUrl, String traceId, JobResult result) {
        if (reportUrl == null || reportUrl.isEmpty()) {
            return false;
        }
        byte[] body = Json.write(withLog(traceId, result)).getBytes(StandardCharsets.UTF_8);
        for (int attempt = 0; attempt < 8; attempt++) {
            int status = post(reportUrl, traceId, body);
            if (status >= 0 && status < 500) {
                if (status != 200 && status != 409) {
                    LOG.warning("report of " + traceId + " refused with " + status);
                }
                return status == 200 || status == 409;
            }
            try {
                Thread.sleep(Math.min(1L << attempt, 30) * 1000);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        LOG.warning("report of " + traceId + " not delivered after 8 attempts");
        return false;
    }
}
