/* test_service_idempotency.c -- request ids, end to end (a real
 * redis-server, a real rankd): a retry counts once, the records' key layout
 * in Redis and its growth, update.lua on its own at chosen times, the
 * dedup window.
 */
#include <string.h>

#include "constants.h"
#include "lua_scripts.h"
#include "orderkey.h"
#include "requestid.h"
#include "service.h"
#include "store.h"

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

/* The key layout docs/internals.md documents, and the records' expiry. */
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

int
main (int argc, char **argv)
{
  service_start (&argc, &argv);

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
  return service_run ();
}
