package jobflow.sample;

import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import jobflow.executor.JobContext;
import jobflow.executor.JobExecutor;
import jobflow.executor.JobFlowServer;
import jobflow.executor.JobResult;
import jobflow.executor.Json;
import jobflow.executor.NacosRegistration;
import jobflow.executor.spring.JobFlowHandler;
import jobflow.executor.spring.JobFlowHandlers;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;

/**
 * The Java SDK's sample for the conformance suite (conformance/README.md), written as a Spring
 * team would: beans whose methods carry {@code @JobFlowHandler}, served by the JDK's HTTP server
 * on 127.0.0.1:$JOBFLOW_CONFORMANCE_PORT, accepting only calls signed with
 * $JOBFLOW_SIGNING_SECRET.
 */
public final class ConformanceSample {
    /** Bean methods in lite mode (no @Configuration): Spring 4.3's class enhancement predates Java 17. */
    public static class Config {
        @Bean
        public JobExecutor jobExecutor() {
            return new JobExecutor(System.getenv("JOBFLOW_SIGNING_SECRET"));
        }

        @Bean
        public static JobFlowHandlers jobFlowHandlers(JobExecutor executor) {
            return new JobFlowHandlers(executor);
        }

        @Bean
        public Jobs jobs() {
            return new Jobs();
        }
    }

    public static class Jobs {
        private final Map<String, Integer> runs = new ConcurrentHashMap<>();

        @JobFlowHandler("echo")
        public String echo(JobContext ctx) {
            int n = runs.merge(ctx.getTraceId(), 1, Integer::sum);
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("traceId", ctx.getTraceId());
            out.put("executionId", ctx.getExecutionId());
            out.put("jobName", ctx.getJobName());
            out.put("handler", ctx.getHandler());
            out.put("triggerType", ctx.getTriggerType());
            out.put("fireTime", ctx.getFireTime().toString());
            out.put("shardStart", ctx.getShardStart());
            out.put("shardEnd", ctx.getShardEnd());
            out.put("shardCount", ctx.getShardCount());
            out.put("shardStrategy", ctx.getShardStrategy());
            out.put("retryCount", ctx.getRetryCount());
            out.put("timeoutSeconds", ctx.getTimeoutSeconds());
            out.put("jobParams", ctx.getJobParams());
            out.put("dataRange", ctx.getDataRange());
            out.put("shardItems", ctx.getShardItems());
            out.put("runs", n);
            return Json.write(out);
        }

        @JobFlowHandler("sleep")
        public String sleep(JobContext ctx) throws Exception {
            sleepThenWitness(ctx);
            return "slept";
        }

        @JobFlowHandler("log")
        public String log(JobContext ctx) {
            ctx.log("one");
            ctx.log("WARN", "two");
            ctx.log("ERROR", "three");
            return "logged";
        }

        @JobFlowHandler("fail")
        public JobResult fail() {
            return JobResult.failure("failed on purpose");
        }

        @JobFlowHandler("throw")
        public String fails() {
            throw new IllegalStateException("thrown on purpose");
        }

        @JobFlowHandler(value = "background", background = true)
        public String background(JobContext ctx) throws Exception {
            sleepThenWitness(ctx);
            return "done in background";
        }
    }

    /** Waits jobParams.millis (an interrupt ends it); a handler not stopped then tells jobParams.witness. */
    static void sleepThenWitness(JobContext ctx) throws Exception {
        Map<?, ?> params = ctx.getJobParams() instanceof Map ? (Map<?, ?>) ctx.getJobParams() : new LinkedHashMap<>();
        Object millis = params.get("millis");
        Thread.sleep(millis instanceof Number ? ((Number) millis).longValue() : 0);
        Object witness = params.get("witness");
        if (witness != null) {
            HttpURLConnection c = (HttpURLConnection) new URL(witness.toString()).openConnection();
            c.setRequestMethod("POST");
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream out = c.getOutputStream()) {
                out.write(("{\"traceId\":\"" + ctx.getTraceId() + "\"}").getBytes(StandardCharsets.UTF_8));
            }
            c.getResponseCode();
        }
    }

    public static void main(String[] args) throws Exception {
        AnnotationConfigApplicationContext spring = new AnnotationConfigApplicationContext(Config.class);
        int port = Integer.parseInt(System.getenv("JOBFLOW_CONFORMANCE_PORT"));
        JobFlowServer.start(spring.getBean(JobExecutor.class), new InetSocketAddress("127.0.0.1", port));
        // With $JOBFLOW_NACOS_ADDR set, registers as $JOBFLOW_NACOS_SERVICE (credentials from
        // $JOBFLOW_NACOS_USERNAME and _PASSWORD) for as long as the sample serves.
        String nacos = System.getenv("JOBFLOW_NACOS_ADDR");
        if (nacos != null) {
            NacosRegistration.builder(nacos, System.getenv("JOBFLOW_NACOS_SERVICE"), "127.0.0.1", port)
                    .credentials(System.getenv("JOBFLOW_NACOS_USERNAME"), System.getenv("JOBFLOW_NACOS_PASSWORD"))
                    .register();
        }
        Thread.currentThread().join();
    }
}
