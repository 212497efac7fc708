// The compatibility script (proxy/compat_test.go) on node-redis: createClient
// when plan.cluster is false, createCluster when it is true.
'use strict';

const { createClient, createCluster } = require('redis');
const { plan, host, port, r, awaitBlocked, ttl, counted, within, run } = require('./common');

const P = plan.prefix;
const T = plan.tags;

async function connect() {
  // The RESP version is set, not left to node-redis (whose default became
  // RESP3 in version 6); a cluster's own connections take it from the
  // top-level option.
  const options = { RESP: plan.protocol, socket: { host, port, reconnectStrategy: false } };
  const c = plan.cluster
    ? createCluster({ rootNodes: [{ socket: { host, port } }], defaults: options, RESP: plan.protocol })
    : createClient(options);
  c.on('error', () => {}); // each command reports its own failure
  await c.connect();
  return c;
}

// send sends a command node-redis has no method for.
function send(c, args) {
  return plan.cluster ? c.sendCommand(args[1], false, args) : c.sendCommand(args);
}

async function main() {
  const c = await connect();

  // masters are the clients that see the whole key space: a cluster
  // client's primaries (one, sluice, through sluice), or the client itself.
  const masters = async () => (plan.cluster ? Promise.all(c.masters.map((m) => c.nodeClient(m))) : [c]);

  const steps = [
    ['strings', async () => [
      await r(c.set(P + 's', 'hello')),
      await r(c.get(P + 's')),
      await r(c.append(P + 's', ' world')),
      await r(c.get(P + 's')),
      await r(c.set(P + 'n', '10')),
      await r(c.incr(P + 'n')),
      await r(c.incrBy(P + 'n', 5)),
      await r(c.incr(P + 's')),
      await r(c.setEx(P + 'sx', 100000, 'v')),
      await r(c.get(P + 'sx')),
      await r(c.get(P + 'missing')),
    ]],
    ['hashes', async () => [
      await r(c.hSet(P + 'h', { f1: 'v1', f2: 'v2' })),
      await r(c.hGet(P + 'h', 'f1')),
      await r(c.hGetAll(P + 'h')),
      await r(c.hIncrBy(P + 'h', 'n', 3)),
      await r(c.hDel(P + 'h', 'f2')),
      await r(c.hExists(P + 'h', 'f2')),
      await r(c.hLen(P + 'h')),
      await r(c.hGetAll(P + 'h')),
    ]],
    ['lists', async () => [
      await r(c.rPush(P + 'l', ['a', 'b', 'c'])),
      await r(c.lPush(P + 'l', 'z')),
      await r(c.lRange(P + 'l', 0, -1)),
      await r(c.lPop(P + 'l')),
      await r(c.rPop(P + 'l')),
      await r(c.lLen(P + 'l')),
      await r(c.get(P + 'l')),
    ]],
    ['sets', async () => [
      await r(c.sAdd(P + 'set', ['x', 'y', 'z'])),
      await r(c.sAdd(P + 'set', 'x')),
      await r(c.sIsMember(P + 'set', 'y')),
      await r(c.sCard(P + 'set')),
      // A set's order is its node's hash table's: sorted.
      (await c.sMembers(P + 'set')).sort(),
      await r(c.sRem(P + 'set', 'y')),
      (await c.sMembers(P + 'set')).sort(),
    ]],
    ['zsets', async () => [
      await r(c.zAdd(P + 'z', [{ score: 1.5, value: 'one' }, { score: 2, value: 'two' }, { score: 3, value: 'three' }])),
      await r(c.zRangeWithScores(P + 'z', 0, -1)),
      await r(c.zScore(P + 'z', 'one')),
      await r(c.zIncrBy(P + 'z', 2.5, 'one')),
      await r(c.zRank(P + 'z', 'one')),
      await r(c.zRangeWithScores(P + 'z', 0, 1, { REV: true })),
    ]],
    ['streams', async () => [
      await r(c.xAdd(P + 'x', '1-1', { f: 'v' })),
      await r(c.xAdd(P + 'x', '2-1', { f: 'w', a: 'b' })),
      await r(c.xAdd(P + 'x', '1-0', { f: 'x' })),
      await r(c.xRange(P + 'x', '-', '+')),
      await r(c.xRange(P + 'x', '-', '+', { COUNT: 1 })),
      await r(c.xLen(P + 'x')),
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
        await r(c.mSet([k0, 'v0', k1, 'v1', k2, 'v2'])),
        await r(c.mGet([k0, k1, none, k2])),
        await r(c.del([k0, k1, k2, none])),
        await r(c.mGet([k0, k1])),
      ];
    }],
    ['pipeline', async () => {
      // node-redis pipelines the commands sent in one tick; execAsPipeline
      // would report the first error alone.
      const k = `${P}{${T.node}}p`;
      return Promise.all([
        c.set(k + 'a', '1'), c.incr(k + 'a'), c.get(k + 'a'),
        c.rPush(k + 'l', 'x'), c.incr(k + 'l'), c.lRange(k + 'l', 0, -1),
      ].map(r));
    }],
    // The transactions delete their keys, one by one, so that what they
    // wrote (client libraries differ there) does not reach the scan.
    ['tx', async () => {
      const k = `${P}{${T.node}}`;
      return [
        await r(c.multi()
          .set(k + 't', '1').incr(k + 't').rPush(k + 'tl', 'x').incr(k + 'tl').get(k + 't')
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
      const out = [await r(c.blPop(k + 'empty', 0.01))];
      const blocker = await connect();
      const popped = r(blocker.blPop(k + 'q', 10));
      await awaitBlocked();
      out.push(await r(c.rPush(k + 'q', 'item')));
      out.push(await popped);
      blocker.destroy();
      return out;
    }],
    // A second client subscribes (createCluster's on a node of its
    // choosing); each (un)subscribe resolves once the node confirmed it.
    // node-redis reports no subscription counts, and gives a pattern's
    // listener the message and channel only.
    ['pubsub', async () => {
      const ch = P + 'ps:ch';
      const pat = P + 'ps:*';
      const sub = await connect();
      const got = [];
      let both;
      const arrived = new Promise((resolve) => { both = resolve; });
      const add = (m) => {
        got.push(m);
        if (got.length === 2) both();
      };
      const out = {};
      out.subscribe = await r(sub.subscribe(ch, (message, channel) => add({ channel, message })));
      out.pSubscribe = await r(sub.pSubscribe(pat, (message, channel) => add({ pattern: pat, channel, message })));
      out.publish = counted(await r(c.publish(ch, 'hello')));
      out.messages = await r(within(arrived.then(() => got), 5000, 'message and pmessage'));
      out.unsubscribe = await r(sub.unsubscribe(ch));
      out.pUnsubscribe = await r(sub.pUnsubscribe(pat));
      out.publishAfter = await r(c.publish(ch, 'again')); // nobody listens: 0 on every node
      sub.destroy();
      return out;
    }],
    ['scripts', async () => {
      const k = `${P}{sc}`;
      const get = "return redis.call('GET', KEYS[1])";
      const out = [await r(c.eval("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}", { keys: [k + 'n'], arguments: ['x'] }))];
      // A script is loaded on every primary a cluster client knows.
      const shas = await Promise.all((await masters()).map((m) => r(m.scriptLoad(get))));
      out.push([...new Set(shas.map((s) => JSON.stringify(s)))].map((s) => JSON.parse(s)));
      out.push(await r(c.set(k + 'g', 'val')));
      out.push(await r(c.evalSha(shas[0], { keys: [k + 'g'] })));
      out.push(await r(c.evalSha('0'.repeat(40), { keys: [k + 'g'] })));
      out.push(await r(c.eval("return redis.call('INCR', KEYS[1])", { keys: [k + 'g'] })));
      return out;
    }],
    ['scan', async () => {
      const keys = [];
      for (const m of await masters()) {
        let cursor = '0';
        do {
          const reply = await m.scan(cursor, { MATCH: P + '*', COUNT: 20 });
          keys.push(...reply.keys);
          cursor = String(reply.cursor);
        } while (cursor !== '0');
      }
      return keys.sort();
    }],
    ['article', async () => {
      const out = [];
      for (const args of plan.article.calls) {
        out.push(await r(c.eval(plan.article.script, { keys: [P + 'article'], arguments: args })));
      }
      return out;
    }],
  ];

  if (plan.sluice) {
    steps.push(['throttle', async () => [
      await r(send(c, ['THROTTLE', P + 't1', '5', '1', '1s'])),
      await r(send(c, ['THROTTLE', P + 't2', '5', '1', '1s', '0'])),
      await r(send(c, ['THROTTLE', P + 't3', '5', '1', '1s', '6'])),
      await r(send(c, ['THROTTLE', P + 't4', '1', '1', '1h'])),
      await r(send(c, ['THROTTLE', P + 't4', '1', '1', '1h'])),
      await r(send(c, ['THROTTLE.RESET', P + 't4'])),
      await r(send(c, ['THROTTLE.RESET', P + 't4'])),
      await r(send(c, ['THROTTLE', P + 't5', '0', '1', '1s'])),
      await r(send(c, ['CL.THROTTLE', P + 't6', '15', '30', '60'])),
    ]]);
    steps.push(['gcra', async () => [
      await r(send(c, ['GCRA', P + 'g1', '5', '10', '60'])),
      await r(send(c, ['GCRA', P + 'g1', '5', '10', '60'])),
      await r(send(c, ['GCRA', P + 'g2', '0', '1', '60'])),
      await r(send(c, ['GCRA', P + 'g2', '0', '1', '60'])),
      await r(send(c, ['GCRA', P + 'g3', '5', '10', '60', 'TOKENS', '7'])),
      await r(send(c, ['GCRA', P + 'g4', '5', '10', '0'])),
    ]]);
  }

  await run(steps, () => c.close());
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ fatal: String(e && e.stack || e) }) + '\n');
  process.exit(1);
});
