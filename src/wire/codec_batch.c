/* codec_batch.c -- UpdateBatch's request written without the generated
 * structs (see codec_batch.h). */
#include "codec_batch.h"

#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>

#include "constants.h"
#include "protocol.h"

gboolean
rank_codec_write_field (ThriftProtocol *out, ThriftType type, gint16 id,
                        GError **error)
{
  return thrift_protocol_write_field_begin (out, "", type, id, error) >= 0;
}

gboolean
rank_codec_write_bytes_field (ThriftProtocol *out, gint16 id, const char *s,
                              gsize len, GError **error)
{
  return rank_codec_write_field (out, T_STRING, id, error)
         && thrift_protocol_write_binary (out, (gpointer) s, (guint32) len,
                                          error)
                >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
}

static gboolean
write_i64_field (ThriftProtocol *out, gint16 id, gint64 v, GError **error)
{
  return rank_codec_write_field (out, T_I64, id, error)
         && thrift_protocol_write_i64 (out, v, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
}

static guint8 *
put_field (guint8 *p, ThriftType type, gint16 id)
{
  *p++ = (guint8) type;
  return rank_put_be (p, (guint64) id, 2);
}

static guint8 *
put_bytes_field (guint8 *p, gint16 id, const char *s, gsize len)
{
  p = put_field (p, T_STRING, id);
  p = rank_put_be (p, len, 4);
  memcpy (p, s, len);
  return p + len;
}

/* The largest UpdateRequest written in one piece: the three strings at
 * their limits, value, mode, timestamp_ms, with_rank and the stop. */
#define ONE_PIECE_MAX                                                          \
  (3 * (3 + 4) + RANK_BOARD_MAX_BYTES + RANK_MEMBER_MAX_BYTES                  \
   + RANK_REQUEST_ID_MAX_BYTES + 2 * (3 + 8) + (3 + 4) + (3 + 1) + 1)

/* rank_codec_write_update's bytes in the binary protocol, in one write,
 * for a request without subscores or data whose strings are within their
 * limits: the protocol's field-by-field writes were half of what rankctl
 * spent on an import once the generated structs were gone (callgrind). */
static gboolean
write_update_binary (ThriftProtocol *out, const RankUpdateFields *f,
                     gsize board_len, gsize member_len, gsize id_len,
                     GError **error)
{
  guint8 buf[ONE_PIECE_MAX];
  guint8 *p = buf;

  p = put_bytes_field (p, 1, f->board, board_len);
  p = put_bytes_field (p, 2, f->member, member_len);
  p = put_field (p, T_I64, 3);
  p = rank_put_be (p, (guint64) f->value, 8);
  p = put_bytes_field (p, 4, f->request_id, id_len);
  if (f->has_mode)
    {
      p = put_field (p, T_I32, 5);
      p = rank_put_be (p, (guint64) (guint32) f->mode, 4);
    }
  if (f->has_timestamp_ms)
    {
      p = put_field (p, T_I64, 6);
      p = rank_put_be (p, (guint64) f->timestamp_ms, 8);
    }
  if (f->has_with_rank)
    {
      p = put_field (p, T_BOOL, 9);
      *p++ = f->with_rank ? 1 : 0;
    }
  *p++ = T_STOP;
  return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                 error);
}

gboolean
rank_codec_write_update (ThriftProtocol *out, const RankUpdateFields *f,
                         GError **error)
{
  gsize board_len = strlen (f->board), member_len = strlen (f->member),
        id_len = strlen (f->request_id);
  gboolean ok;

  if (THRIFT_IS_BINARY_PROTOCOL (out) && f->subscores == NULL && f->data == NULL
      && board_len <= RANK_BOARD_MAX_BYTES
      && member_len <= RANK_MEMBER_MAX_BYTES
      && id_len <= RANK_REQUEST_ID_MAX_BYTES)
    return write_update_binary (out, f, board_len, member_len, id_len, error);
  ok = thrift_protocol_write_struct_begin (out, "UpdateRequest", error) >= 0
       && rank_codec_write_bytes_field (out, 1, f->board, board_len, error)
       && rank_codec_write_bytes_field (out, 2, f->member, member_len, error)
       && write_i64_field (out, 3, f->value, error)
       && rank_codec_write_bytes_field (out, 4, f->request_id, id_len, error);
  if (ok && f->has_mode)
    ok = rank_codec_write_field (out, T_I32, 5, error)
         && thrift_protocol_write_i32 (out, f->mode, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
  if (ok && f->has_timestamp_ms)
    ok = write_i64_field (out, 6, f->timestamp_ms, error);
  if (ok && f->subscores != NULL)
    {
      ok = rank_codec_write_field (out, T_LIST, 7, error)
           && thrift_protocol_write_list_begin (out, T_I64, f->subscores->len,
                                                error)
                  >= 0;
      for (guint i = 0; ok && i < f->subscores->len; i++)
        ok = thrift_protocol_write_i64 (
                 out, g_array_index (f->subscores, gint64, i), error)
             >= 0;
      ok = ok && thrift_protocol_write_list_end (out, error) >= 0
           && thrift_protocol_write_field_end (out, error) >= 0;
    }
  if (ok && f->data != NULL)
    {
      GHashTableIter it;
      gpointer k, v;

      ok = rank_codec_write_field (out, T_MAP, 8, error)
           && thrift_protocol_write_map_begin (
                  out, T_STRING, T_STRING, g_hash_table_size (f->data), error)
                  >= 0;
      g_hash_table_iter_init (&it, f->data);
      while (ok && g_hash_table_iter_next (&it, &k, &v))
        ok = thrift_protocol_write_string (out, k, error) >= 0
             && thrift_protocol_write_string (out, v, error) >= 0;
      ok = ok && thrift_protocol_write_map_end (out, error) >= 0
           && thrift_protocol_write_field_end (out, error) >= 0;
    }
  if (ok && f->has_with_rank)
    ok = rank_codec_write_field (out, T_BOOL, 9, error)
         && thrift_protocol_write_bool (out, f->with_rank, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
  return ok && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}

gboolean
rank_codec_write_update_batch_begin (ThriftProtocol *out, guint n,
                                     GError **error)
{
  return thrift_protocol_write_struct_begin (out, "UpdateBatchRequest", error)
             >= 0
         && rank_codec_write_field (out, T_LIST, 1, error)
         && thrift_protocol_write_list_begin (out, T_STRUCT, (gint32) n, error)
                >= 0;
}

gboolean
rank_codec_write_update_batch_end (ThriftProtocol *out, gboolean has_with_rank,
                                   gboolean with_rank, const char *request_id,
                                   GError **error)
{
  gboolean ok = thrift_protocol_write_list_end (out, error) >= 0
                && thrift_protocol_write_field_end (out, error) >= 0;

  if (ok && has_with_rank)
    ok = rank_codec_write_field (out, T_BOOL, 2, error)
         && thrift_protocol_write_bool (out, with_rank, error) >= 0
         && thrift_protocol_write_field_end (out, error) >= 0;
  if (ok && request_id != NULL)
    ok = rank_codec_write_bytes_field (out, 3, request_id, strlen (request_id),
                                       error);
  return ok && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}
