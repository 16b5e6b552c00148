package jobflow.executor;

import java.time.Instant;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

/** Everything a handler knows about the execution it runs, and whether it is to stop. */
public final class JobContext {
    private final Map<String, Object> call;
    private final Map<Integer, String> shardItems;
    private final AtomicBoolean stop = new AtomicBoolean();
    /** This execution's log; set by the executor. */
    volatile ExecutionLog log;

    JobContext(Map<String, Object> call) {
        this.call = call;
        for (String key : new String[] {"traceId", "executionId", "jobName", "handler", "fireTime", "shardStart", "shardEnd", "shardCount"}) {
            if (call.get(key) == null) {
                throw new IllegalArgumentException("missing " + key);
            }
        }
        Instant.parse(getFireTimeText());
        Map<Integer, String> items = new TreeMap<>();
        Object raw = call.get("shardItems");
        if (raw instanceof Map) {
            for (Map.Entry<?, ?> e : ((Map<?, ?>) raw).entrySet()) {
                items.put(Integer.parseInt(e.getKey().toString()), String.valueOf(e.getValue()));
            }
        }
        this.shardItems = Collections.unmodifiableMap(items);
    }

    private String text(String key, String fallback) {
        Object v = call.get(key);
        return v == null ? fallback : v.toString();
    }

    private int number(String key) {
        Object v = call.get(key);
        return v instanceof Number ? ((Number) v).intValue() : 0;
    }

    public String getTraceId() { return text("traceId", ""); }
    public String getExecutionId() { return text("executionId", ""); }
    public String getJobName() { return text("jobName", ""); }
    public String getHandler() { return text("handler", ""); }
    /** CRON, MANUAL, RETRY, COMPENSATION or CHILD. */
    public String getTriggerType() { return text("triggerType", "CRON"); }
    public Instant getFireTime() { return Instant.parse(getFireTimeText()); }
    String getFireTimeText() { return text("fireTime", ""); }
    public int getShardStart() { return number("shardStart"); }
    public int getShardEnd() { return number("shardEnd"); }
    public int getShardCount() { return number("shardCount"); }
    /** MOD_HASH, RANGE or CUSTOM. */
    public String getShardStrategy() { return text("shardStrategy", "MOD_HASH"); }
    public int getRetryCount() { return number("retryCount"); }
    public int getTimeoutSeconds() { return number("timeoutSeconds"); }
    String getReportUrl() { return text("reportUrl", ""); }

    /** The job's parameters as parsed JSON: a Map, List, String, Long, Double, Boolean or null. */
    public Object getJobParams() { return call.get("jobParams"); }

    /** RANGE jobs: {start, end} of the data slice this execution owns, or null. */
    @SuppressWarnings("unchecked")
    public Map<String, Object> getDataRange() {
        Object v = call.get("dataRange");
        return v instanceof Map ? (Map<String, Object>) v : null;
    }

    /** CUSTOM jobs: the item parameter of each shard of this execution. */
    public Map<Integer, String> getShardItems() { return shardItems; }

    /** MOD_HASH: whether a record belongs to this execution (id mod shardCount in range). */
    public boolean ownsId(long id) {
        long shard = Math.floorMod(id, (long) Math.max(getShardCount(), 1));
        return getShardStart() <= shard && shard <= getShardEnd();
    }

    /**
     * True once the execution timed out or was cancelled. The handler's thread is also
     * interrupted; a handler that catches interrupts should check this and return.
     */
    public boolean isStopped() {
        return stop.get();
    }

    void stop() {
        stop.set(true);
    }

    /** Adds an INFO line to this execution's log, shipped to the scheduler. */
    public void log(String message) {
        log("INFO", message);
    }

    /** Adds a line to this execution's log ({@code level}: TRACE, DEBUG, INFO, WARN or ERROR). */
    public void log(String level, String message) {
        ExecutionLog l = log;
        if (l != null) {
            l.push(level, String.valueOf(message));
        }
    }
}
