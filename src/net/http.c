/* http.c -- the HTTP port: metrics, health, board viewer (see http.h).
 *
 * libmicrohttpd parses HTTP and runs a thread per connection (at most
 * RANK_HTTP_CONNECTIONS_MAX), so a slow board read never holds up a
 * scrape. The viewer's data comes from the Ranking methods, called
 * in-process through the server's workers (rank_server_call): no socket,
 * no client library.
 *
 * Everything the viewer shows is data: the JSON escapes it, and the page
 * puts it in the document as text only (viewer.js), under a content
 * security policy that runs no script but the viewer's own.
 */
#include "http.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "api.h"
#include "constants.h"
#include "error.h"
#include "json.h"
#include "metrics.h"
#include "web_files.h"

struct _RankHttp
{
  char *listen_name;  /* for the log */
  RankServer *server; /* whose workers the viewer's calls go to */
  int timeout_ms;     /* of each call */
  int listen_fd;
  guint16 port;
  struct MHD_Daemon *daemon;

  GMutex lock;
  RankConfig *boards; /* under lock */
};

/* ---- responses ---- */

static enum MHD_Result
respond (struct MHD_Connection *connection, unsigned int status,
         const char *type, const char *body, gsize len)
{
  struct MHD_Response *response = MHD_create_response_from_buffer (
      len, (void *) body, MHD_RESPMEM_MUST_COPY);
  enum MHD_Result ret;

  MHD_add_response_header (response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header (response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header (response, "X-Content-Type-Options", "nosniff");
  if (g_str_has_prefix (type, "text/html"))
    {
      MHD_add_response_header (response, "Content-Security-Policy",
                               "default-src 'none'; script-src 'self'; "
                               "style-src 'self'; connect-src 'self'; "
                               "frame-ancestors 'none'");
      MHD_add_response_header (response, "Referrer-Policy", "no-referrer");
    }
  ret = MHD_queue_response (connection, status, response);
  MHD_destroy_response (response);
  return ret;
}

static enum MHD_Result
respond_text (struct MHD_Connection *connection, unsigned int status,
              const char *text)
{
  return respond (connection, status, "text/plain; charset=utf-8", text,
                  strlen (text));
}

/* ---- JSON ---- */

/* Board options the viewer shows, as the members of a JSON object. */
static void
json_board_options (GString *out, const RankBoardOptions *o)
{
  static const char *const periods[]
      = { "none", "hourly", "daily", "weekly", "monthly", "custom" };
  static const char *const kinds[] = { "", "ordinal", "competition", "dense" };

  g_string_append_printf (
      out,
      "\"shards\":%u,\"order\":\"%s\",\"rank\":\"%s\",\"period\":\"%s\","
      "\"retention\":%u,\"window\":%u,\"cap\":%u,\"subscores\":[",
      o->shards, o->order == RANK_ORDER_ASC ? "asc" : "desc", kinds[o->rank],
      periods[o->period.kind],
      o->period.kind == RANK_PERIOD_NONE ? 0 : o->retention, o->window, o->cap);
  for (guint i = 0; i < o->n_subscores; i++)
    g_string_append_printf (out, "%s\"%s\"", i ? "," : "",
                            o->subscore_asc[i] ? "asc" : "desc");
  g_string_append_c (out, ']');
}

static RankConfig *
current_boards (RankHttp *http)
{
  RankConfig *boards;

  g_mutex_lock (&http->lock);
  boards = rank_config_ref (http->boards);
  g_mutex_unlock (&http->lock);
  return boards;
}

/* ---- calls, in-process ---- */

/* Calls method with args (the generated arguments struct) through the
 * server's workers, reading the answer into result (the generated result
 * struct, whose success, invalid and unavailable fields the caller then
 * looks at). FALSE: *status and *message say why. */
static gboolean
call_rankd (RankHttp *http, const char *method, gpointer args, gpointer result,
            unsigned int *status, char **message)
{
  g_autoptr (GError) error = NULL;

  if (rank_server_call (http->server, method, THRIFT_STRUCT (args),
                        THRIFT_STRUCT (result), http->timeout_ms, &error))
    return TRUE;
  /* As when the Thrift port was closed to the viewer's connection. */
  if (g_error_matches (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE))
    {
      *status = MHD_HTTP_SERVICE_UNAVAILABLE;
      *message = g_strdup_printf ("cannot reach rankd: %s", error->message);
      return FALSE;
    }
  *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
  *message = g_strdup (error->message);
  return FALSE;
}

/* A declared exception of a result (invalid, unavailable: either may be
 * NULL): TRUE with *status and *message, as a client's call reports it. */
static gboolean
declared_exception (rankInvalidArgument *invalid, rankUnavailable *unavailable,
                    unsigned int *status, char **message)
{
  GObject *x = invalid ? G_OBJECT (invalid) : G_OBJECT (unavailable);

  if (x == NULL)
    return FALSE;
  *status = invalid ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_SERVICE_UNAVAILABLE;
  g_object_get (x, "message", message, NULL);
  return TRUE;
}

/* GetTopN with data; of the board's rolling window (IDL 1.8), which keeps
 * no data, when window. NULL: *status and *message say why. */
static GPtrArray *
get_top (RankHttp *http, const char *board, int n, int periods_back,
         gboolean window, unsigned int *status, char **message)
{
  g_autoptr (rankGetTopNRequest) request
      = g_object_new (RANK_TYPE_GET_TOP_N_REQUEST, "board", board, "n", n,
                      "periods_back", periods_back, "with_data", !window, NULL);
  g_autoptr (GObject) args = NULL;
  g_autoptr (GObject) object
      = g_object_new (RANK_TYPE_RANKING_GET_TOP_N_RESULT, NULL);
  rankRankingGetTopNResult *result = RANK_RANKING_GET_TOP_N_RESULT (object);

  if (window)
    g_object_set (request, "window", TRUE, NULL);
  args = g_object_new (RANK_TYPE_RANKING_GET_TOP_N_ARGS, "request", request,
                       NULL);

  if (!call_rankd (http, "GetTopN", args, result, status, message)
      || declared_exception (result->invalid, result->unavailable, status,
                             message))
    return NULL;
  if (!result->__isset_success)
    {
      *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
      *message = g_strdup ("GetTopN failed: unknown result");
      return NULL;
    }
  return g_ptr_array_ref (result->success);
}

/* A queued board's backlog, as the JSON member "queue" (after a comma); a
 * status that cannot be read leaves it out: the page still shows. */
static void
json_queue (RankHttp *http, GString *out, const char *board)
{
  g_autoptr (rankGetQueueStatusRequest) request
      = g_object_new (RANK_TYPE_GET_QUEUE_STATUS_REQUEST, "board", board, NULL);
  g_autoptr (GObject) args = g_object_new (
      RANK_TYPE_RANKING_GET_QUEUE_STATUS_ARGS, "request", request, NULL);
  g_autoptr (GObject) object
      = g_object_new (RANK_TYPE_RANKING_GET_QUEUE_STATUS_RESULT, NULL);
  rankRankingGetQueueStatusResult *result
      = RANK_RANKING_GET_QUEUE_STATUS_RESULT (object);
  g_autofree char *message = NULL;
  unsigned int status = MHD_HTTP_OK;

  if (call_rankd (http, "GetQueueStatus", args, result, &status, &message)
      && result->__isset_success)
    g_string_append_printf (out,
                            ",\"queue\":{\"backlog\":%" G_GINT64_FORMAT
                            ",\"pending\":%" G_GINT64_FORMAT
                            ",\"oldest_age_ms\":%" G_GINT64_FORMAT "}",
                            result->success->backlog, result->success->pending,
                            result->success->oldest_age_ms);
}

/* ListBoards, page after page, up to RANK_VIEWER_BOARDS_MAX boards
 * (rankBoardSummary). NULL: *status and *message say why. */
static GPtrArray *
list_boards (RankHttp *http, unsigned int *status, char **message)
{
  g_autoptr (GPtrArray) boards
      = g_ptr_array_new_with_free_func (g_object_unref);
  g_autofree char *after = g_strdup ("");

  while (boards->len < RANK_VIEWER_BOARDS_MAX)
    {
      g_autoptr (rankListBoardsRequest) request
          = g_object_new (RANK_TYPE_LIST_BOARDS_REQUEST, "after", after,
                          "limit", RANK_LIST_BOARDS_MAX, NULL);
      g_autoptr (GObject) args = g_object_new (
          RANK_TYPE_RANKING_LIST_BOARDS_ARGS, "request", request, NULL);
      g_autoptr (GObject) object
          = g_object_new (RANK_TYPE_RANKING_LIST_BOARDS_RESULT, NULL);
      rankRankingListBoardsResult *result
          = RANK_RANKING_LIST_BOARDS_RESULT (object);
      rankListBoardsResponse *response;

      if (!call_rankd (http, "ListBoards", args, result, status, message)
          || declared_exception (result->invalid, result->unavailable, status,
                                 message))
        return NULL;
      if (!result->__isset_success)
        {
          *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
          *message = g_strdup ("ListBoards failed: unknown result");
          return NULL;
        }
      response = result->success;
      for (guint i = 0;
           i < response->boards->len && boards->len < RANK_VIEWER_BOARDS_MAX;
           i++)
        g_ptr_array_add (boards, g_object_ref (response->boards->pdata[i]));
      if (!response->__isset_next_after)
        break;
      g_free (after);
      after = g_strdup (response->next_after);
    }
  return g_steal_pointer (&boards);
}

/* The boards that exist (ListBoards), each with its options as the
 * configuration gives them. */
static enum MHD_Result
serve_boards (RankHttp *http, struct MHD_Connection *connection)
{
  g_autoptr (RankConfig) config = current_boards (http);
  g_autoptr (GString) out = g_string_new ("{\"boards\":[");
  g_autofree char *message = NULL;
  unsigned int status = MHD_HTTP_OK;
  g_autoptr (GPtrArray) boards = list_boards (http, &status, &message);

  if (boards == NULL)
    {
      g_string_assign (out, "{\"error\":");
      rank_json_string (out, message, RANK_JSON_HTML_SAFE);
      g_string_append (out, "}\n");
      return respond (connection, status, "application/json", out->str,
                      out->len);
    }
  for (guint i = 0; i < boards->len; i++)
    {
      const rankBoardSummary *b = boards->pdata[i];

      g_string_append (out, i ? ",{\"name\":" : "{\"name\":");
      rank_json_string (out, b->board, RANK_JSON_HTML_SAFE);
      g_string_append_printf (
          out, ",\"configured\":%s,\"members\":%" G_GINT64_FORMAT ",",
          b->configured ? "true" : "false", b->members);
      json_board_options (out, rank_config_board (config, b->board));
      g_string_append_c (out, '}');
    }
  g_string_append (out, "]}\n");
  return respond (connection, MHD_HTTP_OK, "application/json", out->str,
                  out->len);
}

static gboolean
parse_int (const char *text, int min, int max, int *out)
{
  gint64 v;

  if (text == NULL)
    return TRUE; /* keep the default */
  if (!g_ascii_string_to_signed (text, 10, min, max, &v, NULL))
    return FALSE;
  *out = (int) v;
  return TRUE;
}

static void
json_entry (GString *out, rankEntry *e)
{
  g_string_append_printf (
      out, "{\"rank\":%" G_GINT64_FORMAT ",\"member\":", e->rank);
  rank_json_string (out, e->member, RANK_JSON_HTML_SAFE);
  /* Scores fit a JavaScript number exactly (|score| <= 2^53-1); subscores
   * are any i64: strings. */
  g_string_append_printf (
      out, ",\"score\":%" G_GINT64_FORMAT ",\"subscores\":[", e->score);
  for (guint i = 0; e->__isset_subscores && i < e->subscores->len; i++)
    g_string_append_printf (out, "%s\"%" G_GINT64_FORMAT "\"", i ? "," : "",
                            g_array_index (e->subscores, gint64, i));
  g_string_append (out, "],\"data\":");
  rank_json_map (out, e->__isset_data ? e->data : NULL, RANK_JSON_HTML_SAFE);
  g_string_append_c (out, '}');
}

/* The query argument key; FALSE if it holds a NUL byte (%00), which C
 * strings would silently cut it at: "board=a%00b" would read board a. */
static gboolean
query_arg (struct MHD_Connection *connection, const char *key,
           const char **value)
{
  size_t len = 0;

  *value = NULL;
  if (MHD_lookup_connection_value_n (connection, MHD_GET_ARGUMENT_KIND, key,
                                     strlen (key), value, &len)
          == MHD_NO
      || *value == NULL)
    return TRUE;
  return strlen (*value) == len;
}

static enum MHD_Result
serve_top (RankHttp *http, struct MHD_Connection *connection)
{
  const char *board = NULL, *n_arg = NULL, *back_arg = NULL;
  const char *window_arg = NULL;
  int n = RANK_VIEWER_DEFAULT_N, back = 0, window = 0;
  unsigned int status = MHD_HTTP_OK;
  g_autofree char *message = NULL;
  g_autoptr (GString) out = g_string_new ("{");
  g_autoptr (GPtrArray) page = NULL;
  g_autoptr (RankConfig) boards = NULL;
  const RankBoardOptions *o;

  if (!query_arg (connection, "board", &board)
      || !query_arg (connection, "n", &n_arg)
      || !query_arg (connection, "periods_back", &back_arg)
      || !query_arg (connection, "window", &window_arg))
    message = g_strdup ("a query argument holds a NUL byte (%00)");
  else if (board == NULL || *board == '\0')
    message = g_strdup ("board: missing (/api/top?board=NAME)");
  else if (!parse_int (n_arg, 1, RANK_TOP_N_MAX, &n))
    message = g_strdup_printf ("n: must be 1-%d", RANK_TOP_N_MAX);
  else if (!parse_int (back_arg, 0, RANK_RETENTION_MAX, &back))
    message
        = g_strdup_printf ("periods_back: must be 0-%d", RANK_RETENTION_MAX);
  else if (!parse_int (window_arg, 0, 1, &window))
    message = g_strdup ("window: must be 0 or 1");
  if (message != NULL)
    status = MHD_HTTP_BAD_REQUEST;
  else
    page = get_top (http, board, n, back, window == 1, &status, &message);
  if (page == NULL)
    {
      g_string_append (out, "\"error\":");
      rank_json_string (out, message, RANK_JSON_HTML_SAFE);
      g_string_append (out, "}\n");
      return respond (connection, status, "application/json", out->str,
                      out->len);
    }

  boards = current_boards (http);
  o = rank_config_board (boards, board);
  g_string_append (out, "\"board\":");
  rank_json_string (out, board, RANK_JSON_HTML_SAFE);
  g_string_append_printf (out,
                          ",\"n\":%d,\"periods_back\":%d,\"read_window\":%s,",
                          n, back, window ? "true" : "false");
  json_board_options (out, o);
  if (o->queue)
    json_queue (http, out, board);
  if (o->period.kind != RANK_PERIOD_NONE)
    {
      RankPeriod period;

      rank_period_back (&o->period, g_get_real_time () / 1000, (guint) back,
                        &period);
      g_string_append (out, ",\"period_label\":");
      rank_json_string (out, period.label, RANK_JSON_HTML_SAFE);
    }
  g_string_append (out, ",\"entries\":[");
  for (guint i = 0; i < page->len; i++)
    {
      if (i)
        g_string_append_c (out, ',');
      json_entry (out, page->pdata[i]);
    }
  g_string_append (out, "]}\n");
  return respond (connection, MHD_HTTP_OK, "application/json", out->str,
                  out->len);
}

/* ---- metrics and health ---- */

static enum MHD_Result
serve_metrics (struct MHD_Connection *connection)
{
  g_autofree char *text = rank_metrics_render ();

  return respond (connection, MHD_HTTP_OK,
                  "text/plain; version=0.0.4; charset=utf-8", text,
                  strlen (text));
}

static enum MHD_Result
serve_health (struct MHD_Connection *connection)
{
  g_auto (GStrv) down = NULL;
  g_autofree char *names = NULL;
  g_autofree char *body = NULL;

  if (!rank_metrics_unreachable (&down))
    return respond_text (connection, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "unavailable: no Redis connection started yet\n");
  if (down[0] == NULL)
    return respond_text (connection, MHD_HTTP_OK, "ok\n");
  names = g_strjoinv (", ", down);
  body = g_strdup_printf ("unavailable: Redis %s unreachable\n", names);
  return respond_text (connection, MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

/* ---- dispatch ---- */

static enum MHD_Result
answer (void *cls, struct MHD_Connection *connection, const char *url,
        const char *method, const char *version, const char *upload_data,
        size_t *upload_data_size, void **request)
{
  RankHttp *http = cls;

  if (strcmp (method, MHD_HTTP_METHOD_GET) != 0
      && strcmp (method, MHD_HTTP_METHOD_HEAD) != 0)
    {
      struct MHD_Response *response
          = MHD_create_response_from_buffer (0, NULL, MHD_RESPMEM_PERSISTENT);
      enum MHD_Result ret;

      MHD_add_response_header (response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
      ret = MHD_queue_response (connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                                response);
      MHD_destroy_response (response);
      return ret;
    }
  if (strcmp (url, "/metrics") == 0)
    return serve_metrics (connection);
  if (strcmp (url, "/healthz") == 0)
    return serve_health (connection);
  if (strcmp (url, "/api/top") == 0)
    return serve_top (http, connection);
  if (strcmp (url, "/api/boards") == 0)
    return serve_boards (http, connection);
  if (strcmp (url, "/") == 0)
    return respond (connection, MHD_HTTP_OK, "text/html; charset=utf-8",
                    rank_web_viewer_html, sizeof rank_web_viewer_html - 1);
  if (strcmp (url, "/viewer.js") == 0)
    return respond (connection, MHD_HTTP_OK, "text/javascript; charset=utf-8",
                    rank_web_viewer_js, sizeof rank_web_viewer_js - 1);
  if (strcmp (url, "/viewer.css") == 0)
    return respond (connection, MHD_HTTP_OK, "text/css; charset=utf-8",
                    rank_web_viewer_css, sizeof rank_web_viewer_css - 1);
  return respond_text (connection, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* libmicrohttpd's messages: fmt is the library's own format. */
static void log_mhd (void *cls, const char *fmt, va_list ap)
    G_GNUC_PRINTF (2, 0);

/* At most one line a second, as for the Thrift port: a flood of refused
 * connections must not flood the log too. */
static void
log_mhd (void *cls, const char *fmt, va_list ap)
{
  static GMutex lock;
  static gint64 last;
  static guint suppressed;
  g_autofree char *text = g_strdup_vprintf (fmt, ap);
  gint64 now = g_get_monotonic_time ();
  guint before = 0;
  gboolean say;

  g_mutex_lock (&lock);
  say = now - last >= G_USEC_PER_SEC;
  if (say)
    {
      last = now;
      before = suppressed;
      suppressed = 0;
    }
  else
    suppressed++;
  g_mutex_unlock (&lock);
  if (!say)
    return;
  if (before > 0)
    g_warning ("http: %s (%u more suppressed since the last line)",
               g_strchomp (text), before);
  else
    g_warning ("http: %s", g_strchomp (text));
}

/* ---- public ---- */

gboolean
rank_http_parse_listen (const char *text, RankAddress *out, GError **error)
{
  if (!rank_address_parse (text, 0, out, error))
    {
      g_prefix_error (error, "--metrics-listen: ");
      return FALSE;
    }
  if (out->path != NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "--metrics-listen: unix sockets are not supported");
      return FALSE;
    }
  return TRUE;
}

RankHttp *
rank_http_new (const RankAddress *listen, RankServer *server,
               int redis_timeout_ms, RankConfig *boards, GError **error)
{
  RankHttp *http;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  int fd = rank_address_listen (listen, 64, error);

  if (fd < 0)
    {
      g_prefix_error (error, "--metrics-listen: ");
      return NULL;
    }
  http = g_new0 (RankHttp, 1);
  http->listen_fd = fd;
  if (getsockname (fd, (struct sockaddr *) &ss, &len) == 0)
    http->port = ntohs (ss.ss_family == AF_INET6
                            ? ((struct sockaddr_in6 *) &ss)->sin6_port
                            : ((struct sockaddr_in *) &ss)->sin_port);
  http->listen_name
      = g_strdup_printf (strchr (listen->host, ':') ? "[%s]:%u" : "%s:%u",
                         listen->host, http->port);
  http->server = server;
  /* Long enough for rankd to answer Unavailable itself. */
  http->timeout_ms = redis_timeout_ms + RANK_HTTP_CALL_MARGIN_MS;
  http->boards = rank_config_ref (boards);
  g_mutex_init (&http->lock);
  return http;
}

gboolean
rank_http_start (RankHttp *http, GError **error)
{
  http->daemon = MHD_start_daemon (
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION
          | MHD_USE_POLL | MHD_USE_ERROR_LOG,
      0, NULL, NULL, answer, http, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
      MHD_OPTION_LISTEN_SOCKET, http->listen_fd, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned int) RANK_HTTP_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int) RANK_HTTP_TIMEOUT_S, MHD_OPTION_END);
  if (http->daemon == NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "--metrics-listen: cannot start the HTTP server");
      return FALSE;
    }
  http->listen_fd = -1; /* the daemon's now: it closes it */
  g_message ("serving metrics, health and the board viewer on http://%s/",
             http->listen_name);
  return TRUE;
}

guint16
rank_http_port (RankHttp *http)
{
  return http->port;
}

void
rank_http_set_boards (RankHttp *http, RankConfig *boards)
{
  RankConfig *old;

  if (http == NULL)
    return;
  g_mutex_lock (&http->lock);
  old = http->boards;
  http->boards = rank_config_ref (boards);
  g_mutex_unlock (&http->lock);
  rank_config_unref (old);
}

void
rank_http_free (RankHttp *http)
{
  if (http == NULL)
    return;
  if (http->daemon != NULL)
    MHD_stop_daemon (http->daemon);
  if (http->listen_fd >= 0)
    close (http->listen_fd);
  rank_config_unref (http->boards);
  g_mutex_clear (&http->lock);
  g_free (http->listen_name);
  g_free (http);
}
