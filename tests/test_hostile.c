/* test_hostile.c -- what an attack from outside found, one test per defect;
 * each failed before its fix (RANKD_TEST_BIN runs them on an older rankd):
 *
 *   /hostile/pipelined-close-frees-connection  a client closing with 17 or
 *        more calls in flight leaked its connection for ever
 *   /hostile/non-reader-holds-one-reply  one that never read held 16
 *   /hostile/reply-over-max-frame  a reply over --max-frame dropped the
 *        connection without an answer
 *   /hostile/request-time-from-first-byte  a request sent a byte at a time
 *        stayed open past the 10 s it has from its first byte
 *   /hostile/wrong-type-changes-nothing  an update on a damaged key was
 *        applied, reported failed, and applied again by its retry
 *   /hostile/wrong-password-backs-off  a wrong Redis password became a
 *        reconnect storm
 *   /hostile/layout-recorded  a reload that changed a board's storage
 *        options (or a config cut short by a NUL) read and wrote it in
 *        another layout
 *   /hostile/data-dir-files-private  the embedded Redis's files were
 *        world-readable in a world-readable data dir
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calls.h"
#include "constants.h"
#include "requestid.h"

static RankTestProcess *redis;

/* ---- hand-made calls (framed, strict binary) ---- */

static GByteArray *
count_frame (const char *board, gint32 seqid)
{
  GByteArray *b = frame_begin ("Count", seqid);

  frame_request (b);
  frame_field (b, 11, 1);
  frame_put_str (b, board);
  frame_request_end (b);
  frame_end (b);
  return b;
}

static GByteArray *
top_data_frame (const char *board, gint32 n, gint32 seqid)
{
  GByteArray *b = frame_begin ("GetTopN", seqid);

  frame_request (b);
  frame_field (b, 11, 1);
  frame_put_str (b, board);
  frame_field (b, 8, 2);
  frame_put_u32 (b, (guint32) n);
  frame_field (b, 8, 3);
  frame_put_u32 (b, 0);
  frame_field (b, 2, 5); /* with_data */
  frame_put_u8 (b, 1);
  frame_request_end (b);
  frame_end (b);
  return b;
}

/* Sends all of b (MSG_NOSIGNAL: the peer may be gone). */
static void
send_all (int fd, const GByteArray *b)
{
  for (gsize off = 0; off < b->len;)
    {
      ssize_t n = send (fd, b->data + off, b->len - off, MSG_NOSIGNAL);

      if (n <= 0)
        return;
      off += (gsize) n;
    }
}

/* ---- helpers ---- */

static gboolean
rss_checks (void)
{
#ifdef RANKD_SANITIZE
  return FALSE; /* ASan's quarantine holds freed memory */
#else
  return g_getenv ("RANKD_TEST_WRAPPER") == NULL;
#endif
}

/* Waits until rankd's RSS has not moved by more than 64 KiB for 1 s (its
 * writes to the sockets are done); returns it. */
static gsize
settled_rss (GPid pid)
{
  gint64 end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  gsize last = rank_test_rss_kib (pid);
  gint64 since = g_get_monotonic_time ();

  while (g_get_monotonic_time () < end)
    {
      gsize now = rank_test_rss_kib (pid);

      if (now > last + 64 || now + 64 < last)
        {
          last = now;
          since = g_get_monotonic_time ();
        }
      else if (g_get_monotonic_time () - since > G_USEC_PER_SEC)
        return now;
      g_usleep (50 * 1000); /* polling a condition, with a deadline */
    }
  return last;
}

/* Updates member (with data of 4 values of 255 bytes: 1,024 bytes in all,
 * the limit) until acknowledged. */
static void
update_with_full_data (RankClient *c, const char *b, const char *member,
                       gint64 value)
{
  g_autofree char *rid
      = g_compute_checksum_for_string (G_CHECKSUM_SHA1, member, -1);
  rankUpdateRequest *req
      = update_request_new (b, member, value, rid, NO_MODE, NO_TIME);
  g_auto (Result) r = { 0 };

  for (int k = 0; k < 4; k++)
    g_hash_table_insert (req->data, g_strdup_printf ("%d", k),
                         rank_test_repeat ((char) ('a' + k), 255));
  req->__isset_data = TRUE;
  r = update_request_on (c, req);
  assert_ok (&r);
  g_object_unref (req);
}

/* A client is served within deadline_ms (connections may be refused at
 * first, while closed ones are being freed). */
static void
assert_served_soon (guint16 port, int deadline_ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) deadline_ms * 1000;

  for (;;)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (RankClient) c = rank_client_connect (
          "127.0.0.1", port, TRUE, RANK_PROTOCOL_BINARY, 2000, &error);
      rankInvalidArgument *invalid = NULL;
      rankUnavailable *unavailable = NULL;
      gint64 count = 0;

      if (c != NULL
          && positional_count (rank_client_iface (c), &count, "served", 0,
                               &invalid, &unavailable, &error))
        return;
      g_assert_null (invalid);
      g_clear_object (&unavailable);
      if (g_get_monotonic_time () > end)
        g_error ("no client served within %d ms: %s", deadline_ms,
                 error ? error->message : "?");
      g_usleep (50 * 1000); /* polling a condition, with a deadline */
    }
}

/* ---- connections ---- */

/* 12 clients send 17 to 40 calls in one write and close without reading a
 * reply. Each connection must be freed: with 4 allowed, the fifth would be
 * refused for ever otherwise. And SIGTERM does not wait on any of them. */
static void
test_pipelined_close (void)
{
  const char *args[] = { "--max-connections", "4", "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  gint64 stopping;

  for (int round = 0; round < 12; round++)
    {
      g_autoptr (GByteArray) all = g_byte_array_new ();
      int calls = round % 2 ? 40 : RANK_CONN_MAX_CALLS + 1;
      int fd = rank_test_connect_raw (own->port);

      for (int i = 0; i < calls; i++)
        {
          g_autoptr (GByteArray) f = count_frame ("closer", i);

          g_byte_array_append (all, f->data, f->len);
        }
      send_all (fd, all);
      close (fd);
      /* Each round's connection is gone before the next: at most 4. */
      assert_served_soon (own->port, 5000);
    }
  stopping = g_get_monotonic_time ();
  stop_checked (own);
  g_assert_cmpint (g_get_monotonic_time () - stopping, <, 5 * G_USEC_PER_SEC);
  rank_test_process_free (own);
}

/* 20 connections each pipeline 16 GetTopN(400, with_data) of ~0.5 MB and
 * never read: each holds one reply and its reply budget, not 16 replies. */
static void
test_non_reader (void)
{
  const char *args[] = { "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autoptr (RankClient) c
      = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  g_autofree char *b = rank_test_unique ("nonreader");
  g_autoptr (GByteArray) all = g_byte_array_new ();
  int fds[20];
  gsize before, after;

  for (int i = 0; i < 400; i++)
    {
      g_autofree char *pad = rank_test_repeat ('m', 190);
      g_autofree char *m = g_strdup_printf ("%s%04d", pad, i);

      update_with_full_data (c, b, m, i);
    }
  for (int i = 0; i < 16; i++)
    {
      g_autoptr (GByteArray) f = top_data_frame (b, 400, i);

      g_byte_array_append (all, f->data, f->len);
    }
  before = settled_rss (own->pid);
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    {
      int small = 64 * 1024;

      fds[i] = rank_test_connect_raw (own->port);
      /* The kernel's share stays small: what is left is rankd's. */
      setsockopt (fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
      send_all (fds[i], all);
    }
  after = settled_rss (own->pid);
  g_test_message ("rankd RSS %zu KiB -> %zu KiB with %zu non-readers", before,
                  after, G_N_ELEMENTS (fds));
  if (rss_checks ())
    /* A reply is ~0.5 MB: 16 of them per connection would be ~160 MB. */
    g_assert_cmpuint (after, <, before + G_N_ELEMENTS (fds) * 2 * 1024);
  assert_served_soon (own->port, 5000);
  for (guint i = 0; i < G_N_ELEMENTS (fds); i++)
    close (fds[i]);
  stop_checked (own);
  rank_test_process_free (own);
}

/* GetTopN(1000, with_data) with the longest members and the most data is
 * ~1.3 MB, over the 1 MiB request frame cap: it arrives whole. */
static void
test_large_reply (void)
{
  g_autoptr (RankClient) c = NULL;
  const char *args[] = { "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  g_autofree char *b = rank_test_unique ("large");
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = NULL;

  c = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
  for (int i = 0; i < RANK_TOP_N_MAX; i++)
    {
      g_autofree char *pad = rank_test_repeat ('x', RANK_MEMBER_MAX_BYTES - 4);
      g_autofree char *m = g_strdup_printf ("%s%04d", pad, i);

      update_with_full_data (c, b, m, i);
    }
  page = top_data_on (c, b, RANK_TOP_N_MAX, 0, &r);
  assert_ok (&r);
  g_assert_cmpuint (page->len, ==, RANK_TOP_N_MAX);
  for (guint i = 0; i < page->len; i++)
    {
      rankEntry *e = page->pdata[i];

      g_assert_cmpuint (strlen (e->member), ==, RANK_MEMBER_MAX_BYTES);
      g_assert_cmpint (e->rank, ==, i + 1);
      g_assert_true (e->__isset_data);
      g_assert_cmpuint (g_hash_table_size (e->data), ==, 4);
      g_assert_cmpuint (strlen (g_hash_table_lookup (e->data, "3")), ==, 255);
    }
  stop_checked (own);
  rank_test_process_free (own);
}

/* A request sent a byte every 2 s: closed once 10 s have passed since its
 * first byte, not kept open by each new byte. */
static void
test_first_byte (void)
{
  g_autoptr (GByteArray) f = count_frame ("drip", 1);
  const char *args[] = { "--io-threads", "1", NULL };
  RankTestProcess *own = rank_test_rankd_start (redis->port, args);
  int fd = rank_test_connect_raw (own->port);
  gint64 first = g_get_monotonic_time ();
  gboolean closed = FALSE;

  for (guint i = 0; i < f->len && !closed; i++)
    {
      if (send (fd, f->data + i, 1, MSG_NOSIGNAL) != 1)
        closed = TRUE;
      else
        closed = rank_test_wait_closed (fd, 2000);
      if (g_get_monotonic_time () - first > 15 * G_USEC_PER_SEC)
        break;
    }
  g_assert_true (closed);
  /* The sweep runs once a second. */
  g_assert_cmpint (g_get_monotonic_time () - first, >=,
                   (RANK_REQUEST_READ_TIMEOUT_MS - 500) * 1000);
  g_assert_cmpint (g_get_monotonic_time () - first, <,
                   (RANK_REQUEST_READ_TIMEOUT_MS + 2500) * 1000);
  close (fd);
  stop_checked (own);
  rank_test_process_free (own);
}

/* ---- damaged data ---- */

static void
redis_run (redisContext *r, const char *fmt, const char *arg)
{
  redisReply *reply = redisCommand (r, fmt, arg);

  g_assert_nonnull (reply);
  g_assert_cmpint (reply->type, !=, REDIS_REPLY_ERROR);
  freeReplyObject (reply);
}

static gint64
score_of (RankClient *c, const char *b, const char *m)
{
  g_auto (Result) r = get_rank_on (c, b, m);

  assert_ok (&r);
  return r.score;
}

/* With damaged set to a string, an update of a new member of board b is
 * refused naming it, and none of the keys untouched exists. */
static void
refused_untouched (RankTestBed *bed, redisContext *r, const char *b,
                   const char *damaged, const char *untouched)
{
  g_auto (Result) u = { 0 };
  g_autofree char *want = g_strdup_printf ("key %s holds a string", damaged);
  g_autofree char *exists = g_strdup_printf ("EXISTS %s", untouched);
  redisReply *reply;

  redis_run (r, "SET %s x", damaged);
  u = update_on (bed->client, b, "n", 1, "new-1", NO_MODE, NO_TIME);
  assert_fails (&u, APP_ERROR, want);
  reply = redisCommand (r, exists);
  g_assert_cmpint (reply->integer, ==, 0);
  freeReplyObject (reply);
}

/* An update whose key of member data holds a string: refused before a
 * write, naming the key and the types; its request id is not consumed, so
 * the same request applies once the key is repaired. The same for Remove,
 * SetMemberData, a new member's sorted set and a dense board's counts. */
static void
test_wrong_type (void)
{
  RankTestBed bed;
  redisContext *r;
  g_autofree char *akey = NULL;

  rank_test_bed_start (&bed, "[board dense]\nrank=dense\n");
  r = redis_connect (bed.redis->port);
  akey = g_strdup ("rk:{wtx}:a");
  {
    g_auto (Result) u
        = update_on (bed.client, "wtx", "m", 5, "r0", NO_MODE, NO_TIME);
    assert_ok (&u);
  }
  redis_run (r, "SET %s x", akey);
  for (int attempt = 0; attempt < 3; attempt++)
    {
      rankUpdateRequest *req
          = update_request_new ("wtx", "m", 100, "r1", NO_MODE, NO_TIME);
      g_auto (Result) u = { 0 };

      if (attempt == 2)
        redis_run (r, "DEL %s", akey); /* repaired */
      g_hash_table_insert (req->data, g_strdup ("k"), g_strdup ("v"));
      req->__isset_data = TRUE;
      u = update_request_on (bed.client, req);
      g_object_unref (req);
      if (attempt == 2)
        {
          /* The request id was not used up by the failures. */
          assert_ok (&u);
          g_assert_true (u.applied);
          g_assert_cmpint (u.score, ==, 105);
          break;
        }
      /* Not applied (once per attempt, before the fix). */
      g_assert_cmpint (score_of (bed.client, "wtx", "m"), ==, 5);
      assert_fails (&u, APP_ERROR,
                    "key rk:{wtx}:a holds a string where "
                    "rankd keeps a hash (member data)");
      g_assert_null (strstr (u.message, "user_script"));
    }

  /* Remove, the data key a list. */
  redis_run (r, "DEL %s", akey);
  redis_run (r, "RPUSH %s x", akey);
  {
    rankRemoveResponse *resp = g_object_new (RANK_TYPE_REMOVE_RESPONSE, NULL);
    rankInvalidArgument *invalid = NULL;
    rankUnavailable *unavailable = NULL;
    g_autoptr (GError) error = NULL;

    g_assert_false (positional_remove (rank_client_iface (bed.client), &resp,
                                       "wtx", "m", "r2", &invalid, &unavailable,
                                       &error));
    g_assert_null (invalid);
    g_assert_null (unavailable);
    g_assert_nonnull (strstr (error->message, "holds a list"));
    g_object_unref (resp);
    g_assert_cmpint (score_of (bed.client, "wtx", "m"), ==, 105);
  }
  /* SetMemberData, the same. */
  {
    g_autoptr (GHashTable) data
        = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr (GError) error = NULL;

    rankInvalidArgument *invalid = NULL;
    rankNotFound *not_found = NULL;
    rankUnavailable *unavailable = NULL;

    g_hash_table_insert (data, g_strdup ("k"), g_strdup ("w"));
    g_assert_false (positional_set_member_data (
        rank_client_iface (bed.client), "wtx", "m", data, &invalid, &not_found,
        &unavailable, &error));
    g_assert_null (invalid);
    g_assert_null (not_found);
    g_assert_null (unavailable);
    g_assert_nonnull (strstr (error->message, "key rk:{wtx}:a holds a list"));
  }

  /* A new member on a board whose sorted set is a string: nothing of it is
   * written, not even its time. A dense board's count of members per
   * score. */
  refused_untouched (&bed, r, "wtz", "rk:{wtz}:z", "rk:{wtz}:t rk:{wtz}:q");
  refused_untouched (&bed, r, "dense", "rk:{dense}:c",
                     "rk:{dense}:z rk:{dense}:t rk:{dense}:d");
  redisFree (r);
  rank_test_bed_stop (&bed);
}

/* A member's value in the times hash of the wrong length: GetRank (the
 * script-free read of an ordinal board, then rank.lua; rank.lua alone on a
 * competition board) names the key and the member, where rank.lua once
 * answered that the member is not on the board. */
static void
test_damaged_place (void)
{
  static const char *const boards[] = { "dp", "dc" };
  RankTestBed bed;
  redisContext *r;

  rank_test_bed_start (&bed, "[board dc]\nrank=competition\n");
  r = redis_connect (bed.redis->port);
  for (guint i = 0; i < G_N_ELEMENTS (boards); i++)
    {
      g_autofree char *key = g_strdup_printf ("rk:{%s}:t", boards[i]);
      g_autofree char *want = g_strdup_printf (
          "key %s holds a value of 3 bytes for member alice where rankd "
          "keeps a value of 14 bytes (member times)",
          key);
      g_auto (Result) u = update_on (bed.client, boards[i], "alice", 5, "dp-a",
                                     NO_MODE, NO_TIME);
      g_auto (Result) bob = { 0 };

      assert_ok (&u);
      {
        g_auto (Result) b = update_on (bed.client, boards[i], "bob", 7, "dp-b",
                                       NO_MODE, NO_TIME);
        assert_ok (&b);
      }
      redis_run (r, "HSET %s alice abc", key);
      {
        g_auto (Result) rank = get_rank_on (bed.client, boards[i], "alice");
        assert_fails (&rank, APP_ERROR, want);
      }
      /* The other members read as before. */
      bob = get_rank_on (bed.client, boards[i], "bob");
      assert_ok (&bob);
      g_assert_cmpint (bob.score, ==, 7);
      g_assert_cmpint (bob.rank, ==, 1);
    }
  redisFree (r);
  rank_test_bed_stop (&bed);
}

/* A damaged record hash met while a board's request-id records move to a
 * new layout: the call is refused naming it, and nothing moves (no hash
 * of the old layout is gone, none of the new one exists, the layout is
 * the same); once it is repaired, the move and the update go through. */
static void
test_wrong_type_in_layout_move (void)
{
  RankTestBed bed;
  redisContext *r;
  redisReply *reply;

  rank_test_bed_start (&bed, "");
  r = redis_connect (bed.redis->port);
  /* 200 records: a layout of 8 hashes. */
  for (int i = 0; i < 200; i++)
    {
      g_autofree char *rid = g_strdup_printf ("mv%d", i);
      g_auto (Result) u
          = update_on (bed.client, "wtm", "m", 1, rid, NO_MODE, NO_TIME);
      assert_ok (&u);
    }
  /* The bucket counts at 0, as if the records were old: the next update
   * shrinks the layout to one hash, moving its 8 hashes first. */
  reply = redisCommand (r, "HGETALL rk:{wtm}:q");
  for (gsize i = 0; i + 1 < reply->elements; i += 2)
    if (g_ascii_isdigit (reply->element[i]->str[0]))
      redis_run (r, "HSET rk:{wtm}:q %s 0", reply->element[i]->str);
  freeReplyObject (reply);
  redis_run (r, "DEL %s", "rk:{wtm}:q:8:3");
  redis_run (r, "SET %s x", "rk:{wtm}:q:8:3");
  for (int attempt = 0; attempt < 2; attempt++)
    {
      g_auto (Result) u
          = update_on (bed.client, "wtm", "m", 1, "after", NO_MODE, NO_TIME);

      if (attempt == 1)
        {
          assert_ok (&u);
          g_assert_true (u.applied);
          g_assert_cmpint (u.score, ==, 201);
          break;
        }
      assert_fails (&u, APP_ERROR,
                    "key rk:{wtm}:q:8:3 holds a string where rankd keeps a "
                    "hash (request-id records)");
      g_assert_cmpint (score_of (bed.client, "wtm", "m"), ==, 200);
      reply = redisCommand (r, "EXISTS rk:{wtm}:q:8:0 rk:{wtm}:q:8:1 "
                               "rk:{wtm}:q:8:2 rk:{wtm}:q:1:0");
      g_assert_cmpint (reply->integer, ==, 3);
      freeReplyObject (reply);
      reply = redisCommand (r, "HMGET rk:{wtm}:q s o");
      g_assert_cmpstr (reply->element[0]->str, ==, "8");
      g_assert_cmpint (reply->element[1]->type, ==, REDIS_REPLY_NIL);
      freeReplyObject (reply);
      redis_run (r, "DEL %s", "rk:{wtm}:q:8:3"); /* repaired */
    }
  /* The records of the hashes that moved are still recognised. */
  for (int i = 0; i < 200; i++)
    {
      g_autofree char *rid = g_strdup_printf ("mv%d", i);
      guint8 field[RANK_REQUEST_ID_HASH_BYTES];
      g_auto (Result) u
          = update_on (bed.client, "wtm", "m", 1, rid, NO_MODE, NO_TIME);

      assert_ok (&u);
      /* Only those of hash 3 went, with the repair. */
      rank_request_id_hash (rid, field);
      /* Hash j of 8: the field's first 4 bytes, big-endian, mod 8. */
      g_assert_cmpint (u.applied, ==, field[3] % 8 == 3);
    }
  reply = redisCommand (r, "HGET rk:{wtm}:q s");
  g_assert_cmpstr (reply->str, ==, "1");
  freeReplyObject (reply);
  redisFree (r);
  rank_test_bed_stop (&bed);
}

/* A damaged record hash of the layout being left that this call's share of
 * the move does not reach, met by the lookup of an id whose record may
 * still be there: the update is refused naming it and changes nothing;
 * once the hash is repaired, the same id applies. */
static void
test_wrong_type_in_layout_left (void)
{
  RankTestBed bed;
  redisContext *r;
  redisReply *reply;
  char rid[32];
  guint8 field[RANK_REQUEST_ID_HASH_BYTES];

  rank_test_bed_start (&bed, "");
  r = redis_connect (bed.redis->port);
  /* 2,000 records: a layout of 64 hashes. */
  for (int i = 0; i < 2000; i++)
    {
      g_snprintf (rid, sizeof rid, "ll%d", i);
      g_auto (Result) u
          = update_on (bed.client, "wtl", "m", 1, rid, NO_MODE, NO_TIME);
      assert_ok (&u);
    }
  reply = redisCommand (r, "HGET rk:{wtl}:q s");
  g_assert_cmpstr (reply->str, ==, "64");
  freeReplyObject (reply);
  /* The bucket counts at 0: the next update shrinks the layout to one
   * hash and moves 8 of the 64 (0 to 7) first. */
  reply = redisCommand (r, "HGETALL rk:{wtl}:q");
  for (gsize i = 0; i + 1 < reply->elements; i += 2)
    if (g_ascii_isdigit (reply->element[i]->str[0]))
      redis_run (r, "HSET rk:{wtl}:q %s 0", reply->element[i]->str);
  freeReplyObject (reply);
  /* An id whose hash in the layout left is 40 (its field's first 4 bytes,
   * big-endian, mod 64). */
  for (int i = 0;; i++)
    {
      g_snprintf (rid, sizeof rid, "probe%d", i);
      rank_request_id_hash (rid, field);
      if (field[3] % 64 == 40)
        break;
    }
  redis_run (r, "DEL %s", "rk:{wtl}:q:64:40");
  redis_run (r, "SET %s x", "rk:{wtl}:q:64:40");
  {
    g_auto (Result) u
        = update_on (bed.client, "wtl", "m", 1, rid, NO_MODE, NO_TIME);

    assert_fails (&u, APP_ERROR,
                  "key rk:{wtl}:q:64:40 holds a string where rankd keeps a "
                  "hash (request-id records)");
  }
  g_assert_cmpint (score_of (bed.client, "wtl", "m"), ==, 2000);
  redis_run (r, "DEL %s", "rk:{wtl}:q:64:40"); /* repaired */
  {
    g_auto (Result) u
        = update_on (bed.client, "wtl", "m", 1, rid, NO_MODE, NO_TIME);

    assert_ok (&u);
    g_assert_true (u.applied);
    g_assert_cmpint (u.score, ==, 2001);
  }
  redisFree (r);
  rank_test_bed_stop (&bed);
}

/* ---- Redis credentials ---- */

static gint64
connections_received (guint16 port)
{
  redisContext *r = redis_connect (port);
  redisReply *reply;
  const char *at;
  gint64 n;

  reply = redisCommand (r, "AUTH right-9c1e");
  freeReplyObject (reply);
  reply = redisCommand (r, "INFO stats");
  at = strstr (reply->str, "total_connections_received:");
  g_assert_nonnull (at);
  n = g_ascii_strtoll (at + strlen ("total_connections_received:"), NULL, 10);
  freeReplyObject (reply);
  redisFree (r);
  return n;
}

static guint
log_count (const RankTestProcess *p, const char *text)
{
  g_autofree char *log = NULL;
  guint n = 0;

  g_assert_true (g_file_get_contents (p->log, &log, NULL, NULL));
  for (const char *at = strstr (log, text); at != NULL;
       at = strstr (at + 1, text))
    n++;
  return n;
}

/* A wrong password is a failed attempt: the back-off grows (50 ms doubling
 * to 2 s), one log line per attempt, never "connected". Once the password
 * is right, rankd connects within the back-off and serves. */
static void
test_wrong_password (void)
{
  static const char *const redis_args[]
      = { "--requirepass", "right-9c1e", NULL };
  const char *args[] = { "--io-threads", "1", NULL };
  RankTestProcess *locked = rank_test_redis_start (redis_args);
  RankTestProcess *own;
  gint64 before, after, end;
  redisContext *r;
  redisReply *reply;

  g_setenv ("RANKD_REDIS_PASSWORD", "wrong-4b7d", TRUE);
  own = rank_test_rankd_start (locked->port, args);
  g_unsetenv ("RANKD_REDIS_PASSWORD");
  before = connections_received (locked->port);
  /* Watching the rate over a fixed window: 3 s is 6-7 attempts. */
  g_usleep (3 * G_USEC_PER_SEC);
  after = connections_received (locked->port);
  g_test_message ("%" G_GINT64_FORMAT " connections to Redis in 3 s",
                  after - before - 1);
  g_assert_cmpint (after - before - 1, <=, 8);
  g_assert_cmpuint (log_count (own, "authentication failed"), >=, 3);
  g_assert_cmpuint (log_count (own, "authentication failed"), <=, 12);
  g_assert_cmpuint (log_count (own, "connected"), ==, 0);

  r = redis_connect (locked->port);
  reply = redisCommand (r, "AUTH right-9c1e");
  freeReplyObject (reply);
  reply = redisCommand (r, "CONFIG SET requirepass wrong-4b7d");
  freeReplyObject (reply);
  redisFree (r);
  end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  for (;;)
    {
      g_autoptr (RankClient) c
          = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
      g_auto (Result) u
          = update_on (c, "auth", "ann", 1, "p1", NO_MODE, NO_TIME);

      if (u.kind == OK)
        break;
      assert_fails (&u, UNAVAILABLE, NULL);
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (100 * 1000); /* polling a condition, with a deadline */
    }
  g_assert_cmpuint (log_count (own, "connected"), ==, 1);
  stop_checked (own);
  rank_test_process_free (own);
  rank_test_kill (locked);
  rank_test_process_free (locked);
}

/* ---- storage layout ---- */

static void
wait_log (const RankTestProcess *p, const char *text, guint times)
{
  gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  while (log_count (p, text) < times)
    {
      if (g_get_monotonic_time () > end)
        g_error ("'%s' not %u times in rankd's log", text, times);
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
}

static void
reload (RankTestBed *bed, const char *text, gsize len, guint reloads)
{
  g_assert_true (g_file_set_contents (bed->config, text, (gssize) len, NULL));
  kill (bed->rankd->pid, SIGHUP);
  wait_log (bed->rankd, "SIGHUP: reload", reloads);
}

#define RELOAD(bed, text, n) reload (bed, text, sizeof text - 1, n)

/* A board's storage options are recorded with its first write. A reload
 * that changes them (the board's section removed: shards=10 becomes 1;
 * subscores) makes every call on it fail, naming the board and the option,
 * logged once; nothing is written anywhere meanwhile; the options restored,
 * the board is served again as it was. A config file cut short by a NUL is
 * an error on SIGHUP; and a rankd started with other options says so at
 * start. */
static void
test_layout (void)
{
  static const char good[] = "[board hot]\nshards=10\n"
                             "[board sub]\nsubscores=asc\n";
  RankTestBed bed;
  redisContext *r;
  redisReply *keys;

  rank_test_bed_start (&bed, good);
  {
    g_auto (Result) u
        = update_on (bed.client, "hot", "alice", 5, "h1", NO_MODE, NO_TIME);
    rankUpdateRequest *req
        = update_request_new ("sub", "bob", 7, "s1", NO_MODE, NO_TIME);
    g_auto (Result) s = { 0 };

    assert_ok (&u);
    g_array_append_val (req->subscores, (gint64){ 3 });
    req->__isset_subscores = TRUE;
    s = update_request_on (bed.client, req);
    g_object_unref (req);
    assert_ok (&s);
  }

  RELOAD (&bed, "# no boards\n", 1);
  for (int i = 0; i < 3; i++)
    {
      g_auto (Result) top = { 0 };
      g_autoptr (GPtrArray) page = top_on (bed.client, "hot", 10, 0, &top);
      g_auto (Result) u
          = update_on (bed.client, "hot", "carol", 1, "h2", NO_MODE, NO_TIME);
      g_auto (Result) rank = get_rank_on (bed.client, "sub", "bob");

      g_assert_null (page);
      assert_fails (&top, UNAVAILABLE,
                    "board 'hot' is stored with shards=10, but the "
                    "configuration in force says shards=1");
      assert_fails (&u, UNAVAILABLE, "board 'hot' is stored with shards=10");
      assert_fails (&rank, UNAVAILABLE,
                    "board 'sub' is stored with subscores=asc");
    }
  g_assert_cmpuint (log_count (bed.rankd, "board 'hot' is stored with"), ==, 1);
  /* carol was written nowhere. */
  r = redis_connect (bed.redis->port);
  keys = redisCommand (r, "KEYS rk:{hot}:*");
  g_assert_cmpuint (keys->elements, ==, 1); /* the descriptor */
  g_assert_cmpstr (keys->element[0]->str, ==, "rk:{hot}:o");
  freeReplyObject (keys);

  /* A NUL at the start of the file cut it to nothing: now refused. */
  RELOAD (&bed, "\0[board hot]\nshards=10\n", 2);
  g_assert_true (rank_test_log_contains (bed.rankd, "NUL byte"));
  {
    g_auto (Result) top = { 0 };
    g_autoptr (GPtrArray) page = top_on (bed.client, "hot", 10, 0, &top);

    assert_fails (&top, UNAVAILABLE, "shards=10");
  }

  RELOAD (&bed, good, 3);
  wait_log (bed.rankd, "board 'hot': the configuration matches", 1);
  {
    g_auto (Result) top = { 0 };
    g_autoptr (GPtrArray) page = top_on (bed.client, "hot", 10, 0, &top);
    g_auto (Result) rank = get_rank_on (bed.client, "sub", "bob");

    assert_ok (&top);
    g_assert_cmpuint (page->len, ==, 1);
    g_assert_cmpstr (((rankEntry *) page->pdata[0])->member, ==, "alice");
    assert_ok (&rank);
    g_assert_cmpint (rank.score, ==, 7);
  }

  /* At start, with other options for a configured board: said at once. */
  stop_checked (bed.rankd);
  rank_test_process_free (bed.rankd);
  g_assert_true (
      g_file_set_contents (bed.config, "[board hot]\nshards=4\n", -1, NULL));
  {
    const char *args[] = { "--config", bed.config, NULL };

    bed.rankd = rank_test_rankd_start (bed.redis->port, args);
  }
  wait_log (bed.rankd,
            "board 'hot' is stored with shards=10, but the configuration in "
            "force says shards=4",
            1);
  rank_client_free (bed.client);
  bed.client = rank_test_client (bed.rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  redisFree (r);
  rank_test_bed_stop (&bed);
}

/* ---- the embedded Redis's files ---- */

static int shared_files;

static int
count_shared (const char *path, const struct stat *st, int type,
              struct FTW *ftw)
{
  if (type == FTW_F && (st->st_mode & 077) != 0)
    {
      g_test_message ("%s has mode %03o", path, st->st_mode & 0777);
      shared_files++;
    }
  return 0;
}

/* A data dir of mode 0755 (made by someone else): the append-only files
 * are the owner's alone all the same, and the log says the dir is open. */
static void
test_data_dir (void)
{
  g_autofree char *dir = g_dir_make_tmp ("rankd-datadir-XXXXXX", NULL);
  g_autofree char *data = g_build_filename (dir, "data", NULL);
  const char *args[] = { "--data-dir", data, NULL };
  RankTestProcess *own;
  gint64 end = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  g_autofree char *aof = g_build_filename (data, "appendonlydir", NULL);

  g_assert_cmpint (g_mkdir (data, 0755), ==, 0);
  g_assert_cmpint (chmod (data, 0755), ==, 0);
  own = rank_test_rankd_start (0, args);
  {
    g_autoptr (RankClient) c
        = rank_test_client (own->port, TRUE, RANK_PROTOCOL_BINARY);
    g_auto (Result) u
        = update_on (c, "files", "ann", 1, "f1", NO_MODE, NO_TIME);

    assert_ok (&u);
  }
  while (!g_file_test (aof, G_FILE_TEST_IS_DIR))
    {
      g_assert_cmpint (g_get_monotonic_time (), <, end);
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
  shared_files = 0;
  g_assert_cmpint (nftw (data, count_shared, 8, FTW_PHYS), ==, 0);
  g_assert_cmpint (shared_files, ==, 0);
  g_assert_true (rank_test_log_contains (own, "is open to other users"));
  stop_checked (own);
  rank_test_process_free (own);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  signal (SIGPIPE, SIG_IGN);
  redis = rank_test_redis_start (NULL);
  g_test_add_func ("/hostile/pipelined-close-frees-connection",
                   test_pipelined_close);
  g_test_add_func ("/hostile/non-reader-holds-one-reply", test_non_reader);
  g_test_add_func ("/hostile/reply-over-max-frame", test_large_reply);
  g_test_add_func ("/hostile/request-time-from-first-byte", test_first_byte);
  g_test_add_func ("/hostile/wrong-type-changes-nothing", test_wrong_type);
  g_test_add_func ("/hostile/damaged-place", test_damaged_place);
  g_test_add_func ("/hostile/wrong-type-in-layout-move",
                   test_wrong_type_in_layout_move);
  g_test_add_func ("/hostile/wrong-type-in-layout-left",
                   test_wrong_type_in_layout_left);
  g_test_add_func ("/hostile/wrong-password-backs-off", test_wrong_password);
  g_test_add_func ("/hostile/layout-recorded", test_layout);
  g_test_add_func ("/hostile/data-dir-files-private", test_data_dir);
  status = g_test_run ();
  rank_test_kill (redis);
  rank_test_process_free (redis);
  return status;
}
