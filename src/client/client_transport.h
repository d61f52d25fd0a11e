/* client_transport.h -- the blocking Thrift transport of rankd's own
 * clients: rankctl, the viewer, rank-bench and the tests.
 *
 * Replaces c_glib's socket + framed/buffered transports, which leak, copy
 * the wrong bytes when a frame spans reads, trust any frame length, send in
 * 512-byte pieces without TCP_NODELAY and let SIGPIPE kill the process.
 *
 * Framed mode: a 4-byte big-endian length, then the message. A frame is
 * read whole (0 < length <= max_frame, checked before anything is
 * allocated) before the protocol sees any of it; the protocol cannot read
 * past its end. Buffered mode: the bare message; at most max_frame bytes per
 * message. Each wait for the peer is bounded by the timeout; one write per
 * message, or per corked batch of messages.
 *
 * (rankd's own side of a connection is connbuf.h.)
 */
#ifndef RANK_CLIENT_TRANSPORT_H
#define RANK_CLIENT_TRANSPORT_H

#include <thrift/c_glib/transport/thrift_transport.h>

#include "thrift_fixes.h"
#include "tls.h"

G_BEGIN_DECLS

#define RANK_TYPE_CLIENT_TRANSPORT (rank_client_transport_get_type ())
G_DECLARE_FINAL_TYPE (RankClientTransport, rank_client_transport, RANK,
                      CLIENT_TRANSPORT, ThriftTransport)

/* Takes ownership of fd (closed on finalize); makes it blocking and sets
 * TCP_NODELAY where it applies. */
RankClientTransport *rank_client_transport_new (int fd, gboolean framed,
                                                guint32 max_frame);

/* Connects to host:port (TCP). timeout_ms bounds connect and each later
 * wait for the peer; 0 means no bound. Replies may be as large as
 * RANK_MAX_MAX_FRAME. */
RankClientTransport *
rank_client_transport_connect (const char *host, guint16 port, gboolean framed,
                               int timeout_ms, GError **error);

/* The same over TLS when tls is not NULL (plain TCP when it is): the
 * handshake runs within timeout_ms, then every message goes through the
 * session. server_name is the name (or IP address) the server's certificate
 * must carry and the SNI sent; NULL or "": host. Whether the server's
 * certificate is checked at all, and the client's own certificate, are the
 * context's (rank_tls_client_context_new). The socket is non-blocking
 * then, each wait a poll. A refusal the server sends after the handshake
 * (TLS 1.3 checks a client certificate there) fails the first read, with
 * a note that the server refused or wants a client certificate. OpenSSL
 * writes with write(2), so the first TLS connection sets SIGPIPE to be
 * ignored, unless the process has a handler of its own. */
RankClientTransport *rank_client_transport_connect_tls (
    const char *host, guint16 port, gboolean framed, int timeout_ms,
    RankTlsContext *tls, const char *server_name, GError **error);

/* Bound on each wait for the peer (0: none). */
void rank_client_transport_set_timeout (RankClientTransport *self,
                                        int timeout_ms);

/* After cork, flush keeps each message; uncork sends them all in one
 * write. For pipelining calls of the generated client. */
void rank_client_transport_cork (RankClientTransport *self);
gboolean rank_client_transport_uncork (RankClientTransport *self,
                                       GError **error);

/* Starts reading the next message (framed: reads the whole frame). Reads
 * do this by themselves; tests call it to see a frame refused. */
gboolean rank_client_transport_begin_message (RankClientTransport *self,
                                              GError **error);

/* Framed: the bytes of the message begun by begin_message, all of its
 * frame, for a reader of its own (NULL in buffered mode);
 * end_message then drops them. */
const guint8 *rank_client_transport_message (RankClientTransport *self,
                                             gsize *len);
void rank_client_transport_end_message (RankClientTransport *self);
/* Bytes the protocol may still read from the current message. */
gsize rank_client_transport_remaining (RankClientTransport *self);

/* Bytes of memory held by buffers (for tests). */
gsize rank_client_transport_memory (RankClientTransport *self);

G_END_DECLS

#endif /* RANK_CLIENT_TRANSPORT_H */
