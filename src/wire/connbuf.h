/* connbuf.h -- the server side's connection buffers: the bytes rankd has
 * received on a connection and not yet decoded, and the reply each call
 * encodes into a buffer of its own.
 *
 * Both are c_glib transports, so that the generated structs and the c_glib
 * protocols read requests and write replies through them; neither touches a
 * socket on its own (server.c does: one recv per readable event, one writev
 * of every ready reply before the loop sleeps).
 *
 * RankRequestReader, framed: a 4-byte big-endian length, then the message.
 * A frame is decoded only once it is buffered whole, and its length is
 * checked (1..max_frame) before a byte of it is buffered or allocated; the
 * protocol cannot read past its end. Buffered (unframed): the bare message,
 * at most max_frame bytes; a read that needs bytes not received yet fails,
 * rank_request_reader_starved() says so, and the message is decoded again
 * from its start when more arrive.
 *
 * RankReplyWriter: writes append to the buffer given to
 * rank_reply_writer_begin (after a 4-byte length when framed, filled in by
 * the flush that ends the message). Replies have no cap but
 * RANK_REPLY_MAX_BYTES, which the documented limits never reach: a request
 * frame cap and a reply's size are different limits.
 */
#ifndef RANK_CONNBUF_H
#define RANK_CONNBUF_H

#include <thrift/c_glib/transport/thrift_transport.h>

#include "thrift_fixes.h"

G_BEGIN_DECLS

typedef enum
{
  RANK_IO_OK,     /* done, or nothing more to read now */
  RANK_IO_AGAIN,  /* output left: wait until the socket is writable */
  RANK_IO_CLOSED, /* the peer closed */
  RANK_IO_FAILED, /* the socket failed (errno) */
} RankIoResult;

#define RANK_TYPE_REQUEST_READER (rank_request_reader_get_type ())
G_DECLARE_FINAL_TYPE (RankRequestReader, rank_request_reader, RANK,
                      REQUEST_READER, ThriftTransport)

RankRequestReader *rank_request_reader_new (gboolean framed, guint32 max_frame);

/* Receives what the socket fd has now (it is non-blocking), stopping once
 * more than a whole largest frame is buffered. */
RankIoResult rank_request_reader_receive (RankRequestReader *self, int fd);

/* For bytes that come through something else than recv (a TLS session,
 * whose reads return a record at most, so that a short read does not mean
 * the socket is drained): the room to receive into, at least half a
 * RANK_CONN_BUFFER_BYTES (valid until the next call on self), *room its
 * size; NULL once more than a whole largest frame is buffered (enough to
 * go on with: read the rest after decoding). rank_request_reader_commit
 * then counts the n bytes written there. */
guint8 *rank_request_reader_space (RankRequestReader *self, gsize *room);
void rank_request_reader_commit (RankRequestReader *self, gsize n);

/* Takes bytes that did not come from a socket (tests, tools). */
void rank_request_reader_feed (RankRequestReader *self, const guint8 *bytes,
                               gsize len);

/* Bytes received and not yet decoded. */
gsize rank_request_reader_buffered (RankRequestReader *self);

/* Those bytes, where they lie (valid until the next receive or feed);
 * *len: how many. NULL, with *len 0, before any byte was received. */
const guint8 *rank_request_reader_peek (RankRequestReader *self, gsize *len);

/* TRUE when a whole request is buffered (framed), or any bytes are
 * (buffered: decoding tells). FALSE with error set for a frame length
 * outside 1..max_frame. */
gboolean rank_request_reader_ready (RankRequestReader *self, GError **error);

/* Starts decoding the next message (framed: the whole frame, checked). */
gboolean rank_request_reader_begin (RankRequestReader *self, GError **error);

/* The last read failed only for want of bytes (buffered mode): rewind to
 * the message's start and decode it again when more arrive. */
gboolean rank_request_reader_starved (RankRequestReader *self);
void rank_request_reader_rewind (RankRequestReader *self);

/* Drops what is left of the current message. */
void rank_request_reader_skip (RankRequestReader *self);

/* Bytes the protocol may still read from the current message. */
gsize rank_request_reader_remaining (RankRequestReader *self);

/* The message's next n (> 0) bytes where they lie in the buffer (valid
 * until the next feed), read; NULL, with nothing read, when a read of n
 * would fail or come short: the transport's read then says why. */
const guint8 *rank_request_reader_take (RankRequestReader *self, guint32 n);

/* Bytes of memory held (for tests of per-connection cost). */
gsize rank_request_reader_memory (RankRequestReader *self);

#define RANK_TYPE_REPLY_WRITER (rank_reply_writer_get_type ())
G_DECLARE_FINAL_TYPE (RankReplyWriter, rank_reply_writer, RANK, REPLY_WRITER,
                      ThriftTransport)

RankReplyWriter *rank_reply_writer_new (gboolean framed);

/* Messages written from now on go to into, which the caller owns; the
 * flush that ends a message finishes its frame. Writing past
 * RANK_REPLY_MAX_BYTES fails (THRIFT_TRANSPORT_ERROR_SEND). */
void rank_reply_writer_begin (RankReplyWriter *self, GByteArray *into);

G_END_DECLS

#endif /* RANK_CONNBUF_H */
