/* rank_bench.c -- rank-bench: a load generator for rankd, and the same
 * logical operations straight against Redis as the baseline.
 *
 * Targets:
 *   rankd (default)    --host/--port: Update (BEST or --mode, a fresh request
 * id), GetRank, GetTopN through the generated c_glib client; over TLS with
 * --tls (--tls-ca, --tls-cert, --tls-key for a client certificate), one context
 * shared by every connection.
 *   --direct HOST:PORT what a team writes by hand with hiredis, one
 *                      connection per thread, no pipelining: FCALL of
 *                      rankd's own update.lua for updates; ZREVRANK then
 *                      ZSCORE for a rank; ZREVRANGE ... WITHSCORES for top-N,
 *                      on a plain sorted set of the same members.
 *
 * Every connection is a thread in a closed loop: pick an operation by the
 * --mix weights, a member uniformly from the population, a board from
 * --boards; time it; record it unless still warming up. With --timeline or
 * --plot each measured request is also kept as a 12-byte sample, turned into
 * per-second percentiles (and a gnuplot PNG) after the run: timeline.c.
 */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "client.h"
#include "cpu.h"
#include "error.h"
#include "histogram.h"
#include "timeline.h"
#include "topreader.h"
#include "lua_scripts.h"
#include "orderkey.h"
#include "store.h"

enum
{
  OP_UPDATE,
  OP_RANK,
  OP_TOP,
  OP_AROUND,     /* GetAround, radius 5 */
  OP_RANKS,      /* GetRanks of 10 members */
  OP_BATCH,      /* UpdateBatch of --batch updates */
  OP_ENQUEUE,    /* Enqueue of --batch updates (a board with queue=on) */
  OP_PERCENTILE, /* GetPercentile of a member */
  N_OPS
};

#define RANK_BENCH_MAX_PIPELINE 64

static const char *const op_names[N_OPS]
    = { "update", "rank",  "top",     "around",
        "ranks",  "batch", "enqueue", "percentile" };

#define RANK_BENCH_MAX_BATCH 1000

typedef struct
{
  char *host;
  int port;
  char *direct;
  int connections;
  double duration;
  double rate; /* --rate: calls/s in all; 0: closed loop */
  double warmup;
  gint64 requests;
  char *mix;
  int weights[N_OPS];
  int members;
  int boards;
  char *board_prefix;
  gboolean preload;
  gboolean preload_only;
  char *transport;
  char *protocol;
  char *reader; /* GetTopN replies: lean (topreader.c) or generated */
  int top_n;
  gboolean json;
  gint64 seed;
  char *timeline;        /* TSV of per-second percentiles */
  char *plot;            /* PNG of the same (gnuplot) */
  int pipeline;          /* calls in flight per connection */
  int batch;             /* updates per UpdateBatch call */
  gboolean without_rank; /* with_rank=false on Update and UpdateBatch */
  char *mode;            /* --mode of the updates: increment, best, set */
  int update_mode;       /* its RANK_UPDATE_MODE_* (BEST by default) */
  gboolean window;       /* window=true on the reads (IDL 1.8) */
  char *cpu;      /* NAME=PID,...: processes whose CPU per op to report */
  gboolean tls;   /* --tls, or implied by a --tls-* option */
  char *tls_ca;   /* --tls-ca: CAs for rankd's certificate */
  char *tls_cert; /* --tls-cert, --tls-key: the client's own */
  char *tls_key;
  char *tls_server_name; /* default: --host */
  RankTlsContext *tls_context;
  RankConfig *defaults; /* board options of the direct baseline's updates */
  RankCpuWatch *cpu_watch;
  /* derived */
  gboolean framed;
  RankProtocolKind kind;
  gboolean lean_top; /* GetTopN replies read by topreader.c */
  char *direct_host;
  int direct_port;
  guint64 nonce;
} Options;

typedef struct
{
  RankHistogram hist[N_OPS];
  guint64 errors[N_OPS];
  char last_error[256];
} Stats;

typedef struct
{
  const Options *o;
  int id;
  GRand *rand;
  RankClient *client;
  /* Reused from call to call: a client that allocates a few GObjects per
   * request spends that CPU on the cores rankd and Redis share with it. */
  rankUpdateRequest *req;
  rankUpdateResponse *resp;
  rankEntry *entry;
  GPtrArray *page;
  rankUpdateBatchRequest *batch_req; /* --batch requests, reused */
  rankUpdateBatchResponse *batch_resp;
  rankEnqueueRequest *enqueue_req; /* sends batch_req's requests */
  rankEnqueueResponse *enqueue_resp;
  redisContext *redis;
  guint64 counter;
  int update_mode; /* --mode (BEST by default); the preload SETs */
  Stats stats;
  GArray *samples; /* RankSample, with --timeline or --plot */
  /* preload: this worker loads members [first, last) */
  int first, last;
} Worker;

static volatile gint phase;    /* 0 warm-up, 1 measuring, 2 stop */
static gint64 measure_started; /* monotonic us, set before phase 1 */
static gint64 requests_left;
static gint preloaded;

/* ---- the operations ---- */

static void
board_name (const Options *o, int b, char *out, gsize len)
{
  g_snprintf (out, len, "%s-%d", o->board_prefix, b);
}

static void
note_error (Worker *w, const char *msg)
{
  g_strlcpy (w->stats.last_error, msg, sizeof w->stats.last_error);
}

/* --batch updates of board, random members and scores, into
 * w->batch_req. */
static void
fill_batch (Worker *w, const char *board)
{
  GPtrArray *reqs = w->batch_req->requests;

  for (guint i = 0; i < reqs->len; i++)
    {
      rankUpdateRequest *req = reqs->pdata[i];
      char member[32];

      g_snprintf (member, sizeof member, "m%d",
                  g_rand_int_range (w->rand, 0, w->o->members));
      g_free (req->board);
      g_free (req->member);
      g_free (req->request_id);
      req->board = g_strdup (board);
      req->member = g_strdup (member);
      req->request_id
          = g_strdup_printf ("%016" G_GINT64_MODIFIER "x-%d-%" G_GUINT64_FORMAT,
                             w->o->nonce, w->id, w->counter++);
      req->value = g_rand_int_range (w->rand, 0, 1000000000);
      req->mode = w->update_mode;
      req->__isset_mode = TRUE;
    }
}

/* An UpdateBatch of --batch updates. */
static gboolean
send_batch (Worker *w, const char *board, GError **error)
{
  fill_batch (w, board);
  return rank_ranking_client_send_update_batch (rank_client_iface (w->client),
                                                w->batch_req, error);
}

/* An Enqueue of the same (batch_req's requests, lent). */
static gboolean
send_enqueue (Worker *w, const char *board, GError **error)
{
  GPtrArray *own = w->enqueue_req->requests;
  gboolean ok;

  fill_batch (w, board);
  w->enqueue_req->requests = w->batch_req->requests;
  ok = rank_ranking_client_send_enqueue (rank_client_iface (w->client),
                                         w->enqueue_req, error);
  w->enqueue_req->requests = own;
  return ok;
}

/* --window: the read asks for the board's rolling window (field window,
 * IDL 1.8). Left unset otherwise, so the request is what an older client
 * sends. */
static void
read_window (Worker *w, gpointer req)
{
  if (w->o->window)
    g_object_set (req, "window", TRUE, NULL);
}

/* Sends one call to rankd: corked (pipelined) it waits in the transport
 * until the batch is sent. */
static gboolean
rankd_send (Worker *w, int op, const char *board, const char *member,
            gint64 score)
{
  rankRankingIf *iface = rank_client_iface (w->client);
  GError *error = NULL;
  gboolean ok;

  switch (op)
    {
    case OP_UPDATE:
      {
        char rid[64];
        rankUpdateRequest *req = w->req;

        g_snprintf (rid, sizeof rid,
                    "%016" G_GINT64_MODIFIER "x-%d-%" G_GUINT64_FORMAT,
                    w->o->nonce, w->id, w->counter++);
        /* Borrowed strings, handed back before the request is freed. */
        req->board = (char *) board;
        req->member = (char *) member;
        req->request_id = rid;
        req->value = score;
        req->mode = w->update_mode;
        req->__isset_mode = TRUE;
        ok = rank_ranking_client_send_update (iface, req, &error);
        req->board = req->member = req->request_id = NULL;
        break;
      }
    case OP_BATCH:
      ok = send_batch (w, board, &error);
      break;
    case OP_ENQUEUE:
      ok = send_enqueue (w, board, &error);
      break;
    case OP_RANK:
      {
        g_autoptr (rankGetRankRequest) req = g_object_new (
            RANK_TYPE_GET_RANK_REQUEST, "board", board, "member", member, NULL);

        read_window (w, req);
        ok = rank_ranking_client_send_get_rank (iface, req, &error);
        break;
      }
    case OP_AROUND:
      {
        g_autoptr (rankGetAroundRequest) req
            = g_object_new (RANK_TYPE_GET_AROUND_REQUEST, "board", board,
                            "member", member, "radius", 5, NULL);

        read_window (w, req);
        ok = rank_ranking_client_send_get_around (iface, req, &error);
        break;
      }
    case OP_PERCENTILE:
      {
        g_autoptr (rankGetPercentileRequest) req
            = g_object_new (RANK_TYPE_GET_PERCENTILE_REQUEST, "board", board,
                            "member", member, NULL);

        read_window (w, req);
        ok = rank_ranking_client_send_get_percentile (iface, req, &error);
        break;
      }
    case OP_RANKS:
      {
        g_autoptr (rankGetRanksRequest) req
            = g_object_new (RANK_TYPE_GET_RANKS_REQUEST, "board", board, NULL);

        for (int i = 0; i < 10; i++)
          g_ptr_array_add (
              req->members,
              g_strdup_printf ("m%d",
                               g_rand_int_range (w->rand, 0, w->o->members)));
        read_window (w, req);
        ok = rank_ranking_client_send_get_ranks (iface, req, &error);
        break;
      }
    default:
      {
        g_autoptr (rankGetTopNRequest) req
            = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", board, "n",
                            w->o->top_n, NULL);

        read_window (w, req);
        ok = rank_ranking_client_send_get_top_n (iface, req, &error);
        break;
      }
    }
  if (!ok)
    note_error (w, error ? error->message : "?");
  g_clear_error (&error);
  return ok;
}

/* A GetTopN reply read in place (topreader.h): the same checks without
 * an object per entry. */
static gboolean
recv_top_lean (Worker *w)
{
  RankClientTransport *t = rank_client_get_transport (w->client);
  GError *error = NULL;
  const guint8 *bytes;
  gsize len = 0, entries;
  char *why = NULL;
  gboolean ok;

  if (!rank_client_transport_begin_message (t, &error))
    {
      note_error (w, error->message);
      g_error_free (error);
      return FALSE;
    }
  bytes = rank_client_transport_message (t, &len);
  ok = rank_bench_read_top (bytes, len, &entries, &why);
  rank_client_transport_end_message (t);
  if (ok && entries > (gsize) w->o->top_n)
    {
      why = g_strdup_printf ("GetTopN(%d) answered %" G_GSIZE_FORMAT " entries",
                             w->o->top_n, entries);
      ok = FALSE;
    }
  if (!ok)
    note_error (w, why);
  g_free (why);
  return ok;
}

/* Reads the reply to a call of op. NotFound is an answer (a member not
 * loaded yet), not a failure; other failures are noted. */
static gboolean
rankd_recv (Worker *w, int op)
{
  rankRankingIf *iface = rank_client_iface (w->client);
  rankInvalidArgument *invalid = NULL;
  rankPermissionDenied *denied = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  GError *error = NULL;
  gboolean ok;

  switch (op)
    {
    case OP_UPDATE:
      ok = rank_ranking_client_recv_update (iface, &w->resp, &invalid,
                                            &unavailable, &denied, &error);
      break;
    case OP_BATCH:
      g_ptr_array_set_size (w->batch_resp->results, 0);
      ok = rank_ranking_client_recv_update_batch (iface, &w->batch_resp,
                                                  &invalid, &denied, &error);
      for (guint i = 0; ok && i < w->batch_resp->results->len; i++)
        {
          rankUpdateResult *r = w->batch_resp->results->pdata[i];

          if (!r->__isset_response)
            {
              note_error (w, r->__isset_invalid ? r->invalid->message
                             : r->__isset_unavailable
                                 ? r->unavailable->message
                                 : "an UpdateResult without a field set");
              ok = FALSE;
            }
        }
      break;
    case OP_ENQUEUE:
      g_ptr_array_set_size (w->enqueue_resp->results, 0);
      ok = rank_ranking_client_recv_enqueue (iface, &w->enqueue_resp, &invalid,
                                             &unavailable, &denied, &error);
      for (guint i = 0; ok && i < w->enqueue_resp->results->len; i++)
        {
          rankEnqueueResult *r = w->enqueue_resp->results->pdata[i];

          if (!r->__isset_id)
            {
              note_error (w, r->__isset_invalid
                                 ? r->invalid->message
                                 : "an EnqueueResult without a field set");
              ok = FALSE;
            }
        }
      break;
    case OP_RANK:
      ok = rank_ranking_client_recv_get_rank (iface, &w->entry, &invalid,
                                              &not_found, &unavailable, &denied,
                                              &error);
      break;
    case OP_AROUND:
      g_ptr_array_set_size (w->page, 0);
      ok = rank_ranking_client_recv_get_around (
          iface, &w->page, &invalid, &not_found, &unavailable, &denied, &error);
      break;
    case OP_PERCENTILE:
      {
        gdouble pct = 0;

        ok = rank_ranking_client_recv_get_percentile (
            iface, &pct, &invalid, &not_found, &unavailable, &denied, &error);
        break;
      }
    case OP_RANKS:
      g_ptr_array_set_size (w->page, 0);
      ok = rank_ranking_client_recv_get_ranks (iface, &w->page, &invalid,
                                               &unavailable, &denied, &error);
      break;
    default:
      if (w->o->lean_top)
        return recv_top_lean (w);
      g_ptr_array_set_size (w->page, 0);
      ok = rank_ranking_client_recv_get_top_n (iface, &w->page, &invalid,
                                               &unavailable, &denied, &error);
      break;
    }
  if (not_found != NULL)
    ok = TRUE;
  if (!ok)
    {
      GObject *x = invalid ? G_OBJECT (invalid) : G_OBJECT (unavailable);
      char *msg = NULL;

      if (x != NULL)
        g_object_get (x, "message", &msg, NULL);
      note_error (w, msg ? msg : error ? error->message : "?");
      g_free (msg);
    }
  g_clear_object (&invalid);
  g_clear_object (&not_found);
  g_clear_object (&unavailable);
  g_clear_error (&error);
  return ok;
}

static gboolean
redis_ok (Worker *w, redisReply *r)
{
  gboolean ok = r != NULL && r->type != REDIS_REPLY_ERROR;

  if (!ok)
    note_error (w, r ? r->str : w->redis->errstr);
  if (r != NULL)
    freeReplyObject (r);
  return ok;
}

/* The update a hand-written service would send: rankd's own script, with
 * the arguments rankd gives it (rank_store_update_command), on keys of the
 * same layout under "direct-<board>". */
static void
direct_update_append (Worker *w, const char *board, const char *member,
                      gint64 score, int mode)
{
  g_autofree char *name = g_strdup_printf ("direct-%s", board);
  char rid[64];
  RankContext ctx;
  RankUpdate update = { 0 };
  RankCommand head, item;
  const char *argv[2 * RANK_COMMAND_MAX_ARGS + 3];
  size_t argvlen[2 * RANK_COMMAND_MAX_ARGS + 3];
  char numkeys[8];
  int argc;

  /* A unique request id per update. */
  g_snprintf (rid, sizeof rid, "%" G_GINT64_MODIFIER "x-%d-%" G_GUINT64_FORMAT,
              w->o->nonce, w->id, w->counter++);
  rank_context_init (&ctx, w->o->defaults, name, g_get_real_time () / 1000,
                     g_get_monotonic_time (), 3600000);
  rank_context_write (&ctx, ctx.now_ms, NULL);
  update.member = member;
  update.request_id = rid;
  update.value = score;
  update.mode = (RankMode) mode;
  update.timestamp_ms = ctx.now_ms;
  rank_store_update_command (&ctx, &update, 1, &head, &item);
  g_snprintf (numkeys, sizeof numkeys, "%d", head.nkeys);
  argv[0] = "FCALL", argvlen[0] = 5;
  argv[1] = rank_lua_update_function;
  argvlen[1] = strlen (rank_lua_update_function);
  argv[2] = numkeys, argvlen[2] = strlen (numkeys);
  argc = 3;
  argc += rank_command_argv (&head, argv + argc, argvlen + argc);
  argc += rank_command_argv (&item, argv + argc, argvlen + argc);
  redisAppendCommandArgv (w->redis, argc, argv, argvlen);
  rank_command_clear (&item);
  rank_command_clear (&head);
  rank_context_clear (&ctx);
}

static gboolean
direct_update (Worker *w, const char *board, const char *member, gint64 score)
{
  redisReply *r = NULL;

  direct_update_append (w, board, member, score, RANK_UPDATE_MODE_BEST);
  if (redisGetReply (w->redis, (void **) &r) != REDIS_OK)
    r = NULL;
  return redis_ok (w, r);
}

static gboolean
direct_rank (Worker *w, const char *board, const char *member)
{
  redisReply *rank
      = redisCommand (w->redis, "ZREVRANK direct:{%s} %s", board, member);

  if (!redis_ok (w, rank))
    return FALSE;
  return redis_ok (
      w, redisCommand (w->redis, "ZSCORE direct:{%s} %s", board, member));
}

static gboolean
direct_top (Worker *w, const char *board)
{
  return redis_ok (w, redisCommand (w->redis,
                                    "ZREVRANGE direct:{%s} 0 %d WITHSCORES",
                                    board, w->o->top_n - 1));
}

static int
pick_op (Worker *w)
{
  int total = 0;
  int x;

  for (int op = 0; op < N_OPS; op++)
    total += w->o->weights[op];
  x = g_rand_int_range (w->rand, 0, total);

  for (int op = 0; op < N_OPS; op++)
    {
      if (x < w->o->weights[op])
        return op;
      x -= w->o->weights[op];
    }
  return OP_UPDATE;
}

/* One operation on a random board and member; against rankd, corked (a
 * pipelined batch) it is only sent: rankd_recv reads its reply. */
static gboolean
start_op (Worker *w, int op)
{
  char board[128], member[32];
  gint64 score = g_rand_int_range (w->rand, 0, 1000000000);

  board_name (w->o, g_rand_int_range (w->rand, 0, w->o->boards), board,
              sizeof board);
  g_snprintf (member, sizeof member, "m%d",
              g_rand_int_range (w->rand, 0, w->o->members));
  if (w->o->direct == NULL)
    return rankd_send (w, op, board, member, score);
  switch (op)
    {
    case OP_UPDATE:
      return direct_update (w, board, member, score);
    case OP_RANK:
      return direct_rank (w, board, member);
    default:
      return direct_top (w, board);
    }
}

/* ---- workers ---- */

static gboolean
worker_connect (Worker *w, GError **error)
{
  if (w->o->direct != NULL)
    {
      w->redis = redisConnect (w->o->direct_host, w->o->direct_port);
      if (w->redis == NULL || w->redis->err)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                       "cannot connect to Redis at %s: %s", w->o->direct,
                       w->redis ? w->redis->errstr : "out of memory");
          return FALSE;
        }
      return TRUE;
    }
  w->update_mode = w->o->update_mode;
  w->client = rank_client_connect_tls (
      w->o->host, (guint16) w->o->port, w->o->framed, w->o->kind, 30000,
      w->o->tls_context, w->o->tls_server_name, error);
  w->req = g_object_new (RANK_TYPE_UPDATE_REQUEST, NULL);
  w->resp = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
  w->entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  w->page = g_ptr_array_new_with_free_func (g_object_unref);
  w->batch_resp = g_object_new (RANK_TYPE_UPDATE_BATCH_RESPONSE, NULL);
  w->enqueue_req = g_object_new (RANK_TYPE_ENQUEUE_REQUEST, NULL);
  w->enqueue_resp = g_object_new (RANK_TYPE_ENQUEUE_RESPONSE, NULL);
  w->batch_req = g_object_new (RANK_TYPE_UPDATE_BATCH_REQUEST, NULL);
  for (int i = 0; i < w->o->batch; i++)
    g_ptr_array_add (w->batch_req->requests,
                     g_object_new (RANK_TYPE_UPDATE_REQUEST, NULL));
  if (w->o->without_rank)
    {
      w->req->with_rank = w->batch_req->with_rank = FALSE;
      w->req->__isset_with_rank = w->batch_req->__isset_with_rank = TRUE;
    }
  return w->client != NULL;
}

static void
record (Worker *w, int op, gint64 start, gboolean ok)
{
  gint64 took = g_get_monotonic_time () - start;

  if (g_atomic_int_get (&phase) != 1)
    return;
  rank_histogram_record (&w->stats.hist[op], (guint64) took * 1000);
  if (w->samples != NULL)
    {
      /* A request that began in the warm-up counts from 0. */
      RankSample s
          = { (guint32) (MAX (start - measure_started, 0) / 1000),
              (guint32) MIN (took, (gint64) G_MAXUINT32), (guint8) op };

      g_array_append_val (w->samples, s);
    }
  if (!ok)
    w->stats.errors[op]++;
}

/* Closed loop: a batch of --pipeline calls (1 unless pipelining) is sent
 * in one write; each call's latency runs from then to its reply. */
static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  int depth = w->o->pipeline;
  RankClientTransport *t
      = w->client ? rank_client_get_transport (w->client) : NULL;
  /* --rate: this worker's share, as calls at fixed times (an open loop:
   * a call that is late does not push the next ones back). The times start
   * again when the measured interval does: calls that fell behind while
   * warming up are not sent at once inside it, which would measure more
   * than the rate asked. */
  gint64 paced_from = g_get_monotonic_time (), paced = 0;
  int paced_phase = g_atomic_int_get (&phase);
  double interval_us
      = w->o->rate > 0 ? 1e6 * w->o->connections / w->o->rate : 0;

  while (g_atomic_int_get (&phase) < 2)
    {
      int ops[RANK_BENCH_MAX_PIPELINE];
      gboolean sent[RANK_BENCH_MAX_PIPELINE];
      gboolean all_sent = TRUE;
      int n;
      gint64 start;

      for (n = 0; n < depth; n++)
        {
          if (w->o->requests > 0 && g_atomic_int_get (&phase) == 1
              && __atomic_sub_fetch (&requests_left, 1, __ATOMIC_RELAXED) < 0)
            break;
          ops[n] = pick_op (w);
        }
      if (n == 0)
        break;
      if (interval_us > 0)
        {
          gint64 now = g_get_monotonic_time ();
          gint64 due;

          if (g_atomic_int_get (&phase) != paced_phase)
            {
              paced_phase = g_atomic_int_get (&phase);
              paced_from = now, paced = 0;
            }
          due = paced_from + (gint64) (interval_us * (double) paced);
          paced += n;
          if (due > now)
            g_usleep ((gulong) (due - now)); /* pacing the load, by design */
        }
      start = g_get_monotonic_time ();
      if (w->o->direct != NULL)
        {
          record (w, ops[0], start, start_op (w, ops[0]));
          continue;
        }
      if (depth > 1)
        rank_client_transport_cork (t);
      for (int i = 0; i < n; i++)
        all_sent &= sent[i] = start_op (w, ops[i]);
      if (depth > 1)
        {
          g_autoptr (GError) error = NULL;

          if (!rank_client_transport_uncork (t, &error))
            {
              note_error (w, error->message);
              all_sent = FALSE;
            }
        }
      /* A call that was not sent has no reply, and the stream is lost. */
      for (int i = 0; i < n; i++)
        record (w, ops[i], start,
                all_sent && sent[i] && rankd_recv (w, ops[i]));
    }
  return NULL;
}

/* Preload: SET every member to a random score, from all connections. */
static gpointer
preload_main (gpointer data)
{
  Worker *w = data;
  const int batch = 500;

  for (int b = 0; b < w->o->boards; b++)
    {
      char board[128];

      board_name (w->o, b, board, sizeof board);
      for (int i = w->first; i < w->last; i += batch)
        {
          int end = MIN (i + batch, w->last);

          for (int m = i; m < end; m++)
            {
              char member[32];
              gint64 score = g_rand_int_range (w->rand, 0, 1000000000);

              g_snprintf (member, sizeof member, "m%d", m);
              if (w->o->direct == NULL)
                {
                  w->update_mode = RANK_UPDATE_MODE_SET;
                  if (!rankd_send (w, OP_UPDATE, board, member, score)
                      || !rankd_recv (w, OP_UPDATE))
                    w->stats.errors[OP_UPDATE]++;
                  continue;
                }
              direct_update_append (w, board, member, score,
                                    RANK_UPDATE_MODE_SET);
              redisAppendCommand (w->redis, "ZADD direct:{%s} %lld %s", board,
                                  (long long) score, member);
            }
          if (w->o->direct != NULL)
            for (int m = i; m < end; m++)
              for (int k = 0; k < 2; k++)
                {
                  redisReply *r = NULL;

                  if (redisGetReply (w->redis, (void **) &r) != REDIS_OK)
                    r = NULL;
                  if (!redis_ok (w, r))
                    w->stats.errors[OP_UPDATE]++;
                }
          g_atomic_int_add (&preloaded, end - i);
        }
    }
  /* The load after it sends --mode's updates, not SETs. */
  w->update_mode = w->o->update_mode;
  return NULL;
}

static void
progress (const Options *o, gint64 started)
{
  int total = o->members * o->boards;
  int done = g_atomic_int_get (&preloaded);
  double secs = (double) (g_get_monotonic_time () - started) / 1e6;
  int width = 40,
      filled = total ? (int) ((gint64) width * done / total) : width;

  fprintf (stderr, "\rpreload [%.*s%*s] %3d%% %d/%d %.0f/s ", filled,
           "########################################", width - filled, "",
           total ? (int) (100LL * done / total) : 100, done, total,
           secs > 0 ? done / secs : 0.0);
}

/* ---- options ---- */

static gboolean
parse_mix (Options *o, GError **error)
{
  g_auto (GStrv) parts = g_strsplit (o->mix, ",", -1);

  memset (o->weights, 0, sizeof o->weights);
  for (char **p = parts; *p; p++)
    {
      g_auto (GStrv) kv = g_strsplit (*p, "=", 2);
      int op;

      for (op = 0; op < N_OPS; op++)
        if (kv[0] && g_str_equal (g_strstrip (kv[0]), op_names[op]))
          break;
      if (op == N_OPS || kv[1] == NULL || atoi (kv[1]) < 0)
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       "--mix: '%s' is not OP=WEIGHT with OP update, rank, "
                       "top, around, ranks, batch, enqueue or percentile",
                       *p);
          return FALSE;
        }
      o->weights[op] = atoi (kv[1]);
    }
  if (o->direct != NULL
      && (o->weights[OP_AROUND] || o->weights[OP_RANKS] || o->weights[OP_BATCH]
          || o->weights[OP_ENQUEUE] || o->weights[OP_PERCENTILE]))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--mix: --direct runs update, rank and top only");
      return FALSE;
    }
  if (o->weights[OP_UPDATE] + o->weights[OP_RANK] + o->weights[OP_TOP]
          + o->weights[OP_AROUND] + o->weights[OP_RANKS] + o->weights[OP_BATCH]
          + o->weights[OP_ENQUEUE] + o->weights[OP_PERCENTILE]
      <= 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--mix: weights add up to 0");
      return FALSE;
    }
  return TRUE;
}

/* --tls and its files: the context every connection shares. */
static gboolean
tls_options (Options *o, GError **error)
{
  RankTlsFiles files = {
    .ca_file = o->tls_ca,
    .cert_file = o->tls_cert,
    .key_file = o->tls_key,
  };

  o->tls = o->tls || o->tls_ca != NULL || o->tls_cert != NULL
           || o->tls_key != NULL || o->tls_server_name != NULL;
  if (!o->tls)
    return TRUE;
  if (o->direct != NULL)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--tls: only against rankd (the direct baseline speaks "
                   "plain Redis)");
      return FALSE;
    }
  if ((o->tls_cert == NULL) != (o->tls_key == NULL))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "%s needs %s too", o->tls_cert ? "--tls-cert" : "--tls-key",
                   o->tls_cert ? "--tls-key" : "--tls-cert");
      return FALSE;
    }
  o->tls_context = rank_tls_client_context_new (&files, error);
  if (o->tls_context == NULL)
    {
      g_prefix_error (error, "--tls: ");
      return FALSE;
    }
  return TRUE;
}

static gboolean
parse_options (int *argc, char ***argv, Options *o, GError **error)
{
  GOptionEntry entries[] = {
    { "host", 'h', 0, G_OPTION_ARG_STRING, &o->host, "rankd host (127.0.0.1)",
      "HOST" },
    { "port", 'p', 0, G_OPTION_ARG_INT, &o->port, "rankd port (9090)", "PORT" },
    { "direct", 0, 0, G_OPTION_ARG_STRING, &o->direct,
      "Run against Redis directly (the hand-written baseline)", "HOST:PORT" },
    { "connections", 'c', 0, G_OPTION_ARG_INT, &o->connections,
      "Connections, one thread each (64)", "N" },
    { "duration", 'd', 0, G_OPTION_ARG_DOUBLE, &o->duration,
      "Seconds to measure (10)", "S" },
    { "requests", 'n', 0, G_OPTION_ARG_INT64, &o->requests,
      "Stop after this many measured requests instead", "N" },
    { "warmup", 'w', 0, G_OPTION_ARG_DOUBLE, &o->warmup,
      "Seconds of load before measuring (2)", "S" },
    { "mix", 'm', 0, G_OPTION_ARG_STRING, &o->mix,
      "Operation weights of update, rank, top, around (GetAround, radius 5) "
      "and ranks (GetRanks of 10), batch (UpdateBatch of --batch) and "
      "enqueue (Enqueue of --batch), percentile (GetPercentile of a member) "
      "(update=80,rank=10,top=10)",
      "OP=W,..." },
    { "members", 0, 0, G_OPTION_ARG_INT, &o->members,
      "Member population per board (1000000)", "N" },
    { "boards", 'b', 0, G_OPTION_ARG_INT, &o->boards, "Boards (1)", "N" },
    { "board-prefix", 0, 0, G_OPTION_ARG_STRING, &o->board_prefix,
      "Board names are PREFIX-0, PREFIX-1, ... (bench)", "PREFIX" },
    { "preload", 0, 0, G_OPTION_ARG_NONE, &o->preload,
      "Give every member a score first", NULL },
    { "preload-only", 0, 0, G_OPTION_ARG_NONE, &o->preload_only,
      "Preload, then exit", NULL },
    { "transport", 't', 0, G_OPTION_ARG_STRING, &o->transport,
      "framed (default) or buffered, as rankd runs", "T" },
    { "protocol", 'P', 0, G_OPTION_ARG_STRING, &o->protocol,
      "binary (default) or compact, as rankd runs", "P" },
    { "top-n", 0, 0, G_OPTION_ARG_INT, &o->top_n, "GetTopN size (10)", "N" },
    { "reader", 0, 0, G_OPTION_ARG_STRING, &o->reader,
      "GetTopN replies: lean (default; read in place, no object per entry; "
      "framed binary only) or generated (the c_glib client's)",
      "R" },
    { "pipeline", 0, 0, G_OPTION_ARG_INT, &o->pipeline,
      "Calls in flight per connection, sent together (1; up to 64; not with "
      "--direct)",
      "K" },
    { "batch", 0, 0, G_OPTION_ARG_INT, &o->batch,
      "Updates per UpdateBatch call of the batch operation (100; up to 1000)",
      "N" },
    { "without-rank", 0, 0, G_OPTION_ARG_NONE, &o->without_rank,
      "Update and UpdateBatch with with_rank=false: no rank answered", NULL },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &o->mode,
      "Mode of the update and batch operations: increment, best (default) "
      "or set (the preload always SETs)",
      "M" },
    { "window", 0, 0, G_OPTION_ARG_NONE, &o->window,
      "Reads (rank, top, around, ranks, percentile) of the boards' rolling "
      "windows (window=true; boards with window=N)",
      NULL },
    { "rate", 0, 0, G_OPTION_ARG_DOUBLE, &o->rate,
      "Calls per second in all, at most (0: as fast as answered)", "R" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Print JSON", NULL },
    { "cpu", 0, 0, G_OPTION_ARG_STRING, &o->cpu,
      "Also report the CPU time per operation of these processes over the "
      "measured interval (rank-bench's own is always reported, as client)",
      "NAME=PID,..." },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &o->seed, "Random seed (1)", "N" },
    { "tls", 0, 0, G_OPTION_ARG_NONE, &o->tls,
      "Speak TLS to rankd (implied by the --tls-* options; not with --direct)",
      NULL },
    { "tls-ca", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_ca,
      "CAs (PEM) rankd's certificate must chain to (the system's)", "FILE" },
    { "tls-cert", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_cert,
      "The client's certificate (PEM), for mutual TLS", "FILE" },
    { "tls-key", 0, 0, G_OPTION_ARG_FILENAME, &o->tls_key,
      "Its private key (PEM)", "FILE" },
    { "tls-server-name", 0, 0, G_OPTION_ARG_STRING, &o->tls_server_name,
      "The name (or IP) rankd's certificate must carry (--host)", "NAME" },
    { "timeline", 0, 0, G_OPTION_ARG_FILENAME, &o->timeline,
      "Write per-second latency percentiles per operation (TSV)", "FILE" },
    { "plot", 0, 0, G_OPTION_ARG_FILENAME, &o->plot,
      "Draw them over time with gnuplot (PNG; the TSV goes to FILE.tsv "
      "unless --timeline says where)",
      "FILE" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx
      = g_option_context_new ("- load generator for rankd");

  g_option_context_set_help_enabled (ctx, TRUE);
  g_option_context_set_description (
      ctx, "Examples:\n"
           "  rank-bench --preload --members 100000 -c 64 -d 10\n"
           "  rank-bench --mix rank=1 -c 64 -d 10 --json\n"
           "  rank-bench --port 9443 --tls-ca ca.pem --tls-cert bench.pem "
           "--tls-key bench.key\n"
           "  rank-bench --direct 127.0.0.1:6379 --preload --mix update=1\n"
           "  rank-bench --mix update=80,rank=20 -d 600 --plot latency.png\n");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, argc, argv, error))
    return FALSE;
  if (o->preload_only)
    o->preload = TRUE;
  if (o->plot != NULL && o->timeline == NULL)
    o->timeline = g_strconcat (o->plot, ".tsv", NULL);
  if (o->plot != NULL)
    {
      /* Before the run, not after ten minutes of it. */
      g_autofree char *gnuplot = g_find_program_in_path ("gnuplot");

      if (gnuplot == NULL)
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED,
                       "--plot: gnuplot is not on PATH (Debian: apt-get "
                       "install gnuplot-nox)");
          return FALSE;
        }
    }
  if (o->host == NULL)
    o->host = g_strdup ("127.0.0.1");
  if (o->mix == NULL)
    o->mix = g_strdup ("update=80,rank=10,top=10");
  if (o->board_prefix == NULL)
    o->board_prefix = g_strdup ("bench");
  if (o->protocol == NULL)
    o->protocol = g_strdup ("binary");
  if (!parse_mix (o, error))
    return FALSE;
  if (o->mode == NULL || g_str_equal (o->mode, "best"))
    o->update_mode = RANK_UPDATE_MODE_BEST;
  else if (g_str_equal (o->mode, "increment"))
    o->update_mode = RANK_UPDATE_MODE_INCREMENT;
  else if (g_str_equal (o->mode, "set"))
    o->update_mode = RANK_UPDATE_MODE_SET;
  else
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--mode: increment, best or set");
      return FALSE;
    }
  if (o->direct != NULL
      && (o->window || o->update_mode != RANK_UPDATE_MODE_BEST))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--window and --mode: against rankd only");
      return FALSE;
    }
  o->cpu_watch = rank_cpu_watch_new (o->cpu, error);
  if (o->cpu_watch == NULL)
    return FALSE;
  if (o->connections < 1 || o->members < 1 || o->boards < 1 || o->top_n < 1
      || o->duration <= 0 || o->warmup < 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--connections, --members, --boards, --top-n and "
                   "--duration must be positive");
      return FALSE;
    }
  if (o->batch == 0)
    o->batch = 100;
  if (o->batch < 1 || o->batch > RANK_BENCH_MAX_BATCH)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--batch: 1..%d", RANK_BENCH_MAX_BATCH);
      return FALSE;
    }
  if (o->pipeline == 0)
    o->pipeline = 1;
  if (o->pipeline < 1 || o->pipeline > RANK_BENCH_MAX_PIPELINE
      || (o->pipeline > 1 && o->direct != NULL))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--pipeline: 1..%d, and only against rankd (the direct "
                   "baseline does not pipeline)",
                   RANK_BENCH_MAX_PIPELINE);
      return FALSE;
    }
  o->framed = g_strcmp0 (o->transport, "buffered") != 0;
  if (!rank_protocol_kind_parse (o->protocol, &o->kind))
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--protocol: binary or compact");
      return FALSE;
    }
  if (o->reader != NULL && g_strcmp0 (o->reader, "lean") != 0
      && g_strcmp0 (o->reader, "generated") != 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--reader: lean or generated");
      return FALSE;
    }
  /* The lean reader knows the binary protocol in frames only. */
  o->lean_top = g_strcmp0 (o->reader, "generated") != 0 && o->framed
                && o->kind == RANK_PROTOCOL_BINARY;
  if (o->direct != NULL)
    {
      const char *colon = strrchr (o->direct, ':');

      if (colon == NULL)
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       "--direct: HOST:PORT");
          return FALSE;
        }
      o->direct_host = g_strndup (o->direct, (gsize) (colon - o->direct));
      o->direct_port = atoi (colon + 1);
    }
  return tls_options (o, error);
}

/* ---- main ---- */

static gboolean
load_script (Options *o, GError **error)
{
  redisContext *c = redisConnect (o->direct_host, o->direct_port);
  redisReply *r;

  if (c == NULL || c->err)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                   "cannot connect to Redis at %s", o->direct);
      if (c)
        redisFree (c);
      return FALSE;
    }
  /* Loaded unless Redis has it (a rankd on the same Redis loads it too). */
  r = redisCommand (c, "FUNCTION LOAD %s", rank_lua_update);
  if (r == NULL
      || (r->type != REDIS_REPLY_STRING
          && (r->type != REDIS_REPLY_ERROR
              || strstr (r->str, "already exists") == NULL)))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                   "FUNCTION LOAD failed: %s",
                   r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "?");
      if (r)
        freeReplyObject (r);
      redisFree (c);
      return FALSE;
    }
  freeReplyObject (r);
  redisFree (c);
  return TRUE;
}

static void
report (const Options *o, Worker *workers, double seconds)
{
  Stats total = { 0 };
  const char *target = o->direct ? "direct" : o->tls ? "rankd-tls" : "rankd";
  g_autoptr (GString) cpu = g_string_new (NULL);
  guint64 ops = 0;

  for (int i = 0; i < o->connections; i++)
    for (int op = 0; op < N_OPS; op++)
      {
        rank_histogram_merge (&total.hist[op], &workers[i].stats.hist[op]);
        total.errors[op] += workers[i].stats.errors[op];
      }
  /* CPU per operation: an UpdateBatch call counts as its updates. */
  for (int op = 0; op < N_OPS; op++)
    ops += total.hist[op].total
           * (guint64) (op == OP_BATCH || op == OP_ENQUEUE ? o->batch : 1);
  if (o->json)
    {
      gboolean first = TRUE;

      printf ("{\"target\":\"%s\",\"connections\":%d,\"pipeline\":%d,"
              "\"batch\":%d,\"duration_s\":%.3f,\"ops\":{",
              target, o->connections, o->pipeline, o->batch, seconds);
      for (int op = 0; op < N_OPS; op++)
        {
          const RankHistogram *h = &total.hist[op];

          if (h->total == 0)
            continue;
          printf ("%s\"%s\":{\"count\":%" G_GUINT64_FORMAT
                  ",\"errors\":%" G_GUINT64_FORMAT
                  ",\"ops_per_sec\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
                  "\"p999_us\":%.1f,\"max_us\":%.1f}",
                  first ? "" : ",", op_names[op], h->total, total.errors[op],
                  (double) h->total / seconds,
                  rank_histogram_quantile (h, 0.5) / 1e3,
                  rank_histogram_quantile (h, 0.99) / 1e3,
                  rank_histogram_quantile (h, 0.999) / 1e3, h->max / 1e3);
          first = FALSE;
        }
      rank_cpu_watch_json (o->cpu_watch, ops, cpu);
      printf ("},\"cpu_us_per_op\":{%s}}\n", cpu->str);
    }
  else
    {
      printf ("target %s  connections %d  pipeline %d  measured %.1f s\n",
              target, o->connections, o->pipeline, seconds);
      printf ("%-8s %10s %10s %9s %9s %9s %9s %7s\n", "op", "count", "ops/s",
              "p50 us", "p99 us", "p99.9 us", "max us", "errors");
      for (int op = 0; op < N_OPS; op++)
        {
          const RankHistogram *h = &total.hist[op];

          if (h->total == 0)
            continue;
          printf ("%-8s %10" G_GUINT64_FORMAT " %10.0f %9.0f %9.0f %9.0f "
                  "%9.0f %7" G_GUINT64_FORMAT "\n",
                  op_names[op], h->total, (double) h->total / seconds,
                  rank_histogram_quantile (h, 0.5) / 1e3,
                  rank_histogram_quantile (h, 0.99) / 1e3,
                  rank_histogram_quantile (h, 0.999) / 1e3, h->max / 1e3,
                  total.errors[op]);
        }
      if (total.hist[OP_BATCH].total + total.hist[OP_ENQUEUE].total > 0)
        printf (
            "batch, enqueue: %d updates a call, %.0f updates/s; CPU per "
            "op below is per update\n",
            o->batch,
            (double) (total.hist[OP_BATCH].total + total.hist[OP_ENQUEUE].total)
                * o->batch / seconds);
      rank_cpu_watch_text (o->cpu_watch, ops, cpu);
      fputs (cpu->str, stdout);
    }
  for (int i = 0; i < o->connections; i++)
    if (workers[i].stats.last_error[0])
      {
        fprintf (stderr, "rank-bench: last error: %s\n",
                 workers[i].stats.last_error);
        break;
      }
}

/* Frees everything and returns status, on every way out of main. */
static int
finish (Options *o, Worker *workers, GThread **threads, int status)
{
  for (int i = 0; workers != NULL && i < o->connections; i++)
    {
      if (workers[i].client)
        rank_client_free (workers[i].client);
      g_clear_object (&workers[i].req);
      g_clear_object (&workers[i].resp);
      g_clear_object (&workers[i].entry);
      g_clear_pointer (&workers[i].page, g_ptr_array_unref);
      g_clear_object (&workers[i].batch_req);
      g_clear_object (&workers[i].batch_resp);
      g_clear_object (&workers[i].enqueue_req);
      g_clear_object (&workers[i].enqueue_resp);
      g_clear_pointer (&workers[i].samples, g_array_unref);
      if (workers[i].redis)
        redisFree (workers[i].redis);
      if (workers[i].rand)
        g_rand_free (workers[i].rand);
    }
  g_free (workers);
  g_free (threads);
  g_free (o->host);
  g_free (o->direct);
  g_free (o->direct_host);
  g_free (o->mix);
  g_free (o->mode);
  g_free (o->board_prefix);
  g_free (o->transport);
  g_free (o->protocol);
  g_free (o->reader);
  g_free (o->timeline);
  g_free (o->plot);
  g_free (o->cpu);
  g_free (o->tls_ca);
  g_free (o->tls_cert);
  g_free (o->tls_key);
  g_free (o->tls_server_name);
  rank_tls_context_unref (o->tls_context);
  rank_cpu_watch_free (o->cpu_watch);
  g_clear_pointer (&o->defaults, rank_config_unref);
  return status;
}

int
main (int argc, char **argv)
{
  Options o = { .port = 9090,
                .connections = 64,
                .duration = 10,
                .warmup = 2,
                .members = 1000000,
                .boards = 1,
                .top_n = 10,
                .seed = 1 };
  g_autoptr (GError) error = NULL;
  Worker *workers;
  GThread **threads;
  gint64 started, errors = 0;
  double seconds;

  if (!parse_options (&argc, &argv, &o, &error))
    {
      fprintf (stderr, "rank-bench: %s\n", error->message);
      return finish (&o, NULL, NULL, 2);
    }
  o.nonce = ((guint64) g_random_int () << 32) | g_random_int ();
  o.defaults = rank_config_new ();
  if (o.direct != NULL && !load_script (&o, &error))
    {
      fprintf (stderr, "rank-bench: %s\n", error->message);
      return finish (&o, NULL, NULL, 1);
    }

  workers = g_new0 (Worker, o.connections);
  threads = g_new0 (GThread *, o.connections);
  for (int i = 0; i < o.connections; i++)
    {
      workers[i].o = &o;
      workers[i].id = i;
      workers[i].rand = g_rand_new_with_seed ((guint32) (o.seed * 7919 + i));
      if (o.timeline != NULL)
        workers[i].samples = g_array_new (FALSE, FALSE, sizeof (RankSample));
      if (!worker_connect (&workers[i], &error))
        {
          fprintf (stderr, "rank-bench: %s\n", error->message);
          return finish (&o, workers, threads, 1);
        }
    }

  if (o.preload)
    {
      int per = (o.members + o.connections - 1) / o.connections;

      started = g_get_monotonic_time ();
      for (int i = 0; i < o.connections; i++)
        {
          workers[i].first = MIN (i * per, o.members);
          workers[i].last = MIN ((i + 1) * per, o.members);
          threads[i] = g_thread_new ("preload", preload_main, &workers[i]);
        }
      /* Workers count every member they handled, failed or not. */
      while (g_atomic_int_get (&preloaded) < o.members * o.boards)
        {
          progress (&o, started);
          g_usleep (200 * 1000); /* progress display only */
        }
      for (int i = 0; i < o.connections; i++)
        {
          g_thread_join (threads[i]);
          errors += (gint64) workers[i].stats.errors[OP_UPDATE];
          workers[i].stats.errors[OP_UPDATE] = 0;
        }
      progress (&o, started);
      fprintf (stderr, "\n");
      if (errors > 0)
        {
          fprintf (stderr,
                   "rank-bench: %" G_GINT64_FORMAT
                   " preload errors; last: %s\n",
                   errors, workers[0].stats.last_error);
          return finish (&o, workers, threads, 1);
        }
      if (o.preload_only)
        return finish (&o, workers, threads, 0);
    }

  requests_left = o.requests;
  measure_started = g_get_monotonic_time ();
  g_atomic_int_set (&phase, o.warmup > 0 ? 0 : 1);
  for (int i = 0; i < o.connections; i++)
    threads[i] = g_thread_new ("load", worker_main, &workers[i]);
  if (o.warmup > 0)
    {
      g_usleep ((gulong) (o.warmup * G_USEC_PER_SEC)); /* the warm-up itself */
      measure_started = g_get_monotonic_time ();
      g_atomic_int_set (&phase, 1);
    }
  rank_cpu_watch_start (o.cpu_watch);
  started = g_get_monotonic_time ();
  if (o.requests > 0)
    while (__atomic_load_n (&requests_left, __ATOMIC_RELAXED) > 0)
      g_usleep (1000);
  else
    g_usleep ((gulong) (o.duration * G_USEC_PER_SEC)); /* the measurement */
  seconds = (double) (g_get_monotonic_time () - started) / 1e6;
  g_atomic_int_set (&phase, 2);
  rank_cpu_watch_stop (o.cpu_watch);
  for (int i = 0; i < o.connections; i++)
    g_thread_join (threads[i]);
  report (&o, workers, seconds);
  if (o.timeline != NULL)
    {
      GArray **samples = g_new (GArray *, o.connections);
      g_autofree char *title = g_strdup_printf (
          "rank-bench: %s, %d connections, mix %s",
          o.direct ? "direct" : "rankd", o.connections, o.mix);
      gboolean ok;

      for (int i = 0; i < o.connections; i++)
        samples[i] = workers[i].samples;
      ok = rank_timeline_write (samples, (guint) o.connections, op_names, N_OPS,
                                seconds, o.timeline, o.plot, title, &error);
      g_free (samples);
      if (!ok)
        {
          fprintf (stderr, "rank-bench: timeline: %s\n", error->message);
          return finish (&o, workers, threads, 1);
        }
    }

  for (int i = 0; i < o.connections; i++)
    for (int op = 0; op < N_OPS; op++)
      errors += (gint64) workers[i].stats.errors[op];
  return finish (&o, workers, threads, errors > 0 ? 1 : 0);
}
