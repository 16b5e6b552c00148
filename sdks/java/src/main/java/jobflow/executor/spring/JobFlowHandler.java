package jobflow.executor.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a bean method as the JobFlow handler {@code value}: the job's {@code handler} names
 * it. The method takes a {@link jobflow.executor.JobContext} (or nothing) and returns a String,
 * a {@link jobflow.executor.JobResult} or nothing; an exception is FAILED.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface JobFlowHandler {
    /** The handler name jobs refer to. */
    String value();

    /** Answer 202 at once and report the result when the method returns. */
    boolean background() default false;
}
