package jobflow.executor;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/** Signatures of calls and reports (docs/executor-protocol.md §5). */
public final class Signatures {
    /** How far a signature's timestamp may be from this executor's clock, in seconds. */
    public static final long MAX_SKEW_SECONDS = 300;

    private Signatures() {}

    /** The X-JobFlow-Signature value: "v1=" and the hex HMAC-SHA256 of the canonical string. */
    public static String sign(byte[] secret, String method, String path, String timestamp, String traceId, byte[] body) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            mac.update((method + "\n" + path + "\n" + timestamp + "\n" + traceId + "\n").getBytes(StandardCharsets.UTF_8));
            byte[] sum = mac.doFinal(body);
            StringBuilder hex = new StringBuilder("v1=");
            for (byte b : sum) {
                hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
            }
            return hex.toString();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JRE", e);
        }
    }

    /** Whether a request is signed with {@code secret} within the skew of {@code nowSeconds}. */
    public static boolean verify(byte[] secret, String method, String path, String timestamp, String signature,
            String traceId, byte[] body, long nowSeconds) {
        if (timestamp == null || signature == null) {
            return false;
        }
        long ts;
        try {
            ts = Long.parseLong(timestamp.trim());
        } catch (NumberFormatException e) {
            return false;
        }
        if (Math.abs(nowSeconds - ts) > MAX_SKEW_SECONDS) {
            return false;
        }
        byte[] expected = sign(secret, method, path, timestamp.trim(), traceId, body).getBytes(StandardCharsets.UTF_8);
        return MessageDigest.isEqual(expected, signature.trim().getBytes(StandardCharsets.UTF_8));
    }
}
