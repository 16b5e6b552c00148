package jobflow.executor;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

/**
 * Serves a {@link JobExecutor} from any servlet container (javax.servlet 3.0 and later):
 * requests under the executor's prefix are answered here, every other request goes on down the
 * chain. Register it before anything that reads the body (signatures are checked over the raw
 * bytes) and exempt its paths from CSRF checks. With a context path, the executor's prefix is
 * the full path, such as {@code /orders/internal/job}.
 */
public final class JobFlowFilter implements Filter {
    private final JobExecutor executor;

    public JobFlowFilter(JobExecutor executor) {
        this.executor = executor;
    }

    @Override
    public void init(FilterConfig config) {}

    @Override
    public void destroy() {}

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain) throws IOException, ServletException {
        HttpServletRequest request = (HttpServletRequest) req;
        HttpServletResponse response = (HttpServletResponse) res;
        String path = request.getRequestURI();
        if (!executor.serves(path)) {
            chain.doFilter(req, res);
            return;
        }
        byte[] body = JobFlowServer.readAll(request.getInputStream());
        JobExecutor.Answer answer = executor.handle(request.getMethod(), path, request::getHeader, body);
        byte[] out = answer.body.getBytes(StandardCharsets.UTF_8);
        try {
            response.setStatus(answer.status);
            response.setContentType("application/json");
            response.setContentLength(out.length);
            OutputStream os = response.getOutputStream();
            os.write(out);
            os.flush();
        } catch (IOException gone) {
            executor.undelivered(answer);
        }
    }
}
