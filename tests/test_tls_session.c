/* test_tls_session.c -- src/tls/tls.c on its own: a server and a client
 * session over a non-blocking socket pair, with certificates made by
 * tests/certs.py (openssl). No rankd: the listeners, the Redis links and
 * the client have tests of their own.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include "error.h"
#include "tls.h"

static char *dir; /* the certificates */

static char *
cert (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

typedef struct
{
  int fds[2]; /* [0] server, [1] client */
  RankTlsContext *server_ctx, *client_ctx;
  RankTlsSession *server, *client;
} Pair;

static void
pair_open (Pair *p, const RankTlsFiles *server_files,
           const RankTlsFiles *client_files, const char *server_name)
{
  g_autoptr (GError) error = NULL;

  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM, 0, p->fds), ==, 0);
  for (int i = 0; i < 2; i++)
    g_assert_cmpint (fcntl (p->fds[i], F_SETFL, O_NONBLOCK), ==, 0);
  p->server_ctx = rank_tls_server_context_new (server_files, &error);
  g_assert_no_error (error);
  p->client_ctx = rank_tls_client_context_new (client_files, &error);
  g_assert_no_error (error);
  p->server = rank_tls_session_new (p->server_ctx, p->fds[0], NULL);
  p->client = rank_tls_session_new (p->client_ctx, p->fds[1], server_name);
}

static void
pair_close (Pair *p)
{
  rank_tls_session_free (p->server);
  rank_tls_session_free (p->client);
  /* Sessions keep the SSL_CTX they were made with. */
  rank_tls_context_unref (p->server_ctx);
  rank_tls_context_unref (p->client_ctx);
  close (p->fds[0]);
  close (p->fds[1]);
}

/* Runs both handshakes until each is done or one fails; TRUE when both
 * are done. The failing side's error goes to *server_error or
 * *client_error. */
static gboolean
pair_handshake (Pair *p, GError **server_error, GError **client_error)
{
  gboolean server_done = FALSE, client_done = FALSE;

  for (int round = 0; round < 100; round++)
    {
      if (!client_done)
        {
          RankTlsStatus s = rank_tls_handshake (p->client, client_error);

          if (s == RANK_TLS_FAILED || s == RANK_TLS_CLOSED)
            return FALSE;
          client_done = s == RANK_TLS_OK;
        }
      if (!server_done)
        {
          RankTlsStatus s = rank_tls_handshake (p->server, server_error);

          if (s == RANK_TLS_FAILED || s == RANK_TLS_CLOSED)
            return FALSE;
          server_done = s == RANK_TLS_OK;
        }
      if (server_done && client_done)
        return TRUE;
    }
  g_assert_not_reached ();
}

static RankTlsFiles
server_files (void)
{
  RankTlsFiles f = { 0 };

  f.cert_file = cert ("server.pem");
  f.key_file = cert ("server.key");
  f.ca_file = cert ("ca.pem");
  return f;
}

static RankTlsFiles
client_files (const char *name)
{
  RankTlsFiles f = { 0 };

  if (name != NULL)
    {
      f.cert_file = g_strdup_printf ("%s/%s.pem", dir, name);
      f.key_file = g_strdup_printf ("%s/%s.key", dir, name);
    }
  f.ca_file = cert ("ca.pem");
  return f;
}

static void
files_clear (RankTlsFiles *f)
{
  g_free ((char *) f->cert_file);
  g_free ((char *) f->key_file);
  g_free ((char *) f->ca_file);
}

/* Moves len bytes from one session to the other through the socket pair,
 * in turns, as an event loop would: writes stop on WANT_WRITE, reads on
 * WANT_READ. */
static void
transfer (RankTlsSession *from, RankTlsSession *to, gsize len)
{
  g_autofree guint8 *out = g_malloc (len);
  g_autofree guint8 *in = g_malloc (len);
  gsize sent = 0, got = 0;

  for (gsize i = 0; i < len; i++)
    out[i] = (guint8) (i * 7 + 3);
  while (got < len)
    {
      g_autoptr (GError) error = NULL;
      struct iovec iov[2];
      gsize wrote = 0, half = (len - sent) / 2;
      RankTlsStatus s;

      /* Two pieces, so writev's walk over its buffers is exercised. */
      iov[0].iov_base = out + sent;
      iov[0].iov_len = half;
      iov[1].iov_base = out + sent + half;
      iov[1].iov_len = len - sent - half;
      if (sent < len)
        {
          s = rank_tls_writev (from, iov, 2, &wrote, &error);
          g_assert_no_error (error);
          g_assert_true (s == RANK_TLS_OK || s == RANK_TLS_WANT_WRITE);
          sent += wrote;
        }
      for (;;)
        {
          gsize n = 0;

          s = rank_tls_read (to, in + got, len - got, &n, &error);
          g_assert_no_error (error);
          if (s != RANK_TLS_OK)
            {
              g_assert_cmpint (s, ==, RANK_TLS_WANT_READ);
              g_assert_false (rank_tls_pending (to));
              break;
            }
          got += n;
          if (got == len)
            break;
        }
    }
  g_assert_cmpmem (out, len, in, len);
}

static void
test_mutual (void)
{
  RankTlsFiles sf = server_files (), cf = client_files ("client-game");
  g_autoptr (GError) serr = NULL;
  g_autoptr (GError) cerr = NULL;
  static const struct
  {
    RankTlsIdentity mode;
    const char *name;
  } names[] = {
    { RANK_TLS_IDENTITY_CN, "game" },
    { RANK_TLS_IDENTITY_DNS, "game.example" },
    { RANK_TLS_IDENTITY_URI, "spiffe://rankd.test/game" },
    { RANK_TLS_IDENTITY_EMAIL, "game@example.com" },
  };
  Pair p;

  pair_open (&p, &sf, &cf, "localhost");
  g_assert_true (pair_handshake (&p, &serr, &cerr));
  g_assert_no_error (serr);
  g_assert_no_error (cerr);
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *id = rank_tls_peer_identity (p.server, names[i].mode);

      g_assert_cmpstr (id, ==, names[i].name);
    }
  g_assert_true (g_str_has_prefix (rank_tls_version (p.server), "TLSv1."));
  g_assert_cmpstr (rank_tls_version (p.server), !=, "TLSv1.1");
  /* Small and large, both ways: 3 MB does not fit the socket pair, so
   * writes stop on WANT_WRITE and resume. */
  transfer (p.client, p.server, 10);
  transfer (p.server, p.client, 3 << 20);
  transfer (p.client, p.server, 1 << 20);
  rank_tls_shutdown (p.client);
  {
    g_autoptr (GError) error = NULL;
    char b[8];
    gsize n;

    g_assert_cmpint (rank_tls_read (p.server, b, sizeof b, &n, &error), ==,
                     RANK_TLS_CLOSED);
  }
  pair_close (&p);
  files_clear (&sf);
  files_clear (&cf);
}

/* The server asks for no certificate: anonymous. */
static void
test_no_client_ca (void)
{
  RankTlsFiles sf = server_files (), cf = client_files (NULL);
  g_autoptr (GError) serr = NULL;
  g_autoptr (GError) cerr = NULL;
  Pair p;

  g_clear_pointer ((char **) &sf.ca_file, g_free);
  pair_open (&p, &sf, &cf, "127.0.0.1");
  g_assert_true (pair_handshake (&p, &serr, &cerr));
  g_assert_null (rank_tls_peer_identity (p.server, RANK_TLS_IDENTITY_CN));
  transfer (p.client, p.server, 100);
  pair_close (&p);
  files_clear (&sf);
  files_clear (&cf);
}

/* A client certificate the server must refuse, or none when one is
 * required: the handshake fails, and the server's error says why. */
static void
refused_client (const char *name, gboolean optional, const char *why)
{
  RankTlsFiles sf = server_files (), cf = client_files (name);
  g_autoptr (GError) serr = NULL;
  g_autoptr (GError) cerr = NULL;
  Pair p;

  sf.client_cert_optional = optional;
  pair_open (&p, &sf, &cf, "localhost");
  g_assert_false (pair_handshake (&p, &serr, &cerr));
  /* TLS 1.3: the client is done before the server checks its
   * certificate; the server's error tells. */
  g_assert_error (serr, RANK_ERROR, RANK_ERROR_UNAVAILABLE);
  g_test_message ("server: %s", serr->message);
  g_assert_nonnull (strstr (serr->message, why));
  pair_close (&p);
  files_clear (&sf);
  files_clear (&cf);
}

static void
test_refused_clients (void)
{
  refused_client ("expired", FALSE, "expired");
  refused_client ("expired", TRUE, "expired");
  refused_client ("stranger", FALSE, "certificate verify failed");
  refused_client (NULL, FALSE, "certificate");
}

static void
test_optional_client_cert (void)
{
  RankTlsFiles sf = server_files (), cf = client_files (NULL);
  g_autoptr (GError) serr = NULL;
  g_autoptr (GError) cerr = NULL;
  Pair p;

  sf.client_cert_optional = TRUE;
  pair_open (&p, &sf, &cf, "localhost");
  g_assert_true (pair_handshake (&p, &serr, &cerr));
  g_assert_null (rank_tls_peer_identity (p.server, RANK_TLS_IDENTITY_CN));
  pair_close (&p);
  files_clear (&sf);
  files_clear (&cf);
}

/* The client checks the server: its CA and its name. */
static void
refused_server (const char *ca, const char *server_name, const char *why)
{
  RankTlsFiles sf = server_files (), cf = client_files ("client-game");
  g_autoptr (GError) serr = NULL;
  g_autoptr (GError) cerr = NULL;
  Pair p;

  g_free ((char *) cf.ca_file);
  cf.ca_file = cert (ca);
  pair_open (&p, &sf, &cf, server_name);
  g_assert_false (pair_handshake (&p, &serr, &cerr));
  g_assert_error (cerr, RANK_ERROR, RANK_ERROR_UNAVAILABLE);
  g_test_message ("client: %s", cerr->message);
  g_assert_nonnull (strstr (cerr->message, why));
  pair_close (&p);
  files_clear (&sf);
  files_clear (&cf);
}

static void
test_refused_servers (void)
{
  refused_server ("other-ca.pem", "localhost", "certificate verify failed");
  refused_server ("ca.pem", "rankd.example", "certificate verify failed");
  refused_server ("ca.pem", "10.0.0.1", "certificate verify failed");
}

static void
test_bad_files (void)
{
  static const struct
  {
    const char *cert, *key, *ca, *message;
  } cases[] = {
    { "missing.pem", "server.key", NULL, "cannot load the certificate" },
    { "server.pem", "missing.key", NULL, "cannot load the key" },
    { "server.pem", "client-game.key", NULL, "is not the certificate" },
    { "server.pem", "server.key", "missing.pem", "cannot load the CA file" },
    { NULL, NULL, NULL, "needs a certificate" },
    { "server.pem", NULL, NULL, "needs its key" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *c = cases[i].cert ? cert (cases[i].cert) : NULL;
      g_autofree char *k = cases[i].key ? cert (cases[i].key) : NULL;
      g_autofree char *a = cases[i].ca ? cert (cases[i].ca) : NULL;
      RankTlsFiles f = { c, k, a, FALSE, FALSE };

      g_assert_null (rank_tls_server_context_new (&f, &error));
      g_assert_error (error, RANK_ERROR, RANK_ERROR_INVALID);
      g_test_message ("%s", error->message);
      g_assert_nonnull (strstr (error->message, cases[i].message));
    }
}

static void
test_identity_parse (void)
{
  g_autoptr (GError) error = NULL;
  RankTlsIdentity mode = RANK_TLS_IDENTITY_CN;

  g_assert_true (rank_tls_identity_parse ("uri", &mode, NULL));
  g_assert_cmpint (mode, ==, RANK_TLS_IDENTITY_URI);
  g_assert_false (rank_tls_identity_parse ("subject", &mode, &error));
  g_assert_error (error, RANK_ERROR, RANK_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "cn, dns, uri or email"));
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *script
      = g_build_filename (RANK_TEST_SOURCE_DIR, "certs.py", NULL);
  int status = 0, rc;

  g_test_init (&argc, &argv, NULL);
  dir = g_dir_make_tmp ("rank-tls-XXXXXX", &error);
  g_assert_no_error (error);
  {
    const char *cmd[] = { "python3", script, dir, "game", NULL };

    if (!g_spawn_sync (NULL, (char **) cmd, NULL, G_SPAWN_SEARCH_PATH, NULL,
                       NULL, NULL, NULL, &status, &error)
        || !g_spawn_check_wait_status (status, &error))
      g_error ("tests/certs.py: %s", error->message);
  }
  g_test_add_func ("/tls/mutual", test_mutual);
  g_test_add_func ("/tls/no-client-ca", test_no_client_ca);
  g_test_add_func ("/tls/refused-clients", test_refused_clients);
  g_test_add_func ("/tls/optional-client-cert", test_optional_client_cert);
  g_test_add_func ("/tls/refused-servers", test_refused_servers);
  g_test_add_func ("/tls/bad-files", test_bad_files);
  g_test_add_func ("/tls/identity-parse", test_identity_parse);
  rc = g_test_run ();
  {
    const char *cmd[] = { "rm", "-rf", dir, NULL };

    g_spawn_sync (NULL, (char **) cmd, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                  NULL, NULL, NULL, NULL);
  }
  g_free (dir);
  return rc;
}
