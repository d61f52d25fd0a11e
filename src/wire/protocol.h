/* protocol.h -- c_glib's binary and compact protocols with limits.
 *
 * The stock 0.17 protocols allocate whatever a length prefix claims, skip
 * unknown fields with unbounded recursion and accept unversioned binary
 * headers with an uninitialised message type. These subclasses check every
 * string and container size against what is left of the message (the
 * transport knows) before allocating, cap nesting at RANK_MAX_NESTING, and
 * require strict message headers.
 *
 * Strings: an embedded NUL byte would silently truncate a C string, so it is
 * replaced by 0xFF (never valid UTF-8) and validation refuses the field.
 */
#ifndef RANK_PROTOCOL_H
#define RANK_PROTOCOL_H

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/protocol/thrift_compact_protocol.h>

#include <thrift/c_glib/thrift_application_exception.h>
#include <thrift/c_glib/transport/thrift_transport.h>

#include "thrift_fixes.h"

G_BEGIN_DECLS

typedef enum
{
  RANK_PROTOCOL_BINARY,
  RANK_PROTOCOL_COMPACT,
} RankProtocolKind;

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftBinaryProtocol, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftCompactProtocol, g_object_unref)

#define RANK_TYPE_BINARY_PROTOCOL (rank_binary_protocol_get_type ())
G_DECLARE_FINAL_TYPE (RankBinaryProtocol, rank_binary_protocol, RANK,
                      BINARY_PROTOCOL, ThriftBinaryProtocol)

#define RANK_TYPE_COMPACT_PROTOCOL (rank_compact_protocol_get_type ())
G_DECLARE_FINAL_TYPE (RankCompactProtocol, rank_compact_protocol, RANK,
                      COMPACT_PROTOCOL, ThriftCompactProtocol)

/* A protocol of the given kind over transport (which it references): a
 * RankRequestReader, a RankReplyWriter, or a transport registered with
 * rank_protocol_register_sized (a client's). */
ThriftProtocol *rank_protocol_new (RankProtocolKind kind,
                                   ThriftTransport *transport);

/* What is left of the message a transport is reading, in bytes. */
typedef gsize (*RankRemainingFunc) (ThriftTransport *transport);

/* Protocols made from now on over a transport of transport_type (or a
 * subtype) check every size read against fn: the client side registers
 * its transport here, so this layer needs no client code. */
void rank_protocol_register_sized (GType transport_type, RankRemainingFunc fn);

/* Parses "binary" or "compact". */
gboolean rank_protocol_kind_parse (const char *name, RankProtocolKind *kind);

/* Reads a struct without a generated one: field is called for each field
 * (its type and id) and reads it, or skips it (rank_protocol_skip). */
typedef gboolean (*RankFieldFunc) (ThriftProtocol *in, ThriftType type,
                                   gint16 id, gpointer data, GError **error);
gboolean rank_protocol_read_struct (ThriftProtocol *in, RankFieldFunc field,
                                    gpointer data, GError **error);

/* Skips a value of type. */
gboolean rank_protocol_skip (ThriftProtocol *in, ThriftType type,
                             GError **error);

/* Writes a whole message: a TApplicationException of type with message, in
 * answer to the call method (seqid), and flushes it (which ends a
 * RankReplyWriter's frame). */
gboolean rank_protocol_write_exception (ThriftProtocol *out, const char *method,
                                        gint32 seqid,
                                        ThriftApplicationExceptionError type,
                                        const char *message, GError **error);

/* v's low bytes, big-endian as the binary protocol writes numbers, at p;
 * returns p past them (for the replies and requests written in one
 * piece). Inline: with bytes a constant, the loop folds into a few
 * stores, where the call was 2.5k of rankd's instructions per GetTopN(10)
 * (callgrind). */
static inline guint8 *
rank_put_be (guint8 *p, guint64 v, int bytes)
{
  for (int i = bytes - 1; i >= 0; i--)
    *p++ = (guint8) (v >> (8 * i));
  return p;
}

/* The number in bytes big-endian bytes at p, as rank_put_be wrote it. */
static inline guint64
rank_get_be (const guint8 *p, int bytes)
{
  guint64 v = 0;

  for (int i = 0; i < bytes; i++)
    v = v << 8 | p[i];
  return v;
}

G_END_DECLS

#endif /* RANK_PROTOCOL_H */
