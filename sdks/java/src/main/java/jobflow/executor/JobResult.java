package jobflow.executor;

import java.util.LinkedHashMap;
import java.util.Map;

/** A result (docs/executor-protocol.md §2). */
public final class JobResult {
    private final boolean success;
    private final String message;
    private final String status;

    public JobResult(boolean success, String message, String status) {
        this.success = success;
        this.message = message;
        this.status = status;
    }

    public static JobResult ok(String message) {
        return new JobResult(true, message, null);
    }

    /** FAILED, retried while retries are left. */
    public static JobResult failure(String message) {
        return new JobResult(false, message, null);
    }

    static JobResult timedOut(int seconds) {
        return new JobResult(false, "aborted after " + seconds + "s (timeoutSeconds)", "TIMEOUT");
    }

    static JobResult cancelled() {
        return new JobResult(false, "cancelled by the scheduler", "CANCELLED");
    }

    /** What a handler returned: a JobResult as it is, null as success, anything else as a success with its text. */
    static JobResult of(Object value) {
        if (value instanceof JobResult) {
            return (JobResult) value;
        }
        return ok(value == null ? null : value.toString());
    }

    public boolean isSuccess() {
        return success;
    }

    public String getMessage() {
        return message;
    }

    public String getStatus() {
        return status;
    }

    /** The status the execution ends in. */
    public String finalStatus() {
        if ("SUCCESS".equals(status) || "FAILED".equals(status) || "TIMEOUT".equals(status) || "CANCELLED".equals(status)) {
            return status;
        }
        return success ? "SUCCESS" : "FAILED";
    }

    Map<String, Object> toJson() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("success", success);
        if (status != null) {
            out.put("status", status);
        }
        if (message != null) {
            out.put("message", message);
        }
        return out;
    }
}
