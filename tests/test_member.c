/* test_member.c -- subscores (tie-breakers after the score) and member data,
 * on ordinary and sharded boards, through the C client against a real
 * rankd and Redis.
 */
#include <string.h>

#include "calls.h"
#include "constants.h"
#include "harness.h"

static RankTestBed bed;

/* raid: stage (higher first), then fewer characters, then the shorter
 * clear time; BEST keeps the better whole tuple. */
static const char config_text[] = "[board raid]\n"
                                  "mode=best\n"
                                  "subscores=asc,asc\n"
                                  "[board raid_sh]\n"
                                  "mode=best\n"
                                  "subscores=asc,asc\n"
                                  "shards=4\n"
                                  "[board inv]\n"
                                  "mode=best\n"
                                  "subscores=asc,asc\n"
                                  "[board hi]\n"
                                  "subscores=desc\n"
                                  "[board capped]\n"
                                  "mode=best\n"
                                  "subscores=asc\n"
                                  "cap=3\n"
                                  "[board data_sh]\n"
                                  "shards=4\n"
                                  "[board daily]\n"
                                  "period=daily\n";

#define T0 G_GINT64_CONSTANT (1763800000000)
#define NO_SUBS ((const gint64 *) NULL)

static rankUpdateRequest *
request (const char *board, const char *member, gint64 value, const char *rid,
         int mode, gint64 ts, const gint64 *subs, guint n_subs)
{
  rankUpdateRequest *req
      = update_request_new (board, member, value, rid, mode, ts);

  if (subs != NULL)
    {
      g_array_append_vals (req->subscores, subs, n_subs);
      req->__isset_subscores = TRUE;
    }
  return req;
}

static Result
update_subs (const char *board, const char *member, gint64 value,
             const char *rid, int mode, gint64 ts, const gint64 *subs,
             guint n_subs)
{
  rankUpdateRequest *req
      = request (board, member, value, rid, mode, ts, subs, n_subs);
  Result r = update_request_on (bed.client, req);

  g_object_unref (req);
  return r;
}

/* An update of board that sets the member's data to the pairs in kv
 * (key, value, ..., NULL). */
static Result
update_data (const char *board, const char *member, gint64 value,
             const char *rid, const char *const *kv)
{
  rankUpdateRequest *req
      = request (board, member, value, rid, NO_MODE, NO_TIME, NO_SUBS, 0);
  Result r;

  for (guint i = 0; kv[i] != NULL; i += 2)
    g_hash_table_insert (req->data, g_strdup (kv[i]), g_strdup (kv[i + 1]));
  req->__isset_data = TRUE;
  r = update_request_on (bed.client, req);
  g_object_unref (req);
  return r;
}

static void
assert_subs (const Result *r, const gint64 *want, guint n)
{
  assert_ok (r);
  g_assert_cmpuint (r->n_subscores, ==, n);
  for (guint i = 0; i < n; i++)
    g_assert_cmpint (r->subscores[i], ==, want[i]);
}

/* The page's members, joined by spaces. */
static char *
top_members (const char *board, gint32 n)
{
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = top_on (bed.client, board, n, 0, &r);
  GString *out = g_string_new (NULL);

  assert_ok (&r);
  for (guint i = 0; i < page->len; i++)
    {
      rankEntry *e = g_ptr_array_index (page, i);

      g_assert_cmpint (e->rank, ==, i + 1);
      g_string_append_printf (out, "%s%s", i ? " " : "", e->member);
    }
  return g_string_free (out, FALSE);
}

/* ---- subscores ---- */

/* Teams clear stages; the board orders them by stage, then characters,
 * then clear time, then who got there first, then name. */
static void
test_raid (gconstpointer data)
{
  const char *b = data;
  struct
  {
    const char *team;
    gint64 stage, chars, ms, ts;
  } clears[] = {
    { "ash", 5, 4, 90000, T0 },        { "birch", 7, 6, 120000, T0 + 1 },
    { "cedar", 7, 4, 150000, T0 + 2 }, { "dogwood", 7, 4, 110000, T0 + 3 },
    { "elm", 7, 4, 110000, T0 + 4 },   { "fir", 7, 4, 110000, T0 + 3 },
    { "gum", 6, 1, 1000, T0 + 5 },
  };
  g_autofree char *order = NULL;

  for (gsize i = 0; i < G_N_ELEMENTS (clears); i++)
    {
      gint64 subs[] = { clears[i].chars, clears[i].ms };
      g_autofree char *rid = g_strdup_printf ("%s-clear-%zu", b, i);
      g_auto (Result) r = update_subs (b, clears[i].team, clears[i].stage, rid,
                                       NO_MODE, clears[i].ts, subs, 2);

      assert_subs (&r, subs, 2);
      g_assert_cmpint (r.score, ==, clears[i].stage);
      g_assert_true (r.applied);
    }
  /* dogwood and fir tie on everything but the name; elm came later. */
  order = top_members (b, 10);
  g_assert_cmpstr (order, ==, "dogwood fir elm cedar birch gum ash");
  {
    g_auto (Result) r = get_rank_on (bed.client, b, "cedar");
    gint64 want[] = { 4, 150000 };

    assert_subs (&r, want, 2);
    g_assert_cmpint (r.rank, ==, 4);
    g_assert_cmpint (r.score, ==, 7);
  }
  {
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_on (bed.client, b, 2, 3, &r);
    rankEntry *e;

    assert_ok (&r);
    g_assert_cmpuint (page->len, ==, 2);
    e = g_ptr_array_index (page, 1);
    g_assert_cmpstr (e->member, ==, "birch");
    g_assert_true (e->__isset_subscores);
    g_assert_cmpuint (e->subscores->len, ==, 2);
    g_assert_cmpint (g_array_index (e->subscores, gint64, 0), ==, 6);
    g_assert_cmpint (g_array_index (e->subscores, gint64, 1), ==, 120000);
    g_assert_false (e->__isset_data);
  }
}

/* BEST keeps one whole submission: never the stage of one and the time of
 * another. */
static void
test_best_whole_tuple (gconstpointer data)
{
  const char *b = data;
  gint64 first[] = { 4, 100000 }, fewer[] = { 3, 500000 },
         worse_stage[] = { 1, 1 }, same[] = { 3, 500000 };
  g_auto (Result) a = update_subs (b, "m", 10, "m1", NO_MODE, T0, first, 2);
  g_auto (Result) c = { 0 };
  g_auto (Result) d = { 0 };
  g_auto (Result) e = { 0 };
  g_auto (Result) f = { 0 };
  g_auto (Result) g = { 0 };

  assert_subs (&a, first, 2);
  /* A lower stage loses, however good its subscores. */
  c = update_subs (b, "m", 9, "m2", NO_MODE, T0 + 1, worse_stage, 2);
  assert_subs (&c, first, 2);
  g_assert_cmpint (c.score, ==, 10);
  /* The same stage with fewer characters wins, slower time and all. */
  d = update_subs (b, "m", 10, "m3", NO_MODE, T0 + 2, fewer, 2);
  assert_subs (&d, fewer, 2);
  /* The same tuple again changes nothing: n, who reaches it later, stays
   * behind m, who reached it first. */
  e = update_subs (b, "n", 10, "n1", NO_MODE, T0 + 3, same, 2);
  assert_subs (&e, same, 2);
  f = update_subs (b, "m", 10, "m4", NO_MODE, T0 + 9, same, 2);
  assert_subs (&f, same, 2);
  g = get_rank_on (bed.client, b, "m");
  assert_ok (&g);
  {
    g_auto (Result) n = get_rank_on (bed.client, b, "n");

    assert_ok (&n);
    g_assert_cmpint (n.rank, ==, g.rank + 1);
  }
}

/* subscores=desc: higher first, over the whole i64 range. */
static void
test_desc_extremes (void)
{
  gint64 lo[] = { G_MININT64 }, hi[] = { G_MAXINT64 }, mid[] = { 0 };
  g_auto (Result) a
      = update_subs ("hi", "low", 1, "hi1", RANK_UPDATE_MODE_SET, T0, lo, 1);
  g_auto (Result) b
      = update_subs ("hi", "high", 1, "hi2", RANK_UPDATE_MODE_SET, T0, hi, 1);
  g_auto (Result) c
      = update_subs ("hi", "mid", 1, "hi3", RANK_UPDATE_MODE_SET, T0, mid, 1);
  g_autofree char *order = NULL;

  assert_subs (&a, lo, 1);
  assert_subs (&b, hi, 1);
  assert_subs (&c, mid, 1);
  order = top_members ("hi", 10);
  g_assert_cmpstr (order, ==, "high mid low");
}

/* An INCREMENT may leave the subscores out: the member keeps its own (a new
 * member starts at 0s); with them, they replace its own. */
static void
test_increment_keeps (void)
{
  gint64 seven[] = { 7 }, zero[] = { 0 };
  g_auto (Result) a = update_subs ("hi", "inc", 5, "inc1",
                                   RANK_UPDATE_MODE_INCREMENT, T0, NO_SUBS, 0);
  g_auto (Result) b = update_subs ("hi", "inc", 5, "inc2",
                                   RANK_UPDATE_MODE_INCREMENT, T0, seven, 1);
  g_auto (Result) c = update_subs ("hi", "inc", 5, "inc3",
                                   RANK_UPDATE_MODE_INCREMENT, T0, NO_SUBS, 0);

  assert_subs (&a, zero, 1);
  assert_subs (&b, seven, 1);
  assert_subs (&c, seven, 1);
  g_assert_cmpint (c.score, ==, 15);
}

static void
test_subscores_invalid (void)
{
  gint64 one[] = { 1 }, three[] = { 1, 2, 3 }, two[] = { 1, 2 };
  g_auto (Result) a = update_subs ("inv", "x", 1, "inv1", NO_MODE, T0, one, 1);
  g_auto (Result) b
      = update_subs ("inv", "x", 1, "inv2", NO_MODE, T0, three, 3);
  g_auto (Result) c
      = update_subs ("inv", "x", 1, "inv3", NO_MODE, T0, NO_SUBS, 0);
  g_auto (Result) d
      = update_subs ("plain", "x", 1, "inv4", NO_MODE, T0, one, 1);
  g_auto (Result) e = get_rank_on (bed.client, "inv", "x");
  g_auto (Result) f = get_rank_on (bed.client, "plain", "x");
  g_auto (Result) ok = update_subs ("inv", "x", 1, "inv5", NO_MODE, T0, two, 2);
  g_auto (Result) reuse
      = update_subs ("inv", "x", 1, "inv5", NO_MODE, T0, one, 1);
  g_auto (Result) reuse2 = { 0 };
  gint64 other[] = { 2, 1 };

  assert_fails (&a, INVALID,
                "subscores: board 'inv' ranks by 2 subscores; "
                "BEST and SET must give all 2, got 1");
  assert_fails (&b, INVALID, "got 3");
  assert_fails (&c, INVALID, "got 0");
  assert_fails (&d, INVALID, "subscores: board 'plain' has none");
  /* Refused updates changed nothing. */
  assert_fails (&e, NOT_FOUND, "not on board");
  assert_fails (&f, NOT_FOUND, "not on board");
  assert_subs (&ok, two, 2);
  /* A retry must carry the same subscores. */
  assert_fails (&reuse, INVALID, "subscores");
  reuse2 = update_subs ("inv", "x", 1, "inv5", NO_MODE, T0, other, 2);
  assert_fails (&reuse2, INVALID, "request_id: already used");
  {
    g_auto (Result) again
        = update_subs ("inv", "x", 1, "inv5", NO_MODE, T0, two, 2);

    assert_subs (&again, two, 2);
    g_assert_false (again.applied);
  }
}

/* A capped board drops its worst whole tuple. */
static void
test_capped (void)
{
  const gint64 subs[][1] = { { 3 }, { 1 }, { 2 }, { 0 } };
  const char *names[] = { "c3", "c1", "c2", "c0" };
  g_autofree char *order = NULL;

  for (int i = 0; i < 4; i++)
    {
      g_autofree char *rid = g_strdup_printf ("cap-%d", i);
      g_auto (Result) r
          = update_subs ("capped", names[i], 50, rid, NO_MODE, T0, subs[i], 1);

      assert_ok (&r);
      /* Each makes the cut when it comes; c0 then pushes c3, the most
       * characters, out. */
      g_assert_cmpint (r.has_rank, ==, TRUE);
    }
  order = top_members ("capped", 10);
  g_assert_cmpstr (order, ==, "c0 c1 c2");
  {
    g_auto (Result) r = get_rank_on (bed.client, "capped", "c3");

    assert_fails (&r, NOT_FOUND, "not on board");
  }
}

/* ---- member data ---- */

static const char *
entry_value (rankEntry *e, const char *key)
{
  return e->__isset_data ? g_hash_table_lookup (e->data, key) : NULL;
}

static Kind
get_data (const char *board, const char *member, GHashTable **out)
{
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;

  *out = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (positional_get_member_data (rank_client_iface (bed.client), out, board,
                                  member, 0, &invalid, &not_found, &unavailable,
                                  &error))
    return OK;
  g_clear_object (&invalid);
  g_clear_object (&unavailable);
  g_clear_error (&error);
  if (not_found != NULL)
    {
      g_object_unref (not_found);
      return NOT_FOUND;
    }
  return INVALID;
}

/* Sets the member's data to kv; the message of the failure, or NULL. */
static char *
set_data (const char *board, const char *member, const char *const *kv,
          Kind *kind)
{
  g_autoptr (GHashTable) map
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;
  char *message = NULL;

  for (guint i = 0; kv[i] != NULL; i += 2)
    g_hash_table_insert (map, g_strdup (kv[i]), g_strdup (kv[i + 1]));
  *kind = OK;
  if (positional_set_member_data (rank_client_iface (bed.client), board, member,
                                  map, &invalid, &not_found, &unavailable,
                                  &error))
    return NULL;
  if (invalid != NULL)
    {
      *kind = INVALID;
      g_object_get (invalid, "message", &message, NULL);
    }
  else if (not_found != NULL)
    {
      *kind = NOT_FOUND;
      g_object_get (not_found, "message", &message, NULL);
    }
  else
    g_error ("SetMemberData: %s", error ? error->message : "unavailable");
  g_clear_object (&invalid);
  g_clear_object (&not_found);
  g_clear_error (&error);
  return message;
}

static void
test_data_roundtrip (gconstpointer data)
{
  const char *b = data;
  const char *const alice[] = { "name", "Alice", "country", "FR", NULL };
  const char *const bob[] = { "name", "Bób ✓", "empty", "", NULL };
  g_auto (Result) a = update_data (b, "alice", 30, "d-a", alice);
  g_auto (Result) c = update_data (b, "bob", 20, "d-b", bob);
  g_auto (Result) d
      = update_on (bed.client, b, "carol", 10, "d-c", NO_MODE, NO_TIME);
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = NULL;
  g_autoptr (GPtrArray) plain = NULL;
  g_autoptr (GHashTable) got = NULL;

  assert_ok (&a);
  assert_ok (&c);
  assert_ok (&d);
  page = top_data_on (bed.client, b, 10, 0, &r);
  assert_ok (&r);
  g_assert_cmpuint (page->len, ==, 3);
  g_assert_cmpstr (entry_value (page->pdata[0], "name"), ==, "Alice");
  g_assert_cmpstr (entry_value (page->pdata[0], "country"), ==, "FR");
  g_assert_cmpuint (g_hash_table_size (((rankEntry *) page->pdata[0])->data),
                    ==, 2);
  g_assert_cmpstr (entry_value (page->pdata[1], "name"), ==, "Bób ✓");
  g_assert_cmpstr (entry_value (page->pdata[1], "empty"), ==, "");
  /* No data: no field. */
  g_assert_false (((rankEntry *) page->pdata[2])->__isset_data);
  /* Not asked: not sent. */
  plain = top_on (bed.client, b, 10, 0, &r);
  assert_ok (&r);
  g_assert_false (((rankEntry *) plain->pdata[0])->__isset_data);
  g_assert_cmpint (get_data (b, "alice", &got), ==, OK);
  g_assert_cmpstr (g_hash_table_lookup (got, "name"), ==, "Alice");
  g_clear_pointer (&got, g_hash_table_unref);
  g_assert_cmpint (get_data (b, "carol", &got), ==, OK);
  g_assert_cmpuint (g_hash_table_size (got), ==, 0);
  g_clear_pointer (&got, g_hash_table_unref);
  g_assert_cmpint (get_data (b, "nobody", &got), ==, NOT_FOUND);
  g_clear_pointer (&got, g_hash_table_unref);

  /* GetAround with data. */
  {
    rankInvalidArgument *invalid = NULL;
    rankNotFound *not_found = NULL;
    rankUnavailable *unavailable = NULL;
    GError *error = NULL;
    g_autoptr (GPtrArray) around
        = g_ptr_array_new_with_free_func (g_object_unref);

    g_assert_true (positional_get_around (
        rank_client_iface (bed.client), &around, b, "bob", 1, 0, TRUE, &invalid,
        &not_found, &unavailable, &error));
    g_assert_cmpuint (around->len, ==, 3);
    g_assert_cmpstr (entry_value (around->pdata[0], "name"), ==, "Alice");
    g_assert_cmpstr (entry_value (around->pdata[1], "name"), ==, "Bób ✓");
  }

  /* SetMemberData replaces the whole map; an empty one deletes it. */
  {
    const char *const renamed[] = { "name", "Al", NULL };
    const char *const none[] = { NULL };
    Kind kind;
    g_autofree char *m1 = set_data (b, "alice", renamed, &kind);
    g_autofree char *m2 = NULL;
    g_autofree char *m3 = NULL;

    g_assert_cmpint (kind, ==, OK);
    g_assert_cmpint (get_data (b, "alice", &got), ==, OK);
    g_assert_cmpuint (g_hash_table_size (got), ==, 1);
    g_assert_cmpstr (g_hash_table_lookup (got, "name"), ==, "Al");
    g_clear_pointer (&got, g_hash_table_unref);
    m2 = set_data (b, "alice", none, &kind);
    g_assert_cmpint (kind, ==, OK);
    g_assert_cmpint (get_data (b, "alice", &got), ==, OK);
    g_assert_cmpuint (g_hash_table_size (got), ==, 0);
    g_clear_pointer (&got, g_hash_table_unref);
    m3 = set_data (b, "nobody", renamed, &kind);
    g_assert_cmpint (kind, ==, NOT_FOUND);
    g_assert_nonnull (strstr (m3, "member 'nobody' is not on board"));
  }
}

/* Data goes with its member: Remove, and a cap's drop. */
static void
test_data_removed (void)
{
  const char *const kv[] = { "name", "Zed", NULL };
  g_auto (Result) a = update_data ("gone", "zed", 1, "g-1", kv);
  g_autoptr (GHashTable) got = NULL;
  redisContext *redis = redis_connect (bed.redis->port);
  redisReply *reply;

  assert_ok (&a);
  reply = redisCommand (redis, "HLEN rk:{gone}:a");
  g_assert_cmpint (reply->integer, ==, 1);
  freeReplyObject (reply);
  {
    rankRemoveResponse *resp = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
    rankInvalidArgument *invalid = NULL;
    rankUnavailable *unavailable = NULL;
    GError *error = NULL;

    g_assert_true (positional_remove (rank_client_iface (bed.client), &resp,
                                      "gone", "zed", "g-2", &invalid,
                                      &unavailable, &error));
    g_assert_true (resp->removed);
    g_object_unref (resp);
  }
  reply = redisCommand (redis, "EXISTS rk:{gone}:a");
  g_assert_cmpint (reply->integer, ==, 0);
  freeReplyObject (reply);
  /* Back without data: none of the old. */
  {
    g_auto (Result) b
        = update_on (bed.client, "gone", "zed", 1, "g-3", NO_MODE, NO_TIME);

    assert_ok (&b);
    g_assert_cmpint (get_data ("gone", "zed", &got), ==, OK);
    g_assert_cmpuint (g_hash_table_size (got), ==, 0);
  }
  /* The capped board drops c3's data with c3 (test_capped ran first, but
   * give every member data here). */
  for (int i = 0; i < 5; i++)
    {
      const char *const name[] = { "name", "x", NULL };
      g_autofree char *member = g_strdup_printf ("d%d", i);
      g_autofree char *rid = g_strdup_printf ("capdata-%d", i);
      rankUpdateRequest *req;
      gint64 subs[] = { 0 };
      Result r;

      req = request ("capped", member, 100 + i, rid, NO_MODE, T0, subs, 1);
      for (guint k = 0; name[k] != NULL; k += 2)
        g_hash_table_insert (req->data, g_strdup (name[k]),
                             g_strdup (name[k + 1]));
      req->__isset_data = TRUE;
      r = update_request_on (bed.client, req);
      assert_ok (&r);
      result_clear (&r);
      g_object_unref (req);
    }
  reply = redisCommand (redis, "HLEN rk:{capped}:a");
  g_assert_cmpint (reply->integer, ==, 3);
  freeReplyObject (reply);
  redisFree (redis);
}

/* A periodic board's data expires with its period's keys. */
static void
test_data_period (void)
{
  const char *const kv[] = { "name", "Day", NULL };
  g_auto (Result) a = update_data ("daily", "d", 1, "p-1", kv);
  redisContext *redis = redis_connect (bed.redis->port);
  redisReply *reply = redisCommand (redis, "KEYS rk:{daily}:p:*:a");

  assert_ok (&a);
  g_assert_cmpuint (reply->elements, ==, 1);
  {
    redisReply *ttl = redisCommand (redis, "PTTL %s", reply->element[0]->str);

    g_assert_cmpint (ttl->integer, >, 0);
    freeReplyObject (ttl);
  }
  freeReplyObject (reply);
  redisFree (redis);
}

static void
test_data_limits (void)
{
  g_autofree char *k65 = rank_test_repeat ('k', 65);
  g_autofree char *v257 = rank_test_repeat ('v', 257);
  g_autofree char *v256 = rank_test_repeat ('v', 256);
  const char *const long_key[] = { k65, "x", NULL };
  const char *const long_value[] = { "name", v257, NULL };
  const char *const empty_key[] = { "", "x", NULL };
  const char *const bad_utf8[] = { "name", "\xff\xfe", NULL };
  const char *const total[]
      = { "a", v256, "b", v256, "c", v256, "d", v256, NULL };
  const char *const at_limit[]
      = { "a", v256, "b", v256, "c", v256, "d", v256 + 4, NULL };
  struct
  {
    const char *const *kv;
    const char *want;
  } bad[] = {
    { long_key, "data: a key must be 1-64 bytes, got 65" },
    { long_value,
      "data: the value of key 'name' must be 0-256 bytes, got 257" },
    { empty_key, "data: a key must be 1-64 bytes, got 0" },
    { bad_utf8, "data: the value of key 'name' must be valid UTF-8" },
    { total, "data: keys and values must be at most 1024 bytes in all, got "
             "1028" },
  };
  const char *kv17[35];
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);

  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree char *rid = g_strdup_printf ("lim-%zu", i);
      g_auto (Result) r = update_data ("lim", "m", 1, rid, bad[i].kv);
      g_auto (Result) after = get_rank_on (bed.client, "lim", "m");
      Kind kind;
      g_autofree char *message = NULL;

      assert_fails (&r, INVALID, bad[i].want);
      /* Refused: the score did not change either. */
      assert_fails (&after, NOT_FOUND, "not on board");
      message = set_data ("lim", "m", bad[i].kv, &kind);
      g_assert_cmpint (kind, ==, INVALID);
      g_assert_nonnull (strstr (message, bad[i].want));
    }
  for (int i = 0; i < 17; i++)
    {
      g_ptr_array_add (names, g_strdup_printf ("key%02d", i));
      kv17[2 * i] = g_ptr_array_index (names, i);
      kv17[2 * i + 1] = "v";
    }
  kv17[34] = NULL;
  {
    g_auto (Result) r = update_data ("lim", "m", 1, "lim-17", kv17);

    assert_fails (&r, INVALID, "data: at most 16 keys, got 17");
  }
  kv17[32] = NULL; /* 16 keys */
  {
    g_auto (Result) r = update_data ("lim", "m", 1, "lim-16", kv17);
    g_auto (Result) s = update_data ("lim", "m2", 1, "lim-1024", at_limit);

    assert_ok (&r);
    assert_ok (&s);
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  rank_test_bed_start (&bed, config_text);
  g_test_add_data_func ("/subscores/raid/ordinary", "raid", test_raid);
  g_test_add_data_func ("/subscores/raid/sharded", "raid_sh", test_raid);
  g_test_add_data_func ("/subscores/best-whole-tuple/ordinary", "raid",
                        test_best_whole_tuple);
  g_test_add_data_func ("/subscores/best-whole-tuple/sharded", "raid_sh",
                        test_best_whole_tuple);
  g_test_add_func ("/subscores/desc-extremes", test_desc_extremes);
  g_test_add_func ("/subscores/increment-keeps", test_increment_keeps);
  g_test_add_func ("/subscores/invalid", test_subscores_invalid);
  g_test_add_func ("/subscores/capped", test_capped);
  g_test_add_data_func ("/data/roundtrip/ordinary", "data",
                        test_data_roundtrip);
  g_test_add_data_func ("/data/roundtrip/sharded", "data_sh",
                        test_data_roundtrip);
  g_test_add_func ("/data/removed-with-member", test_data_removed);
  g_test_add_func ("/data/period-expiry", test_data_period);
  g_test_add_func ("/data/limits", test_data_limits);
  status = g_test_run ();
  rank_test_bed_stop (&bed);
  return status;
}
