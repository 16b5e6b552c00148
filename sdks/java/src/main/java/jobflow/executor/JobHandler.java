package jobflow.executor;

/**
 * Runs one execution. Return a String (SUCCESS with that message), null (SUCCESS) or a
 * {@link JobResult}; an exception is FAILED with its message.
 */
@FunctionalInterface
public interface JobHandler {
    Object handle(JobContext ctx) throws Exception;
}
