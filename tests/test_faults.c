/* test_faults.c -- exactly-once updates through Redis crashes and a rankd
 * restart.
 *
 * Several clients send INCREMENTs, each with a request id of its own, and
 * retry every Unavailable or transport error with the same request id until
 * it is acknowledged. Meanwhile Redis (append-only, fsync on every write) is
 * killed with SIGKILL and restarted several times, rankd is restarted once,
 * and Redis is paused (SIGSTOP) past rankd's --redis-timeout: the calls
 * waiting on it answer Unavailable although Redis runs them when it wakes,
 * so their retries must be recognised. At the end every member's score must
 * be the sum of the deltas sent for it: nothing lost, nothing counted twice.
 *
 * Also here: rankd authenticates to Redis with credentials from the
 * environment or the config file, and never logs them.
 */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

#include "calls.h"
#include "harness.h"

#define SENDERS 4
#define MEMBERS 5      /* per sender */
#define UPDATES 1200   /* per sender */
#define PROGRESS 150   /* acknowledged updates between faults */
#define DEADLINE_S 240 /* for the whole run */

typedef struct
{
  int index;
  guint16 port;
  gint64 sums[MEMBERS];
  RetryStats stats;
} Sender;

static gint acknowledged;      /* atomic, over all senders */
static gint unavailable_total; /* atomic */
static gint64 deadline;

static void
check_deadline (const char *what)
{
  if (g_get_monotonic_time () > deadline)
    g_error ("no progress before the deadline: %s", what);
}

static gpointer
send_all (gpointer data)
{
  Sender *s = data;
  RankClient *client = NULL;

  for (int i = 0; i < UPDATES; i++)
    {
      int m = i % MEMBERS;
      g_autofree char *member = g_strdup_printf ("s%d-m%d", s->index, m);
      g_autofree char *rid = g_strdup_printf ("s%d-u%d", s->index, i);
      gint64 delta = (i * 7919) % 23 - 11;

      update_until_acknowledged (&client, s->port, "faults", member, delta, rid,
                                 deadline, &s->stats, &unavailable_total);
      s->sums[m] += delta;
      g_atomic_int_inc (&acknowledged);
    }
  g_clear_pointer (&client, rank_client_free);
  return NULL;
}

/* Waits until PROGRESS more updates are acknowledged (or all are). */
static void
wait_progress (void)
{
  int target
      = MIN (g_atomic_int_get (&acknowledged) + PROGRESS, SENDERS * UPDATES);

  while (g_atomic_int_get (&acknowledged) < target)
    {
      check_deadline ("waiting for acknowledged updates");
      g_usleep (5 * 1000); /* polling a counter, with a deadline */
    }
}

static void
test_exactly_once (void)
{
  static const char *const redis_args[]
      = { "--appendonly", "yes", "--appendfsync", "always", NULL };
  static const char *const rankd_args[] = { "--redis-timeout", "1", NULL };
  RankTestProcess *redis = rank_test_redis_start (redis_args);
  RankTestProcess *rankd = rank_test_rankd_start (redis->port, rankd_args);
  Sender senders[SENDERS];
  GThread *threads[SENDERS];
  guint unavailable = 0, transport = 0, not_applied = 0;
  g_autoptr (RankClient) client = NULL;

  deadline = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;
  memset (senders, 0, sizeof senders);
  for (int i = 0; i < SENDERS; i++)
    {
      senders[i].index = i;
      senders[i].port = rankd->port;
      threads[i] = g_thread_new ("sender", send_all, &senders[i]);
    }
  for (const char *f = "KKRPKK"; *f; f++)
    {
      wait_progress ();
      g_test_message ("fault %c at %d acknowledged", *f,
                      g_atomic_int_get (&acknowledged));
      if (*f == 'K')
        {
          rank_test_kill (redis);
          rank_test_restart (redis);
        }
      else if (*f == 'R')
        {
          stop_checked (rankd);
          rank_test_restart (rankd);
        }
      else
        {
          int seen = g_atomic_int_get (&unavailable_total);

          /* Paused until every sender had a call time out. */
          kill (redis->pid, SIGSTOP);
          while (g_atomic_int_get (&unavailable_total) < seen + SENDERS)
            {
              check_deadline ("waiting for Unavailable");
              g_usleep (5 * 1000); /* polling a counter, with a deadline */
            }
          kill (redis->pid, SIGCONT);
        }
    }
  for (int i = 0; i < SENDERS; i++)
    {
      g_thread_join (threads[i]);
      unavailable += senders[i].stats.unavailable;
      transport += senders[i].stats.transport_errors;
      not_applied += senders[i].stats.not_applied;
    }
  g_test_message ("retries: %u Unavailable, %u transport errors; %u retries "
                  "answered 'already applied'",
                  unavailable, transport, not_applied);
  client = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  for (int i = 0; i < SENDERS; i++)
    for (int m = 0; m < MEMBERS; m++)
      {
        g_autofree char *member = g_strdup_printf ("s%d-m%d", i, m);
        g_auto (Result) r = get_rank_on (client, "faults", member);

        assert_ok (&r);
        if (r.score != senders[i].sums[m])
          g_error ("%s: score %" G_GINT64_FORMAT
                   ", sum of deltas %" G_GINT64_FORMAT,
                   member, r.score, senders[i].sums[m]);
      }
  /* The faults did hit the senders, and some retries were of updates
   * already applied (the pause makes sure of it). */
  g_assert_cmpuint (unavailable, >, 0);
  g_assert_cmpuint (transport, >, 0);
  g_assert_cmpuint (not_applied, >, 0);

  stop_checked (rankd);
  rank_test_process_free (rankd);
  rank_test_kill (redis);
  rank_test_process_free (redis);
}

/* ---- Redis authentication ---- */

/* One update through rankd; returns its outcome. */
static Kind
try_update (RankTestProcess *rankd, const char *rid)
{
  g_autoptr (RankClient) c
      = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
  g_auto (Result) r = update_on (c, "auth", "ann", 1, rid, NO_MODE, NO_TIME);

  return r.kind;
}

/* requirepass, with the password in RANKD_REDIS_PASSWORD: served, and the
 * password is nowhere in rankd's log. A wrong one: Unavailable. */
static void
test_password_from_env (void)
{
  static const char *const redis_args[]
      = { "--requirepass", "env-secret-5d1f", NULL };
  RankTestProcess *redis = rank_test_redis_start (redis_args);
  RankTestProcess *rankd;

  g_setenv ("RANKD_REDIS_PASSWORD", "env-secret-5d1f", TRUE);
  rankd = rank_test_rankd_start (redis->port, NULL);
  g_unsetenv ("RANKD_REDIS_PASSWORD");
  g_assert_cmpint (try_update (rankd, "a1"), ==, OK);
  g_assert_true (rank_test_log_contains (rankd, "redis AUTH on"));
  stop_checked (rankd);
  g_assert_false (rank_test_log_contains (rankd, "env-secret-5d1f"));
  rank_test_process_free (rankd);

  g_setenv ("RANKD_REDIS_PASSWORD", "wrong-secret-77aa", TRUE);
  rankd = rank_test_rankd_start (redis->port, NULL);
  g_unsetenv ("RANKD_REDIS_PASSWORD");
  {
    g_autoptr (RankClient) c
        = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
    g_auto (Result) r = update_on (c, "auth", "ann", 1, "a2", NO_MODE, NO_TIME);

    assert_fails (&r, UNAVAILABLE, "WRONGPASS");
  }
  stop_checked (rankd);
  g_assert_true (rank_test_log_contains (rankd, "WRONGPASS"));
  g_assert_false (rank_test_log_contains (rankd, "wrong-secret-77aa"));
  rank_test_process_free (rankd);
  rank_test_kill (redis);
  rank_test_process_free (redis);
}

/* An ACL user and password from the config file. */
static void
test_acl_user_from_config (void)
{
  static const char *const redis_args[]
      = { "--user", "default",           "off", "--user", "rankd",
          "on",     ">file-secret-93c2", "~*",  "&*",     "+@all",
          NULL };
  RankTestProcess *redis = rank_test_redis_start (redis_args);
  g_autofree char *dir = g_dir_make_tmp ("rankd-auth-XXXXXX", NULL);
  g_autofree char *conf = g_build_filename (dir, "rankd.conf", NULL);
  const char *rankd_args[] = { "--config", conf, NULL };
  RankTestProcess *rankd;

  g_assert_true (g_file_set_contents (
      conf, "[redis]\nuser=rankd\npassword=file-secret-93c2\n", -1, NULL));
  rankd = rank_test_rankd_start (redis->port, rankd_args);
  g_assert_cmpint (try_update (rankd, "b1"), ==, OK);
  stop_checked (rankd);
  g_assert_false (rank_test_log_contains (rankd, "file-secret-93c2"));
  rank_test_process_free (rankd);
  rank_test_kill (redis);
  rank_test_process_free (redis);
  g_unlink (conf);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* setenv() first, before any thread exists. */
  g_test_add_func ("/security/redis-password-from-env", test_password_from_env);
  g_test_add_func ("/security/redis-acl-user-from-config",
                   test_acl_user_from_config);
  g_test_add_func ("/faults/exactly-once-through-crashes", test_exactly_once);
  return g_test_run ();
}
