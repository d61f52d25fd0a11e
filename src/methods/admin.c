/* admin.c -- the methods that look after boards as a whole:
 * ListBoards, GetBoardInfo, DeleteBoard, ResetBoard and Export (see
 * call.c for the calls, dispatch.c for the method table; store_admin.c
 * does their Redis side).
 *
 * None of them checks the board's stored layout against its options
 * first, as the data methods do: they must work on a board whose layout no
 * longer fits (GetBoardInfo shows both, DeleteBoard clears it).
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "constants.h"
#include "error.h"
#include "handler_private.h"
#include "layout.h"
#include "memberdata.h"
#include "rank_ranking_types.h"
#include "validate.h"

/* Reply sizes (server.c reserves them): a board's name and a few numbers
 * a row; an entry with its data at the limits. */
#define BOARD_ROW_BYTES (RANK_BOARD_MAX_BYTES + 48)
#define EXPORT_ENTRY_BYTES                                                     \
  (RANK_MEMBER_MAX_BYTES + 64 + 8 * RANK_SUBSCORES_MAX                         \
   + 8 * RANK_DATA_KEYS_MAX + RANK_DATA_TOTAL_MAX_BYTES)
#define BOUND_BASE 1024

gsize
handler_bound_list_boards (const ThriftStruct *args)
{
  const rankListBoardsRequest *a
      = ((const rankRankingListBoardsArgs *) args)->request;

  return BOUND_BASE
         + (gsize) CLAMP (a->limit, 1, RANK_LIST_BOARDS_MAX) * BOARD_ROW_BYTES;
}

gsize
handler_bound_board_info (const ThriftStruct *args)
{
  /* The options, and a label for each period kept. */
  return 4 * BOUND_BASE + (gsize) RANK_RETENTION_MAX * 48;
}

gsize
handler_bound_export (const ThriftStruct *args)
{
  const rankExportRequest *a = ((const rankRankingExportArgs *) args)->request;

  return BOUND_BASE
         + (gsize) CLAMP (a->count, 1, RANK_EXPORT_COUNT_MAX)
               * EXPORT_ENTRY_BYTES;
}

/* The parts of a call that several store operations answer: the first
 * error, and how many are still to come. */
typedef struct
{
  guint pending;
  GError *error;
} Countdown;

/* TRUE when the last part is in. */
static gboolean
countdown_done (Countdown *c, const GError *error)
{
  if (error != NULL && c->error == NULL)
    c->error = g_error_copy (error);
  g_assert (c->pending > 0);
  return --c->pending == 0;
}

/* ---- ListBoards ---- */

/* One board of the page, with its own context for its Count. */
typedef struct
{
  Call *call;
  char *board;
  gboolean configured;
  gint64 members;
  RankContext ctx;
} ListRow;

/* A call of ListBoards. */
typedef struct
{
  Call call;
  GPtrArray *rows; /* ListRow; NULL until the boards are listed */
  gboolean more;
  /* The last board of the page read, listed or not: rows hold only the
   * boards the caller has admin on (authorize.c), and the next page starts
   * after this one. */
  char *last;
  Countdown countdown;
} ListCall;

static void
list_row_free (gpointer data)
{
  ListRow *row = data;

  rank_context_clear (&row->ctx);
  g_free (row->board);
  g_free (row);
}

static void
list_call_clear (Call *call)
{
  ListCall *list = (ListCall *) call;

  if (list->rows != NULL)
    g_ptr_array_unref (list->rows);
  g_free (list->last);
  g_clear_error (&list->countdown.error);
}

const CallKind handler_list_boards_calls
    = { sizeof (ListCall), list_call_clear };

static void
set_list_response (GObject *object, gpointer data)
{
  rankRankingListBoardsResult *result
      = RANK_RANKING_LIST_BOARDS_RESULT (object);
  ListCall *list = data;
  rankListBoardsResponse *response = result->success;

  for (guint i = 0; i < list->rows->len; i++)
    {
      const ListRow *row = list->rows->pdata[i];
      rankBoardSummary *summary = g_object_new (RANK_TYPE_BOARD_SUMMARY, NULL);

      summary->board = g_strdup (row->board);
      summary->configured = row->configured;
      summary->members = row->members;
      g_ptr_array_add (response->boards, summary);
    }
  if (list->more && list->last != NULL)
    {
      response->next_after = g_strdup (list->last);
      response->__isset_next_after = TRUE;
    }
  result->__isset_success = TRUE;
}

static void
list_part_done (Call *call, const GError *error)
{
  ListCall *list = (ListCall *) call;

  if (!countdown_done (&list->countdown, error))
    return;
  if (list->countdown.error != NULL)
    handler_reply_error (call, list->countdown.error);
  else
    handler_reply_result (call, set_list_response, list);
}

static void
list_counted (gint64 count, const GError *error, gpointer data)
{
  ListRow *row = data;

  row->members = count;
  list_part_done (row->call, error);
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The page: the boards written to (names, from Redis) and the configured
 * ones, merged, after the request's after, at most limit of them. */
static void
boards_listed (const char *const *names, guint n, const GError *error,
               gpointer data)
{
  Call *call = data;
  const rankListBoardsRequest *request
      = RANK_RANKING_LIST_BOARDS_ARGS (call->args)->request;
  const char *after = request->after != NULL ? request->after : "";
  guint limit = (guint) request->limit;
  ListCall *list = (ListCall *) call;
  g_auto (GStrv) configured = NULL;
  g_autoptr (GHashTable) in_config = NULL;
  g_autoptr (GPtrArray) all = NULL;
  RankCountQuery query = { FALSE, 0, 0 };

  if (error != NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  configured = rank_config_board_names (call->handler->config);
  in_config = g_hash_table_new (g_str_hash, g_str_equal);
  all = g_ptr_array_new ();
  for (char **b = configured; *b != NULL; b++)
    {
      g_hash_table_add (in_config, *b);
      if (strcmp (*b, after) > 0)
        g_ptr_array_add (all, *b);
    }
  for (guint i = 0; i < n; i++)
    if (!g_hash_table_contains (in_config, names[i]))
      g_ptr_array_add (all, (gpointer) names[i]);
  g_ptr_array_sort (all, compare_names);
  /* Redis gave at most limit names: past its last, there may be more. */
  list->more = all->len > limit || n == limit;
  for (guint i = 0; i < MIN (all->len, limit); i++)
    {
      ListRow *row;

      g_free (list->last);
      list->last = g_strdup (all->pdata[i]);
      if (!handler_allows (call, RANK_ROLE_ADMIN, all->pdata[i]))
        continue;
      row = g_new0 (ListRow, 1);
      row->call = call;
      row->board = g_strdup (all->pdata[i]);
      row->configured = g_hash_table_contains (in_config, row->board);
      g_ptr_array_add (list->rows, row);
    }
  list->countdown.pending = list->rows->len + 1;
  for (guint i = 0; i < list->rows->len; i++)
    {
      ListRow *row = list->rows->pdata[i];

      rank_context_init (&row->ctx, call->handler->config, row->board,
                         handler_now (call), call->start_us,
                         call->handler->default_window_ms);
      /* The current period is always readable. */
      rank_context_read (&row->ctx, 0, NULL);
      rank_store_count (call->handler->store, &row->ctx, &query, list_counted,
                        row);
    }
  list_part_done (call, NULL);
}

void
handler_start_list_boards (Call *call)
{
  const rankListBoardsRequest *request
      = RANK_RANKING_LIST_BOARDS_ARGS (call->args)->request;
  const char *after = request->after != NULL ? request->after : "";
  g_autoptr (GError) error = NULL;
  ListCall *list = (ListCall *) call;

  if (request->limit < 1 || request->limit > RANK_LIST_BOARDS_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "limit: %d is not 1-%d", request->limit, RANK_LIST_BOARDS_MAX);
  else if (strlen (after) > RANK_BOARD_MAX_BYTES)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "after: longer than a board name (%d bytes)",
                 RANK_BOARD_MAX_BYTES);
  if (error != NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  list->rows = g_ptr_array_new_with_free_func (list_row_free);
  rank_store_list_boards (call->handler->store, after, (guint) request->limit,
                          boards_listed, call);
}

/* ---- GetBoardInfo ---- */

/* A call of GetBoardInfo. */
typedef struct
{
  Call call;
  gint64 members;
  gboolean counted;
  RankBoardStats *stats; /* a copy */
  Countdown countdown;
} InfoCall;

static void
info_call_clear (Call *call)
{
  InfoCall *info = (InfoCall *) call;

  if (info->stats != NULL)
    {
      g_ptr_array_unref (info->stats->periods);
      g_free ((char *) info->stats->stored_layout);
      g_free (info->stats);
    }
  g_clear_error (&info->countdown.error);
}

const CallKind handler_board_info_calls
    = { sizeof (InfoCall), info_call_clear };

static void
add_option (GHashTable *options, const char *name, char *value)
{
  g_hash_table_insert (options, g_strdup (name), value);
}

/* The options in force, by their config names. */
static void
describe_options (GHashTable *out, const RankBoardOptions *o, gint64 window_ms)
{
  static const char *const periods[]
      = { "none", "hourly", "daily", "weekly", "monthly", "custom" };
  static const char *const kinds[] = { "", "ordinal", "competition", "dense" };
  static const char *const modes[]
      = { "", "increment", "best", "set", "remove" };
  g_autoptr (GString) subscores = g_string_new (NULL);

  add_option (out, "shards", g_strdup_printf ("%u", o->shards));
  add_option (out, "order",
              g_strdup (o->order == RANK_ORDER_ASC ? "asc" : "desc"));
  add_option (out, "rank", g_strdup (kinds[o->rank]));
  add_option (out, "period", g_strdup (periods[o->period.kind]));
  add_option (out, "retention",
              g_strdup_printf (
                  "%u", o->period.kind == RANK_PERIOD_NONE ? 0 : o->retention));
  add_option (out, "cap", g_strdup_printf ("%u", o->cap));
  add_option (out, "window", g_strdup_printf ("%u", o->window));
  add_option (out, "mode", g_strdup (modes[o->mode]));
  add_option (out, "dedup_window_ms",
              g_strdup_printf ("%" G_GINT64_FORMAT, window_ms));
  for (guint i = 0; i < o->n_subscores; i++)
    g_string_append_printf (subscores, "%s%s", i ? "," : "",
                            o->subscore_asc[i] ? "asc" : "desc");
  add_option (out, "subscores", g_strdup (subscores->str));
}

static void
set_board_info (GObject *object, gpointer data)
{
  rankRankingGetBoardInfoResult *result
      = RANK_RANKING_GET_BOARD_INFO_RESULT (object);
  Call *call = data;
  InfoCall *info_call = (InfoCall *) call;
  rankBoardInfo *info = result->success;
  g_auto (GStrv) configured = rank_config_board_names (call->handler->config);

  info->board = g_strdup (call->ctx.board);
  info->configured
      = g_strv_contains ((const char *const *) configured, call->ctx.board);
  describe_options (info->options, call->ctx.options,
                    call->ctx.dedup_window_ms);
  info->members = info_call->members;
  for (guint i = 0; i < info_call->stats->periods->len; i++)
    g_ptr_array_add (info->periods,
                     g_strdup (info_call->stats->periods->pdata[i]));
  info->keys = info_call->stats->keys;
  info->memory_bytes = info_call->stats->memory_bytes;
  if (info_call->stats->stored_layout != NULL)
    {
      info->stored_layout = g_strdup (info_call->stats->stored_layout);
      info->__isset_stored_layout = TRUE;
    }
  result->__isset_success = TRUE;
}

static void
info_part_done (Call *call, const GError *error)
{
  InfoCall *info_call = (InfoCall *) call;

  if (!countdown_done (&info_call->countdown, error))
    return;
  if (info_call->countdown.error != NULL)
    handler_reply_error (call, info_call->countdown.error);
  else
    handler_reply_result (call, set_board_info, call);
}

static void
info_counted (gint64 count, const GError *error, gpointer data)
{
  Call *call = data;
  InfoCall *info_call = (InfoCall *) call;

  info_call->members = count;
  info_part_done (call, error);
}

static void
info_walked (const RankBoardStats *stats, const GError *error, gpointer data)
{
  Call *call = data;
  InfoCall *info_call = (InfoCall *) call;

  if (stats != NULL)
    {
      info_call->stats = g_new0 (RankBoardStats, 1);
      *info_call->stats = *stats;
      info_call->stats->periods = g_ptr_array_ref (stats->periods);
      info_call->stats->stored_layout = g_strdup (stats->stored_layout);
    }
  info_part_done (call, error);
}

void
handler_start_get_board_info (Call *call)
{
  const rankGetBoardInfoRequest *request
      = RANK_RANKING_GET_BOARD_INFO_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;
  RankCountQuery query = { FALSE, 0, 0 };
  InfoCall *info_call = (InfoCall *) call;

  if (!handler_resolve_read (call, request->board, 0, FALSE, &error))
    {
      handler_reply_error (call, error);
      return;
    }
  info_call->countdown.pending = 2;
  rank_store_count (call->handler->store, &call->ctx, &query, info_counted,
                    call);
  rank_store_board_stats (call->handler->store, &call->ctx, info_walked, call);
}

/* ---- DeleteBoard, ResetBoard ---- */

static void
set_cleared (GObject *object, gpointer data)
{
  const gint64 *r = data;

  /* DeleteBoardResponse and ResetBoardResponse have the same fields. */
  if (RANK_IS_RANKING_DELETE_BOARD_RESULT (object))
    {
      rankRankingDeleteBoardResult *result
          = RANK_RANKING_DELETE_BOARD_RESULT (object);

      result->success->applied = r[0] != 0;
      result->success->keys_removed = r[1];
      result->__isset_success = TRUE;
    }
  else
    {
      rankRankingResetBoardResult *result
          = RANK_RANKING_RESET_BOARD_RESULT (object);

      result->success->applied = r[0] != 0;
      result->success->keys_removed = r[1];
      result->__isset_success = TRUE;
    }
}

static void
cleared (gboolean applied, gint64 keys_removed, const GError *error,
         gpointer data)
{
  Call *call = data;
  gint64 r[2] = { applied, keys_removed };

  if (error != NULL)
    handler_reply_error (call, error);
  else
    {
      call->changed = applied; /* FALSE: a replay */
      handler_reply_result (call, set_cleared, r);
    }
}

static void
start_clear (Call *call, const char *board, const char *request_id,
             RankClearKind kind)
{
  g_autoptr (GError) error = NULL;

  if (!rank_validate_board (board, &error)
      || !rank_validate_request_id (request_id, &error))
    {
      handler_reply_error (call, error);
      return;
    }
  handler_resolve (call, board);
  call->writes = TRUE;
  rank_store_clear_board (call->handler->store, &call->ctx, kind, request_id,
                          cleared, call);
}

void
handler_start_delete_board (Call *call)
{
  const rankDeleteBoardRequest *request
      = RANK_RANKING_DELETE_BOARD_ARGS (call->args)->request;

  start_clear (call, request->board, request->request_id, RANK_CLEAR_DELETE);
}

void
handler_start_reset_board (Call *call)
{
  const rankResetBoardRequest *request
      = RANK_RANKING_RESET_BOARD_ARGS (call->args)->request;

  start_clear (call, request->board, request->request_id, RANK_CLEAR_RESET);
}

/* ---- Export ---- */

/* Export's cursor, as the client sees it: "SHARD:CURSOR" (HSCAN's, in the
 * shard's times hash). */
static gboolean
parse_cursor (const char *text, const RankBoardOptions *o,
              RankExportCursor *out, GError **error)
{
  const char *colon = text != NULL ? strchr (text, ':') : NULL;
  g_autofree char *shard = NULL;
  guint64 s, c;

  *out = (RankExportCursor){ 0, 0 };
  if (text == NULL || *text == '\0')
    return TRUE;
  if (colon != NULL)
    shard = g_strndup (text, (gsize) (colon - text));
  if (colon == NULL
      || !g_ascii_string_to_unsigned (shard, 10, 0, o->shards - 1, &s, NULL)
      || !g_ascii_string_to_unsigned (colon + 1, 10, 0, G_MAXUINT64, &c, NULL))
    {
      /* The cursor is any bytes the client sent: echoed escaped to
       * printable ASCII, since a message that is not UTF-8 fails the
       * client's decoding instead of reaching it as the exception. */
      g_autofree char *head = g_strndup (text, 40);
      g_autofree char *shown = g_strescape (head, NULL);

      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "cursor: \"%s\"%s (%zu bytes) is not one Export gave for "
                   "this board",
                   shown, strlen (text) > 40 ? "..." : "", strlen (text));
      return FALSE;
    }
  *out = (RankExportCursor){ (guint) s, c };
  return TRUE;
}

typedef struct
{
  const RankRow *rows;
  gsize n;
  const RankExportCursor *next;
} ExportPage;

static void
set_export_response (GObject *object, gpointer data)
{
  rankRankingExportResult *result = RANK_RANKING_EXPORT_RESULT (object);
  const ExportPage *page = data;
  rankExportResponse *response = result->success;

  for (gsize i = 0; i < page->n; i++)
    {
      const RankRow *row = &page->rows[i];
      rankExportEntry *e = g_object_new (RANK_TYPE_EXPORT_ENTRY, NULL);
      RankDataPair pairs[RANK_DATA_KEYS_MAX];
      guint n = 0;

      e->member = g_strndup (row->member, row->member_len);
      e->score = row->score;
      e->timestamp_ms = row->time_ms;
      if (row->n_subscores > 0)
        {
          g_array_append_vals (e->subscores, row->subscores, row->n_subscores);
          e->__isset_subscores = TRUE;
        }
      if (row->data != NULL
          && rank_member_data_parse (row->data, row->data_len, pairs, &n)
          && n > 0)
        {
          for (guint k = 0; k < n; k++)
            g_hash_table_insert (
                e->data, g_strndup (pairs[k].key, pairs[k].key_len),
                g_strndup (pairs[k].value, pairs[k].value_len));
          e->__isset_data = TRUE;
        }
      g_ptr_array_add (response->entries, e);
    }
  if (page->next != NULL)
    {
      response->next_cursor = g_strdup_printf (
          "%u:%" G_GUINT64_FORMAT, page->next->shard, page->next->cursor);
      response->__isset_next_cursor = TRUE;
    }
  result->__isset_success = TRUE;
}

static void
exported (const RankRow *rows, gsize n, const RankExportCursor *next,
          const GError *error, gpointer data)
{
  Call *call = data;
  ExportPage page = { rows, n, next };

  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_reply_result (call, set_export_response, &page);
}

void
handler_start_export (Call *call)
{
  const rankExportRequest *request
      = RANK_RANKING_EXPORT_ARGS (call->args)->request;
  g_autoptr (GError) error = NULL;
  RankExportCursor cursor;

  if (!handler_resolve_read (call, request->board, request->periods_back, FALSE,
                             &error))
    ;
  else if (request->count < 1 || request->count > RANK_EXPORT_COUNT_MAX)
    g_set_error (&error, RANK_ERROR, RANK_ERROR_INVALID,
                 "count: %d is not 1-%d", request->count,
                 RANK_EXPORT_COUNT_MAX);
  else
    parse_cursor (request->cursor, call->ctx.options, &cursor, &error);
  if (error != NULL)
    {
      handler_reply_error (call, error);
      return;
    }
  rank_store_export (call->handler->store, &call->ctx, &cursor,
                     (guint) request->count, exported, call);
}
