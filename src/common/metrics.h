/* metrics.h -- rankd's counters, gauges and histograms, and their
 * Prometheus text rendering.
 *
 * The hot paths write without locks: each worker's handler and each Redis
 * link owns a block of counters that only its own thread writes (relaxed
 * atomic loads and stores, no read-modify-write), and a scrape adds the
 * blocks up under the registry's lock. A block that goes away (its worker
 * or link is freed) is folded into the totals first, so counters never go
 * back. Connections are two process-wide atomic counters.
 */
#ifndef RANK_METRICS_H
#define RANK_METRICS_H

#include <glib.h>

/* How a call ended; the label rankd_requests_total{outcome=...}. */
typedef enum
{
  RANK_OUTCOME_OK,          /* a result */
  RANK_OUTCOME_INVALID,     /* InvalidArgument */
  RANK_OUTCOME_NOT_FOUND,   /* NotFound */
  RANK_OUTCOME_UNAVAILABLE, /* Unavailable */
  RANK_OUTCOME_INTERNAL,    /* TApplicationException (an internal error) */
  RANK_OUTCOME_DENIED,      /* PermissionDenied */
  RANK_OUTCOMES,
} RankOutcome;

/* ---- calls: one block per handler (per worker thread) ---- */

typedef struct _RankMetricsCalls RankMetricsCalls;

/* methods: the method names, a static array that outlives the block (every
 * block must be given the same one). */
RankMetricsCalls *rank_metrics_calls_new (const char *const *methods,
                                          guint n_methods);

/* One call of methods[method], answered with outcome, elapsed_us after its
 * request was decoded. The block's own thread only. */
void rank_metrics_call_done (RankMetricsCalls *calls, guint method,
                             RankOutcome outcome, gint64 elapsed_us);

/* Folds the block into the totals and frees it. */
void rank_metrics_calls_free (RankMetricsCalls *calls);

/* The outcome a GError of the RANK_ERROR domain maps to (NULL: OK). */
RankOutcome rank_metrics_outcome (const GError *error);

/* ---- refused calls (src/methods/authorize.c; any thread) ---- */

/* A call of method by identity (NULL: anonymous) was refused for reason
 * ("no_role": the identity has the role on no board; "board_not_granted":
 * not on a board the call names): rankd_calls_refused_total. The first
 * RANK_METRICS_IDENTITIES_MAX identities refused have series of their own,
 * later ones count as identity="other". */
void rank_metrics_refused (const char *identity, const char *method,
                           const char *reason);

/* ---- client connections (any thread) ---- */

void rank_metrics_connection_opened (void);
void rank_metrics_connection_closed (void);

/* ---- TLS on the Thrift port (connection.c; any thread) ---- */

/* Why a TLS handshake failed; the label
 * rankd_tls_handshake_failures_total{reason=...}. */
typedef enum
{
  RANK_TLS_FAILURE_PROTOCOL,    /* not TLS, or TLS gone wrong (garbage,
                                   plain Thrift, a bad record) */
  RANK_TLS_FAILURE_VERSION,     /* a version older than TLS 1.2 */
  RANK_TLS_FAILURE_CERTIFICATE, /* a client certificate missing, expired
                                   or untrusted; or ours refused */
  RANK_TLS_FAILURE_TIMEOUT,     /* not done within the request clock */
  RANK_TLS_FAILURE_RESERVED,    /* its identity is a reserved name */
  RANK_TLS_FAILURE_CLOSED,      /* the client closed or reset mid-way */
  RANK_TLS_FAILURES,
} RankTlsFailure;

/* The reason's label value ("protocol", ...): static. */
const char *rank_metrics_tls_failure_name (RankTlsFailure reason);

/* A TLS listener is configured: the TLS metrics are rendered. */
void rank_metrics_tls_enabled (void);
/* A TLS connection was accepted (its handshake begins), or closed. */
void rank_metrics_tls_opened (void);
void rank_metrics_tls_closed (void);
/* A handshake completed, or failed for reason. */
void rank_metrics_tls_handshake_done (void);
void rank_metrics_tls_handshake_failed (RankTlsFailure reason);

/* ---- Redis links: one block per link, named by its node ---- */

typedef struct _RankMetricsLink RankMetricsLink;

RankMetricsLink *rank_metrics_link_new (const char *node);

/* The link's own thread only: */
/* A command queued for the next write. */
void rank_metrics_link_queued (RankMetricsLink *link);
/* A write begins: the commands queued since the last one leave together. */
void rank_metrics_link_flushed (RankMetricsLink *link);
/* The connection dropped: what was queued will not be sent. */
void rank_metrics_link_dropped (RankMetricsLink *link);
/* A command failed without a reply (unreachable, lost, timed out). */
void rank_metrics_link_failed (RankMetricsLink *link);

/* The link's state changed; up: connected. A link counts towards its
 * node's health from its first state change on. Any thread. */
void rank_metrics_link_up (RankMetricsLink *link, gboolean up);

/* Folds the block into its node's totals and frees it. */
void rank_metrics_link_free (RankMetricsLink *link);

/* ---- the update queue (src/methods/drain.c; any thread) ---- */

/* A batch of board's queued updates was applied (or dead-lettered). */
void rank_metrics_queue_done (const char *board, guint applied, guint dead);

/* board's backlog and the age of its oldest unapplied update, as last
 * read. */
void rank_metrics_queue_status (const char *board, gint64 backlog,
                                double oldest_s);

/* ---- the read cache (cache.c, tracking.c; any thread) ---- */

/* A read of a cached board: answered from the cache (hit) or not. */
void rank_metrics_cache_read (gboolean hit);
/* A board's answers were dropped: by Redis's invalidation, or a write
 * through this rankd. */
void rank_metrics_cache_dropped (gboolean by_redis);
void rank_metrics_cache_evicted (guint n);
void rank_metrics_cache_size (guint64 bytes, guint64 entries);
/* The tracking session went up (a new one) or down. */
void rank_metrics_tracking (gboolean up);
/* The tracked set takes prefixes now; it was rotated (tracking.c). */
void rank_metrics_tracked (guint prefixes, gboolean rotated);

/* ---- reads from replicas (backend.c, backend_nodes.c; any thread) ---- */

/* A read that allowed a replica was sent to one (or to the primary). */
void rank_metrics_read_source (gboolean replica);
/* A replica failed a read; the primary answered it. */
void rank_metrics_replica_fallback (void);
/* replica's lag at its last probe (-1: unknown). */
void rank_metrics_replica_lag (const char *replica, double seconds);

/* ---- reading ---- */

/* Every metric in the Prometheus text exposition format (version 0.0.4). */
char *rank_metrics_render (void);

/* Nodes with a link that is not connected, sorted, NULL-terminated (empty:
 * all reachable); FALSE when no link has started yet. Free with
 * g_strfreev. */
gboolean rank_metrics_unreachable (char ***nodes);

#endif /* RANK_METRICS_H */
