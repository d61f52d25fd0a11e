/* http.h -- rankd's HTTP port (--metrics-listen): /metrics, /healthz and
 * the read-only board viewer.
 *
 * Served by libmicrohttpd in its own threads, never the event-loop
 * workers. The viewer reads boards through the same methods as any Thrift
 * call, in-process (rank_server_call: the generated structs, a worker's
 * handler, no socket), so every kind of board (sharded, periodic,
 * subscores, member data) reads exactly as GetTopN returns it.
 *
 *   GET /metrics                 Prometheus text format (metrics.h)
 *   GET /healthz                 200 "ok", or 503 naming unreachable nodes
 *   GET /                        the viewer (src/net/web/viewer.html)
 *   GET /viewer.js, /viewer.css  its script and style
 *   GET /api/boards              {"boards":[{"name":...,...}]}: the config's
 *   GET /api/top?board=B&n=N&periods_back=P   GetTopN(B, N, 0, P, with_data)
 */
#ifndef RANK_HTTP_H
#define RANK_HTTP_H

#include "address.h"
#include "config.h"
#include "server.h"

typedef struct _RankHttp RankHttp;

/* Parses --metrics-listen's HOST:PORT into out. */
gboolean rank_http_parse_listen (const char *text, RankAddress *out,
                                 GError **error);

/* Binds listen (nothing is served yet): a taken port fails at start. The
 * viewer reads boards through server's workers (rank_server_call), waiting
 * for each call up to RANK_HTTP_CALL_MARGIN_MS past redis_timeout_ms, and
 * shows board options from boards (referenced). Free it before draining
 * server: its requests in progress finish first. */
RankHttp *rank_http_new (const RankAddress *listen, RankServer *server,
                         int redis_timeout_ms, RankConfig *boards,
                         GError **error);

/* Serves, in threads of its own. */
gboolean rank_http_start (RankHttp *http, GError **error);

/* The bound port (useful with port 0). */
guint16 rank_http_port (RankHttp *http);

/* Board options for the viewer from now on (SIGHUP). */
void rank_http_set_boards (RankHttp *http, RankConfig *boards);

/* Stops serving (waits for requests in progress) and frees. */
void rank_http_free (RankHttp *http);

#endif /* RANK_HTTP_H */
