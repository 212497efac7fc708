// What the Node drivers share: the plan, the JSON lines they print and the
// harness's go-ahead for the blocking pop (proxy/compat_test.go).
'use strict';

const readline = require('node:readline');

// plan is the run's JSON plan (argv[2]): addr, cluster, sluice, prefix,
// protocol, only, tags.
const plan = JSON.parse(process.argv[2]);
const [host, portText] = plan.addr.split(':');
const port = Number(portText);

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// wants says whether the plan runs step.
function wants(step) {
  return !plan.only || plan.only.includes(step);
}

// plain turns a reply into JSON: Buffers to strings, Maps to objects,
// undefined to null.
function plain(v) {
  if (v === undefined || v === null) return null;
  if (Buffer.isBuffer(v)) return v.toString();
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (v instanceof Error) return errorOf(v);
  if (typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  if (typeof v === 'bigint') return v.toString();
  return v;
}

// errorOf is what a client reports for a failed command: its error's class
// and message, and for a refused transaction the errors of its commands.
function errorOf(e) {
  const out = { error: `${e.constructor && e.constructor.name}: ${e.message}` };
  if (e.previousErrors) out.previous = e.previousErrors.map((p) => p.message);
  if (e.replies) out.replies = plain(e.replies);
  if (e.errorIndexes) out.errorIndexes = e.errorIndexes;
  return out;
}

// r awaits p and returns its reply, or what it failed with.
async function r(p) {
  try {
    return plain(await p);
  } catch (e) {
    return errorOf(e);
  }
}

const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// awaitBlocked tells the harness that a blocking command was sent and
// waits until the harness has seen it block on a node.
async function awaitBlocked() {
  emit({ await: 'blocked' });
  const { value, done } = await lines.next();
  if (done || value !== 'go') throw new Error(`harness answered ${JSON.stringify(value)}, want "go"`);
}

// ttl rounds a positive TTL of the script's 100000 s expiries to 100 s, so
// that a slow run (a second passing between EXPIRE and TTL) reads the same;
// -1 and -2 stay exact.
function ttl(v) {
  return typeof v === 'number' && v > 0 ? Math.round(v / 100) * 100 : v;
}

// counted stands for PUBLISH's count of receivers while a subscriber
// listens: a cluster node counts only its own subscribers, and neither a
// cluster client nor sluice puts the publisher on the subscriber's node
// every time, so only the reply's kind (a count, not an error) compares.
function counted(v) {
  return Number.isInteger(v) && v >= 0 ? 'count' : v;
}

// within awaits p, or fails after ms: what the step waits for (a
// subscriber's messages) may never come.
function within(p, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

// run runs the steps in order, printing one line per step, and exits.
async function run(steps, close) {
  let code = 0;
  try {
    for (const [name, f] of steps) {
      if (!wants(name)) continue;
      emit({ step: name, result: await f() });
    }
  } catch (e) {
    emit({ fatal: String(e && e.stack || e) });
    code = 1;
  }
  try {
    await close();
  } catch (e) {
    // The results are out; a failing quit does not change them.
  }
  process.exit(code);
}

module.exports = { plan, host, port, emit, wants, plain, errorOf, r, awaitBlocked, ttl, counted, within, run };
