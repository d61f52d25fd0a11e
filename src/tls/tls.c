/* tls.c -- TLS sessions on non-blocking sockets (see tls.h).
 *
 * A context is an SSL_CTX (OpenSSL counts its references); a session an
 * SSL on the caller's fd. Every error is taken from OpenSSL's error queue
 * at once, so one session's failure never shows up in another's.
 */
#include "tls.h"

#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "error.h"

struct _RankTlsContext
{
  SSL_CTX *ctx;
  gboolean server;
};

/* The most plaintext one TLS record carries. */
#define RANK_TLS_RECORD_BYTES 16384

struct _RankTlsSession
{
  SSL *ssl;
  gboolean server;
  gboolean short_read; /* the last recv got less than it asked for */
};

/* Where small writes are gathered into one record: one a thread (OpenSSL
 * encrypts a record into its own buffer at once, so a write repeated
 * later needs the same bytes, not the same place). */
static GPrivate stage_key = G_PRIVATE_INIT (g_free);

static guint8 *
stage (void)
{
  guint8 *buf = g_private_get (&stage_key);

  if (buf == NULL)
    {
      buf = g_malloc (RANK_TLS_RECORD_BYTES);
      g_private_set (&stage_key, buf);
    }
  return buf;
}

/* OpenSSL's queued errors (cleared), after what; the first is the most
 * specific. */
static void
set_ssl_error (GError **error, int code, const char *what)
{
  char buf[256] = "";
  unsigned long e = ERR_get_error ();

  if (e != 0)
    ERR_error_string_n (e, buf, sizeof buf);
  ERR_clear_error ();
  g_set_error (error, RANK_ERROR, code, "%s%s%s", what, buf[0] ? ": " : "",
               buf);
}

gboolean
rank_tls_identity_parse (const char *text, RankTlsIdentity *out, GError **error)
{
  static const char *names[] = { "cn", "dns", "uri", "email" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    if (g_strcmp0 (text, names[i]) == 0)
      {
        *out = (RankTlsIdentity) i;
        return TRUE;
      }
  g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
               "tls identity '%s': expected cn, dns, uri or email", text);
  return FALSE;
}

static RankTlsContext *
context_new (const RankTlsFiles *files, gboolean server, GError **error)
{
  SSL_CTX *ctx
      = SSL_CTX_new (server ? TLS_server_method () : TLS_client_method ());
  RankTlsContext *self;

  ERR_clear_error ();
  if (ctx == NULL)
    {
      set_ssl_error (error, RANK_ERROR_INVALID, "cannot make a TLS context");
      return NULL;
    }
  SSL_CTX_set_min_proto_version (ctx, TLS1_2_VERSION);
  /* No renegotiation, no compression; partial writes, and a write may be
   * retried from another address with the same bytes (the caller's iovec
   * moves as replies complete). */
  SSL_CTX_set_options (ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION
                                | SSL_OP_CIPHER_SERVER_PREFERENCE);
  /* Buffers are kept while a session is busy (releasing them after each
   * record cost a pair of 17 KB allocations a call); rank_tls_trim hands
   * an idle one's back. */
  SSL_CTX_set_mode (ctx, SSL_MODE_ENABLE_PARTIAL_WRITE
                             | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  /* One recv takes every record the socket has (a pipeline's requests),
   * not a header and then a body per record. */
  SSL_CTX_set_read_ahead (ctx, 1);
  if ((files->cert_file == NULL) != (files->key_file == NULL))
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "a TLS certificate needs its key, and a key its "
                   "certificate");
      SSL_CTX_free (ctx);
      return NULL;
    }
  if (server && files->cert_file == NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "a TLS listener needs a certificate and its key");
      SSL_CTX_free (ctx);
      return NULL;
    }
  if (files->cert_file != NULL)
    {
      g_autofree char *what = NULL;

      if (SSL_CTX_use_certificate_chain_file (ctx, files->cert_file) != 1)
        what = g_strdup_printf ("cannot load the certificate %s",
                                files->cert_file);
      else if (SSL_CTX_use_PrivateKey_file (ctx, files->key_file,
                                            SSL_FILETYPE_PEM)
               != 1)
        what
            = ERR_GET_REASON (ERR_peek_last_error ())
                      == X509_R_KEY_VALUES_MISMATCH
                  ? g_strdup_printf ("the key %s is not the certificate "
                                     "%s's",
                                     files->key_file, files->cert_file)
                  : g_strdup_printf ("cannot load the key %s", files->key_file);
      else if (SSL_CTX_check_private_key (ctx) != 1)
        what = g_strdup_printf ("the key %s is not the certificate %s's",
                                files->key_file, files->cert_file);
      if (what != NULL)
        {
          set_ssl_error (error, RANK_ERROR_INVALID, what);
          SSL_CTX_free (ctx);
          return NULL;
        }
    }
  if (files->ca_file != NULL
      && SSL_CTX_load_verify_locations (ctx, files->ca_file, NULL) != 1)
    {
      g_autofree char *what
          = g_strdup_printf ("cannot load the CA file %s", files->ca_file);

      set_ssl_error (error, RANK_ERROR_INVALID, what);
      SSL_CTX_free (ctx);
      return NULL;
    }
  if (server)
    {
      if (files->ca_file != NULL)
        {
          STACK_OF (X509_NAME) *names
              = SSL_load_client_CA_file (files->ca_file);

          if (names != NULL)
            SSL_CTX_set_client_CA_list (ctx, names);
          SSL_CTX_set_verify (ctx,
                              SSL_VERIFY_PEER
                                  | (files->client_cert_optional
                                         ? 0
                                         : SSL_VERIFY_FAIL_IF_NO_PEER_CERT),
                              NULL);
        }
      /* Sessions are not resumed: each connection shows its certificate
       * (an identity is read from it) and no ticket key needs rotating. */
      SSL_CTX_set_session_cache_mode (ctx, SSL_SESS_CACHE_OFF);
      SSL_CTX_set_options (ctx, SSL_OP_NO_TICKET);
      SSL_CTX_set_num_tickets (ctx, 0);
    }
  else
    {
      if (files->ca_file == NULL && SSL_CTX_set_default_verify_paths (ctx) != 1)
        ERR_clear_error (); /* no system CAs: every server fails to verify */
      SSL_CTX_set_verify (
          ctx, files->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    }
  ERR_clear_error ();
  self = g_atomic_rc_box_new0 (RankTlsContext);
  self->ctx = ctx;
  self->server = server;
  return self;
}

RankTlsContext *
rank_tls_server_context_new (const RankTlsFiles *files, GError **error)
{
  return context_new (files, TRUE, error);
}

RankTlsContext *
rank_tls_client_context_new (const RankTlsFiles *files, GError **error)
{
  return context_new (files, FALSE, error);
}

RankTlsContext *
rank_tls_context_ref (RankTlsContext *ctx)
{
  return g_atomic_rc_box_acquire (ctx);
}

static void
context_clear (gpointer data)
{
  RankTlsContext *ctx = data;

  /* Sessions hold the SSL_CTX by OpenSSL's own count. */
  SSL_CTX_free (ctx->ctx);
}

void
rank_tls_context_unref (RankTlsContext *ctx)
{
  if (ctx != NULL)
    g_atomic_rc_box_release_full (ctx, context_clear);
}

/* Watches the socket BIO's reads: one that got less than it asked for
 * drained the socket (rank_tls_drained). */
static long
watch_reads (BIO *bio, int op, const char *argp, size_t len, int argi,
             long argl, int ret, size_t *processed)
{
  if (op == (BIO_CB_READ | BIO_CB_RETURN))
    {
      RankTlsSession *session = (RankTlsSession *) BIO_get_callback_arg (bio);

      session->short_read = ret > 0 && processed != NULL && *processed < len;
    }
  return ret;
}

RankTlsSession *
rank_tls_session_new (RankTlsContext *ctx, int fd, const char *server_name)
{
  RankTlsSession *self = g_new0 (RankTlsSession, 1);

  self->server = ctx->server;
  self->ssl = SSL_new (ctx->ctx);
  if (self->ssl == NULL || SSL_set_fd (self->ssl, fd) != 1)
    g_error ("SSL_new failed: out of memory");
  BIO_set_callback_ex (SSL_get_rbio (self->ssl), watch_reads);
  BIO_set_callback_arg (SSL_get_rbio (self->ssl), (char *) self);
  if (ctx->server)
    SSL_set_accept_state (self->ssl);
  else
    {
      SSL_set_connect_state (self->ssl);
      if (server_name != NULL)
        {
          /* SNI is for names; an address is checked as an address. */
          if (g_hostname_is_ip_address (server_name))
            X509_VERIFY_PARAM_set1_ip_asc (SSL_get0_param (self->ssl),
                                           server_name);
          else
            {
              SSL_set_tlsext_host_name (self->ssl, server_name);
              SSL_set1_host (self->ssl, server_name);
            }
        }
    }
  ERR_clear_error ();
  return self;
}

void
rank_tls_session_free (RankTlsSession *session)
{
  if (session == NULL)
    return;
  SSL_free (session->ssl);
  g_free (session);
}

/* What an SSL call's result ret means. */
static RankTlsStatus
status_of (RankTlsSession *session, int ret, const char *what, GError **error)
{
  int e = SSL_get_error (session->ssl, ret);
  long verify;

  switch (e)
    {
    case SSL_ERROR_WANT_READ:
      return RANK_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
      return RANK_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error ();
      return RANK_TLS_CLOSED;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error () == 0)
        {
          if (errno == 0 || errno == ECONNRESET || errno == EPIPE)
            {
              g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                           "%s: the peer closed the connection", what);
              return errno == 0 ? RANK_TLS_CLOSED : RANK_TLS_FAILED;
            }
          g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE, "%s: %s",
                       what, g_strerror (errno));
          return RANK_TLS_FAILED;
        }
      break;
    default:
      break;
    }
  verify = SSL_get_verify_result (session->ssl);
  if (verify != X509_V_OK && !SSL_is_init_finished (session->ssl))
    {
      ERR_clear_error ();
      g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                   "%s: certificate verify failed: %s", what,
                   X509_verify_cert_error_string (verify));
      return RANK_TLS_FAILED;
    }
  set_ssl_error (error, RANK_ERROR_UNAVAILABLE, what);
  return RANK_TLS_FAILED;
}

RankTlsStatus
rank_tls_handshake (RankTlsSession *session, GError **error)
{
  int ret;

  ERR_clear_error ();
  errno = 0;
  ret = SSL_do_handshake (session->ssl);
  if (ret == 1)
    return RANK_TLS_OK;
  return status_of (session, ret, "TLS handshake failed", error);
}

RankTlsStatus
rank_tls_read (RankTlsSession *session, void *buf, gsize len, gsize *got,
               GError **error)
{
  size_t n = 0;
  int ret;

  /* The error queue is empty here: every failure empties it (see
   * status_of), as SSL_get_error needs. */
  *got = 0;
  errno = 0;
  ret = SSL_read_ex (session->ssl, buf, len, &n);
  if (ret == 1)
    {
      *got = n;
      return RANK_TLS_OK;
    }
  return status_of (session, ret, "TLS read failed", error);
}

gboolean
rank_tls_drained (RankTlsSession *session)
{
  return session->short_read && !SSL_has_pending (session->ssl);
}

void
rank_tls_trim (RankTlsSession *session)
{
  /* Fails, harmlessly, while bytes are buffered. */
  (void) SSL_free_buffers (session->ssl);
}

gboolean
rank_tls_pending (RankTlsSession *session)
{
  /* Records read ahead count too, not only the decrypted bytes of one. */
  return SSL_has_pending (session->ssl);
}

/* Writes from buf through the session: RANK_TLS_OK with *done. */
static RankTlsStatus
write_some (RankTlsSession *session, const void *buf, gsize len, gsize *done,
            GError **error)
{
  size_t n = 0;
  int ret;

  errno = 0;
  ret = SSL_write_ex (session->ssl, buf, len, &n);
  *done = n;
  if (ret == 1)
    return RANK_TLS_OK;
  return status_of (session, ret, "TLS write failed", error);
}

RankTlsStatus
rank_tls_writev (RankTlsSession *session, const struct iovec *iov, int n,
                 gsize *wrote, GError **error)
{
  int i = 0;
  gsize skip = 0; /* of iov[i], already written */

  *wrote = 0;
  while (i < n)
    {
      const guint8 *head = (const guint8 *) iov[i].iov_base + skip;
      gsize head_len = iov[i].iov_len - skip, len = 0, done = 0;
      RankTlsStatus s;

      if (head_len == 0)
        {
          i++, skip = 0;
          continue;
        }
      if (head_len >= RANK_TLS_RECORD_BYTES)
        s = write_some (session, head, head_len, &done, error);
      else
        {
          guint8 *into = stage ();

          /* Small buffers (a pipeline's replies) go out together, one
           * record and one send for up to a record's worth, not one of
           * each per buffer. A write that stopped is repeated from the
           * same first bytes: copied again, as long or longer, which
           * OpenSSL accepts (the buffer may move and grow). */
          for (int j = i; j < n && len < RANK_TLS_RECORD_BYTES; j++)
            {
              const guint8 *p
                  = (const guint8 *) iov[j].iov_base + (j == i ? skip : 0);
              gsize take = MIN (iov[j].iov_len - (j == i ? skip : 0),
                                RANK_TLS_RECORD_BYTES - len);

              memcpy (into + len, p, take);
              len += take;
            }
          s = write_some (session, into, len, &done, error);
        }
      if (s != RANK_TLS_OK)
        return s; /* *wrote says what went; the caller comes back */
      *wrote += done;
      /* Step over what went. */
      while (done > 0 && i < n)
        {
          gsize left = iov[i].iov_len - skip;

          if (done < left)
            {
              skip += done;
              done = 0;
            }
          else
            {
              done -= left;
              i++, skip = 0;
            }
        }
    }
  return RANK_TLS_OK;
}

void
rank_tls_shutdown (RankTlsSession *session)
{
  ERR_clear_error ();
  if (SSL_is_init_finished (session->ssl))
    (void) SSL_shutdown (session->ssl);
  ERR_clear_error ();
}

/* The first subjectAltName of type in cert, as text. */
static char *
first_san (X509 *cert, int type)
{
  GENERAL_NAMES *names
      = X509_get_ext_d2i (cert, NID_subject_alt_name, NULL, NULL);
  char *out = NULL;

  for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num (names); i++)
    {
      const GENERAL_NAME *name = sk_GENERAL_NAME_value (names, i);
      const ASN1_STRING *s;

      if (name->type != type)
        continue;
      s = name->d.ia5;
      /* A name with a NUL inside is not a name: skip it. */
      if (memchr (ASN1_STRING_get0_data (s), 0, ASN1_STRING_length (s)) == NULL)
        {
          out = g_strndup ((const char *) ASN1_STRING_get0_data (s),
                           ASN1_STRING_length (s));
          break;
        }
    }
  GENERAL_NAMES_free (names);
  return out;
}

char *
rank_tls_peer_identity (RankTlsSession *session, RankTlsIdentity mode)
{
  X509 *cert = SSL_get1_peer_certificate (session->ssl);
  char *out = NULL;

  if (cert == NULL || SSL_get_verify_result (session->ssl) != X509_V_OK)
    {
      X509_free (cert);
      return NULL;
    }
  switch (mode)
    {
    case RANK_TLS_IDENTITY_CN:
      {
        X509_NAME *subject = X509_get_subject_name (cert);
        int at = X509_NAME_get_index_by_NID (subject, NID_commonName, -1);
        ASN1_STRING *s = at < 0 ? NULL
                                : X509_NAME_ENTRY_get_data (
                                    X509_NAME_get_entry (subject, at));
        unsigned char *utf8 = NULL;
        int len = s != NULL ? ASN1_STRING_to_UTF8 (&utf8, s) : -1;

        if (len > 0 && memchr (utf8, 0, (size_t) len) == NULL)
          out = g_strndup ((const char *) utf8, (gsize) len);
        OPENSSL_free (utf8);
        break;
      }
    case RANK_TLS_IDENTITY_DNS:
      out = first_san (cert, GEN_DNS);
      break;
    case RANK_TLS_IDENTITY_URI:
      out = first_san (cert, GEN_URI);
      break;
    case RANK_TLS_IDENTITY_EMAIL:
      out = first_san (cert, GEN_EMAIL);
      break;
    }
  X509_free (cert);
  if (out != NULL && !g_utf8_validate (out, -1, NULL))
    g_clear_pointer (&out, g_free);
  return out;
}

const char *
rank_tls_version (RankTlsSession *session)
{
  return SSL_get_version (session->ssl);
}
