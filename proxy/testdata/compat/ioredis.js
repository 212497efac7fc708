// The compatibility script (proxy/compat_test.go) on ioredis: new Redis()
// when plan.cluster is false, new Redis.Cluster() when it is true.
'use strict';

const Redis = require('ioredis');
const { plan, host, port, r, awaitBlocked, ttl, counted, within, run } = require('./common');

const P = plan.prefix;
const T = plan.tags;

function connect() {
  if (plan.cluster) {
    return new Redis.Cluster([{ host, port }], {
      clusterRetryStrategy: () => null,
      redisOptions: { maxRetriesPerRequest: 0 },
    });
  }
  return new Redis({ host, port, maxRetriesPerRequest: 0, retryStrategy: () => null });
}

const c = connect();

// masters are the clients that see the whole key space: a cluster
// client's primaries (one, sluice, through sluice), or the client itself.
function masters() {
  return plan.cluster ? c.nodes('master') : [c];
}

const steps = [
  ['strings', async () => [
    await r(c.set(P + 's', 'hello')),
    await r(c.get(P + 's')),
    await r(c.append(P + 's', ' world')),
    await r(c.get(P + 's')),
    await r(c.set(P + 'n', '10')),
    await r(c.incr(P + 'n')),
    await r(c.incrby(P + 'n', 5)),
    await r(c.incr(P + 's')),
    await r(c.setex(P + 'sx', 100000, 'v')),
    await r(c.get(P + 'sx')),
    await r(c.get(P + 'missing')),
  ]],
  ['hashes', async () => [
    await r(c.hset(P + 'h', 'f1', 'v1', 'f2', 'v2')),
    await r(c.hget(P + 'h', 'f1')),
    await r(c.hgetall(P + 'h')),
    await r(c.hincrby(P + 'h', 'n', 3)),
    await r(c.hdel(P + 'h', 'f2')),
    await r(c.hexists(P + 'h', 'f2')),
    await r(c.hlen(P + 'h')),
    await r(c.hgetall(P + 'h')),
  ]],
  ['lists', async () => [
    await r(c.rpush(P + 'l', 'a', 'b', 'c')),
    await r(c.lpush(P + 'l', 'z')),
    await r(c.lrange(P + 'l', 0, -1)),
    await r(c.lpop(P + 'l')),
    await r(c.rpop(P + 'l')),
    await r(c.llen(P + 'l')),
    await r(c.get(P + 'l')),
  ]],
  ['sets', async () => [
    await r(c.sadd(P + 'set', 'x', 'y', 'z')),
    await r(c.sadd(P + 'set', 'x')),
    await r(c.sismember(P + 'set', 'y')),
    await r(c.scard(P + 'set')),
    // A set's order is its node's hash table's: sorted.
    (await c.smembers(P + 'set')).sort(),
    await r(c.srem(P + 'set', 'y')),
    (await c.smembers(P + 'set')).sort(),
  ]],
  ['zsets', async () => [
    await r(c.zadd(P + 'z', 1.5, 'one', 2, 'two', 3, 'three')),
    await r(c.zrange(P + 'z', 0, -1, 'WITHSCORES')),
    await r(c.zscore(P + 'z', 'one')),
    await r(c.zincrby(P + 'z', 2.5, 'one')),
    await r(c.zrank(P + 'z', 'one')),
    await r(c.zrevrange(P + 'z', 0, 1, 'WITHSCORES')),
  ]],
  ['streams', async () => [
    await r(c.xadd(P + 'x', '1-1', 'f', 'v')),
    await r(c.xadd(P + 'x', '2-1', 'f', 'w', 'a', 'b')),
    await r(c.xadd(P + 'x', '1-0', 'f', 'x')),
    await r(c.xrange(P + 'x', '-', '+')),
    await r(c.xrange(P + 'x', '-', '+', 'COUNT', 1)),
    await r(c.xlen(P + 'x')),
  ]],
  ['expiry', async () => [
    await r(c.set(P + 'e', 'v')),
    await r(c.ttl(P + 'e')),
    await r(c.expire(P + 'e', 100000)),
    ttl(await r(c.ttl(P + 'e'))),
    await r(c.persist(P + 'e')),
    await r(c.ttl(P + 'e')),
    await r(c.ttl(P + 'missing')),
    ttl(await r(c.ttl(P + 'sx'))),
    await r(c.expire(P + 'missing', 10)),
  ]],
  ['multikey', async () => {
    const [k0, k1, k2] = T.spread.map((t) => `${P}{${t}}m`);
    const none = `${P}{${T.spread[2]}}none`;
    if (plan.cluster) {
      // A cluster answers CROSSSLOT to these keys: a cluster client sends
      // one command per key and merges the replies as one Redis would.
      const sets = await Promise.all([[k0, 'v0'], [k1, 'v1'], [k2, 'v2']].map(([k, v]) => r(c.set(k, v))));
      const mset = sets.every((x) => x === 'OK') ? 'OK' : sets;
      const mget = await Promise.all([k0, k1, none, k2].map((k) => r(c.get(k))));
      const dels = await Promise.all([k0, k1, k2, none].map((k) => r(c.del(k))));
      const after = await Promise.all([k0, k1].map((k) => r(c.get(k))));
      return [mset, mget, dels.reduce((a, b) => a + b, 0), after];
    }
    return [
      await r(c.mset(k0, 'v0', k1, 'v1', k2, 'v2')),
      await r(c.mget(k0, k1, none, k2)),
      await r(c.del(k0, k1, k2, none)),
      await r(c.mget(k0, k1)),
    ];
  }],
  ['pipeline', async () => {
    const k = `${P}{${T.node}}p`;
    return r(c.pipeline()
      .set(k + 'a', '1').incr(k + 'a').get(k + 'a')
      .rpush(k + 'l', 'x').incr(k + 'l').lrange(k + 'l', 0, -1)
      .exec());
  }],
  // The transactions delete their keys, one by one, so that what they
  // wrote (client libraries differ there) does not reach the scan.
  ['tx', async () => {
    const k = `${P}{${T.node}}`;
    return [
      await r(c.multi()
        .set(k + 't', '1').incr(k + 't').rpush(k + 'tl', 'x').incr(k + 'tl').get(k + 't')
        .exec()),
      await r(c.del(k + 't')),
      await r(c.del(k + 'tl')),
    ];
  }],
  ['tx_cross', async () => {
    const a = `${P}{${T.node}}x`;
    const b = `${P}{${T.other}}x`;
    return [
      await r(c.multi().set(a, '1').set(b, '2').exec()),
      await r(c.del(a)),
      await r(c.del(b)),
    ];
  }],
  ['blpop', async () => {
    const k = `${P}{bl}`;
    const out = [await r(c.blpop(k + 'empty', 0.01))];
    const blocker = connect();
    const popped = r(blocker.blpop(k + 'q', 10));
    await awaitBlocked();
    out.push(await r(c.rpush(k + 'q', 'item')));
    out.push(await popped);
    blocker.disconnect();
    return out;
  }],
  // A second connection subscribes, in cluster mode to a node of
  // Redis.Cluster's choosing; each (un)subscribe resolves once the node
  // confirmed it, with the connection's count of subscriptions.
  ['pubsub', async () => {
    const ch = P + 'ps:ch';
    const pat = P + 'ps:*';
    const sub = connect();
    const got = [];
    let both;
    const arrived = new Promise((resolve) => { both = resolve; });
    const add = (m) => {
      got.push(m);
      if (got.length === 2) both();
    };
    sub.on('message', (channel, message) => add({ channel, message }));
    sub.on('pmessage', (pattern, channel, message) => add({ pattern, channel, message }));
    const out = {};
    out.subscribe = await r(sub.subscribe(ch));
    out.psubscribe = await r(sub.psubscribe(pat));
    out.publish = counted(await r(c.publish(ch, 'hello')));
    out.messages = await r(within(arrived.then(() => got), 5000, 'message and pmessage'));
    out.unsubscribe = await r(sub.unsubscribe(ch));
    out.punsubscribe = await r(sub.punsubscribe(pat));
    out.publishAfter = await r(c.publish(ch, 'again')); // nobody listens: 0 on every node
    sub.disconnect();
    return out;
  }],
  ['scripts', async () => {
    const k = `${P}{sc}`;
    const get = "return redis.call('GET', KEYS[1])";
    const out = [await r(c.eval("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}", 1, k + 'n', 'x'))];
    // A script is loaded on every primary a cluster client knows.
    const shas = await Promise.all(masters().map((m) => r(m.script('LOAD', get))));
    out.push([...new Set(shas.map((s) => JSON.stringify(s)))].map((s) => JSON.parse(s)));
    out.push(await r(c.set(k + 'g', 'val')));
    out.push(await r(c.evalsha(shas[0], 1, k + 'g')));
    out.push(await r(c.evalsha('0'.repeat(40), 1, k + 'g')));
    out.push(await r(c.eval("return redis.call('INCR', KEYS[1])", 1, k + 'g')));
    return out;
  }],
  ['scan', async () => {
    const keys = [];
    for (const m of masters()) {
      let cursor = '0';
      do {
        const [next, batch] = await m.scan(cursor, 'MATCH', P + '*', 'COUNT', 20);
        keys.push(...batch);
        cursor = next;
      } while (cursor !== '0');
    }
    return keys.sort();
  }],
  // The article's client, unchanged but for the port: a Redis.Cluster
  // with no options, and eval(tokenBucketScript, 1, key, capacity,
  // fillRate, cost, now). In standalone mode, a Redis with none either.
  ['article', async () => {
    const tokenBucketScript = plan.article.script;
    const key = P + 'article';
    const redis = plan.cluster ? new Redis.Cluster([{ host, port }]) : new Redis({ host, port });
    const out = [];
    try {
      for (const [capacity, fillRate, cost, now] of plan.article.calls) {
        out.push(await r(redis.eval(tokenBucketScript, 1, key, capacity, fillRate, cost, now)));
      }
    } finally {
      redis.disconnect();
    }
    return out;
  }],
];

if (plan.sluice) {
  steps.push(['throttle', async () => [
    await r(c.call('THROTTLE', P + 't1', '5', '1', '1s')),
    await r(c.call('THROTTLE', P + 't2', '5', '1', '1s', '0')),
    await r(c.call('THROTTLE', P + 't3', '5', '1', '1s', '6')),
    await r(c.call('THROTTLE', P + 't4', '1', '1', '1h')),
    await r(c.call('THROTTLE', P + 't4', '1', '1', '1h')),
    await r(c.call('THROTTLE.RESET', P + 't4')),
    await r(c.call('THROTTLE.RESET', P + 't4')),
    await r(c.call('THROTTLE', P + 't5', '0', '1', '1s')),
    await r(c.call('CL.THROTTLE', P + 't6', '15', '30', '60')),
  ]]);
  steps.push(['gcra', async () => [
    await r(c.call('GCRA', P + 'g1', '5', '10', '60')),
    await r(c.call('GCRA', P + 'g1', '5', '10', '60')),
    await r(c.call('GCRA', P + 'g2', '0', '1', '60')),
    await r(c.call('GCRA', P + 'g2', '0', '1', '60')),
    await r(c.call('GCRA', P + 'g3', '5', '10', '60', 'TOKENS', '7')),
    await r(c.call('GCRA', P + 'g4', '5', '10', '0')),
  ]]);
}

run(steps, () => c.quit());
