/* client.h -- a Ranking client over rankd's own transport and protocols.
 *
 * For C callers of rankd (the tests, rank-bench, rankctl): the generated
 * client on top of RankClientTransport, which unlike c_glib's stock socket and
 * framed transports neither leaks nor stalls on replies over 512 bytes.
 */
#ifndef RANK_CLIENT_H
#define RANK_CLIENT_H

#include "client_transport.h"
#include "protocol.h"
#include "rank_ranking.h"

typedef struct _RankClient RankClient;

/* timeout_ms bounds the connect and every wait for rankd (0: none). */
RankClient *rank_client_connect (const char *host, guint16 port,
                                 gboolean framed, RankProtocolKind protocol,
                                 int timeout_ms, GError **error);

/* The same over TLS when tls is not NULL (see
 * rank_client_transport_connect_tls): the handshake within timeout_ms, the
 * server's certificate checked against server_name (NULL: host). Make tls
 * once with rank_tls_client_context_new and share it among connections and
 * threads; the client holds a reference. */
RankClient *rank_client_connect_tls (const char *host, guint16 port,
                                     gboolean framed, RankProtocolKind protocol,
                                     int timeout_ms, RankTlsContext *tls,
                                     const char *server_name, GError **error);

/* A new connection to the same rankd, as client's was made (TLS too). */
RankClient *rank_client_connect_again (const RankClient *client,
                                       GError **error);

/* The generated interface: rank_ranking_if_update (iface, ...), etc. */
rankRankingIf *rank_client_iface (RankClient *client);

/* Its transport (cork and uncork it to pipeline calls). */
RankClientTransport *rank_client_get_transport (RankClient *client);

void rank_client_free (RankClient *client);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (RankClient, rank_client_free)

#endif /* RANK_CLIENT_H */
