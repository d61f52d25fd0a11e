/* wire.h -- what a connection's first bytes speak: Thrift in which
 * transport and protocol, HTTP, or neither.
 *
 * A client set up for another transport or protocol than the port's
 * (the Thrift tutorials' buffered transport against rankd's framed
 * default; compact against binary) would otherwise get only "No more data
 * to read" and rankd would log nothing: the server (server.c) tells it
 * from the first bytes, logs it, and answers in the client's own framing
 * and protocol where those can be told.
 *
 * The first bytes of each (a Thrift message starts with its protocol's
 * mark, strict binary 0x80 0x01 and compact 0x82; a frame with a 4-byte
 * length before it, whose first byte is at most 4 for any frame rankd
 * takes):
 *   framed binary      L L L L 80 01     unframed binary  80 01
 *   framed compact     L L L L 82        unframed compact 82
 *   HTTP               a method name and a space ("GET ", "POST ", ...)
 *   TLS                16 03 (a handshake record, TLS 1.x or SSL 3)
 */
#ifndef RANK_WIRE_H
#define RANK_WIRE_H

#include <glib.h>

#include "protocol.h"

G_BEGIN_DECLS

typedef enum
{
  RANK_WIRE_MORE,    /* too few bytes to tell yet */
  RANK_WIRE_THRIFT,  /* framed and protocol say which */
  RANK_WIRE_HTTP,    /* an HTTP request */
  RANK_WIRE_TLS,     /* a TLS record: a client set up for TLS */
  RANK_WIRE_UNKNOWN, /* none of these */
} RankWireKind;

/* Enough bytes to tell any of them. */
#define RANK_WIRE_SNIFF_BYTES 8

/* What the first len bytes at bytes speak; for RANK_WIRE_THRIFT, *framed
 * and *protocol say how. A frame length outside 1..max_frame is no frame
 * (RANK_WIRE_UNKNOWN: decoding refuses it at once). */
RankWireKind rank_wire_sniff (const guint8 *bytes, gsize len, guint32 max_frame,
                              gboolean *framed, RankProtocolKind *protocol);

/* "framed binary", "buffered compact", ...: static. */
const char *rank_wire_name (gboolean framed, RankProtocolKind protocol);

/* The bytes that answer the Thrift message at the start of bytes (len),
 * sent in framed and protocol, with a TApplicationException of message, in
 * that same framing and protocol: the call's name and seqid when its
 * header can be read, else "" and 0 (clients read an exception before
 * they compare names). NULL if it cannot be written. */
GByteArray *rank_wire_exception (const guint8 *bytes, gsize len,
                                 gboolean framed, RankProtocolKind protocol,
                                 const char *message);

/* Which of those to log (constants.h: RANK_WIRE_LOG_*): bounded memory,
 * bounded lines. Any thread. */
typedef struct _RankWireLog RankWireLog;

RankWireLog *rank_wire_log_new (void);
void rank_wire_log_free (RankWireLog *log);

/* Whether a mismatch of peer (an address, without its port) speaking
 * spoke is to be logged at now_us (monotonic); counts it if so. */
gboolean rank_wire_log_admit (RankWireLog *log, const char *peer,
                              const char *spoke, gint64 now_us);

G_END_DECLS

#endif /* RANK_WIRE_H */
