package jobflow.executor.spring;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import jobflow.executor.JobContext;
import jobflow.executor.JobExecutor;
import jobflow.executor.JobHandler;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.config.BeanPostProcessor;

/**
 * Registers every bean method annotated {@link JobFlowHandler} as a handler of the executor.
 * Declare one next to the {@link JobExecutor} bean:
 *
 * <pre>
 * &#64;Bean JobExecutor jobExecutor() { return new JobExecutor(System.getenv("JOBFLOW_SIGNING_SECRET")); }
 * &#64;Bean static JobFlowHandlers jobFlowHandlers(JobExecutor e) { return new JobFlowHandlers(e); }
 * </pre>
 */
public final class JobFlowHandlers implements BeanPostProcessor {
    private final JobExecutor executor;

    public JobFlowHandlers(JobExecutor executor) {
        this.executor = executor;
    }

    @Override
    public Object postProcessBeforeInitialization(Object bean, String name) throws BeansException {
        return bean;
    }

    @Override
    public Object postProcessAfterInitialization(Object bean, String name) throws BeansException {
        Class<?> type = AopUtils.getTargetClass(bean);
        for (Method method : type.getMethods()) {
            JobFlowHandler annotation = method.getAnnotation(JobFlowHandler.class);
            if (annotation == null) {
                continue;
            }
            Class<?>[] params = method.getParameterTypes();
            if (params.length > 1 || (params.length == 1 && params[0] != JobContext.class)) {
                throw new IllegalStateException("@JobFlowHandler " + type.getName() + "." + method.getName()
                        + " must take a JobContext or nothing");
            }
            JobHandler handler = ctx -> {
                try {
                    return params.length == 0 ? method.invoke(bean) : method.invoke(bean, ctx);
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof Exception) {
                        throw (Exception) cause;
                    }
                    throw e;
                }
            };
            if (annotation.background()) {
                executor.backgroundHandler(annotation.value(), handler);
            } else {
                executor.handler(annotation.value(), handler);
            }
        }
        return bean;
    }
}
