/* constants.h -- every limit, default and key-layout constant of rankd.
 *
 * One place, so the tables of docs/ can be checked against it. Changing a
 * value here changes behaviour; docs/configuration.md and docs/api.md must
 * change with it.
 */
#ifndef RANK_CONSTANTS_H
#define RANK_CONSTANTS_H

#include <glib.h>

/* Names (bytes of UTF-8). */
#define RANK_BOARD_MAX_BYTES 200
#define RANK_MEMBER_MAX_BYTES 256
#define RANK_REQUEST_ID_MAX_BYTES 128
/* A [grant NAME] section's NAME (access.h). */
#define RANK_IDENTITY_MAX_BYTES 256
/* Identities named in rankd_calls_refused_total; others count as "other". */
#define RANK_METRICS_IDENTITIES_MAX 64

/* Scores are integers a double holds exactly: |score| <= 2^53 - 1. */
#define RANK_SCORE_MAX G_GINT64_CONSTANT (9007199254740991)

/* Timestamps: Unix ms, 1970-01-01T00:00:00.000Z .. 2200-12-31T23:59:59.999Z. */
#define RANK_TIMESTAMP_MIN_MS G_GINT64_CONSTANT (0)
#define RANK_TIMESTAMP_MAX_MS G_GINT64_CONSTANT (7289654399999)

/* GetTopN page size; GetAround's radius; GetRanks' members; Sample's
 * count. */
#define RANK_TOP_N_MAX 1000
#define RANK_AROUND_RADIUS_MAX 100
#define RANK_RANKS_MAX 1000
#define RANK_SAMPLE_COUNT_MAX 100
#define RANK_SUBSCORES_MAX 3
/* Member data (Update.data, SetMemberData): keys, their bytes, value bytes,
 * and keys plus values in all. */
#define RANK_DATA_KEYS_MAX 16
#define RANK_DATA_KEY_MAX_BYTES 64
#define RANK_DATA_VALUE_MAX_BYTES 256
#define RANK_DATA_TOTAL_MAX_BYTES 1024

/* Sharded boards (config.h): at most this many shards per board; GetTopN
 * serves offset+n up to max_top_depth (default, and its upper limit: a read
 * fetches offset+n entries from every shard and merges them). */
#define RANK_SHARDS_MAX 64
#define RANK_DEFAULT_MAX_TOP_DEPTH 10000
#define RANK_MAX_TOP_DEPTH_LIMIT 100000

/* Periodic boards: custom period length, and past periods kept. */
#define RANK_PERIOD_SECONDS_MAX (10 * 366 * 24 * 3600)
#define RANK_RETENTION_MAX 10000
/* window=N: periods a rolling window combines, at most (an update reads
 * its member's entry in each). */
#define RANK_WINDOW_MAX 100
/* The period labels of a rolling window's keys (rk:{board}:p:window:z ...):
 * the window served, and the one a roll builds. No period has them. */
#define RANK_WINDOW_LABEL "window"
#define RANK_WINDOW_NEXT_LABEL "window-next"
/* A board's (a shard's) rolling-window state (window.lua): "rk:{board}:w",
 * a hash; and the members one call of the roll places, at most. */
#define RANK_KEY_SUFFIX_WINDOW "w"
#define RANK_WINDOW_ROLL_CHUNK 100

/* cap=K: at most this many members. */
#define RANK_CAP_MAX 10000000

/* Updates of one board (shard, period) queued in one loop iteration leave
 * as one script call: at most this many a call. */
#define RANK_BATCH_MAX_ITEMS 64

/* The updates of a batch recorded as a whole (UpdateBatchRequest.request_id)
 * leave as one script call of their own: at most this many; so do the
 * queue's drain's, which no caller waits for. More than
 * RANK_BATCH_MAX_ITEMS, as such a call's own costs in Redis (its record,
 * the meta, the commands it sends) are shared by all its updates: an
 * import entry costs Redis 11% fewer instructions at 250 than at 64
 * (bench/instructions.sh); its count fits a byte of the group argument. */
#define RANK_GROUP_MAX_ITEMS 250

/* update.lua answers a batch flat: each update's {score, rank, applied,
 * subscores} after the one before, or its one error. */
#define RANK_UPDATE_REPLY_WIDTH 4

/* Updates in one UpdateBatch call (the IDL says so too). */
#define RANK_UPDATE_BATCH_MAX 1000

/* Redis nodes (--redis given several times, or [redis] nodes). */
#define RANK_NODES_MAX 64
/* Redis Cluster: the slot map is asked for again at most this often. */
#define RANK_CLUSTER_REFRESH_MIN_MS 100
/* Redirects (MOVED, ASK) one command follows before it fails. */
#define RANK_CLUSTER_REDIRECTS_MAX 5
#define RANK_WAIT_REPLICAS_MAX 16

/* Server defaults (each has a command-line option). */
#define RANK_DEFAULT_LISTEN "127.0.0.1:9090"
#define RANK_DEFAULT_PORT 9090
#define RANK_DEFAULT_DATA_DIR "./rankd-data"
#define RANK_DEFAULT_DEDUP_WINDOW_S 3600
#define RANK_DEDUP_WINDOW_MAX_S (30 * 24 * 3600)
/* update.lua cuts the dedup window into this many time buckets of
 * request-id records (its BUCKETS), and looks in the current one and this
 * many before it. */
#define RANK_DEDUP_BUCKETS 4
/* A record hash is swept of its stale records at its first write this
 * many buckets after its last sweep (update.lua's mark, the hash's expiry:
 * swept in the current bucket or the one before, none is due); its expiry
 * allows for it. */
#define RANK_DEDUP_SWEEP_AFTER 2
#define RANK_DEFAULT_REDIS_TIMEOUT_MS 2000
#define RANK_DEFAULT_IDLE_TIMEOUT_S 60
#define RANK_DEFAULT_MAX_CONNECTIONS 1024
#define RANK_DEFAULT_MAX_FRAME (1024 * 1024)
#define RANK_MIN_MAX_FRAME 1024
#define RANK_MAX_MAX_FRAME (64 * 1024 * 1024)

/* A request must arrive whole within this time once its first byte has
 * arrived; a client that sends half a frame and stalls is dropped. */
#define RANK_REQUEST_READ_TIMEOUT_MS 10000

/* Nesting of structs and containers in one message. */
#define RANK_MAX_NESTING 64

/* Thrift method names are short; longer ones are garbage. */
#define RANK_METHOD_NAME_MAX_BYTES 64

/* Per-connection read buffer kept between requests; larger ones are freed. */
#define RANK_CONN_BUFFER_BYTES 4096

/* A pipelining client: calls in flight per connection (more requests wait
 * in the socket), and the reply bytes a connection may hold before it
 * decodes no more requests: the replies not sent yet (its client is not
 * reading) plus the largest reply each call in flight could make. A call
 * whose largest reply is above this runs only when the connection holds
 * nothing else, so a connection holds at most this or one reply. */
#define RANK_CONN_MAX_CALLS 16
#define RANK_CONN_REPLY_BUDGET (64 * 1024)

/* A client speaking another transport or protocol than the port's
 * (wire.h): logged once a peer address and wire per
 * RANK_WIRE_LOG_QUIET_S, remembering the last RANK_WIRE_LOG_PEERS of them,
 * and in all at most RANK_WIRE_LOG_PER_MINUTE lines a minute, so that
 * neither memory nor the log grows with what clients send. */
#define RANK_WIRE_LOG_PEERS 32
#define RANK_WIRE_LOG_QUIET_S 600
#define RANK_WIRE_LOG_PER_MINUTE 30

/* The largest reply rankd encodes; the documented limits stay far below it
 * (a GetTopN of 1,000 entries with member data is under 2 MiB). A reply
 * past it answers InvalidArgument instead. Replies are not held to
 * --max-frame, which caps requests. */
#define RANK_REPLY_MAX_BYTES (16 * 1024 * 1024)

/* Free memory at the top of a malloc arena past which it goes back to the
 * kernel. */
#define RANK_MALLOC_TRIM_BYTES (4 * 1024 * 1024)

/* --metrics-listen: HTTP connections served at once (a thread each), idle
 * HTTP timeout, the viewer's page size. */
#define RANK_HTTP_CONNECTIONS_MAX 64
#define RANK_HTTP_TIMEOUT_S 30
#define RANK_VIEWER_DEFAULT_N 100
/* The viewer lists at most this many boards. */
#define RANK_VIEWER_BOARDS_MAX 10000
/* The viewer waits for a call this much longer than --redis-timeout. */
#define RANK_HTTP_CALL_MARGIN_MS 1000

/* Drain on SIGINT/SIGTERM: calls in flight get this long to finish. */
#define RANK_DRAIN_TIMEOUT_MS 10000

/* Redis key layout: RANK_KEY_PREFIX ":{" board "}:" suffix. The braces make
 * the board a Redis Cluster hash tag: all keys of a board share one slot. */
#define RANK_KEY_PREFIX "rk"
#define RANK_KEY_SUFFIX_SCORES "z"  /* sorted set: order key -> score */
#define RANK_KEY_SUFFIX_TIMES "t"   /* hash: member -> time prefix */
#define RANK_KEY_SUFFIX_REQUEST "q" /* request-id records (update.lua) */
#define RANK_KEY_SUFFIX_DISTINCT                                               \
  "d"                              /* rank=dense: sorted set of the scores     \
                                    */
#define RANK_KEY_SUFFIX_COUNTS "c" /* rank=dense: hash score -> members */
#define RANK_KEY_SUFFIX_DATA "a"   /* hash: member -> its data (encoded) */
/* The board's layout descriptor (layout.h), always under the board's own
 * tag, whatever its shards: "rk:{board}:o". */
#define RANK_KEY_SUFFIX_LAYOUT "o"
/* The periods of a tag ("rk:{board}:k", a shard's "rk:s:{board/i}:k"): a
 * sorted set, period label -> when the period's keys expire (Unix ms).
 * update.lua adds a period with its first records; clear.lua takes it out
 * with its keys; so admin calls name a board's keys instead of searching
 * the keyspace for them (store_admin.c). */
#define RANK_KEY_SUFFIX_PERIODS "k"
/* The most request-id record hashes of one layout (update.lua's
 * MAX_HASHES). */
#define RANK_RECORD_HASHES_MAX 1048576

/* A worker trusts what it learned of a board's stored layout this long;
 * then it asks Redis again (one GET per board and worker). It remembers at
 * most this many boards. */
#define RANK_LAYOUT_RECHECK_MS 1000
#define RANK_LAYOUT_CACHE_MAX 10000

/* A DeleteBoard's or ResetBoard's request-id record: "rk:{board}:x:" and
 * 32 hex digits of its SHA-256; "pending OP" while it runs, "done OP N"
 * after, for the board's dedup window. */
#define RANK_KEY_SUFFIX_ADMIN "x"

/* Every board ever written to, until DeleteBoard (ListBoards): a sorted set
 * of board names, all scores 0, so read in name order. Added to with every
 * write check of the layout, so a board is in it within
 * RANK_LAYOUT_RECHECK_MS of a write. */
#define RANK_BOARDS_KEY "rk:boards"

/* Board administration: keys per UNLINK, boards per ListBoards page,
 * entries per Export page. */
#define RANK_ADMIN_UNLINK_MAX 500
/* GetBoardInfo: record hashes of a layout it reads MEMORY USAGE of, at
 * most; a larger layout's keys and memory are estimated from them. */
#define RANK_ADMIN_RECORD_SAMPLE 256
#define RANK_LIST_BOARDS_MAX 1000
#define RANK_EXPORT_COUNT_MAX 1000

/* The update queue (src/methods/drain.h): a board's stream "rk:{board}:u" (a
 * shard's "rk:s:{board/i}:u"), its dead letters "...:v" (a stream), its counts
 * "...:n" (a hash: applied, dead); the boards whose queue has work, scored
 * by when it was last added (queues.lua): a board leaves once its streams
 * are empty. */
#define RANK_KEY_SUFFIX_QUEUE "u"
#define RANK_KEY_SUFFIX_DEAD "v"
#define RANK_KEY_SUFFIX_QUEUE_COUNTS "n"
#define RANK_QUEUES_KEY "rk:queues"
#define RANK_QUEUE_GROUP "rankd"
/* Defaults and limits of the board options queue_claim_after (seconds)
 * and queue_max_backlog (entries). */
#define RANK_QUEUE_CLAIM_AFTER_DEFAULT_S 30
#define RANK_QUEUE_CLAIM_AFTER_MAX_S 86400
#define RANK_QUEUE_MAX_BACKLOG_DEFAULT 1000000
#define RANK_QUEUE_MAX_BACKLOG_LIMIT 1000000000
/* Updates a drain reads (and applies) at once, per stream, about: it reads
 * whole entries. How often a listed queue with nothing new is looked at;
 * how often the list of queues with work is read again (a board that
 * joins it waits at most this long). The boards a drain takes from the
 * list at once, those waiting longest first: what it keeps per board is
 * bounded by it. */
#define RANK_QUEUE_READ_COUNT 256
#define RANK_QUEUE_IDLE_POLL_MS 20
#define RANK_QUEUE_REFRESH_MS 1000
#define RANK_QUEUE_BOARDS_MAX 1000
/* The queued boards whose rankd_queue_* series /metrics keeps: those
 * drained or read most recently (metrics.c). */
#define RANK_QUEUE_METRICS_BOARDS_MAX 1000
/* How often a drain looks for work in the streams of configured queue=on
 * boards rk:queues does not list (src/methods/drain.c says how it gets there).
 */
#define RANK_QUEUE_UNLISTED_LOOK_MS 60000
/* The read cache (cache.h): the largest read_cache_ms; the default bound
 * of its memory (--read-cache-bytes); the invalidation channel of Redis's
 * CLIENT TRACKING, and the name of the connections that listen to it. */
#define RANK_READ_CACHE_MS_MAX 3600000
#define RANK_READ_CACHE_BYTES_DEFAULT (64u * 1024 * 1024)
#define RANK_READ_CACHE_BYTES_MAX ((gint64) 1 << 40)
#define RANK_TRACKING_CHANNEL "__redis__:invalidate"
#define RANK_TRACKING_CLIENT_NAME "rankd-invalidations"
/* A tracked answer is served at most this long after its read was sent:
 * the bound on what Redis does not report (SWAPDB sends no invalidation in
 * Redis 7.0) and a hot page's cost, one read of Redis a second. */
#define RANK_READ_CACHE_TRACKED_MAX_AGE_MS 1000
/* The tracking session's prefixes (--read-cache-tracked-boards): Redis
 * 7.0 walks every prefix of every session for each key it writes, and
 * again in each event-loop iteration, so their number is bounded; a board
 * takes one (a sharded board one more a shard). Measured: an update cost
 * Redis 60 us with none, 80 us with 250 prefixes, 243 us with 1,000
 * (test_many_tracked_boards_bounded); 100 cost nothing measurable. The
 * default; the largest allowed. A CLIENT TRACKING command carries at most
 * RANK_TRACKING_PREFIXES_PER_COMMAND: Redis checks each new prefix against
 * every one of the session's. */
#define RANK_READ_CACHE_TRACKED_BOARDS_DEFAULT 100
#define RANK_READ_CACHE_TRACKED_BOARDS_MAX 100000
#define RANK_TRACKING_PREFIXES_PER_COMMAND 200
/* After Redis refused a step of the tracking session (ACL, an old Redis). */
#define RANK_TRACKING_RETRY_MS 1000
/* Reads from replicas (backend.h): replicas per primary; the default and
 * the largest max_replica_lag_ms; how often each worker measures each
 * replica's lag (a heartbeat written to the primary, read back from the
 * replica), and how long the heartbeat key lives. */
#define RANK_REPLICAS_MAX 8
#define RANK_REPLICA_LAG_DEFAULT_MS 100
#define RANK_REPLICA_LAG_MAX_MS 3600000
#define RANK_REPLICA_PROBE_MS 10
#define RANK_HEARTBEAT_KEY_PREFIX "rk:hb:"
#define RANK_HEARTBEAT_TTL_MS 60000
/* Redis Cluster with replica reads: how often the slot map is asked for
 * again, to find replicas that joined. */
#define RANK_CLUSTER_REPLICA_REFRESH_MS 2000
/* Enqueue: updates a call. */
#define RANK_ENQUEUE_MAX 1000

/* Shard i of a sharded board: RANK_SHARD_KEY_PREFIX ":{" board "/" i "}:"
 * suffix. Each shard is its own hash tag (shards spread over a cluster);
 * the different prefix keeps shard keys apart from every ordinary board's. */
#define RANK_SHARD_KEY_PREFIX "rk:s"

/* Embedded Redis. */
#define RANK_EMBEDDED_SOCKET "redis.sock"
#define RANK_EMBEDDED_START_TIMEOUT_MS 10000
#define RANK_EMBEDDED_STOP_TIMEOUT_MS 10000
/* Back-off between attempts to restart an embedded Redis that died. */
#define RANK_EMBEDDED_RESTART_MIN_MS 100
#define RANK_EMBEDDED_RESTART_MAX_MS 5000

/* Reconnect back-off towards Redis. */
#define RANK_RECONNECT_MIN_MS 50
#define RANK_RECONNECT_MAX_MS 2000

/* A Redis connection whose oldest request waited this long is replaced. */
#define RANK_REDIS_STALL_MS 30000

#endif /* RANK_CONSTANTS_H */
