package jobflow.executor;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One execution's log (docs/executor-protocol.md, "Shipping logs"): appended to by the
 * handler through {@link JobContext#log(String, String)}, drained in batches by its shipper
 * while the handler runs. When it has finished, the rest goes with the result
 * ({@link #takeRest}): in the answer to the call or in the result report, so a handler that
 * logs a few lines costs no request of its own; only a rest past {@link #CARRY_BYTES} is
 * shipped on its own. At most its bound of message bytes is kept; what comes beyond is
 * counted, and a last line says how much was dropped.
 */
final class ExecutionLog {
    static final int DEFAULT_BOUND = 1024 * 1024;
    static final int BATCH_LINES = 500;
    /** Bytes of serialised lines per batch: the scheduler takes bodies of at most 1 MiB, and one line (16,384 characters, escaped) always fits. */
    static final int BATCH_BYTES = 512 * 1024;
    static final int LINE_CHARS = 16 * 1024;
    /** The most serialised lines a result carries. */
    static final int CARRY_BYTES = 32 * 1024;
    /** The most a result and the lines it carries take together: the scheduler reads 64 KiB of an answer, and a cut answer is not a result. */
    static final int ANSWER_BYTES = 48 * 1024;

    /** How many bytes of lines a result of {@code resultBytes} (serialised) may carry. */
    static int carryRoom(int resultBytes) {
        return Math.max(0, Math.min(CARRY_BYTES, ANSWER_BYTES - resultBytes));
    }

    private final int bound;
    private final List<Map<String, Object>> pending = new ArrayList<>();
    private long seq;
    private long kept;
    private long dropped;
    private boolean ended;
    /** The rest went with the result: the shipper stops. */
    private boolean carried;
    /** A batch is on its way: the rest is not taken meanwhile, since two batches stored at once could both hold a line. */
    private boolean sending;

    ExecutionLog(int bound) {
        this.bound = bound;
    }

    synchronized void push(String level, String message) {
        if (ended) {
            return;
        }
        String text = message.length() > LINE_CHARS ? message.substring(0, LINE_CHARS) : message;
        int size = text.getBytes(StandardCharsets.UTF_8).length;
        if (kept + size > bound) {
            dropped += size;
            return;
        }
        kept += size;
        pending.add(line(++seq, level, text));
    }

    synchronized void end() {
        if (dropped > 0) {
            pending.add(line(++seq, "WARN", dropped + " bytes of log dropped: past this execution's bound of " + bound + " bytes"));
        }
        ended = true;
        notifyAll();
    }

    synchronized boolean isEnded() {
        return ended;
    }

    synchronized boolean isCarried() {
        return carried;
    }

    /** The shipper is about to send a batch: false when the rest went with the result meanwhile (nothing is sent then). */
    synchronized boolean beginSend() {
        sending = !carried;
        return sending;
    }

    synchronized void endSend() {
        sending = false;
    }

    /**
     * The rest of an ended log, to go with the result as its {@code logs}: every line not yet
     * taken by the scheduler, and the end. Null when it is more than {@code most} bytes
     * serialised or while a batch is on its way (the shipper sends it then), or when nothing
     * was logged (nothing is sent). Once taken, the shipper stops: batches never overlap in
     * flight.
     */
    synchronized Map<String, Object> takeRest(int most) {
        if (!ended || carried || sending) {
            return null;
        }
        if (seq == 0) {
            carried = true;
            return null;
        }
        if (pending.size() > BATCH_LINES
                || Json.write(pending).getBytes(StandardCharsets.UTF_8).length > most) {
            return null;
        }
        Map<String, Object> rest = new LinkedHashMap<>();
        rest.put("lines", new ArrayList<>(pending));
        Map<String, Object> end = new LinkedHashMap<>();
        end.put("lines", seq);
        end.put("droppedBytes", dropped);
        rest.put("end", end);
        carried = true;
        pending.clear();
        notifyAll();
        return rest;
    }

    /** Waits up to {@code millis} for the end. */
    synchronized void idle(long millis) throws InterruptedException {
        if (!ended) {
            wait(millis);
        }
    }

    /** Milliseconds the last batch of {@code traceId} waits after its execution's end: spread over a second by a hash of the trace id (FNV-1a, as every JobFlow SDK does). */
    static long spreadMillis(String traceId) {
        long h = 0xcbf29ce484222325L;
        for (byte b : traceId.getBytes(StandardCharsets.UTF_8)) {
            h = (h ^ (b & 0xff)) * 0x100000001b3L;
        }
        return Long.remainderUnsigned(h, 1000);
    }

    /** The next batch to send (kept until shipped), with the end when it goes with it; null when there is nothing to send yet. */
    synchronized Map<String, Object> next() {
        List<Map<String, Object>> lines = new ArrayList<>();
        long size = 0;
        for (Map<String, Object> line : pending.subList(0, Math.min(BATCH_LINES, pending.size()))) {
            size += Json.write(line).getBytes(StandardCharsets.UTF_8).length;
            if (size > BATCH_BYTES && !lines.isEmpty()) {
                break;
            }
            lines.add(line);
        }
        Map<String, Object> batch = new LinkedHashMap<>();
        batch.put("lines", lines);
        if (ended && lines.size() == pending.size()) {
            Map<String, Object> end = new LinkedHashMap<>();
            end.put("lines", seq);
            end.put("droppedBytes", dropped);
            batch.put("end", end);
        } else if (lines.isEmpty()) {
            return null;
        }
        return batch;
    }

    synchronized void shipped(long through) {
        pending.removeIf(l -> (Long) l.get("seq") <= through);
    }

    private static Map<String, Object> line(long seq, String level, String message) {
        Map<String, Object> l = new LinkedHashMap<>();
        l.put("seq", seq);
        l.put("at", Instant.now().truncatedTo(ChronoUnit.MILLIS).toString());
        l.put("level", level);
        l.put("message", message);
        return l;
    }
}
