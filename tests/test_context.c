/* test_context.c -- a call's context is resolved once, when it is decoded:
 * a reload (SIGHUP) that lands between the rounds of a query does not reach
 * it, and a clock of the test's own decides the time and the period.
 *
 * The parts of one of rankd's workers run in this process -- an event loop,
 * a backend, a store and a handler -- against a real redis-server; calls are
 * encoded by the generated structs and decoded the way the server does.
 * The backend's hook sees each command leave: at the first command of a
 * query's second (or third) round it swaps the handler's configuration, as
 * a SIGHUP would, to options under which that round would answer otherwise.
 */
#include <glib/gstdio.h>
#include <string.h>

#include "backend.h"
#include "constants.h"
#include "calls.h"
#include "connbuf.h"
#include "context.h"
#include "error.h"
#include "handler.h"
#include "loop.h"
#include "rank_ranking_types.h"
#include "store.h"

/* A method's args struct holding request (taken). */
static gpointer
args_of (GType args, gpointer request)
{
  GObject *a = g_object_new (args, "request", request, NULL);

  g_object_unref (request);
  return a;
}

static RankTestProcess *redis;

typedef struct
{
  RankLoop *loop;
  RankBackend *backend;
  RankStore *store;
  RankHandler *handler;
  RankRequestReader *reader;
  ThriftProtocol *in;
  GMutex lock;
  GCond cond;
  GByteArray *reply;
  gboolean answered;
  /* The hook: swap to next at the call's command number swap_at. */
  guint sent;
  guint swap_at;
  RankConfig *next;
  gint64 now_ms; /* the handler's clock */
  /* When stall_at is set: the clock's stall_at-th reading from then on
   * waits until the monotonic clock reaches stall_until_us. */
  guint stall_at;
  guint clock_reads;
  gint64 stall_until_us;
  gint64 step_ms; /* how far the clock moves at each reading */
  /* The commands a call sent, by name ("rank.lua" for that script; "HMGET
   * +ZRANK" for GetRank's second round, a transaction); moved: when set,
   * called as the first second round is queued. */
  GString *names;
  void (*moved) (void);
  /* The call in flight. */
  GByteArray *request;
} Worker;

static gint64
fake_clock (gpointer data)
{
  Worker *w = data;

  gint64 now;

  w->clock_reads++;
  if (w->stall_at != 0 && w->clock_reads == w->stall_at)
    while (g_get_monotonic_time () < w->stall_until_us)
      g_usleep (1000);
  now = w->now_ms;
  w->now_ms += w->step_ms;
  return now;
}

static void
answered (gpointer request, gboolean ok)
{
  Worker *w = request;

  g_assert_true (ok);
  g_mutex_lock (&w->lock);
  w->answered = TRUE;
  g_cond_signal (&w->cond);
  g_mutex_unlock (&w->lock);
}

/* Counts the commands of a call, but those of the layout check (its
 * descriptor key, ":o"). */
static void
hook (const RankCommand *cmd, gpointer data)
{
  Worker *w = data;
  gsize len;
  const char *key = rank_command_key (cmd, &len);

  if (len >= 2 && memcmp (key + len - 2, ":o", 2) == 0)
    return;
  if (cmd->script == RANK_SCRIPT_RANK)
    g_string_append (w->names, "rank.lua ");
  else if (cmd->script == RANK_SCRIPT_UPDATE)
    g_string_append (w->names, "update.lua ");
  else if (cmd->script == RANK_SCRIPT_NONE)
    {
      /* GetRank's second round: HMGET, the times hash, the sorted set and
       * the prefix length (backend.h, RANK_SEND_RANKS). */
      gboolean ranks = cmd->argc == 4 && cmd->len[0] == 5
                       && memcmp (cmd->bytes + cmd->offset[0], "HMGET", 5) == 0;

      g_string_append_len (w->names, cmd->bytes + cmd->offset[0],
                           (gssize) cmd->len[0]);
      g_string_append (w->names, ranks ? "+ZRANK " : " ");
      if (w->moved != NULL && ranks)
        {
          w->moved ();
          w->moved = NULL;
        }
    }
  if (++w->sent == w->swap_at)
    rank_handler_set_config (w->handler, w->next);
}

static RankConfig *
config_of (const char *text)
{
  g_autofree char *dir = g_dir_make_tmp ("rankd-context-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "rankd.conf", NULL);
  g_autoptr (GError) error = NULL;
  RankConfig *config;

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  config = rank_config_load (path, &error);
  g_assert_no_error (error);
  g_unlink (path);
  g_rmdir (dir);
  return config;
}

static void
worker_start (Worker *w, const char *config_text)
{
  RankAddress node = { "127.0.0.1", redis->port, NULL };
  RankBackendConfig backend
      = { .nodes = &node, .n_nodes = 1, .timeout_ms = 5000 };
  g_autoptr (RankConfig) config = config_of (config_text);
  g_autoptr (GError) error = NULL;

  memset (w, 0, sizeof *w);
  g_mutex_init (&w->lock);
  g_cond_init (&w->cond);
  w->now_ms = g_get_real_time () / 1000;
  w->names = g_string_new (NULL);
  w->loop = rank_loop_new ();
  w->backend = rank_backend_new (w->loop, &backend);
  w->store = rank_store_new (w->backend, 1);
  w->handler = rank_handler_new (w->store, config, 3600000,
                                 RANK_PROTOCOL_BINARY, TRUE, answered);
  rank_handler_set_clock (w->handler, fake_clock, w);
  rank_backend_set_hook (w->backend, hook, w);
  w->reader = rank_request_reader_new (TRUE, RANK_DEFAULT_MAX_FRAME);
  w->in
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (w->reader));
  w->reply = g_byte_array_new ();
  rank_backend_start (w->backend);
  rank_loop_start (w->loop, "test-worker");
  g_assert_true (rank_backend_wait_ready (w->backend, 10000, &error));
}

static void
worker_stop (Worker *w)
{
  rank_loop_quit_and_join (w->loop);
  rank_loop_run_pending (w->loop);
  rank_backend_free (w->backend);
  rank_loop_run_pending (w->loop);
  rank_handler_free (w->handler);
  rank_store_free (w->store);
  rank_loop_free (w->loop);
  g_object_unref (w->in);
  g_object_unref (w->reader);
  g_byte_array_unref (w->reply);
  g_string_free (w->names, TRUE);
  g_clear_pointer (&w->next, rank_config_unref);
  g_mutex_clear (&w->lock);
  g_cond_clear (&w->cond);
}

/* In the loop's thread, as the server does with a request it received. */
static void
dispatch (gpointer data)
{
  Worker *w = data;
  g_autoptr (GError) error = NULL;
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;
  gsize bound;

  rank_request_reader_feed (w->reader, w->request->data, w->request->len);
  g_assert_true (rank_request_reader_ready (w->reader, &error));
  g_assert_true (rank_request_reader_begin (w->reader, &error));
  g_assert_cmpint (
      thrift_protocol_read_message_begin (w->in, &name, &type, &seqid, &error),
      >, 0);
  g_assert_cmpint (rank_handler_dispatch (w->handler, w, NULL, w->reply, name,
                                          seqid, w->in, &bound, &error),
                   ==, RANK_DISPATCH_PENDING);
  g_free (name);
}

/* Calls method with args; returns its result (a *Result struct of
 * result_type). */
static GObject *
call (Worker *w, const char *method, ThriftStruct *args, GType result_type)
{
  RankReplyWriter *writer = rank_reply_writer_new (TRUE);
  g_autoptr (ThriftProtocol) out
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (writer));
  RankRequestReader *reader = rank_request_reader_new (TRUE, 64 << 20);
  g_autoptr (ThriftProtocol) in
      = rank_protocol_new (RANK_PROTOCOL_BINARY, THRIFT_TRANSPORT (reader));
  g_autoptr (GError) error = NULL;
  gint64 end = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;
  GObject *result = g_object_new (result_type, NULL);
  gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;

  w->request = g_byte_array_new ();
  rank_reply_writer_begin (writer, w->request);
  g_assert_cmpint (
      thrift_protocol_write_message_begin (out, method, T_CALL, 1, &error), >,
      0);
  g_assert_cmpint (thrift_struct_write (args, out, &error), >, 0);
  g_assert_cmpint (thrift_protocol_write_message_end (out, &error), >=, 0);
  g_assert_true (thrift_transport_flush (THRIFT_TRANSPORT (writer), &error));
  w->answered = FALSE;
  w->sent = 0;
  g_string_truncate (w->names, 0);
  g_byte_array_set_size (w->reply, 0);
  rank_loop_post (w->loop, dispatch, w);
  g_mutex_lock (&w->lock);
  while (!w->answered)
    g_assert_true (g_cond_wait_until (&w->cond, &w->lock, end));
  g_mutex_unlock (&w->lock);
  g_byte_array_unref (w->request);

  rank_request_reader_feed (reader, w->reply->data, w->reply->len);
  g_assert_true (rank_request_reader_begin (reader, &error));
  g_assert_cmpint (
      thrift_protocol_read_message_begin (in, &name, &type, &seqid, &error), >,
      0);
  g_assert_cmpint (type, ==, T_REPLY);
  g_assert_cmpint (thrift_struct_read (THRIFT_STRUCT (result), in, &error), >,
                   0);
  g_free (name);
  g_object_unref (reader);
  g_object_unref (writer);
  return result;
}

static void
update_at (Worker *w, const char *board, const char *member, gint64 value,
           gint64 ts)
{
  g_autofree char *rid
      = g_strdup_printf ("%s-%s-%" G_GINT64_FORMAT, board, member, value);
  rankRankingUpdateArgs *args
      = g_object_new (RANK_TYPE_RANKING_UPDATE_ARGS, NULL);
  rankRankingUpdateResult *result;

  g_object_unref (args->request);
  args->request = update_request_new (board, member, value, rid,
                                      RANK_UPDATE_MODE_SET, ts);
  result = RANK_RANKING_UPDATE_RESULT (call (w, "Update", THRIFT_STRUCT (args),
                                             RANK_TYPE_RANKING_UPDATE_RESULT));
  g_assert_true (result->__isset_success);
  g_object_unref (result);
  g_object_unref (args);
}

/* ---- a reload between rounds ---- */

/* Board r under A: a 50, b 40, c 40 (after b), d 10, ordinal ranks. B
 * would answer every round otherwise: lowest first, competition ranks, a
 * cap of 1. */
static const char config_a[] = "[board r]\norder=desc\n";
static const char config_b[]
    = "[board r]\norder=asc\nrank=competition\ncap=1\n";

static void
fill (Worker *w)
{
  gint64 t = w->now_ms - 10000;

  update_at (w, "r", "a", 50, t);
  update_at (w, "r", "b", 40, t + 1);
  update_at (w, "r", "c", 40, t + 2);
  update_at (w, "r", "d", 10, t + 3);
}

/* The reload lands at the call's command number at; the answer is A's. */
static void
reload_at (Worker *w, guint at)
{
  g_clear_pointer (&w->next, rank_config_unref);
  w->next = config_of (config_b);
  w->swap_at = at;
}

static void
restore (Worker *w)
{
  g_autoptr (RankConfig) a = config_of (config_a);

  w->swap_at = 0;
  rank_handler_set_config (w->handler, a);
}

static void
test_reload_around (void)
{
  Worker w;
  static const char *const want[] = { "b", "c", "d" };

  worker_start (&w, config_a);
  fill (&w);
  /* Round 1: rank.lua find; round 2: the page. */
  reload_at (&w, 2);
  {
    rankRankingGetAroundArgs *args
        = args_of (RANK_TYPE_RANKING_GET_AROUND_ARGS,
                   g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board", "r",
                                 "member", "c", "radius", 1, NULL));
    rankRankingGetAroundResult *result = RANK_RANKING_GET_AROUND_RESULT (
        call (&w, "GetAround", THRIFT_STRUCT (args),
              RANK_TYPE_RANKING_GET_AROUND_RESULT));

    g_assert_cmpuint (w.sent, >=, 2); /* the reload landed */
    g_assert_cmpuint (result->success->len, ==, 3);
    for (guint i = 0; i < 3; i++)
      {
        rankEntry *e = g_ptr_array_index (result->success, i);

        g_assert_cmpstr (e->member, ==, want[i]);
        g_assert_cmpint (e->rank, ==, i + 2);
      }
    g_object_unref (result);
    g_object_unref (args);
  }
  worker_stop (&w);
}

static void
test_reload_percentile (void)
{
  Worker w;

  worker_start (&w, config_a);
  fill (&w);
  /* Rounds: the member's rank, those with its score, the board's size:
   * the reload before the second, then (again) before the third. */
  for (guint at = 2; at <= 3; at++)
    {
      rankRankingGetPercentileArgs *args
          = args_of (RANK_TYPE_RANKING_GET_PERCENTILE_ARGS,
                     g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board",
                                   "r", "member", "b", NULL));
      rankRankingGetPercentileResult *result;

      reload_at (&w, at);
      result = RANK_RANKING_GET_PERCENTILE_RESULT (
          call (&w, "GetPercentile", THRIFT_STRUCT (args),
                RANK_TYPE_RANKING_GET_PERCENTILE_RESULT));
      g_assert_cmpuint (w.sent, >=, at);
      /* Behind b: d of 4. */
      g_assert_cmpfloat_with_epsilon (result->success, 25.0, 1e-9);
      g_object_unref (result);
      g_object_unref (args);
      restore (&w);
    }
  worker_stop (&w);
}

static void
test_reload_score_at (void)
{
  Worker w;
  rankRankingGetScoreAtPercentileArgs *args;
  rankRankingGetScoreAtPercentileResult *result;

  worker_start (&w, config_a);
  fill (&w);
  /* Round 1: the board's size; round 2: the entry at the position. */
  reload_at (&w, 2);
  args = args_of (RANK_TYPE_RANKING_GET_SCORE_AT_PERCENTILE_ARGS,
                  g_object_new (RANK_TYPE_GET_SCORE_AT_PERCENTILE_REQUEST,
                                "board", "r", "pct", 100.0, NULL));
  result = RANK_RANKING_GET_SCORE_AT_PERCENTILE_RESULT (
      call (&w, "GetScoreAtPercentile", THRIFT_STRUCT (args),
            RANK_TYPE_RANKING_GET_SCORE_AT_PERCENTILE_RESULT));
  g_assert_cmpuint (w.sent, >=, 2);
  g_assert_cmpint (result->success, ==, 50);
  g_object_unref (result);
  g_object_unref (args);
  worker_stop (&w);
}

static void
test_reload_sample (void)
{
  Worker w;
  rankRankingSampleArgs *args;
  rankRankingSampleResult *result;
  static const struct
  {
    const char *member;
    gint64 score, rank;
  } want[] = { { "a", 50, 1 }, { "b", 40, 2 }, { "c", 40, 3 }, { "d", 10, 4 } };

  worker_start (&w, config_a);
  fill (&w);
  /* Round 1: two counts; round 2: the draws; round 3: their ranks. The
   * reload before round 2. */
  reload_at (&w, 3);
  args = args_of (RANK_TYPE_RANKING_SAMPLE_ARGS,
                  g_object_new (RANK_TYPE_SAMPLE_REQUEST, "board", "r",
                                "min_score", (gint64) 0, "max_score",
                                (gint64) 100, "count", 4, NULL));
  result = RANK_RANKING_SAMPLE_RESULT (call (&w, "Sample", THRIFT_STRUCT (args),
                                             RANK_TYPE_RANKING_SAMPLE_RESULT));
  g_assert_cmpuint (w.sent, >=, 3);
  g_assert_cmpuint (result->success->len, ==, 4);
  for (guint i = 0; i < result->success->len; i++)
    {
      rankEntry *e = g_ptr_array_index (result->success, i);
      gboolean known = FALSE;

      for (gsize k = 0; k < G_N_ELEMENTS (want); k++)
        if (strcmp (e->member, want[k].member) == 0)
          {
            g_assert_cmpint (e->score, ==, want[k].score);
            g_assert_cmpint (e->rank, ==, want[k].rank);
            known = TRUE;
          }
      g_assert_true (known);
    }
  g_object_unref (result);
  g_object_unref (args);
  worker_stop (&w);
}

/* ---- the clock ---- */

static gboolean
found (Worker *w, const char *board, const char *member, gint32 back)
{
  rankRankingGetRankArgs *args
      = args_of (RANK_TYPE_RANKING_GET_RANK_ARGS,
                 g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board,
                               "member", member, "periods_back", back, NULL));
  rankRankingGetRankResult *result = RANK_RANKING_GET_RANK_RESULT (call (
      w, "GetRank", THRIFT_STRUCT (args), RANK_TYPE_RANKING_GET_RANK_RESULT));
  gboolean yes = result->__isset_success;

  g_assert_true (yes || result->not_found != NULL);
  g_object_unref (result);
  g_object_unref (args);
  return yes;
}

/* An update without a timestamp goes to the period of the handler's clock,
 * and reads count periods back from it: one hour on, the update is a
 * period back. */
static void
test_clock (void)
{
  Worker w;
  gint64 hour = 3600 * 1000;
  redisContext *r;
  redisReply *reply;

  worker_start (&w, "[board p]\nperiod=custom\nperiod_seconds=3600\n"
                    "retention=1\n");
  /* A second into this hour: its keys and the next hour's live on. */
  w.now_ms = g_get_real_time () / 1000 / hour * hour + 1000;
  update_at (&w, "p", "alice", 5, NO_TIME);
  r = redis_connect (redis->port);
  reply = redisCommand (r, "EXISTS rk:{p}:p:n%" G_GINT64_FORMAT ":z",
                        w.now_ms / hour);
  g_assert_cmpint (reply->integer, ==, 1);
  freeReplyObject (reply);
  redisFree (r);
  g_assert_true (found (&w, "p", "alice", 0));
  w.now_ms += hour;
  g_assert_false (found (&w, "p", "alice", 0));
  g_assert_true (found (&w, "p", "alice", 1));
  worker_stop (&w);
}

/* ---- GetRank without a script ---- */

static gint64
rank_of (Worker *w, const char *board, const char *member, gint64 *score)
{
  rankRankingGetRankArgs *args
      = args_of (RANK_TYPE_RANKING_GET_RANK_ARGS,
                 g_object_new (RANK_TYPE_GET_RANK_REQUEST, "board", board,
                               "member", member, NULL));
  rankRankingGetRankResult *result = RANK_RANKING_GET_RANK_RESULT (call (
      w, "GetRank", THRIFT_STRUCT (args), RANK_TYPE_RANKING_GET_RANK_RESULT));
  gint64 rank;

  g_assert_true (result->__isset_success);
  rank = result->success->rank;
  *score = result->success->score;
  g_object_unref (result);
  g_object_unref (args);
  return rank;
}

/* Between GetRank's two rounds, c of board w goes from 40 to 45 behind
 * rankd's back (as another rankd's update would): its key changes. */
static void
move_c (void)
{
  redisContext *r = redis_connect (redis->port);
  redisReply *p = redisCommand (r, "HGET rk:{w}:t c");
  char *moved;

  /* Its prefix (6 bytes of time), then its sorted-set score (orderkey.h). */
  g_assert_cmpint (p->type, ==, REDIS_REPLY_STRING);
  g_assert_cmpmem (p->str + 6, p->len - 6, "\xff\xff\xff\xff\xff\xff\xff\xd8",
                   8);
  moved = g_malloc (14);
  memcpy (moved, p->str, 6);
  memcpy (moved + 6, "\xff\xff\xff\xff\xff\xff\xff\xd3", 8);
  moved[5] ^= 1; /* another time, within the same second */
  freeReplyObject (
      redisCommand (r, "ZREM rk:{w}:z %b%s", p->str, (size_t) 6, "c"));
  freeReplyObject (
      redisCommand (r, "ZADD rk:{w}:z -45 %b%s", moved, (size_t) 6, "c"));
  freeReplyObject (redisCommand (r, "HSET rk:{w}:t c %b", moved, (size_t) 14));
  freeReplyObject (p);
  g_free (moved);
  redisFree (r);
}

/* Between GetRank's two rounds, c of board w goes from 40 to 45 within the
 * millisecond of its time: its key stays, its score changes. */
static void
bump_c (void)
{
  redisContext *r = redis_connect (redis->port);
  redisReply *p = redisCommand (r, "HGET rk:{w}:t c");
  char bumped[14];

  g_assert_cmpint (p->type, ==, REDIS_REPLY_STRING);
  g_assert_cmpint (p->len, ==, 14);
  memcpy (bumped, p->str, 6);
  memcpy (bumped + 6, "\xff\xff\xff\xff\xff\xff\xff\xd3", 8);
  freeReplyObject (
      redisCommand (r, "ZADD rk:{w}:z -45 %b%s", p->str, (size_t) 6, "c"));
  freeReplyObject (
      redisCommand (r, "HSET rk:{w}:t c %b", bumped, sizeof bumped));
  freeReplyObject (p);
  redisFree (r);
}

/* An ordinal rank on an ordinary board reads the member's prefix, then its
 * score and rank, without rank.lua; when the member moves between the two
 * rounds, rank.lua reads it again and the answer is the new state. When
 * only its score changes (its key stays), the second round's score is the
 * answer, exact with its rank. */
static void
test_rank_without_script (void)
{
  Worker w;
  gint64 score;

  worker_start (&w, config_a);
  update_at (&w, "w", "a", 50, w.now_ms - 3000);
  update_at (&w, "w", "b", 40, w.now_ms - 2000);
  update_at (&w, "w", "c", 40, w.now_ms - 1000);
  g_assert_cmpint (rank_of (&w, "w", "c", &score), ==, 3);
  g_assert_cmpint (score, ==, 40);
  g_assert_cmpstr (w.names->str, ==, "HMGET HMGET+ZRANK ");
  w.moved = move_c;
  g_assert_cmpint (rank_of (&w, "w", "c", &score), ==, 2);
  g_assert_cmpint (score, ==, 45);
  g_assert_null (w.moved);
  g_assert_cmpstr (w.names->str, ==, "HMGET HMGET+ZRANK rank.lua ");
  worker_stop (&w);

  /* c at 41 (a request id of its own: a new SET), then 45 between the
   * rounds; a stays at 50 and b at 40. */
  worker_start (&w, config_a);
  update_at (&w, "w", "c", 41, w.now_ms - 1000);
  w.moved = bump_c;
  g_assert_cmpint (rank_of (&w, "w", "c", &score), ==, 2);
  g_assert_cmpint (score, ==, 45);
  g_assert_null (w.moved);
  g_assert_cmpstr (w.names->str, ==, "HMGET HMGET+ZRANK ");
  worker_stop (&w);
}

/* ---- one layout check for a whole call ---- */

/* The script calls Redis has run (EVALSHA, and FCALL: update.lua's), from
 * INFO commandstats. */
static guint64
script_calls (void)
{
  redisContext *r = redis_connect (redis->port);
  redisReply *reply = redisCommand (r, "INFO commandstats");
  const char *at;
  guint64 calls = 0;

  g_assert_cmpint (reply->type, ==, REDIS_REPLY_STRING);
  for (const char *const *name
       = (const char *const[]){ "cmdstat_evalsha:calls=",
                                "cmdstat_fcall:calls=", NULL };
       *name != NULL; name++)
    if ((at = strstr (reply->str, *name)) != NULL)
      calls += g_ascii_strtoull (at + strlen (*name), NULL, 10);
  freeReplyObject (reply);
  redisFree (r);
  return calls;
}

/* Sends one UpdateBatch to board: members b, c, d and e SET to 40, 40 -
 * step, 40 - 2 step and 40 - 3 step, below a (50); checks that the call
 * read the handler's clock once and that each update was applied, with
 * ranks 2 to 5. Returns how many script calls Redis ran meanwhile. */
static guint64
batch_of_four (Worker *w, const char *board, gint64 step)
{
  const char *members[] = { "b", "c", "d", "e" };
  rankUpdateBatchRequest *request
      = g_object_new (RANK_TYPE_UPDATE_BATCH_REQUEST, NULL);
  rankRankingUpdateBatchArgs *args;
  rankRankingUpdateBatchResult *result;
  guint64 before;

  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    {
      g_autofree char *rid = g_strdup_printf ("batch-%s", members[i]);

      g_ptr_array_add (request->requests,
                       update_request_new (board, members[i],
                                           40 - step * (gint64) i, rid,
                                           RANK_UPDATE_MODE_SET, NO_TIME));
    }
  args = args_of (RANK_TYPE_RANKING_UPDATE_BATCH_ARGS, request);
  w->clock_reads = 0;
  before = script_calls ();
  result = RANK_RANKING_UPDATE_BATCH_RESULT (
      call (w, "UpdateBatch", THRIFT_STRUCT (args),
            RANK_TYPE_RANKING_UPDATE_BATCH_RESULT));
  g_assert_cmpuint (w->clock_reads, ==, 1);
  g_assert_true (result->__isset_success);
  g_assert_cmpuint (result->success->results->len, ==, G_N_ELEMENTS (members));
  for (guint i = 0; i < G_N_ELEMENTS (members); i++)
    {
      rankUpdateResult *r = g_ptr_array_index (result->success->results, i);

      g_assert_true (r->__isset_response);
      g_assert_true (r->response->applied);
      g_assert_cmpint (r->response->score, ==, 40 - step * (gint64) i);
      g_assert_cmpint (r->response->rank, ==, 2 + (gint64) i);
    }
  g_object_unref (result);
  g_object_unref (args);
  return script_calls () - before;
}

/* What a worker learned of a board's layout holds for
 * RANK_LAYOUT_RECHECK_MS, from the time a call was decoded: the updates
 * of an UpdateBatch share one script call even when that time runs out
 * while they are read. Here the handler's clock stalls at its (one)
 * reading for the batch until the check made by the update before it is
 * older than that. */
static void
test_batch_one_layout_check (void)
{
  Worker w;

  worker_start (&w, config_a);
  update_at (&w, "lc", "a", 50, NO_TIME);
  /* The first write checked the layout, and registered the board. */
  g_assert_cmpstr (w.names->str, ==, "ZADD update.lua ");
  w.stall_until_us
      = g_get_monotonic_time () + (RANK_LAYOUT_RECHECK_MS + 100) * 1000;
  w.stall_at = 1;
  g_assert_cmpuint (batch_of_four (&w, "lc", 1), ==, 1);
  /* No check of the layout among them (its SET is not listed, the ZADD
   * that registers the board with it is). */
  g_assert_cmpstr (w.names->str, ==,
                   "update.lua update.lua update.lua update.lua ");
  worker_stop (&w);
}

/* A call reads the handler's clock once: the updates of an UpdateBatch
 * without a request_id of its own are all at one time, so a request-id
 * bucket that begins while they are read does not split them into two
 * script calls (nor a period boundary into two periods). Here the clock
 * stands 1 ms before a bucket's start and moves 1 ms at each reading; the
 * four reach one score, at one time, so they rank by member. */
static void
test_batch_one_clock (void)
{
  Worker w;
  /* The default window's buckets: a quarter of 3,600,000 ms. */
  const gint64 width = 3600000 / 4;

  worker_start (&w, config_a);
  update_at (&w, "ck", "a", 50, NO_TIME);
  w.now_ms = (w.now_ms / width + 1) * width - 1;
  w.step_ms = 1;
  g_assert_cmpuint (batch_of_four (&w, "ck", 0), ==, 1);
  worker_stop (&w);
}

/* ---- rolling windows (IDL 1.8) ---- */

/* rank_context_read_window reads the window's label, or refuses. */
static void
test_window (void)
{
  static const char text[] = "[board wnd]\nperiod=daily\nwindow=3\n"
                             "retention=2\n[board wp]\nperiod=daily\n";
  g_autoptr (RankConfig) config = config_of (text);
  g_autoptr (GError) error = NULL;
  RankContext ctx;

  rank_context_init (&ctx, config, "wp", 1763800000000, 0, 3600000);
  g_assert_false (ctx.window);
  g_assert_false (rank_context_read_window (&ctx, 0, TRUE, &error));
  g_assert_error (error, RANK_ERROR, RANK_ERROR_INVALID);
  g_assert_cmpstr (error->message, ==,
                   "window: board 'wp' has no rolling window (board option "
                   "window=N)");
  g_clear_error (&error);
  rank_context_clear (&ctx);

  rank_context_init (&ctx, config, "wnd", 1763800000000, 0, 3600000);
  g_assert_false (rank_context_read_window (&ctx, 1, TRUE, &error));
  g_assert_error (error, RANK_ERROR, RANK_ERROR_INVALID);
  g_assert_true (g_str_has_prefix (
      error->message,
      "window: reads the current window; periods_back must be 0"));
  g_clear_error (&error);
  g_assert_true (rank_context_read_window (&ctx, 0, FALSE, &error));
  g_assert_false (ctx.window);
  g_assert_cmpstr (ctx.period.label, ==, "2025-11-22");
  g_assert_true (rank_context_read_window (&ctx, 0, TRUE, &error));
  g_assert_true (ctx.window);
  g_assert_cmpstr (ctx.period.label, ==, RANK_WINDOW_LABEL);
  rank_context_clear (&ctx);
}

int
main (int argc, char **argv)
{
  int status;

  g_test_init (&argc, &argv, NULL);
  redis = rank_test_redis_start (NULL);
  g_test_add_func ("/context/reload-between-rounds/around", test_reload_around);
  g_test_add_func ("/context/reload-between-rounds/percentile",
                   test_reload_percentile);
  g_test_add_func ("/context/reload-between-rounds/score-at-percentile",
                   test_reload_score_at);
  g_test_add_func ("/context/reload-between-rounds/sample", test_reload_sample);
  g_test_add_func ("/context/clock", test_clock);
  g_test_add_func ("/context/rank-without-script", test_rank_without_script);
  g_test_add_func ("/context/batch-one-clock", test_batch_one_clock);
  g_test_add_func ("/context/window", test_window);
  g_test_add_func ("/context/batch-one-layout-check",
                   test_batch_one_layout_check);
  status = g_test_run ();
  rank_test_kill (redis);
  rank_test_process_free (redis);
  return status;
}
