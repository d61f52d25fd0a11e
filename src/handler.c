/* handler.c -- Ranking methods (see handler.h).
 *
 * The generated processor owns the arguments and hands in allocated result
 * objects; a method fills them in place. A declared exception is created and
 * returned through its out-parameter with FALSE and no GError; anything else
 * (RANK_ERROR_INTERNAL) becomes a GError, which the processor sends as a
 * TApplicationException.
 */
#include "handler.h"

#include <string.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "error.h"
#include "constants.h"
#include "validate.h"

struct _RankHandler
{
  rankRankingHandler parent;
  RankStore *store;
};

G_DEFINE_TYPE (RankHandler, rank_handler, RANK_TYPE_RANKING_HANDLER)

/* Maps err (consumed) onto the method's exceptions. A method without a
 * NotFound exception passes NULL for not_found. Always returns FALSE. */
static gboolean
fail_with (GError *err, rankInvalidArgument **invalid, rankNotFound **not_found,
           rankUnavailable **unavailable, GError **error)
{
  if (err->domain == RANK_ERROR && err->code == RANK_ERROR_INVALID)
    *invalid = g_object_new (RANK_TYPE_INVALID_ARGUMENT, "message",
                             err->message, NULL);
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_NOT_FOUND
           && not_found != NULL)
    *not_found
        = g_object_new (RANK_TYPE_NOT_FOUND, "message", err->message, NULL);
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_UNAVAILABLE)
    *unavailable
        = g_object_new (RANK_TYPE_UNAVAILABLE, "message", err->message, NULL);
  else
    g_set_error_literal (error, THRIFT_APPLICATION_EXCEPTION_ERROR,
                         THRIFT_APPLICATION_EXCEPTION_ERROR_INTERNAL_ERROR,
                         err->message);
  g_error_free (err);
  return FALSE;
}

static gboolean
parse_mode (const rankUpdateRequest *request, RankMode *mode, GError **error)
{
  if (!request->__isset_mode)
    {
      *mode = RANK_MODE_INCREMENT;
      return TRUE;
    }
  switch (request->mode)
    {
    case RANK_UPDATE_MODE_INCREMENT:
      *mode = RANK_MODE_INCREMENT;
      return TRUE;
    case RANK_UPDATE_MODE_BEST:
      *mode = RANK_MODE_BEST;
      return TRUE;
    case RANK_UPDATE_MODE_SET:
      *mode = RANK_MODE_SET;
      return TRUE;
    default:
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "mode: %d is not an UpdateMode (INCREMENT=1, BEST=2, SET=3)",
                   (int) request->mode);
      return FALSE;
    }
}

static gboolean
check_update (const rankUpdateRequest *request, RankUpdate *update,
              GError **error)
{
  if (!rank_validate_board (request->board, error)
      || !rank_validate_member (request->member, error)
      || !rank_validate_request_id (request->request_id, error)
      || !parse_mode (request, &update->mode, error)
      || !rank_validate_score ("value", request->value, error))
    return FALSE;
  update->board = request->board;
  update->member = request->member;
  update->request_id = request->request_id;
  update->value = request->value;
  if (request->__isset_timestamp_ms)
    {
      if (!rank_validate_timestamp ("timestamp_ms", request->timestamp_ms,
                                    error))
        return FALSE;
      update->timestamp_ms = request->timestamp_ms;
    }
  else
    update->timestamp_ms = g_get_real_time () / 1000;
  return TRUE;
}

static gboolean
rank_handler_update (rankRankingIf *iface, rankUpdateResponse **_return,
                     const rankUpdateRequest *request,
                     rankInvalidArgument **invalid,
                     rankUnavailable **unavailable, GError **error)
{
  RankHandler *self = RANK_HANDLER (iface);
  RankUpdate update;
  RankUpdateResult result;
  GError *err = NULL;

  if (!check_update (request, &update, &err)
      || !rank_store_update (self->store, &update, &result, &err))
    return fail_with (err, invalid, NULL, unavailable, error);
  (*_return)->score = result.score;
  (*_return)->applied = result.applied;
  (*_return)->rank = result.rank;
  (*_return)->__isset_rank = result.rank > 0;
  return TRUE;
}

static gboolean
rank_handler_get_rank (rankRankingIf *iface, rankEntry **_return,
                       const gchar *board, const gchar *member,
                       rankInvalidArgument **invalid, rankNotFound **not_found,
                       rankUnavailable **unavailable, GError **error)
{
  RankHandler *self = RANK_HANDLER (iface);
  GError *err = NULL;
  gint64 score, rank;

  if (!rank_validate_board (board, &err) || !rank_validate_member (member, &err)
      || !rank_store_get_rank (self->store, board, member, &score, &rank, &err))
    return fail_with (err, invalid, not_found, unavailable, error);
  g_free ((*_return)->member);
  (*_return)->member = g_strdup (member);
  (*_return)->score = score;
  (*_return)->rank = rank;
  return TRUE;
}

static void
append_entry (const char *member, gsize member_len, gint64 score, gint64 rank,
              gpointer data)
{
  rankEntry *entry = g_object_new (RANK_TYPE_ENTRY, NULL);

  entry->member = g_strndup (member, member_len);
  entry->score = score;
  entry->rank = rank;
  g_ptr_array_add (data, entry);
}

static gboolean
rank_handler_get_top_n (rankRankingIf *iface, GPtrArray **_return,
                        const gchar *board, const gint32 n, const gint32 offset,
                        rankInvalidArgument **invalid,
                        rankUnavailable **unavailable, GError **error)
{
  RankHandler *self = RANK_HANDLER (iface);
  GError *err = NULL;

  if (!rank_validate_board (board, &err))
    return fail_with (err, invalid, NULL, unavailable, error);
  if (n < 1 || n > RANK_TOP_N_MAX)
    {
      g_set_error (&err, RANK_ERROR, RANK_ERROR_INVALID,
                   "n: must be 1-%d, got %d", RANK_TOP_N_MAX, n);
      return fail_with (err, invalid, NULL, unavailable, error);
    }
  if (offset < 0)
    {
      g_set_error (&err, RANK_ERROR, RANK_ERROR_INVALID,
                   "offset: must be >= 0, got %d", offset);
      return fail_with (err, invalid, NULL, unavailable, error);
    }
  if (!rank_store_get_top (self->store, board, offset, n, append_entry,
                           *_return, &err))
    {
      g_ptr_array_set_size (*_return, 0);
      return fail_with (err, invalid, NULL, unavailable, error);
    }
  return TRUE;
}

static void
rank_handler_class_init (RankHandlerClass *klass)
{
  rankRankingHandlerClass *h = RANK_RANKING_HANDLER_CLASS (klass);

  h->update = rank_handler_update;
  h->get_rank = rank_handler_get_rank;
  h->get_top_n = rank_handler_get_top_n;
}

static void
rank_handler_init (RankHandler *self)
{
  (void) self;
}

RankHandler *
rank_handler_new (RankStore *store)
{
  RankHandler *self = g_object_new (RANK_TYPE_HANDLER, NULL);

  self->store = store;
  return self;
}
