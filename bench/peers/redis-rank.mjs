// redis-rank.mjs -- load generator for the npm leaderboard library
// `redis-rank` (2.x, on ioredis 5), the "redis-rank" peer of rank-bench in
// bench/compare.sh.
//
// What it measures: the throughput and the per-operation latency (from the
// call into the library to the settling of its promise, in microseconds) of
// one redis-rank operation at a time, against a Redis server:
//   update  lb.updateOne(member, score) on a Leaderboard created with
//           sortPolicy "high-to-low" and updatePolicy "best" (the library
//           runs its own Lua script, `zrevbest`, through EVALSHA)
//   rank    lb.find(member)   (the library's `zrevfind` script: score + rank)
//   top     lb.top(N)         (ZREVRANGE 0 N-1 WITHSCORES)
// Members are "m<i>", i uniform in [0, --members); scores are integers
// uniform in [0, 1e9). Random numbers come from mulberry32 seeded by --seed,
// so runs are repeatable.
//
// Load model: ONE ioredis connection with --inflight operations kept in
// flight (closed loop: each completion starts the next operation at once).
// That is how the library is meant to be used -- one shared client per
// process, many concurrent promises, replies pipelined on the socket -- and
// it differs from rank-bench, which has one blocking connection per thread.
// ioredis is used with its defaults (no enableAutoPipelining), as a user
// would.
//
// --preload empties the leaderboard key, then fills it with every member
// through the library's batch update (lb.update(entries, "replace"), one
// pipeline of ~1000 entries per call, several calls in flight), with a
// progress bar on stderr.
//
// Output: with --json exactly one JSON object on stdout, the same shape as
// `rank-bench --json`:
//   {"target":"redis-rank","connections":K,"duration_s":S,"ops":{"<op>":
//    {"count":N,"errors":N,"ops_per_sec":X,"p50_us":X,"p99_us":X,
//     "p999_us":X,"max_us":X}}}
// count includes failed operations (they are timed too), duration_s is the
// measured time, and percentiles are the sample at index floor(q * count) of
// all recorded latencies, sorted, as in bench/histogram.c. Without --json, a
// short table. Progress and diagnostics go to stderr.
//
// Exit status: 0 on success (even with some errors), 1 if Redis is
// unreachable, stops answering, or every measured operation failed (or none
// completed), 2 on a usage error.
//
// Run it through the wrapper, which installs the pinned packages on first use:
//   sh bench/peers/redis-rank.sh --redis 127.0.0.1:6379 --members 1000000 --preload
//   sh bench/peers/redis-rank.sh --redis 127.0.0.1:6379 --members 1000000 \
//       --op rank --inflight 64 --warmup 2 --duration 10 --json
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { Leaderboard } from 'redis-rank';

const USAGE = `usage: redis-rank.sh [options]
  --redis HOST:PORT  Redis server (default 127.0.0.1:6379)
  --key NAME         leaderboard key (default bench:redis-rank)
  --members N        member ids m0 .. m<N-1> (default 1000000)
  --preload          empty the key, then fill it with all N members, random scores
  --op OP            update | rank | top: the operation to measure
  --top-n N          entries per top (default 10)
  --inflight K       operations in flight on the one connection (default 64)
  --warmup S         seconds run but not recorded (default 2)
  --duration S       seconds recorded (default 10)
  --seed N           PRNG seed (default 1)
  --json             print one JSON object on stdout
  --cpu NAME=PID,..  also report the CPU per operation of these processes
                     over the measured interval (this one's always, as client)
Give --preload, --op, or both (the preload runs first).`;

const SCORE_RANGE = 1e9;
const PRELOAD_BATCH = 1000; // entries per lb.update() call (one pipeline)
const PRELOAD_PARALLEL = 8; // lb.update() calls in flight during the preload
const STALL_MS = 30000;     // give up when Redis answers nothing for this long
const DRAIN_MS = 5000;      // at the end, wait this long for in-flight operations

function fail(msg, code = 1) {
  process.stderr.write(`redis-rank peer: ${msg}\n`);
  process.exit(code);
}

function usageError(msg) {
  process.stderr.write(`redis-rank peer: ${msg}\n${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const o = { host: '127.0.0.1', port: 6379, key: 'bench:redis-rank', members: 1000000,
              preload: false, op: null, topN: 10, inflight: 64, warmup: 2, duration: 10,
              seed: 1, json: false, cpu: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usageError(`${a} needs a value`);
      return argv[++i];
    };
    // Whole numbers >= min, and non-negative seconds (fractions allowed).
    const int = (min) => {
      const v = value();
      const n = Number(v);
      if (!/^-?\d+$/.test(v) || !Number.isSafeInteger(n) || n < min) {
        usageError(`${a}: expected a whole number >= ${min}, got "${v}"`);
      }
      return n;
    };
    const seconds = (positive) => {
      const v = value();
      const n = Number(v);
      if (v.trim() === '' || !Number.isFinite(n) || n < 0 || (positive && n === 0)) {
        usageError(`${a}: expected a ${positive ? 'positive' : 'non-negative'} number of seconds, got "${v}"`);
      }
      return n;
    };
    switch (a) {
      case '--redis': {
        const v = value();
        const colon = v.lastIndexOf(':');
        const port = Number(v.slice(colon + 1));
        if (colon <= 0 || !/^\d+$/.test(v.slice(colon + 1)) || port < 1 || port > 65535) {
          usageError(`--redis: expected HOST:PORT, got "${v}"`);
        }
        o.host = v.slice(0, colon).replace(/^\[(.*)\]$/, '$1'); // [::1]:6379 too
        o.port = port;
        break;
      }
      case '--key': o.key = value(); break;
      case '--members': o.members = int(1); break;
      case '--preload': o.preload = true; break;
      case '--op': o.op = value(); break;
      case '--top-n': o.topN = int(1); break;
      case '--inflight': o.inflight = int(1); break;
      case '--warmup': o.warmup = seconds(false); break;
      case '--duration': o.duration = seconds(true); break;
      case '--seed': o.seed = int(-(2 ** 31)); break;
      case '--json': o.json = true; break;
      case '--cpu':
        for (const item of value().split(',')) {
          const [name, pid] = item.split('=');
          if (!name || !/^\d+$/.test(pid || '')) usageError(`--cpu: expected NAME=PID, got "${item}"`);
          o.cpu.push({ name, pid: Number(pid) });
        }
        break;
      case '-h': case '--help': process.stdout.write(`${USAGE}\n`); process.exit(0); break;
      default: usageError(`unknown argument "${a}"`);
    }
  }
  if (o.op !== null && !['update', 'rank', 'top'].includes(o.op)) {
    usageError(`--op: expected update, rank or top, got "${o.op}"`);
  }
  if (!o.preload && o.op === null) usageError('nothing to do: give --preload and/or --op');
  return o;
}

// mulberry32: a tiny deterministic PRNG, uniform in [0, 1).
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Watchdog: Redis must complete something at least every STALL_MS while a
// phase runs, or the process ends. Its timer is unref'd, so it never keeps
// the process alive by itself; it only fires when a hung socket does.
const watchdog = {
  last: 0,
  timer: null,
  start(what) {
    this.last = Date.now();
    this.timer = setInterval(() => {
      if (Date.now() - this.last > STALL_MS) {
        fail(`${what}: no reply from Redis for ${STALL_MS / 1000} s, giving up`);
      }
    }, 1000);
    this.timer.unref();
  },
  alive() { this.last = Date.now(); },
  stop() { clearInterval(this.timer); },
};

// Resolves after ms, or at once when cancel() is called.
function sleep(ms) {
  let cancel;
  const p = new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    cancel = () => { clearTimeout(t); resolve(); };
  });
  p.cancel = cancel;
  return p;
}

// A progress bar on stderr: redrawn in place on a terminal (at most 10 times
// a second), one line per 10% otherwise (logs).
function progressBar(total) {
  const tty = process.stderr.isTTY;
  const started = process.hrtime.bigint();
  let lastDraw = 0n, lastDecile = -1;
  return (done) => {
    const now = process.hrtime.bigint();
    const finished = done >= total;
    const decile = Math.floor((10 * done) / total);
    if (tty ? !finished && now - lastDraw < 100000000n : decile === lastDecile) return;
    lastDraw = now;
    lastDecile = decile;
    const secs = Math.max(Number(now - started) / 1e9, 1e-3);
    const rate = done / secs;
    const width = 30, filled = Math.floor((width * done) / total);
    const eta = finished ? `${secs.toFixed(1)} s` : `ETA ${Math.ceil((total - done) / Math.max(rate, 1))} s`;
    const line = `preload [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ` +
      `${String(Math.floor((100 * done) / total)).padStart(3)}%  ${done}/${total}  ` +
      `${Math.round(rate)} members/s  ${eta}`;
    process.stderr.write(tty ? `\r${line}${finished ? '\n' : ''}` : `${line}\n`);
  };
}

// Empties the key, then sets every member to a random score with the
// library's batch update: PRELOAD_PARALLEL workers, each with one
// lb.update() of PRELOAD_BATCH entries in flight. "replace" rather than the
// board's "best", so a preload always leaves the same scores for a seed.
async function preload(lb, o) {
  const random = mulberry32(o.seed);
  const draw = progressBar(o.members);
  await lb.clear();
  let next = 0, done = 0;
  const worker = async () => {
    while (next < o.members) {
      const first = next;
      next = Math.min(next + PRELOAD_BATCH, o.members);
      const entries = [];
      for (let i = first; i < next; i++) {
        entries.push({ id: `m${i}`, value: Math.floor(random() * SCORE_RANGE) });
      }
      await lb.update(entries, 'replace'); // a failed batch ends the preload
      watchdog.alive();
      done += entries.length;
      draw(done);
    }
  };
  watchdog.start('preload');
  try {
    await Promise.all(Array.from({ length: Math.min(PRELOAD_PARALLEL, Math.ceil(o.members / PRELOAD_BATCH)) }, worker));
  } finally {
    watchdog.stop();
  }
}

// CPU time of a process in ns: the sum of its threads' schedstat, as
// rank-bench's --cpu reads it (bench/cpu.c).
function processNs(pid) {
  let sum = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      sum += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch { /* the thread ended */ }
  }
  return sum;
}

function cpuNow(o) {
  const self = process.cpuUsage();
  return [(self.user + self.system) * 1000, ...o.cpu.map((p) => processNs(p.pid))];
}

// Runs o.op for o.warmup + o.duration seconds with o.inflight operations in
// flight, and returns the latencies recorded during the last o.duration.
async function measure(lb, o) {
  // Its own stream, so the operations do not depend on whether --preload ran.
  const random = mulberry32(o.seed ^ 0x5bd1e995);
  const member = () => `m${Math.floor(random() * o.members)}`;
  const call = {
    update: () => lb.updateOne(member(), Math.floor(random() * SCORE_RANGE)),
    rank: () => lb.find(member()),
    top: () => lb.top(o.topN),
  }[o.op];

  let samples = new Float64Array(1 << 20); // latencies in us; doubled when full
  let count = 0, errors = 0, firstError = null;
  let recording = false, stop = false;

  // One lane = one operation in flight: it starts the next as soon as the
  // previous one settles.
  const lane = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      let ok = true;
      try {
        await call();
      } catch (e) {
        ok = false;
        if (recording && firstError === null) firstError = e.message;
      }
      const us = Number(process.hrtime.bigint() - t0) / 1000;
      watchdog.alive();
      if (recording) {
        if (count === samples.length) {
          const bigger = new Float64Array(samples.length * 2);
          bigger.set(samples);
          samples = bigger;
        }
        samples[count++] = us;
        if (!ok) errors++;
      }
      // A failure can be immediate (e.g. "Connection is closed"): yield to
      // the event loop, or a chain of rejected promises would starve the
      // timers that end the run.
      if (!ok) await new Promise((resolve) => setImmediate(resolve));
    }
  };

  watchdog.start(`${o.op}`);
  const lanes = Promise.all(Array.from({ length: o.inflight }, lane));
  await sleep(o.warmup * 1000);
  recording = true;
  const t0 = process.hrtime.bigint();
  const cpu0 = cpuNow(o);
  await sleep(o.duration * 1000);
  recording = false;
  const cpu1 = cpuNow(o);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  stop = true;
  // Let the operations in flight finish, within a bound (disconnecting
  // afterwards rejects any that are left).
  const grace = sleep(DRAIN_MS);
  await Promise.race([lanes, grace]);
  grace.cancel();
  watchdog.stop();

  const sorted = samples.subarray(0, count).sort(); // typed arrays sort numerically
  const q = (p) => (count === 0 ? 0 : sorted[Math.min(count - 1, Math.floor(p * count))]);
  const names = ['client', ...o.cpu.map((p) => p.name)];
  const cpu = Object.fromEntries(names.map((name, i) =>
    [name, count === 0 ? -1 : Math.round((cpu1[i] - cpu0[i]) / 10 / count) / 100]));
  return { count, errors, firstError, seconds, p50: q(0.5), p99: q(0.99), p999: q(0.999),
           max: count === 0 ? 0 : sorted[count - 1], cpu };
}

function report(o, r) {
  const round1 = (x) => Math.round(x * 10) / 10;
  const stats = { count: r.count, errors: r.errors, ops_per_sec: round1(r.count / r.seconds),
                  p50_us: round1(r.p50), p99_us: round1(r.p99), p999_us: round1(r.p999),
                  max_us: round1(r.max) };
  if (o.json) {
    process.stdout.write(`${JSON.stringify({ target: 'redis-rank', connections: o.inflight,
      duration_s: Math.round(r.seconds * 1000) / 1000, ops: { [o.op]: stats },
      cpu_us_per_op: r.cpu })}\n`);
  } else {
    const row = (cells) => cells.map((c, i) => (i === 0 ? String(c).padEnd(8) : String(c).padStart(10))).join(' ');
    process.stdout.write(`target redis-rank  in flight ${o.inflight} (one connection)  measured ${r.seconds.toFixed(1)} s\n` +
      `${row(['op', 'count', 'ops/s', 'p50 us', 'p99 us', 'p99.9 us', 'max us', 'errors'])}\n` +
      `${row([o.op, r.count, Math.round(stats.ops_per_sec), Math.round(r.p50), Math.round(r.p99),
              Math.round(r.p999), Math.round(r.max), r.errors])}\n` +
      `CPU per op: ${Object.entries(r.cpu).map(([n, us]) => `${n} ${us} us`).join(', ')}\n`);
  }
  if (r.errors > 0) {
    process.stderr.write(`redis-rank peer: ${r.errors} of ${r.count} operations failed; first error: ${r.firstError}\n`);
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let lastError = null;
  const client = new Redis({
    host: o.host,
    port: o.port,
    lazyConnect: true,      // connect() below reports an unreachable server
    maxRetriesPerRequest: 1, // fail commands quickly if the connection drops
  });
  // Keep connection errors for our messages (and out of ioredis's
  // "Unhandled error event" output).
  client.on('error', (e) => { lastError = e; });
  try {
    await client.connect();
  } catch (e) {
    client.disconnect();
    fail(`cannot connect to Redis at ${o.host}:${o.port}: ${(lastError ?? e).message}`);
  }
  const lb = new Leaderboard(client, o.key, { sortPolicy: 'high-to-low', updatePolicy: 'best' });
  try {
    if (o.preload) await preload(lb, o);
    if (o.op === null) return;
    // Reads of absent members or an empty board are cheaper: say so.
    const size = await lb.count().catch((e) => {
      process.stderr.write(`redis-rank peer: warning: cannot count ${o.key}: ${e.message}\n`);
      return o.members;
    });
    if (o.op !== 'update' && size < o.members) {
      process.stderr.write(`redis-rank peer: warning: ${o.key} holds ${size} entries, fewer than ` +
                           `--members ${o.members} (use --preload)\n`);
    }
    const r = await measure(lb, o);
    report(o, r);
    if (r.errors === r.count) {
      process.stderr.write(`redis-rank peer: ${r.count === 0 ? 'no operation completed' : 'every operation failed'}\n`);
      process.exitCode = 1;
    }
  } finally {
    client.disconnect();
  }
}

// Redis's own errors (e.g. a failed preload batch) need no stack trace.
main().catch((e) => fail(e?.name === 'ReplyError' ? e.message : (e?.stack ?? String(e))));
