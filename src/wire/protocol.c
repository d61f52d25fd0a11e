/* protocol.c -- size- and depth-limited binary and compact protocols
 * (see protocol.h).
 *
 * Every size read off the wire is checked against
 * rank_transport_remaining() before memory is allocated for it: a string can
 * never be longer than the bytes left in its message, a container never has
 * more elements than bytes left. Depth counts structs and containers being
 * read; it is reset at each message header, so an error half-way through a
 * message cannot leak into the next one.
 */
#include "protocol.h"

#include <string.h>

#include "connbuf.h"
#include "constants.h"

struct _RankBinaryProtocol
{
  ThriftBinaryProtocol parent;
  guint depth;
  /* The transport, when it is rankd's request buffer: integers and
   * strings are then read where they lie, not through the transport's
   * virtual read (a third of rankd's instructions per imported entry, most
   * of it GObject's type checks, callgrind). NULL: read through it. */
  RankRequestReader *reader;
  RankRemainingFunc remaining; /* the transport's, when not a reader */
};

struct _RankCompactProtocol
{
  ThriftCompactProtocol parent;
  guint depth;
  RankRemainingFunc remaining;
};

/* Transport types that say what is left of their message (a client's,
 * registered by its class): GType -> RankRemainingFunc. */
static GHashTable *sized_types;
G_LOCK_DEFINE_STATIC (sized_types);

G_DEFINE_TYPE (RankBinaryProtocol, rank_binary_protocol,
               THRIFT_TYPE_BINARY_PROTOCOL)
G_DEFINE_TYPE (RankCompactProtocol, rank_compact_protocol,
               THRIFT_TYPE_COMPACT_PROTOCOL)

#define BINARY_VERSION_MASK 0xffff0000u
#define BINARY_VERSION_1 0x80010000u

static guint *
depth_of (ThriftProtocol *protocol)
{
  if (RANK_IS_BINARY_PROTOCOL (protocol))
    return &RANK_BINARY_PROTOCOL (protocol)->depth;
  return &RANK_COMPACT_PROTOCOL (protocol)->depth;
}

/* What is left of the message being read: rankd reads requests through
 * its connection buffers, its clients replies through a transport that
 * registered how it knows (rank_protocol_register_sized). Any other
 * transport (a memory buffer in a test) sets no bound. */
static gsize
remaining (ThriftProtocol *protocol)
{
  ThriftTransport *t = protocol->transport;
  RankRemainingFunc fn;

  /* rankd's requests first: that test is all the server path pays. */
  if (RANK_IS_REQUEST_READER (t))
    return rank_request_reader_remaining (RANK_REQUEST_READER (t));
  fn = RANK_IS_BINARY_PROTOCOL (protocol)
           ? RANK_BINARY_PROTOCOL (protocol)->remaining
           : RANK_COMPACT_PROTOCOL (protocol)->remaining;
  return fn != NULL ? fn (t) : G_MAXSIZE;
}

static gboolean
enter (ThriftProtocol *protocol, GError **error)
{
  guint *depth = depth_of (protocol);

  if (*depth >= RANK_MAX_NESTING)
    {
      g_set_error (
          error, THRIFT_PROTOCOL_ERROR, THRIFT_PROTOCOL_ERROR_DEPTH_LIMIT,
          "structs and containers nested deeper than %d", RANK_MAX_NESTING);
      return FALSE;
    }
  (*depth)++;
  return TRUE;
}

static void
leave (ThriftProtocol *protocol)
{
  guint *depth = depth_of (protocol);

  if (*depth > 0)
    (*depth)--;
}

/* Checks that count elements of at least min_bytes each can still be in the
 * message. */
static gboolean
check_count (ThriftProtocol *protocol, gint64 count, gint64 min_bytes,
             GError **error)
{
  if (count < 0)
    {
      g_set_error (error, THRIFT_PROTOCOL_ERROR,
                   THRIFT_PROTOCOL_ERROR_NEGATIVE_SIZE,
                   "negative size %" G_GINT64_FORMAT, count);
      return FALSE;
    }
  if ((guint64) (count * min_bytes) > remaining (protocol))
    {
      g_set_error (error, THRIFT_PROTOCOL_ERROR,
                   THRIFT_PROTOCOL_ERROR_SIZE_LIMIT,
                   "size %" G_GINT64_FORMAT
                   " claims more than the %zu bytes left in the message",
                   count, remaining (protocol));
      return FALSE;
    }
  return TRUE;
}

/* The next n bytes of a request, in rankd's buffer; NULL: read them
 * through the transport, which says why they are not there. */
static inline const guint8 *
take (ThriftProtocol *protocol, guint32 n)
{
  RankRequestReader *r
      = G_TYPE_CHECK_INSTANCE_TYPE (protocol, RANK_TYPE_BINARY_PROTOCOL)
            ? ((RankBinaryProtocol *) protocol)->reader
            : NULL;

  return r != NULL ? rank_request_reader_take (r, n) : NULL;
}

/* Reads len bytes of a string or binary whose length was already read. */
static gint32
read_body (ThriftProtocol *protocol, gint64 len, gboolean text, gpointer *out,
           GError **error)
{
  guint8 *buf;
  guint32 n;

  if (!check_count (protocol, len, 1, error))
    return -1;
  /* check_count refused negative lengths and the caller read an i32; say so
   * where the optimiser can see it. */
  if (len < 0 || len > G_MAXINT32)
    return -1;
  n = (guint32) len;
  buf = g_malloc ((gsize) n + 1);
  if (n > 0)
    {
      const guint8 *src = take (protocol, n);

      if (src != NULL)
        memcpy (buf, src, n);
      else if (thrift_transport_read_all (protocol->transport, buf, n, error)
               < 0)
        {
          g_free (buf);
          return -1;
        }
    }
  buf[n] = '\0';
  if (text)
    for (guint8 *p = memchr (buf, 0, n); p != NULL;
         p = memchr (p, 0, (gsize) (buf + n - p)))
      *p = 0xff;
  *out = buf;
  return (gint32) n;
}

/* ---- binary ---- */

static gint32
binary_read_string (ThriftProtocol *protocol, gchar **str, GError **error)
{
  gint32 len, ret;

  *str = NULL;
  if (thrift_protocol_read_i32 (protocol, &len, error) < 0)
    return -1;
  ret = read_body (protocol, len, TRUE, (gpointer *) str, error);
  return ret < 0 ? -1 : ret + 4;
}

static gint32
binary_read_binary (ThriftProtocol *protocol, gpointer *buf, guint32 *len,
                    GError **error)
{
  gint32 n, ret;

  *buf = NULL;
  *len = 0;
  if (thrift_protocol_read_i32 (protocol, &n, error) < 0)
    return -1;
  if (n == 0)
    return 4;
  ret = read_body (protocol, n, FALSE, buf, error);
  if (ret < 0)
    return -1;
  *len = (guint32) n;
  return ret + 4;
}

static gint32
binary_read_message_begin (ThriftProtocol *protocol, gchar **name,
                           ThriftMessageType *type, gint32 *seqid,
                           GError **error)
{
  gint32 header, ret, xfer;

  *name = NULL;
  RANK_BINARY_PROTOCOL (protocol)->depth = 0;
  if (thrift_protocol_read_i32 (protocol, &header, error) < 0)
    return -1;
  if (header >= 0
      || ((guint32) header & BINARY_VERSION_MASK) != BINARY_VERSION_1)
    {
      g_set_error (error, THRIFT_PROTOCOL_ERROR,
                   THRIFT_PROTOCOL_ERROR_BAD_VERSION,
                   "not a strict binary-protocol message header (0x%08x)",
                   (guint32) header);
      return -1;
    }
  *type = (ThriftMessageType) ((guint32) header & 0xff);
  if ((ret = binary_read_string (protocol, name, error)) < 0)
    return -1;
  xfer = 4 + ret;
  if (thrift_protocol_read_i32 (protocol, seqid, error) < 0)
    {
      g_clear_pointer (name, g_free);
      return -1;
    }
  return xfer + 4;
}

#define BINARY_PARENT THRIFT_PROTOCOL_CLASS (rank_binary_protocol_parent_class)

/* Integers as ThriftBinaryProtocol reads them (big-endian), from rankd's
 * buffer when they are there; the parent's read otherwise. */
static gint32
binary_read_byte (ThriftProtocol *protocol, gint8 *value, GError **error)
{
  const guint8 *p = take (protocol, 1);

  if (p == NULL)
    return BINARY_PARENT->read_byte (protocol, value, error);
  *value = (gint8) p[0];
  return 1;
}

static gint32
binary_read_bool (ThriftProtocol *protocol, gboolean *value, GError **error)
{
  const guint8 *p = take (protocol, 1);

  if (p == NULL)
    return BINARY_PARENT->read_bool (protocol, value, error);
  *value = p[0] != 0;
  return 1;
}

static gint32
binary_read_i16 (ThriftProtocol *protocol, gint16 *value, GError **error)
{
  const guint8 *p = take (protocol, 2);

  if (p == NULL)
    return BINARY_PARENT->read_i16 (protocol, value, error);
  *value = (gint16) rank_get_be (p, 2);
  return 2;
}

static gint32
binary_read_i32 (ThriftProtocol *protocol, gint32 *value, GError **error)
{
  const guint8 *p = take (protocol, 4);

  if (p == NULL)
    return BINARY_PARENT->read_i32 (protocol, value, error);
  *value = (gint32) rank_get_be (p, 4);
  return 4;
}

static gint32
binary_read_i64 (ThriftProtocol *protocol, gint64 *value, GError **error)
{
  const guint8 *p = take (protocol, 8);

  if (p == NULL)
    return BINARY_PARENT->read_i64 (protocol, value, error);
  *value = (gint64) rank_get_be (p, 8);
  return 8;
}

/* As ThriftBinaryProtocol's: a type, then (but for T_STOP) an id. */
static gint32
binary_read_field_begin (ThriftProtocol *protocol, gchar **name,
                         ThriftType *field_type, gint16 *field_id,
                         GError **error)
{
  gint8 type;

  (void) name;
  if (binary_read_byte (protocol, &type, error) < 0)
    return -1;
  *field_type = (ThriftType) type;
  if (*field_type == T_STOP)
    {
      *field_id = 0;
      return 1;
    }
  return binary_read_i16 (protocol, field_id, error) < 0 ? -1 : 3;
}

static gint32
binary_read_struct_begin (ThriftProtocol *protocol, gchar **name,
                          GError **error)
{
  *name = NULL;
  return enter (protocol, error) ? 0 : -1;
}

static gint32
binary_read_struct_end (ThriftProtocol *protocol, GError **error)
{
  (void) error;
  leave (protocol);
  return 0;
}

static gint32
binary_read_list_begin (ThriftProtocol *protocol, ThriftType *element_type,
                        guint32 *size, GError **error)
{
  gint8 type;
  gint32 n;

  if (thrift_protocol_read_byte (protocol, &type, error) < 0
      || thrift_protocol_read_i32 (protocol, &n, error) < 0
      || !check_count (protocol, n, 1, error) || !enter (protocol, error))
    return -1;
  *element_type = (ThriftType) type;
  *size = (guint32) n;
  return 5;
}

static gint32
binary_read_container_end (ThriftProtocol *protocol, GError **error)
{
  (void) error;
  leave (protocol);
  return 0;
}

static gint32
binary_read_map_begin (ThriftProtocol *protocol, ThriftType *key_type,
                       ThriftType *value_type, guint32 *size, GError **error)
{
  gint8 kt, vt;
  gint32 n;

  if (thrift_protocol_read_byte (protocol, &kt, error) < 0
      || thrift_protocol_read_byte (protocol, &vt, error) < 0
      || thrift_protocol_read_i32 (protocol, &n, error) < 0
      || !check_count (protocol, n, 2, error) || !enter (protocol, error))
    return -1;
  *key_type = (ThriftType) kt;
  *value_type = (ThriftType) vt;
  *size = (guint32) n;
  return 6;
}

static void
rank_binary_protocol_class_init (RankBinaryProtocolClass *klass)
{
  ThriftProtocolClass *p = THRIFT_PROTOCOL_CLASS (klass);

  p->read_message_begin = binary_read_message_begin;
  p->read_field_begin = binary_read_field_begin;
  p->read_bool = binary_read_bool;
  p->read_byte = binary_read_byte;
  p->read_i16 = binary_read_i16;
  p->read_i32 = binary_read_i32;
  p->read_i64 = binary_read_i64;
  p->read_string = binary_read_string;
  p->read_binary = binary_read_binary;
  p->read_struct_begin = binary_read_struct_begin;
  p->read_struct_end = binary_read_struct_end;
  p->read_list_begin = binary_read_list_begin;
  p->read_list_end = binary_read_container_end;
  p->read_set_begin = binary_read_list_begin;
  p->read_set_end = binary_read_container_end;
  p->read_map_begin = binary_read_map_begin;
  p->read_map_end = binary_read_container_end;
}

static void
rank_binary_protocol_init (RankBinaryProtocol *self)
{
  (void) self;
}

/* ---- compact ---- */

#define COMPACT_PARENT                                                         \
  THRIFT_PROTOCOL_CLASS (rank_compact_protocol_parent_class)

/* Unsigned LEB128, at most 5 bytes for 32 bits. */
static gint32
compact_read_length (ThriftProtocol *protocol, gint64 *len, GError **error)
{
  guint64 v = 0;

  for (gint32 i = 0; i < 5; i++)
    {
      guint8 b;

      if (thrift_transport_read_all (protocol->transport, &b, 1, error) < 0)
        return -1;
      v |= (guint64) (b & 0x7f) << (7 * i);
      if (!(b & 0x80))
        {
          *len = (gint64) v;
          return i + 1;
        }
    }
  g_set_error (error, THRIFT_PROTOCOL_ERROR, THRIFT_PROTOCOL_ERROR_INVALID_DATA,
               "length varint longer than 5 bytes");
  return -1;
}

static gint32
compact_read_string (ThriftProtocol *protocol, gchar **str, GError **error)
{
  gint64 len;
  gint32 hdr, ret;

  *str = NULL;
  if ((hdr = compact_read_length (protocol, &len, error)) < 0)
    return -1;
  ret = read_body (protocol, len, TRUE, (gpointer *) str, error);
  return ret < 0 ? -1 : ret + hdr;
}

static gint32
compact_read_binary (ThriftProtocol *protocol, gpointer *buf, guint32 *len,
                     GError **error)
{
  gint64 n;
  gint32 hdr, ret;

  *buf = NULL;
  *len = 0;
  if ((hdr = compact_read_length (protocol, &n, error)) < 0)
    return -1;
  if (n == 0)
    return hdr;
  ret = read_body (protocol, n, FALSE, buf, error);
  if (ret < 0)
    return -1;
  *len = (guint32) n;
  return ret + hdr;
}

static gint32
compact_read_message_begin (ThriftProtocol *protocol, gchar **name,
                            ThriftMessageType *type, gint32 *seqid,
                            GError **error)
{
  RankCompactProtocol *self = RANK_COMPACT_PROTOCOL (protocol);
  ThriftCompactProtocol *cp = THRIFT_COMPACT_PROTOCOL (protocol);
  gint32 ret;

  *name = NULL;
  self->depth = 0;
  g_queue_clear (&cp->_last_field);
  cp->_last_field_id = 0;
  cp->_has_bool_value = FALSE;
  cp->container_limit = (gint32) MIN (remaining (protocol), (gsize) G_MAXINT32);
  cp->string_limit = cp->container_limit;
  ret = COMPACT_PARENT->read_message_begin (protocol, name, type, seqid, error);
  if (ret < 0)
    g_clear_pointer (name, g_free);
  return ret;
}

static gint32
compact_read_struct_begin (ThriftProtocol *protocol, gchar **name,
                           GError **error)
{
  *name = NULL;
  if (!enter (protocol, error))
    return -1;
  return COMPACT_PARENT->read_struct_begin (protocol, name, error);
}

static gint32
compact_read_struct_end (ThriftProtocol *protocol, GError **error)
{
  leave (protocol);
  return COMPACT_PARENT->read_struct_end (protocol, error);
}

static gint32
compact_read_list_begin (ThriftProtocol *protocol, ThriftType *element_type,
                         guint32 *size, GError **error)
{
  gint32 ret
      = COMPACT_PARENT->read_list_begin (protocol, element_type, size, error);

  if (ret < 0 || !check_count (protocol, *size, 1, error)
      || !enter (protocol, error))
    return -1;
  return ret;
}

static gint32
compact_read_set_begin (ThriftProtocol *protocol, ThriftType *element_type,
                        guint32 *size, GError **error)
{
  gint32 ret
      = COMPACT_PARENT->read_set_begin (protocol, element_type, size, error);

  if (ret < 0 || !check_count (protocol, *size, 1, error)
      || !enter (protocol, error))
    return -1;
  return ret;
}

static gint32
compact_read_map_begin (ThriftProtocol *protocol, ThriftType *key_type,
                        ThriftType *value_type, guint32 *size, GError **error)
{
  gint32 ret = COMPACT_PARENT->read_map_begin (protocol, key_type, value_type,
                                               size, error);

  if (ret < 0 || !check_count (protocol, *size, 2, error)
      || !enter (protocol, error))
    return -1;
  return ret;
}

static gint32
compact_read_list_end (ThriftProtocol *protocol, GError **error)
{
  leave (protocol);
  return COMPACT_PARENT->read_list_end (protocol, error);
}

static gint32
compact_read_set_end (ThriftProtocol *protocol, GError **error)
{
  leave (protocol);
  return COMPACT_PARENT->read_set_end (protocol, error);
}

static gint32
compact_read_map_end (ThriftProtocol *protocol, GError **error)
{
  leave (protocol);
  return COMPACT_PARENT->read_map_end (protocol, error);
}

static void
rank_compact_protocol_finalize (GObject *object)
{
  g_queue_clear (&THRIFT_COMPACT_PROTOCOL (object)->_last_field);
  G_OBJECT_CLASS (rank_compact_protocol_parent_class)->finalize (object);
}

static void
rank_compact_protocol_class_init (RankCompactProtocolClass *klass)
{
  ThriftProtocolClass *p = THRIFT_PROTOCOL_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = rank_compact_protocol_finalize;
  p->read_message_begin = compact_read_message_begin;
  p->read_string = compact_read_string;
  p->read_binary = compact_read_binary;
  p->read_struct_begin = compact_read_struct_begin;
  p->read_struct_end = compact_read_struct_end;
  p->read_list_begin = compact_read_list_begin;
  p->read_list_end = compact_read_list_end;
  p->read_set_begin = compact_read_set_begin;
  p->read_set_end = compact_read_set_end;
  p->read_map_begin = compact_read_map_begin;
  p->read_map_end = compact_read_map_end;
}

static void
rank_compact_protocol_init (RankCompactProtocol *self)
{
  (void) self;
}

/* ---- public ---- */

ThriftProtocol *
rank_protocol_new (RankProtocolKind kind, ThriftTransport *transport)
{
  GType type = kind == RANK_PROTOCOL_COMPACT ? RANK_TYPE_COMPACT_PROTOCOL
                                             : RANK_TYPE_BINARY_PROTOCOL;
  ThriftProtocol *p
      = THRIFT_PROTOCOL (g_object_new (type, "transport", transport, NULL));

  RankRemainingFunc fn = NULL;

  G_LOCK (sized_types);
  for (GType t = G_OBJECT_TYPE (transport); fn == NULL && t != 0;
       t = g_type_parent (t))
    fn = sized_types != NULL
             ? g_hash_table_lookup (sized_types, GSIZE_TO_POINTER (t))
             : NULL;
  G_UNLOCK (sized_types);
  if (kind == RANK_PROTOCOL_COMPACT)
    ((RankCompactProtocol *) p)->remaining = fn;
  else
    ((RankBinaryProtocol *) p)->remaining = fn;
  if (kind != RANK_PROTOCOL_COMPACT && RANK_IS_REQUEST_READER (transport))
    ((RankBinaryProtocol *) p)->reader = RANK_REQUEST_READER (transport);
  return p;
}

void
rank_protocol_register_sized (GType transport_type, RankRemainingFunc fn)
{
  G_LOCK (sized_types);
  if (sized_types == NULL)
    sized_types = g_hash_table_new (NULL, NULL);
  g_hash_table_insert (sized_types, GSIZE_TO_POINTER (transport_type), fn);
  G_UNLOCK (sized_types);
}

gboolean
rank_protocol_kind_parse (const char *name, RankProtocolKind *kind)
{
  if (g_strcmp0 (name, "binary") == 0)
    *kind = RANK_PROTOCOL_BINARY;
  else if (g_strcmp0 (name, "compact") == 0)
    *kind = RANK_PROTOCOL_COMPACT;
  else
    return FALSE;
  return TRUE;
}

gboolean
rank_protocol_read_struct (ThriftProtocol *in, RankFieldFunc field,
                           gpointer data, GError **error)
{
  gchar *name = NULL;
  ThriftType type;
  gint16 id;

  if (thrift_protocol_read_struct_begin (in, &name, error) < 0)
    {
      g_free (name);
      return FALSE;
    }
  g_free (name);
  for (;;)
    {
      name = NULL;
      if (thrift_protocol_read_field_begin (in, &name, &type, &id, error) < 0)
        {
          g_free (name);
          return FALSE;
        }
      g_free (name);
      if (type == T_STOP)
        break;
      if (!field (in, type, id, data, error)
          || thrift_protocol_read_field_end (in, error) < 0)
        return FALSE;
    }
  return thrift_protocol_read_struct_end (in, error) >= 0;
}

gboolean
rank_protocol_skip (ThriftProtocol *in, ThriftType type, GError **error)
{
  return thrift_protocol_skip (in, type, error) >= 0;
}

gboolean
rank_protocol_write_exception (ThriftProtocol *out, const char *method,
                               gint32 seqid,
                               ThriftApplicationExceptionError type,
                               const char *message, GError **error)
{
  ThriftApplicationException *x
      = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, "type", type,
                      "message", message, NULL);
  gboolean ok = thrift_protocol_write_message_begin (out, method, T_EXCEPTION,
                                                     seqid, error)
                    >= 0
                && thrift_struct_write (THRIFT_STRUCT (x), out, error) >= 0
                && thrift_protocol_write_message_end (out, error) >= 0
                && thrift_transport_flush (out->transport, error);

  g_object_unref (x);
  return ok;
}
