/* service.c -- the service tests' shared processes and calls (see
 * service.h). */
#include "service.h"

RankTestProcess *redis;
RankTestProcess *rankd;
RankClient *client;

void
service_start (int *argc, char ***argv)
{
  g_test_init (argc, argv, NULL);
  redis = rank_test_redis_start (NULL);
  rankd = rank_test_rankd_start (redis->port, NULL);
  client = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
}

int
service_run (void)
{
  int status = g_test_run ();

  g_clear_pointer (&client, rank_client_free);
  stop_checked (rankd);
  rank_test_process_free (rankd);
  rank_test_process_free (redis);
  return status;
}

Result
update (const char *board, const char *member, gint64 value, const char *rid,
        int mode, gint64 ts)
{
  return update_on (client, board, member, value, rid, mode, ts);
}

Result
get_rank (const char *board, const char *member)
{
  return get_rank_on (client, board, member);
}

GPtrArray *
top (const char *board, gint32 n, gint32 offset)
{
  g_auto (Result) r = { 0 };
  GPtrArray *page = top_on (client, board, n, offset, &r);

  if (page == NULL)
    g_error ("GetTopN(%s, %d, %d) failed: %s: %s", board, n, offset,
             kind_names[r.kind], r.message);
  return page;
}

void
assert_update (Result r, gint64 score, gint64 rank, gboolean applied)
{
  assert_ok (&r);
  g_assert_cmpint (r.score, ==, score);
  g_assert_true (r.has_rank);
  g_assert_cmpint (r.rank, ==, rank);
  g_assert_cmpint (r.applied, ==, applied);
  result_clear (&r);
}

void
assert_rank (const char *board, const char *member, gint64 score, gint64 rank)
{
  g_auto (Result) r = get_rank (board, member);

  assert_ok (&r);
  g_assert_cmpint (r.score, ==, score);
  g_assert_cmpint (r.rank, ==, rank);
}

gsize
rankd_rss (void)
{
  return rank_test_rss_kib (rankd->pid);
}

void
assert_still_serving (void)
{
  g_autofree char *b = rank_test_unique ("alive");
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_auto (Result) r = update_on (c, b, "ann", 1, "x", NO_MODE, NO_TIME);

  assert_ok (&r);
}
