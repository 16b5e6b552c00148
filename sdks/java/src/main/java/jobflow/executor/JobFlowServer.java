package jobflow.executor;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/** Serves a {@link JobExecutor} on the JDK's own HTTP server, for plain Java services. */
public final class JobFlowServer implements AutoCloseable {
    private final HttpServer server;

    private JobFlowServer(HttpServer server) {
        this.server = server;
    }

    /** Starts serving {@code executor} on {@code address} (port 0: any free port). */
    public static JobFlowServer start(JobExecutor executor, InetSocketAddress address) throws IOException {
        HttpServer server = HttpServer.create(address, 0);
        server.setExecutor(Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "jobflow-http");
            t.setDaemon(true);
            return t;
        }));
        server.createContext("/", exchange -> serve(executor, exchange));
        server.start();
        return new JobFlowServer(server);
    }

    public int port() {
        return server.getAddress().getPort();
    }

    @Override
    public void close() {
        server.stop(0);
    }

    private static void serve(JobExecutor executor, HttpExchange exchange) throws IOException {
        String path = exchange.getRequestURI().getRawPath();
        JobExecutor.Answer answer;
        if (!executor.serves(path)) {
            answer = null;
        } else {
            byte[] body = readAll(exchange.getRequestBody());
            answer = executor.handle(exchange.getRequestMethod(), path,
                    name -> exchange.getRequestHeaders().getFirst(name), body);
        }
        byte[] out = (answer == null ? "{\"message\":\"not found\"}" : answer.body).getBytes(StandardCharsets.UTF_8);
        try {
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(answer == null ? 404 : answer.status, out.length);
            try (OutputStream os = exchange.getResponseBody()) {
                os.write(out);
            }
        } catch (IOException gone) {
            if (answer != null) {
                executor.undelivered(answer);
            }
        } finally {
            exchange.close();
        }
    }

    static byte[] readAll(InputStream in) throws IOException {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        byte[] chunk = new byte[8192];
        int n;
        while ((n = in.read(chunk)) > 0) {
            buf.write(chunk, 0, n);
        }
        return buf.toByteArray();
    }
}
