/* test_service.c -- rankd end to end: a real redis-server, a real rankd,
 * the generated c_glib client.
 *
 * Most tests share one redis-server and one rankd and keep apart by board
 * name; tests that need other flags or that kill processes start their own.
 * Run under valgrind by setting RANKD_TEST_WRAPPER (see tests/CMakeLists.txt).
 */
#include <errno.h>
#include <sys/resource.h>
#include <poll.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "calls.h"
#include "harness.h"
#include "constants.h"
#include "lua_scripts.h"
#include "orderkey.h"
#include "requestid.h"
#include "store.h"

static RankTestProcess *redis;
static RankTestProcess *rankd;
static RankClient *client;

/* ---- calling rankd ---- */
static Result
update (const char *board, const char *member, gint64 value, const char *rid,
        int mode, gint64 ts)
{
  return update_on (client, board, member, value, rid, mode, ts);
}

static Result
get_rank (const char *board, const char *member)
{
  return get_rank_on (client, board, member);
}

static GPtrArray *
top (const char *board, gint32 n, gint32 offset)
{
  g_auto (Result) r = { 0 };
  GPtrArray *page = top_on (client, board, n, offset, &r);

  if (page == NULL)
    g_error ("GetTopN(%s, %d, %d) failed: %s: %s", board, n, offset,
             kind_names[r.kind], r.message);
  return page;
}

static void
assert_update (Result r, gint64 score, gint64 rank, gboolean applied)
{
  assert_ok (&r);
  g_assert_cmpint (r.score, ==, score);
  g_assert_true (r.has_rank);
  g_assert_cmpint (r.rank, ==, rank);
  g_assert_cmpint (r.applied, ==, applied);
  result_clear (&r);
}

static void
assert_rank (const char *board, const char *member, gint64 score, gint64 rank)
{
  g_auto (Result) r = get_rank (board, member);

  assert_ok (&r);
  g_assert_cmpint (r.score, ==, score);
  g_assert_cmpint (r.rank, ==, rank);
}

/* Asserts the board's members, best first, are exactly `members`. */
static void
assert_order (const char *board, const char *const *members)
{
  g_autoptr (GPtrArray) page = top (board, RANK_TOP_N_MAX, 0);
  guint n = g_strv_length ((char **) members);

  g_assert_cmpuint (page->len, ==, n);
  for (guint i = 0; i < n; i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpstr (e->member, ==, members[i]);
      g_assert_cmpint (e->rank, ==, i + 1);
    }
}

static void
test_modes (void)
{
  g_autofree char *b = rank_test_unique ("modes");

  assert_update (update (b, "ann", 10, "r1", NO_MODE, NO_TIME), 10, 1, TRUE);
  assert_update (
      update (b, "ann", -3, "r2", RANK_UPDATE_MODE_INCREMENT, NO_TIME), 7, 1,
      TRUE);
  assert_update (update (b, "ann", 5, "r3", RANK_UPDATE_MODE_BEST, NO_TIME), 7,
                 1, TRUE);
  assert_update (update (b, "ann", 12, "r4", RANK_UPDATE_MODE_BEST, NO_TIME),
                 12, 1, TRUE);
  assert_update (update (b, "ann", -40, "r5", RANK_UPDATE_MODE_SET, NO_TIME),
                 -40, 1, TRUE);
  assert_update (update (b, "bob", 0, "r6", NO_MODE, NO_TIME), 0, 1, TRUE);
  assert_update (update (b, "cid", -41, "r7", RANK_UPDATE_MODE_BEST, NO_TIME),
                 -41, 3, TRUE);
  assert_rank (b, "ann", -40, 2);
  assert_order (b, (const char *[]){ "bob", "ann", "cid", NULL });
}

static void
test_invalid_mode (void)
{
  g_autofree char *b = rank_test_unique ("mode");
  g_auto (Result) r = update (b, "ann", 1, "r1", 7, NO_TIME);
  g_auto (Result) gone = get_rank (b, "ann");

  assert_fails (&r, INVALID, "mode: 7 is not an UpdateMode");
  assert_fails (&gone, NOT_FOUND, NULL);
}

/* Equal scores: who got there first ranks higher; equal time: member id. */
static void
test_ties (void)
{
  g_autofree char *b = rank_test_unique ("ties");
  const gint64 t = 1763800000000;

  assert_update (update (b, "late", 50, "1", RANK_UPDATE_MODE_SET, t + 1), 50,
                 1, TRUE);
  assert_update (update (b, "early", 50, "2", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "b", 50, "3", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "ab", 50, "4", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "a", 50, "5", RANK_UPDATE_MODE_SET, t), 50, 1,
                 TRUE);
  assert_update (update (b, "top", 51, "6", RANK_UPDATE_MODE_SET, t + 5), 51, 1,
                 TRUE);
  /* Time beats member id: "aaa" sorts first by name but got there 1 ms
   * after "early". */
  assert_update (update (b, "aaa", 50, "7", RANK_UPDATE_MODE_SET, t + 1), 50, 6,
                 TRUE);
  assert_order (b, (const char *[]){ "top", "a", "ab", "b", "early", "aaa",
                                     "late", NULL });
  assert_rank (b, "late", 50, 7);
}

/* An update that leaves the score unchanged keeps the old time. */
static void
test_unchanged_keeps_time (void)
{
  g_autofree char *b = rank_test_unique ("keep");
  const gint64 t = 1763800000000;

  assert_update (update (b, "first", 10, "1", NO_MODE, t), 10, 1, TRUE);
  assert_update (update (b, "second", 10, "2", NO_MODE, t + 1000), 10, 2, TRUE);
  assert_update (update (b, "first", 0, "3", NO_MODE, t + 2000), 10, 1, TRUE);
  assert_update (update (b, "first", 10, "4", RANK_UPDATE_MODE_SET, t + 3000),
                 10, 1, TRUE);
  assert_update (update (b, "first", 9, "5", RANK_UPDATE_MODE_BEST, t + 4000),
                 10, 1, TRUE);
  assert_update (update (b, "first", 10, "6", RANK_UPDATE_MODE_BEST, t + 4000),
                 10, 1, TRUE);
  /* A real change takes the new time: now "second" was there first. */
  assert_update (update (b, "first", 11, "7", RANK_UPDATE_MODE_SET, t + 5000),
                 11, 1, TRUE);
  assert_update (update (b, "first", 10, "8", RANK_UPDATE_MODE_SET, t + 6000),
                 10, 2, TRUE);
  assert_order (b, (const char *[]){ "second", "first", NULL });
}

static void
test_exact_extremes (void)
{
  g_autofree char *b = rank_test_unique ("exact");
  const gint64 max = RANK_SCORE_MAX;
  const gint64 t = RANK_TIMESTAMP_MAX_MS;
  g_autoptr (GPtrArray) page = NULL;
  const gint64 want[] = { max, max - 1, 1, 0, -1, -max + 1, -max };
  const char *names[]
      = { "max", "max-1", "one", "zero", "minus-one", "min+1", "min" };

  /* All at the last valid millisecond and the first: time at both ends. */
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree char *rid = g_strdup_printf ("r%zu", i);
      g_auto (Result) r = update (b, names[i], want[i], rid,
                                  RANK_UPDATE_MODE_SET, i % 2 ? 0 : t);

      assert_ok (&r);
      g_assert_cmpint (r.score, ==, want[i]);
    }
  page = top (b, 10, 0);
  g_assert_cmpuint (page->len, ==, G_N_ELEMENTS (want));
  for (gsize i = 0; i < G_N_ELEMENTS (want); i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpstr (e->member, ==, names[i]);
      g_assert_cmpint (e->score, ==, want[i]);
    }
  /* Ties at the extremes, 1 ms apart, at the far end of the time range. */
  assert_update (
      update (b, "max-tie", max, "tie1", RANK_UPDATE_MODE_SET, t - 1), max, 1,
      TRUE);
  assert_rank (b, "max", max, 2);
  assert_update (update (b, "max-tie2", max, "tie2", RANK_UPDATE_MODE_SET, t),
                 max, 3, TRUE);
  /* Increments up to the edge are exact. */
  assert_update (update (b, "edge", max - 2, "e1", NO_MODE, t), max - 2, 5,
                 TRUE);
  assert_update (update (b, "edge", 2, "e2", NO_MODE, t), max, 2, TRUE);
}

static void
test_range_refused (void)
{
  g_autofree char *b = rank_test_unique ("range");
  const gint64 max = RANK_SCORE_MAX;

  assert_update (update (b, "m", max - 1, "r1", RANK_UPDATE_MODE_SET, NO_TIME),
                 max - 1, 1, TRUE);
  {
    g_auto (Result) r = update (b, "m", 2, "r2", NO_MODE, NO_TIME);
    assert_fails (&r, INVALID,
                  "value: current score 9007199254740990 + 2 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", -max - 1, "r3", RANK_UPDATE_MODE_SET, NO_TIME);
    assert_fails (&r, INVALID, "value: -9007199254740992 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", max + 1, "r4", RANK_UPDATE_MODE_BEST, NO_TIME);
    assert_fails (&r, INVALID, "value");
  }
  {
    g_auto (Result) r = update (b, "m", 1, "r5", NO_MODE, -1);
    assert_fails (&r, INVALID, "timestamp_ms: -1 is outside");
  }
  {
    g_auto (Result) r
        = update (b, "m", 1, "r6", NO_MODE, RANK_TIMESTAMP_MAX_MS + 1);
    assert_fails (&r, INVALID, "timestamp_ms");
  }
  /* Nothing changed, and the refused request ids were not recorded. */
  assert_rank (b, "m", max - 1, 1);
  assert_update (update (b, "m", -5, "r2", NO_MODE, NO_TIME), max - 6, 1, TRUE);
}

/* ---- idempotency ---- */

static void
test_retry_counts_once (void)
{
  g_autofree char *b = rank_test_unique ("retry");

  assert_update (update (b, "ann", 5, "once", NO_MODE, NO_TIME), 5, 1, TRUE);
  assert_update (update (b, "bob", 9, "b1", NO_MODE, NO_TIME), 9, 1, TRUE);
  /* The retry reports the current score and rank, and applies nothing. */
  assert_update (update (b, "ann", 5, "once", NO_MODE, NO_TIME), 5, 2, FALSE);
  assert_update (update (b, "ann", 5, "once", NO_MODE, NO_TIME), 5, 2, FALSE);
  assert_update (update (b, "ann", 1, "a2", NO_MODE, NO_TIME), 6, 2, TRUE);
  assert_update (update (b, "ann", 5, "once", NO_MODE, NO_TIME), 6, 2, FALSE);
  /* A retry of SET after other changes does not undo them. */
  assert_update (update (b, "bob", 100, "set", RANK_UPDATE_MODE_SET, NO_TIME),
                 100, 1, TRUE);
  assert_update (update (b, "bob", 1, "b2", NO_MODE, NO_TIME), 101, 1, TRUE);
  assert_update (update (b, "bob", 100, "set", RANK_UPDATE_MODE_SET, NO_TIME),
                 101, 1, FALSE);
  /* A retry with another timestamp is still the same request. */
  assert_update (update (b, "ann", 1, "a2", NO_MODE, 1000), 6, 2, FALSE);
}

/* Each update retried at once, on a new board: 2,000 records grow the layout
 * of record hashes six times (1 hash, 2, 4, .. 64), and every retry, whether
 * its record has moved to the new layout yet or not, is recognised. */
static void
test_retry_across_layouts (void)
{
  g_autofree char *b = rank_test_unique ("boundary");

  for (int i = 0; i < 2000; i++)
    {
      g_autofree char *rid = g_strdup_printf ("g%d", i);
      g_autofree char *member = g_strdup_printf ("m%d", i % 100);
      g_auto (Result) first = update (b, member, 1, rid, NO_MODE, NO_TIME);
      g_auto (Result) again = update (b, member, 1, rid, NO_MODE, NO_TIME);

      assert_ok (&first);
      assert_ok (&again);
      g_assert_true (first.applied);
      if (again.applied)
        g_error ("update %d applied twice", i);
      g_assert_cmpint (again.score, ==, first.score);
      g_assert_cmpint (first.score, ==, i / 100 + 1);
    }
}

static void
test_request_id_reuse_refused (void)
{
  g_autofree char *b = rank_test_unique ("reuse");
  g_autofree char *other = rank_test_unique ("reuse-other");

  assert_update (update (b, "ann", 5, "id", NO_MODE, NO_TIME), 5, 1, TRUE);
  {
    g_auto (Result) r = update (b, "ann", 6, "id", NO_MODE, NO_TIME);
    assert_fails (&r, INVALID, "request_id: already used");
  }
  {
    g_auto (Result) r = update (b, "bob", 5, "id", NO_MODE, NO_TIME);
    assert_fails (&r, INVALID, "request_id");
  }
  {
    g_auto (Result) r
        = update (b, "ann", 5, "id", RANK_UPDATE_MODE_SET, NO_TIME);
    assert_fails (&r, INVALID, "request_id");
  }
  assert_rank (b, "ann", 5, 1);
  {
    g_auto (Result) r = get_rank (b, "bob");
    assert_fails (&r, NOT_FOUND, NULL);
  }
  /* Request ids are scoped to their board. */
  assert_update (update (other, "ann", 7, "id", NO_MODE, NO_TIME), 7, 1, TRUE);
}

/* The board's request-id meta hash rk:{board}:q, field -> value. */
static GHashTable *
request_meta (redisContext *c, const char *board)
{
  GHashTable *meta
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  redisReply *r = redisCommand (c, "HGETALL rk:{%s}:q", board);

  g_assert_cmpint (r->type, ==, REDIS_REPLY_ARRAY);
  for (gsize i = 0; i + 1 < r->elements; i += 2)
    g_hash_table_insert (meta, g_strdup (r->element[i]->str),
                         g_strdup (r->element[i + 1]->str));
  freeReplyObject (r);
  return meta;
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The time buckets a meta hash describes (its fields <k>), ascending. */
static GPtrArray *
meta_buckets (GHashTable *meta)
{
  GPtrArray *buckets = g_ptr_array_new ();
  GHashTableIter i;
  gpointer field;

  g_hash_table_iter_init (&i, meta);
  while (g_hash_table_iter_next (&i, &field, NULL))
    if (g_regex_match_simple ("^[0-9]+$", field, 0, 0))
      g_ptr_array_add (buckets, field);
  g_ptr_array_sort (buckets, compare_strings);
  return buckets;
}

/* The value of field "<bucket><suffix>" of a meta hash, or NULL. */
static const char *
meta_field (GHashTable *meta, const char *bucket, const char *suffix)
{
  g_autofree char *field = g_strconcat (bucket, suffix, NULL);

  return g_hash_table_lookup (meta, field);
}

/* The key layout the README documents, and the records' expiry. */
static void
test_key_layout (void)
{
  g_autofree char *b = rank_test_unique ("layout");
  g_autofree char *zkey = g_strdup_printf ("rk:{%s}:z", b);
  g_autofree char *tkey = g_strdup_printf ("rk:{%s}:t", b);
  g_autofree char *qkey = g_strdup_printf ("rk:{%s}:q", b);
  g_autofree char *record = NULL;
  g_autoptr (GHashTable) meta = NULL;
  g_autoptr (GPtrArray) buckets = NULL;
  redisContext *c = redis_connect (redis->port);
  redisReply *r, *keys;
  guint8 prefix[RANK_ORDERKEY_TIME_BYTES];
  gint64 bucket, now_bucket;

  assert_update (update (b, "ann", 42, "req-1", NO_MODE, 1763800000123), 42, 1,
                 TRUE);
  assert_update (update (b, "bob", 7, "req-2", NO_MODE, 1763800000123), 7, 2,
                 TRUE);
  now_bucket = g_get_real_time () / 1000 / (RANK_DEFAULT_DEDUP_WINDOW_S * 250);
  rank_orderkey_encode_time (1763800000123, prefix);

  /* The member's prefix, then its sorted-set score (-42) in 8 bytes. */
  r = redisCommand (c, "HGET %s ann", tkey);
  g_assert_cmpint (r->type, ==, REDIS_REPLY_STRING);
  g_assert_cmpuint (r->len, ==, sizeof prefix + 8);
  g_assert_cmpmem (r->str, sizeof prefix, prefix, sizeof prefix);
  g_assert_cmpmem (r->str + sizeof prefix, 8,
                   "\xff\xff\xff\xff\xff\xff\xff\xd6", 8);
  freeReplyObject (r);

  r = redisCommand (c, "ZRANGE %s 0 0 WITHSCORES", zkey);
  g_assert_cmpint (r->elements, ==, 2);
  g_assert_cmpuint (r->element[0]->len, ==, sizeof prefix + 3);
  g_assert_cmpmem (r->element[0]->str, sizeof prefix, prefix, sizeof prefix);
  g_assert_cmpmem (r->element[0]->str + sizeof prefix, 3, "ann", 3);
  g_assert_cmpstr (r->element[1]->str, ==, "-42");
  freeReplyObject (r);

  /* The board's meta hash: the layout of record hashes (one hash, a new
   * board) and the records of time bucket k (this one): 2. */
  meta = request_meta (c, b);
  buckets = meta_buckets (meta);
  g_assert_cmpuint (g_hash_table_size (meta), ==, 2);
  g_assert_cmpuint (buckets->len, ==, 1);
  bucket = g_ascii_strtoll (buckets->pdata[0], NULL, 10);
  g_assert_true (bucket == now_bucket || bucket == now_bucket - 1);
  g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "1");
  g_assert_cmpstr (meta_field (meta, buckets->pdata[0], ""), ==, "2");
  /* The meta hash and one record hash, hash 0 of the layout of 1, with
   * both 10-byte request-id hashes -> bucket k mod 16 (4 bits) and 28 bits
   * of the fingerprint, and no other field (its mark is its expiry), all
   * expiring after more than the window and at most 1.5 windows. */
  record = g_strdup_printf ("rk:{%s}:q:1:0", b);
  keys = redisCommand (c, "KEYS rk:{%s}:q*", b);
  g_assert_cmpuint (keys->elements, ==, 2);
  for (gsize i = 0; i < keys->elements; i++)
    {
      const char *key = keys->element[i]->str;

      r = redisCommand (c, "PTTL %s", key);
      g_assert_cmpint (r->integer, >, 3600 * 1000);
      g_assert_cmpint (r->integer, <=, 3600 * 1500);
      freeReplyObject (r);
      /* Exactly: the end of bucket k+5 (rankd passes it to update.lua). */
      r = redisCommand (c, "PEXPIRETIME %s", key);
      g_assert_cmpint (r->integer, ==, (bucket + 6) * 900 * 1000);
      freeReplyObject (r);
      if (strcmp (key, qkey) == 0)
        continue;
      g_assert_cmpstr (key, ==, record);
      /* The two records. */
      r = redisCommand (c, "HGETALL %s", key);
      g_assert_cmpint (r->elements, ==, 4);
      for (gsize j = 0; j < 4; j += 2)
        {
          g_assert_cmpuint (r->element[j]->len, ==, 10);
          g_assert_cmpuint (r->element[j + 1]->len, ==, 4);
          g_assert_cmpuint ((guint8) r->element[j + 1]->str[0] >> 4, ==,
                            bucket % 16);
        }
      freeReplyObject (r);
    }
  freeReplyObject (keys);
  redisFree (c);
}

/* A burst on a new board grows the layout of record hashes from one hash
 * to 2 (past 48 records), 4 (past 96), then 8 (past 192), moving the
 * records: every record hash left is one of the 8, every hash stays
 * listpack-encoded, and every request id is still recognised. */
static void
test_packed_records (void)
{
  g_autofree char *b = rank_test_unique ("packed");
  g_autoptr (GHashTable) meta = NULL;
  g_autoptr (GPtrArray) buckets = NULL;
  redisContext *c = redis_connect (redis->port);
  redisReply *keys;
  const int n = 300;

  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      {
        g_autofree char *rid = g_strdup_printf ("burst-%d", i);
        g_auto (Result) u = update (b, "ann", 1, rid, NO_MODE, NO_TIME);

        assert_ok (&u);
        g_assert_cmpint (u.applied, ==, pass == 0);
        g_assert_cmpint (u.score, ==, pass == 0 ? i + 1 : n);
      }
  meta = request_meta (c, b);
  buckets = meta_buckets (meta);
  g_assert_cmpuint (buckets->len, >=, 1);
  g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "8");
  g_assert_null (g_hash_table_lookup (meta, "o"));
  g_assert_null (g_hash_table_lookup (meta, "m"));
  /* Exact only if the burst did not straddle a 15-minute bucket boundary
   * (then each bucket counts part of it). */
  if (buckets->len == 1)
    g_assert_cmpstr (meta_field (meta, buckets->pdata[0], ""), ==, "300");
  keys = redisCommand (c, "KEYS rk:{%s}:q:*", b);
  g_assert_cmpuint (keys->elements, >=, 2);
  g_assert_cmpuint (keys->elements, <=, 8);
  for (gsize i = 0; i < keys->elements; i++)
    {
      const char *key = keys->element[i]->str;
      g_auto (GStrv) parts = g_strsplit (key, ":", -1);
      redisReply *r;

      g_assert_cmpuint (g_strv_length (parts), ==, 5);
      g_assert_cmpstr (parts[3], ==, "8");
      g_assert_cmpint (g_ascii_strtoll (parts[4], NULL, 10), <, 8);
      r = redisCommand (c, "OBJECT ENCODING %s", key);
      g_assert_cmpstr (r->str, ==, "listpack");
      freeReplyObject (r);
    }
  freeReplyObject (keys);
  redisFree (c);
}

/* ---- update.lua on its own ---- */

#define WIDTH_MS (RANK_DEFAULT_DEDUP_WINDOW_S * 250) /* a time bucket */

/* Runs update.lua (its library, loaded unless Redis has it) on board b
 * with the arguments rankd
 * gives it (rank_store_update_command) for an INCREMENT of member by value
 * with request id rid, at now (Unix ms), with rankd's default window; with
 * applied_only, as the queue's drain asks (the answer 'applied'). Returns
 * applied, and checks that the update's answer has the width asked for. */
static gboolean
eval_update_answer (redisContext *c, const char *b, const char *member,
                    gint64 value, const char *rid, gint64 now,
                    gboolean applied_only)
{
  g_autoptr (RankConfig) config = rank_config_new ();
  RankUpdate u = { .member = member,
                   .request_id = rid,
                   .value = value,
                   .mode = RANK_MODE_INCREMENT,
                   .timestamp_ms = now,
                   .without_rank = applied_only,
                   .applied_only = applied_only };
  const char *argv[2 * RANK_COMMAND_MAX_ARGS + 3];
  size_t lens[2 * RANK_COMMAND_MAX_ARGS + 3];
  char numkeys[8];
  int argc;
  RankContext ctx;
  RankCommand head, item;
  redisReply *r;
  gboolean applied;

  rank_context_init (&ctx, config, b, now, g_get_monotonic_time (),
                     RANK_DEFAULT_DEDUP_WINDOW_S * 1000);
  g_assert_true (rank_context_write (&ctx, now, NULL));
  rank_store_update_command (&ctx, &u, 1, &head, &item);
  g_snprintf (numkeys, sizeof numkeys, "%d", head.nkeys);
  r = redisCommand (c, "FUNCTION LOAD %s", rank_lua_update);
  g_assert_true (r->type == REDIS_REPLY_STRING
                 || (r->type == REDIS_REPLY_ERROR
                     && strstr (r->str, "already exists") != NULL));
  freeReplyObject (r);
  argv[0] = "FCALL", lens[0] = 5;
  argv[1] = rank_lua_update_function;
  lens[1] = strlen (rank_lua_update_function);
  argv[2] = numkeys, lens[2] = strlen (numkeys);
  argc = 3;
  argc += rank_command_argv (&head, argv + argc, lens + argc);
  argc += rank_command_argv (&item, argv + argc, lens + argc);
  r = redisCommandArgv (c, argc, argv, lens);
  rank_command_clear (&head);
  rank_command_clear (&item);
  rank_context_clear (&ctx);
  /* The replies of the batch's updates, flat: here one update's 4 (or
   * its applied alone), or its error. */
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
    g_error ("update.lua: %s", r->type == REDIS_REPLY_ERROR ? r->str : "?");
  if (r->element[0]->type == REDIS_REPLY_ERROR)
    g_error ("update.lua: %s", r->element[0]->str);
  g_assert_cmpuint (r->elements, ==,
                    applied_only ? 1 : RANK_UPDATE_REPLY_WIDTH);
  applied = r->element[applied_only ? 0 : 2]->integer != 0;
  freeReplyObject (r);
  return applied;
}

static gboolean
eval_update (redisContext *c, const char *b, const char *member, gint64 value,
             const char *rid, gint64 now)
{
  return eval_update_answer (c, b, member, value, rid, now, FALSE);
}

/* Some time in bucket k. */
static gint64
in_bucket (gint64 k)
{
  return k * WIDTH_MS + 1234;
}

/* The value of a record hash's field, or NULL. */
static char *
hash_field (redisContext *c, const char *key, const char *field)
{
  redisReply *r = redisCommand (c, "HGET %s %s", key, field);
  char *v = r->type == REDIS_REPLY_STRING ? g_strdup (r->str) : NULL;

  freeReplyObject (r);
  return v;
}

static gint64
integer_reply (redisContext *c, const char *format, const char *key)
{
  redisReply *r = redisCommand (c, format, key);
  gint64 v;

  g_assert_cmpint (r->type, ==, REDIS_REPLY_INTEGER);
  v = r->integer;
  freeReplyObject (r);
  return v;
}

/* The queue's drain asks update.lua for whether each update applied, alone
 * (one element an update, not four): the same record and the same write
 * as a full answer's. */
static void
test_applied_only_answer (void)
{
  g_autofree char *b = rank_test_unique ("applied-only");
  g_autofree char *times = g_strdup_printf ("rk:{%s}:t", b);
  redisContext *c = redis_connect (redis->port);
  gint64 now = g_get_real_time () / 1000;
  redisReply *r;

  g_assert_true (eval_update_answer (c, b, "ann", 5, "a1", now, TRUE));
  /* A retry: nothing changes, and it says so. */
  g_assert_false (eval_update_answer (c, b, "ann", 5, "a1", now, TRUE));
  g_assert_false (eval_update (c, b, "ann", 5, "a1", now));
  g_assert_true (eval_update (c, b, "ann", 1, "a2", now));
  g_assert_false (eval_update_answer (c, b, "ann", 1, "a2", now, TRUE));
  /* 5 + 1, each once: the times hash ends with the sorted-set score
   * (-score on a descending board). */
  r = redisCommand (c, "HGET %s ann", times);
  g_assert_cmpint (r->type, ==, REDIS_REPLY_STRING);
  g_assert_cmpuint (r->len, ==,
                    RANK_ORDERKEY_TIME_BYTES + RANK_PLACE_SCORE_BYTES);
  g_assert_cmpint (rank_orderkey_decode_place_score (
                       (const guint8 *) r->str + RANK_ORDERKEY_TIME_BYTES),
                   ==, -6);
  freeReplyObject (r);
  redisFree (c);
}

/* The meta hash counts the records of the current bucket and the 4 before
 * it: a bucket's first records drop the fields of older ones; a request id
 * is found in any of the 5 and forgotten after; a record hash is swept of
 * stale records every 2 buckets, and it and the meta hash expire after the
 * newest of their records. update.lua on its own, at chosen times (buckets
 * from this one on, so that nothing has expired yet). */
static void
test_meta_buckets (void)
{
  g_autofree char *b = rank_test_unique ("meta");
  g_autofree char *record = g_strdup_printf ("rk:{%s}:q:1:0", b);
  g_autofree char *qkey = g_strdup_printf ("rk:{%s}:q", b);
  redisContext *c = redis_connect (redis->port);
  gint64 k0 = g_get_real_time () / 1000 / WIDTH_MS;

  for (gint64 i = 0; i < 8; i++)
    {
      g_autofree char *rid = g_strdup_printf ("r%" G_GINT64_FORMAT, i);
      g_autoptr (GHashTable) meta = NULL;
      g_autoptr (GPtrArray) buckets = NULL;

      g_assert_true (eval_update (c, b, "ann", 1, rid, in_bucket (k0 + i)));
      meta = request_meta (c, b);
      buckets = meta_buckets (meta);
      g_assert_cmpuint (buckets->len, ==, MIN (i + 1, 5));
      g_assert_cmpuint (g_hash_table_size (meta), ==, buckets->len + 1);
      for (guint j = 0; j < buckets->len; j++)
        {
          g_autofree char *want = g_strdup_printf (
              "%" G_GINT64_FORMAT, k0 + i - (buckets->len - 1) + j);

          g_assert_cmpstr (buckets->pdata[j], ==, want);
          g_assert_cmpstr (meta_field (meta, want, ""), ==, "1");
        }
      /* Marked when created (k0), then swept in k0+2, k0+4, k0+6: its
       * mark is its expiry, the end of the mark's bucket + 5. */
      g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", record), ==,
                       (k0 + i - i % 2 + 6) * WIDTH_MS);
    }
  /* The sweep in k0+6 took r0 and r1 (6 and 5 buckets old) and kept r2 (4
   * buckets old). */
  g_assert_cmpint (integer_reply (c, "HLEN %s", record), ==, 6);
  {
    g_autofree char *gone = hash_field (c, qkey, "");
    g_assert_null (gone);
  }
  /* In bucket k0+7: r3 (4 buckets before) is still a retry, r2 (5 before)
   * is forgotten and applies again. */
  g_assert_false (eval_update (c, b, "ann", 1, "r3", in_bucket (k0 + 7)));
  g_assert_true (eval_update (c, b, "ann", 1, "r2", in_bucket (k0 + 7)));
  for (int i = 3; i < 8; i++)
    {
      g_autofree char *rid = g_strdup_printf ("r%d", i);
      g_assert_false (eval_update (c, b, "ann", 1, rid, in_bucket (k0 + 7)));
    }
  g_assert_cmpint (integer_reply (c, "HLEN %s", record), ==, 6);
  /* The record hash, marked in k0+6, goes at the end of bucket k0+11; the
   * meta hash, whose newest bucket is k0+7, at the end of k0+12, after
   * every record hash (one marked in k0+7 would go then). */
  g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", record), ==,
                   (k0 + 12) * WIDTH_MS);
  g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", qkey), ==,
                   (k0 + 13) * WIDTH_MS);
  /* A record hash that lost its expiry (PERSIST; no mark) is swept at its
   * next write and expires again: nothing is kept forever. */
  g_assert_cmpint (integer_reply (c, "PERSIST %s", record), ==, 1);
  g_assert_true (eval_update (c, b, "ann", 1, "r8", in_bucket (k0 + 8)));
  g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", record), ==,
                   (k0 + 14) * WIDTH_MS);
  /* The sweep in k0+8 took r3 (5 buckets old). */
  g_assert_cmpint (integer_reply (c, "HLEN %s", record), ==, 6);
  redisFree (c);
}

/* A retry that reaches a rankd whose clock is behind the first one's, across
 * the start of a time bucket, is still recognised: a record up to 2 buckets
 * ahead counts. (Before, the lookup named the buckets of its own clock.) */
static void
test_retry_from_a_clock_behind (void)
{
  g_autofree char *b = rank_test_unique ("skew");
  redisContext *c = redis_connect (redis->port);
  gint64 k0 = g_get_real_time () / 1000 / WIDTH_MS;

  g_assert_true (eval_update (c, b, "ann", 1, "early", in_bucket (k0 + 2)));
  g_assert_false (eval_update (c, b, "ann", 1, "early", in_bucket (k0)));
  g_assert_false (eval_update (c, b, "ann", 1, "early", in_bucket (k0 + 1)));
  redisFree (c);
}

/* The record-hash layout is sized for about 32 live records a hash: a
 * board's live records (the meta hash's counts; bench/compare.sh sets them)
 * grow it past 48 a hash, and fewer than 16 a hash shrink it. The hashes of the
 * layout left move a few per call, and every record is found before, during and
 * after the move. */
static void
test_layout_sizing (void)
{
  g_autofree char *b = rank_test_unique ("sizing");
  g_autofree char *qkey = g_strdup_printf ("rk:{%s}:q", b);
  redisContext *c = redis_connect (redis->port);
  gint64 k0 = g_get_real_time () / 1000 / WIDTH_MS;
  gint64 now = in_bucket (k0);
  redisReply *r;

  /* 400 records: the layout grows from 1 hash to 2 at the 50th, 4, 8, then
   * 16 at the 386th. */
  for (int i = 0; i < 400; i++)
    {
      g_autofree char *rid = g_strdup_printf ("p%d", i);
      g_assert_true (eval_update (c, b, "ann", 1, rid, now));
    }
  {
    g_autoptr (GHashTable) meta = request_meta (c, b);
    g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "16");
    g_assert_null (g_hash_table_lookup (meta, "o"));
  }
  /* The count gone (as if the records were older): the next call shrinks
   * the layout to 1 hash and moves 8 of the 16. */
  r = redisCommand (c, "HSET %s %" G_GINT64_FORMAT " 0", qkey, k0);
  freeReplyObject (r);
  for (int i = 0; i < 400; i++)
    {
      g_autofree char *rid = g_strdup_printf ("p%d", i);
      g_autoptr (GHashTable) meta = NULL;

      if (eval_update (c, b, "ann", 1, rid, now))
        g_error ("p%d applied twice (retry %d after the shrink)", i, i);
      meta = request_meta (c, b);
      g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "1");
      if (i == 0)
        {
          g_assert_cmpstr (g_hash_table_lookup (meta, "o"), ==, "16");
          g_assert_cmpstr (g_hash_table_lookup (meta, "m"), ==, "8");
        }
      else
        {
          g_assert_null (g_hash_table_lookup (meta, "o"));
          g_assert_null (g_hash_table_lookup (meta, "m"));
        }
    }
  /* Every record is in the one hash now, and the 16 are gone. The hash
   * they moved into is marked now: it expires after every live record. */
  {
    g_autofree char *key = g_strdup_printf ("rk:{%s}:q:1:0", b);

    r = redisCommand (c, "KEYS rk:{%s}:q:*", b);
    g_assert_cmpuint (r->elements, ==, 1);
    g_assert_cmpstr (r->element[0]->str, ==, key);
    freeReplyObject (r);
    g_assert_cmpint (integer_reply (c, "HLEN %s", key), ==, 400);
    g_assert_cmpint (integer_reply (c, "PTTL %s", key), >, 0);
  }
  /* A count of 262,143 live records and one more: the next call grows the
   * layout to 8,192 hashes (32 records each), moving the one hash at once. */
  r = redisCommand (c, "HSET %s %" G_GINT64_FORMAT " 262143", qkey, k0);
  freeReplyObject (r);
  g_assert_true (eval_update (c, b, "ann", 1, "x", now));
  g_assert_false (eval_update (c, b, "ann", 1, "p7", now));
  {
    g_autoptr (GHashTable) meta = request_meta (c, b);
    g_autofree char *bucket = g_strdup_printf ("%" G_GINT64_FORMAT, k0);

    g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "8192");
    g_assert_null (g_hash_table_lookup (meta, "o"));
    g_assert_cmpstr (meta_field (meta, bucket, ""), ==, "262144");
  }
  redisFree (c);
}

/* The number of request id rid's hash in a layout of size hashes (a power
 * of 2 up to 256): the first 4 bytes of its field, big-endian, mod size. */
static guint
hash_number (const char *rid, guint size)
{
  guint8 field[RANK_REQUEST_ID_HASH_BYTES];

  rank_request_id_hash (rid, field);
  return field[3] % size;
}

/* The record fields of a record hash, each checked to belong there: its
 * hash number in a layout of size is j. */
static guint
records_in (redisContext *c, const char *key, guint size, guint j)
{
  redisReply *r = redisCommand (c, "HKEYS %s", key);
  guint n = 0;

  g_assert_cmpint (r->type, ==, REDIS_REPLY_ARRAY);
  for (gsize i = 0; i < r->elements; i++)
    {
      const guint8 *f = (const guint8 *) r->element[i]->str;

      g_assert_cmpuint (r->element[i]->len, ==, RANK_REQUEST_ID_HASH_BYTES);
      g_assert_cmpuint (f[3] % size, ==, j);
      n++;
    }
  freeReplyObject (r);
  return n;
}

/* A layout that doubles splits each hash: hash j of 64 becomes hash j of 128
 * with its expiry (its mark), and only its records bound for j + 64 move
 * there, which is marked now. While the move goes on (8 hashes a call), the
 * record of a new id whose hash has not moved yet is written in that hash, and
 * moves with it; every id is recognised before, during and after. */
static void
test_layout_split (void)
{
  g_autofree char *b = rank_test_unique ("split");
  g_autofree char *qkey = g_strdup_printf ("rk:{%s}:q", b);
  g_autofree char *old5 = g_strdup_printf ("rk:{%s}:q:64:5", b);
  g_autofree char *new5 = g_strdup_printf ("rk:{%s}:q:128:5", b);
  g_autofree char *new69 = g_strdup_printf ("rk:{%s}:q:128:69", b);
  gint64 mark5;
  redisContext *c = redis_connect (redis->port);
  gint64 k0 = g_get_real_time () / 1000 / WIDTH_MS;
  gint64 now = in_bucket (k0);
  char probe[32];
  guint before5, in5, in69, moves = 0;
  redisReply *r;

  /* 2,000 records: a layout of 64 hashes. */
  for (int i = 0; i < 2000; i++)
    {
      g_autofree char *rid = g_strdup_printf ("s%d", i);
      g_assert_true (eval_update (c, b, "ann", 1, rid, now));
    }
  {
    g_autoptr (GHashTable) meta = request_meta (c, b);
    g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "64");
  }
  mark5 = integer_reply (c, "PEXPIRETIME %s", old5);
  g_assert_cmpint (mark5, ==, (k0 + 6) * WIDTH_MS);
  before5 = records_in (c, old5, 64, 5);
  g_assert_cmpuint (before5, >, 0);
  /* An id whose hash (40 of 64) the first call of the move does not reach. */
  for (int i = 0;; i++)
    {
      g_snprintf (probe, sizeof probe, "probe%d", i);
      if (hash_number (probe, 128) == 40)
        break;
    }
  /* 3,073 live records: the next call doubles the layout, and moves
   * hashes 0 to 7 of 64 first. */
  r = redisCommand (c, "HSET %s %" G_GINT64_FORMAT " 3073", qkey, k0);
  freeReplyObject (r);
  g_assert_true (eval_update (c, b, "ann", 1, "x0", now));
  {
    g_autoptr (GHashTable) meta = request_meta (c, b);
    g_assert_cmpstr (g_hash_table_lookup (meta, "s"), ==, "128");
    g_assert_cmpstr (g_hash_table_lookup (meta, "o"), ==, "64");
    g_assert_cmpstr (g_hash_table_lookup (meta, "m"), ==, "8");
  }
  /* Hash 5 was renamed, its expiry (its mark) with it; its records bound
   * for 69 went there, marked now; none was lost or copied. */
  g_assert_cmpint (integer_reply (c, "EXISTS %s", old5), ==, 0);
  g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", new5), ==, mark5);
  in5 = records_in (c, new5, 128, 5);
  in69 = records_in (c, new69, 128, 69);
  g_assert_cmpuint (in5 + in69, ==, before5);
  /* (About half of its ~31 records: none there is a chance of 2^-31.) */
  g_assert_cmpuint (in69, >, 0);
  g_assert_cmpint (integer_reply (c, "PEXPIRETIME %s", new69), ==,
                   (k0 + 6) * WIDTH_MS);
  /* The probe's record goes to hash 40 of 64, which has not moved. */
  g_assert_true (eval_update (c, b, "ann", 1, probe, now));
  g_autofree char *old40 = g_strdup_printf ("rk:{%s}:q:64:40", b);
  g_autofree char *new40 = g_strdup_printf ("rk:{%s}:q:128:40", b);
  g_assert_cmpint (integer_reply (c, "EXISTS %s", new40), ==, 0);
  g_assert_cmpuint (records_in (c, old40, 64, 40), >, 0);
  /* Retries, each a call that moves 8 more hashes: none applies again. */
  for (int i = 0; i < 2000; i++)
    {
      g_autofree char *rid = g_strdup_printf ("s%d", i);
      g_autoptr (GHashTable) meta = NULL;

      if (eval_update (c, b, "ann", 1, rid, now))
        g_error ("%s applied twice (during the split)", rid);
      meta = request_meta (c, b);
      if (g_hash_table_lookup (meta, "o") != NULL)
        moves++;
    }
  /* 8 calls of 8 hashes: the 3rd to the 7th leave some to move. */
  g_assert_cmpuint (moves, ==, 5);
  g_assert_false (eval_update (c, b, "ann", 1, probe, now));
  g_assert_false (eval_update (c, b, "ann", 1, "x0", now));
  /* Every record hash is one of the 128, listpack-encoded, records in
   * their own hash. */
  r = redisCommand (c, "KEYS rk:{%s}:q:*", b);
  g_assert_cmpuint (r->elements, >, 64);
  for (gsize i = 0; i < r->elements; i++)
    {
      g_auto (GStrv) parts = g_strsplit (r->element[i]->str, ":", -1);
      redisReply *e;

      g_assert_cmpstr (parts[3], ==, "128");
      records_in (c, r->element[i]->str, 128,
                  (guint) g_ascii_strtoll (parts[4], NULL, 10));
      e = redisCommand (c, "OBJECT ENCODING %s", r->element[i]->str);
      g_assert_cmpstr (e->str, ==, "listpack");
      freeReplyObject (e);
    }
  freeReplyObject (r);
  redisFree (c);
}

/* After the window a request id is forgotten: the same id applies again,
 * but not before the window has passed. */
static void
test_dedup_window (void)
{
  const char *args[] = { "--dedup-window", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (RankClient) c
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("window");
  gint64 first, end;

  /* Before the request is sent: rankd reads its clock after that, and the
   * window runs from its clock. (Taken after the reply, a slow rankd --
   * under valgrind -- made the id look forgotten early.) */
  first = g_get_monotonic_time ();
  {
    g_auto (Result) u = update_on (c, b, "ann", 3, "w", NO_MODE, NO_TIME);
    assert_ok (&u);
    g_assert_true (u.applied);
  }
  /* Retry until it applies again (the condition), with a deadline. */
  end = first + 10 * G_USEC_PER_SEC;
  for (;;)
    {
      g_auto (Result) u = update_on (c, b, "ann", 3, "w", NO_MODE, NO_TIME);

      assert_ok (&u);
      if (u.applied)
        {
          g_assert_cmpint (u.score, ==, 6);
          /* Remembered for at least the window (1 s)... */
          g_assert_cmpint (g_get_monotonic_time () - first, >=,
                           G_USEC_PER_SEC - 50 * 1000);
          break;
        }
      g_assert_cmpint (u.score, ==, 3);
      /* ...and forgotten within 1.25 windows, plus scheduling slack. */
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (20 * 1000);
    }
  g_clear_pointer (&c, rank_client_free);
  stop_checked (own);
  rank_test_process_free (own);
}

/* ---- names ---- */

static void
test_name_limits (void)
{
  g_autofree char *board200 = rank_test_repeat ('B', RANK_BOARD_MAX_BYTES);
  g_autofree char *board201 = rank_test_repeat ('B', RANK_BOARD_MAX_BYTES + 1);
  g_autofree char *member256 = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES);
  g_autofree char *member257
      = rank_test_repeat ('m', RANK_MEMBER_MAX_BYTES + 1);
  g_autofree char *rid128 = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES);
  g_autofree char *rid129
      = rank_test_repeat ('r', RANK_REQUEST_ID_MAX_BYTES + 1);
  g_autofree char *b = rank_test_unique ("names");

  assert_update (update (board200, member256, 1, rid128, NO_MODE, NO_TIME), 1,
                 1, TRUE);
  assert_rank (board200, member256, 1, 1);
  struct
  {
    const char *board, *member, *rid, *want;
  } bad[] = {
    { board201, "m", "r", "board: must be 1-200 bytes, got 201" },
    { "", "m", "r", "board: must be 1-200 bytes" },
    { "a{b}", "m", "r", "board: must not contain '{' or '}'" },
    { "tab\there", "m", "r", "board: must not contain control characters" },
    { "bad\xff", "m", "r", "board: must be valid UTF-8" },
    { b, member257, "r", "member: must be 1-256 bytes, got 257" },
    { b, "", "r", "member: must be 1-256 bytes" },
    { b, "bad\xc3", "r", "member: must be valid UTF-8" },
    { b, "m", rid129, "request_id: must be 1-128 bytes, got 129" },
    { b, "m", "", "request_id: must be 1-128 bytes" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (Result) r = update (bad[i].board, bad[i].member, 1, bad[i].rid,
                                  NO_MODE, NO_TIME);
      assert_fails (&r, INVALID, bad[i].want);
    }
  {
    g_auto (Result) r = get_rank (board201, "m");
    assert_fails (&r, INVALID, "board");
  }
  {
    g_auto (Result) r = get_rank (b, member257);
    assert_fails (&r, INVALID, "member");
  }
  {
    g_auto (Result) r = { 0 };
    g_assert_null (top_on (client, "x}", 1, 0, &r));
    assert_fails (&r, INVALID, "board");
  }
  /* None of the refused updates created anything. */
  {
    g_autoptr (GPtrArray) page = top (b, 10, 0);
    g_assert_cmpuint (page->len, ==, 0);
  }
}

/* ---- reads ---- */

static void
test_get_rank_not_found (void)
{
  g_autofree char *b = rank_test_unique ("nf");
  g_auto (Result) empty = get_rank (b, "nobody");

  assert_fails (&empty, NOT_FOUND, "member 'nobody' is not on board");
  assert_update (update (b, "ann", 1, "1", NO_MODE, NO_TIME), 1, 1, TRUE);
  {
    g_auto (Result) r = get_rank (b, "nobody");
    assert_fails (&r, NOT_FOUND, "nobody");
  }
}

static void
test_top_bounds (void)
{
  g_autofree char *b = rank_test_unique ("bounds");
  struct
  {
    gint32 n, offset;
    const char *want;
  } bad[] = {
    { 0, 0, "n: must be 1-1000, got 0" },
    { 1001, 0, "n: must be 1-1000, got 1001" },
    { -5, 0, "n: must be 1-1000" },
    { 10, -1, "offset: must be >= 0, got -1" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_auto (Result) r = { 0 };

      g_assert_null (top_on (client, b, bad[i].n, bad[i].offset, &r));
      assert_fails (&r, INVALID, bad[i].want);
    }
  {
    g_autoptr (GPtrArray) page = top (b, RANK_TOP_N_MAX, 0);
    g_assert_cmpuint (page->len, ==, 0);
  }
  assert_update (update (b, "ann", 1, "1", NO_MODE, NO_TIME), 1, 1, TRUE);
  {
    g_autoptr (GPtrArray) page = top (b, 10, 1);
    g_assert_cmpuint (page->len, ==, 0);
  }
  {
    g_autoptr (GPtrArray) page = top (b, 10, G_MAXINT32);
    g_assert_cmpuint (page->len, ==, 0);
  }
}

static void
test_top_paging (void)
{
  g_autofree char *b = rank_test_unique ("paging");
  g_autoptr (GPtrArray) all = NULL;
  guint seen = 0;

  for (int i = 0; i < 25; i++)
    {
      g_autofree char *m = g_strdup_printf ("member-%02d", i);
      g_autofree char *rid = g_strdup_printf ("p%d", i);
      g_auto (Result) r
          = update (b, m, (i * 7) % 5, rid, NO_MODE, 1763800000000 + i % 3);
      assert_ok (&r);
    }
  all = top (b, 1000, 0);
  g_assert_cmpuint (all->len, ==, 25);
  for (gint32 offset = 0; offset < 25; offset += 10)
    {
      g_autoptr (GPtrArray) page = top (b, 10, offset);

      for (guint i = 0; i < page->len; i++, seen++)
        {
          rankEntry *e = g_ptr_array_index (page, i);
          rankEntry *want = g_ptr_array_index (all, seen);

          g_assert_cmpstr (e->member, ==, want->member);
          g_assert_cmpint (e->score, ==, want->score);
          g_assert_cmpint (e->rank, ==, seen + 1);
          assert_rank (b, e->member, e->score, e->rank);
        }
    }
  g_assert_cmpuint (seen, ==, 25);
  for (guint i = 1; i < all->len; i++)
    {
      rankEntry *prev = g_ptr_array_index (all, i - 1);
      rankEntry *cur = g_ptr_array_index (all, i);

      g_assert_cmpint (prev->score, >=, cur->score);
    }
}

/* ---- concurrency ---- */

#define THREADS 16
#define PER_THREAD 500
#define MEMBERS 20

typedef struct
{
  const char *board;
  int thread;
  gboolean repeat;
  guint applied;
} Worker;

static gint64
delta_of (int thread, int i)
{
  return (thread * 7919 + i * 104729) % 1000 - 300;
}

static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);

  for (int i = 0; i < PER_THREAD; i++)
    {
      char member[16], rid[32];

      g_snprintf (member, sizeof member, "m%d", (w->thread + i) % MEMBERS);
      g_snprintf (rid, sizeof rid, "t%d-%d", w->thread, i);
      g_auto (Result) r = update_on (
          c, w->board, member, delta_of (w->thread, i), rid, NO_MODE, NO_TIME);
      assert_ok (&r);
      w->applied += r.applied;
    }
  return NULL;
}

static void
run_workers (const char *board, gboolean repeat, guint *applied)
{
  Worker workers[THREADS];
  GThread *threads[THREADS];

  *applied = 0;
  for (int t = 0; t < THREADS; t++)
    {
      workers[t] = (Worker){ board, t, repeat, 0 };
      threads[t] = g_thread_new ("worker", worker_main, &workers[t]);
    }
  for (int t = 0; t < THREADS; t++)
    {
      g_thread_join (threads[t]);
      *applied += workers[t].applied;
    }
}

static void
assert_totals (const char *board)
{
  gint64 want[MEMBERS] = { 0 };

  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < PER_THREAD; i++)
      want[(t + i) % MEMBERS] += delta_of (t, i);
  for (int m = 0; m < MEMBERS; m++)
    {
      g_autofree char *member = g_strdup_printf ("m%d", m);
      g_auto (Result) r = get_rank (board, member);

      assert_ok (&r);
      g_assert_cmpint (r.score, ==, want[m]);
    }
}

static void
test_concurrent_exact (void)
{
  g_autofree char *b = rank_test_unique ("concurrent");
  guint applied;

  run_workers (b, FALSE, &applied);
  g_assert_cmpuint (applied, ==, THREADS * PER_THREAD);
  assert_totals (b);
  /* Every request again: nothing counts twice. */
  run_workers (b, TRUE, &applied);
  g_assert_cmpuint (applied, ==, 0);
  assert_totals (b);
}

/* ---- bad input on the socket ---- */

static gsize
rankd_rss (void)
{
  return rank_test_rss_kib (rankd->pid);
}

static void
assert_still_serving (void)
{
  g_autofree char *b = rank_test_unique ("alive");
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_auto (Result) r = update_on (c, b, "ann", 1, "x", NO_MODE, NO_TIME);

  assert_ok (&r);
}

static void
send_and_expect_close (const void *bytes, gsize len)
{
  int fd = rank_test_connect_raw (rankd->port);
  g_autoptr (RankClient) bystander
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("bystander");

  g_assert_cmpint (send (fd, bytes, len, MSG_NOSIGNAL), ==, (gssize) len);
  g_assert_true (rank_test_wait_closed (fd, 20000));
  close (fd);
  /* A connection opened before the bad one is still served. */
  {
    g_auto (Result) r
        = update_on (bystander, b, "ann", 1, "x", NO_MODE, NO_TIME);
    assert_ok (&r);
  }
  assert_still_serving ();
}

static void
test_hostile_random_bytes (void)
{
  GRand *rand = g_rand_new_with_seed (7);
  guint8 junk[4096];

  for (int round = 0; round < 5; round++)
    {
      for (gsize i = 0; i < sizeof junk; i++)
        junk[i] = (guint8) g_rand_int (rand);
      /* A plausible small frame header, so the junk reaches the protocol. */
      junk[0] = 0;
      junk[1] = 0;
      junk[2] = 0x0f;
      junk[3] = 0xfc;
      send_and_expect_close (junk, sizeof junk);
    }
  g_rand_free (rand);
}

static void
test_hostile_zero_frame (void)
{
  send_and_expect_close ("\0\0\0\0", 4);
}

static void
test_hostile_huge_prefix (void)
{
  gsize before = rankd_rss ();

  for (int i = 0; i < 5; i++)
    send_and_expect_close ("\x7f\xff\xff\xff"
                           "abcdef",
                           10);
  send_and_expect_close ("\x80\x00\x00\x00", 4);
  /* Nothing near 2 GiB (or even the 1 MiB cap) was allocated. */
  g_assert_cmpuint (rankd_rss (), <, before + 8 * 1024);
}

static void
test_hostile_http (void)
{
  const char *get = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";

  send_and_expect_close (get, strlen (get));
}

/* Reads a reply that must be a TApplicationException of type with
 * message (NULL: any). */
static void
expect_app_exception (ThriftProtocol *p, gint32 want_seqid,
                      ThriftApplicationExceptionError want_type,
                      const char *want_message)
{
  g_autoptr (GError) error = NULL;
  ThriftApplicationException *x;
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;

  g_assert_cmpint (
      thrift_protocol_read_message_begin (p, &name, &type, &seqid, &error), >,
      0);
  g_assert_cmpint (type, ==, T_EXCEPTION);
  g_assert_cmpint (seqid, ==, want_seqid);
  g_free (name);
  x = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, NULL);
  g_assert_cmpint (thrift_struct_read (THRIFT_STRUCT (x), p, &error), >, 0);
  thrift_transport_read_end (p->transport, NULL);
  g_assert_cmpint (x->type, ==, want_type);
  if (want_message != NULL)
    g_assert_cmpstr (x->message, ==, want_message);
  g_object_unref (x);
}

/* Hand-written calls: a field's header, whose value the caller writes
 * next (then field_end). */
static void
field (ThriftProtocol *p, ThriftType type, gint16 id)
{
  thrift_protocol_write_field_begin (p, "", type, id, NULL);
}

static void
string_field (ThriftProtocol *p, gint16 id, const char *s)
{
  field (p, T_STRING, id);
  thrift_protocol_write_string (p, s, NULL);
  thrift_protocol_write_field_end (p, NULL);
}

/* A field holding a struct, whose fields the caller writes next ... */
static void
struct_field (ThriftProtocol *p, gint16 id)
{
  field (p, T_STRUCT, id);
  thrift_protocol_write_struct_begin (p, "", NULL);
}

/* ... and ends. */
static void
struct_end (ThriftProtocol *p)
{
  thrift_protocol_write_field_stop (p, NULL);
  thrift_protocol_write_struct_end (p, NULL);
}

static void
struct_field_end (ThriftProtocol *p)
{
  struct_end (p);
  thrift_protocol_write_field_end (p, NULL);
}

/* A call of method: its args struct's fields come next ... */
static void
call_begin (ThriftProtocol *p, const char *method, gint32 seqid)
{
  thrift_protocol_write_message_begin (p, method, T_CALL, seqid, NULL);
  thrift_protocol_write_struct_begin (p, "args", NULL);
}

/* ... and it goes. */
static void
call_end (ThriftProtocol *p)
{
  struct_end (p);
  thrift_protocol_write_message_end (p, NULL);
  g_assert_true (thrift_transport_flush (p->transport, NULL));
}

/* Writes Update(request = {board: "b"}): member, value, request_id
 * missing. */
static void
write_update_missing_member (ThriftProtocol *p, gint32 seqid)
{
  call_begin (p, "Update", seqid);
  struct_field (p, 1);
  string_field (p, 1, "b");
  struct_field_end (p);
  call_end (p);
}

/* A framed binary client (*c), and a protocol on its transport to write
 * calls by hand and read their replies. */
static ThriftProtocol *
hand_protocol (RankClient **c)
{
  *c = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  return rank_protocol_new (RANK_PROTOCOL_BINARY,
                            THRIFT_TRANSPORT (rank_client_get_transport (*c)));
}

/* A call whose arguments do not decode gets an error that says why; with
 * framing the connection stays usable. */
static void
test_missing_required_field (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);

  write_update_missing_member (p, 7);
  expect_app_exception (p, 7, THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");

  /* Same connection, next call. */
  {
    g_autofree char *b = rank_test_unique ("after-bad");
    g_auto (Result) r = update_on (c, b, "ann", 2, "y", NO_MODE, NO_TIME);
    assert_ok (&r);
  }
}

/* Reads a reply that must be T_REPLY to want_seqid into result. */
static void
read_reply (ThriftProtocol *p, gint32 want_seqid, gpointer result)
{
  g_autoptr (GError) error = NULL;
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;

  g_assert_cmpint (
      thrift_protocol_read_message_begin (p, &name, &type, &seqid, &error), >,
      0);
  g_free (name);
  g_assert_cmpint (type, ==, T_REPLY);
  g_assert_cmpint (seqid, ==, want_seqid);
  g_assert_cmpint (thrift_struct_read (THRIFT_STRUCT (result), p, &error), >,
                   0);
  thrift_transport_read_end (p->transport, NULL);
}

/* UpdateBatch(request = {requests: [{board, member (unless NULL), value 5,
 * request_id}], with_rank: false}), in the generated reader's terms
 * awkward: an unknown field (99), a mode of the wrong type (a string,
 * skipped) and an unknown struct (77) in the request. */
static void
write_odd_batch (ThriftProtocol *p, gint32 seqid, const char *board,
                 const char *member)
{
  call_begin (p, "UpdateBatch", seqid);
  struct_field (p, 1);
  field (p, T_LIST, 1);
  thrift_protocol_write_list_begin (p, T_STRUCT, 1, NULL);
  thrift_protocol_write_struct_begin (p, "", NULL);
  string_field (p, 99, "unknown");
  string_field (p, 1, board);
  if (member != NULL)
    string_field (p, 2, member);
  field (p, T_I64, 3);
  thrift_protocol_write_i64 (p, 5, NULL);
  thrift_protocol_write_field_end (p, NULL);
  string_field (p, 4, "odd-1");
  string_field (p, 5, "SET");
  struct_field (p, 77);
  string_field (p, 1, "x");
  struct_field_end (p);
  struct_end (p);
  thrift_protocol_write_list_end (p, NULL);
  thrift_protocol_write_field_end (p, NULL);
  field (p, T_BOOL, 2);
  thrift_protocol_write_bool (p, FALSE, NULL);
  thrift_protocol_write_field_end (p, NULL);
  struct_field_end (p);
  call_end (p);
}

/* UpdateBatch's arguments, which rankd reads itself (call_args.c), by
 * the generated reader's rules: an unknown field or one of the wrong type
 * is skipped; a required field missing is a protocol error naming it, and
 * with framing the connection stays usable. */
static void
test_batch_args_as_generated (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);
  g_autofree char *b = rank_test_unique ("oddbatch");
  rankRankingUpdateBatchResult *result
      = g_object_new (RANK_TYPE_RANKING_UPDATE_BATCH_RESULT, NULL);
  rankUpdateResult *one;

  write_odd_batch (p, 11, b, NULL);
  expect_app_exception (p, 11,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");
  write_odd_batch (p, 12, b, "ann");
  read_reply (p, 12, result);
  g_assert_true (result->__isset_success);
  g_assert_cmpuint (result->success->results->len, ==, 1);
  one = g_ptr_array_index (result->success->results, 0);
  g_assert_true (one->__isset_response);
  g_assert_cmpint (one->response->score, ==, 5);
  g_assert_true (one->response->applied);
  /* with_rank false: no rank. */
  g_assert_false (one->response->__isset_rank);
  g_object_unref (result);
  {
    g_auto (Result) r = get_rank_on (c, b, "ann");

    assert_ok (&r);
    g_assert_cmpint (r.score, ==, 5);
  }
}

static void
i32_field (ThriftProtocol *p, gint16 id, gint32 v)
{
  field (p, T_I32, id);
  thrift_protocol_write_i32 (p, v, NULL);
  thrift_protocol_write_field_end (p, NULL);
}

/* Update(request) given twice, with an unknown field (99) before: first
 * {board, member "zed", value 1, request_id rid0, mode SET}, then {board,
 * member "ann", value, request_id rid1, timestamp_ms as a string (of
 * the wrong type: skipped)}. The generated reader reads the second over
 * the first: an update of ann by value, in mode SET. */
static void
write_update_twice (ThriftProtocol *p, gint32 seqid, const char *board,
                    gint64 value, const char *rid0, const char *rid1)
{
  call_begin (p, "Update", seqid);
  string_field (p, 99, "unknown");
  for (int i = 0; i < 2; i++)
    {
      struct_field (p, 1);
      string_field (p, 1, board);
      string_field (p, 2, i == 0 ? "zed" : "ann");
      field (p, T_I64, 3);
      thrift_protocol_write_i64 (p, i == 0 ? 1 : value, NULL);
      thrift_protocol_write_field_end (p, NULL);
      string_field (p, 4, i == 0 ? rid0 : rid1);
      if (i == 0)
        i32_field (p, 5, RANK_UPDATE_MODE_SET);
      else
        string_field (p, 6, "soon");
      struct_field_end (p);
    }
  call_end (p);
}

/* Update, GetRank and GetTopN read their arguments into plain structs
 * (call_args.c), by the generated reader's rules: an unknown field or one
 * of the wrong type is skipped, the request given twice is read over the
 * first, a required field missing is a protocol error naming it, and the
 * request absent is refused as an empty board name. */
static void
test_args_as_generated (void)
{
  g_autoptr (RankClient) c = NULL;
  g_autoptr (ThriftProtocol) p = hand_protocol (&c);
  g_autofree char *b = rank_test_unique ("oddargs");

  /* ann gets 5, then 3: the mode (SET) of the first read is kept, where
   * INCREMENT would make 8 and BEST keep 5. */
  for (int i = 0; i < 2; i++)
    {
      rankRankingUpdateResult *r
          = g_object_new (RANK_TYPE_RANKING_UPDATE_RESULT, NULL);

      write_update_twice (p, 20 + i, b, i == 0 ? 5 : 3, i == 0 ? "o0" : "o2",
                          i == 0 ? "o1" : "o3");
      read_reply (p, 20 + i, r);
      g_assert_true (r->__isset_success);
      g_assert_cmpint (r->success->score, ==, i == 0 ? 5 : 3);
      g_assert_true (r->success->applied);
      g_object_unref (r);
    }

  /* GetRank: the request twice, the first of another board; in the
   * second an unknown struct (77) and periods_back as a string. */
  {
    rankRankingGetRankResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_RANK_RESULT, NULL);

    call_begin (p, "GetRank", 30);
    struct_field (p, 1);
    string_field (p, 1, "not-this-board");
    string_field (p, 2, "zed");
    struct_field_end (p);
    struct_field (p, 1);
    string_field (p, 1, b);
    struct_field (p, 77);
    string_field (p, 1, "x");
    struct_field_end (p);
    string_field (p, 2, "ann");
    string_field (p, 3, "0");
    struct_field_end (p);
    call_end (p);
    read_reply (p, 30, r);
    g_assert_true (r->__isset_success);
    g_assert_cmpstr (r->success->member, ==, "ann");
    g_assert_cmpint (r->success->score, ==, 3);
    g_assert_cmpint (r->success->rank, ==, 1);
    g_object_unref (r);
  }

  /* GetRank without its member; then without its request. */
  call_begin (p, "GetRank", 31);
  struct_field (p, 1);
  string_field (p, 1, b);
  struct_field_end (p);
  call_end (p);
  expect_app_exception (p, 31,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'member'");
  {
    rankRankingGetRankResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_RANK_RESULT, NULL);

    call_begin (p, "GetRank", 32);
    string_field (p, 99, "unknown");
    call_end (p);
    read_reply (p, 32, r);
    g_assert_false (r->__isset_success);
    g_assert_true (r->__isset_invalid);
    g_assert_true (g_str_has_prefix (r->invalid->message, "board: "));
    g_object_unref (r);
  }

  /* GetTopN with n of the wrong type: n is missing. */
  call_begin (p, "GetTopN", 40);
  struct_field (p, 1);
  string_field (p, 1, b);
  string_field (p, 2, "10");
  struct_field_end (p);
  call_end (p);
  expect_app_exception (p, 40,
                        THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
                        "missing required field 'n'");

  /* GetTopN: with_data as an i32 is skipped (no data), offset given twice
   * keeps the last (0). */
  {
    rankRankingGetTopNResult *r
        = g_object_new (RANK_TYPE_RANKING_GET_TOP_N_RESULT, NULL);
    rankEntry *top;

    call_begin (p, "GetTopN", 41);
    struct_field (p, 1);
    string_field (p, 1, b);
    i32_field (p, 2, 10);
    i32_field (p, 3, 1);
    i32_field (p, 3, 0);
    i32_field (p, 5, 1);
    struct_field_end (p);
    call_end (p);
    read_reply (p, 41, r);
    g_assert_true (r->__isset_success);
    g_assert_cmpuint (r->success->len, ==, 1);
    top = g_ptr_array_index (r->success, 0);
    g_assert_cmpstr (top->member, ==, "ann");
    g_assert_cmpint (top->score, ==, 3);
    g_assert_false (top->__isset_data);
    g_object_unref (r);
  }
}

/* A pipelining client: 48 calls in one write, three times as many as a
 * connection runs at once. GetTopN with data takes two rounds to Redis and
 * the GetRank behind it one, so rankd completes them out of order; every
 * reply still comes back in the order of its request (the generated client
 * checks each reply's method name), a call whose arguments do not decode
 * gets its error in its turn, and each GetRank sees the Update sent before
 * it. */
static void
test_pipelined_in_order (void)
{
  g_autofree char *b = rank_test_unique ("pipe");
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  RankClientTransport *t = rank_client_get_transport (c);
  rankRankingIf *iface = rank_client_iface (c);
  g_autoptr (ThriftProtocol) p
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (t));
  const int n = 48;

  rank_client_transport_cork (t);
  for (int i = 0; i < n; i++)
    {
      g_autofree char *member = g_strdup_printf ("p%02d", i / 4);
      g_autofree char *rid = g_strdup_printf ("r%d", i);
      gboolean ok = TRUE;

      switch (i % 4)
        {
        case 0:
          {
            rankUpdateRequest *req = update_request_new (b, member, 100 + i,
                                                         rid, NO_MODE, NO_TIME);

            g_hash_table_insert (req->data, g_strdup ("k"), g_strdup (rid));
            req->__isset_data = TRUE;
            ok = rank_ranking_client_send_update (iface, req, NULL);
            g_object_unref (req);
            break;
          }
        case 1:
          ok = positional_send_get_top_n (iface, b, 3, 0, 0, TRUE, NULL);
          break;
        case 2:
          ok = positional_send_get_rank (iface, b, member, 0, NULL);
          break;
        default:
          write_update_missing_member (p, 1000 + i);
          break;
        }
      g_assert_true (ok);
    }
  g_assert_true (rank_client_transport_uncork (t, NULL));

  for (int i = 0; i < n; i++)
    {
      g_autoptr (GError) error = NULL;
      rankInvalidArgument *invalid = NULL;
      rankNotFound *not_found = NULL;
      rankUnavailable *unavailable = NULL;
      int k = i / 4; /* members p00..p<k> are on the board, p<k> best */

      switch (i % 4)
        {
        case 0:
          {
            rankUpdateResponse *r
                = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);

            g_assert_true (rank_ranking_client_recv_update (
                iface, &r, &invalid, &unavailable, &error));
            g_assert_cmpint (r->score, ==, 100 + i);
            g_assert_cmpint (r->rank, ==, 1);
            g_object_unref (r);
            break;
          }
        case 1:
          {
            g_autoptr (GPtrArray) page
                = g_ptr_array_new_with_free_func (g_object_unref);
            rankEntry *top;

            g_assert_true (rank_ranking_client_recv_get_top_n (
                iface, &page, &invalid, &unavailable, &error));
            g_assert_cmpuint (page->len, ==, MIN (k + 1, 3));
            top = page->pdata[0];
            g_assert_cmpint (top->score, ==, 100 + 4 * k);
            g_assert_true (top->__isset_data);
            {
              g_autofree char *rid = g_strdup_printf ("r%d", 4 * k);

              g_assert_cmpstr (g_hash_table_lookup (top->data, "k"), ==, rid);
            }
            break;
          }
        case 2:
          {
            rankEntry *e = g_object_new (RANK_TYPE_ENTRY, NULL);

            g_assert_true (rank_ranking_client_recv_get_rank (
                iface, &e, &invalid, &not_found, &unavailable, &error));
            g_assert_cmpint (e->score, ==, 100 + 4 * k);
            g_assert_cmpint (e->rank, ==, 1);
            g_object_unref (e);
            break;
          }
        default:
          expect_app_exception (
              p, 1000 + i, THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR,
              "missing required field 'member'");
          break;
        }
    }
}

static void
test_unknown_method (void)
{
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  RankClientTransport *t = rank_client_get_transport (c);
  g_autoptr (ThriftProtocol) p
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (t));

  thrift_protocol_write_message_begin (p, "Explode", T_CALL, 3, NULL);
  thrift_protocol_write_struct_begin (p, "args", NULL);
  thrift_protocol_write_field_stop (p, NULL);
  thrift_protocol_write_struct_end (p, NULL);
  thrift_protocol_write_message_end (p, NULL);
  g_assert_true (thrift_transport_flush (THRIFT_TRANSPORT (t), NULL));
  expect_app_exception (p, 3, THRIFT_APPLICATION_EXCEPTION_ERROR_UNKNOWN_METHOD,
                        NULL);
  {
    g_autofree char *b = rank_test_unique ("after-unknown");
    g_auto (Result) r = get_rank_on (c, b, "ann");
    assert_fails (&r, NOT_FOUND, NULL);
  }
}

/* ---- Redis trouble ---- */

static void
test_redis_unreachable (void)
{
  /* A port nothing listens on: grab one, then close it. */
  RankTestProcess *gone = rank_test_redis_start (NULL);
  guint16 port = gone->port;
  const char *args[] = { "--redis-timeout", "0.5", NULL };
  RankTestProcess *own;
  gint64 start;

  rank_test_kill (gone);
  own = rank_test_rankd_start (port, args);
  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
    start = g_get_monotonic_time ();
    g_auto (Result) u = update_on (c, "b", "ann", 1, "r", NO_MODE, NO_TIME);
    g_auto (Result) r = get_rank_on (c, "b", "ann");
    g_auto (Result) t = { 0 };

    g_assert_null (top_on (c, "b", 10, 0, &t));
    assert_fails (&u, UNAVAILABLE, "127.0.0.1");
    assert_fails (&r, UNAVAILABLE, NULL);
    assert_fails (&t, UNAVAILABLE, NULL);
    /* Bounded: no hang waiting for a Redis that is not there. */
    g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);

    /* Redis comes up (on that port): rankd serves, without a restart. */
    rank_test_restart (gone);
    for (;;)
      {
        g_auto (Result) again
            = update_on (c, "b", "ann", 1, "r", NO_MODE, NO_TIME);

        if (again.kind == OK)
          {
            g_assert_cmpint (again.score, ==, 1);
            break;
          }
        assert_fails (&again, UNAVAILABLE, NULL);
        if (g_get_monotonic_time () - start > 30 * G_USEC_PER_SEC)
          g_error ("rankd did not reach Redis within 30 s of its start");
        g_usleep (20 * 1000); /* a client's retry pace */
      }
  }
  stop_checked (own);
  rank_test_process_free (own);
  rank_test_kill (gone);
  rank_test_process_free (gone);
}

static void
test_redis_restarted (void)
{
  RankTestProcess *own_redis = rank_test_redis_start (NULL);
  const char *args[] = { "--redis-timeout", "0.5", NULL };
  RankTestProcess *own = rank_test_rankd_start (own_redis->port, args);
  g_autoptr (RankClient) c
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  gint64 end;

  {
    g_auto (Result) u = update_on (c, "b", "ann", 1, "r1", NO_MODE, NO_TIME);
    assert_ok (&u);
  }
  rank_test_kill (own_redis);
  {
    g_auto (Result) u = update_on (c, "b", "ann", 1, "r2", NO_MODE, NO_TIME);
    assert_fails (&u, UNAVAILABLE, NULL);
  }
  rank_test_restart (own_redis);
  /* rankd reconnects (with back-off) and reloads its scripts by itself. */
  end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  for (;;)
    {
      g_auto (Result) u = update_on (c, "b", "ann", 1, "r2", NO_MODE, NO_TIME);

      if (u.kind == OK)
        {
          /* The first Redis had no persistence: a fresh board. */
          g_assert_cmpint (u.score, ==, 1);
          break;
        }
      assert_fails (&u, UNAVAILABLE, NULL);
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (50 * 1000);
    }
  g_clear_pointer (&c, rank_client_free);
  stop_checked (own);
  rank_test_process_free (own);
  rank_test_process_free (own_redis);
}

/* Redis forgot the scripts and the update function (SCRIPT FLUSH,
 * FUNCTION FLUSH, a restart without persistence): rankd loads them again
 * and the call succeeds, and so does the next one on another board. */
static void
test_noscript_reload (void)
{
  g_autofree char *b = rank_test_unique ("noscript");
  g_autofree char *b2 = rank_test_unique ("noscript");
  redisContext *rc = redis_connect (redis->port);
  redisReply *r = redisCommand (rc, "SCRIPT FLUSH");

  g_assert_cmpint (r->type, ==, REDIS_REPLY_STATUS);
  freeReplyObject (r);
  r = redisCommand (rc, "FUNCTION FLUSH");
  g_assert_cmpint (r->type, ==, REDIS_REPLY_STATUS);
  freeReplyObject (r);
  assert_update (update (b, "ann", 4, "n1", NO_MODE, NO_TIME), 4, 1, TRUE);
  /* It is loaded again, under the name rankd calls. */
  r = redisCommand (rc, "FUNCTION LIST LIBRARYNAME rankd_*");
  g_assert_cmpint (r->type, ==, REDIS_REPLY_ARRAY);
  g_assert_cmpuint (r->elements, >=, 1);
  freeReplyObject (r);
  r = redisCommand (rc, "SCRIPT FLUSH");
  freeReplyObject (r);
  r = redisCommand (rc, "FUNCTION FLUSH");
  freeReplyObject (r);
  assert_rank (b, "ann", 4, 1);
  assert_update (update (b2, "bob", 5, "n2", NO_MODE, NO_TIME), 5, 1, TRUE);
  assert_update (update (b2, "bob", 5, "n2", NO_MODE, NO_TIME), 5, 1, FALSE);
  redisFree (rc);
}

typedef struct
{
  guint16 port;
  const char *board;
  GMutex lock;
  GCond cond;
  gboolean sent;
  gboolean ok;
  gint64 score;
} SlowCall;

/* Sends an Update, reports that it is sent, then waits for the reply. */
static gpointer
slow_update (gpointer data)
{
  SlowCall *call = data;
  g_autoptr (RankClient) c
      = rank_test_client (call->port, TRUE, RANK_PROTOCOL_BINARY);
  rankRankingIf *iface = rank_client_iface (c);
  rankUpdateRequest *req
      = g_object_new (RANK_TYPE_UPDATE_REQUEST, "board", call->board, "member",
                      "ann", "value", (gint64) 5, "request_id", "slow", NULL);
  rankUpdateResponse *resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  rankInvalidArgument *invalid = NULL;
  rankUnavailable *unavailable = NULL;
  gboolean sent = rank_ranking_client_send_update (iface, req, NULL);

  g_mutex_lock (&call->lock);
  call->sent = TRUE;
  g_cond_signal (&call->cond);
  g_mutex_unlock (&call->lock);
  call->ok = sent
             && rank_ranking_client_recv_update (iface, &resp, &invalid,
                                                 &unavailable, NULL);
  call->score = resp->score;
  g_object_unref (resp);
  g_object_unref (req);
  return NULL;
}

/* SIGTERM while a call waits on a slow Redis (DEBUG SLEEP from another
 * connection): the call is answered, then rankd exits 0. The request is
 * in rankd's socket before the signal (loopback send has completed), so
 * rankd must answer it however the timing falls. */
static void
test_sigterm_drains (void)
{
  RankTestProcess *own = rank_test_rankd_start (redis->port, NULL);
  g_autofree char *b = rank_test_unique ("drain");
  SlowCall call = { .port = own->port, .board = b };
  redisContext *sleeper = redis_connect (redis->port);
  GThread *thread;
  redisReply *r;
  int done = 0;

  g_mutex_init (&call.lock);
  g_cond_init (&call.cond);
  redisAppendCommand (sleeper, "DEBUG SLEEP 1");
  while (!done)
    g_assert_cmpint (redisBufferWrite (sleeper, &done), ==, REDIS_OK);
  thread = g_thread_new ("slow", slow_update, &call);
  g_mutex_lock (&call.lock);
  while (!call.sent)
    g_cond_wait (&call.cond, &call.lock);
  g_mutex_unlock (&call.lock);

  stop_checked (own);
  g_thread_join (thread);
  g_assert_true (call.ok);
  g_assert_cmpint (call.score, ==, 5);
  g_assert_cmpint (redisGetReply (sleeper, (void **) &r), ==, REDIS_OK);
  freeReplyObject (r);
  redisFree (sleeper);
  g_mutex_clear (&call.lock);
  g_cond_clear (&call.cond);
  rank_test_process_free (own);
}

/* ---- connection limits ---- */

/* A client whose connection rankd serves. Connecting may be refused
 * while rankd still counts a connection that just closed (the harness's
 * readiness probe, say): then try again, within a deadline. */
static RankClient *
served_client (guint16 port)
{
  gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  for (;;)
    {
      RankClient *c = rank_test_client (port, TRUE, RANK_PROTOCOL_BINARY);
      rankEntry *entry = g_object_new (RANK_TYPE_ENTRY, NULL);
      rankInvalidArgument *invalid = NULL;
      rankNotFound *not_found = NULL;
      rankUnavailable *unavailable = NULL;
      GError *error = NULL;

      positional_get_rank (rank_client_iface (c), &entry, "b", "m", 0, &invalid,
                           &not_found, &unavailable, &error);
      g_object_unref (entry);
      g_clear_object (&invalid);
      g_clear_object (&unavailable);
      if (not_found != NULL)
        {
          g_object_unref (not_found);
          return c;
        }
      g_clear_error (&error);
      rank_client_free (c);
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (20 * 1000);
    }
}

static void
test_max_connections (void)
{
  const char *args[] = { "--max-connections", "3", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  RankClient *clients[3];
  g_autofree char *b = rank_test_unique ("maxconn");
  int extra;

  for (int i = 0; i < 3; i++)
    clients[i] = served_client (own->port);
  extra = rank_test_connect_raw (own->port);
  /* Refused: closed at once, without a byte. */
  g_assert_true (rank_test_wait_closed (extra, 5000));
  close (extra);
  for (int i = 0; i < 3; i++)
    {
      g_autofree char *rid = g_strdup_printf ("c%d", i);
      g_auto (Result) u
          = update_on (clients[i], b, "ann", 1, rid, NO_MODE, NO_TIME);
      assert_ok (&u);
      g_assert_cmpint (u.score, ==, i + 1);
      rank_client_free (clients[i]);
    }
  stop_checked (own);
  rank_test_process_free (own);
}

static void
test_idle_timeout (void)
{
  const char *args[] = { "--idle-timeout", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (RankClient) busy
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("idle");
  int idle = rank_test_connect_raw (own->port);
  gint64 start = g_get_monotonic_time ();

  /* The idle one is closed after about a second (the sweep runs once a
   * second); the busy one, calling every 100 ms, stays. */
  while (g_get_monotonic_time () - start < 2500 * 1000)
    {
      g_auto (Result) r = get_rank_on (busy, b, "nobody");
      assert_fails (&r, NOT_FOUND, NULL);
      g_usleep (100 * 1000); /* the client's own pace, not a wait */
    }
  g_assert_true (rank_test_wait_closed (idle, 3000));
  close (idle);
  {
    g_auto (Result) r = get_rank_on (busy, b, "nobody");
    assert_fails (&r, NOT_FOUND, NULL);
  }
  g_clear_pointer (&busy, rank_client_free);
  stop_checked (own);
  rank_test_process_free (own);
}

/* ---- client faults ---- */

/* A framed, strict-binary GetTopN(board, n, 0) call, encoded by hand. */
static GByteArray *
top_call_frame (const char *board, gint32 n, gint32 seqid)
{
  GByteArray *b = frame_begin ("GetTopN", seqid);

  frame_request (b);
  frame_field (b, 11, 1); /* 1: string board */
  frame_put_str (b, board);
  frame_field (b, 8, 2); /* 2: i32 n */
  frame_put_u32 (b, (guint32) n);
  frame_field (b, 8, 3); /* 3: i32 offset */
  frame_put_u32 (b, 0);
  frame_request_end (b);
  frame_end (b);
  return b;
}

/* A client that sends half a request and stalls holds its own connection
 * only: others are served meanwhile, and it is closed once the request has
 * not arrived whole within 10 s. */
static void
test_half_frame_stalls (void)
{
  g_autoptr (GByteArray) frame = top_call_frame ("stall", 10, 1);
  int fd = rank_test_connect_raw (rankd->port);
  gint64 start = g_get_monotonic_time ();

  g_assert_cmpint (write (fd, frame->data, frame->len / 2), ==, frame->len / 2);
  assert_still_serving ();
  g_assert_true (
      rank_test_wait_closed (fd, RANK_REQUEST_READ_TIMEOUT_MS + 5000));
  g_assert_cmpint (g_get_monotonic_time () - start, >=,
                   (RANK_REQUEST_READ_TIMEOUT_MS - 1000) * 1000);
  close (fd);
}

/* A client that sends requests and never reads the replies: rankd answers
 * one request at a time and reads no more while the reply is unsent, so the
 * client costs one reply's buffer, whatever it sends. */
static void
test_slow_reader (void)
{
  g_autofree char *b = rank_test_unique ("slowread");
  g_autoptr (GByteArray) frame = top_call_frame (b, RANK_TOP_N_MAX, 9);
  int fd = rank_test_connect_raw (rankd->port);
  gsize sent = 0, before, after;
  int frames = 0;

  for (int i = 0; i < RANK_TOP_N_MAX; i++)
    {
      g_autofree char *m = g_strdup_printf ("member-with-a-long-name-%04d", i);
      g_auto (Result) r = update (b, m, i, m, NO_MODE, NO_TIME);

      assert_ok (&r);
    }
  before = rankd_rss ();
  /* Send until the socket takes no more (rankd stopped reading). */
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
  while (sent < 64 * 1024 * 1024)
    {
      ssize_t n = write (fd, frame->data + sent % frame->len,
                         frame->len - sent % frame->len);

      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          struct pollfd pfd = { fd, POLLOUT, 0 };

          if (poll (&pfd, 1, 500) == 0)
            break; /* nothing more accepted for 0.5 s: rankd stopped */
          continue;
        }
      g_assert_cmpint (n, >, 0);
      sent += (gsize) n;
      frames = (int) (sent / frame->len);
    }
  g_test_message ("%d requests (%zu KiB) sent, none read", frames, sent / 1024);
  /* Taken: the kernel's socket buffers and at most one max-size request
   * (1 MiB) buffered by rankd; then nothing more. */
  g_assert_cmpuint (sent, <, 32 * 1024 * 1024);
  assert_still_serving ();
  after = rankd_rss ();
  g_test_message ("rankd RSS %zu KiB -> %zu KiB", before, after);
#ifndef RANKD_SANITIZE /* ASan's quarantine holds freed memory */
  if (g_getenv ("RANKD_TEST_WRAPPER") == NULL)
    g_assert_cmpuint (after, <, before + 4096);
#endif
  close (fd);
  assert_still_serving ();
}

/* A client that sends its requests and half-closes (shutdown(SHUT_WR)) gets
 * every reply, then rankd closes the connection. Found by the fuzz target:
 * with edge-triggered events the FIN that came with the last request went
 * unseen, and the connection stayed open until the idle timeout. */
static void
test_half_close (void)
{
  g_autofree char *b = rank_test_unique ("halfclose");
  int fd = rank_test_connect_raw (rankd->port);
  GByteArray *all = g_byte_array_new ();
  guint8 buf[65536];
  gsize got = 0;
  gint64 start = g_get_monotonic_time ();

  for (int i = 0; i < 3; i++)
    {
      g_autoptr (GByteArray) f = top_call_frame (b, 10, i);

      g_byte_array_append (all, f->data, f->len);
    }
  /* One write, then FIN: they reach rankd together. */
  g_assert_cmpint (write (fd, all->data, all->len), ==, all->len);
  shutdown (fd, SHUT_WR);
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);

      g_assert_cmpint (n, >=, 0); /* not a 10 s receive timeout */
      if (n == 0)
        break;
      got += (gsize) n;
    }
  /* Three empty pages: each a 4-byte frame length and a reply of 31 bytes
   * (header 19; the result struct with an empty list 9). */
  g_assert_cmpuint (got, ==, 3 * (4 + 19 + 9));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);
  g_byte_array_unref (all);
  close (fd);
}

/* Reads exactly n bytes (10 s receive timeout): FALSE if the connection
 * closed first. */
static gboolean
read_exactly (int fd, guint8 *buf, gsize n)
{
  for (gsize got = 0; got < n;)
    {
      ssize_t r = read (fd, buf + got, n - got);

      if (r <= 0)
        return FALSE;
      got += (gsize) r;
    }
  return TRUE;
}

/* Unframed: a request that stops half-way, behind another request, then
 * the client half-closes. Reading the half request consumed every buffered
 * byte, and the buffer then reset itself under the message's start: the
 * rewind went past the end of the data and the next read ran off the
 * buffer (found by the fuzz target; ASan: heap-buffer-overflow). Now the
 * connection just closes after the first reply. */
static void
test_buffered_rewind_after_reset (void)
{
  const char *args[] = { "--transport", "buffered", "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (GByteArray) first = top_call_frame ("split", 10, 1);
  g_autoptr (GByteArray) second = top_call_frame ("split", 10, 2);
  int fd = rank_test_connect_raw (own->port);
  GByteArray *out = g_byte_array_new ();
  guint8 reply[28];

  /* Unframed: the messages without their 4-byte frame length. */
  g_byte_array_append (out, first->data + 4, first->len - 4);
  g_byte_array_append (out, second->data + 4, 30);
  g_assert_cmpint (write (fd, out->data, out->len), ==, out->len);
  g_assert_true (read_exactly (fd, reply, sizeof reply));
  /* The reply to the first; the half second is parsed and set aside. Now
   * the FIN alone. */
  shutdown (fd, SHUT_WR);
  /* EOF, and not a byte before it: there is no second request to answer.
   * (Before the fix rankd read stale buffer memory as the rest of it.) */
  g_assert_cmpint (read (fd, reply, sizeof reply), ==, 0);
  g_byte_array_unref (out);
  close (fd);
  assert_still_serving ();
  stop_checked (own);
  rank_test_process_free (own);
}

/* 1,000 connections at once, each served. */
static void
test_thousand_connections (void)
{
  g_autofree char *b = rank_test_unique ("thousand");
  GPtrArray *clients
      = g_ptr_array_new_with_free_func ((GDestroyNotify) rank_client_free);
  struct rlimit nofile;

  /* This process needs the descriptors too. */
  getrlimit (RLIMIT_NOFILE, &nofile);
  if (nofile.rlim_cur < 1200 && nofile.rlim_max >= 1200)
    {
      nofile.rlim_cur = MIN (nofile.rlim_max, 4096);
      setrlimit (RLIMIT_NOFILE, &nofile);
    }
  for (int i = 0; i < 1000; i++)
    g_ptr_array_add (
        clients, rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY));
  g_assert_cmpuint (clients->len, ==, 1000);
  for (guint i = 0; i < clients->len; i++)
    {
      g_autofree char *m = g_strdup_printf ("m%u", i);
      g_auto (Result) r = update_on (g_ptr_array_index (clients, i), b, m, 1, m,
                                     NO_MODE, NO_TIME);

      assert_ok (&r);
    }
  {
    g_autoptr (GPtrArray) page = top (b, RANK_TOP_N_MAX, 0);

    g_assert_cmpuint (page->len, ==, 1000);
  }
  g_ptr_array_unref (clients);
}

/* ---- transports and protocols ---- */

static void
check_transport (const char *transport, const char *protocol)
{
  const char *args[]
      = { "--transport", transport, "--protocol", protocol, NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  RankProtocolKind kind;
  g_autofree char *b = rank_test_unique (transport);

  g_assert_true (rank_protocol_kind_parse (protocol, &kind));
  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, g_str_equal (transport, "framed"), kind);

    /* 200 members with long names: replies far over 512 bytes. */
    for (int i = 0; i < 200; i++)
      {
        g_autofree char *m = g_strdup_printf ("%0200d", i);
        g_autofree char *rid = g_strdup_printf ("r%d", i);
        g_auto (Result) u = update_on (c, b, m, i, rid, NO_MODE, NO_TIME);

        assert_ok (&u);
        g_assert_cmpint (u.rank, ==, 1);
      }
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_on (c, b, 200, 0, &r);
    g_assert_nonnull (page);
    g_assert_cmpuint (page->len, ==, 200);
    g_assert_cmpint (((rankEntry *) page->pdata[0])->score, ==, 199);
    g_auto (Result) g
        = get_rank_on (c, b, ((rankEntry *) page->pdata[5])->member);
    assert_ok (&g);
    g_assert_cmpint (g.rank, ==, 6);
  }
  stop_checked (own);
  rank_test_process_free (own);
}

static void
test_transport_framed_binary (void)
{
  check_transport ("framed", "binary");
}

static void
test_transport_framed_compact (void)
{
  check_transport ("framed", "compact");
}

static void
test_transport_buffered_binary (void)
{
  check_transport ("buffered", "binary");
}

static void
test_transport_buffered_compact (void)
{
  check_transport ("buffered", "compact");
}

/* ---- the embedded Redis ---- */

static void
test_embedded_persists (void)
{
  RankTestProcess *own = rank_test_rankd_start (0, NULL);
  g_autofree char *sock
      = g_build_filename (own->dir, "data", "redis.sock", NULL);

  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
    g_auto (Result) u
        = update_on (c, "kept", "ann", 77, "p1", NO_MODE, NO_TIME);

    assert_ok (&u);
    g_assert_true (g_file_test (sock, G_FILE_TEST_EXISTS));
  }
  stop_checked (own);
  /* The embedded Redis was stopped with rankd (it removes its socket). */
  g_assert_false (g_file_test (sock, G_FILE_TEST_EXISTS));
  rank_test_restart (own);
  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
    g_auto (Result) r = get_rank_on (c, "kept", "ann");
    g_auto (Result) u
        = update_on (c, "kept", "ann", 77, "p1", NO_MODE, NO_TIME);

    assert_ok (&r);
    g_assert_cmpint (r.score, ==, 77);
    /* The idempotency record survived too. */
    assert_ok (&u);
    g_assert_false (u.applied);
  }
  stop_checked (own);
  rank_test_process_free (own);
}

/* The pid of parent's child named name, or 0. */
static GPid
child_named (GPid parent, const char *name)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *entry;

  while ((entry = g_dir_read_name (proc)) != NULL)
    {
      g_autofree char *path = g_strdup_printf ("/proc/%s/stat", entry);
      g_autofree char *stat = NULL;
      char comm[64];
      int pid, ppid;
      char state;

      if (!g_ascii_isdigit (entry[0])
          || !g_file_get_contents (path, &stat, NULL, NULL))
        continue;
      if (sscanf (stat, "%d (%63[^)]) %c %d", &pid, comm, &state, &ppid) == 4
          && ppid == parent && strcmp (comm, name) == 0)
        return pid;
    }
  return 0;
}

/* The embedded Redis killed with SIGKILL: rankd starts it again on its
 * data, and serves again without a restart. */
static void
test_embedded_restarted (void)
{
  RankTestProcess *own = rank_test_rankd_start (0, NULL);
  g_autofree char *sock
      = g_build_filename (own->dir, "data", "redis.sock", NULL);
  g_autoptr (RankClient) c
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  GPid first, second;
  gint64 end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  redisContext *direct;
  redisReply *reply;

  /* rankd listens before its Redis is up; its first answer means it is. */
  {
    g_auto (Result) r = get_rank_on (c, "revived", "ann");

    assert_fails (&r, NOT_FOUND, NULL);
  }
  first = child_named (own->pid, "redis-server");
  g_assert_cmpint (first, >, 0);
  direct = redisConnectUnix (sock);
  /* Every write on disk before its reply, so a SIGKILL loses nothing. */
  if (direct == NULL || direct->err != 0)
    g_error ("cannot connect to %s: %s", sock, direct ? direct->errstr : "?");
  reply = redisCommand (direct, "CONFIG SET appendfsync always");
  g_assert_cmpint (reply->type, ==, REDIS_REPLY_STATUS);
  freeReplyObject (reply);
  redisFree (direct);
  {
    g_auto (Result) u
        = update_on (c, "revived", "ann", 5, "k1", NO_MODE, NO_TIME);

    assert_ok (&u);
  }
  kill (first, SIGKILL);
  for (;;)
    {
      g_auto (Result) u
          = update_on (c, "revived", "ann", 2, "k2", NO_MODE, NO_TIME);

      if (u.kind == OK)
        {
          g_assert_cmpint (u.score, ==, 7);
          break;
        }
      assert_fails (&u, UNAVAILABLE, NULL);
      if (g_get_monotonic_time () > end)
        g_error ("the embedded Redis was not restarted within 30 s");
      g_usleep (20 * 1000); /* a client's retry back-off */
    }
  second = child_named (own->pid, "redis-server");
  g_assert_cmpint (second, >, 0);
  g_assert_cmpint (second, !=, first);
  stop_checked (own);
  /* Stopped with rankd, not restarted again. */
  g_assert_cmpint (kill (second, 0), ==, -1);
  rank_test_process_free (own);
}

/* ---- memory ---- */

static void
test_rss_flat (void)
{
  g_autofree char *b = rank_test_unique ("rss");
  gsize warm, after;

#ifdef RANKD_SANITIZE
  g_test_skip ("AddressSanitizer's quarantine holds freed memory on purpose");
  return;
#endif
  for (int i = 0; i < 100; i++)
    {
      g_autofree char *m = g_strdup_printf ("m%d", i);
      g_autofree char *rid = g_strdup_printf ("r%d", i);
      g_auto (Result) u = update (b, m, i, rid, NO_MODE, NO_TIME);
      assert_ok (&u);
    }
  for (int i = 0; i < 10000; i++)
    {
      g_auto (Result) r = get_rank (b, "m5");
      assert_ok (&r);
    }
  warm = rankd_rss ();
  for (int i = 0; i < 100000; i++)
    {
      if (i % 10 == 0)
        {
          g_autoptr (GPtrArray) page = top (b, 100, 0);
          g_assert_cmpuint (page->len, ==, 100);
        }
      else
        {
          g_auto (Result) r = get_rank (b, "m5");
          assert_ok (&r);
        }
    }
  after = rankd_rss ();
  g_test_message (
      "rankd RSS after 10k calls: %zu KiB, after 100k more: %zu KiB", warm,
      after);
  /* The stock library leaks ~200 B per GetRank and ~7 KB per GetTopN(100):
   * 90k + 10k calls would add ~80 MB. Allow allocator noise only. */
  g_assert_cmpuint (after, <, warm + 2048);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  redis = rank_test_redis_start (NULL);
  rankd = rank_test_rankd_start (redis->port, NULL);
  client = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);

  g_test_add_func ("/update/modes", test_modes);
  g_test_add_func ("/update/invalid-mode", test_invalid_mode);
  g_test_add_func ("/update/ties-first-come", test_ties);
  g_test_add_func ("/update/unchanged-keeps-time", test_unchanged_keeps_time);
  g_test_add_func ("/update/exact-extremes", test_exact_extremes);
  g_test_add_func ("/update/range-refused", test_range_refused);
  g_test_add_func ("/idempotency/retry-counts-once", test_retry_counts_once);
  g_test_add_func ("/idempotency/retry-across-layouts",
                   test_retry_across_layouts);
  g_test_add_func ("/idempotency/reuse-refused", test_request_id_reuse_refused);
  g_test_add_func ("/idempotency/key-layout", test_key_layout);
  g_test_add_func ("/idempotency/window", test_dedup_window);
  g_test_add_func ("/idempotency/packed-records", test_packed_records);
  g_test_add_func ("/idempotency/meta-buckets", test_meta_buckets);
  g_test_add_func ("/idempotency/applied-only-answer",
                   test_applied_only_answer);
  g_test_add_func ("/idempotency/layout-sizing", test_layout_sizing);
  g_test_add_func ("/idempotency/layout-split", test_layout_split);
  g_test_add_func ("/idempotency/retry-from-a-clock-behind",
                   test_retry_from_a_clock_behind);
  g_test_add_func ("/names/limits", test_name_limits);
  g_test_add_func ("/read/get-rank-not-found", test_get_rank_not_found);
  g_test_add_func ("/read/top-bounds", test_top_bounds);
  g_test_add_func ("/read/top-paging", test_top_paging);
  g_test_add_func ("/concurrency/16x500-exact-then-repeated",
                   test_concurrent_exact);
  g_test_add_func ("/hostile/random-bytes", test_hostile_random_bytes);
  g_test_add_func ("/hostile/zero-length-frame", test_hostile_zero_frame);
  g_test_add_func ("/hostile/2GiB-length-prefix", test_hostile_huge_prefix);
  g_test_add_func ("/hostile/http-request", test_hostile_http);
  g_test_add_func ("/hostile/args-as-generated", test_args_as_generated);
  g_test_add_func ("/hostile/batch-args-as-generated",
                   test_batch_args_as_generated);
  g_test_add_func ("/hostile/missing-required-field",
                   test_missing_required_field);
  g_test_add_func ("/hostile/unknown-method", test_unknown_method);
  g_test_add_func ("/transport/pipelined-replies-in-order",
                   test_pipelined_in_order);
  g_test_add_func ("/redis/unreachable", test_redis_unreachable);
  g_test_add_func ("/redis/restarted", test_redis_restarted);
  g_test_add_func ("/redis/noscript-reload", test_noscript_reload);
  g_test_add_func ("/shutdown/sigterm-drains-calls-in-flight",
                   test_sigterm_drains);
  g_test_add_func ("/limits/max-connections", test_max_connections);
  g_test_add_func ("/limits/idle-timeout", test_idle_timeout);
  g_test_add_func ("/limits/half-frame-stalls", test_half_frame_stalls);
  g_test_add_func ("/limits/slow-reader", test_slow_reader);
  g_test_add_func ("/limits/1000-connections", test_thousand_connections);
  g_test_add_func ("/transport/half-close-gets-every-reply", test_half_close);
  g_test_add_func ("/transport/buffered-rewind-after-reset",
                   test_buffered_rewind_after_reset);
  g_test_add_func ("/transport/framed-binary", test_transport_framed_binary);
  g_test_add_func ("/transport/framed-compact", test_transport_framed_compact);
  g_test_add_func ("/transport/buffered-binary",
                   test_transport_buffered_binary);
  g_test_add_func ("/transport/buffered-compact",
                   test_transport_buffered_compact);
  g_test_add_func ("/embedded/persists-across-restart", test_embedded_persists);
  g_test_add_func ("/embedded/restarted-when-killed", test_embedded_restarted);
  g_test_add_func ("/memory/rss-flat-over-100k-calls", test_rss_flat);
  status = g_test_run ();

  g_clear_pointer (&client, rank_client_free);
  stop_checked (rankd);
  rank_test_process_free (rankd);
  rank_test_process_free (redis);
  return status;
}
