/* test_link.c -- one Redis link (redis_link.h) against a real redis-server.
 *
 * A command's deadline is how long Redis may take to answer it. When the
 * link's loop thread is busy past a deadline (other work of the loop, a
 * loaded machine), a reply that Redis sent meanwhile waits in the socket:
 * the command was answered, and gets that answer, not "did not answer".
 */
#include <string.h>

#include "harness.h"
#include "loop.h"
#include "redis_link.h"

/* The link's deadline, how long the loop thread is held, and how long
 * Redis takes to answer the command meanwhile. */
#define TIMEOUT_MS 300
#define HOLD_MS 700
#define ANSWER_MS 100

static RankTestProcess *redis;

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

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  redis = rank_test_redis_start (NULL);
  g_test_add_func ("/link/reply-read-before-deadline",
                   test_reply_read_before_deadline);
  status = g_test_run ();
  rank_test_kill (redis);
  rank_test_process_free (redis);
  return status;
}
