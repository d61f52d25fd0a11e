/* test_client_tls.c -- the C client (RankClient) over TLS with a client
 * certificate, against a real rankd that requires one.
 *
 * Run by tls_rankd.py, which starts redis-server and a TLS rankd and gives
 * RANK_TLS_PORT, RANK_PLAIN_PORT and RANK_TLS_CERTS (certs.py's files).
 * Update, GetRank and GetTopN go through TLS and are seen on the plain port
 * of the same rankd; a wrong CA, a server name the certificate does not
 * carry, no client certificate and one from another CA all fail with an
 * error that says why, and a handshake with a server that never answers
 * ends within the connect timeout.
 */
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address.h"
#include "calls.h"

static guint16 tls_port, plain_port;
static const char *certs;

static char *
cert (const char *name)
{
  return g_build_filename (certs, name, NULL);
}

/* A client context: ca, and a certificate and key named stem (NULL:
 * none). */
static RankTlsContext *
context (const char *ca, const char *stem)
{
  g_autofree char *ca_file = cert (ca);
  g_autofree char *cert_file
      = stem != NULL ? g_strdup_printf ("%s/%s.pem", certs, stem) : NULL;
  g_autofree char *key_file
      = stem != NULL ? g_strdup_printf ("%s/%s.key", certs, stem) : NULL;
  RankTlsFiles files = {
    .ca_file = ca_file,
    .cert_file = cert_file,
    .key_file = key_file,
  };
  g_autoptr (GError) error = NULL;
  RankTlsContext *ctx = rank_tls_client_context_new (&files, &error);

  g_assert_no_error (error);
  return ctx;
}

static RankClient *
connect_tls (RankTlsContext *ctx, const char *host, const char *name,
             GError **error)
{
  return rank_client_connect_tls (host, tls_port, TRUE, RANK_PROTOCOL_BINARY,
                                  10000, ctx, name, error);
}

/* A call's transport error, NULL if it was answered. */
static GError *get_rank_error (RankClient *c);

/* The same, into *error; returns it. */
static GError *
get_rank_error_ptr (RankClient *c, GError **error)
{
  *error = get_rank_error (c);
  return *error;
}

static GError *
get_rank_error (RankClient *c)
{
  g_autoptr (rankEntry) entry = g_object_new (RANK_TYPE_ENTRY, NULL);
  g_autoptr (rankGetRankRequest) request = g_object_new (
      RANK_TYPE_GET_RANK_REQUEST, "board", "tls", "member", "ann", NULL);
  rankInvalidArgument *invalid = NULL;
  rankNotFound *not_found = NULL;
  rankUnavailable *unavailable = NULL;
  rankPermissionDenied *denied = NULL;
  GError *error = NULL;

  rank_ranking_if_get_rank (rank_client_iface (c), &entry, request, &invalid,
                            &not_found, &unavailable, &denied, &error);
  g_clear_object (&invalid);
  g_clear_object (&not_found);
  g_clear_object (&unavailable);
  g_clear_object (&denied);
  return error;
}

static void
test_calls (void)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) c = connect_tls (ctx, "127.0.0.1", NULL, &error);
  g_autoptr (RankClient) again = NULL;
  g_autoptr (RankClient) plain = NULL;
  g_autoptr (GPtrArray) top = NULL;
  g_auto (Result) r = { 0 };
  g_auto (Result) seen = { 0 };
  g_auto (Result) page = { 0 };
  g_autofree char *big = g_strnfill (20000, 'x');

  g_assert_no_error (error);
  r = update_on (c, "tls", "ann", 30, "tls-1", NO_MODE, NO_TIME);
  g_assert_cmpint (r.kind, ==, OK);
  g_assert_cmpint (r.score, ==, 30);
  result_clear (&r);
  r = update_on (c, "tls", "bob", 50, "tls-2", NO_MODE, NO_TIME);
  g_assert_cmpint (r.rank, ==, 1);
  result_clear (&r);
  r = get_rank_on (c, "tls", "ann");
  g_assert_cmpint (r.kind, ==, OK);
  g_assert_cmpint (r.rank, ==, 2);
  g_assert_cmpint (r.score, ==, 30);
  top = top_on (c, "tls", 10, 0, &page);
  g_assert_nonnull (top);
  g_assert_cmpuint (top->len, ==, 2);
  g_assert_cmpstr (((rankEntry *) top->pdata[0])->member, ==, "bob");
  g_assert_cmpstr (((rankEntry *) top->pdata[1])->member, ==, "ann");
  /* A request larger than a TLS record (16 KB) and its answer: an
   * InvalidArgument for the member's length, over the same session. */
  {
    g_autoptr (rankEntry) entry = g_object_new (RANK_TYPE_ENTRY, NULL);
    g_autoptr (rankGetRankRequest) request = g_object_new (
        RANK_TYPE_GET_RANK_REQUEST, "board", "tls", "member", big, NULL);
    rankInvalidArgument *invalid = NULL;
    rankNotFound *not_found = NULL;
    rankUnavailable *unavailable = NULL;
    rankPermissionDenied *denied = NULL;

    /* The generated client sets error beside a declared exception. */
    g_assert_false (rank_ranking_if_get_rank (rank_client_iface (c), &entry,
                                              request, &invalid, &not_found,
                                              &unavailable, &denied, &error));
    g_assert_nonnull (invalid);
    g_assert_nonnull (strstr (invalid->message, "member"));
    g_object_unref (invalid);
    g_clear_error (&error);
  }
  /* The same rankd without TLS saw the updates. */
  plain = rank_client_connect ("127.0.0.1", plain_port, TRUE,
                               RANK_PROTOCOL_BINARY, 10000, &error);
  g_assert_no_error (error);
  seen = get_rank_on (plain, "tls", "bob");
  g_assert_cmpint (seen.score, ==, 50);
  /* connect_again keeps TLS, and the name: "localhost" is checked as a
   * DNS name, 127.0.0.1 above as an IP address. */
  g_clear_pointer (&c, rank_client_free);
  c = connect_tls (ctx, "localhost", NULL, &error);
  g_assert_no_error (error);
  again = rank_client_connect_again (c, &error);
  g_assert_no_error (error);
  result_clear (&r);
  r = get_rank_on (again, "tls", "bob");
  g_assert_cmpint (r.score, ==, 50);
}

/* Pipelined calls (cork, uncork) over TLS, as rank-bench sends them. */
static void
test_pipelined (void)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) c = connect_tls (ctx, "127.0.0.1", NULL, &error);
  RankClientTransport *t;

  g_assert_no_error (error);
  t = rank_client_get_transport (c);
  rank_client_transport_cork (t);
  for (int i = 0; i < 50; i++)
    {
      g_autofree char *rid = g_strdup_printf ("pipe-%d", i);
      g_autoptr (rankUpdateRequest) req
          = update_request_new ("tls_pipe", "m", 1, rid, NO_MODE, NO_TIME);

      g_assert_true (rank_ranking_client_send_update (
          RANK_RANKING_IF (rank_client_iface (c)), req, &error));
      g_assert_no_error (error);
    }
  g_assert_true (rank_client_transport_uncork (t, &error));
  g_assert_no_error (error);
  for (int i = 0; i < 50; i++)
    {
      g_autoptr (rankUpdateResponse) resp
          = g_object_new (RANK_TYPE_UPDATE_RESPONSE, NULL);
      rankInvalidArgument *invalid = NULL;
      rankUnavailable *unavailable = NULL;
      rankPermissionDenied *denied = NULL;

      g_assert_true (rank_ranking_client_recv_update (
          RANK_RANKING_IF (rank_client_iface (c)), &resp, &invalid,
          &unavailable, &denied, &error));
      g_assert_no_error (error);
      g_assert_cmpint (resp->score, ==, i + 1);
    }
}

static void
test_wrong_ca (void)
{
  g_autoptr (RankTlsContext) ctx = context ("other-ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) c = connect_tls (ctx, "127.0.0.1", NULL, &error);

  g_assert_null (c);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "TLS handshake failed"));
  g_assert_nonnull (strstr (error->message, "certificate verify failed"));
}

static void
test_wrong_name (void)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) c
      = connect_tls (ctx, "127.0.0.1", "rankd.elsewhere", &error);

  g_assert_null (c);
  g_assert_nonnull (strstr (error->message, "hostname mismatch"));
  g_clear_error (&error);
  /* An IP address the certificate does not carry. */
  c = connect_tls (ctx, "127.0.0.1", "127.0.0.2", &error);
  g_assert_null (c);
  g_assert_nonnull (strstr (error->message, "IP address mismatch"));
}

/* The server refuses: under TLS 1.3 the client learns it on the first
 * call, which fails naming the refusal (and rankd saw nothing). */
static void
refused (const char *stem, const char *expect)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", stem);
  g_autoptr (GError) error = NULL;
  g_autoptr (RankClient) c = connect_tls (ctx, "127.0.0.1", NULL, &error);

  if (c != NULL)
    {
      g_assert_no_error (error);
      error = get_rank_error (c);
    }
  g_assert_nonnull (error);
  if (strstr (error->message, expect) == NULL)
    g_error ("expected '%s' in: %s", expect, error->message);
}

static void
test_no_client_cert (void)
{
  refused (NULL, "the server requires a client certificate");
}

static void
test_stranger_cert (void)
{
  refused ("stranger", "the server refused this client's certificate");
}

/* A server that accepts the connection and never answers the
 * ClientHello: the handshake ends within the connect timeout. */
static void
test_handshake_timeout (void)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  RankAddress any = { (char *) "127.0.0.1", 0, NULL };
  int fd = rank_address_listen (&any, 4, &error);
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  guint16 port;
  gint64 begin;
  RankClient *c;

  g_assert_no_error (error);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &ss, &len), ==, 0);
  port = g_ntohs (((struct sockaddr_in *) &ss)->sin_port);
  begin = g_get_monotonic_time ();
  c = rank_client_connect_tls ("127.0.0.1", port, TRUE, RANK_PROTOCOL_BINARY,
                               300, ctx, NULL, &error);
  g_assert_null (c);
  g_assert_nonnull (strstr (error->message, "TLS handshake timed out"));
  g_assert_cmpint (g_get_monotonic_time () - begin, <, 5 * G_USEC_PER_SEC);
  close (fd);
}

/* A TLS server that completes the handshake and closes at once, unread
 * bytes and all (the kernel answers the client's next bytes with a
 * reset). */
static gpointer
vanishing_server (gpointer data)
{
  int listener = GPOINTER_TO_INT (data);
  g_autofree char *cert_file = cert ("server.pem");
  g_autofree char *key_file = cert ("server.key");
  RankTlsFiles files = { .cert_file = cert_file, .key_file = key_file };
  g_autoptr (GError) error = NULL;
  g_autoptr (RankTlsContext) ctx = rank_tls_server_context_new (&files, &error);
  int fd = accept (listener, NULL, NULL);
  RankTlsSession *session;

  g_assert_no_error (error);
  g_assert_cmpint (fd, >=, 0);
  /* A blocking socket: the handshake runs to its end in one call. */
  session = rank_tls_session_new (ctx, fd, NULL);
  g_assert_cmpint (rank_tls_handshake (session, &error), ==, RANK_TLS_OK);
  rank_tls_session_free (session);
  close (fd);
  return NULL;
}

/* The server goes away while megabytes of pipelined calls are being
 * written: the writes after its reset fail (SIGPIPE, from OpenSSL's
 * write(2), does not end the process), the failure names the cause, and
 * every later call says the same without touching the socket. */
static void
test_server_gone (void)
{
  g_autoptr (RankTlsContext) ctx = context ("ca.pem", "client-alice");
  g_autoptr (GError) error = NULL;
  RankAddress any = { (char *) "127.0.0.1", 0, NULL };
  int listener = rank_address_listen (&any, 4, &error);
  struct sockaddr_in sin;
  socklen_t len = sizeof sin;
  g_autoptr (RankClient) c = NULL;
  g_autofree char *member = g_strnfill (60000, 'm');
  g_autofree char *first = NULL;
  RankClientTransport *t;
  GThread *server;
  gboolean sent = TRUE;

  g_assert_no_error (error);
  g_assert_cmpint (getsockname (listener, (struct sockaddr *) &sin, &len), ==,
                   0);
  server = g_thread_new ("vanishing", vanishing_server,
                         GINT_TO_POINTER (listener));
  c = rank_client_connect_tls ("127.0.0.1", g_ntohs (sin.sin_port), TRUE,
                               RANK_PROTOCOL_BINARY, 10000, ctx, NULL, &error);
  g_assert_no_error (error);
  g_thread_join (server);
  close (listener);
  t = rank_client_get_transport (c);
  /* Rounds of 8 MB: the first may fit in the socket buffers before the
   * reset arrives; a later one cannot. */
  for (int round = 0; round < 8 && sent; round++)
    {
      rank_client_transport_cork (t);
      for (int i = 0; i < 140; i++)
        {
          g_autoptr (rankUpdateRequest) req = update_request_new (
              "gone", member, 1, "gone", NO_MODE, NO_TIME);

          g_assert_true (rank_ranking_client_send_update (
              RANK_RANKING_IF (rank_client_iface (c)), req, &error));
        }
      sent = rank_client_transport_uncork (t, &error);
    }
  g_assert_false (sent);
  g_assert_nonnull (error);
  first = g_strdup (error->message);
  g_clear_error (&error);
  g_assert_nonnull (get_rank_error_ptr (c, &error));
  g_assert_cmpstr (error->message, ==, first);
}

int
main (int argc, char **argv)
{
  const char *tls = g_getenv ("RANK_TLS_PORT");
  const char *plain = g_getenv ("RANK_PLAIN_PORT");

  g_test_init (&argc, &argv, NULL);
  certs = g_getenv ("RANK_TLS_CERTS");
  if (tls == NULL || plain == NULL || certs == NULL)
    g_error ("run by tls_rankd.py: RANK_TLS_PORT, RANK_PLAIN_PORT and "
             "RANK_TLS_CERTS unset");
  tls_port = (guint16) atoi (tls);
  plain_port = (guint16) atoi (plain);
  g_test_add_func ("/client/tls/calls", test_calls);
  g_test_add_func ("/client/tls/pipelined", test_pipelined);
  g_test_add_func ("/client/tls/wrong-ca", test_wrong_ca);
  g_test_add_func ("/client/tls/wrong-name", test_wrong_name);
  g_test_add_func ("/client/tls/no-client-cert", test_no_client_cert);
  g_test_add_func ("/client/tls/stranger-cert", test_stranger_cert);
  g_test_add_func ("/client/tls/handshake-timeout", test_handshake_timeout);
  g_test_add_func ("/client/tls/server-gone", test_server_gone);
  return g_test_run ();
}
