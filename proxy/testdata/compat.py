"""redis-py against hotspot-proxy: run by TestClientRedisPy (clients_test.go).

Usage: compat.py HOST PORT PREFIX. Exits non-zero on the first mismatch.
"""
import sys
import threading
import time

import redis

host, port, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def check(what, got, want):
    if got != want:
        print(f"FAIL {what}: got {got!r}, want {want!r}", file=sys.stderr)
        sys.exit(1)


for proto in (2, 3):
    p = f"{prefix}:{proto}:"
    r = redis.Redis(host=host, port=port, protocol=proto)
    check("ping", r.ping(), True)
    check("set", r.set(p + "s", b"v\x00\xff"), True)
    check("get", r.get(p + "s"), b"v\x00\xff")
    check("incr", r.incrby(p + "n", 5), 5)
    r.hset(p + "h", mapping={"a": "1", "b": "2"})
    check("hgetall", r.hgetall(p + "h"), {b"a": b"1", b"b": b"2"})
    r.zadd(p + "z", {"m": 1.5, "n": 2})
    check("zrange", [tuple(x) for x in r.zrange(p + "z", 0, -1, withscores=True)], [(b"m", 1.5), (b"n", 2.0)])
    r.sadd(p + "set", "x", "y")
    check("smembers", r.smembers(p + "set"), {b"x", b"y"})
    check("mget", r.mget(p + "s", p + "missing"), [b"v\x00\xff", None])
    pipe = r.pipeline(transaction=True)
    for i in range(50):
        pipe.set(f"{p}pl{i}", i)
        pipe.get(f"{p}pl{i}")
    res = pipe.execute()
    check("pipeline", res[1::2], [str(i).encode() for i in range(50)])
    try:
        r.lpush(p + "s", "x")
        check("wrongtype", "no error", "ResponseError")
    except redis.ResponseError as e:
        check("wrongtype", str(e).startswith("WRONGTYPE"), True)
    # WATCH conflict
    with r.pipeline() as pipe:
        pipe.watch(p + "w")
        redis.Redis(host=host, port=port).set(p + "w", "other")
        pipe.multi()
        pipe.set(p + "w", "mine")
        try:
            pipe.execute()
            check("watch", "executed", "WatchError")
        except redis.WatchError:
            pass
    # Pub/Sub
    ps = r.pubsub()
    ps.subscribe(p + "ch")
    msg = ps.get_message(timeout=2)
    check("subscribe", msg["type"], "subscribe")
    redis.Redis(host=host, port=port).publish(p + "ch", "hi")
    deadline = time.time() + 5
    msg = None
    while time.time() < deadline and msg is None:
        msg = ps.get_message(timeout=1)
    check("message", msg and msg["data"], b"hi")
    ps.close()
    # BLPOP served by another client
    threading.Timer(0.2, lambda: redis.Redis(host=host, port=port).rpush(p + "q", "job")).start()
    check("blpop", tuple(r.blpop([p + "q"], timeout=5)), ((p + "q").encode(), b"job"))
    check("hotspot info", b"hits:" in r.execute_command("HOTSPOT", "INFO"), True)
    keys = r.keys(p + "*")
    if keys:
        r.delete(*keys)
print("ok")
