// JedisCheck runs Jedis' usual patterns against a Redis (or a hotspot-proxy
// in front of one) and checks the answers itself. TestClientJedis
// (proxy/extclients_test.go) starts it.
//
//   java -cp CLASSPATH JedisCheck patterns HOST PORT PREFIX
//   java -cp CLASSPATH JedisCheck restart HOST PORT PREFIX
//
// It prints one line per check, "ok NAME" or "FAIL NAME: what", and exits 0
// only if every check passed. In restart mode it asks the test to act on
// Redis with a line "@pause", "@resume", "@stop" or "@start" on stdout and
// waits for the test's answer line on stdin, "done pause" and so on, before
// it goes on.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.exceptions.JedisNoScriptException;

public class JedisCheck {
    static String host;
    static int port;
    static String prefix;
    static int failed;
    static final BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    interface Check {
        void run() throws Exception;
    }

    static void check(String name, Check c) {
        long start = System.nanoTime();
        try {
            c.run();
            System.out.printf("ok %s (%d ms)%n", name, (System.nanoTime() - start) / 1_000_000);
        } catch (Throwable e) {
            failed++;
            System.out.printf("FAIL %s: %s%n", name, e.toString().replace('\n', ' '));
        }
        System.out.flush();
    }

    static void expect(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void expectEq(Object want, Object got, String what) {
        if (want == null ? got != null : !want.equals(got)) {
            throw new AssertionError(what + ": got " + got + ", want " + want);
        }
    }

    /** ask has the test act on Redis (pause, resume, stop, start) and waits until it did. */
    static void ask(String action) throws Exception {
        System.out.println("@" + action);
        System.out.flush();
        String line = stdin.readLine();
        expectEq("done " + action, line == null ? null : line.trim(), "the test's answer to @" + action);
    }

    static JedisPool pool(int timeoutMs) {
        JedisPoolConfig cfg = new JedisPoolConfig();
        cfg.setMaxTotal(8);
        cfg.setMaxIdle(8);
        cfg.setMaxWait(java.time.Duration.ofSeconds(5));
        return new JedisPool(cfg, host, port, timeoutMs);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: JedisCheck patterns|restart HOST PORT PREFIX");
            System.exit(2);
        }
        host = args[1];
        port = Integer.parseInt(args[2]);
        prefix = args[3] + ":";
        switch (args[0]) {
            case "patterns" -> patterns();
            case "restart" -> restart();
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
            }
        }
        System.out.println(failed == 0 ? "PASS" : "FAIL: " + failed + " checks failed");
        System.out.flush();
        System.exit(failed == 0 ? 0 : 1);
    }

    static void patterns() throws Exception {
        try (JedisPool pool = pool(5000)) {
            check("pooled GET/SET from 8 threads", () -> {
                ExecutorService ex = Executors.newFixedThreadPool(8);
                List<Future<?>> fs = new ArrayList<>();
                for (int w = 0; w < 8; w++) {
                    final int worker = w;
                    fs.add(ex.submit(() -> {
                        for (int i = 0; i < 200; i++) {
                            String k = prefix + "pool:" + worker + ":" + (i % 20);
                            String v = "v" + worker + "-" + i;
                            try (Jedis j = pool.getResource()) {
                                expectEq("OK", j.set(k, v), "SET " + k);
                                expectEq(v, j.get(k), "GET " + k);
                            }
                        }
                        return null;
                    }));
                }
                ex.shutdown();
                for (Future<?> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
                expect(pool.getCreatedCount() > 1, "the pool opened " + pool.getCreatedCount() + " connections, want several");
                try (Jedis j = pool.getResource()) {
                    expectEq(null, j.get(prefix + "pool:missing"), "GET of a missing key");
                    expectEq(2L, j.hset(prefix + "h", java.util.Map.of("a", "1", "b", "2")), "HSET");
                    expectEq(java.util.Map.of("a", "1", "b", "2"), j.hgetAll(prefix + "h"), "HGETALL");
                }
            });

            check("pipeline of 300 commands with an error inside", () -> {
                try (Jedis j = pool.getResource()) {
                    Pipeline p = j.pipelined();
                    List<Response<String>> sets = new ArrayList<>();
                    List<Response<String>> gets = new ArrayList<>();
                    List<Response<Long>> incrs = new ArrayList<>();
                    for (int i = 0; i < 100; i++) {
                        sets.add(p.set(prefix + "pipe:" + i, "val" + i));
                        gets.add(p.get(prefix + "pipe:" + i));
                        incrs.add(p.incr(prefix + "pipe:n"));
                    }
                    Response<Long> wrong = p.lpush(prefix + "pipe:0", "x");
                    Response<String> after = p.get(prefix + "pipe:99");
                    p.sync();
                    for (int i = 0; i < 100; i++) {
                        expectEq("OK", sets.get(i).get(), "pipelined SET " + i);
                        expectEq("val" + i, gets.get(i).get(), "pipelined GET " + i);
                        expectEq((long) (i + 1), incrs.get(i).get(), "pipelined INCR " + i);
                    }
                    try {
                        wrong.get();
                        throw new AssertionError("LPUSH on a string: no error");
                    } catch (JedisDataException e) {
                        expect(e.getMessage().startsWith("WRONGTYPE"), "LPUSH on a string: " + e.getMessage());
                    }
                    expectEq("val99", after.get(), "GET after the error");
                }
            });

            check("MULTI/EXEC, WATCH conflict, DISCARD, EXECABORT", () -> {
                try (Jedis j = pool.getResource(); Jedis other = pool.getResource()) {
                    Transaction t = j.multi();
                    for (int i = 0; i < 10; i++) {
                        t.incr(prefix + "tx:n");
                    }
                    t.set(prefix + "tx:s", "done");
                    List<Object> r = t.exec();
                    expectEq(11, r.size(), "EXEC replies");
                    expectEq(10L, r.get(9), "10th INCR in EXEC");
                    expectEq("OK", r.get(10), "SET in EXEC");

                    j.watch(prefix + "tx:w");
                    other.set(prefix + "tx:w", "other");
                    t = j.multi();
                    t.set(prefix + "tx:w", "mine");
                    expectEq(null, t.exec(), "EXEC after a WATCHed key changed");
                    expectEq("other", other.get(prefix + "tx:w"), "the WATCHed key");

                    t = j.multi();
                    t.set(prefix + "tx:d", "never");
                    expectEq("OK", t.discard(), "DISCARD");
                    expectEq(false, j.exists(prefix + "tx:d"), "key SET in a discarded MULTI exists");

                    t = j.multi();
                    t.set(prefix + "tx:a", "x");
                    t.sendCommand(redis.clients.jedis.Protocol.Command.SET, prefix + "tx:a"); // wrong arity: queued error
                    try {
                        t.exec();
                        throw new AssertionError("EXEC after a bad command: no error");
                    } catch (JedisDataException e) {
                        expect(e.getMessage().startsWith("EXECABORT"), "EXEC after a bad command: " + e.getMessage());
                    }
                    expectEq("PONG", j.ping(), "PING after EXECABORT");
                }
            });

            check("Pub/Sub: SUBSCRIBE, PSUBSCRIBE, PUBLISH from another connection, UNSUBSCRIBE", () -> {
                BlockingQueue<String> got = new LinkedBlockingQueue<>();
                CountDownLatch subscribed = new CountDownLatch(1);
                CountDownLatch psubscribed = new CountDownLatch(1);
                JedisPubSub ps = new JedisPubSub() {
                    @Override
                    public void onMessage(String channel, String message) {
                        got.add(channel + "=" + message);
                    }

                    @Override
                    public void onPMessage(String pattern, String channel, String message) {
                        got.add(pattern + ":" + channel + "=" + message);
                    }

                    @Override
                    public void onSubscribe(String channel, int n) {
                        subscribed.countDown();
                    }

                    @Override
                    public void onPSubscribe(String pattern, int n) {
                        psubscribed.countDown();
                    }
                };
                try (Jedis sub = pool.getResource(); Jedis pub = pool.getResource()) {
                    Thread th = new Thread(() -> sub.subscribe(ps, prefix + "ch"));
                    th.start();
                    expect(subscribed.await(10, TimeUnit.SECONDS), "no SUBSCRIBE confirmation");
                    expectEq(1L, pub.publish(prefix + "ch", "hello"), "PUBLISH receivers");
                    expectEq(prefix + "ch=hello", got.poll(10, TimeUnit.SECONDS), "message");
                    ps.psubscribe(prefix + "pat:*");
                    expect(psubscribed.await(10, TimeUnit.SECONDS), "no PSUBSCRIBE confirmation");
                    expectEq(1L, pub.publish(prefix + "pat:x", "p1"), "PUBLISH to the pattern");
                    expectEq(prefix + "pat:*:" + prefix + "pat:x=p1", got.poll(10, TimeUnit.SECONDS), "pattern message");
                    expectEq(2, ps.getSubscribedChannels(), "subscriptions after PSUBSCRIBE");
                    ps.unsubscribe();
                    ps.punsubscribe();
                    th.join(10_000);
                    expect(!th.isAlive(), "subscribe() did not return after UNSUBSCRIBE and PUNSUBSCRIBE");
                    expectEq(0L, pub.publish(prefix + "ch", "after"), "PUBLISH receivers after UNSUBSCRIBE");
                    expectEq("PONG", sub.ping(), "PING on the connection that was subscribed");
                    expectEq(null, got.poll(), "a message after UNSUBSCRIBE");
                }
            });

            check("Lua EVAL, SCRIPT LOAD, EVALSHA, NOSCRIPT, script error", () -> {
                String script = "redis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), #ARGV}";
                try (Jedis j = pool.getResource()) {
                    expectEq(List.of("one", 1L), j.eval(script, 1, prefix + "lua", "one"), "EVAL");
                    String sha = j.scriptLoad(script);
                    expectEq(40, sha.length(), "SCRIPT LOAD sha");
                    expectEq(true, j.scriptExists(sha), "SCRIPT EXISTS");
                    expectEq(List.of("two", 2L), j.evalsha(sha, 1, prefix + "lua", "two", "extra"), "EVALSHA");
                    try {
                        j.evalsha("0000000000000000000000000000000000000000", 0);
                        throw new AssertionError("EVALSHA of an unknown script: no error");
                    } catch (JedisNoScriptException e) {
                        expect(e.getMessage().startsWith("NOSCRIPT"), "EVALSHA unknown: " + e.getMessage());
                    }
                    try {
                        j.eval("return redis.call('LPUSH', KEYS[1], 'x')", 1, prefix + "lua");
                        throw new AssertionError("a script's WRONGTYPE: no error");
                    } catch (JedisDataException e) {
                        expect(e.getMessage().contains("WRONGTYPE"), "a script's WRONGTYPE: " + e.getMessage());
                    }
                    expectEq("two", j.get(prefix + "lua"), "GET after the scripts");
                }
            });
        }
    }

    /** throwsWithin runs c, which must throw a JedisException within ms milliseconds. */
    static JedisException throwsWithin(long ms, Check c, String what) throws Exception {
        long start = System.nanoTime();
        try {
            c.run();
        } catch (JedisException e) {
            long took = (System.nanoTime() - start) / 1_000_000;
            expect(took <= ms, what + " failed after " + took + " ms, want within " + ms + " ms: " + e);
            System.out.printf("   %s: %s after %d ms%n", what, e.toString().replace('\n', ' '), took);
            return e;
        }
        throw new AssertionError(what + ": no error");
    }

    /** worksWithin retries c until it succeeds, for at most ms milliseconds. */
    static void worksWithin(long ms, Check c, String what) throws Exception {
        long deadline = System.nanoTime() + ms * 1_000_000;
        long start = System.nanoTime();
        for (int tries = 1; ; tries++) {
            try {
                c.run();
                System.out.printf("   %s: works after %d ms, %d tries%n", what, (System.nanoTime() - start) / 1_000_000, tries);
                return;
            } catch (JedisException e) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(what + ": still failing after " + ms + " ms: " + e);
                }
                Thread.sleep(100);
            }
        }
    }

    static void restart() throws Exception {
        String k = prefix + "restart";
        try (JedisPool pool = pool(1000)) {
            check("before the outage", () -> {
                try (Jedis j = pool.getResource()) {
                    expectEq("OK", j.set(k, "before"), "SET");
                    expectEq("before", j.get(k), "GET");
                }
            });
            check("client-side timeout while Redis is frozen, then the same pool works", () -> {
                ask("pause");
                try {
                    JedisException e = throwsWithin(4000, () -> {
                        try (Jedis j = pool.getResource()) {
                            j.get(k);
                        }
                    }, "GET while Redis is frozen");
                    expect(e instanceof JedisConnectionException, "want a JedisConnectionException (a read timeout), got " + e);
                } finally {
                    ask("resume");
                }
                worksWithin(10_000, () -> {
                    try (Jedis j = pool.getResource()) {
                        expectEq("before", j.get(k), "GET after the freeze");
                    }
                }, "GET after the freeze");
            });
            check("an error while Redis is down, then reconnect once it is back", () -> {
                ask("stop");
                try {
                    throwsWithin(4000, () -> {
                        try (Jedis j = pool.getResource()) {
                            j.get(k);
                        }
                    }, "GET while Redis is down");
                    // A new connection, too, fails cleanly.
                    throwsWithin(4000, () -> {
                        try (Jedis j = new Jedis(host, port, 1000)) {
                            j.set(k, "down");
                        }
                    }, "SET on a new connection while Redis is down");
                } finally {
                    ask("start");
                }
                worksWithin(10_000, () -> {
                    try (Jedis j = pool.getResource()) {
                        expectEq(null, j.get(k), "GET after the restart (the restarted Redis is empty)");
                        expectEq("OK", j.set(k, "after"), "SET after the restart");
                        expectEq("after", j.get(k), "GET after the restart");
                    }
                }, "GET/SET after the restart");
            });
        }
    }
}
