/* connbuf.c -- a connection's request bytes and its calls' reply buffers
 * (see connbuf.h).
 *
 * Reader invariants:
 *   buf[pos, len) holds received bytes not yet consumed.
 *   Framed: while in_frame, frame_left bytes of the current frame remain and
 *   all of them are in buf (a frame is decoded only once it is whole).
 *   Buffered: used counts the bytes the current message consumed; start is
 *   where it began, kept until it is decoded whole (a starved read rewinds).
 */
#include "connbuf.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "constants.h"

#define FRAME_HEADER 4

static void set_error (GError **error, int code, const char *fmt, ...)
    G_GNUC_PRINTF (3, 4);

static void
set_error (GError **error, int code, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  if (error != NULL && *error == NULL)
    *error = g_error_new_valist (THRIFT_TRANSPORT_ERROR, code, fmt, ap);
  va_end (ap);
}

static guint32
get_be32 (const guint8 *p)
{
  return ((guint32) p[0] << 24) | ((guint32) p[1] << 16) | ((guint32) p[2] << 8)
         | (guint32) p[3];
}

/* ---- the request reader ---- */

struct _RankRequestReader
{
  ThriftTransport parent;

  gboolean framed;
  guint32 max_frame;
  gboolean starved;

  guint8 *buf;
  gsize cap, pos, len;
  gboolean in_frame;
  gsize frame_left;
  gsize used;
  gsize start;
};

G_DEFINE_TYPE (RankRequestReader, rank_request_reader, THRIFT_TYPE_TRANSPORT)

/* Room for need more bytes. Consumed bytes go, except the message being
 * decoded, which a starved read may still rewind to. */
static void
reserve (RankRequestReader *self, gsize need)
{
  gsize keep = MIN (self->pos, self->start);

  if (keep > 0 && keep == self->len)
    self->pos = self->len = self->start = keep = 0;
  if (self->cap - self->len >= need)
    return;
  if (keep > 0)
    {
      memmove (self->buf, self->buf + keep, self->len - keep);
      self->len -= keep;
      self->pos -= keep;
      self->start -= keep;
    }
  if (self->cap - self->len < need)
    {
      gsize cap = MAX (self->cap, (gsize) RANK_CONN_BUFFER_BYTES);

      while (cap - self->len < need)
        cap *= 2;
      self->buf = g_realloc (self->buf, cap);
      self->cap = cap;
    }
}

/* After a large message: an idle connection keeps a small buffer only. */
static void
trim (RankRequestReader *self)
{
  gsize left = self->len - self->pos;
  guint8 *small;

  if (self->cap <= 16 * RANK_CONN_BUFFER_BYTES || left > RANK_CONN_BUFFER_BYTES)
    return;
  small = g_malloc (RANK_CONN_BUFFER_BYTES);
  memcpy (small, self->buf + self->pos, left);
  g_free (self->buf);
  self->buf = small;
  self->cap = RANK_CONN_BUFFER_BYTES;
  self->pos = self->start = 0;
  self->len = left;
}

guint8 *
rank_request_reader_space (RankRequestReader *self, gsize *room)
{
  *room = 0;
  if (self->len - self->pos > self->max_frame + (gsize) FRAME_HEADER)
    return NULL;
  reserve (self, RANK_CONN_BUFFER_BYTES / 2);
  *room = self->cap - self->len;
  return self->buf + self->len;
}

void
rank_request_reader_commit (RankRequestReader *self, gsize n)
{
  g_assert (n <= self->cap - self->len);
  self->len += n;
}

RankIoResult
rank_request_reader_receive (RankRequestReader *self, int fd)
{
  for (;;)
    {
      ssize_t n;
      gsize room;

      reserve (self, RANK_CONN_BUFFER_BYTES / 2);
      room = self->cap - self->len;
      n = recv (fd, self->buf + self->len, room, 0);
      if (n > 0)
        {
          self->len += (gsize) n;
          /* A short read drained the socket: bytes arriving later raise a
           * new edge-triggered event, so no probe for EAGAIN is needed. A
           * whole largest frame buffered is enough to go on with. */
          if ((gsize) n < room
              || self->len - self->pos > self->max_frame + (gsize) FRAME_HEADER)
            return RANK_IO_OK;
          continue;
        }
      if (n == 0)
        return RANK_IO_CLOSED;
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return RANK_IO_OK;
      return RANK_IO_FAILED;
    }
}

void
rank_request_reader_feed (RankRequestReader *self, const guint8 *bytes,
                          gsize len)
{
  reserve (self, len);
  memcpy (self->buf + self->len, bytes, len);
  self->len += len;
}

gsize
rank_request_reader_buffered (RankRequestReader *self)
{
  return self->len - self->pos;
}

const guint8 *
rank_request_reader_peek (RankRequestReader *self, gsize *len)
{
  *len = self->len - self->pos;
  /* No buffer yet (nothing received): NULL + 0 is undefined in C. */
  return self->buf != NULL ? self->buf + self->pos : NULL;
}

/* The length of the frame at pos, checked; 0 with error if out of range. */
static guint32
frame_length (RankRequestReader *self, GError **error)
{
  guint32 len = get_be32 (self->buf + self->pos);

  if (len == 0 || len > self->max_frame)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                 "frame length %u is outside 1..%u", len, self->max_frame);
      return 0;
    }
  return len;
}

gboolean
rank_request_reader_ready (RankRequestReader *self, GError **error)
{
  gsize have = self->len - self->pos;
  guint32 len;

  if (!self->framed)
    return have > 0;
  if (have < FRAME_HEADER)
    return FALSE;
  /* Refused before a byte of the body is buffered or allocated. */
  len = frame_length (self, error);
  if (len == 0)
    return FALSE;
  if (have < FRAME_HEADER + (gsize) len)
    {
      reserve (self, FRAME_HEADER + (gsize) len - have);
      return FALSE;
    }
  return TRUE;
}

gboolean
rank_request_reader_begin (RankRequestReader *self, GError **error)
{
  guint32 len;

  self->used = 0;
  self->starved = FALSE;
  self->start = self->pos;
  if (!self->framed)
    return TRUE;
  self->in_frame = FALSE;
  if (self->len - self->pos < FRAME_HEADER)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE, "message incomplete");
      return FALSE;
    }
  len = frame_length (self, error);
  if (len == 0)
    return FALSE;
  if (self->len - self->pos < FRAME_HEADER + (gsize) len)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE, "message incomplete");
      return FALSE;
    }
  self->pos += FRAME_HEADER;
  self->in_frame = TRUE;
  self->frame_left = len;
  return TRUE;
}

gboolean
rank_request_reader_starved (RankRequestReader *self)
{
  return self->starved;
}

void
rank_request_reader_rewind (RankRequestReader *self)
{
  self->pos = self->start;
  self->used = 0;
  self->starved = FALSE;
  self->in_frame = FALSE;
}

void
rank_request_reader_skip (RankRequestReader *self)
{
  if (self->framed && self->in_frame)
    {
      self->pos += self->frame_left;
      self->frame_left = 0;
      self->in_frame = FALSE;
    }
  self->used = 0;
  self->start = self->pos;
  trim (self);
}

gsize
rank_request_reader_remaining (RankRequestReader *self)
{
  if (self->framed)
    return self->in_frame ? self->frame_left : 0;
  return self->max_frame - MIN (self->used, (gsize) self->max_frame);
}

gsize
rank_request_reader_memory (RankRequestReader *self)
{
  return self->cap;
}

const guint8 *
rank_request_reader_take (RankRequestReader *self, guint32 n)
{
  const guint8 *p = self->buf + self->pos;

  if (self->framed)
    {
      if (!self->in_frame || n > self->frame_left)
        return NULL;
      self->frame_left -= n;
    }
  else
    {
      if (self->used + n > self->max_frame || n > self->len - self->pos)
        return NULL;
      self->used += n;
    }
  self->pos += n;
  return p;
}

static gint32
reader_read (ThriftTransport *transport, gpointer out, guint32 want,
             GError **error)
{
  RankRequestReader *self = RANK_REQUEST_READER (transport);
  gsize n;

  if (want == 0)
    return 0;
  if (self->framed)
    {
      if (!self->in_frame || want > self->frame_left)
        {
          set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                     "message reads %u bytes past the end of its frame",
                     (guint) (want - (self->in_frame ? self->frame_left : 0)));
          return -1;
        }
      memcpy (out, self->buf + self->pos, want);
      self->pos += want;
      self->frame_left -= want;
      return (gint32) want;
    }
  if (self->used + want > self->max_frame)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
                 "message is longer than the %u-byte limit", self->max_frame);
      return -1;
    }
  if (self->pos == self->len)
    {
      self->starved = TRUE;
      set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE, "message incomplete");
      return -1;
    }
  n = MIN ((gsize) want, self->len - self->pos);
  memcpy (out, self->buf + self->pos, n);
  self->pos += n;
  self->used += n;
  return (gint32) n;
}

static gint32
reader_read_all (ThriftTransport *transport, gpointer out, guint32 want,
                 GError **error)
{
  guint32 have = 0;

  while (have < want)
    {
      gint32 n
          = reader_read (transport, (guint8 *) out + have, want - have, error);

      if (n < 0)
        return -1;
      have += (guint32) n;
    }
  return (gint32) have;
}

/* The message is decoded: bytes the reader did not ask for (unknown
 * trailing data in a frame) go with it. */
static gboolean
reader_read_end (ThriftTransport *transport, GError **error)
{
  rank_request_reader_skip (RANK_REQUEST_READER (transport));
  return TRUE;
}

/* The protocols ask before reading a container whether its minimum size
 * fits in what is left of the message. */
static gboolean
reader_check_available (ThriftTransport *transport, glong num_bytes,
                        GError **error)
{
  RankRequestReader *self = RANK_REQUEST_READER (transport);

  if (num_bytes < 0 || (gsize) num_bytes > rank_request_reader_remaining (self))
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_MAX_MESSAGE_SIZE_REACHED,
                 "container claims more bytes than the message holds");
      return FALSE;
    }
  return TRUE;
}

static gboolean
reader_write (ThriftTransport *transport, const gpointer buf, const guint32 len,
              GError **error)
{
  set_error (error, THRIFT_TRANSPORT_ERROR_SEND,
             "a request reader does not write");
  return FALSE;
}

static gboolean
always_open (ThriftTransport *transport)
{
  return TRUE;
}

static gboolean
nothing_to_do (ThriftTransport *transport, GError **error)
{
  return TRUE;
}

static void
rank_request_reader_finalize (GObject *object)
{
  g_free (RANK_REQUEST_READER (object)->buf);
  G_OBJECT_CLASS (rank_request_reader_parent_class)->finalize (object);
}

static void
rank_request_reader_class_init (RankRequestReaderClass *klass)
{
  ThriftTransportClass *tt = THRIFT_TRANSPORT_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = rank_request_reader_finalize;
  tt->is_open = always_open;
  tt->open = nothing_to_do;
  tt->close = nothing_to_do;
  tt->read = reader_read;
  tt->read_all = reader_read_all;
  tt->read_end = reader_read_end;
  tt->write = reader_write;
  tt->write_end = nothing_to_do;
  tt->flush = nothing_to_do;
  tt->checkReadBytesAvailable = reader_check_available;
}

static void
rank_request_reader_init (RankRequestReader *self)
{
}

RankRequestReader *
rank_request_reader_new (gboolean framed, guint32 max_frame)
{
  RankRequestReader *self = g_object_new (RANK_TYPE_REQUEST_READER, NULL);

  self->framed = framed;
  self->max_frame = max_frame;
  return self;
}

/* ---- the reply writer ---- */

struct _RankReplyWriter
{
  ThriftTransport parent;

  gboolean framed;
  GByteArray *into; /* the call's buffer; not owned */
  gsize message_start;
};

G_DEFINE_TYPE (RankReplyWriter, rank_reply_writer, THRIFT_TYPE_TRANSPORT)

void
rank_reply_writer_begin (RankReplyWriter *self, GByteArray *into)
{
  static const guint8 header[FRAME_HEADER] = { 0 };

  self->into = into;
  self->message_start = into->len;
  if (self->framed)
    g_byte_array_append (into, header, FRAME_HEADER);
}

static gboolean
writer_write (ThriftTransport *transport, const gpointer buf, const guint32 len,
              GError **error)
{
  RankReplyWriter *self = RANK_REPLY_WRITER (transport);

  g_return_val_if_fail (self->into != NULL, FALSE);
  if (self->into->len - self->message_start + (gsize) len
      > (gsize) RANK_REPLY_MAX_BYTES)
    {
      set_error (error, THRIFT_TRANSPORT_ERROR_SEND,
                 "reply: longer than the %d-byte reply limit",
                 RANK_REPLY_MAX_BYTES);
      return FALSE;
    }
  g_byte_array_append (self->into, buf, len);
  return TRUE;
}

/* Ends the message: its frame gets its length. */
static gboolean
writer_flush (ThriftTransport *transport, GError **error)
{
  RankReplyWriter *self = RANK_REPLY_WRITER (transport);

  g_return_val_if_fail (self->into != NULL, FALSE);
  if (self->framed)
    {
      guint8 *h = self->into->data + self->message_start;
      guint32 len = self->into->len - self->message_start - FRAME_HEADER;

      h[0] = (guint8) (len >> 24);
      h[1] = (guint8) (len >> 16);
      h[2] = (guint8) (len >> 8);
      h[3] = (guint8) len;
    }
  self->into = NULL;
  return TRUE;
}

static gint32
writer_read (ThriftTransport *transport, gpointer buf, guint32 len,
             GError **error)
{
  set_error (error, THRIFT_TRANSPORT_ERROR_RECEIVE,
             "a reply writer does not read");
  return -1;
}

static void
rank_reply_writer_class_init (RankReplyWriterClass *klass)
{
  ThriftTransportClass *tt = THRIFT_TRANSPORT_CLASS (klass);

  tt->is_open = always_open;
  tt->open = nothing_to_do;
  tt->close = nothing_to_do;
  tt->read = writer_read;
  tt->read_all = writer_read;
  tt->read_end = nothing_to_do;
  tt->write = writer_write;
  tt->write_end = nothing_to_do;
  tt->flush = writer_flush;
}

static void
rank_reply_writer_init (RankReplyWriter *self)
{
}

RankReplyWriter *
rank_reply_writer_new (gboolean framed)
{
  RankReplyWriter *self = g_object_new (RANK_TYPE_REPLY_WRITER, NULL);

  self->framed = framed;
  return self;
}
