/* test_sharding.c -- a sharded board answers exactly as an ordinary board
 * holding the same updates, on one Redis node and on three; a node that is
 * down gives Unavailable, never a partial answer; a bad configuration file
 * stops rankd at start.
 *
 * Each test starts its own redis-servers and rankd with a configuration
 * file (config.h) that shards the boards named below.
 */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "calls.h"
#include "constants.h"
#include "harness.h"
#include "shard.h"

#define SHARDS 10
#define DEEP_DEPTH 20000 /* board "sharded": room to read it all */

static const char config_text[] = "# test_sharding.c\n"
                                  "[board sharded]\n"
                                  "shards=10\n"
                                  "max_top_depth=20000\n"
                                  "\n"
                                  "[board capped]\n"
                                  "shards=10\n";

typedef struct
{
  RankTestProcess *nodes[3];
  guint n_nodes;
  RankTestProcess *rankd;
  RankClient *client;
  char *dir;
  char *config;
} Setup;

static void
setup_start (Setup *s, guint n_nodes)
{
  GPtrArray *args = g_ptr_array_new_with_free_func (g_free);

  memset (s, 0, sizeof *s);
  s->n_nodes = n_nodes;
  s->dir = g_dir_make_tmp ("rankd-sharding-XXXXXX", NULL);
  g_assert_nonnull (s->dir);
  s->config = g_build_filename (s->dir, "rankd.conf", NULL);
  g_assert_true (g_file_set_contents (s->config, config_text, -1, NULL));
  for (guint i = 0; i < n_nodes; i++)
    s->nodes[i] = rank_test_redis_start (NULL);
  g_ptr_array_add (args, g_strdup ("--config"));
  g_ptr_array_add (args, g_strdup (s->config));
  g_ptr_array_add (args, g_strdup ("--redis-timeout"));
  g_ptr_array_add (args, g_strdup ("1"));
  for (guint i = 1; i < n_nodes; i++)
    {
      g_ptr_array_add (args, g_strdup ("--redis"));
      g_ptr_array_add (args,
                       g_strdup_printf ("127.0.0.1:%u", s->nodes[i]->port));
    }
  g_ptr_array_add (args, NULL);
  /* The harness's --redis (the first node) comes first, then these. */
  s->rankd = rank_test_rankd_start (s->nodes[0]->port,
                                    (const char *const *) args->pdata);
  s->client = rank_test_client (s->rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_ptr_array_unref (args);
}

static void
setup_stop (Setup *s)
{
  rank_client_free (s->client);
  stop_checked (s->rankd);
  rank_test_process_free (s->rankd);
  for (guint i = 0; i < s->n_nodes; i++)
    if (s->nodes[i] != NULL)
      {
        rank_test_kill (s->nodes[i]);
        rank_test_process_free (s->nodes[i]);
      }
  g_unlink (s->config);
  g_rmdir (s->dir);
  g_free (s->config);
  g_free (s->dir);
}

static guint
node_of (const Setup *s, const char *member)
{
  return rank_shard_node (rank_shard_of (member, strlen (member), SHARDS),
                          s->n_nodes);
}

/* ---- the same workload on both boards ---- */

#define MEMBERS 10000
#define UPDATES 22000

static char *
member_name (int i)
{
  /* Some multi-byte UTF-8 ids, so ties compare bytes above 0x7f. */
  return i % 97 == 0 ? g_strdup_printf ("jöe-%05d", i)
                     : g_strdup_printf ("m%05d", i);
}

/* Applies one random workload to "plain" (ordinary) and "sharded": few
 * distinct scores and timestamps, so most entries tie on score and many on
 * time too; every mode; some retries. Each update must answer the same on
 * both boards, except that the sharded one has no rank. */
static void
apply_workload (RankClient *c)
{
  const gint64 t0 = 1763800000000;
  guint32 seed = 20261122;
  GRand *rand = g_rand_new_with_seed (seed);

  g_test_message ("workload seed %u", seed);
  for (int step = 0; step < UPDATES; step++)
    {
      int i = step < MEMBERS ? step : g_rand_int_range (rand, 0, MEMBERS);
      g_autofree char *member = member_name (i);
      int mode = g_rand_int_range (rand, 1, 4);
      gint64 value = mode == RANK_UPDATE_MODE_INCREMENT
                         ? g_rand_int_range (rand, -3, 6)
                         : g_rand_int_range (rand, 0, 40);
      gint64 ts = t0 + g_rand_int_range (rand, 0, 20);
      g_autofree char *rid = g_strdup_printf ("r%d", step);
      g_auto (Result) plain = { 0 };
      g_auto (Result) sharded = { 0 };

      plain = update_on (c, "plain", member, value, rid, mode, ts);
      sharded = update_on (c, "sharded", member, value, rid, mode, ts);
      assert_ok (&plain);
      assert_ok (&sharded);
      g_assert_cmpint (plain.score, ==, sharded.score);
      g_assert_true (plain.applied);
      g_assert_true (sharded.applied);
      g_assert_true (plain.has_rank);
      g_assert_false (sharded.has_rank);
      if (g_rand_int_range (rand, 0, 20) == 0)
        {
          /* One in twenty is retried: not applied again on either. */
          g_auto (Result) again_plain
              = update_on (c, "plain", member, value, rid, mode, ts);
          g_auto (Result) again_sharded
              = update_on (c, "sharded", member, value, rid, mode, ts);

          assert_ok (&again_plain);
          assert_ok (&again_sharded);
          g_assert_false (again_plain.applied);
          g_assert_false (again_sharded.applied);
          g_assert_cmpint (again_sharded.score, ==, plain.score);
        }
    }
  g_rand_free (rand);
}

static void
assert_same_page (RankClient *c, gint32 n, gint32 offset)
{
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) a = top_on (c, "plain", n, offset, &r);
  g_autoptr (GPtrArray) b = top_on (c, "sharded", n, offset, &r);

  if (a == NULL || b == NULL)
    g_error ("GetTopN(%d, %d) failed: %s", n, offset, r.message);
  g_assert_cmpuint (a->len, ==, b->len);
  g_assert_cmpuint (a->len, ==, CLAMP (MEMBERS - offset, 0, n));
  for (guint i = 0; i < a->len; i++)
    {
      rankEntry *x = g_ptr_array_index (a, i), *y = g_ptr_array_index (b, i);

      if (strcmp (x->member, y->member) != 0)
        g_error ("GetTopN(%d, %d)[%u]: plain has %s, sharded %s", n, offset, i,
                 x->member, y->member);
      g_assert_cmpint (x->score, ==, y->score);
      g_assert_cmpint (x->rank, ==, y->rank);
      g_assert_cmpint (x->rank, ==, offset + i + 1);
    }
}

static void
assert_same_boards (RankClient *c)
{
  static const gint32 offsets[]
      = { 0, 1, 7, 999, 1000, 1234, 4321, 8888, 9989, 9999, 10000, 10001 };
  gint64 ties = 0, last = G_MININT64;

  /* The whole board, page by page. */
  for (gint32 offset = 0; offset < MEMBERS; offset += RANK_TOP_N_MAX)
    assert_same_page (c, RANK_TOP_N_MAX, offset);
  for (gsize i = 0; i < G_N_ELEMENTS (offsets); i++)
    {
      assert_same_page (c, 1, offsets[i]);
      assert_same_page (c, 10, offsets[i]);
      assert_same_page (c, 333, offsets[i]);
    }
  /* Every member's rank. */
  for (int i = 0; i < MEMBERS; i++)
    {
      g_autofree char *member = member_name (i);
      g_auto (Result) a = get_rank_on (c, "plain", member);
      g_auto (Result) b = get_rank_on (c, "sharded", member);

      assert_ok (&a);
      assert_ok (&b);
      g_assert_cmpint (a.score, ==, b.score);
      if (a.rank != b.rank)
        g_error ("GetRank(%s): plain %" G_GINT64_FORMAT
                 ", sharded %" G_GINT64_FORMAT,
                 member, a.rank, b.rank);
    }
  /* The workload is worth something only if it made ties. */
  {
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_on (c, "plain", RANK_TOP_N_MAX, 0, &r);

    for (guint i = 0; i < page->len; i++)
      {
        rankEntry *e = g_ptr_array_index (page, i);

        ties += e->score == last;
        last = e->score;
      }
    g_assert_cmpint (ties, >, 900);
  }
}

static void
test_same_as_ordinary (gconstpointer data)
{
  guint n_nodes = GPOINTER_TO_UINT (data);
  Setup s;

  setup_start (&s, n_nodes);
  apply_workload (s.client);
  assert_same_boards (s.client);
  /* Shard i is on node i mod n, and only there. */
  for (guint node = 0; node < n_nodes; node++)
    {
      redisContext *r = redis_connect (s.nodes[node]->port);

      for (guint shard = 0; shard < SHARDS; shard++)
        {
          redisReply *reply = redisCommand (
              r, "EXISTS " RANK_SHARD_KEY_PREFIX ":{sharded/%u}:z", shard);

          g_assert_cmpint (reply->integer, ==,
                           rank_shard_node (shard, n_nodes) == node);
          freeReplyObject (reply);
        }
      redisFree (r);
    }
  setup_stop (&s);
}

/* ---- one shard per update ---- */

static void
test_update_touches_one_shard (void)
{
  Setup s;
  redisContext *r;
  redisReply *keys;
  guint shard = rank_shard_of ("solo", 4, SHARDS);
  g_autofree char *tag = g_strdup_printf ("{capped/%u}", shard);
  g_auto (Result) first = { 0 };
  g_auto (Result) again = { 0 };
  g_auto (Result) rank = { 0 };

  setup_start (&s, 1);
  first = update_on (s.client, "capped", "solo", 5, "x1", NO_MODE, NO_TIME);
  assert_ok (&first);
  g_assert_false (first.has_rank);
  again = update_on (s.client, "capped", "solo", 5, "x1", NO_MODE, NO_TIME);
  assert_ok (&again);
  g_assert_false (again.applied);
  g_assert_cmpint (again.score, ==, 5);
  rank = get_rank_on (s.client, "capped", "solo");
  assert_ok (&rank);
  g_assert_cmpint (rank.rank, ==, 1);
  {
    g_auto (Result) failed = { 0 };
    g_autoptr (GPtrArray) page = top_on (s.client, "capped", 10, 0, &failed);
    rankEntry *e;

    g_assert_nonnull (page);
    g_assert_cmpuint (page->len, ==, 1);
    e = g_ptr_array_index (page, 0);
    g_assert_cmpstr (e->member, ==, "solo");
    g_assert_cmpint (e->score, ==, 5);
    g_assert_cmpint (e->rank, ==, 1);
  }

  /* Every key written -- scores, times, request-id records -- is the
   * member's shard's, but the board's layout descriptor, which is the
   * board's whatever its shards, and the list of boards (ListBoards). */
  r = redis_connect (s.nodes[0]->port);
  keys = redisCommand (r, "KEYS *");
  g_assert_cmpuint (keys->elements, >=, 4);
  for (gsize i = 0; i < keys->elements; i++)
    if (strstr (keys->element[i]->str, tag) == NULL
        && strcmp (keys->element[i]->str, "rk:{capped}:o") != 0
        && strcmp (keys->element[i]->str, "rk:boards") != 0)
      g_error ("key %s is not in shard %u", keys->element[i]->str, shard);
  freeReplyObject (keys);
  redisFree (r);
  setup_stop (&s);
}

/* ---- the offset+n cap ---- */

static void
test_top_depth_cap (void)
{
  Setup s;
  g_auto (Result) r = { 0 };
  GPtrArray *page;

  setup_start (&s, 1);
  g_assert_null (
      top_on (s.client, "capped", 10, RANK_DEFAULT_MAX_TOP_DEPTH - 9, &r));
  assert_fails (&r, INVALID, "offset+n: must be at most 10000");
  result_clear (&r);
  g_assert_null (top_on (s.client, "sharded", 1, DEEP_DEPTH, &r));
  assert_fails (&r, INVALID, "at most 20000 on sharded board 'sharded'");
  result_clear (&r);
  /* At the cap, and on an ordinary board well past it: served. */
  page = top_on (s.client, "capped", 10, RANK_DEFAULT_MAX_TOP_DEPTH - 10, &r);
  g_assert_nonnull (page);
  g_assert_cmpuint (page->len, ==, 0);
  g_ptr_array_unref (page);
  page = top_on (s.client, "plain", 10, 50000, &r);
  g_assert_nonnull (page);
  g_ptr_array_unref (page);
  setup_stop (&s);
}

/* ---- a node down ---- */

/* A member whose shard is on node. */
static char *
member_on (const Setup *s, guint node)
{
  for (int i = 0;; i++)
    {
      char *m = g_strdup_printf ("p%d", i);

      if (node_of (s, m) == node)
        return m;
      g_free (m);
    }
}

static void
test_node_down (void)
{
  Setup s;
  g_autofree char *on0 = NULL, *on2 = NULL;
  g_auto (Result) r = { 0 };
  GPtrArray *page;

  setup_start (&s, 3);
  on0 = member_on (&s, 0);
  on2 = member_on (&s, 2);
  {
    g_auto (Result) a
        = update_on (s.client, "sharded", on0, 1, "a", NO_MODE, NO_TIME);
    g_auto (Result) b
        = update_on (s.client, "sharded", on2, 2, "b", NO_MODE, NO_TIME);

    assert_ok (&a);
    assert_ok (&b);
  }
  rank_test_kill (s.nodes[2]);
  rank_test_process_free (s.nodes[2]);
  s.nodes[2] = NULL;

  /* Reads need every node: Unavailable, not a partial page or rank. */
  g_assert_null (top_on (s.client, "sharded", 10, 0, &r));
  assert_fails (&r, UNAVAILABLE, NULL);
  result_clear (&r);
  r = get_rank_on (s.client, "sharded", on0);
  assert_fails (&r, UNAVAILABLE, NULL);
  result_clear (&r);
  /* An update needs its shard's node only. */
  r = update_on (s.client, "sharded", on2, 1, "c", NO_MODE, NO_TIME);
  assert_fails (&r, UNAVAILABLE, NULL);
  result_clear (&r);
  r = update_on (s.client, "sharded", on0, 1, "d", NO_MODE, NO_TIME);
  assert_ok (&r);
  g_assert_cmpint (r.score, ==, 2);
  result_clear (&r);
  /* Ordinary boards live on the first node. */
  r = update_on (s.client, "plain", on2, 7, "e", NO_MODE, NO_TIME);
  assert_ok (&r);
  g_assert_cmpint (r.rank, ==, 1);
  page = top_on (s.client, "plain", 10, 0, &r);
  g_assert_nonnull (page);
  g_assert_cmpuint (page->len, ==, 1);
  g_ptr_array_unref (page);
  setup_stop (&s);
}

/* ---- SIGHUP ---- */

/* GetTopN(capped, 10, offset) is refused as too deep. */
static gboolean
too_deep (RankClient *c, gint32 offset)
{
  g_auto (Result) r = { 0 };
  GPtrArray *page = top_on (c, "capped", 10, offset, &r);

  if (page != NULL)
    {
      g_ptr_array_unref (page);
      return FALSE;
    }
  assert_fails (&r, INVALID, "max_top_depth");
  return TRUE;
}

/* Polls cond(s) for up to 10 s. */
#define WAIT_FOR(cond)                                                         \
  G_STMT_START                                                                 \
  {                                                                            \
    gint64 end_ = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;               \
    while (!(cond))                                                            \
      {                                                                        \
        if (g_get_monotonic_time () > end_)                                    \
          g_error ("timed out waiting for " #cond);                            \
        g_usleep (10 * 1000); /* polling a condition, with a deadline */       \
      }                                                                        \
  }                                                                            \
  G_STMT_END

/* SIGHUP applies new board options to the connections already open; a file
 * with errors changes nothing. */
static void
test_sighup_reload (void)
{
  g_autofree char *deeper
      = g_strconcat (config_text, "max_top_depth=100\n", NULL);
  Setup s;

  setup_start (&s, 1);
  g_assert_false (too_deep (s.client, 9990));
  g_assert_true (g_file_set_contents (s.config, deeper, -1, NULL));
  kill (s.rankd->pid, SIGHUP);
  WAIT_FOR (too_deep (s.client, 95));
  g_assert_false (too_deep (s.client, 90));
  g_assert_true (rank_test_log_contains (s.rankd, "reloaded board options"));

  g_assert_true (
      g_file_set_contents (s.config, "[board capped]\nshards=ten\n", -1, NULL));
  kill (s.rankd->pid, SIGHUP);
  WAIT_FOR (rank_test_log_contains (s.rankd, "reload failed"));
  g_assert_true (rank_test_log_contains (s.rankd, "[board capped] shards"));
  g_assert_true (too_deep (s.client, 95));
  g_assert_false (too_deep (s.client, 90));
  setup_stop (&s);
}

/* ---- configuration errors stop rankd ---- */

static void
test_bad_config_stops_rankd (void)
{
  g_autofree char *dir = g_dir_make_tmp ("rankd-badconf-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "bad.conf", NULL);
  g_autofree char *out = NULL, *err = NULL;
  g_autofree char *want = NULL;
  const char *argv[]
      = { RANKD_BIN, "--config", path, "--listen", "127.0.0.1:0", NULL };
  int status = 0;

  g_assert_true (
      g_file_set_contents (path, "[board x]\nshards=zero\n", -1, NULL));
  g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_DEFAULT,
                               NULL, NULL, &out, &err, &status, NULL));
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 2);
  want = g_strdup_printf ("%s:2: [board x] shards: must be an integer 1-64, "
                          "got 'zero'",
                          path);
  if (strstr (err, want) == NULL)
    g_error ("stderr '%s' lacks '%s'", err, want);
  g_unlink (path);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/sharding/same-as-ordinary/one-node",
                        GUINT_TO_POINTER (1), test_same_as_ordinary);
  g_test_add_data_func ("/sharding/same-as-ordinary/three-nodes",
                        GUINT_TO_POINTER (3), test_same_as_ordinary);
  g_test_add_func ("/sharding/update-touches-one-shard",
                   test_update_touches_one_shard);
  g_test_add_func ("/sharding/top-depth-cap", test_top_depth_cap);
  g_test_add_func ("/sharding/node-down", test_node_down);
  g_test_add_func ("/sharding/sighup-reloads-options", test_sighup_reload);
  g_test_add_func ("/sharding/bad-config-stops-rankd",
                   test_bad_config_stops_rankd);
  return g_test_run ();
}
