/* test_cluster.c -- rankd on a Redis Cluster: 3 masters and 3 replicas on
 * loopback, made with redis-cli --cluster create.
 *
 * Boards and their shards spread over the masters; rankd follows MOVED
 * (a slot moved under it) and ASK (a slot being moved); and when a master
 * is killed under load, its replica takes over and rankd serves again
 * without a restart, every update counted exactly once (rankd runs with
 * --wait-replicas 1, so an acknowledged update is on the replica too).
 */
#include <glib/gstdio.h>
#include <string.h>

#include "calls.h"
#include "cluster.h"
#include "harness.h"

#define NODES 6
#define DEADLINE_S 120

static RankTestProcess *nodes[NODES];
static RankTestProcess *rankd;
static RankClient *client;
static char *config_dir;

/* ---- the cluster ---- */

static redisReply *
node_command (guint16 port, const char *fmt, ...)
{
  redisContext *c = redis_connect (port);
  redisReply *reply;
  va_list ap;

  va_start (ap, fmt);
  reply = redisvCommand (c, fmt, ap);
  va_end (ap);
  g_assert_nonnull (reply);
  redisFree (c);
  return reply;
}

static gboolean
node_alive (int i)
{
  return nodes[i] != NULL && nodes[i]->pid != 0;
}

static guint16 master_of (guint16 port, guint slot);

/* Every live master has a replica that acknowledges its writes (so that
 * rankd's WAIT 1 can be met): a probe key of one of the master's slots,
 * written, then WAIT 1 on the same connection. (ROLE lists a replica once
 * the master has sent it the data set, before the replica has loaded it and
 * acknowledged anything: a WAIT then could time out.) */
static gboolean
replicas_attached (void)
{
  gboolean ok = TRUE;

  for (int i = 0; ok && i < NODES; i++)
    {
      guint16 port;
      redisReply *r;
      gboolean master;

      if (!node_alive (i))
        continue;
      port = nodes[i]->port;
      r = node_command (port, "ROLE");
      master = strcmp (r->element[0]->str, "master") == 0;
      ok = !master || r->element[2]->elements >= 1;
      freeReplyObject (r);
      if (ok && master)
        {
          redisContext *c = redis_connect (port);
          g_autofree char *key = NULL;
          redisReply *w;

          /* A key of a slot this node serves (a third of them). */
          for (guint k = 0; key == NULL; k++)
            {
              g_autofree char *tag = g_strdup_printf ("{probe-%u}", k);

              if (master_of (port, rank_cluster_slot (tag, strlen (tag)))
                  == port)
                key = g_steal_pointer (&tag);
              g_assert_cmpuint (k, <, 1000);
            }
          r = redisCommand (c, "SET %s 1 PX 5000", key);
          g_assert_nonnull (r);
          freeReplyObject (r);
          w = redisCommand (c, "WAIT 1 100");
          g_assert_nonnull (w);
          ok = w->type == REDIS_REPLY_INTEGER && w->integer >= 1;
          freeReplyObject (w);
          redisFree (c);
        }
    }
  return ok;
}

/* Waits until every live node but dead_port says cluster_state:ok, and
 * with replicas, until every master has a replica. */
static void
wait_cluster_ok (guint16 dead_port, gboolean replicas)
{
  gint64 end = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;

  for (;;)
    {
      gboolean ok = TRUE;

      for (int i = 0; ok && i < NODES; i++)
        {
          redisReply *r;

          if (!node_alive (i) || nodes[i]->port == dead_port)
            continue;
          r = node_command (nodes[i]->port, "CLUSTER INFO");
          ok = r->type == REDIS_REPLY_STRING
               && strstr (r->str, "cluster_state:ok") != NULL;
          freeReplyObject (r);
        }
      if (ok && replicas)
        ok = replicas_attached ();
      if (ok)
        return;
      if (g_get_monotonic_time () > end)
        g_error ("the cluster did not reach cluster_state:ok in time");
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
}

/* The port of the master of slot, as node at port sees it (0: none). */
static guint16
master_of (guint16 port, guint slot)
{
  redisReply *r = node_command (port, "CLUSTER SLOTS");
  guint16 master = 0;

  g_assert_cmpint (r->type, ==, REDIS_REPLY_ARRAY);
  for (gsize i = 0; i < r->elements; i++)
    {
      redisReply *e = r->element[i];

      if ((guint) e->element[0]->integer <= slot
          && slot <= (guint) e->element[1]->integer)
        master = (guint16) e->element[2]->element[1]->integer;
    }
  freeReplyObject (r);
  return master;
}

static char *
node_id (guint16 port)
{
  redisReply *r = node_command (port, "CLUSTER MYID");
  char *id = g_strdup (r->str);

  freeReplyObject (r);
  return id;
}

static int
node_index (guint16 port)
{
  for (int i = 0; i < NODES; i++)
    if (nodes[i]->port == port)
      return i;
  g_error ("no node on port %u", port);
}

/* A live master other than port. */
static guint16
other_master (guint16 port)
{
  for (int i = 0; i < NODES; i++)
    {
      redisReply *r;
      gboolean master;

      if (!node_alive (i) || nodes[i]->port == port)
        continue;
      r = node_command (nodes[i]->port, "ROLE");
      master = strcmp (r->element[0]->str, "master") == 0;
      freeReplyObject (r);
      if (master)
        return nodes[i]->port;
    }
  g_error ("no other master");
}

static guint
board_slot (const char *board)
{
  g_autofree char *tag = g_strdup_printf ("{%s}", board);

  return rank_cluster_slot (tag, strlen (tag));
}

static void
cluster_start (void)
{
  static const char *const args[] = { "--cluster-enabled",
                                      "yes",
                                      "--cluster-config-file",
                                      "nodes-%PORT%.conf",
                                      "--cluster-node-timeout",
                                      "1000",
                                      NULL };
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  g_autoptr (GError) error = NULL;
  int status;

  for (int i = 0; i < NODES; i++)
    nodes[i] = rank_test_redis_start (args);
  g_ptr_array_add (argv, g_strdup ("redis-cli"));
  g_ptr_array_add (argv, g_strdup ("--cluster"));
  g_ptr_array_add (argv, g_strdup ("create"));
  for (int i = 0; i < NODES; i++)
    g_ptr_array_add (argv, g_strdup_printf ("127.0.0.1:%u", nodes[i]->port));
  g_ptr_array_add (argv, g_strdup ("--cluster-replicas"));
  g_ptr_array_add (argv, g_strdup ("1"));
  g_ptr_array_add (argv, g_strdup ("--cluster-yes"));
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL,
                               G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err,
                               &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("redis-cli --cluster create failed:\n%s%s", out, err);
  g_ptr_array_unref (argv);
  wait_cluster_ok (0, TRUE);
}

static void
rankd_start (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *seeds = g_strdup_printf ("127.0.0.1:%u,127.0.0.1:%u",
                                            nodes[0]->port, nodes[1]->port);
  g_autofree char *config = NULL;
  const char *args[]
      = { "--redis-cluster", seeds, "--config", NULL, "--wait-replicas", "1",
          "--redis-timeout", "1",   NULL };

  config_dir = g_dir_make_tmp ("rankd-cluster-XXXXXX", &error);
  g_assert_no_error (error);
  config = g_build_filename (config_dir, "rankd.conf", NULL);
  g_assert_true (g_file_set_contents (config,
                                      "[board c_sh]\nshards=10\n"
                                      "[board c_fosh]\nshards=10\n"
                                      "[board c_del]\nshards=10\n"
                                      "[board c_q]\nshards=10\nqueue=on\n"
                                      "[board c_rr]\nread_from=replica\n"
                                      "max_replica_lag_ms=1000\n"
                                      "[board c_tc]\nread_cache=tracked\n"
                                      "[board c_win]\nshards=10\n"
                                      "period=daily\nwindow=3\n"
                                      "retention=2\naccept_late=true\n"
                                      /* Export and DeleteBoard need admin,
                                       * granted on purpose. */
                                      "[grant anonymous]\nread=*\nwrite=*\n"
                                      "admin=*\n",
                                      -1, NULL));
  args[3] = config;
  /* The port is replaced: rankd goes to the cluster, not to one node. */
  rankd = rank_test_rankd_start (0, args);
  client = rank_test_client (rankd->port, TRUE, RANK_PROTOCOL_BINARY);
}

/* ---- tests ---- */

/* Ordinary and sharded boards answer as on one Redis, and the shards of
 * one board live on several masters. */
static void
test_served (void)
{
  GHashTable *masters = g_hash_table_new (NULL, NULL);

  for (int b = 0; b < 2; b++)
    {
      const char *board = b ? "c_sh" : "c_plain";

      for (int i = 0; i < 60; i++)
        {
          g_autofree char *member = g_strdup_printf ("m%02d", i);
          g_autofree char *rid = g_strdup_printf ("%s-%d", board, i);
          g_auto (Result) r
              = update_on (client, board, member, i * 3, rid, NO_MODE, NO_TIME);

          assert_ok (&r);
        }
      {
        g_auto (Result) r = { 0 };
        g_autoptr (GPtrArray) page = top_on (client, board, 5, 10, &r);
        g_auto (Result) rank = get_rank_on (client, board, "m07");

        assert_ok (&r);
        g_assert_cmpuint (page->len, ==, 5);
        g_assert_cmpstr (((rankEntry *) page->pdata[0])->member, ==, "m49");
        g_assert_cmpint (((rankEntry *) page->pdata[0])->rank, ==, 11);
        assert_ok (&rank);
        g_assert_cmpint (rank.rank, ==, 53);
        g_assert_cmpint (rank.score, ==, 21);
      }
    }
  for (int shard = 0; shard < 10; shard++)
    {
      g_autofree char *tag = g_strdup_printf ("{c_sh/%d}", shard);

      g_hash_table_add (
          masters, GUINT_TO_POINTER (master_of (
                       nodes[0]->port, rank_cluster_slot (tag, strlen (tag)))));
    }
  g_assert_cmpuint (g_hash_table_size (masters), >=, 2);
  g_hash_table_unref (masters);
}

/* Starts moving the slot of board from its master to another
 * (MIGRATING/IMPORTING); *from and *to are their ports. */
static guint
move_begin (const char *board, guint16 *from, guint16 *to)
{
  guint slot = board_slot (board);
  g_autofree char *from_id = NULL;
  g_autofree char *to_id = NULL;

  *from = master_of (nodes[0]->port, slot);
  *to = other_master (*from);
  from_id = node_id (*from);
  to_id = node_id (*to);
  freeReplyObject (
      node_command (*to, "CLUSTER SETSLOT %u IMPORTING %s", slot, from_id));
  freeReplyObject (
      node_command (*from, "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id));
  return slot;
}

/* Moves key, or every key left in slot when key is NULL. */
static void
move_keys (guint slot, guint16 from, guint16 to, const char *key)
{
  redisReply *r = node_command (from, "CLUSTER GETKEYSINSLOT %u 1000", slot);

  for (gsize i = 0; i < r->elements; i++)
    if (key == NULL || strcmp (key, r->element[i]->str) == 0)
      {
        redisReply *m = node_command (from, "MIGRATE 127.0.0.1 %u %s 0 5000",
                                      to, r->element[i]->str);

        g_assert_cmpint (m->type, ==, REDIS_REPLY_STATUS);
        freeReplyObject (m);
      }
  freeReplyObject (r);
}

/* Ends a move: every key goes, and every node learns the new owner. */
static void
move_finish (guint slot, guint16 from, guint16 to)
{
  g_autofree char *to_id = node_id (to);

  move_keys (slot, from, to, NULL);
  for (int i = 0; i < NODES; i++)
    if (node_alive (i))
      freeReplyObject (node_command (
          nodes[i]->port, "CLUSTER SETSLOT %u NODE %s", slot, to_id));
}

/* A slot moved under rankd: the old master answers MOVED, rankd follows
 * it, and the board (request-id records included) is whole on the new
 * master. */
static void
test_moved (void)
{
  g_auto (Result) a
      = update_on (client, "c_mv", "x", 5, "mv-1", NO_MODE, NO_TIME);
  g_auto (Result) b = { 0 };
  g_auto (Result) again = { 0 };
  guint16 from, to;
  guint slot;
  redisReply *r;

  assert_ok (&a);
  slot = move_begin ("c_mv", &from, &to);
  move_finish (slot, from, to);
  b = update_on (client, "c_mv", "x", 2, "mv-2", NO_MODE, NO_TIME);
  assert_ok (&b);
  g_assert_cmpint (b.score, ==, 7);
  again = update_on (client, "c_mv", "x", 5, "mv-1", NO_MODE, NO_TIME);
  assert_ok (&again);
  g_assert_false (again.applied);
  r = node_command (to, "EXISTS rk:{c_mv}:z");
  g_assert_cmpint (r->integer, ==, 1);
  freeReplyObject (r);
}

/* A slot half-way through a move. A read of a key already moved gets ASK
 * from the old master, and rankd asks the new one (ASKING first). An
 * update, whose script names keys on both sides, gets TRYAGAIN: Redis runs
 * no multi-key command on a slot in the middle of a move, and rankd
 * answers Unavailable until the move is done; then it is served. */
static void
test_ask (void)
{
  g_auto (Result) a
      = update_on (client, "c_ask", "y", 9, "ask-1", NO_MODE, NO_TIME);
  g_auto (Result) during = { 0 };
  g_auto (Result) after = { 0 };
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = NULL;
  guint16 from, to;
  guint slot;

  assert_ok (&a);
  slot = move_begin ("c_ask", &from, &to);
  move_keys (slot, from, to, "rk:{c_ask}:z");
  page = top_on (client, "c_ask", 10, 0, &r);
  assert_ok (&r);
  g_assert_cmpuint (page->len, ==, 1);
  g_assert_cmpstr (((rankEntry *) page->pdata[0])->member, ==, "y");
  during = update_on (client, "c_ask", "y", 1, "ask-2", NO_MODE, NO_TIME);
  assert_fails (&during, UNAVAILABLE, "TRYAGAIN");
  move_finish (slot, from, to);
  after = update_on (client, "c_ask", "y", 1, "ask-2", NO_MODE, NO_TIME);
  assert_ok (&after);
  g_assert_cmpint (after.score, ==, 10);
}

/* ---- failover ---- */

#define SENDERS 4
#define MEMBERS 5
#define UPDATES 600

typedef struct
{
  int index;
  const char *board;
  gint64 sums[MEMBERS];
  RetryStats stats;
} Sender;

static gint acknowledged; /* atomic */
static gint64 deadline;

static gpointer
send_all (gpointer data)
{
  Sender *s = data;
  RankClient *c = NULL;

  for (int i = 0; i < UPDATES; i++)
    {
      int m = i % MEMBERS;
      g_autofree char *member = g_strdup_printf ("s%d-m%d", s->index, m);
      g_autofree char *rid = g_strdup_printf ("s%d-u%d", s->index, i);
      gint64 delta = (i * 7919) % 23 - 11;

      update_until_acknowledged (&c, rankd->port, s->board, member, delta, rid,
                                 deadline, &s->stats, NULL);
      s->sums[m] += delta;
      g_atomic_int_inc (&acknowledged);
    }
  g_clear_pointer (&c, rank_client_free);
  return NULL;
}

static void
wait_acknowledged (int target)
{
  while (g_atomic_int_get (&acknowledged) < target)
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("no progress before the deadline");
      g_usleep (5 * 1000); /* polling a counter, with a deadline */
    }
}

/* Kills the master of an ordinary board's slot under load; its replica
 * takes over, the old master comes back as a replica, and every update is
 * counted once. Half the senders write to a sharded board. */
static void
test_failover (void)
{
  Sender senders[SENDERS];
  GThread *threads[SENDERS];
  guint unavailable = 0, not_applied = 0;
  guint slot = board_slot ("c_fo");
  guint16 victim = master_of (nodes[0]->port, slot);
  int v = node_index (victim);
  guint16 survivor = nodes[v == 0 ? 1 : 0]->port;
  GPid pid = rankd->pid;

  deadline = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;
  memset (senders, 0, sizeof senders);
  for (int i = 0; i < SENDERS; i++)
    {
      senders[i].index = i;
      senders[i].board = i % 2 ? "c_fosh" : "c_fo";
      threads[i] = g_thread_new ("sender", send_all, &senders[i]);
    }
  wait_acknowledged (300);
  g_test_message ("killing master %u of slot %u at %d acknowledged", victim,
                  slot, g_atomic_int_get (&acknowledged));
  rank_test_kill (nodes[v]);
  /* The replica takes over... */
  while (master_of (survivor, slot) == victim)
    {
      if (g_get_monotonic_time () > deadline)
        g_error ("no failover");
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
  wait_cluster_ok (victim, FALSE);
  g_test_message ("slot %u failed over to %u", slot,
                  master_of (survivor, slot));
  /* ...and the old master comes back as its replica, so that WAIT 1 can
   * be met again. */
  rank_test_restart (nodes[v]);
  wait_cluster_ok (0, TRUE);
  for (int i = 0; i < SENDERS; i++)
    {
      g_thread_join (threads[i]);
      unavailable += senders[i].stats.unavailable;
      not_applied += senders[i].stats.not_applied;
    }
  g_test_message ("retries: %u Unavailable; %u answered 'already applied'",
                  unavailable, not_applied);
  for (int i = 0; i < SENDERS; i++)
    for (int m = 0; m < MEMBERS; m++)
      {
        g_autofree char *member = g_strdup_printf ("s%d-m%d", i, m);
        g_auto (Result) r = get_rank_on (client, senders[i].board, member);

        assert_ok (&r);
        if (r.score != senders[i].sums[m])
          g_error ("%s on %s: score %" G_GINT64_FORMAT
                   ", sum of deltas %" G_GINT64_FORMAT,
                   member, senders[i].board, r.score, senders[i].sums[m]);
      }
  /* The kill did hit the senders; rankd was not restarted. */
  g_assert_cmpuint (unavailable, >, 0);
  g_assert_cmpint (rankd->pid, ==, pid);
}

/* Every key of a board on every master: its own tag's and its shards'.
 * With admin, only DeleteBoard's records; else all but them. */
static guint
board_keys_everywhere (const char *board, gboolean admin)
{
  g_autofree char *own = g_strdup_printf ("rk:{%s}:", board);
  g_autofree char *shard = g_strdup_printf ("rk:s:{%s/", board);
  g_autofree char *record = g_strdup_printf ("rk:{%s}:x:", board);
  guint n = 0;

  for (int i = 0; i < NODES; i++)
    {
      redisReply *r;

      if (!node_alive (i))
        continue;
      r = node_command (nodes[i]->port, "ROLE");
      if (strcmp (r->element[0]->str, "master") != 0)
        {
          freeReplyObject (r);
          continue;
        }
      freeReplyObject (r);
      r = node_command (nodes[i]->port, "KEYS *");
      for (gsize k = 0; k < r->elements; k++)
        {
          const char *key = r->element[k]->str;

          if ((g_str_has_prefix (key, own) || g_str_has_prefix (key, shard))
              && g_str_has_prefix (key, record) == admin)
            n++;
        }
      freeReplyObject (r);
    }
  return n;
}

/* DeleteBoard and Export on a board whose ten shards spread over the
 * masters: Export pages through every shard, and the delete finds and
 * removes the keys on every master, and nothing of another board. */
static void
test_delete_board (void)
{
  rankRankingIf *iface = rank_client_iface (client);
  g_autoptr (GError) error = NULL;
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (rankDeleteBoardRequest) request
      = g_object_new (RANK_TYPE_DELETE_BOARD_REQUEST, "board", "c_del",
                      "request_id", "c-del-1", NULL);
  g_autoptr (rankDeleteBoardResponse) response
      = g_object_new (RANK_TYPE_DELETE_BOARD_RESPONSE, NULL);
  g_autofree char *cursor = g_strdup ("");
  GHashTable *exported
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  gint64 c_sh_before = 0, after = -1;
  guint pages = 0;

  for (int i = 0; i < 60; i++)
    {
      g_autofree char *member = g_strdup_printf ("d%02d", i);
      g_autofree char *rid = g_strdup_printf ("c_del-%d", i);
      g_auto (Result) r
          = update_on (client, "c_del", member, i, rid, NO_MODE, NO_TIME);

      assert_ok (&r);
    }
  g_assert_true (positional_count (iface, &c_sh_before, "c_sh", 0, &invalid,
                                   &unavailable, &error));
  do
    {
      g_autoptr (rankExportRequest) req
          = g_object_new (RANK_TYPE_EXPORT_REQUEST, "board", "c_del", "cursor",
                          cursor, "count", 7, NULL);
      g_autoptr (rankExportResponse) page
          = g_object_new (RANK_TYPE_EXPORT_RESPONSE, NULL);

      g_assert_true (rank_ranking_if_export (iface, &page, req, &invalid,
                                             &unavailable, &denied, &error));
      for (guint i = 0; i < page->entries->len; i++)
        g_hash_table_add (
            exported,
            g_strdup (((rankExportEntry *) page->entries->pdata[i])->member));
      g_free (cursor);
      cursor = page->__isset_next_cursor ? g_strdup (page->next_cursor) : NULL;
      pages++;
    }
  while (cursor != NULL);
  g_assert_cmpuint (g_hash_table_size (exported), ==, 60);
  g_assert_cmpuint (pages, >=, 10);
  g_hash_table_unref (exported);

  g_assert_cmpuint (board_keys_everywhere ("c_del", FALSE), >, 10);
  g_assert_true (rank_ranking_if_delete_board (
      iface, &response, request, &invalid, &unavailable, &denied, &error));
  g_assert_no_error (error);
  g_assert_true (response->applied);
  g_assert_cmpint (response->keys_removed, >, 10);
  g_assert_cmpuint (board_keys_everywhere ("c_del", FALSE), ==, 0);
  g_assert_cmpuint (board_keys_everywhere ("c_del", TRUE), ==, 1);
  g_assert_true (positional_count (iface, &after, "c_del", 0, &invalid,
                                   &unavailable, &error));
  g_assert_cmpint (after, ==, 0);
  g_assert_true (positional_count (iface, &after, "c_sh", 0, &invalid,
                                   &unavailable, &error));
  g_assert_cmpint (after, ==, c_sh_before);
}

/* The update queue on a Cluster: each shard's stream lives with its
 * shard, on the masters; the drain applies every update once. */
static void
test_queue (void)
{
  rankRankingIf *iface = rank_client_iface (client);
  g_autoptr (GError) error = NULL;
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankUnavailable *unavailable = NULL;
  g_autoptr (rankEnqueueRequest) request
      = g_object_new (RANK_TYPE_ENQUEUE_REQUEST, NULL);
  g_autoptr (rankEnqueueResponse) response
      = g_object_new (RANK_TYPE_ENQUEUE_RESPONSE, NULL);
  gint64 end = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;

  for (int i = 0; i < 300; i++)
    {
      g_autofree char *member = g_strdup_printf ("q%02d", i % 40);
      g_autofree char *rid = g_strdup_printf ("c_q-%d", i);

      g_ptr_array_add (
          request->requests,
          update_request_new ("c_q", member, 1 + i % 3, rid, NO_MODE, NO_TIME));
    }
  g_assert_true (rank_ranking_if_enqueue (iface, &response, request, &invalid,
                                          &unavailable, &denied, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (response->results->len, ==, 300);
  for (guint i = 0; i < 300; i++)
    g_assert_true (
        ((rankEnqueueResult *) response->results->pdata[i])->__isset_id);
  for (;;)
    {
      g_autoptr (rankGetQueueStatusRequest) sreq = g_object_new (
          RANK_TYPE_GET_QUEUE_STATUS_REQUEST, "board", "c_q", NULL);
      g_autoptr (rankQueueStatus) st
          = g_object_new (RANK_TYPE_QUEUE_STATUS, NULL);

      g_assert_true (rank_ranking_if_get_queue_status (
          iface, &st, sreq, &invalid, &unavailable, &denied, &error));
      if (st->backlog == 0 && st->applied == 300)
        break;
      if (g_get_monotonic_time () > end)
        g_error ("the queue did not drain: backlog %" G_GINT64_FORMAT
                 ", applied %" G_GINT64_FORMAT,
                 st->backlog, st->applied);
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
    }
  for (int m = 0; m < 40; m++)
    {
      g_autofree char *member = g_strdup_printf ("q%02d", m);
      gint64 want = 0;
      g_auto (Result) r = get_rank_on (client, "c_q", member);

      for (int i = m; i < 300; i += 40)
        want += 1 + i % 3;
      assert_ok (&r);
      g_assert_cmpint (r.score, ==, want);
    }
}

/* ---- reads from replicas ---- */

/* The port of a replica of the master at port (0: none yet). */
static guint16
replica_of (guint16 master)
{
  for (int i = 0; i < NODES; i++)
    {
      redisReply *r;
      guint16 found = 0;

      if (!node_alive (i))
        continue;
      r = node_command (nodes[i]->port, "ROLE");
      if (strcmp (r->element[0]->str, "slave") == 0
          && r->element[2]->integer == master)
        found = nodes[i]->port;
      freeReplyObject (r);
      if (found != 0)
        return found;
    }
  return 0;
}

/* Read commands the node at port has run (scripts, ZRANGE, and GetRank's
 * reads without a script). */
static long long
reads_on (guint16 port)
{
  redisReply *r = node_command (port, "INFO commandstats");
  long long n = 0;
  const char *const names[]
      = { "cmdstat_evalsha:calls=", "cmdstat_zrange:calls=",
          "cmdstat_hmget:calls=", "cmdstat_zrank:calls=" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      const char *at = strstr (r->str, names[i]);

      if (at != NULL)
        n += g_ascii_strtoll (at + strlen (names[i]), NULL, 10);
    }
  freeReplyObject (r);
  return n;
}

/* Reads board's member until the replica at port has served some; every
 * answer that comes is right (after a failover, some may not come). */
static void
read_until_served_by (guint16 port, const char *board, gint64 score,
                      gboolean errors_allowed)
{
  long long before = reads_on (port);
  gint64 end = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;

  while (reads_on (port) < before + 20)
    {
      g_auto (Result) r = get_rank_on (client, board, "a");

      if (r.kind == OK)
        g_assert_cmpint (r.score, ==, score);
      else if (!errors_allowed)
        assert_ok (&r);
      if (g_get_monotonic_time () > end)
        g_error ("no reads reached the replica on %u", port);
    }
}

/* read_from=replica on a Cluster: reads go to the replica of the board's
 * slot from the map; after a failover and the old master's return as a
 * replica, to it, from the new map. */
static void
test_replica_reads (void)
{
  guint slot = board_slot ("c_rr");
  guint16 master = master_of (nodes[0]->port, slot);
  guint16 replica = replica_of (master);
  int v = node_index (master);
  g_auto (Result) u
      = update_on (client, "c_rr", "a", 5, "rr-1", NO_MODE, NO_TIME);

  deadline = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;
  assert_ok (&u);
  g_assert_cmpuint (replica, !=, 0);
  read_until_served_by (replica, "c_rr", 5, FALSE);
  g_test_message ("reads of slot %u served by replica %u of %u", slot, replica,
                  master);
  rank_test_kill (nodes[v]);
  while (master_of (replica, slot) == master)
    {
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
      if (g_get_monotonic_time () > deadline)
        g_error ("no failover");
    }
  rank_test_restart (nodes[v]);
  wait_cluster_ok (0, TRUE);
  g_assert_cmpuint (replica_of (replica), ==, master);
  read_until_served_by (master, "c_rr", 5, TRUE);
  g_test_message ("after the failover, served by replica %u of %u", master,
                  replica);
}

/* The number of entries of board's top 10 (the call must succeed). */
static guint
top_count (const char *board)
{
  g_auto (Result) r = { 0 };
  g_autoptr (GPtrArray) page = top_on (client, board, 10, 0, &r);

  assert_ok (&r);
  return page->len;
}

/* Reads board's top 10 until three reads in a row leave the node at port
 * without a read: the answer is served from rankd's cache. */
static void
read_until_cached (guint16 port, const char *board)
{
  gint64 end = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;

  for (;;)
    {
      long long before;

      g_assert_cmpuint (top_count (board), ==, 1);
      before = reads_on (port);
      for (int i = 0; i < 3; i++)
        g_assert_cmpuint (top_count (board), ==, 1);
      if (reads_on (port) == before)
        return;
      if (g_get_monotonic_time () > end)
        g_error ("board %s's top was not cached", board);
    }
}

/* Deletes board's keys on the node at port, behind rankd's back, and reads
 * the top until it is empty: the cached answer is dropped. */
static void
delete_until_seen (guint16 port, const char *board)
{
  gint64 start = g_get_monotonic_time ();
  gint64 end = start + (gint64) DEADLINE_S * G_USEC_PER_SEC;
  redisReply *r = node_command (port, "DEL rk:{%s}:z rk:{%s}:t rk:{%s}:q",
                                board, board, board);

  g_assert_cmpint (r->type, ==, REDIS_REPLY_INTEGER);
  g_assert_cmpint (r->integer, >=, 2);
  freeReplyObject (r);
  while (top_count (board) != 0)
    if (g_get_monotonic_time () > end)
      g_error ("a change on %u was not seen through the cache", port);
  g_test_message ("a change on %u seen through the cache after %.1f ms", port,
                  (double) (g_get_monotonic_time () - start) / 1000.0);
}

/* Whether the node at port has rankd's tracking connection: named
 * rankd-tracking, tracking in broadcast mode (flags t and B). */
static gboolean
tracked_by_rankd (guint16 port)
{
  redisReply *r = node_command (port, "CLIENT LIST");
  g_auto (GStrv) lines = NULL;
  gboolean found = FALSE;

  g_assert_cmpint (r->type, ==, REDIS_REPLY_STRING);
  lines = g_strsplit (r->str, "\n", -1);
  freeReplyObject (r);
  for (guint i = 0; lines[i] != NULL && !found; i++)
    {
      const char *flags = strstr (lines[i], " flags=");
      g_autofree char *word = NULL;

      if (strstr (lines[i], " name=rankd-tracking ") == NULL || flags == NULL)
        continue;
      word = g_strndup (flags + 7, strcspn (flags + 7, " "));
      found = strchr (word, 't') != NULL && strchr (word, 'B') != NULL;
    }
  return found;
}

/* read_cache=tracked on a Cluster: once cached, the board's top is served
 * without Redis; a change made on the slot's master behind rankd's back
 * is seen at once; after a failover (CLUSTER FAILOVER: the old master
 * stays up, as a replica) a change on the new master is seen too, since
 * the replica was reporting the slot's changes before it was promoted. */
static void
test_tracked_cache (void)
{
  guint slot = board_slot ("c_tc");
  guint16 master = master_of (nodes[0]->port, slot);
  guint16 replica = replica_of (master);
  gint64 end = g_get_monotonic_time () + (gint64) DEADLINE_S * G_USEC_PER_SEC;

  g_assert_cmpuint (replica, !=, 0);
  {
    g_auto (Result) u
        = update_on (client, "c_tc", "a", 5, "tc-1", NO_MODE, NO_TIME);

    assert_ok (&u);
  }
  read_until_cached (master, "c_tc");
  delete_until_seen (master, "c_tc");
  {
    g_auto (Result) u
        = update_on (client, "c_tc", "a", 7, "tc-2", NO_MODE, NO_TIME);

    assert_ok (&u);
  }
  read_until_cached (master, "c_tc");
  /* The session spans the replicas too (every node of the map). */
  g_assert_true (tracked_by_rankd (master));
  g_assert_true (tracked_by_rankd (replica));
  {
    redisReply *r = node_command (replica, "CLUSTER FAILOVER");

    g_assert_cmpint (r->type, ==, REDIS_REPLY_STATUS);
    freeReplyObject (r);
  }
  while (master_of (replica, slot) != replica || replica_of (replica) != master)
    {
      g_usleep (20 * 1000); /* polling a condition, with a deadline */
      if (g_get_monotonic_time () > end)
        g_error ("no failover to %u", replica);
    }
  delete_until_seen (replica, "c_tc");
  /* And the new master's answers are cached in turn. */
  {
    g_auto (Result) u
        = update_on (client, "c_tc", "a", 9, "tc-3", NO_MODE, NO_TIME);

    assert_ok (&u);
  }
  read_until_cached (replica, "c_tc");
}

/* A rolling window on a sharded board of the cluster: each shard keeps its
 * window on its master, updates of today and of yesterday (a late one)
 * land in it in their own script calls, and the merged top of the window
 * is their sums. */
static void
test_window (void)
{
  gint64 now = g_get_real_time () / 1000;

  for (int i = 0; i < 30; i++)
    {
      g_autofree char *member = g_strdup_printf ("m%02d", i);
      g_autofree char *rid = g_strdup_printf ("w-%d", i);
      g_autofree char *late = g_strdup_printf ("wy-%d", i);
      g_auto (Result) r
          = update_on (client, "c_win", member, i, rid, NO_MODE, NO_TIME);

      assert_ok (&r);
      if (i < 10)
        {
          g_auto (Result) y = update_on (client, "c_win", member, 100, late,
                                         NO_MODE, now - 86400000);

          assert_ok (&y);
        }
    }
  {
    g_auto (Result) r = { 0 };
    g_autoptr (GPtrArray) page = top_window_on (client, "c_win", 5, 0, &r);
    g_auto (Result) today = { 0 };
    g_autoptr (GPtrArray) day = top_on (client, "c_win", 1, 0, &today);

    assert_ok (&r);
    g_assert_cmpuint (page->len, ==, 5);
    for (guint k = 0; k < 5; k++)
      {
        rankEntry *e = page->pdata[k];
        g_autofree char *want = g_strdup_printf ("m%02u", 9 - k);

        g_assert_cmpstr (e->member, ==, want);
        g_assert_cmpint (e->score, ==, 109 - (gint64) k);
        g_assert_cmpint (e->rank, ==, k + 1);
      }
    assert_ok (&today);
    g_assert_cmpstr (((rankEntry *) day->pdata[0])->member, ==, "m29");
  }
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  cluster_start ();
  rankd_start ();
  g_test_add_func ("/cluster/served", test_served);
  g_test_add_func ("/cluster/moved", test_moved);
  g_test_add_func ("/cluster/ask", test_ask);
  g_test_add_func ("/cluster/delete-board", test_delete_board);
  g_test_add_func ("/cluster/queue", test_queue);
  g_test_add_func ("/cluster/failover-exactly-once", test_failover);
  g_test_add_func ("/cluster/replica-reads", test_replica_reads);
  g_test_add_func ("/cluster/tracked-cache", test_tracked_cache);
  g_test_add_func ("/cluster/window", test_window);
  status = g_test_run ();
  rank_client_free (client);
  stop_checked (rankd);
  rank_test_process_free (rankd);
  for (int i = 0; i < NODES; i++)
    {
      rank_test_kill (nodes[i]);
      rank_test_process_free (nodes[i]);
    }
  {
    g_autofree char *config = g_build_filename (config_dir, "rankd.conf", NULL);

    g_unlink (config);
    g_rmdir (config_dir);
    g_free (config_dir);
  }
  return status;
}
