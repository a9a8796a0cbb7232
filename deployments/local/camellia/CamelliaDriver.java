// CamelliaDriver drives NetEase camellia's hot-key server through its own SDK
// (CamelliaHotKeyMonitorSdk, at its defaults: 1 s push, 10,000-key cap) with
// the workload of `hotspot bench` (internal/loadgen): a Zipf background over
// KEYS keys named k:<rank>, paced in 10 ms ticks, plus planted keys
// planted:<m>x at m times THRESHOLD per second from 3 s on. It prints what
// it sent and, from the SDK's hot-key events, which keys the server reported
// hot and when (seconds after the start), for camellia-bench.sh.
//
//	java -cp SDK_CLASSPATH:DIR CamelliaDriver HOST:PORT NAMESPACE RATE KEYS SKEW SECONDS THRESHOLD PLANTED
//
// PLANTED is a comma-separated list of multiples (0.8,1.2,3). Only this
// driver is ours; camellia itself is built from its own sources by
// camellia-bench.sh and never committed.
import com.netease.nim.camellia.core.discovery.LocalConfCamelliaDiscovery;
import com.netease.nim.camellia.core.discovery.LocalConfCamelliaDiscoveryFactory;
import com.netease.nim.camellia.core.discovery.ServerNode;
import com.netease.nim.camellia.hot.key.common.model.KeyAction;
import com.netease.nim.camellia.hot.key.sdk.CamelliaHotKeyMonitorSdk;
import com.netease.nim.camellia.hot.key.sdk.CamelliaHotKeySdk;
import com.netease.nim.camellia.hot.key.sdk.conf.CamelliaHotKeyMonitorSdkConfig;
import com.netease.nim.camellia.hot.key.sdk.conf.CamelliaHotKeySdkConfig;
import com.netease.nim.camellia.hot.key.sdk.listener.CamelliaHotKeyListener;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

public class CamelliaDriver {
    public static void main(String[] a) throws Exception {
        if (a.length != 8) {
            System.err.println("usage: CamelliaDriver HOST:PORT NAMESPACE RATE KEYS SKEW SECONDS THRESHOLD PLANTED");
            System.exit(2);
        }
        String[] hp = a[0].split(":");
        String ns = a[1];
        double rate = Double.parseDouble(a[2]);
        long keys = Long.parseLong(a[3]);
        double skew = Double.parseDouble(a[4]);
        double seconds = Double.parseDouble(a[5]);
        double threshold = Double.parseDouble(a[6]);
        List<Double> planted = new ArrayList<>();
        for (String m : a[7].split(",")) {
            if (!m.isEmpty()) planted.add(Double.parseDouble(m));
        }

        List<ServerNode> nodes = new ArrayList<>();
        nodes.add(new ServerNode(hp[0], Integer.parseInt(hp[1])));
        String service = "camellia-hot-key-server";
        CamelliaHotKeySdkConfig config = new CamelliaHotKeySdkConfig();
        config.setDiscoveryFactory(new LocalConfCamelliaDiscoveryFactory(service, new LocalConfCamelliaDiscovery(nodes)));
        config.setServiceName(service);
        CamelliaHotKeySdk sdk = new CamelliaHotKeySdk(config);
        CamelliaHotKeyMonitorSdk monitor = new CamelliaHotKeyMonitorSdk(sdk, new CamelliaHotKeyMonitorSdkConfig());

        long start = System.nanoTime();
        Map<String, Double> hot = new ConcurrentHashMap<>(); // key -> seconds after start when first reported
        sdk.addListener(ns, (CamelliaHotKeyListener) e -> {
            if (e.getKeyAction() == KeyAction.QUERY) {
                hot.putIfAbsent(e.getKey(), (System.nanoTime() - start) / 1e9);
            }
        });
        monitor.preheat(ns);

        Zipf zipf = new Zipf(keys, skew);
        String[] names = new String[(int) keys + 1]; // formatted once, as the SDK's callers hold their keys
        for (int k = 1; k <= keys; k++) names[k] = "k:" + k;
        SplittableRandom rnd = new SplittableRandom(1);
        long tickNanos = 10_000_000L;
        long ticks = (long) (seconds * 100);
        double perTick = rate / 100, carry = 0;
        double[] plantCarry = new double[planted.size()];
        long sent = 0;
        long behindMax = 0;
        for (long i = 0; i < ticks; i++) {
            long due = start + i * tickNanos;
            long now = System.nanoTime();
            if (now < due) {
                Thread.sleep((due - now) / 1_000_000, (int) ((due - now) % 1_000_000));
            } else {
                behindMax = Math.max(behindMax, now - due);
            }
            carry += perTick;
            long n = (long) carry;
            carry -= n;
            for (long j = 0; j < n; j++) {
                monitor.push(ns, names[(int) zipf.sample(rnd)], 1);
            }
            sent += n;
            if (i >= 300) { // planted keys from 3 s on, as `hotspot bench`'s
                for (int p = 0; p < planted.size(); p++) {
                    plantCarry[p] += planted.get(p) * threshold / 100;
                    long m = (long) plantCarry[p];
                    plantCarry[p] -= m;
                    String key = "planted:" + fmt(planted.get(p)) + "x";
                    for (long j = 0; j < m; j++) monitor.push(ns, key, 1);
                    sent += m;
                }
            }
        }
        double took = (System.nanoTime() - start) / 1e9;
        Thread.sleep(3000); // settle: the SDK's last push and the server's answer
        System.out.printf("sent %d accesses in %.2f s (%.0f/s), generator behind at most %d ms%n",
                sent, took, sent / took, behindMax / 1_000_000);
        if (behindMax > 1_000_000_000L) {
            System.out.println("unfair: the generator fell more than a second behind its schedule");
        }
        System.out.printf("hot keys reported %d%n", hot.size());
        for (Map.Entry<String, Double> e : new TreeMap<>(hot).entrySet()) {
            if (e.getKey().startsWith("planted:")) {
                System.out.printf("planted %s reported at %.3f s (its rate started at 3 s)%n", e.getKey(), e.getValue());
            }
        }
        System.exit(0);
    }

    static String fmt(double m) {
        return m == Math.rint(m) ? String.valueOf((long) m) : String.valueOf(m);
    }

    /** Zipf over ranks 1..n, P(k) ∝ k^-s, by Hörmann and Derflinger's rejection-inversion (as internal/loadgen/zipf.go). */
    static final class Zipf {
        final long n;
        final double s, hIntegralX1, hIntegralN, sv;

        Zipf(long n, double s) {
            this.n = n;
            this.s = s;
            hIntegralX1 = hIntegral(1.5) - 1;
            hIntegralN = hIntegral(n + 0.5);
            sv = 2 - hIntegralInverse(hIntegral(2.5) - h(2));
        }

        long sample(SplittableRandom r) {
            while (true) {
                double u = hIntegralN + r.nextDouble() * (hIntegralX1 - hIntegralN);
                double x = hIntegralInverse(u);
                long k = (long) (x + 0.5);
                if (k < 1) k = 1;
                else if (k > n) k = n;
                if (k - x <= sv || u >= hIntegral(k + 0.5) - h(k)) return k;
            }
        }

        double h(double x) { return Math.exp(-s * Math.log(x)); }

        double hIntegral(double x) {
            double lx = Math.log(x);
            return helper2((1 - s) * lx) * lx;
        }

        double hIntegralInverse(double x) {
            double t = x * (1 - s);
            if (t < -1) t = -1;
            return Math.exp(helper1(t) * x);
        }

        static double helper1(double x) { return Math.abs(x) > 1e-8 ? Math.log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x)); }

        static double helper2(double x) { return Math.abs(x) > 1e-8 ? Math.expm1(x) / x : 1 + x * 0.5 * (1 + x * (1.0 / 3) * (1 + 0.25 * x)); }
    }
}
