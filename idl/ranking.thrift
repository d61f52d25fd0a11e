/*
 * rankd: a leaderboard service over Apache Thrift.
 *
 * This file is the contract between rankd and its clients in every language.
 * Version 1.8 (IDL_VERSION below). From 1.0 on it only grows: new methods,
 * new optional fields with new ids, new exceptions on new methods, and one
 * new exception on released methods: PermissionDenied (1.7). Nothing
 * released is removed, renumbered, retyped or made required
 * (tests/compat/ checks this against the frozen 1.0 copy). A client built
 * from an older IDL does not know PermissionDenied: it reads a refused call's
 * answer as a result with no field it knows, and raises
 * TApplicationException MISSING_RESULT ("... failed: unknown result"); the
 * call changed nothing, and the connection stays usable.
 *
 * Every method takes one request struct: a new option is a new optional
 * field, with a default that keeps the old behaviour, and no caller changes.
 *
 * Ordering on a board: higher score first (lower first on boards configured
 * with order=asc); on a board configured with subscores (up to three, each asc
 * or desc), equal scores by the subscores in turn; then by who reached that
 * score (and subscores) first (the timestamp of the update that last changed
 * them); then by member id, ascending bytewise. Rank numbers are ordinal
 * (1,2,3,4) unless the board is configured with rank=competition (1,2,2,4) or
 * rank=dense (1,2,2,3) (boards without subscores only).
 *
 * Limits (InvalidArgument names the field and the limit when one is broken):
 *   board       1-200 bytes of UTF-8, no control characters, no '{' or '}'
 *   member      1-256 bytes of UTF-8, no NUL
 *   request_id  1-128 bytes of UTF-8, no NUL
 *   scores      integers with |score| <= 2^53-1 (9007199254740991)
 *   timestamps  Unix milliseconds from 0 (1970-01-01T00:00:00.000Z)
 *               to 7289654399999 (2200-12-31T23:59:59.999Z)
 *   subscores   exactly as many as the board declares (INCREMENT: or none),
 *               any i64
 *   member data at most 16 keys; a key 1-64 bytes, a value 0-256 bytes, both
 *               UTF-8 without NUL; keys and values at most 1024 bytes in all
 */

namespace c_glib rank
namespace py ranking
namespace js ranking
namespace cpp ranking
namespace java ranking
namespace go ranking

/** The version of this contract; rankd reports it in GetServerInfo. */
const string IDL_VERSION = "1.8"

/** How Update combines the request's value with the member's current score. */
enum UpdateMode {
  /** Add value (a delta, may be negative) to the current score; absent members start at 0. */
  INCREMENT = 1,
  /** Keep the better of the current score and value: higher, or lower on order=asc boards. */
  BEST = 2,
  /** Replace the current score with value. */
  SET = 3
}

struct UpdateRequest {
  /** The board to update; created on first use. */
  1: required string board
  /** The member whose score changes. */
  2: required string member
  /** The delta for INCREMENT; the new score for BEST and SET. |value| <= 2^53-1. */
  3: required i64 value
  /**
   * Idempotency key, scoped to the board. A retry must reuse it: a request_id
   * seen on this board within the dedup window (default 1 hour) is not applied
   * again. Reusing it with another member, value or mode is InvalidArgument
   * (on a sharded board, only when both members are in the same shard).
   */
  4: required string request_id
  /**
   * Unset: the board's mode (INCREMENT unless its config says mode=best or set).
   * No IDL default, so that clients leave it unset unless told.
   */
  5: optional UpdateMode mode
  /**
   * When the score was achieved, in Unix milliseconds; it breaks ties between
   * equal scores (earlier ranks higher), and on a periodic board chooses the
   * period (a past one only with accept_late). Default: the server's clock.
   */
  6: optional i64 timestamp_ms
  /**
   * The board's subscores (config subscores=), all of them, in the declared
   * order. BEST keeps the better of the whole (score, subscores) tuple, never
   * parts of two submissions. INCREMENT may leave them unset: the member keeps
   * its current subscores (0s for a new member). Not allowed on boards
   * without subscores.
   */
  7: optional list<i64> subscores
  /**
   * Replaces the member's data (display name, country...) when the update is
   * applied, even if the score does not change; an empty map deletes it.
   * Unset: the data stays as it is. Limits in the header above.
   */
  8: optional map<string, string> data
  /**
   * false: the response's rank is left unset, which spares Redis a rank
   * lookup, and lets the updates of one board that reach Redis together
   * write their scores with one command per key. Default true. In an
   * UpdateBatch, a request's rank is unset when either the request or the
   * batch says false. (1.6)
   */
  9: optional bool with_rank = true
}

struct UpdateResponse {
  /** The member's score after the update. */
  1: required i64 score
  /**
   * The member's 1-based rank after the update. Set on ordinary boards; left
   * unset on sharded boards (see the README), where an update touches one shard
   * only and that shard's rank is not the board's: call GetRank for it. Also
   * unset when a capped board (cap=K) did not keep the member: it is not on it.
   */
  2: optional i64 rank
  /** False: this request_id was already applied; nothing changed, score and rank are current. */
  3: required bool applied
  /** The member's subscores after the update, on boards with subscores. */
  4: optional list<i64> subscores
}

/** One member's place on a board. */
struct Entry {
  1: required string member
  2: required i64 score
  /** 1-based; equal scores share one on competition and dense boards. */
  3: required i64 rank
  /** On boards with subscores: the member's, in the declared order. */
  4: optional list<i64> subscores
  /** The member's data, when asked for (with_data) and the member has some. */
  5: optional map<string, string> data
}

/** One member's answer in GetRanks. */
struct RankOf {
  1: required string member
  /** False: the member is not on the board; score and rank are unset. */
  2: required bool found
  3: optional i64 score
  4: optional i64 rank
}

struct RemoveResponse {
  /** False: this request_id was already used; nothing changed. */
  1: required bool applied
  /** The member was on the board and is gone (meaningful when applied). */
  2: required bool removed
}

/** A field broke a documented limit or rule; the message names the field. Nothing changed. */
exception InvalidArgument {
  1: required string message
}

/** The member is not on the board. */
exception NotFound {
  1: required string message
}

/**
 * The storage could not be reached or did not answer in time. Safe to retry:
 * an Update retried with the same request_id is applied at most once.
 */
exception Unavailable {
  1: required string message
}

/**
 * The caller's identity lacks the role the method needs on the board
 * (rankd's grants: docs/security.md). Nothing changed. message says it
 * whole; the other fields name its parts, for programs: the method, the
 * board (unset for ListBoards), the role missing (read, write or admin) and
 * the caller's identity (unset: anonymous). (1.7)
 */
exception PermissionDenied {
  1: required string message
  2: optional string method
  3: optional string board
  4: optional string role
  5: optional string identity
}

/**
 * One update's answer in UpdateBatch: exactly one field is set. response as
 * Update would answer; invalid when this update was refused (nothing of it
 * changed, the others are not affected); unavailable when it could not reach
 * Redis: send it again with the same request_id (or the whole batch: items
 * already applied are not applied again).
 */
struct UpdateResult {
  1: optional UpdateResponse response
  2: optional InvalidArgument invalid
  3: optional Unavailable unavailable
}


/** GetRank: one member's place. */
struct GetRankRequest {
  1: required string board
  2: required string member
  /**
   * On a periodic board, 0 reads the current period, 1 the one before, up to
   * the board's retention; 0 on other boards. The same in every request below.
   */
  3: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  4: optional bool window = false
}

/** GetTopN: the entries ranked offset+1 .. offset+n. */
struct GetTopNRequest {
  1: required string board
  /** 1-1000. */
  2: required i32 n
  /** >= 0. */
  3: optional i32 offset = 0
  4: optional i32 periods_back = 0
  /** Each entry carries its member's data (Entry.data). */
  5: optional bool with_data = false
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only, and not with with_data (a window
   * keeps no member data). Default false.
   */
  6: optional bool window = false
}

/** GetAround: a member and its neighbours. */
struct GetAroundRequest {
  1: required string board
  2: required string member
  /** 0-100 entries above and below. */
  3: required i32 radius
  4: optional i32 periods_back = 0
  5: optional bool with_data = false
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only, and not with with_data (a window
   * keeps no member data). Default false.
   */
  6: optional bool window = false
}

/** GetRanks: several members' places. */
struct GetRanksRequest {
  1: required string board
  /** 1-1000 members. */
  2: required list<string> members
  3: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  4: optional bool window = false
}

/** Remove: a member leaves the board. */
struct RemoveRequest {
  1: required string board
  2: required string member
  /** Idempotency key, as UpdateRequest.request_id (the same dedup window). */
  3: required string request_id
}

/** Count: the board's members. */
struct CountRequest {
  1: required string board
  2: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  3: optional bool window = false
}

/** CountBetween: the members with min_score <= score <= max_score. */
struct CountBetweenRequest {
  1: required string board
  2: required i64 min_score
  3: required i64 max_score
  4: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  5: optional bool window = false
}

/** GetPercentile: the share of members strictly worse than one. */
struct GetPercentileRequest {
  1: required string board
  2: required string member
  3: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  4: optional bool window = false
}

/** GetScoreAtPercentile: the score at a percentile. */
struct GetScoreAtPercentileRequest {
  1: required string board
  /** 0-100. */
  2: required double pct
  3: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  4: optional bool window = false
}

/** Sample: members drawn at random from a score range. */
struct SampleRequest {
  1: required string board
  2: required i64 min_score
  3: required i64 max_score
  /** 1-100. */
  4: required i32 count
  5: optional i32 periods_back = 0
  /**
   * (1.8) true: read the board's rolling window (board option window=N): the
   * combination of the current period and the N-1 before it, instead of one
   * period; with periods_back 0 only. Default false.
   */
  6: optional bool window = false
}

/** SetMemberData: replaces a member's data. */
struct SetMemberDataRequest {
  1: required string board
  2: required string member
  /** An empty map deletes the data. Limits in the header above. */
  3: required map<string, string> data
}

/** GetMemberData: a member's data. */
struct GetMemberDataRequest {
  1: required string board
  2: required string member
  3: optional i32 periods_back = 0
}

/** UpdateBatch: 1-1000 updates, to any boards. */
struct UpdateBatchRequest {
  1: required list<UpdateRequest> requests
  /**
   * false: each response's rank is left unset, which spares Redis a rank
   * lookup per update (an importer has no use for it). Default true. (1.3)
   */
  2: optional bool with_rank = true
  /**
   * Records the batch as a whole instead of request by request: an
   * idempotency key, scoped to the board, like an Update's (1-128 bytes, the
   * same window). Set, the batch applies at most once and all or nothing: a
   * refused request leaves the whole batch unapplied (each other result
   * says so), and resent with this request_id and the same requests in the
   * same order, every result has applied=false; with other requests, every
   * result is InvalidArgument. The requests' own request_ids are then not
   * recorded (they must still be valid): an Update sent later with one of
   * them is applied again. Needs 1-250 requests (1-64 before 1.5), all on
   * one board (and period), a board without shards, cap or rank=dense, and
   * with_rank=false.
   * It costs Redis about half as much per update (no record each): meant for
   * importers, which resend their batches as they were. (1.4)
   */
  3: optional string request_id
}

/** UpdateBatch's answer: one result per request, in order. */
struct UpdateBatchResponse {
  1: required list<UpdateResult> results
}

/** GetServerInfo takes no options yet. */
struct GetServerInfoRequest {
}

struct ServerInfo {
  /** rankd's version, MAJOR.MINOR.PATCH: its build's (CMake project VERSION). */
  1: required string version
  /** IDL_VERSION of the contract rankd serves. */
  2: required string idl_version
  /** The boards named in rankd's config file (others take its [defaults]). */
  3: required i64 configured_boards
  /** Seconds since this rankd started. */
  4: required i64 uptime_seconds
  /**
   * The calling connection's identity: its client certificate's name on a
   * TLS listener, "uid:N" on a unix socket; unset: anonymous. (1.7)
   */
  5: optional string identity
  /** The calling connection is TLS. (1.7) */
  6: optional bool tls
  /**
   * The roles the calling connection has, each "ROLE:PATTERN" (read, write
   * or admin; PATTERN a board name or a glob of * and ?, "*" every board),
   * sorted; empty: none. Set whenever rankd answers 1.7 or later. (1.7)
   */
  7: optional list<string> grants
}

/** ListBoards: a page of the boards, in bytewise order of their names. */
struct ListBoardsRequest {
  /**
   * Only boards whose names sort after this one: the previous page's
   * next_after. Unset or empty: from the first board.
   */
  1: optional string after = ""
  /** 1-1000 boards a page. */
  2: optional i32 limit = 100
}

/** One board in ListBoards. */
struct BoardSummary {
  1: required string board
  /** Named in rankd's config file (its own section, not only [defaults]). */
  2: required bool configured
  /** Members now (on a periodic board: in its current period). */
  3: required i64 members
}

struct ListBoardsResponse {
  1: required list<BoardSummary> boards
  /** Set when there may be more boards: pass it as ListBoardsRequest.after. */
  2: optional string next_after
}

/** GetBoardInfo: what rankd and Redis know of one board. */
struct GetBoardInfoRequest {
  1: required string board
}

struct BoardInfo {
  1: required string board
  2: required bool configured
  /**
   * The options in force for the board, by their config names (shards, order,
   * rank, subscores, period, retention, cap, mode, dedup_window_ms).
   */
  3: required map<string, string> options
  /** Members now (on a periodic board: in its current period). */
  4: required i64 members
  /** On a periodic board: the labels of the periods whose keys are in Redis, newest first. */
  5: required list<string> periods
  /** The board's keys in Redis (every shard and period, request-id records included). */
  6: required i64 keys
  /** What Redis's MEMORY USAGE reports for those keys, summed (an estimate for large keys). */
  7: required i64 memory_bytes
  /** The layout recorded in Redis with the board's first write; unset: none yet. */
  8: optional string stored_layout
}

/** DeleteBoard: every key of the board goes. */
struct DeleteBoardRequest {
  1: required string board
  /**
   * Idempotency key, scoped to the board and to DeleteBoard and ResetBoard
   * (the same dedup window as updates): a retry is not applied again.
   */
  2: required string request_id
}

struct DeleteBoardResponse {
  /** False: this request_id was already applied; keys_removed is that call's. */
  1: required bool applied
  /** The Redis keys removed. */
  2: required i64 keys_removed
}

/** ResetBoard: the board's entries go; the board stays. */
struct ResetBoardRequest {
  1: required string board
  /** As DeleteBoardRequest.request_id. */
  2: required string request_id
}

struct ResetBoardResponse {
  /** False: this request_id was already applied; keys_removed is that call's. */
  1: required bool applied
  /** The Redis keys removed. */
  2: required i64 keys_removed
}

/** Export: one page of a board's entries. */
struct ExportRequest {
  1: required string board
  /** The previous page's next_cursor; unset or empty: the first page. */
  2: optional string cursor = ""
  /** About this many entries a page (Redis may give a few more or fewer): 1-1000. */
  3: optional i32 count = 1000
  4: optional i32 periods_back = 0
}

/** One member's entry, with all that reproduces its place. */
struct ExportEntry {
  1: required string member
  2: required i64 score
  /** When the member reached its score (and subscores): its tie-break. */
  3: required i64 timestamp_ms
  /** On boards with subscores: the member's, in the declared order. */
  4: optional list<i64> subscores
  /** The member's data, when it has some. */
  5: optional map<string, string> data
}

struct ExportResponse {
  /** In no particular order. */
  1: required list<ExportEntry> entries
  /** Unset: this was the last page. Otherwise pass it as ExportRequest.cursor. */
  2: optional string next_cursor
}

/** Enqueue: 1-1000 updates, to boards configured with queue=on. */
struct EnqueueRequest {
  1: required list<UpdateRequest> requests
}

/**
 * One update's answer in Enqueue: exactly one field is set. id: it is in the
 * board's queue (the stream entry's id; on a sharded board, of its shard's
 * stream; the updates of one call to one stream share an entry); invalid: it
 * was refused and nothing of it was queued.
 */
struct EnqueueResult {
  1: optional string id
  2: optional InvalidArgument invalid
}

struct EnqueueResponse {
  /** One result per request, in order. */
  1: required list<EnqueueResult> results
}

/** GetQueueStatus: a queued board's backlog. */
struct GetQueueStatusRequest {
  1: required string board
}

struct QueueStatus {
  /** The board is configured with queue=on. */
  1: required bool queued
  /** Updates in its queue not applied yet (pending ones included). */
  2: required i64 backlog
  /** Of those, the ones a rankd has read and not applied yet. */
  3: required i64 pending
  /** How long the oldest unapplied update has waited, in ms (0: none). */
  4: required i64 oldest_age_ms
  /** Updates the queue has applied (a repeated request id counts once). */
  5: required i64 applied
  /** Updates that could no longer apply, moved to the dead-letter stream. */
  6: required i64 dead_lettered
}

/**
 * Roles (1.7; rankd's grants, docs/security.md): read for GetRank, GetTopN,
 * GetAround, GetRanks, Count, CountBetween, GetPercentile,
 * GetScoreAtPercentile, Sample, GetMemberData, GetQueueStatus; write for
 * Update, UpdateBatch, Enqueue, Remove, SetMemberData; admin for DeleteBoard,
 * ResetBoard, Export, ListBoards, GetBoardInfo; GetServerInfo needs none. A
 * call needs its role on every board it names (UpdateBatch and Enqueue: on
 * each of their updates' boards, else the whole call is refused), and
 * otherwise answers PermissionDenied, having changed nothing.
 */
service Ranking {
  /** Records a score change; idempotent by request_id. */
  UpdateResponse Update(1: UpdateRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Several updates in one call, to any boards: 1-1000 requests, answered
   * with one UpdateResult per request, in order. Each is checked, applied and
   * answered as Update would, idempotent by its own request_id; updates of one
   * board are applied in the order given. InvalidArgument (for the whole call)
   * only when requests is empty or longer than 1000; the call must also fit in
   * rankd's --max-frame (1 MiB by default).
   */
  UpdateBatchResponse UpdateBatch(1: UpdateBatchRequest request)
    throws (1: InvalidArgument invalid, 10: PermissionDenied denied)

  /** The member's score and 1-based rank; NotFound if it is not on the board. */
  Entry GetRank(1: GetRankRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * The entries ranked offset+1 .. offset+n, best first. A board with no
   * members (or an offset past its end) gives an empty list. On a sharded
   * board offset+n is at most the board's max_top_depth (default 10000);
   * beyond it, InvalidArgument.
   */
  list<Entry> GetTopN(1: GetTopNRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * The member and up to radius entries above and below it, best first (fewer
   * at either end of the board). NotFound if the member is not on the board.
   * On a sharded board its rank plus radius is at most the board's
   * max_top_depth.
   */
  list<Entry> GetAround(1: GetAroundRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /** Score and rank of each member, in the order asked. */
  list<RankOf> GetRanks(1: GetRanksRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Removes the member from the board (on a periodic board, from the current
   * period); idempotent by request_id, which shares the board's dedup window
   * with Update's.
   */
  RemoveResponse Remove(1: RemoveRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /** The number of members on the board. */
  i64 Count(1: CountRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /** The number of members with min_score <= score <= max_score. */
  i64 CountBetween(1: CountBetweenRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * The share, in percent (0-100), of the board's members whose score is
   * strictly worse than the member's. NotFound if it is not on the board.
   */
  double GetPercentile(1: GetPercentileRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * The score at percentile pct (0-100): that of the entry at position
   * ceil(count * (100 - pct) / 100) from the top, at least 1, so 100 is the
   * best score and 0 the worst. NotFound on an empty board. On a sharded board
   * that position is at most the board's max_top_depth.
   */
  i64 GetScoreAtPercentile(1: GetScoreAtPercentileRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Up to count distinct members drawn uniformly at random from those with
   * min_score <= score <= max_score, with their ranks, in no particular
   * order (matchmaking). Picks by position: it does not scan the range.
   */
  list<Entry> Sample(1: SampleRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Replaces the member's data (an empty map deletes it); NotFound if the
   * member is not on the board (on a periodic board: in the current period,
   * whose keys the data shares, expiring with them). Setting the same data
   * twice is harmless, so there is no request id.
   */
  void SetMemberData(1: SetMemberDataRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /** The member's data (empty if none); NotFound if it is not on the board. */
  map<string, string> GetMemberData(1: GetMemberDataRequest request)
    throws (1: InvalidArgument invalid, 2: NotFound not_found, 3: Unavailable unavailable, 10: PermissionDenied denied)

  /** rankd's version, the IDL version it serves, its configured boards and uptime. */
  ServerInfo GetServerInfo(1: GetServerInfoRequest request)
    throws (1: Unavailable unavailable)

  /**
   * The boards that exist: those named in the config file and those written
   * to (until DeleteBoard), a page at a time, by name. Needs the admin role
   * on at least one board (1.7); a page then lists only the boards the
   * caller has admin on, so it may hold fewer than limit (even none) while
   * next_after is set: go on until it is unset.
   */
  ListBoardsResponse ListBoards(1: ListBoardsRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /** A board's options, members, periods, keys and memory in Redis. */
  BoardInfo GetBoardInfo(1: GetBoardInfoRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Removes every key of the board (shards, periods, member data, request-id
   * records, its stored layout) with UNLINK, a batch at a time, so that even a
   * board of millions of members never holds Redis up; no other board is
   * touched. Idempotent by request_id. Updates that arrive while it runs may
   * survive it.
   */
  DeleteBoardResponse DeleteBoard(1: DeleteBoardRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Removes the board's entries (every shard and period, member data), as
   * DeleteBoard does, but keeps its stored layout and its request-id records,
   * so an update retried after the reset is still recognised. Idempotent by
   * request_id.
   */
  ResetBoardResponse ResetBoard(1: ResetBoardRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * One page of the board's entries (HSCAN of its members): the board keeps
   * taking updates meanwhile. Every member on the board from the first page
   * to the last is in exactly one page, with the score (subscores, data,
   * timestamp_ms) it had when that page was read: a member updated during
   * the export comes with one of the scores it had during it. A member
   * added or removed meanwhile may or may not be in a page. Only if the
   * board loses most of its members during the export (Redis then shrinks
   * the hash SCAN walks) may a member come twice: keep the entry with the
   * later timestamp_ms.
   */
  ExportResponse Export(1: ExportRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /**
   * Queues updates for boards configured with queue=on: each request is
   * checked as Update would check it (a refused one is queued in no part,
   * and answered as such); the call answers once the others are in the
   * board's queue (a Redis stream), with --wait-replicas after WAIT. rankd
   * applies them in the background, in batches, each at most once by its
   * request_id; what readers see lags by the queue's backlog
   * (GetQueueStatus). InvalidArgument for the whole call only when requests
   * is empty or longer than 1000; Unavailable("queue full") when a board's
   * backlog would pass its queue_max_backlog (nothing of the call is queued)
   * or Redis is out of reach (some updates may be queued: sending the same
   * requests again applies each once).
   */
  EnqueueResponse Enqueue(1: EnqueueRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)

  /** A board's queue: backlog, pending, the oldest update's wait, applied and dead-lettered counts. */
  QueueStatus GetQueueStatus(1: GetQueueStatusRequest request)
    throws (1: InvalidArgument invalid, 2: Unavailable unavailable, 10: PermissionDenied denied)
}
