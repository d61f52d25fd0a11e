// A small rankd client in Node, on the npm `thrift` package.
//
//   npm ci && npm run gen && node client.js [HOST:PORT]
//
// rankd's defaults: framed transport, binary protocol. The address comes from
// the first argument, else RANKD_ADDRESS, else 127.0.0.1:9090.
//
// TLS, from the environment (any of these turns it on; so does RANKD_TLS=1):
// RANKD_TLS_CA (PEM CAs that rankd's certificate must chain to; default
// Node's), RANKD_TLS_CERT and RANKD_TLS_KEY (this client's certificate and
// key, for a rankd that asks for one), RANKD_TLS_SERVER_NAME (the name or IP
// address rankd's certificate must carry; default the host).
//
// Every i64 field arrives as a node-int64 `Int64` object, not a Number:
// scores (|score| <= 2^53-1) are exact with toNumber(); subscores (any i64)
// need toBigInt() below.
'use strict';

const fs = require('fs');
const net = require('net');
const tls = require('tls');
const thrift = require('thrift');
const Int64 = require('node-int64');
const Ranking = require('./gen-nodejs/Ranking');
const types = require('./gen-nodejs/ranking_types');

const BOARD = 'example_node';
const RAID = 'example_raid'; // configured with subscores=desc

// An i64 exactly, whatever its size: the Int64's 8 bytes, big-endian.
function toBigInt(i64) {
  return i64.toBuffer().readBigInt64BE(0);
}

// Any BigInt in the i64 range, to send: an Int64 over its 8 bytes.
function fromBigInt(n) {
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(n); // throws a RangeError outside the i64 range
  return new Int64(bytes);
}

// tls.connect's options from RANKD_TLS_*, or null (plain TCP).
function tlsOptions(host) {
  const env = process.env;
  const names = ['RANKD_TLS_CA', 'RANKD_TLS_CERT', 'RANKD_TLS_KEY', 'RANKD_TLS_SERVER_NAME'];
  if (env.RANKD_TLS !== '1' && !names.some((n) => env[n])) return null;
  const name = env.RANKD_TLS_SERVER_NAME || host;
  const options = {
    minVersion: 'TLSv1.2', // as rankd
    // Set, so that the library leaves the protocol to minVersion.
    secureOptions: 0,
    // rankd's certificate must carry name (a DNS name or an IP address).
    checkServerIdentity: (_host, cert) => tls.checkServerIdentity(name, cert),
  };
  if (!net.isIP(name)) options.servername = name; // SNI takes names only
  if (env.RANKD_TLS_CA) options.ca = fs.readFileSync(env.RANKD_TLS_CA);
  if (env.RANKD_TLS_CERT) options.cert = fs.readFileSync(env.RANKD_TLS_CERT);
  if (env.RANKD_TLS_KEY) options.key = fs.readFileSync(env.RANKD_TLS_KEY);
  return options;
}

function connect(host, port) {
  const options = {
    transport: thrift.TFramedTransport,
    protocol: thrift.TBinaryProtocol,
  };
  const secure = tlsOptions(host);
  const connection = secure
    ? thrift.createSSLConnection(host, port, { ...options, ...secure })
    : thrift.createConnection(host, port, options);
  connection.on('error', (err) => {
    console.error('connection:', err.message);
    process.exitCode = 3;
  });
  return { connection, client: thrift.createClient(Ranking, connection) };
}

// Sends an update, retrying with the same request id: rankd applies it at
// most once, however many attempts reach it. failFirst simulates a reply
// lost on the way back: rankd applied the update, we never saw it.
async function update(conn, request, { attempts = 3, failFirst = false } = {}) {
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const response = await conn.client.Update(request);
      if (failFirst && attempt === 1) throw new Error('reply lost (simulated)');
      return response;
    } catch (err) {
      if (err instanceof types.Unavailable) {
        console.log(`${request.member}: unavailable (${err.message}), retrying`);
        continue; // Redis busy or failing over: safe to retry
      }
      // Any other answer from rankd (InvalidArgument: a bug) is final.
      if (err instanceof thrift.Thrift.TException) throw err;
      const delta = `${request.value >= 0 ? '+' : ''}${request.value}`;
      console.log(`${request.member} ${delta}: ${err.message}; ` +
                  `retrying with request id ${request.request_id}`);
      // The connection's state is unknown (half a reply may be in flight):
      // never reuse it.
      conn.connection.end();
      Object.assign(conn, connect(conn.connection.host, conn.connection.port));
    }
  }
  throw new Error(`no answer after ${attempts} attempts`);
}

async function main() {
  const address = process.argv[2] || process.env.RANKD_ADDRESS || '127.0.0.1:9090';
  const colon = address.lastIndexOf(':');
  const conn = connect(address.slice(0, colon), Number(address.slice(colon + 1)));

  // Best scores, each with member data (shown by with_data reads below).
  // A plain Number is fine for an i64 up to 2^53: the library wraps it
  // in an Int64.
  for (const [member, value] of [['alice', 120], ['bob', 95], ['carol', 130]]) {
    const r = await update(conn, new types.UpdateRequest({
      board: BOARD, member, value, mode: types.UpdateMode.BEST,
      request_id: `node-${member}-1`, data: { name: member.toUpperCase() },
    }));
    console.log(`update ${member}: score ${r.score.toNumber()} rank ${r.rank.toNumber()}`);
  }

  // An INCREMENT whose reply is lost, then retried: counted once, so bob
  // has 95 + 10, not 95 + 20.
  const retried = await update(conn, new types.UpdateRequest({
    board: BOARD, member: 'bob', value: 10, mode: types.UpdateMode.INCREMENT,
    request_id: 'node-bob-2',
  }), { failFirst: true });
  console.log(`bob +10: applied ${retried.applied}, score ${retried.score.toNumber()} (counted once)`);

  // Each method takes one request struct; its constructor throws if a
  // required field is missing. The options left out take the IDL's defaults:
  // the current period (periods_back 0), from the top (offset 0), without
  // member data (with_data false).
  const alice = await conn.client.GetRank(new types.GetRankRequest({ board: BOARD, member: 'alice' }));
  console.log(`alice: rank ${alice.rank.toNumber()}, score ${alice.score.toNumber()}`);
  const top = await conn.client.GetTopN(new types.GetTopNRequest({ board: BOARD, n: 3, with_data: true }));
  for (const e of top) {
    console.log(`#${e.rank.toNumber()} ${e.member} ${e.score.toNumber()} ${e.data ? e.data.name : '-'}`);
  }
  const around = await conn.client.GetAround(
    new types.GetAroundRequest({ board: BOARD, member: 'alice', radius: 1 }));
  console.log('around alice:', around.map((e) => `${e.member}(#${e.rank.toNumber()})`).join(' '));
  try {
    await conn.client.GetRank(new types.GetRankRequest({ board: BOARD, member: 'nobody' }));
  } catch (err) {
    if (!(err instanceof types.NotFound)) throw err;
    console.log('nobody:', err.message);
  }

  // Calls made together share the connection: the library sends each at
  // once and matches replies by sequence id, and rankd runs up to 16 of a
  // connection's calls at a time (pipelining). No pool needed for this.
  const calls = [];
  for (let i = 0; i < 10; i++) {
    const member = ['alice', 'bob', 'carol'][i % 3];
    calls.push(conn.client.GetRank(new types.GetRankRequest({ board: BOARD, member })));
    calls.push(conn.client.GetTopN(new types.GetTopNRequest({ board: BOARD, n: 1, with_data: true })));
  }
  const answers = await Promise.all(calls);
  const seen = new Set(answers.map((a) => (Array.isArray(a)
    ? `top ${a[0].member}` : `${a.member} #${a.rank.toNumber()}`)));
  console.log(`${answers.length} calls at once: ${[...seen].sort().join(', ')}`);

  // The largest score rankd takes, 2^53-1, is still exact as a Number.
  const max = await update(conn, new types.UpdateRequest({
    board: BOARD, member: 'max', value: 9007199254740991, mode: types.UpdateMode.SET,
    request_id: 'node-max-1',
  }));
  const score = max.score.toNumber();
  console.log(`max score: ${score} (Number.isSafeInteger: ${Number.isSafeInteger(score)})`);

  // Subscores take any i64: send and read them as BigInt, never as Number.
  for (const [member, subscore] of [['team7', 2n ** 53n + 1n], ['team9', -(2n ** 63n)]]) {
    const r = await update(conn, new types.UpdateRequest({
      board: RAID, member, value: 12, mode: types.UpdateMode.SET,
      request_id: `node-${member}-1`, subscores: [fromBigInt(subscore)],
    }));
    const sub = r.subscores[0];
    console.log(`${member} subscore: ${toBigInt(sub)} exact; toNumber() ${sub.toNumber()}, ` +
                `toNumber(true) ${sub.toNumber(true)}`);
  }
  // A Number past 2^53 has lost its low bits before the library sees it.
  console.log(`Number 2**53 + 1 is sent as ${toBigInt(new Int64(2 ** 53 + 1))}`);
  conn.connection.end();
}

main().catch((err) => {
  // InvalidArgument names the field and the rule, e.g. subscores sent to a
  // board configured without them (example_raid needs subscores=desc).
  console.error(err instanceof types.InvalidArgument ? `invalid argument: ${err.message}` : err);
  process.exit(1);
});
