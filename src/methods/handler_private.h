/* handler_private.h -- what the method layer's files share: the handler,
 * the call in flight and the method table. Not for other modules.
 *
 *   handler.c        the handler: its clock, configuration, cache
 *   dispatch.c       the method table, reply bounds, dispatch
 *   call.c           a call's lifecycle: replies, errors, what it wrote,
 *                    its context and the layout check before the store
 *   updates.c        Update, Remove, SetMemberData
 *   reads.c          GetRank, GetTopN, GetAround, GetRanks, GetMemberData
 *   cached_reads.c   reads of cached boards: the cache, and one read in
 *                    flight for calls that want the same answer
 *   queries.c        Count, CountBetween, GetPercentile,
 *                    GetScoreAtPercentile, Sample
 *   update_batch.c   UpdateBatch, and batches recorded as a whole
 *   server_info.c    GetServerInfo
 *   admin.c          ListBoards, GetBoardInfo, DeleteBoard, ResetBoard,
 *                    Export
 *   authorize.c      the caller's roles checked before a call starts; the
 *                    audit of DeleteBoard and ResetBoard
 *   queue_methods.c  Enqueue, GetQueueStatus (drain.c applies the queue)
 */
#ifndef RANK_HANDLER_PRIVATE_H
#define RANK_HANDLER_PRIVATE_H

#include "handler.h"

#include "cache.h"
#include "codec_requests.h"
#include "connbuf.h"
#include "context.h"
#include "metrics.h"
#include "rank_ranking_types.h"
#include "store.h"

struct _RankHandler
{
  RankStore *store;
  RankConfig *config;       /* in force; a reload swaps it */
  gint64 default_window_ms; /* --dedup-window */
  RankClockFunc clock;
  gpointer clock_data;
  RankAnsweredFunc answered;
  /* Replies are encoded one at a time, each into its call's own buffer. */
  RankReplyWriter *writer;
  ThriftProtocol *out;
  RankMetricsCalls *metrics; /* this worker's call counters */
  RankReadCache *cache;      /* the rankd's read cache (cache.h) */
  GHashTable *inflight; /* answer key -> flight: cached reads sent to Redis */
};

typedef enum
{
  METHOD_UPDATE,
  METHOD_GET_RANK,
  METHOD_GET_TOP_N,
  METHOD_GET_AROUND,
  METHOD_GET_RANKS,
  METHOD_REMOVE,
  METHOD_COUNT,
  METHOD_COUNT_BETWEEN,
  METHOD_GET_PERCENTILE,
  METHOD_GET_SCORE_AT_PERCENTILE,
  METHOD_SAMPLE,
  METHOD_SET_MEMBER_DATA,
  METHOD_GET_MEMBER_DATA,
  METHOD_UPDATE_BATCH,
  METHOD_GET_SERVER_INFO,
  METHOD_LIST_BOARDS,
  METHOD_GET_BOARD_INFO,
  METHOD_DELETE_BOARD,
  METHOD_RESET_BOARD,
  METHOD_EXPORT,
  METHOD_ENQUEUE,
  METHOD_GET_QUEUE_STATUS,
  METHOD_UNKNOWN,
} Method;

typedef struct _Call Call;

/* A call in flight: what every method's call has. A method that keeps
 * more while it runs has a struct of its own that begins with a Call (its
 * method table row's CallKind says which); its functions cast. */
struct _Call
{
  RankHandler *handler;
  gpointer request;     /* the server's, for answered() */
  const RankPeer *peer; /* who calls; NULL: rankd itself (in-process) */
  GByteArray *reply;    /* the server's buffer this call's reply goes to */
  Method method;
  gint32 seqid;
  /* The arguments: the generated struct, or for the busiest methods the
   * plain one their row of the method table reads (codec_requests.h) and
   * frees. */
  ThriftStruct *args;
  gpointer plain_args;
  char *unknown_name; /* METHOD_UNKNOWN only */
  gint64 start_us;    /* monotonic: the request decoded */
  /* The handler's clock (Unix ms) as the call read it first (handler_now):
   * every context of a call is at this one time, so the updates of one
   * UpdateBatch share their request-id buckets, periods and script call. */
  gint64 now_ms;
  gboolean clock_read;
  RankOutcome outcome;
  RankContext ctx; /* resolved by the start function */
  gboolean writes; /* the call may change the board */
  /* The call changed its board, or may have (its answer was lost): the
   * board's cached answers go and its read-your-writes mark moves. A call
   * refused or replayed changes nothing, the cache included: else any
   * client could keep a hot board's cache cold with calls that fail. */
  gboolean changed;
  void (*run) (Call *call); /* the store operation, once the layout fits */
};

/* A method's own call struct: its size (it begins with a Call, zeroed at
 * dispatch) and what frees what it holds once the call ends (NULL:
 * nothing). */
typedef struct
{
  gsize size;
  void (*clear) (Call *call);
} CallKind;

/* One row per method of the IDL: its name, the role its caller needs on
 * the boards it names (access.h), its generated argument and
 * result structs, what starts it, its call struct (NULL: a plain Call),
 * and how large its reply can be; or, for the busiest, what reads its
 * arguments into a plain struct (the call's plain_args; its reply's bound
 * HANDLER_SMALL_REPLY_BYTES unless it says) and frees them. */
typedef struct
{
  const char *name;
  RankRole role;
  GType (*args_type) (void);
  GType (*result_type) (void);
  void (*start) (Call *call);
  const CallKind *kind;
  gsize (*reply_bound) (const ThriftStruct *args); /* NULL: read */
  gpointer (*read) (ThriftProtocol *in, gsize *reply_bound, GError **error);
  GDestroyNotify free;
} MethodSpec;

extern const MethodSpec handler_methods[METHOD_UNKNOWN];

/* The methods' names, in the table's order, for the metrics. */
const char *const *handler_method_names (void);

/* The largest replies, in bytes (binary protocol, framed; compact is
 * smaller): what a connection reserves for a call in flight (server.c).
 * An Entry: member, score, rank, three subscores, and member data at its
 * limits; a message: its header and result struct; an exception's message
 * names at most a board, a member and a few numbers. */
#define HANDLER_ENTRY_BYTES                                                    \
  (3 + 4 + RANK_MEMBER_MAX_BYTES + 2 * 11 + 8 + 3 * 8 + 1)
#define HANDLER_ENTRY_DATA_BYTES                                               \
  (9 + RANK_DATA_KEYS_MAX * 8 + RANK_DATA_TOTAL_MAX_BYTES)
#define HANDLER_MESSAGE_BYTES (4 + 12 + RANK_METHOD_NAME_MAX_BYTES + 16)
#define HANDLER_SMALL_REPLY_BYTES 1024

/* ---- call.c: a call's lifecycle ---- */

/* The method's name (an unknown method's as the client sent it). */
const char *handler_call_name (const Call *call);

/* The protocol that writes call's reply, into its own buffer. */
ThriftProtocol *handler_begin_reply (Call *call);

/* Ends the call once its reply is written (ok) or could not be (error). A
 * reply over RANK_REPLY_MAX_BYTES becomes InvalidArgument instead. */
void handler_finish (Call *call, gboolean ok, const GError *error);

/* Writes result (a generated *Result struct) or, when result is NULL, a
 * TApplicationException of type with message; then ends the call. */
void handler_reply (Call *call, ThriftStruct *result,
                    ThriftApplicationExceptionError type, const char *message);

/* Answers with a result struct of the call's method, success filled in by
 * set (NULL: nothing to fill); then ends the call. */
void handler_reply_result (Call *call,
                           void (*set) (GObject *result, gpointer data),
                           gpointer data);

/* Replies with err as the method's declared exception, or as an internal
 * error; then ends the call. */
void handler_reply_error (Call *call, const GError *err);

/* A write through this rankd on ctx's board changed it (or may have): its
 * cached answers go, and reads from replicas must see it. */
void handler_board_written (RankHandler *handler, const RankContext *ctx);

/* The handler's clock for call: read at the call's first need of it, the
 * same for the rest of the call. */
gint64 handler_now (Call *call);

/* ctx (call's, or one of its updates') on board (already valid), at the
 * call's time, under the configuration in force. */
void handler_resolve_context (Call *call, RankContext *ctx, const char *board);

/* The call's context on board (already valid). */
void handler_resolve (Call *call, const char *board);

/* Validates board, resolves the context and checks periods_back and
 * window (IDL 1.8: the board's rolling window; context.h,
 * rank_context_read_window). */
gboolean handler_resolve_read (Call *call, const char *board,
                               gint64 periods_back, gboolean window,
                               GError **error);

/* with_data (GetTopN, GetAround) with window: refused, as a rolling window
 * keeps no member data. */
gboolean handler_window_data (gboolean window, gboolean with_data,
                              GError **error);

/* Whether ctx's board's stored layout is known to fit its options now
 * (store.h): then the caller goes on at once. Otherwise checked gets the
 * answer with data: a refusal at once, or Redis's answer later. */
gboolean handler_layout_fits (RankHandler *handler, const RankContext *ctx,
                              gboolean writes, RankStoreDoneFunc checked,
                              gpointer data);

/* The call's checks passed and its context is resolved: run is its store
 * operation, once the layout fits. */
void handler_proceed (Call *call, void (*run) (Call *call));

/* The call's checks are done: error refuses it; else handler_proceed. */
void handler_checked (Call *call, const GError *error,
                      void (*run) (Call *call));

/* ---- authorize.c: who may call what ---- */

/* The grants in force for call (its configuration's). */
const RankGrants *handler_grants (const Call *call);

/* Whether call's caller has role on board (rankd's own calls: always). */
gboolean handler_allows (const Call *call, RankRole role, const char *board);

/* Whether call's caller has its method's role on every board its request
 * names. If not, answers PermissionDenied (the call ends) and returns
 * FALSE. */
gboolean handler_authorize (Call *call);

/* Logs call's outcome, if it is a DeleteBoard or ResetBoard: the audit. */
void handler_audit (const Call *call);

/* ---- the methods: each family's start functions, call kinds, bounds ---- */

/* updates.c */
void handler_start_update (Call *call);
void handler_start_remove (Call *call);
void handler_start_set_member_data (Call *call);
extern const CallKind handler_update_calls;

/* Checks request as Update does (fields, the board's options, the period
 * its time picks) and resolves ctx and update from it; *data gets the
 * encoded member data (g_free it), which update points into. */
gboolean handler_check_update (Call *call, const RankUpdateFields *request,
                               RankContext *ctx, RankUpdate *update,
                               char **data, GError **error);

/* reads.c */
void handler_start_get_rank (Call *call);
void handler_start_get_top_n (Call *call);
void handler_start_get_around (Call *call);
void handler_start_get_ranks (Call *call);
void handler_start_get_member_data (Call *call);

/* Answers with rows: success a list<Entry> (list) or one Entry. */
void handler_reply_rows (Call *call, const RankRow *rows, gsize n,
                         gboolean list);

/* A store operation's answer that is a page (GetTopN, GetAround, Sample). */
void handler_rows_answered (const RankRow *rows, gsize n, const GError *error,
                            gpointer data);

/* cached_reads.c */
extern const CallKind handler_cached_read_calls;
/* The handler's inflight table's values. */
void handler_flight_free (gpointer flight);

/* queries.c */
void handler_start_count (Call *call);
void handler_start_get_percentile (Call *call);
void handler_start_get_score_at_percentile (Call *call);
void handler_start_sample (Call *call);

/* update_batch.c */
void handler_start_update_batch (Call *call);
extern const CallKind handler_update_batch_calls;

/* server_info.c */
void handler_start_get_server_info (Call *call);
/* Notes when the process started, for uptime_seconds. */
void handler_server_info_init (void);

/* queue_methods.c */
void handler_start_enqueue (Call *call);
void handler_start_get_queue_status (Call *call);
gsize handler_bound_enqueue (const ThriftStruct *args);
extern const CallKind handler_enqueue_calls;

/* admin.c */
void handler_start_list_boards (Call *call);
void handler_start_get_board_info (Call *call);
void handler_start_delete_board (Call *call);
void handler_start_reset_board (Call *call);
void handler_start_export (Call *call);
gsize handler_bound_list_boards (const ThriftStruct *args);
gsize handler_bound_board_info (const ThriftStruct *args);
gsize handler_bound_export (const ThriftStruct *args);
extern const CallKind handler_list_boards_calls;
extern const CallKind handler_board_info_calls;

#endif /* RANK_HANDLER_PRIVATE_H */
