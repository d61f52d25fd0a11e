/* metrics.c -- counters and their Prometheus rendering (see metrics.h).
 *
 * A Counter has one writer: it adds with a relaxed load and store (no
 * locked instruction), and a scrape reads it with a relaxed load from its
 * own thread. Histogram buckets are kept per bucket and made cumulative
 * when rendered.
 */
#include "metrics.h"

#include <malloc.h>
#include <stdatomic.h>
#include <string.h>

#include "constants.h"
#include "error.h"

typedef _Atomic guint64 Counter;

/* Call durations: upper bounds of the buckets in microseconds, and as
 * Prometheus writes them (seconds). */
static const gint64 duration_us[]
    = { 100,   250,    500,    1000,   2500,    5000,    10000,   25000,
        50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000 };
static const char *const duration_le[]
    = { "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
        "0.01",   "0.025",   "0.05",   "0.1",   "0.25",   "0.5",
        "1",      "2.5",     "5",      "10" };
#define N_DURATION G_N_ELEMENTS (duration_us)

/* Commands per write to Redis. */
static const guint64 batch_max[]
    = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
#define N_BATCH G_N_ELEMENTS (batch_max)

static const char *const outcome_names[RANK_OUTCOMES]
    = { "ok", "invalid", "not_found", "unavailable", "internal", "denied" };

typedef struct
{
  Counter outcomes[RANK_OUTCOMES];
  Counter buckets[N_DURATION + 1]; /* the last: above every bound */
  Counter sum_us;
} MethodCounters;

struct _RankMetricsCalls
{
  MethodCounters *methods;
};

typedef struct
{
  Counter commands; /* sent, in writes */
  Counter failures; /* failed without a reply */
  Counter batches[N_BATCH + 1];
} LinkCounters;

typedef struct
{
  char *name;
  GPtrArray *links;     /* RankMetricsLink *, alive */
  LinkCounters retired; /* of links already freed */
} Node;

typedef enum
{
  LINK_NEW = 0, /* not started: does not count towards health */
  LINK_DOWN,
  LINK_UP,
} LinkState;

struct _RankMetricsLink
{
  Node *node;
  LinkCounters counters;
  guint pending;     /* queued since the last write; the link's thread */
  _Atomic int state; /* LinkState */
};

/* The registry: everything below is under lock, except the counters, which
 * their owners write at any time. */
static GMutex lock;
static const char *const *method_names;
static guint n_methods;
static GPtrArray *call_blocks;  /* RankMetricsCalls *, alive */
static MethodCounters *retired; /* n_methods, of blocks already freed */
static GHashTable *nodes;       /* name -> Node * */
static GHashTable *queues;      /* board -> QueueMetrics * */

/* A queued board, as this rankd's drain sees it. */
typedef struct
{
  gint64 backlog;
  double oldest_s;
  guint64 applied;
  guint64 dead;
  gint64 touched_us; /* when last drained or read (monotonic) */
} QueueMetrics;

/* The read cache (cache.c, tracking.c): atomic read-modify-write, any
 * thread. */
static Counter cache_hits, cache_misses, cache_evictions;
static Counter cache_dropped_redis, cache_dropped_rankd;
static Counter cache_bytes, cache_entries, tracking_up, tracking_sessions;
static Counter tracked_prefixes, tracked_rotations;
static Counter cache_seen; /* any cache event yet: render them */

/* Reads of boards with read_from=replica (backend.c), by where they went;
 * reads a replica failed and the primary answered. */
static Counter reads_primary, reads_replica, replica_fallbacks;
static GHashTable *replica_lags; /* name -> double *, under lock */

/* ---- refused calls: their own block (see rank_metrics_refused) ---- */
/* Under lock: "method\treason\tidentity" -> guint64 * calls refused, and
 * the identities that have series of their own. Refusals are rare (a
 * misconfigured client, or a probe): a lock per refusal costs nothing the
 * served calls pay. */
static GHashTable *refused;
static GHashTable *refused_identities;

static Counter connections_opened; /* atomic read-modify-write: any thread */
static Counter connections_closed;

/* TLS on the Thrift port: atomic read-modify-write, any thread. */
static Counter tls_seen, tls_opened, tls_closed, tls_handshakes;
static Counter tls_failures[RANK_TLS_FAILURES];

static inline void
add (Counter *c, guint64 by)
{
  atomic_store_explicit (c, atomic_load_explicit (c, memory_order_relaxed) + by,
                         memory_order_relaxed);
}

static inline guint64
peek (Counter *c)
{
  return atomic_load_explicit (c, memory_order_relaxed);
}

/* ---- calls ---- */

RankMetricsCalls *
rank_metrics_calls_new (const char *const *methods, guint n)
{
  RankMetricsCalls *calls = g_new0 (RankMetricsCalls, 1);

  calls->methods = g_new0 (MethodCounters, n);
  g_mutex_lock (&lock);
  if (method_names == NULL)
    {
      method_names = methods;
      n_methods = n;
      retired = g_new0 (MethodCounters, n);
      call_blocks = g_ptr_array_new ();
    }
  g_assert (methods == method_names && n == n_methods);
  g_ptr_array_add (call_blocks, calls);
  g_mutex_unlock (&lock);
  return calls;
}

void
rank_metrics_call_done (RankMetricsCalls *calls, guint method,
                        RankOutcome outcome, gint64 elapsed_us)
{
  MethodCounters *m = &calls->methods[method];
  guint b = 0;

  if (elapsed_us < 0)
    elapsed_us = 0;
  while (b < N_DURATION && elapsed_us > duration_us[b])
    b++;
  add (&m->outcomes[outcome], 1);
  add (&m->buckets[b], 1);
  add (&m->sum_us, (guint64) elapsed_us);
}

static void
fold_method (MethodCounters *into, MethodCounters *from)
{
  for (guint o = 0; o < RANK_OUTCOMES; o++)
    add (&into->outcomes[o], peek (&from->outcomes[o]));
  for (guint b = 0; b <= N_DURATION; b++)
    add (&into->buckets[b], peek (&from->buckets[b]));
  add (&into->sum_us, peek (&from->sum_us));
}

void
rank_metrics_calls_free (RankMetricsCalls *calls)
{
  if (calls == NULL)
    return;
  g_mutex_lock (&lock);
  for (guint i = 0; i < n_methods; i++)
    fold_method (&retired[i], &calls->methods[i]);
  g_ptr_array_remove_fast (call_blocks, calls);
  g_mutex_unlock (&lock);
  g_free (calls->methods);
  g_free (calls);
}

RankOutcome
rank_metrics_outcome (const GError *error)
{
  if (error == NULL)
    return RANK_OUTCOME_OK;
  if (error->domain != RANK_ERROR)
    return RANK_OUTCOME_INTERNAL;
  switch (error->code)
    {
    case RANK_ERROR_INVALID:
      return RANK_OUTCOME_INVALID;
    case RANK_ERROR_NOT_FOUND:
      return RANK_OUTCOME_NOT_FOUND;
    case RANK_ERROR_UNAVAILABLE:
      return RANK_OUTCOME_UNAVAILABLE;
    case RANK_ERROR_DENIED:
      return RANK_OUTCOME_DENIED;
    default:
      return RANK_OUTCOME_INTERNAL;
    }
}

/* ---- connections ---- */

void
rank_metrics_connection_opened (void)
{
  atomic_fetch_add_explicit (&connections_opened, 1, memory_order_relaxed);
}

void
rank_metrics_connection_closed (void)
{
  atomic_fetch_add_explicit (&connections_closed, 1, memory_order_relaxed);
}

/* ---- TLS on the Thrift port ---- */

const char *
rank_metrics_tls_failure_name (RankTlsFailure reason)
{
  static const char *const names[] = {
    [RANK_TLS_FAILURE_PROTOCOL] = "protocol",
    [RANK_TLS_FAILURE_VERSION] = "version",
    [RANK_TLS_FAILURE_CERTIFICATE] = "certificate",
    [RANK_TLS_FAILURE_TIMEOUT] = "timeout",
    [RANK_TLS_FAILURE_RESERVED] = "reserved_identity",
    [RANK_TLS_FAILURE_CLOSED] = "closed",
  };

  G_STATIC_ASSERT (G_N_ELEMENTS (names) == RANK_TLS_FAILURES);
  return names[reason];
}

void
rank_metrics_tls_enabled (void)
{
  atomic_store (&tls_seen, 1);
}

void
rank_metrics_tls_opened (void)
{
  atomic_fetch_add_explicit (&tls_opened, 1, memory_order_relaxed);
}

void
rank_metrics_tls_closed (void)
{
  atomic_fetch_add_explicit (&tls_closed, 1, memory_order_relaxed);
}

void
rank_metrics_tls_handshake_done (void)
{
  atomic_fetch_add_explicit (&tls_handshakes, 1, memory_order_relaxed);
}

void
rank_metrics_tls_handshake_failed (RankTlsFailure reason)
{
  atomic_fetch_add_explicit (&tls_failures[reason], 1, memory_order_relaxed);
}

/* ---- Redis links ---- */

static void
node_free (gpointer data)
{
  Node *node = data;

  g_ptr_array_unref (node->links);
  g_free (node->name);
  g_free (node);
}

RankMetricsLink *
rank_metrics_link_new (const char *name)
{
  RankMetricsLink *link = g_new0 (RankMetricsLink, 1);

  g_mutex_lock (&lock);
  if (nodes == NULL)
    nodes = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, node_free);
  link->node = g_hash_table_lookup (nodes, name);
  if (link->node == NULL)
    {
      link->node = g_new0 (Node, 1);
      link->node->name = g_strdup (name);
      link->node->links = g_ptr_array_new ();
      g_hash_table_insert (nodes, link->node->name, link->node);
    }
  g_ptr_array_add (link->node->links, link);
  g_mutex_unlock (&lock);
  return link;
}

void
rank_metrics_link_queued (RankMetricsLink *link)
{
  link->pending++;
}

void
rank_metrics_link_flushed (RankMetricsLink *link)
{
  guint b = 0;

  if (link->pending == 0)
    return;
  while (b < N_BATCH && link->pending > batch_max[b])
    b++;
  add (&link->counters.batches[b], 1);
  add (&link->counters.commands, link->pending);
  link->pending = 0;
}

void
rank_metrics_link_dropped (RankMetricsLink *link)
{
  link->pending = 0;
}

void
rank_metrics_link_failed (RankMetricsLink *link)
{
  add (&link->counters.failures, 1);
}

void
rank_metrics_link_up (RankMetricsLink *link, gboolean up)
{
  atomic_store (&link->state, up ? LINK_UP : LINK_DOWN);
}

static void
fold_link (LinkCounters *into, LinkCounters *from)
{
  add (&into->commands, peek (&from->commands));
  add (&into->failures, peek (&from->failures));
  for (guint b = 0; b <= N_BATCH; b++)
    add (&into->batches[b], peek (&from->batches[b]));
}

void
rank_metrics_link_free (RankMetricsLink *link)
{
  if (link == NULL)
    return;
  g_mutex_lock (&lock);
  fold_link (&link->node->retired, &link->counters);
  g_ptr_array_remove_fast (link->node->links, link);
  g_mutex_unlock (&lock);
  g_free (link);
}

/* ---- the update queue ---- */

/* Under lock. Any client can name a queued board ([defaults] queue=on),
 * so the series are kept for at most RANK_QUEUE_METRICS_BOARDS_MAX boards:
 * a new board's takes the place of the board drained or read longest ago,
 * an idle one (backlog 0) first. Its counters start again at 0 if it comes
 * back, which Prometheus reads as a counter reset. */
static void
queue_metrics_evict (void)
{
  GHashTableIter it;
  gpointer key, value;
  gpointer oldest = NULL;
  gboolean oldest_idle = FALSE;
  gint64 oldest_us = G_MAXINT64;

  g_hash_table_iter_init (&it, queues);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      const QueueMetrics *m = value;
      gboolean idle = m->backlog == 0;

      if ((idle && !oldest_idle)
          || (idle == oldest_idle && m->touched_us < oldest_us))
        oldest = key, oldest_idle = idle, oldest_us = m->touched_us;
    }
  if (oldest != NULL)
    g_hash_table_remove (queues, oldest);
}

static QueueMetrics *
queue_metrics (const char *board)
{
  QueueMetrics *m;

  if (queues == NULL)
    queues = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  m = g_hash_table_lookup (queues, board);
  if (m == NULL)
    {
      if (g_hash_table_size (queues) >= RANK_QUEUE_METRICS_BOARDS_MAX)
        queue_metrics_evict ();
      m = g_new0 (QueueMetrics, 1);
      g_hash_table_insert (queues, g_strdup (board), m);
    }
  m->touched_us = g_get_monotonic_time ();
  return m;
}

void
rank_metrics_queue_done (const char *board, guint applied, guint dead)
{
  QueueMetrics *m;

  g_mutex_lock (&lock);
  m = queue_metrics (board);
  m->applied += applied;
  m->dead += dead;
  g_mutex_unlock (&lock);
}

void
rank_metrics_queue_status (const char *board, gint64 backlog, double oldest_s)
{
  QueueMetrics *m;

  g_mutex_lock (&lock);
  m = queue_metrics (board);
  m->backlog = backlog;
  m->oldest_s = oldest_s;
  g_mutex_unlock (&lock);
}

/* ---- reading (under lock) ---- */

/* A label value: backslash, double quote and line feed escaped. */
static void
append_label (GString *out, const char *value)
{
  for (const char *p = value; *p != '\0'; p++)
    {
      if (*p == '\\')
        g_string_append (out, "\\\\");
      else if (*p == '"')
        g_string_append (out, "\\\"");
      else if (*p == '\n')
        g_string_append (out, "\\n");
      else
        g_string_append_c (out, *p);
    }
}

static void
append_header (GString *out, const char *name, const char *type,
               const char *help)
{
  g_string_append_printf (out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                          type);
}

/* A method's counters: the retired ones plus every live block's. */
static void
sum_method (guint i, MethodCounters *sum)
{
  memset (sum, 0, sizeof *sum);
  fold_method (sum, &retired[i]);
  for (guint k = 0; k < call_blocks->len; k++)
    fold_method (sum,
                 &((RankMetricsCalls *) call_blocks->pdata[k])->methods[i]);
}

static void
render_calls (GString *out)
{
  g_autofree MethodCounters *sums = g_new0 (MethodCounters, n_methods);

  for (guint i = 0; i < n_methods; i++)
    sum_method (i, &sums[i]);
  append_header (out, "rankd_requests_total", "counter",
                 "Calls answered, by method and outcome.");
  for (guint i = 0; i < n_methods; i++)
    for (guint o = 0; o < RANK_OUTCOMES; o++)
      g_string_append_printf (out,
                              "rankd_requests_total{method=\"%s\",outcome=\"%"
                              "s\"} %" G_GUINT64_FORMAT "\n",
                              method_names[i], outcome_names[o],
                              peek (&sums[i].outcomes[o]));
  append_header (out, "rankd_request_duration_seconds", "histogram",
                 "Time from a call's request decoded to its reply written.");
  for (guint i = 0; i < n_methods; i++)
    {
      guint64 total = 0, sum_us = peek (&sums[i].sum_us);

      for (guint b = 0; b <= N_DURATION; b++)
        {
          total += peek (&sums[i].buckets[b]);
          g_string_append_printf (
              out,
              "rankd_request_duration_seconds_bucket{method=\"%s\",le=\"%s\"} "
              "%" G_GUINT64_FORMAT "\n",
              method_names[i], b < N_DURATION ? duration_le[b] : "+Inf", total);
        }
      g_string_append_printf (
          out,
          "rankd_request_duration_seconds_sum{method=\"%s\"} %" G_GUINT64_FORMAT
          ".%06u\n"
          "rankd_request_duration_seconds_count{method=\"%s\"} "
          "%" G_GUINT64_FORMAT "\n",
          method_names[i], sum_us / G_USEC_PER_SEC,
          (guint) (sum_us % G_USEC_PER_SEC), method_names[i], total);
    }
}

/* ---- the read cache ---- */

static void
cache_add (Counter *c, guint64 by)
{
  atomic_store_explicit (&cache_seen, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (c, by, memory_order_relaxed);
}

void
rank_metrics_cache_read (gboolean hit)
{
  cache_add (hit ? &cache_hits : &cache_misses, 1);
}

void
rank_metrics_cache_dropped (gboolean by_redis)
{
  cache_add (by_redis ? &cache_dropped_redis : &cache_dropped_rankd, 1);
}

void
rank_metrics_cache_evicted (guint n)
{
  cache_add (&cache_evictions, n);
}

void
rank_metrics_cache_size (guint64 bytes, guint64 entries)
{
  atomic_store_explicit (&cache_seen, 1, memory_order_relaxed);
  atomic_store_explicit (&cache_bytes, bytes, memory_order_relaxed);
  atomic_store_explicit (&cache_entries, entries, memory_order_relaxed);
}

void
rank_metrics_tracking (gboolean up)
{
  atomic_store_explicit (&cache_seen, 1, memory_order_relaxed);
  atomic_store_explicit (&tracking_up, up ? 1 : 0, memory_order_relaxed);
  if (up)
    atomic_fetch_add_explicit (&tracking_sessions, 1, memory_order_relaxed);
}

void
rank_metrics_tracked (guint prefixes, gboolean rotated)
{
  atomic_store_explicit (&tracked_prefixes, prefixes, memory_order_relaxed);
  if (rotated)
    atomic_fetch_add_explicit (&tracked_rotations, 1, memory_order_relaxed);
}

void
rank_metrics_read_source (gboolean replica)
{
  atomic_fetch_add_explicit (replica ? &reads_replica : &reads_primary, 1,
                             memory_order_relaxed);
}

void
rank_metrics_replica_fallback (void)
{
  atomic_fetch_add_explicit (&replica_fallbacks, 1, memory_order_relaxed);
}

void
rank_metrics_replica_lag (const char *replica, double seconds)
{
  double *lag;

  g_mutex_lock (&lock);
  if (replica_lags == NULL)
    replica_lags
        = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  lag = g_hash_table_lookup (replica_lags, replica);
  if (lag == NULL)
    {
      lag = g_new (double, 1);
      g_hash_table_insert (replica_lags, g_strdup (replica), lag);
    }
  *lag = seconds;
  g_mutex_unlock (&lock);
}

static void render_counter (GString *out, const char *name, const char *type,
                            const char *help, const char *labels, Counter *c);

/* ---- refused calls ---- */

void
rank_metrics_refused (const char *identity, const char *method,
                      const char *reason)
{
  const char *label = identity != NULL ? identity : "anonymous";
  g_autofree char *key = NULL;
  guint64 *n;

  g_mutex_lock (&lock);
  if (refused == NULL)
    {
      refused = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      refused_identities
          = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
    }
  if (!g_hash_table_contains (refused_identities, label))
    {
      /* Identities come from certificates any client of the CA may hold:
       * bound the series, the rest count together. */
      if (g_hash_table_size (refused_identities) < RANK_METRICS_IDENTITIES_MAX)
        g_hash_table_add (refused_identities, g_strdup (label));
      else
        label = "other";
    }
  key = g_strdup_printf ("%s\t%s\t%s", method, reason, label);
  n = g_hash_table_lookup (refused, key);
  if (n == NULL)
    {
      n = g_new0 (guint64, 1);
      g_hash_table_insert (refused, g_steal_pointer (&key), n);
    }
  (*n)++;
  g_mutex_unlock (&lock);
}

static void
render_refused (GString *out)
{
  g_autoptr (GList) keys = NULL;

  append_header (out, "rankd_calls_refused_total", "counter",
                 "Calls refused with PermissionDenied, by identity "
                 "(anonymous; past 64 identities, other), method and reason "
                 "(no_role, board_not_granted).");
  if (refused == NULL)
    return;
  keys = g_list_sort (g_hash_table_get_keys (refused), (GCompareFunc) strcmp);
  for (GList *k = keys; k != NULL; k = k->next)
    {
      g_auto (GStrv) parts = g_strsplit (k->data, "\t", 3);

      g_string_append (out, "rankd_calls_refused_total{identity=\"");
      append_label (out, parts[2]);
      g_string_append_printf (
          out,
          "\",method=\"%s\",reason=\"%s\"} "
          "%" G_GUINT64_FORMAT "\n",
          parts[0], parts[1],
          *(guint64 *) g_hash_table_lookup (refused, k->data));
    }
}

static void
render_replicas (GString *out)
{
  g_autoptr (GList) names = NULL;

  if (replica_lags == NULL)
    return;
  render_counter (out, "rankd_reads_total", "counter",
                  "Reads of boards with read_from=replica, by where they "
                  "were sent.",
                  "{source=\"primary\"}", &reads_primary);
  render_counter (out, "rankd_reads_total", "counter", NULL,
                  "{source=\"replica\"}", &reads_replica);
  render_counter (out, "rankd_replica_fallbacks_total", "counter",
                  "Reads a replica could not answer, answered by the primary.",
                  "", &replica_fallbacks);
  append_header (out, "rankd_replica_lag_seconds", "gauge",
                 "How far behind its primary the replica was at its last "
                 "probe (-1: not measured yet).");
  names = g_list_sort (g_hash_table_get_keys (replica_lags),
                       (GCompareFunc) strcmp);
  for (GList *l = names; l != NULL; l = l->next)
    g_string_append_printf (
        out, "rankd_replica_lag_seconds{replica=\"%s\"} %.6f\n",
        (const char *) l->data,
        *(double *) g_hash_table_lookup (replica_lags, l->data));
}

static void
render_counter (GString *out, const char *name, const char *type,
                const char *help, const char *labels, Counter *c)
{
  if (help != NULL)
    append_header (out, name, type, help);
  g_string_append_printf (out, "%s%s %" G_GUINT64_FORMAT "\n", name, labels,
                          (guint64) atomic_load (c));
}

static void
render_cache (GString *out)
{
  if (!atomic_load (&cache_seen))
    return;
  render_counter (out, "rankd_read_cache_hits_total", "counter",
                  "Reads answered from the read cache.", "", &cache_hits);
  render_counter (out, "rankd_read_cache_misses_total", "counter",
                  "Reads of cached boards that went to Redis.", "",
                  &cache_misses);
  render_counter (out, "rankd_read_cache_invalidations_total", "counter",
                  "Times a board's cached answers were dropped: by Redis's "
                  "invalidation, or by a write through this rankd.",
                  "{source=\"redis\"}", &cache_dropped_redis);
  render_counter (out, "rankd_read_cache_invalidations_total", "counter", NULL,
                  "{source=\"rankd\"}", &cache_dropped_rankd);
  render_counter (out, "rankd_read_cache_evictions_total", "counter",
                  "Cached answers dropped to stay under --read-cache-bytes.",
                  "", &cache_evictions);
  render_counter (out, "rankd_read_cache_bytes", "gauge",
                  "Memory the cache takes: answers and boards' bookkeeping.",
                  "", &cache_bytes);
  render_counter (out, "rankd_read_cache_entries", "gauge", "Cached answers.",
                  "", &cache_entries);
  render_counter (out, "rankd_read_cache_tracking_up", "gauge",
                  "1 while Redis reports every change of the tracked boards "
                  "(every node's CLIENT TRACKING session is up).",
                  "", &tracking_up);
  render_counter (out, "rankd_read_cache_tracking_sessions_total", "counter",
                  "Tracking sessions begun (a lost one drops the cache).", "",
                  &tracking_sessions);
  render_counter (out, "rankd_read_cache_tracked_prefixes", "gauge",
                  "Prefixes of the tracked boards registered with Redis "
                  "(at most --read-cache-tracked-boards).",
                  "", &tracked_prefixes);
  render_counter (out, "rankd_read_cache_tracked_rotations_total", "counter",
                  "Rotations of the tracked set to the boards read most "
                  "recently (a board read did not fit).",
                  "", &tracked_rotations);
}

static void
render_connections (GString *out)
{
  /* Closed first: it never exceeds opened, read later. */
  guint64 closed = atomic_load (&connections_closed);
  guint64 opened = atomic_load (&connections_opened);

  append_header (out, "rankd_connections_open", "gauge",
                 "Thrift client connections open now.");
  g_string_append_printf (out, "rankd_connections_open %" G_GUINT64_FORMAT "\n",
                          opened - closed);
  append_header (out, "rankd_connections_total", "counter",
                 "Thrift client connections accepted.");
  g_string_append_printf (
      out, "rankd_connections_total %" G_GUINT64_FORMAT "\n", opened);
}

static void
render_tls (GString *out)
{
  guint64 closed = atomic_load (&tls_closed);
  guint64 opened = atomic_load (&tls_opened);

  if (!atomic_load (&tls_seen))
    return;
  append_header (out, "rankd_tls_connections_open", "gauge",
                 "TLS client connections open now, handshaking or not.");
  g_string_append_printf (out,
                          "rankd_tls_connections_open %" G_GUINT64_FORMAT "\n",
                          opened - closed);
  render_counter (out, "rankd_tls_handshakes_total", "counter",
                  "TLS handshakes completed.", "", &tls_handshakes);
  append_header (out, "rankd_tls_handshake_failures_total", "counter",
                 "TLS handshakes that failed, by reason.");
  for (guint i = 0; i < RANK_TLS_FAILURES; i++)
    g_string_append_printf (
        out,
        "rankd_tls_handshake_failures_total{reason=\"%s\"} %" G_GUINT64_FORMAT
        "\n",
        rank_metrics_tls_failure_name (i),
        (guint64) atomic_load (&tls_failures[i]));
}

/* The heap rankd has allocated and not freed (glibc's count over every
 * arena, mmapped chunks included): unlike the RSS, it does not include what
 * malloc keeps after a free (up to RANK_MALLOC_TRIM_BYTES an arena), so a
 * leak shows in it and a burst that is over does not. */
static void
render_memory (GString *out)
{
  struct mallinfo2 mi = mallinfo2 ();

  append_header (out, "rankd_heap_in_use_bytes", "gauge",
                 "Heap memory allocated and not freed (malloc).");
  g_string_append_printf (out, "rankd_heap_in_use_bytes %zu\n",
                          mi.uordblks + mi.hblkhd);
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
render_queues (GString *out)
{
  static const struct
  {
    const char *name, *type, *help;
  } series[] = {
    { "rankd_queue_backlog", "gauge",
      "Updates in a queued board's streams, not applied yet." },
    { "rankd_queue_oldest_seconds", "gauge",
      "How long the oldest unapplied update of a queued board has waited." },
    { "rankd_queue_applied_total", "counter",
      "Queued updates this rankd applied (a repeated request id counts)." },
    { "rankd_queue_dead_lettered_total", "counter",
      "Queued updates this rankd moved to the dead letters." },
  };
  g_autoptr (GPtrArray) boards = g_ptr_array_new ();
  GHashTableIter it;
  gpointer key;

  if (queues == NULL)
    return;
  g_hash_table_iter_init (&it, queues);
  while (g_hash_table_iter_next (&it, &key, NULL))
    g_ptr_array_add (boards, key);
  g_ptr_array_sort (boards, compare_strings);
  for (guint k = 0; k < G_N_ELEMENTS (series); k++)
    {
      append_header (out, series[k].name, series[k].type, series[k].help);
      for (guint i = 0; i < boards->len; i++)
        {
          const QueueMetrics *m
              = g_hash_table_lookup (queues, boards->pdata[i]);

          g_string_append_printf (out, "%s{board=\"", series[k].name);
          append_label (out, boards->pdata[i]);
          g_string_append (out, "\"} ");
          if (k == 0)
            g_string_append_printf (out, "%" G_GINT64_FORMAT "\n", m->backlog);
          else if (k == 1)
            g_string_append_printf (out, "%.3f\n", m->oldest_s);
          else
            g_string_append_printf (out, "%" G_GUINT64_FORMAT "\n",
                                    k == 2 ? m->applied : m->dead);
        }
    }
}

static int
compare_nodes (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(Node *const *) a)->name, (*(Node *const *) b)->name);
}

/* The nodes, sorted by name. */
static GPtrArray *
sorted_nodes (void)
{
  GPtrArray *sorted = g_ptr_array_new ();
  GHashTableIter it;
  gpointer value;

  if (nodes != NULL)
    {
      g_hash_table_iter_init (&it, nodes);
      while (g_hash_table_iter_next (&it, NULL, &value))
        g_ptr_array_add (sorted, value);
    }
  g_ptr_array_sort (sorted, compare_nodes);
  return sorted;
}

/* 1 all started links up, 0 one is not, -1 none started. */
static int
node_up (Node *node)
{
  int up = -1;

  for (guint i = 0; i < node->links->len; i++)
    {
      RankMetricsLink *link = node->links->pdata[i];
      int state = atomic_load (&link->state);

      if (state == LINK_DOWN)
        return 0;
      if (state == LINK_UP)
        up = 1;
    }
  return up;
}

static void
sum_node (Node *node, LinkCounters *sum)
{
  memset (sum, 0, sizeof *sum);
  fold_link (sum, &node->retired);
  for (guint i = 0; i < node->links->len; i++)
    fold_link (sum, &((RankMetricsLink *) node->links->pdata[i])->counters);
}

static void
render_node_counter (GString *out, GPtrArray *sorted, LinkCounters *sums,
                     const char *name, gsize offset)
{
  for (guint i = 0; i < sorted->len; i++)
    {
      g_string_append_printf (out, "%s{node=\"", name);
      append_label (out, ((Node *) sorted->pdata[i])->name);
      g_string_append_printf (
          out, "\"} %" G_GUINT64_FORMAT "\n",
          peek ((Counter *) (gpointer) ((char *) &sums[i] + offset)));
    }
}

static void
render_redis (GString *out)
{
  g_autoptr (GPtrArray) sorted = sorted_nodes ();
  g_autofree LinkCounters *sums = g_new0 (LinkCounters, sorted->len + 1);

  for (guint i = 0; i < sorted->len; i++)
    sum_node (sorted->pdata[i], &sums[i]);
  append_header (out, "rankd_redis_round_trips_total", "counter",
                 "Commands sent to a Redis node (each gets one reply).");
  render_node_counter (out, sorted, sums, "rankd_redis_round_trips_total",
                       G_STRUCT_OFFSET (LinkCounters, commands));
  append_header (out, "rankd_redis_errors_total", "counter",
                 "Commands to a Redis node that failed without a reply: "
                 "unreachable, connection lost, or no reply in time.");
  render_node_counter (out, sorted, sums, "rankd_redis_errors_total",
                       G_STRUCT_OFFSET (LinkCounters, failures));
  append_header (out, "rankd_redis_up", "gauge",
                 "1 when every connection of rankd to the Redis node is up.");
  for (guint i = 0; i < sorted->len; i++)
    {
      int up = node_up (sorted->pdata[i]);

      if (up < 0)
        continue;
      g_string_append (out, "rankd_redis_up{node=\"");
      append_label (out, ((Node *) sorted->pdata[i])->name);
      g_string_append_printf (out, "\"} %d\n", up);
    }
  append_header (out, "rankd_redis_batch_size", "histogram",
                 "Commands that leave together in one write to a Redis node "
                 "(pipelining).");
  for (guint i = 0; i < sorted->len; i++)
    {
      const char *node = ((Node *) sorted->pdata[i])->name;
      guint64 total = 0;

      for (guint b = 0; b <= N_BATCH; b++)
        {
          total += peek (&sums[i].batches[b]);
          g_string_append (out, "rankd_redis_batch_size_bucket{node=\"");
          append_label (out, node);
          if (b < N_BATCH)
            g_string_append_printf (out, "\",le=\"%" G_GUINT64_FORMAT "\"} ",
                                    batch_max[b]);
          else
            g_string_append (out, "\",le=\"+Inf\"} ");
          g_string_append_printf (out, "%" G_GUINT64_FORMAT "\n", total);
        }
      g_string_append (out, "rankd_redis_batch_size_sum{node=\"");
      append_label (out, node);
      g_string_append_printf (out, "\"} %" G_GUINT64_FORMAT "\n",
                              peek (&sums[i].commands));
      g_string_append (out, "rankd_redis_batch_size_count{node=\"");
      append_label (out, node);
      g_string_append_printf (out, "\"} %" G_GUINT64_FORMAT "\n", total);
    }
}

char *
rank_metrics_render (void)
{
  GString *out = g_string_sized_new (16 * 1024);

  g_mutex_lock (&lock);
  if (method_names != NULL)
    render_calls (out);
  render_connections (out);
  render_tls (out);
  render_memory (out);
  render_redis (out);
  render_queues (out);
  render_cache (out);
  render_replicas (out);
  render_refused (out);
  g_mutex_unlock (&lock);
  return g_string_free (out, FALSE);
}

gboolean
rank_metrics_unreachable (char ***unreachable)
{
  GStrvBuilder *builder = g_strv_builder_new ();
  gboolean started = FALSE;

  g_mutex_lock (&lock);
  {
    g_autoptr (GPtrArray) sorted = sorted_nodes ();

    for (guint i = 0; i < sorted->len; i++)
      {
        int up = node_up (sorted->pdata[i]);

        if (up >= 0)
          started = TRUE;
        if (up == 0)
          g_strv_builder_add (builder, ((Node *) sorted->pdata[i])->name);
      }
  }
  g_mutex_unlock (&lock);
  *unreachable = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  return started;
}
