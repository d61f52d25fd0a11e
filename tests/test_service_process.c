/* test_service_process.c -- rankd as a process, end to end (a real
 * redis-server, a real rankd): many clients at once, its Redis unreachable,
 * restarted or without its scripts, SIGTERM with calls in flight, the
 * embedded Redis, and memory over many calls.
 */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "service.h"

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
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  gboolean sent = rank_ranking_client_send_update (iface, req, NULL);

  g_mutex_lock (&call->lock);
  call->sent = TRUE;
  g_cond_signal (&call->cond);
  g_mutex_unlock (&call->lock);
  call->ok = sent
             && rank_ranking_client_recv_update (iface, &resp, &invalid,
                                                 &unavailable, &denied, NULL);
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
  service_start (&argc, &argv);

  g_test_add_func ("/concurrency/16x500-exact-then-repeated",
                   test_concurrent_exact);
  g_test_add_func ("/redis/unreachable", test_redis_unreachable);
  g_test_add_func ("/redis/restarted", test_redis_restarted);
  g_test_add_func ("/redis/noscript-reload", test_noscript_reload);
  g_test_add_func ("/shutdown/sigterm-drains-calls-in-flight",
                   test_sigterm_drains);
  g_test_add_func ("/embedded/persists-across-restart", test_embedded_persists);
  g_test_add_func ("/embedded/restarted-when-killed", test_embedded_restarted);
  g_test_add_func ("/memory/rss-flat-over-100k-calls", test_rss_flat);
  return service_run ();
}
