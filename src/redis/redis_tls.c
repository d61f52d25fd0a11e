/* redis_tls.c -- the TLS settings of the links to Redis (see redis_tls.h).
 *
 * The context is swapped under a lock on reload; a session made from it
 * holds the context's SSL_CTX by OpenSSL's own count, so the old one lives
 * as long as a connection uses it.
 */
#include "redis_tls.h"

struct _RankRedisTls
{
  gatomicrefcount ref;
  char *ca_file;
  char *cert_file;
  char *key_file;
  char *server_name;
  GMutex lock;
  RankTlsContext *context; /* under lock */
};

static RankTlsContext *
load (RankRedisTls *tls, GError **error)
{
  RankTlsFiles files = {
    .ca_file = tls->ca_file,
    .cert_file = tls->cert_file,
    .key_file = tls->key_file,
  };

  return rank_tls_client_context_new (&files, error);
}

RankRedisTls *
rank_redis_tls_new (const RankRedisTlsOptions *options, GError **error)
{
  RankRedisTls *tls = g_new0 (RankRedisTls, 1);

  g_atomic_ref_count_init (&tls->ref);
  tls->ca_file = g_strdup (options->ca_file);
  tls->cert_file = g_strdup (options->cert_file);
  tls->key_file = g_strdup (options->key_file);
  tls->server_name = g_strdup (options->server_name);
  g_mutex_init (&tls->lock);
  tls->context = load (tls, error);
  if (tls->context == NULL)
    {
      rank_redis_tls_unref (tls);
      return NULL;
    }
  return tls;
}

gboolean
rank_redis_tls_reload (RankRedisTls *tls, GError **error)
{
  RankTlsContext *fresh = load (tls, error), *old;

  if (fresh == NULL)
    return FALSE;
  g_mutex_lock (&tls->lock);
  old = tls->context;
  tls->context = fresh;
  g_mutex_unlock (&tls->lock);
  rank_tls_context_unref (old);
  return TRUE;
}

RankRedisTls *
rank_redis_tls_ref (RankRedisTls *tls)
{
  g_atomic_ref_count_inc (&tls->ref);
  return tls;
}

void
rank_redis_tls_unref (RankRedisTls *tls)
{
  if (tls == NULL || !g_atomic_ref_count_dec (&tls->ref))
    return;
  rank_tls_context_unref (tls->context);
  g_mutex_clear (&tls->lock);
  g_free (tls->ca_file);
  g_free (tls->cert_file);
  g_free (tls->key_file);
  g_free (tls->server_name);
  g_free (tls);
}

RankTlsSession *
rank_redis_tls_session (RankRedisTls *tls, int fd, const char *host)
{
  RankTlsSession *session;

  g_mutex_lock (&tls->lock);
  session = rank_tls_session_new (
      tls->context, fd, tls->server_name != NULL ? tls->server_name : host);
  g_mutex_unlock (&tls->lock);
  return session;
}
