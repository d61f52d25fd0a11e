/* handler_private.h -- what the handler's files share (handler.c: the
 * calls, the method table, replies and the data methods; handler_admin.c:
 * board administration and Export). Not for other modules.
 */
#ifndef RANK_HANDLER_PRIVATE_H
#define RANK_HANDLER_PRIVATE_H

#include "handler.h"

#include "cache.h"
#include "connbuf.h"
#include "context.h"
#include "metrics.h"
#include "rank_ranking_types.h"
#include "store.h"
#include "call_args.h"

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
  gboolean binary; /* out is the binary protocol (the one-write paths) */
  RankMetricsCalls *metrics; /* this worker's call counters */
  RankReadCache *cache;      /* the rankd's read cache (cache.h) */
  GHashTable *inflight; /* answer key -> Flight: cached reads sent to Redis */
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
typedef struct _Batch Batch;

struct _Call
{
  RankHandler *handler;
  gpointer request;  /* the server's, for answered() */
  GByteArray *reply; /* the server's buffer this call's reply goes to */
  Method method;
  gint32 seqid;
  ThriftStruct *args;
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
  /* What a method decoded for its store operation. */
  RankUpdate update;
  char *data; /* encoded member data (Update, SetMemberData) */
  gsize data_len;
  Batch *batch; /* UpdateBatch */
  /* A read of a cached board that missed: the answer's key, and whether
   * it may be kept. */
  char *cache_key;
  RankCacheTicket ticket;
  gboolean leads; /* a Flight under cache_key waits for this call */
  /* A method's own state (handler_admin.c), freed with the call. */
  gpointer state;
  GDestroyNotify state_free;
};

/* Answers with a result struct of the call's method, success filled in by
 * set (NULL: nothing to fill); then ends the call. */
void handler_reply_result (Call *call,
                           void (*set) (GObject *result, gpointer data),
                           gpointer data);

/* Replies with err as the method's declared exception, or as an internal
 * error; then ends the call. */
void handler_reply_error (Call *call, const GError *err);

/* The call's context on board (already valid), at the handler's clock,
 * under the configuration in force. */
void handler_resolve (Call *call, const char *board);

/* The handler's clock for call: read at the call's first need of it, the
 * same for the rest of the call. */
gint64 handler_now (Call *call);

/* Validates board, resolves the context and checks periods_back. */
gboolean handler_resolve_read (Call *call, const char *board,
                               gint64 periods_back, GError **error);

/* Checks request as Update does (fields, the board's options, the period
 * its time picks) and resolves ctx and update from it; *data gets the
 * encoded member data (g_free it), which update points into. */
gboolean handler_check_update (Call *call, const RankUpdateFields *request,
                               RankContext *ctx, RankUpdate *update,
                               char **data, GError **error);

/* handler_queue.c */
void handler_start_enqueue (Call *call);
void handler_start_get_queue_status (Call *call);
gsize handler_bound_enqueue (const ThriftStruct *args);

/* handler_admin.c */
void handler_start_list_boards (Call *call);
void handler_start_get_board_info (Call *call);
void handler_start_delete_board (Call *call);
void handler_start_reset_board (Call *call);
void handler_start_export (Call *call);
gsize handler_bound_list_boards (const ThriftStruct *args);
gsize handler_bound_board_info (const ThriftStruct *args);
gsize handler_bound_export (const ThriftStruct *args);

#endif /* RANK_HANDLER_PRIVATE_H */
