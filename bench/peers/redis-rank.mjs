// redis-rank.mjs -- the redis-rank leaderboard library (npm) under the same
// load as rank-bench puts on rankd, for bench/compare.sh.
//
// One ioredis connection (how the library is used) with --inflight
// operations kept in flight: each completion starts the next. Operations:
//   update  lb.updateOne(member, score) on a board with updatePolicy "best"
//   rank    lb.find(member)
//   top     lb.top(N)
// Members are "m<i>", i uniform in [0, --members); scores uniform in
// [0, 1e9). Prints the same JSON as rank-bench --json.
//
// Usage: sh bench/peers/redis-rank.sh --redis 127.0.0.1:6379 --members 1000000
//          [--preload] [--op update|rank|top --inflight 64 --duration 10
//          --warmup 2 --top-n 10 --seed 1 --json]
import { Redis } from 'ioredis';
import { Leaderboard } from 'redis-rank';

function parseArgs(argv) {
  const o = { redis: '127.0.0.1:6379', key: 'bench:redis-rank', members: 1000000,
              preload: false, op: null, inflight: 64, duration: 10, warmup: 2,
              topN: 10, seed: 1, json: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) fail(`${a} needs a value`); return argv[++i]; };
    switch (a) {
      case '--redis': o.redis = next(); break;
      case '--key': o.key = next(); break;
      case '--members': o.members = Number(next()); break;
      case '--preload': o.preload = true; break;
      case '--op': o.op = next(); break;
      case '--inflight': o.inflight = Number(next()); break;
      case '--duration': o.duration = Number(next()); break;
      case '--warmup': o.warmup = Number(next()); break;
      case '--top-n': o.topN = Number(next()); break;
      case '--seed': o.seed = Number(next()); break;
      case '--json': o.json = true; break;
      default: fail(`unknown argument ${a}`);
    }
  }
  if (o.op !== null && !['update', 'rank', 'top'].includes(o.op)) fail('--op: update, rank or top');
  if (!o.preload && o.op === null) fail('nothing to do: give --preload and/or --op');
  return o;
}

function fail(msg) {
  process.stderr.write(`redis-rank peer: ${msg}\n`);
  process.exit(2);
}

// mulberry32: small, deterministic, so runs are repeatable.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function preload(lb, o, random) {
  const batch = 1000, parallel = 8;
  let next = 0, done = 0;
  const started = Date.now();
  const worker = async () => {
    while (next < o.members) {
      const first = next;
      next = Math.min(next + batch, o.members);
      const entries = [];
      for (let i = first; i < next; i++) entries.push({ id: `m${i}`, value: Math.floor(random() * 1e9) });
      await lb.update(entries, 'replace');
      done += entries.length;
      if (done % (50 * batch) !== 0 && done !== o.members) continue;
      const secs = (Date.now() - started) / 1000;
      process.stderr.write(`\rpreload ${Math.floor(100 * done / o.members)}% ${done}/${o.members} ${Math.round(done / Math.max(secs, 0.001))}/s `);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  process.stderr.write('\n');
}

async function measure(lb, o, random) {
  const call = {
    update: () => lb.updateOne(`m${Math.floor(random() * o.members)}`, Math.floor(random() * 1e9)),
    rank: () => lb.find(`m${Math.floor(random() * o.members)}`),
    top: () => lb.top(o.topN),
  }[o.op];
  let samples = new Float64Array(1 << 20);
  let count = 0, errors = 0, recording = false, stop = false;
  const record = (us) => {
    if (count === samples.length) {
      const bigger = new Float64Array(samples.length * 2);
      bigger.set(samples);
      samples = bigger;
    }
    samples[count++] = us;
  };
  const lane = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      let ok = true;
      try { await call(); } catch { ok = false; }
      if (recording) {
        record(Number(process.hrtime.bigint() - t0) / 1000);
        if (!ok) errors++;
      }
    }
  };
  const lanes = Array.from({ length: o.inflight }, lane);
  await new Promise((r) => setTimeout(r, o.warmup * 1000));
  recording = true;
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, o.duration * 1000));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  recording = false;
  stop = true;
  await Promise.all(lanes);
  const sorted = samples.subarray(0, count).sort();
  const q = (p) => (count ? sorted[Math.min(count - 1, Math.floor(p * count))] : 0);
  return { count, errors, seconds, p50: q(0.5), p99: q(0.99), p999: q(0.999), max: count ? sorted[count - 1] : 0 };
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const [host, port] = o.redis.split(':');
  const client = new Redis({ host, port: Number(port), lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
  } catch (e) {
    fail(`cannot connect to Redis at ${o.redis}: ${e.message}`);
  }
  const lb = new Leaderboard(client, o.key, { sortPolicy: 'high-to-low', updatePolicy: 'best' });
  const random = rng(o.seed);
  try {
    if (o.preload) await preload(lb, o, random);
    if (o.op === null) return;
    const r = await measure(lb, o, random);
    const stats = { count: r.count, errors: r.errors, ops_per_sec: r.count / r.seconds, p50_us: r.p50,
                    p99_us: r.p99, p999_us: r.p999, max_us: r.max };
    if (o.json) {
      console.log(JSON.stringify({ target: 'redis-rank', connections: o.inflight, duration_s: r.seconds,
                                   ops: { [o.op]: stats } }));
    } else {
      console.log(`target redis-rank  in flight ${o.inflight}  measured ${r.seconds.toFixed(1)} s`);
      console.log(`${o.op}: ${r.count} ops, ${Math.round(stats.ops_per_sec)}/s, p50 ${r.p50.toFixed(0)} us, ` +
                  `p99 ${r.p99.toFixed(0)} us, p99.9 ${r.p999.toFixed(0)} us, max ${r.max.toFixed(0)} us, errors ${r.errors}`);
    }
    if (r.count > 0 && r.errors === r.count) process.exitCode = 1;
  } finally {
    client.disconnect();
  }
}

main().catch((e) => { process.stderr.write(`redis-rank peer: ${e.stack}\n`); process.exit(1); });
