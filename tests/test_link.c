/* test_link.c -- one Redis link (redis_link.h) against a real redis-server.
 *
 * A command's deadline is how long Redis may take to answer it. When the
 * link's loop thread is busy past a deadline (other work of the loop, a
 * loaded machine), a reply that Redis sent meanwhile waits in the socket:
 * the command was answered, and gets that answer, not "did not answer".
 *
 * Over TLS (a TLS-only redis-server that asks for client certificates,
 * certificates from certs.py): replies many TLS records long and hundreds
 * of pipelined ones are read whole, with no byte left in the session; a
 * wrong CA makes the link fail with the verification's reason.
 */
#include <string.h>

#include "error.h"
#include "harness.h"
#include "loop.h"
#include "redis_link.h"

/* The link's deadline, how long the loop thread is held, and how long
 * Redis takes to answer the command meanwhile. */
#define TIMEOUT_MS 300
#define HOLD_MS 700
#define ANSWER_MS 100

static RankTestProcess *redis;
static RankTestProcess *tls_redis;
static char *certs_dir;

typedef struct
{
  RankRedisLink *link;
  RankLoop *loop;
  GMutex lock;
  GCond cond;
  char *answer; /* the reply's integer, or the error's message */
} Held;

static void
replied (const RankReply *reply, const GError *error, gpointer data)
{
  Held *h = data;

  g_mutex_lock (&h->lock);
  h->answer = error != NULL
                  ? g_strdup (error->message)
                  : g_strdup_printf ("%lld", (long long) reply->integer);
  g_cond_signal (&h->cond);
  g_mutex_unlock (&h->lock);
}

/* Posted after the command: runs once the iteration that sends it has
 * gone by (prepare flushes it, then posted functions run), and holds the
 * loop thread past its deadline while Redis answers it. */
static void
hold (gpointer data)
{
  g_usleep (HOLD_MS * 1000);
}

/* In the loop thread: a script that answers 1 after ANSWER_MS (it waits on
 * Redis's clock), then the hold. */
static void
send_and_hold (gpointer data)
{
  Held *h = data;
  static const char *const wait[]
      = { "EVAL",
          "local function now() local t = redis.call('TIME') "
          "return t[1] * 1000000 + t[2] end "
          "local stop = now() + tonumber(ARGV[1]) * 1000 "
          "while now() < stop do end return 1",
          "0", G_STRINGIFY (ANSWER_MS) };
  size_t lens[G_N_ELEMENTS (wait)];

  for (gsize i = 0; i < G_N_ELEMENTS (wait); i++)
    lens[i] = strlen (wait[i]);
  rank_redis_link_send (h->link, (int) G_N_ELEMENTS (wait),
                        (const char **) wait, lens, replied, h);
  rank_loop_post (h->loop, hold, h);
}

static void
test_reply_read_before_deadline (void)
{
  RankAddress address = { "127.0.0.1", redis->port, NULL };
  RankLoop *loop = rank_loop_new ();
  Held h = { 0 };
  g_autoptr (GError) error = NULL;
  gint64 end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  g_mutex_init (&h.lock);
  g_cond_init (&h.cond);
  h.loop = loop;
  h.link = rank_redis_link_new (loop, &address, TIMEOUT_MS, NULL);
  rank_redis_link_start (h.link);
  rank_loop_start (loop, "test-link");
  g_assert_true (rank_redis_link_wait_ready (h.link, 10000, &error));

  rank_loop_post (loop, send_and_hold, &h);
  g_mutex_lock (&h.lock);
  while (h.answer == NULL)
    g_assert_true (g_cond_wait_until (&h.cond, &h.lock, end));
  g_mutex_unlock (&h.lock);
  /* Redis answered within the deadline; the loop read it late. */
  g_assert_cmpstr (h.answer, ==, "1");

  rank_loop_quit_and_join (loop);
  rank_redis_link_free (h.link);
  rank_loop_run_pending (loop);
  rank_loop_free (loop);
  g_free (h.answer);
  g_mutex_clear (&h.lock);
  g_cond_clear (&h.cond);
}

/* ---- TLS ---- */

#define BIG_BYTES (300 * 1000)
#define INCRS 500

static char *
cert (const char *name)
{
  return g_build_filename (certs_dir, name, NULL);
}

/* A link over TLS to the TLS Redis, verified against ca. */
static RankRedisLink *
tls_link (RankLoop *loop, const char *ca)
{
  RankAddress address = { "127.0.0.1", tls_redis->port, NULL };
  g_autofree char *ca_file = cert (ca);
  g_autofree char *cert_file = cert ("server.pem");
  g_autofree char *key_file = cert ("server.key");
  RankRedisTlsOptions options
      = { .ca_file = ca_file, .cert_file = cert_file, .key_file = key_file };
  g_autoptr (GError) error = NULL;
  g_autoptr (RankRedisTls) tls = rank_redis_tls_new (&options, &error);
  RankRedisLink *link;

  g_assert_no_error (error);
  link = rank_redis_link_new (loop, &address, 2000, tls);
  rank_redis_link_start (link);
  return link;
}

typedef struct
{
  GMutex lock;
  GCond cond;
  gsize big;       /* the length GET answered */
  long long count; /* the last INCR's answer */
  guint answers;
  char *error;
} Tally;

static void
counted (const RankReply *reply, const GError *error, gpointer data)
{
  Tally *t = data;

  g_mutex_lock (&t->lock);
  if (error != NULL && t->error == NULL)
    t->error = g_strdup (error->message);
  else if (reply != NULL && reply->type == RANK_REPLY_STRING)
    t->big = reply->len;
  else if (reply != NULL && reply->type == RANK_REPLY_INTEGER)
    t->count = reply->integer;
  t->answers++;
  g_cond_signal (&t->cond);
  g_mutex_unlock (&t->lock);
}

typedef struct
{
  RankRedisLink *link;
  Tally *tally;
} Burst;

/* In the loop thread: a value of BIG_BYTES set and read back (a reply of
 * some 19 TLS records), then INCRS increments in the same write. */
static void
send_burst (gpointer data)
{
  Burst *b = data;
  g_autofree char *value = g_malloc (BIG_BYTES);
  const char *set[] = { "SET", "tls:big", value };
  size_t set_len[] = { 3, 7, BIG_BYTES };
  const char *get[] = { "GET", "tls:big" };
  const char *del[] = { "DEL", "tls:n" };
  const char *incr[] = { "INCR", "tls:n" };

  memset (value, 'v', BIG_BYTES);
  rank_redis_link_send (b->link, 3, set, set_len, counted, b->tally);
  rank_redis_link_send (b->link, 2, get, NULL, counted, b->tally);
  rank_redis_link_send (b->link, 2, del, NULL, counted, b->tally);
  for (int i = 0; i < INCRS; i++)
    rank_redis_link_send (b->link, 2, incr, NULL, counted, b->tally);
}

static void
test_tls_pipelined (void)
{
  RankLoop *loop = rank_loop_new ();
  RankRedisLink *link = tls_link (loop, "ca.pem");
  Tally t = { 0 };
  Burst b = { link, &t };
  g_autoptr (GError) error = NULL;
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  g_mutex_init (&t.lock);
  g_cond_init (&t.cond);
  rank_loop_start (loop, "test-link-tls");
  g_assert_true (rank_redis_link_wait_ready (link, 30000, &error));
  for (int round = 0; round < 3; round++)
    {
      g_mutex_lock (&t.lock);
      t.answers = 0;
      t.big = 0;
      g_mutex_unlock (&t.lock);
      rank_loop_post (loop, send_burst, &b);
      g_mutex_lock (&t.lock);
      while (t.answers < 3 + INCRS)
        g_assert_true (g_cond_wait_until (&t.cond, &t.lock, end));
      g_mutex_unlock (&t.lock);
      g_assert_null (t.error);
      g_assert_cmpuint (t.big, ==, BIG_BYTES);
      g_assert_cmpint (t.count, ==, INCRS);
    }
  rank_loop_quit_and_join (loop);
  rank_redis_link_free (link);
  rank_loop_run_pending (loop);
  rank_loop_free (loop);
  g_free (t.error);
  g_mutex_clear (&t.lock);
  g_cond_clear (&t.cond);
}

/* A CA that did not sign Redis's certificate: never up, and the error
 * says why. */
static void
test_tls_wrong_ca (void)
{
  RankLoop *loop = rank_loop_new ();
  RankRedisLink *link = tls_link (loop, "other-ca.pem");
  g_autoptr (GError) error = NULL;
  /* The link warns of each failed attempt: expected here. */
  GLogLevelFlags fatal = g_log_set_always_fatal (G_LOG_FATAL_MASK);

  rank_loop_start (loop, "test-link-tls");
  g_assert_false (rank_redis_link_wait_ready (link, 1500, &error));
  g_assert_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE);
  g_assert_nonnull (strstr (error->message,
                            "TLS handshake failed: certificate verify "
                            "failed"));
  rank_loop_quit_and_join (loop);
  g_log_set_always_fatal (fatal);
  rank_redis_link_free (link);
  rank_loop_run_pending (loop);
  rank_loop_free (loop);
}

/* certs.py's certificates in a new directory, and a redis-server on TLS
 * only that asks for client certificates. */
static void
tls_redis_start (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *script
      = g_build_filename (RANK_TEST_SOURCE_DIR, "certs.py", NULL);
  g_autofree char *server_cert = NULL;
  g_autofree char *server_key = NULL;
  g_autofree char *ca = NULL;
  int status;

  certs_dir = g_dir_make_tmp ("rankd-link-tls-XXXXXX", &error);
  g_assert_no_error (error);
  {
    const char *argv[] = { "python3", script, certs_dir, NULL };

    g_assert_true (g_spawn_sync (NULL, (char **) argv, NULL,
                                 G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                                 &status, &error));
    g_assert_no_error (error);
    g_assert_true (g_spawn_check_wait_status (status, NULL));
  }
  server_cert = cert ("server.pem");
  server_key = cert ("server.key");
  ca = cert ("ca.pem");
  {
    const char *const args[] = { "--port",
                                 "0",
                                 "--tls-port",
                                 "%PORT%",
                                 "--tls-cert-file",
                                 server_cert,
                                 "--tls-key-file",
                                 server_key,
                                 "--tls-ca-cert-file",
                                 ca,
                                 "--tls-auth-clients",
                                 "yes",
                                 NULL };

    tls_redis = rank_test_redis_start (args);
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  redis = rank_test_redis_start (NULL);
  tls_redis_start ();
  g_test_add_func ("/link/reply-read-before-deadline",
                   test_reply_read_before_deadline);
  g_test_add_func ("/link/tls/pipelined-and-large", test_tls_pipelined);
  g_test_add_func ("/link/tls/wrong-ca", test_tls_wrong_ca);
  status = g_test_run ();
  rank_test_kill (redis);
  rank_test_process_free (redis);
  rank_test_kill (tls_redis);
  rank_test_process_free (tls_redis);
  {
    g_autofree char *rm = g_strdup_printf ("rm -rf '%s'", certs_dir);

    g_assert_true (g_spawn_command_line_sync (rm, NULL, NULL, NULL, NULL));
  }
  g_free (certs_dir);
  return status;
}
