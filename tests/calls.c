/* calls.c -- calling rankd from tests (see calls.h). */
#include "calls.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>

#include <thrift/c_glib/thrift_application_exception.h>

const char *const kind_names[] = { "OK", "InvalidArgument", "NotFound",
                                   "Unavailable", "TApplicationException" };

void
result_clear (Result *r)
{
  g_clear_pointer (&r->message, g_free);
}

static void
take_exception (Result *r, GObject *x, Kind kind)
{
  r->kind = kind;
  g_object_get (x, "message", &r->message, NULL);
  g_object_unref (x);
}

static void
take_error (Result *r, GError *error)
{
  g_assert_nonnull (error);
  if (error->domain != THRIFT_APPLICATION_EXCEPTION_ERROR)
    g_error ("transport failure: %s", error->message);
  r->kind = APP_ERROR;
  r->message = g_strdup (error->message);
  g_error_free (error);
}

rankUpdateRequest *
update_request_new (const char *board, const char *member, gint64 value,
                    const char *rid, int mode, gint64 ts)
{
  rankUpdateRequest *req
      = g_object_new (RANK_TYPE_UPDATE_REQUEST, "board", board, "member",
                      member, "value", value, "request_id", rid, NULL);

  /* Fields, not properties: the properties refuse out-of-range values, and
   * the tests send those on purpose. */
  if (mode != NO_MODE)
    {
      req->mode = (rankUpdateMode) mode;
      req->__isset_mode = TRUE;
    }
  if (ts != NO_TIME)
    {
      req->timestamp_ms = ts;
      req->__isset_timestamp_ms = TRUE;
    }
  return req;
}

Result
update_on (RankClient *c, const char *board, const char *member, gint64 value,
           const char *rid, int mode, gint64 ts)
{
  rankUpdateRequest *req
      = update_request_new (board, member, value, rid, mode, ts);
  Result r = update_request_on (c, req);

  g_object_unref (req);
  return r;
}

static void
copy_subscores (Result *r, const GArray *subscores, gboolean isset)
{
  r->n_subscores = isset ? subscores->len : 0;
  g_assert_cmpuint (r->n_subscores, <=, G_N_ELEMENTS (r->subscores));
  for (guint i = 0; i < r->n_subscores; i++)
    r->subscores[i] = g_array_index (subscores, gint64, i);
}

Result
update_request_on (RankClient *c, rankUpdateRequest *req)
{
  Result r = { 0 };
  rankUpdateResponse *resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;

  if (rank_ranking_if_update (rank_client_iface (c), &resp, req, &invalid,
                              &unavailable, &denied, &error))
    {
      r.kind = OK;
      r.score = resp->score;
      r.rank = resp->rank;
      r.has_rank = resp->__isset_rank;
      r.applied = resp->applied;
      copy_subscores (&r, resp->subscores, resp->__isset_subscores);
    }
  else if (invalid != NULL)
    take_exception (&r, G_OBJECT (invalid), INVALID);
  else if (unavailable != NULL)
    take_exception (&r, G_OBJECT (unavailable), UNAVAILABLE);
  else
    take_error (&r, error);
  g_object_unref (resp);
  return r;
}

Result
get_rank_on (RankClient *c, const char *board, const char *member)
{
  return get_rank_back_on (c, board, member, 0);
}

Result
get_rank_back_on (RankClient *c, const char *board, const char *member,
                  gint32 periods_back)
{
  Result r = { 0 };
  rankEntry *entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;
  g_autoptr (rankGetRankRequest) request
      = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board, "member",
                      member, "periods_back", periods_back, NULL);

  if (rank_ranking_if_get_rank (rank_client_iface (c), &entry, request,
                                &invalid, &not_found, &unavailable, &denied,
                                &error))
    {
      r.kind = OK;
      g_assert_cmpstr (entry->member, ==, member);
      r.score = entry->score;
      r.rank = entry->rank;
      r.has_rank = TRUE;
      copy_subscores (&r, entry->subscores, entry->__isset_subscores);
    }
  else if (invalid != NULL)
    take_exception (&r, G_OBJECT (invalid), INVALID);
  else if (not_found != NULL)
    take_exception (&r, G_OBJECT (not_found), NOT_FOUND);
  else if (unavailable != NULL)
    take_exception (&r, G_OBJECT (unavailable), UNAVAILABLE);
  else
    take_error (&r, error);
  g_object_unref (entry);
  return r;
}

GPtrArray *
top_on (RankClient *c, const char *board, gint32 n, gint32 offset, Result *r)
{
  return top_back_on (c, board, n, offset, 0, r);
}

static GPtrArray *
top_call (RankClient *c, const char *board, gint32 n, gint32 offset,
          gint32 periods_back, gboolean with_data, gboolean window, Result *r)
{
  GPtrArray *page = g_ptr_array_new_with_free_func (g_object_unref);
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;
  g_autoptr (rankGetTopNRequest) request = g_object_new (
      RANK_TYPE_GET_TOP_N_REQUEST, "board", board, "n", n, "offset", offset,
      "periods_back", periods_back, "with_data", with_data, NULL);

  if (window)
    g_object_set (request, "window", TRUE, NULL);
  memset (r, 0, sizeof *r);
  if (rank_ranking_if_get_top_n (rank_client_iface (c), &page, request,
                                 &invalid, &unavailable, &denied, &error))
    return page;
  g_ptr_array_unref (page);
  if (invalid != NULL)
    take_exception (r, G_OBJECT (invalid), INVALID);
  else if (unavailable != NULL)
    take_exception (r, G_OBJECT (unavailable), UNAVAILABLE);
  else
    take_error (r, error);
  return NULL;
}

GPtrArray *
top_back_on (RankClient *c, const char *board, gint32 n, gint32 offset,
             gint32 periods_back, Result *r)
{
  return top_call (c, board, n, offset, periods_back, FALSE, FALSE, r);
}

GPtrArray *
top_window_on (RankClient *c, const char *board, gint32 n, gint32 offset,
               Result *r)
{
  return top_call (c, board, n, offset, 0, FALSE, TRUE, r);
}

GPtrArray *
top_data_on (RankClient *c, const char *board, gint32 n, gint32 offset,
             Result *r)
{
  return top_call (c, board, n, offset, 0, TRUE, FALSE, r);
}

#define RETRY_PAUSE_MS 20

void
update_until_acknowledged (RankClient **client, guint16 port, const char *board,
                           const char *member, gint64 delta, const char *rid,
                           gint64 deadline, RetryStats *stats,
                           gint *unavailable_total)
{
  for (;;)
    {
      rankUpdateRequest *req
          = g_object_new (RANK_TYPE_UPDATE_REQUEST, "board", board, "member",
                          member, "value", delta, "request_id", rid, NULL);
      rankUpdateResponse *resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
      rankInvalidArgument *invalid = NULL;
      rankPermissionDenied *denied = NULL;
      rankUnavailable *unavailable = NULL;
      g_autoptr (GError) error = NULL;
      gboolean ok = FALSE;

      if (g_get_monotonic_time () > deadline)
        g_error ("no progress before the deadline: update %s", rid);
      if (*client == NULL)
        *client = rank_client_connect ("127.0.0.1", port, TRUE,
                                       RANK_PROTOCOL_BINARY, 5000, &error);
      if (*client != NULL)
        ok = rank_ranking_if_update (rank_client_iface (*client), &resp, req,
                                     &invalid, &unavailable, &denied, &error);
      if (ok && !resp->applied)
        stats->not_applied++;
      if (invalid != NULL)
        g_error ("update %s refused as invalid", rid);
      if (unavailable != NULL)
        {
          stats->unavailable++;
          if (unavailable_total != NULL)
            g_atomic_int_inc (unavailable_total);
        }
      else if (!ok)
        {
          /* The connection is gone (rankd restarting) or never came. */
          stats->transport_errors++;
          g_clear_pointer (client, rank_client_free);
        }
      g_clear_object (&unavailable);
      g_object_unref (resp);
      g_object_unref (req);
      if (ok)
        return;
      /* A client's back-off between retries, not a wait for a condition. */
      g_usleep (RETRY_PAUSE_MS * 1000);
    }
}

void
assert_ok (const Result *r)
{
  if (r->kind != OK)
    g_error ("expected success, got %s: %s", kind_names[r->kind], r->message);
}

void
assert_fails (const Result *r, Kind kind, const char *want)
{
  if (r->kind != kind)
    g_error ("expected %s, got %s (%s)", kind_names[kind], kind_names[r->kind],
             r->message ? r->message : "");
  if (want != NULL && strstr (r->message, want) == NULL)
    g_error ("%s message '%s' lacks '%s'", kind_names[kind], r->message, want);
}

redisContext *
redis_connect (guint16 port)
{
  redisContext *c = redisConnect ("127.0.0.1", port);

  g_assert_nonnull (c);
  g_assert_cmpint (c->err, ==, 0);
  return c;
}

void
stop_checked (RankTestProcess *p)
{
  int status = rank_test_stop (p);

  /* 0 also means valgrind found nothing, when it wraps rankd. */
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
}

/* ---- updates ---- */

void
rank_test_bed_start (RankTestBed *bed, const char *config_text)
{
  /* A fixed seed: Sample's draws repeat from run to run. */
  const char *args[] = { "--config", NULL, "--random-seed", "20261122", NULL };

  bed->dir = g_dir_make_tmp ("rankd-bed-XXXXXX", NULL);
  g_assert_nonnull (bed->dir);
  bed->config = g_build_filename (bed->dir, "rankd.conf", NULL);
  g_assert_true (g_file_set_contents (bed->config, config_text, -1, NULL));
  args[1] = bed->config;
  bed->redis = rank_test_redis_start (NULL);
  bed->rankd = rank_test_rankd_start (bed->redis->port, args);
  bed->client = rank_test_client (bed->rankd->port, TRUE, RANK_PROTOCOL_BINARY);
}

void
rank_test_bed_stop (RankTestBed *bed)
{
  rank_client_free (bed->client);
  stop_checked (bed->rankd);
  rank_test_process_free (bed->rankd);
  rank_test_kill (bed->redis);
  rank_test_process_free (bed->redis);
  g_unlink (bed->config);
  g_rmdir (bed->dir);
  g_free (bed->config);
  g_free (bed->dir);
}

/* ---- calls encoded by hand ---- */

void
frame_put_u8 (GByteArray *b, guint8 v)
{
  g_byte_array_append (b, &v, 1);
}

void
frame_put_u32 (GByteArray *b, guint32 v)
{
  guint32 be = GUINT32_TO_BE (v);

  g_byte_array_append (b, (const guint8 *) &be, 4);
}

void
frame_put_str (GByteArray *b, const char *s)
{
  frame_put_u32 (b, (guint32) strlen (s));
  g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s));
}

GByteArray *
frame_begin (const char *method, gint32 seqid)
{
  GByteArray *b = g_byte_array_new ();

  frame_put_u32 (b, 0);           /* the frame length, at the end */
  frame_put_u32 (b, 0x80010001u); /* version 1, CALL */
  frame_put_str (b, method);
  frame_put_u32 (b, (guint32) seqid);
  return b;
}

/* Field header of the binary protocol: type, then the 16-bit id. */
void
frame_field (GByteArray *b, guint8 type, guint8 id)
{
  frame_put_u8 (b, type);
  frame_put_u8 (b, 0);
  frame_put_u8 (b, id);
}

void
frame_request (GByteArray *b)
{
  frame_field (b, 12, 1); /* 1: the request struct */
}

void
frame_request_end (GByteArray *b)
{
  frame_put_u8 (b, 0); /* the request struct's stop */
}

void
frame_end (GByteArray *b)
{
  guint32 len;

  frame_put_u8 (b, 0); /* stop */
  len = GUINT32_TO_BE (b->len - 4);
  memcpy (b->data, &len, 4);
}

/* ---- the argument lists of the tests, on the request structs ---- */

gboolean
positional_get_around (rankRankingIf *iface, GPtrArray **out, const char *board,
                       const char *member, gint32 radius, gint32 periods_back,
                       gboolean with_data, rankInvalidArgument **invalid,
                       rankNotFound **not_found, rankUnavailable **unavailable,
                       GError **error)
{
  g_autoptr (rankGetAroundRequest) req = g_object_new (
      RANK_TYPE_GET_AROUND_REQUEST, "board", board, "member", member, "radius",
      radius, "periods_back", periods_back, "with_data", with_data, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_around (iface, out, req, invalid, not_found,
                                            unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_get_ranks (rankRankingIf *iface, GPtrArray **out, const char *board,
                      GPtrArray *members, gint32 periods_back,
                      rankInvalidArgument **invalid,
                      rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankGetRanksRequest) req
      = g_object_new (RANK_TYPE_GET_RANKS_REQUEST, "board", board,
                      "periods_back", periods_back, NULL);

  for (guint i = 0; i < members->len; i++)
    g_ptr_array_add (req->members, g_strdup (members->pdata[i]));
  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_ranks (iface, out, req, invalid,
                                           unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_remove (rankRankingIf *iface, rankRemoveResponse **out,
                   const char *board, const char *member,
                   const char *request_id, rankInvalidArgument **invalid,
                   rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankRemoveRequest) req
      = g_object_new (RANK_TYPE_REMOVE_REQUEST, "board", board, "member",
                      member, "request_id", request_id, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_remove (iface, out, req, invalid, unavailable,
                                        &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_count (rankRankingIf *iface, gint64 *out, const char *board,
                  gint32 periods_back, rankInvalidArgument **invalid,
                  rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankCountRequest) req
      = g_object_new (RANK_TYPE_COUNT_REQUEST, "board", board, "periods_back",
                      periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_count (iface, out, req, invalid, unavailable,
                                       &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_count_between (rankRankingIf *iface, gint64 *out, const char *board,
                          gint64 min_score, gint64 max_score,
                          gint32 periods_back, rankInvalidArgument **invalid,
                          rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankCountBetweenRequest) req = g_object_new (
      RANK_TYPE_COUNT_BETWEEN_REQUEST, "board", board, "min_score", min_score,
      "max_score", max_score, "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_count_between (iface, out, req, invalid,
                                               unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_get_percentile (rankRankingIf *iface, double *out, const char *board,
                           const char *member, gint32 periods_back,
                           rankInvalidArgument **invalid,
                           rankNotFound **not_found,
                           rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankGetPercentileRequest) req
      = g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board", board,
                      "member", member, "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_percentile (
      iface, out, req, invalid, not_found, unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_get_score_at_percentile (
    rankRankingIf *iface, gint64 *out, const char *board, double pct,
    gint32 periods_back, rankInvalidArgument **invalid,
    rankNotFound **not_found, rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankGetScoreAtPercentileRequest) req
      = g_object_new (RANK_TYPE_GET_SCORE_AT_PERCENTILE_REQUEST, "board", board,
                      "pct", pct, "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_score_at_percentile (
      iface, out, req, invalid, not_found, unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_sample (rankRankingIf *iface, GPtrArray **out, const char *board,
                   gint64 min_score, gint64 max_score, gint32 count,
                   gint32 periods_back, rankInvalidArgument **invalid,
                   rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankSampleRequest) req
      = g_object_new (RANK_TYPE_SAMPLE_REQUEST, "board", board, "min_score",
                      min_score, "max_score", max_score, "count", count,
                      "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_sample (iface, out, req, invalid, unavailable,
                                        &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_set_member_data (rankRankingIf *iface, const char *board,
                            const char *member, GHashTable *data,
                            rankInvalidArgument **invalid,
                            rankNotFound **not_found,
                            rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankSetMemberDataRequest) req
      = g_object_new (RANK_TYPE_SET_MEMBER_DATA_REQUEST, "board", board,
                      "member", member, NULL);
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, data);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_hash_table_insert (req->data, g_strdup (k), g_strdup (v));
  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_set_member_data (iface, req, invalid, not_found,
                                                 unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_get_member_data (rankRankingIf *iface, GHashTable **out,
                            const char *board, const char *member,
                            gint32 periods_back, rankInvalidArgument **invalid,
                            rankNotFound **not_found,
                            rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankGetMemberDataRequest) req
      = g_object_new (RANK_TYPE_GET_MEMBER_DATA_REQUEST, "board", board,
                      "member", member, "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_member_data (
      iface, out, req, invalid, not_found, unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_get_rank (rankRankingIf *iface, rankEntry **out, const char *board,
                     const char *member, gint32 periods_back,
                     rankInvalidArgument **invalid, rankNotFound **not_found,
                     rankUnavailable **unavailable, GError **error)
{
  g_autoptr (rankGetRankRequest) req
      = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board, "member",
                      member, "periods_back", periods_back, NULL);

  rankPermissionDenied *denied = NULL;
  gboolean ok = rank_ranking_if_get_rank (iface, out, req, invalid, not_found,
                                          unavailable, &denied, error);

  g_clear_object (&denied);
  return ok;
}

gboolean
positional_send_get_rank (rankRankingIf *iface, const char *board,
                          const char *member, gint32 periods_back,
                          GError **error)
{
  g_autoptr (rankGetRankRequest) req
      = g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board, "member",
                      member, "periods_back", periods_back, NULL);

  return rank_ranking_client_send_get_rank (iface, req, error);
}

gboolean
positional_send_get_top_n (rankRankingIf *iface, const char *board, gint32 n,
                           gint32 offset, gint32 periods_back,
                           gboolean with_data, GError **error)
{
  g_autoptr (rankGetTopNRequest) req = g_object_new (
      RANK_TYPE_GET_TOP_N_REQUEST, "board", board, "n", n, "offset", offset,
      "periods_back", periods_back, "with_data", with_data, NULL);

  return rank_ranking_client_send_get_top_n (iface, req, error);
}
