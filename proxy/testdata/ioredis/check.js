// check.js runs ioredis' usual patterns against a Redis (or a hotspot-proxy
// in front of one) and checks the answers itself. TestClientIoredis
// (proxy/extclients_test.go) starts it.
//
//   node check.js patterns HOST PORT PREFIX
//   node check.js restart HOST PORT PREFIX
//
// It prints one line per check, "ok NAME" or "FAIL NAME: what", and exits 0
// only if every check passed. In restart mode it asks the test to act on
// Redis with a line "@pause", "@resume", "@stop" or "@start" on stdout and
// waits for the test's answer line on stdin, "done pause" and so on, before
// it goes on.
'use strict';

const Redis = require('ioredis');
const readline = require('readline');

const [mode, host, portArg, prefixArg] = process.argv.slice(2);
if (!['patterns', 'restart'].includes(mode) || !prefixArg) {
  console.error('usage: node check.js patterns|restart HOST PORT PREFIX');
  process.exit(2);
}
const port = Number(portArg);
const prefix = prefixArg + ':';
let failed = 0;
const clients = [];

class CheckError extends Error {}

function expect(ok, what) {
  if (!ok) throw new CheckError(what);
}

function expectEq(want, got, what) {
  const w = JSON.stringify(want);
  const g = JSON.stringify(got);
  if (w !== g) throw new CheckError(`${what}: got ${g}, want ${w}`);
}

async function check(name, fn) {
  const start = Date.now();
  try {
    await within(40000, fn(), name);
    console.log(`ok ${name} (${Date.now() - start} ms)`);
  } catch (e) {
    failed++;
    const what = e instanceof CheckError ? e.message : String(e && e.stack ? e.stack : e);
    console.log(`FAIL ${name}: ${what.replace(/\n\s*/g, ' | ')}`);
  }
}

// client opens an ioredis client whose errors are not thrown as events
// (ioredis reports them to the commands that fail, too).
function client(opts = {}) {
  const r = new Redis({ host, port, maxRetriesPerRequest: 3, connectTimeout: 5000, ...opts });
  r.on('error', () => {});
  clients.push(r);
  return r;
}

// rejects expects p to fail, and returns its error.
async function rejects(p, what) {
  try {
    const v = await p;
    throw new CheckError(`${what}: no error, got ${JSON.stringify(v)}`);
  } catch (e) {
    if (e instanceof CheckError) throw e;
    return e;
  }
}

function within(ms, p, what) {
  let timer;
  return Promise.race([
    p,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new CheckError(`${what}: nothing within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function waitEvent(queue, ms, what) {
  return within(ms, new Promise((resolve) => {
    if (queue.items.length) return resolve(queue.items.shift());
    queue.waiter = () => resolve(queue.items.shift());
  }), what);
}

function eventQueue() {
  const q = { items: [], waiter: null };
  q.push = (x) => {
    q.items.push(x);
    if (q.waiter) {
      const w = q.waiter;
      q.waiter = null;
      w();
    }
  };
  return q;
}

async function patterns() {
  const r = client();

  await check('pooled GET/SET from 8 connections and an auto-pipelining one', async () => {
    const pool = Array.from({ length: 8 }, () => client());
    await Promise.all(pool.map(async (c, w) => {
      for (let i = 0; i < 200; i++) {
        const k = `${prefix}pool:${w}:${i % 20}`;
        const v = `v${w}-${i}`;
        expectEq('OK', await c.set(k, v), `SET ${k}`);
        expectEq(v, await c.get(k), `GET ${k}`);
      }
    }));
    const auto = client({ enableAutoPipelining: true });
    const sets = [];
    for (let i = 0; i < 500; i++) sets.push(auto.set(`${prefix}auto:${i}`, `a${i}`));
    expect((await Promise.all(sets)).every((x) => x === 'OK'), 'auto-pipelined SETs');
    const gets = [];
    for (let i = 0; i < 500; i++) gets.push(auto.get(`${prefix}auto:${i}`));
    (await Promise.all(gets)).forEach((v, i) => expectEq(`a${i}`, v, `auto-pipelined GET ${i}`));
    expectEq(null, await r.get(`${prefix}pool:missing`), 'GET of a missing key');
    expectEq(2, await r.hset(`${prefix}h`, { a: '1', b: '2' }), 'HSET');
    expectEq({ a: '1', b: '2' }, await r.hgetall(`${prefix}h`), 'HGETALL');
    const list = await r.client('LIST');
    expect(typeof list === 'string' && list.length > 0, 'CLIENT LIST');
  });

  await check('pipeline of 300 commands with an error inside', async () => {
    const p = r.pipeline();
    for (let i = 0; i < 100; i++) {
      p.set(`${prefix}pipe:${i}`, `val${i}`).get(`${prefix}pipe:${i}`).incr(`${prefix}pipe:n`);
    }
    p.lpush(`${prefix}pipe:0`, 'x').get(`${prefix}pipe:99`);
    const res = await p.exec();
    expectEq(302, res.length, 'pipeline replies');
    for (let i = 0; i < 100; i++) {
      expectEq([null, 'OK'], res[3 * i], `pipelined SET ${i}`);
      expectEq([null, `val${i}`], res[3 * i + 1], `pipelined GET ${i}`);
      expectEq([null, i + 1], res[3 * i + 2], `pipelined INCR ${i}`);
    }
    const [err] = res[300];
    expect(err && err.message.startsWith('WRONGTYPE'), `LPUSH on a string: ${err}`);
    expectEq([null, 'val99'], res[301], 'GET after the error');
  });

  await check('MULTI/EXEC, WATCH conflict, DISCARD, EXECABORT', async () => {
    const other = client();
    const m = r.multi();
    for (let i = 0; i < 10; i++) m.incr(`${prefix}tx:n`);
    m.set(`${prefix}tx:s`, 'done');
    const res = await m.exec();
    expectEq(11, res.length, 'EXEC replies');
    expectEq([null, 10], res[9], '10th INCR in EXEC');
    expectEq([null, 'OK'], res[10], 'SET in EXEC');

    expectEq('OK', await r.watch(`${prefix}tx:w`), 'WATCH');
    await other.set(`${prefix}tx:w`, 'other');
    expectEq(null, await r.multi().set(`${prefix}tx:w`, 'mine').exec(), 'EXEC after a WATCHed key changed');
    expectEq('other', await other.get(`${prefix}tx:w`), 'the WATCHed key');

    // MULTI as separate commands, not one pipeline.
    expectEq('OK', await r.multi({ pipeline: false }), 'MULTI');
    expectEq('QUEUED', await r.set(`${prefix}tx:q`, 'x'), 'SET in MULTI');
    expectEq([[null, 'OK']], await r.exec(), 'EXEC');
    expectEq('OK', await r.multi({ pipeline: false }), 'MULTI');
    expectEq('QUEUED', await r.set(`${prefix}tx:d`, 'never'), 'SET in MULTI');
    expectEq('OK', await r.discard(), 'DISCARD');
    expectEq(0, await r.exists(`${prefix}tx:d`), 'key SET in a discarded MULTI exists');

    const e = await rejects(r.multi().set(`${prefix}tx:a`, 'x').call('SET', `${prefix}tx:a`).exec(), 'EXEC after a bad command');
    expect(e.message.startsWith('EXECABORT'), `EXEC after a bad command: ${e.message}`);
    expectEq('PONG', await r.ping(), 'PING after EXECABORT');
  });

  await check('Pub/Sub: SUBSCRIBE, PSUBSCRIBE, PUBLISH from another connection, UNSUBSCRIBE', async () => {
    const sub = client();
    const pub = client();
    const got = eventQueue();
    sub.on('message', (ch, msg) => got.push(`${ch}=${msg}`));
    sub.on('pmessage', (pat, ch, msg) => got.push(`${pat}:${ch}=${msg}`));
    expectEq(1, await sub.subscribe(`${prefix}ch`), 'SUBSCRIBE count');
    expectEq(1, await pub.publish(`${prefix}ch`, 'hello'), 'PUBLISH receivers');
    expectEq(`${prefix}ch=hello`, await waitEvent(got, 10000, 'message'), 'message');
    expectEq(2, await sub.psubscribe(`${prefix}pat:*`), 'PSUBSCRIBE count');
    expectEq(1, await pub.publish(`${prefix}pat:x`, 'p1'), 'PUBLISH to the pattern');
    expectEq(`${prefix}pat:*:${prefix}pat:x=p1`, await waitEvent(got, 10000, 'pattern message'), 'pattern message');
    // Named: a bare UNSUBSCRIBE while patterns remain leaves ioredis 5's
    // promise pending (seen against Redis directly).
    expectEq(1, await sub.unsubscribe(`${prefix}ch`), 'UNSUBSCRIBE count');
    expectEq(0, await sub.punsubscribe(`${prefix}pat:*`), 'PUNSUBSCRIBE count');
    expectEq(0, await pub.publish(`${prefix}ch`, 'after'), 'PUBLISH receivers after UNSUBSCRIBE');
    expectEq('PONG', await sub.ping(), 'PING on the connection that was subscribed');
    expectEq('OK', await sub.set(`${prefix}after-sub`, 'x'), 'SET on the connection that was subscribed');
    expectEq(0, got.items.length, 'messages after UNSUBSCRIBE');
  });

  await check('Lua EVAL, SCRIPT LOAD, EVALSHA, NOSCRIPT, defineCommand', async () => {
    // The prefix makes the script new to Redis, so defineCommand's first
    // EVALSHA gets NOSCRIPT and falls back to EVAL.
    const script = `-- ${prefix}\nredis.call('SET', KEYS[1], ARGV[1]); return {redis.call('GET', KEYS[1]), #ARGV}`;
    expectEq(['one', 1], await r.eval(script, 1, `${prefix}lua`, 'one'), 'EVAL');
    const sha = await r.script('LOAD', script);
    expectEq(40, sha.length, 'SCRIPT LOAD sha');
    expectEq([1], await r.script('EXISTS', sha), 'SCRIPT EXISTS');
    expectEq(['two', 2], await r.evalsha(sha, 1, `${prefix}lua`, 'two', 'extra'), 'EVALSHA');
    const e = await rejects(r.evalsha('0000000000000000000000000000000000000000', 0), 'EVALSHA of an unknown script');
    expect(e.message.startsWith('NOSCRIPT'), `EVALSHA unknown: ${e.message}`);
    const e2 = await rejects(r.eval("return redis.call('LPUSH', KEYS[1], 'x')", 1, `${prefix}lua`), "a script's WRONGTYPE");
    expect(e2.message.includes('WRONGTYPE'), `a script's WRONGTYPE: ${e2.message}`);
    r.defineCommand('checkSet', { numberOfKeys: 1, lua: `-- ${prefix} defined\n${script}` });
    expectEq(['three', 1], await r.checkSet(`${prefix}lua`, 'three'), 'defineCommand (EVALSHA, NOSCRIPT, EVAL)');
    expectEq(['four', 1], await r.checkSet(`${prefix}lua`, 'four'), 'defineCommand (EVALSHA)');
    expectEq('four', await r.get(`${prefix}lua`), 'GET after the scripts');
  });
}

// The test's answers, line by line.
const answers = eventQueue();
readline.createInterface({ input: process.stdin }).on('line', (l) => answers.push(l.trim()));

async function ask(action) {
  console.log(`@${action}`);
  expectEq(`done ${action}`, await waitEvent(answers, 30000, `the test's answer to @${action}`), `the test's answer to @${action}`);
}

async function failsWithin(ms, fn, what) {
  const start = Date.now();
  const e = await rejects(within(ms + 1000, fn(), what), what);
  const took = Date.now() - start;
  if (e instanceof CheckError) throw e;
  expect(took <= ms, `${what} failed after ${took} ms, want within ${ms} ms: ${e.message}`);
  console.log(`   ${what}: ${e.message} after ${took} ms`);
  return e;
}

async function worksWithin(ms, fn, what) {
  const start = Date.now();
  for (let tries = 1; ; tries++) {
    try {
      await within(ms, fn(), what);
      console.log(`   ${what}: works after ${Date.now() - start} ms, ${tries} tries`);
      return;
    } catch (e) {
      if (e instanceof CheckError && !e.message.endsWith(`nothing within ${ms} ms`)) throw e;
      if (Date.now() - start > ms) throw new CheckError(`${what}: still failing after ${ms} ms: ${e.message}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }
}

async function restart() {
  const k = `${prefix}restart`;
  const opts = { commandTimeout: 1000, connectTimeout: 1000, maxRetriesPerRequest: 1, retryStrategy: () => 100 };
  const r = client(opts);
  await check('before the outage', async () => {
    expectEq('OK', await r.set(k, 'before'), 'SET');
    expectEq('before', await r.get(k), 'GET');
  });
  await check('client-side timeout while Redis is frozen, then the same client works', async () => {
    await ask('pause');
    try {
      const e = await failsWithin(4000, () => r.get(k), 'GET while Redis is frozen');
      expect(/timed out/i.test(e.message), `want a command timeout, got ${e.message}`);
    } finally {
      await ask('resume');
    }
    await worksWithin(10000, async () => expectEq('before', await r.get(k), 'GET after the freeze'), 'GET after the freeze');
  });
  await check('an error while Redis is down, then reconnect once it is back', async () => {
    await ask('stop');
    try {
      await failsWithin(4000, () => r.get(k), 'GET while Redis is down');
      const fresh = client(opts);
      await failsWithin(4000, () => fresh.set(k, 'down'), 'SET on a new client while Redis is down');
    } finally {
      await ask('start');
    }
    await worksWithin(10000, async () => {
      expectEq(null, await r.get(k), 'GET after the restart (the restarted Redis is empty)');
      expectEq('OK', await r.set(k, 'after'), 'SET after the restart');
      expectEq('after', await r.get(k), 'GET after the restart');
    }, 'GET/SET after the restart');
  });
}

async function main() {
  const limit = setTimeout(() => {
    console.log('FAIL: the checks did not end within 100 s');
    process.exit(1);
  }, 100000);
  await (mode === 'patterns' ? patterns() : restart());
  clearTimeout(limit);
  for (const c of clients) c.disconnect();
  console.log(failed === 0 ? 'PASS' : `FAIL: ${failed} checks failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
