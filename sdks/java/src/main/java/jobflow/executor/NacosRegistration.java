package jobflow.executor;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UnsupportedEncodingException;
import java.net.HttpURLConnection;
import java.net.URL;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * This executor as an ephemeral instance in Nacos, so schedulers that discover executors there
 * find it (docs/executors/java.md, "Registering in Nacos"). For services that do not register
 * through Spring Cloud's discovery already.
 *
 * <p>Nacos keeps the instance while beats arrive (every 5 s, or what the server asks for) and
 * drops it about 30 s after they stop, so a process that dies leaves no stale address;
 * {@link #close()} removes it at once. Spoken over Nacos' HTTP open API (v1), which Nacos 1 and
 * 2 and rnacos serve, and Nacos 3.2 and later through its legacy adapter; with authentication
 * on, a login gives the access token, renewed before it expires. A failed beat is logged and
 * tried again at the next interval; an instance Nacos no longer knows (a Nacos restart) is
 * registered again.
 *
 * <pre>{@code
 * NacosRegistration nacos = NacosRegistration.builder("nacos:8848", "order-service", "10.0.0.7", 8080)
 *     .credentials("jobflow", System.getenv("NACOS_PASSWORD"))
 *     .register();
 * ...
 * nacos.close();
 * }</pre>
 */
public final class NacosRegistration implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger(NacosRegistration.class.getName());

    /** Nacos refused a request or could not be reached at any of its addresses. */
    public static final class NacosException extends IOException {
        private static final long serialVersionUID = 1L;

        NacosException(String message) {
            super(message);
        }
    }

    /** Where and as what to register. */
    public static final class Builder {
        private final String serverAddr;
        private final String serviceName;
        private final String ip;
        private final int port;
        private String namespace = "public";
        private String group = "DEFAULT_GROUP";
        private String pathPrefix;
        private String username;
        private String password;
        private int timeoutMillis = 3000;

        private Builder(String serverAddr, String serviceName, String ip, int port) {
            this.serverAddr = serverAddr;
            this.serviceName = serviceName;
            this.ip = ip;
            this.port = port;
        }

        /** Default {@code public} (Nacos' default namespace, whose id is empty). */
        public Builder namespace(String namespace) {
            this.namespace = namespace;
            return this;
        }

        /** Default {@code DEFAULT_GROUP}. */
        public Builder group(String group) {
            this.group = group;
            return this;
        }

        /** Announced as {@code jobflow.path-prefix} when not {@code /internal/job}. */
        public Builder pathPrefix(String pathPrefix) {
            this.pathPrefix = pathPrefix;
            return this;
        }

        public Builder credentials(String username, String password) {
            this.username = username;
            this.password = password;
            return this;
        }

        public Builder timeoutMillis(int timeoutMillis) {
            this.timeoutMillis = timeoutMillis;
            return this;
        }

        /** Registers and starts beating; throws when Nacos refuses or cannot be reached. */
        public NacosRegistration register() throws NacosException {
            NacosRegistration r = new NacosRegistration(this);
            r.registerInstance();
            r.scheduleBeat();
            return r;
        }
    }

    public static Builder builder(String serverAddr, String serviceName, String ip, int port) {
        return new Builder(serverAddr, serviceName, ip, port);
    }

    private final Builder cfg;
    private final List<String> urls = new ArrayList<>();
    private final String namespaceId;
    private final Map<String, Object> metadata = new LinkedHashMap<>();
    private final ScheduledExecutorService beats = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "jobflow-nacos-beat");
        t.setDaemon(true);
        return t;
    });
    private volatile long intervalMillis = 5000;
    private volatile boolean closed;
    private String token;
    private long renewAt;

    private NacosRegistration(Builder cfg) {
        this.cfg = cfg;
        for (String part : cfg.serverAddr.split(",")) {
            String p = part.trim().replaceAll("/+$", "");
            if (!p.isEmpty()) {
                urls.add(p.contains("://") ? p : "http://" + p);
            }
        }
        if (urls.isEmpty()) {
            throw new IllegalArgumentException("serverAddr names no Nacos server");
        }
        namespaceId = "public".equals(cfg.namespace) ? "" : cfg.namespace;
        if (cfg.pathPrefix != null && !cfg.pathPrefix.equals(JobExecutor.DEFAULT_PATH_PREFIX)) {
            metadata.put("jobflow.path-prefix", cfg.pathPrefix);
        }
    }

    /** Stops beating and removes the instance (best effort: Nacos drops it once beats stop). */
    @Override
    public void close() {
        closed = true;
        beats.shutdownNow();
        try {
            request("DELETE", "/nacos/v1/ns/instance", instance());
        } catch (NacosException e) {
            LOG.log(Level.WARNING, "could not deregister from Nacos (it drops the instance without beats): {0}", e.getMessage());
        }
    }

    private void scheduleBeat() {
        if (closed) {
            return;
        }
        beats.schedule(() -> {
            try {
                beat();
            } catch (NacosException e) {
                LOG.log(Level.WARNING, "Nacos beat failed; trying again at the next interval: {0}", e.getMessage());
            } finally {
                scheduleBeat();
            }
        }, intervalMillis, TimeUnit.MILLISECONDS);
    }

    private Map<String, String> instance() {
        Map<String, String> p = new LinkedHashMap<>();
        p.put("serviceName", cfg.serviceName);
        p.put("groupName", cfg.group);
        p.put("ip", cfg.ip);
        p.put("port", Integer.toString(cfg.port));
        p.put("ephemeral", "true");
        if (!namespaceId.isEmpty()) {
            p.put("namespaceId", namespaceId);
        }
        return p;
    }

    private void registerInstance() throws NacosException {
        Map<String, String> p = instance();
        p.put("weight", "1.0");
        p.put("enabled", "true");
        p.put("healthy", "true");
        p.put("metadata", Json.write(metadata));
        request("POST", "/nacos/v1/ns/instance", p);
    }

    private void beat() throws NacosException {
        Map<String, Object> beat = new LinkedHashMap<>();
        beat.put("serviceName", cfg.group + "@@" + cfg.serviceName);
        beat.put("ip", cfg.ip);
        beat.put("port", (long) cfg.port);
        beat.put("cluster", "DEFAULT");
        beat.put("weight", 1.0);
        beat.put("metadata", metadata);
        beat.put("scheduled", true);
        Map<String, String> p = instance();
        p.put("beat", Json.write(beat));
        String text = request("PUT", "/nacos/v1/ns/instance/beat", p);
        Object parsed;
        try {
            parsed = Json.parse(text);
        } catch (RuntimeException notJson) {
            return;
        }
        if (!(parsed instanceof Map)) {
            return;
        }
        Map<?, ?> answer = (Map<?, ?>) parsed;
        Object interval = answer.get("clientBeatInterval");
        if (interval instanceof Number && ((Number) interval).longValue() > 0) {
            intervalMillis = ((Number) interval).longValue();
        }
        Object code = answer.get("code");
        if (code instanceof Number && ((Number) code).intValue() == 20404) {
            // Nacos forgot the instance (it restarted, or the beats stopped long enough).
            LOG.info("Nacos no longer knew this instance; registering again");
            registerInstance();
        }
    }

    private synchronized String accessToken(String base) throws NacosException, IOException {
        if (cfg.username == null) {
            return null;
        }
        if (token != null && System.currentTimeMillis() < renewAt) {
            return token;
        }
        Map<String, String> form = new LinkedHashMap<>();
        form.put("username", cfg.username);
        form.put("password", cfg.password == null ? "" : cfg.password);
        HttpURLConnection c = open(base + "/nacos/v1/auth/login", "POST");
        c.setDoOutput(true);
        c.setRequestProperty("Content-Type", "application/x-www-form-urlencoded");
        try (OutputStream out = c.getOutputStream()) {
            out.write(encode(form).getBytes(StandardCharsets.UTF_8));
        }
        int status = c.getResponseCode();
        if (status != 200) {
            throw new NacosException("Nacos login refused (" + status + "): check the username and password");
        }
        Map<?, ?> body = (Map<?, ?>) Json.parse(read(c.getInputStream()));
        token = (String) body.get("accessToken");
        Object ttl = body.get("tokenTtl");
        long seconds = ttl instanceof Number ? ((Number) ttl).longValue() : 18000;
        renewAt = System.currentTimeMillis() + seconds * 800;
        return token;
    }

    /** Asks each address in turn; the first answer counts. */
    private String request(String method, String path, Map<String, String> params) throws NacosException {
        List<String> failures = new ArrayList<>();
        for (String base : urls) {
            try {
                Map<String, String> query = new LinkedHashMap<>(params);
                String t = accessToken(base);
                if (t != null) {
                    query.put("accessToken", t);
                }
                HttpURLConnection c = open(base + path + "?" + encode(query), method);
                int status = c.getResponseCode();
                InputStream in = status < 400 ? c.getInputStream() : c.getErrorStream();
                String text = in == null ? "" : read(in);
                if (status != 200) {
                    if (status == 403) {
                        synchronized (this) {
                            token = null;
                        }
                    }
                    throw new NacosException(method + " " + path + " refused by " + base + " (" + status + "): "
                            + (text.length() > 200 ? text.substring(0, 200) : text));
                }
                return text;
            } catch (NacosException refused) {
                throw refused;
            } catch (IOException e) {
                failures.add(base + ": " + e);
            }
        }
        throw new NacosException("no Nacos server answered " + method + " " + path + ": " + String.join("; ", failures));
    }

    private HttpURLConnection open(String url, String method) throws IOException {
        HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
        c.setRequestMethod(method);
        c.setConnectTimeout(cfg.timeoutMillis);
        c.setReadTimeout(cfg.timeoutMillis);
        return c;
    }

    private static String encode(Map<String, String> params) {
        StringBuilder out = new StringBuilder();
        try {
            for (Map.Entry<String, String> e : params.entrySet()) {
                if (out.length() > 0) {
                    out.append('&');
                }
                out.append(URLEncoder.encode(e.getKey(), "UTF-8")).append('=')
                        .append(URLEncoder.encode(e.getValue(), "UTF-8"));
            }
        } catch (UnsupportedEncodingException impossible) {
            throw new IllegalStateException(impossible);
        }
        return out.toString();
    }

    private static String read(InputStream in) throws IOException {
        try (InputStream input = in) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            byte[] buf = new byte[8192];
            int n;
            while ((n = input.read(buf)) > 0) {
                out.write(buf, 0, n);
            }
            return new String(out.toByteArray(), StandardCharsets.UTF_8);
        }
    }
}
