"""The compatibility script (proxy/compat_test.go) on redis-py: redis.Redis
when plan["cluster"] is false, redis.cluster.RedisCluster when it is true.

Run with Debian's /usr/bin/python3 and its python3-redis."""

import json
import sys
import threading
import traceback

import redis
import redis.cluster

plan = json.loads(sys.argv[1])
host, port = plan["addr"].rsplit(":", 1)
port = int(port)
P = plan["prefix"]
T = plan["tags"]


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def error_of(e):
    return {"error": "%s: %s" % (type(e).__name__, e)}


def plain(v):
    if isinstance(v, Exception):
        return error_of(v)
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, set):
        return sorted(plain(x) for x in v)
    return v


def r(f, *args, **kwargs):
    """r calls f and returns its reply, or what it failed with."""
    try:
        return plain(f(*args, **kwargs))
    except Exception as e:  # every failure is a result to compare
        return error_of(e)


def ttl(v):
    """ttl rounds a positive TTL of the script's 100000 s expiries to 100 s,
    so that a slow run reads the same; -1 and -2 stay exact."""
    return int(round(v / 100.0)) * 100 if isinstance(v, int) and v > 0 else v


def connect():
    if plan["cluster"]:
        return redis.cluster.RedisCluster(host=host, port=port, decode_responses=True)
    return redis.Redis(host=host, port=port, decode_responses=True)


c = None


def masters():
    """The clients that see the whole key space: a cluster client's
    primaries (one, sluice, through sluice), or the client itself."""
    if plan["cluster"]:
        return [c.get_redis_connection(n) for n in c.get_primaries()]
    return [c]


def await_blocked():
    """Tells the harness a blocking command was sent and waits until the
    harness has seen it block on a node."""
    emit({"await": "blocked"})
    line = sys.stdin.readline().strip()
    if line != "go":
        raise RuntimeError("harness answered %r, want 'go'" % line)


def strings():
    return [
        r(c.set, P + "s", "hello"),
        r(c.get, P + "s"),
        r(c.append, P + "s", " world"),
        r(c.get, P + "s"),
        r(c.set, P + "n", "10"),
        r(c.incr, P + "n"),
        r(c.incrby, P + "n", 5),
        r(c.incr, P + "s"),
        r(c.setex, P + "sx", 100000, "v"),
        r(c.get, P + "sx"),
        r(c.get, P + "missing"),
    ]


def hashes():
    return [
        r(c.hset, P + "h", mapping={"f1": "v1", "f2": "v2"}),
        r(c.hget, P + "h", "f1"),
        r(c.hgetall, P + "h"),
        r(c.hincrby, P + "h", "n", 3),
        r(c.hdel, P + "h", "f2"),
        r(c.hexists, P + "h", "f2"),
        r(c.hlen, P + "h"),
        r(c.hgetall, P + "h"),
    ]


def lists():
    return [
        r(c.rpush, P + "l", "a", "b", "c"),
        r(c.lpush, P + "l", "z"),
        r(c.lrange, P + "l", 0, -1),
        r(c.lpop, P + "l"),
        r(c.rpop, P + "l"),
        r(c.llen, P + "l"),
        r(c.get, P + "l"),
    ]


def sets():
    # A set's order is its node's hash table's: plain() sorts it.
    return [
        r(c.sadd, P + "set", "x", "y", "z"),
        r(c.sadd, P + "set", "x"),
        r(c.sismember, P + "set", "y"),
        r(c.scard, P + "set"),
        r(c.smembers, P + "set"),
        r(c.srem, P + "set", "y"),
        r(c.smembers, P + "set"),
    ]


def zsets():
    return [
        r(c.zadd, P + "z", {"one": 1.5, "two": 2, "three": 3}),
        r(c.zrange, P + "z", 0, -1, withscores=True),
        r(c.zscore, P + "z", "one"),
        r(c.zincrby, P + "z", 2.5, "one"),
        r(c.zrank, P + "z", "one"),
        r(c.zrevrange, P + "z", 0, 1, withscores=True),
    ]


def streams():
    return [
        r(c.xadd, P + "x", {"f": "v"}, id="1-1"),
        r(c.xadd, P + "x", {"f": "w", "a": "b"}, id="2-1"),
        r(c.xadd, P + "x", {"f": "x"}, id="1-0"),
        r(c.xrange, P + "x", "-", "+"),
        r(c.xrange, P + "x", "-", "+", count=1),
        r(c.xlen, P + "x"),
    ]


def expiry():
    return [
        r(c.set, P + "e", "v"),
        r(c.ttl, P + "e"),
        r(c.expire, P + "e", 100000),
        ttl(r(c.ttl, P + "e")),
        r(c.persist, P + "e"),
        r(c.ttl, P + "e"),
        r(c.ttl, P + "missing"),
        ttl(r(c.ttl, P + "sx")),
        r(c.expire, P + "missing", 10),
    ]


def multikey():
    k0, k1, k2 = ["%s{%s}m" % (P, t) for t in T["spread"]]
    none = "%s{%s}none" % (P, T["spread"][2])
    if plan["cluster"]:
        # A cluster answers CROSSSLOT to these keys: a cluster client sends
        # one command per key and merges the replies as one Redis would.
        sets = [r(c.set, k, v) for k, v in ((k0, "v0"), (k1, "v1"), (k2, "v2"))]
        mset = True if all(x is True for x in sets) else sets
        mget = [r(c.get, k) for k in (k0, k1, none, k2)]
        dels = sum(r(c.delete, k) for k in (k0, k1, k2, none))
        after = [r(c.get, k) for k in (k0, k1)]
        return [mset, mget, dels, after]
    return [
        r(c.mset, {k0: "v0", k1: "v1", k2: "v2"}),
        r(c.mget, k0, k1, none, k2),
        r(c.delete, k0, k1, k2, none),
        r(c.mget, k0, k1),
    ]


def pipeline():
    k = "%s{%s}p" % (P, T["node"])
    p = c.pipeline(transaction=False)
    p.set(k + "a", "1").incr(k + "a").get(k + "a")
    p.rpush(k + "l", "x").incr(k + "l").lrange(k + "l", 0, -1)
    return r(p.execute, raise_on_error=False)


# The transactions delete their keys, one by one, so that what they wrote
# (client libraries differ there) does not reach the scan.


def tx():
    k = "%s{%s}" % (P, T["node"])

    def run():
        p = c.pipeline(transaction=True)
        p.set(k + "t", "1").incr(k + "t").rpush(k + "tl", "x").incr(k + "tl").get(k + "t")
        return p.execute(raise_on_error=False)

    return [r(run), r(c.delete, k + "t"), r(c.delete, k + "tl")]


def tx_cross():
    a = "%s{%s}x" % (P, T["node"])
    b = "%s{%s}x" % (P, T["other"])

    def run():
        p = c.pipeline(transaction=True)
        p.set(a, "1").set(b, "2")
        return p.execute()

    return [r(run), r(c.delete, a), r(c.delete, b)]


def blpop():
    k = P + "{bl}"
    out = [r(c.blpop, [k + "empty"], 0.01)]
    blocker = connect()
    popped = []
    th = threading.Thread(target=lambda: popped.append(r(blocker.blpop, [k + "q"], 10)))
    th.start()
    await_blocked()
    out.append(r(c.rpush, k + "q", "item"))
    th.join()
    out.append(popped[0])
    blocker.close()
    return out


def counted(v):
    """counted stands for PUBLISH's count of receivers while a subscriber
    listens: a cluster node counts only its own subscribers, and neither a
    cluster client nor sluice puts the publisher on the subscriber's node
    every time, so only the reply's kind (a count, not an error)
    compares."""
    return "count" if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v


def pubsub():
    """A PubSub object subscribes (RedisCluster's ClusterPubSub on the
    primary of the channel's slot); redis-py reports each confirmation as
    a message, which the step reads before going on."""
    ch, pat = P + "ps:ch", P + "ps:*"
    sub = connect()
    ps = sub.pubsub()

    def next_message(what):
        # get_message answers None when nothing came within its timeout.
        for _ in range(50):
            m = ps.get_message(timeout=0.1)
            if m is not None:
                return plain(m)
        raise RuntimeError("no %s within 5 s" % what)

    out = {}
    try:
        ps.subscribe(ch)
        out["subscribe"] = next_message("subscribe confirmation")
        ps.psubscribe(pat)
        out["psubscribe"] = next_message("psubscribe confirmation")
        out["publish"] = counted(r(c.publish, ch, "hello"))
        out["messages"] = [next_message("message"), next_message("pmessage")]
        ps.unsubscribe(ch)
        out["unsubscribe"] = next_message("unsubscribe confirmation")
        ps.punsubscribe(pat)
        out["punsubscribe"] = next_message("punsubscribe confirmation")
        out["publish_after"] = r(c.publish, ch, "again")  # nobody listens: 0 on every node
    except Exception as e:  # what was reported so far compares, with the failure
        out["error"] = error_of(e)
    ps.close()
    sub.close()
    return out


def scripts():
    k = P + "{sc}"
    get = "return redis.call('GET', KEYS[1])"
    out = [r(c.eval, "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}", 1, k + "n", "x")]
    # A script is loaded on every primary a cluster client knows.
    shas = [r(m.script_load, get) for m in masters()]
    unique = []
    for s in shas:
        if s not in unique:
            unique.append(s)
    out.append(unique)
    out.append(r(c.set, k + "g", "val"))
    out.append(r(c.evalsha, shas[0], 1, k + "g"))
    out.append(r(c.evalsha, "0" * 40, 1, k + "g"))
    out.append(r(c.eval, "return redis.call('INCR', KEYS[1])", 1, k + "g"))
    return out


def scan():
    keys = []
    for m in masters():
        cursor = 0
        while True:
            cursor, batch = m.scan(cursor, match=P + "*", count=20)
            keys.extend(batch)
            if cursor == 0:
                break
    return sorted(keys)


def article():
    a = plan["article"]
    return [r(c.eval, a["script"], 1, P + "article", *call) for call in a["calls"]]


def cmd(*args):
    return r(c.execute_command, *args)


def throttle():
    return [
        cmd("THROTTLE", P + "t1", "5", "1", "1s"),
        cmd("THROTTLE", P + "t2", "5", "1", "1s", "0"),
        cmd("THROTTLE", P + "t3", "5", "1", "1s", "6"),
        cmd("THROTTLE", P + "t4", "1", "1", "1h"),
        cmd("THROTTLE", P + "t4", "1", "1", "1h"),
        cmd("THROTTLE.RESET", P + "t4"),
        cmd("THROTTLE.RESET", P + "t4"),
        cmd("THROTTLE", P + "t5", "0", "1", "1s"),
        cmd("CL.THROTTLE", P + "t6", "15", "30", "60"),
    ]


def gcra():
    return [
        cmd("GCRA", P + "g1", "5", "10", "60"),
        cmd("GCRA", P + "g1", "5", "10", "60"),
        cmd("GCRA", P + "g2", "0", "1", "60"),
        cmd("GCRA", P + "g2", "0", "1", "60"),
        cmd("GCRA", P + "g3", "5", "10", "60", "TOKENS", "7"),
        cmd("GCRA", P + "g4", "5", "10", "0"),
    ]


def main():
    global c
    steps = [strings, hashes, lists, sets, zsets, streams, expiry, multikey,
             pipeline, tx, tx_cross, blpop, pubsub, scripts, scan, article]
    if plan["sluice"]:
        steps += [throttle, gcra]
    try:
        c = connect()
        for step in steps:
            if plan.get("only") and step.__name__ not in plan["only"]:
                continue
            emit({"step": step.__name__, "result": step()})
    except Exception:
        emit({"fatal": traceback.format_exc()})
        sys.exit(1)
    c.close()


main()
