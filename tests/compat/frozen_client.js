// A Node client generated from the frozen 1.0 IDL (gen-nodejs/ beside this
// file's copy) calls rankd at 127.0.0.1:PORT and prints what it got, one
// JSON line; test_frozen_client.py checks it.
const thrift = require('thrift');
const Ranking = require('./gen-nodejs/Ranking');
const types = require('./gen-nodejs/ranking_types');

async function main() {
  const connection = thrift.createConnection('127.0.0.1', Number(process.argv[2]), {
    transport: thrift.TFramedTransport, protocol: thrift.TBinaryProtocol });
  const client = thrift.createClient(Ranking, connection);
  const board = 'frozen_node';
  const u = await client.Update(new types.UpdateRequest({
    board, member: 'n1', value: 7, request_id: 'fn-1' }));
  const again = await client.Update(new types.UpdateRequest({
    board, member: 'n1', value: 7, request_id: 'fn-1' }));
  const rank = await client.GetRank(new types.GetRankRequest({ board, member: 'n1' }));
  const top = await client.GetTopN(new types.GetTopNRequest({ board, n: 5 }));
  const info = await client.GetServerInfo(new types.GetServerInfoRequest({}));
  console.log(JSON.stringify({
    score: u.score.toNumber(), applied: [u.applied, again.applied],
    rank: rank.rank.toNumber(), top: top.map((e) => e.member),
    idl_version: info.idl_version }));
  connection.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
