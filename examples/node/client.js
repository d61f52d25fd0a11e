// A small rankd client in Node, on the npm `thrift` package.
//
//   npm ci && npm run gen && node client.js [HOST:PORT]
//
// rankd's defaults: framed transport, binary protocol. i64 fields arrive as
// node-int64 `Int64` objects: see scores and subscores below.
'use strict';

const thrift = require('thrift');
const Int64 = require('node-int64');
const Ranking = require('./gen-nodejs/Ranking');
const types = require('./gen-nodejs/ranking_types');

const [host, port] = (process.argv[2] || process.env.RANKD_ADDRESS ||
                      '127.0.0.1:9090').split(':');

// An i64 exactly, as a BigInt: node-int64 keeps all 64 bits, toNumber()
// does not (it rounds past 2^53).
function exact(i64) {
  return BigInt.asIntN(64, BigInt('0x' + i64.toOctetString()));
}

async function main() {
  const connection = thrift.createConnection(host, Number(port), {
    transport: thrift.TFramedTransport,
    protocol: thrift.TBinaryProtocol,
  });
  connection.on('error', (err) => {
    console.error('connection:', err.message);
    process.exit(3);
  });
  const client = thrift.createClient(Ranking, connection);
  const board = 'example_node';

  // Record scores. A request id makes an update safe to retry.
  for (const [member, value] of [['alice', 120], ['bob', 95], ['carol', 130]]) {
    const r = await client.Update(new types.UpdateRequest({
      board, member, value, request_id: `node-${member}-1`,
      mode: types.UpdateMode.BEST, data: { name: member.toUpperCase() },
    }));
    console.log(`update ${member}: score ${r.score.toNumber()} rank ${r.rank.toNumber()}`);
  }
  // The same request again (a retry after a timeout, say): not counted twice.
  const retry = await client.Update(new types.UpdateRequest({
    board, member: 'bob', value: 95, request_id: 'node-bob-1',
    mode: types.UpdateMode.BEST, data: { name: 'BOB' },
  }));
  console.log(`retry bob: applied ${retry.applied}, score ${retry.score.toNumber()}`);

  const top = await client.GetTopN(board, 3, 0, 0, true);
  for (const e of top) {
    console.log(`#${e.rank.toNumber()} ${e.member} ${e.score.toNumber()} ${e.data ? e.data.name : "-"}`);
  }
  const around = await client.GetAround(board, 'alice', 1, 0, false);
  console.log('around alice:', around.map((e) => e.member).join(' '));
  try {
    await client.GetRank(board, 'nobody', 0);
  } catch (err) {
    if (!(err instanceof types.NotFound)) throw err;
    console.log('nobody:', err.message);
  }

  // The largest score rankd takes, 2^53-1, is exact as a Number.
  const big = await client.Update(new types.UpdateRequest({
    board, member: 'max', value: 9007199254740991, request_id: 'node-max-1',
    mode: types.UpdateMode.SET,
  }));
  console.log(`max score: ${big.score.toNumber()} safe ${Number.isSafeInteger(big.score.toNumber())}`);

  // Subscores take any i64: send them as Int64 (from hex) and read them as
  // BigInt. example_raid is configured with subscores=desc.
  const r = await client.Update(new types.UpdateRequest({
    board: 'example_raid', member: 'team7', value: 12, request_id: 'node-raid-1',
    subscores: [new Int64('7fffffffffffffff')],
  }));
  // toNumber() refuses (Infinity) past 2^53; toNumber(true) rounds.
  console.log(`subscore: ${exact(r.subscores[0])}; toNumber(): ${r.subscores[0].toNumber()}; ` +
              `toNumber(true): ${r.subscores[0].toNumber(true)}`);
  connection.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
