/* transport.h -- rankd's Thrift transport: one socket, one read buffer, one
 * write per message.
 *
 * Replaces c_glib's socket + framed/buffered transports, which leak, copy
 * the wrong bytes when a frame spans reads, trust any frame length, send in
 * 512-byte pieces without TCP_NODELAY and let SIGPIPE kill the process.
 *
 * Framed mode: a 4-byte big-endian length, then the message. A frame is
 * read whole (0 < length <= max_frame, checked before anything is
 * allocated) before the protocol sees any of it; the protocol cannot read
 * past its end. Buffered mode: the bare message; at most max_frame bytes per
 * message.
 *
 * The same class serves both ends: rankd's connections and the C clients
 * (tests, bench, rankctl).
 */
#ifndef RANK_TRANSPORT_H
#define RANK_TRANSPORT_H

#include <thrift/c_glib/transport/thrift_transport.h>

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftTransport, g_object_unref)

#define RANK_TYPE_TRANSPORT (rank_transport_get_type ())
G_DECLARE_FINAL_TYPE (RankTransport, rank_transport, RANK, TRANSPORT,
                      ThriftTransport)

typedef enum
{
  RANK_IO_OK,     /* done, or nothing more to read now */
  RANK_IO_AGAIN,  /* output left: wait until the socket is writable */
  RANK_IO_CLOSED, /* the peer closed */
  RANK_IO_FAILED, /* the socket failed (errno) */
} RankIoResult;

/* Takes ownership of fd (closed on finalize); makes it non-blocking and sets
 * TCP_NODELAY where it applies. */
RankTransport *rank_transport_new (int fd, gboolean framed, guint32 max_frame);

/* Connects a client transport to host:port (TCP). timeout_ms bounds connect
 * and each later wait for the peer; 0 means no bound. */
RankTransport *rank_transport_connect (const char *host, guint16 port,
                                       gboolean framed, int timeout_ms,
                                       GError **error);

/* For an event loop: reads and writes never wait. A read that needs bytes
 * not yet received fails and rank_transport_starved() says so; a reply the
 * socket does not take at once stays pending. */
RankTransport *rank_transport_new_event_driven (int fd, gboolean framed,
                                                guint32 max_frame);

/* Event-driven: receives what the socket has. */
RankIoResult rank_transport_receive (RankTransport *self);

/* Event-driven: TRUE when a whole request is buffered (framed), or any
 * bytes are (buffered: decoding tells). FALSE with error set for a frame
 * length outside 1..max_frame. */
gboolean rank_transport_message_ready (RankTransport *self, GError **error);

/* Event-driven: the last read failed only for want of bytes; rewind and
 * try again when more arrive. */
gboolean rank_transport_starved (RankTransport *self);
void rank_transport_rewind_message (RankTransport *self);
gsize rank_transport_buffered_input (RankTransport *self);

/* Event-driven: a flushed message is pending until this sends it (the
 * server does once per loop iteration); RANK_IO_AGAIN if some remains. */
RankIoResult rank_transport_send_pending (RankTransport *self);
gboolean rank_transport_output_pending (RankTransport *self);
gsize rank_transport_output_bytes (RankTransport *self);

/* Event-driven: while into is not NULL, flushed messages go to into instead
 * of the pending output (a reply that must wait for an earlier one). */
void rank_transport_capture (RankTransport *self, GByteArray *into);
/* Event-driven: appends bytes (a captured reply) to the pending output. */
void rank_transport_queue_output (RankTransport *self, const guint8 *data,
                                  gsize len);
/* Drops a message written in part (its write failed). */
void rank_transport_discard_write (RankTransport *self);

/* Blocking (clients): after cork, flush keeps each message; uncork sends
 * them all in one write. For pipelining calls of the generated client. */
void rank_transport_cork (RankTransport *self);
gboolean rank_transport_uncork (RankTransport *self, GError **error);

/* Blocking mode: bound on each wait for the peer (0: none). */
void rank_transport_set_timeout (RankTransport *self, int timeout_ms);

/* Server side: starts the next message (framed: reads the whole frame). */
gboolean rank_transport_begin_message (RankTransport *self, GError **error);

/* Drops what is left of the current message and any unsent reply. */
void rank_transport_abort_message (RankTransport *self);

/* Bytes the protocol may still read from the current message. */
gsize rank_transport_remaining (RankTransport *self);

/* Bytes of memory held by buffers (for tests of per-connection cost). */
gsize rank_transport_buffer_bytes (RankTransport *self);

G_END_DECLS

#endif /* RANK_TRANSPORT_H */
