/* wire.c -- what a connection's first bytes speak (see wire.h). */
#include "wire.h"

#include <string.h>

#include "connbuf.h"
#include "constants.h"

#define FRAME_HEADER 4
#define BINARY_MARK_0 0x80
#define BINARY_MARK_1 0x01
#define COMPACT_MARK 0x82
#define TLS_HANDSHAKE 0x16
#define TLS_MAJOR 0x03

/* A protocol's mark at p (n bytes): RANK_WIRE_MORE if too few to tell. */
static RankWireKind
mark_at (const guint8 *p, gsize n, RankProtocolKind *protocol)
{
  if (n < 1)
    return RANK_WIRE_MORE;
  if (p[0] == COMPACT_MARK)
    {
      *protocol = RANK_PROTOCOL_COMPACT;
      return RANK_WIRE_THRIFT;
    }
  if (p[0] != BINARY_MARK_0)
    return RANK_WIRE_UNKNOWN;
  if (n < 2)
    return RANK_WIRE_MORE;
  if (p[1] != BINARY_MARK_1)
    return RANK_WIRE_UNKNOWN;
  *protocol = RANK_PROTOCOL_BINARY;
  return RANK_WIRE_THRIFT;
}

/* Whether bytes start an HTTP request ("METHOD "), or may once more come
 * (*more). */
static gboolean
is_http (const guint8 *bytes, gsize len, gboolean *more)
{
  static const char *const methods[]
      = { "GET ",     "POST ",  "PUT ",     "HEAD ", "DELETE ",
          "OPTIONS ", "PATCH ", "CONNECT ", "TRACE " };

  *more = FALSE;
  for (guint i = 0; i < G_N_ELEMENTS (methods); i++)
    {
      gsize n = strlen (methods[i]);

      if (memcmp (bytes, methods[i], MIN (n, len)) != 0)
        continue;
      if (len >= n)
        return TRUE;
      *more = TRUE;
    }
  return FALSE;
}

RankWireKind
rank_wire_sniff (const guint8 *bytes, gsize len, guint32 max_frame,
                 gboolean *framed, RankProtocolKind *protocol)
{
  gboolean more;
  RankWireKind kind;
  guint32 frame;

  if (len == 0)
    return RANK_WIRE_MORE;
  kind = mark_at (bytes, len, protocol);
  if (kind != RANK_WIRE_UNKNOWN)
    {
      *framed = FALSE;
      return kind;
    }
  if (bytes[0] == TLS_HANDSHAKE)
    {
      if (len < 2)
        return RANK_WIRE_MORE;
      if (bytes[1] == TLS_MAJOR)
        return RANK_WIRE_TLS;
    }
  if (is_http (bytes, len, &more))
    return RANK_WIRE_HTTP;
  /* The length of a frame rankd can take (RANK_MAX_MAX_FRAME bytes at
   * most) starts with a byte below any mark or letter. */
  G_STATIC_ASSERT ((RANK_MAX_MAX_FRAME >> 24) < 'A');
  if (bytes[0] > (RANK_MAX_MAX_FRAME >> 24))
    return more ? RANK_WIRE_MORE : RANK_WIRE_UNKNOWN;
  if (len < FRAME_HEADER)
    return RANK_WIRE_MORE;
  frame = (guint32) rank_get_be (bytes, FRAME_HEADER);
  if (frame == 0 || frame > max_frame)
    return RANK_WIRE_UNKNOWN;
  *framed = TRUE;
  return mark_at (bytes + FRAME_HEADER, len - FRAME_HEADER, protocol);
}

const char *
rank_wire_name (gboolean framed, RankProtocolKind protocol)
{
  if (protocol == RANK_PROTOCOL_COMPACT)
    return framed ? "framed transport, compact protocol"
                  : "buffered (unframed) transport, compact protocol";
  return framed ? "framed transport, binary protocol"
                : "buffered (unframed) transport, binary protocol";
}

GByteArray *
rank_wire_exception (const guint8 *bytes, gsize len, gboolean framed,
                     RankProtocolKind protocol, const char *message)
{
  gsize skip = framed ? FRAME_HEADER : 0;
  g_autoptr (RankRequestReader) reader
      = rank_request_reader_new (FALSE, RANK_MAX_MAX_FRAME);
  g_autoptr (RankReplyWriter) writer = rank_reply_writer_new (framed);
  ThriftProtocol *in, *out;
  g_autoptr (GError) error = NULL;
  GByteArray *reply = g_byte_array_new ();
  ThriftMessageType type;
  gchar *name = NULL;
  gint32 seqid = 0;

  /* The call's header, read as the client wrote it (unframed: a frame
   * need not be whole to read its start). */
  if (len > skip)
    rank_request_reader_feed (reader, bytes + skip, len - skip);
  in = rank_protocol_new (protocol, THRIFT_TRANSPORT (reader));
  if (!rank_request_reader_begin (reader, NULL)
      || thrift_protocol_read_message_begin (in, &name, &type, &seqid, NULL) < 0
      || strlen (name) > RANK_METHOD_NAME_MAX_BYTES)
    {
      g_clear_pointer (&name, g_free);
      seqid = 0;
    }
  rank_reply_writer_begin (writer, reply);
  out = rank_protocol_new (protocol, THRIFT_TRANSPORT (writer));
  if (!rank_protocol_write_exception (
          out, name != NULL ? name : "", seqid,
          THRIFT_APPLICATION_EXCEPTION_ERROR_PROTOCOL_ERROR, message, &error))
    {
      g_debug ("cannot write the exception: %s", error->message);
      g_clear_pointer (&reply, g_byte_array_unref);
    }
  g_object_unref (in);
  g_object_unref (out);
  g_free (name);
  return reply;
}

/* ---- which mismatches to log ---- */

typedef struct
{
  char *peer; /* NULL: a free slot */
  const char *spoke;
  gint64 at;
} Seen;

struct _RankWireLog
{
  GMutex lock;
  Seen seen[RANK_WIRE_LOG_PEERS];
  guint next;          /* the slot a new peer takes, round robin */
  gint64 minute_start; /* monotonic us */
  guint lines;         /* logged since minute_start */
};

RankWireLog *
rank_wire_log_new (void)
{
  RankWireLog *log = g_new0 (RankWireLog, 1);

  g_mutex_init (&log->lock);
  return log;
}

void
rank_wire_log_free (RankWireLog *log)
{
  if (log == NULL)
    return;
  for (guint i = 0; i < RANK_WIRE_LOG_PEERS; i++)
    g_free (log->seen[i].peer);
  g_mutex_clear (&log->lock);
  g_free (log);
}

gboolean
rank_wire_log_admit (RankWireLog *log, const char *peer, const char *spoke,
                     gint64 now_us)
{
  Seen *s = NULL;
  gboolean admit;

  g_mutex_lock (&log->lock);
  for (guint i = 0; i < RANK_WIRE_LOG_PEERS && s == NULL; i++)
    if (log->seen[i].peer != NULL && strcmp (log->seen[i].peer, peer) == 0
        && strcmp (log->seen[i].spoke, spoke) == 0)
      s = &log->seen[i];
  if (now_us - log->minute_start >= 60 * G_USEC_PER_SEC)
    log->minute_start = now_us, log->lines = 0;
  admit = log->lines < RANK_WIRE_LOG_PER_MINUTE
          && (s == NULL
              || now_us - s->at >= RANK_WIRE_LOG_QUIET_S * G_USEC_PER_SEC);
  if (admit)
    {
      if (s == NULL)
        {
          s = &log->seen[log->next];
          log->next = (log->next + 1) % RANK_WIRE_LOG_PEERS;
          g_free (s->peer);
          s->peer = g_strdup (peer);
          s->spoke = spoke;
        }
      s->at = now_us;
      log->lines++;
    }
  g_mutex_unlock (&log->lock);
  return admit;
}
