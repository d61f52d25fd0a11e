/* redis_tls.h -- how rankd's links to Redis speak TLS ([redis] tls,
 * --redis-tls): the client context made from the configured files, and the
 * name each node's certificate must carry.
 *
 * One is made at start (files that do not load fail the start) and shared
 * by every link of every worker, each holding a reference. A reload
 * (SIGHUP) reads the files again: connections made from then on use them,
 * open ones keep the session they have. A unix-socket node (the embedded
 * Redis) never speaks TLS, whatever this says.
 */
#ifndef RANK_REDIS_TLS_H
#define RANK_REDIS_TLS_H

#include <glib.h>

#include "tls.h"

typedef struct _RankRedisTls RankRedisTls;

typedef struct
{
  const char *ca_file;   /* NULL: the system's CAs */
  const char *cert_file; /* client certificate and key, both or neither */
  const char *key_file;
  /* The name every node's certificate must carry; NULL: each node's host
   * as given (an IP address is checked as an IP subjectAltName). */
  const char *server_name;
} RankRedisTlsOptions;

/* Loads the files (copied paths); NULL with error (RANK_ERROR_INVALID,
 * naming the file) when one does not load. */
RankRedisTls *rank_redis_tls_new (const RankRedisTlsOptions *options,
                                  GError **error);

/* Reads the files again (any thread); on failure the old context stays
 * and error says why. */
gboolean rank_redis_tls_reload (RankRedisTls *tls, GError **error);

RankRedisTls *rank_redis_tls_ref (RankRedisTls *tls);
void rank_redis_tls_unref (RankRedisTls *tls);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (RankRedisTls, rank_redis_tls_unref)

/* A client session on fd for the node host, with the current context
 * (any thread). */
RankTlsSession *rank_redis_tls_session (RankRedisTls *tls, int fd,
                                        const char *host);

#endif /* RANK_REDIS_TLS_H */
