/* codec.c -- the IDL structs rankd writes by hand (see codec.h). */
#include "codec.h"

#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>

#include "constants.h"
#include "protocol.h"

/* Whether out writes the binary protocol: then the one-write paths below
 * put the bytes its field-by-field writes would. rankd's own protocol is
 * compared first, with its type read once: THRIFT_IS_BINARY_PROTOCOL, or
 * the type's get_type function, was a call into GType per entry of a page
 * (callgrind). */
static gboolean
is_binary (ThriftProtocol *out)
{
  static gsize rank_binary;
  GType type = G_TYPE_FROM_INSTANCE (out);

  if (g_once_init_enter (&rank_binary))
    g_once_init_leave (&rank_binary, RANK_TYPE_BINARY_PROTOCOL);
  return type == (GType) rank_binary
         || g_type_is_a (type, THRIFT_TYPE_BINARY_PROTOCOL);
}

static gboolean
field_begin (ThriftProtocol *out, const char *name, ThriftType type, gint16 id,
             GError **error)
{
  return thrift_protocol_write_field_begin (out, name, type, id, error) >= 0;
}

static gboolean
field_end (ThriftProtocol *out, GError **error)
{
  return thrift_protocol_write_field_end (out, error) >= 0;
}

/* A struct's stop and end. */
static gboolean
struct_end (ThriftProtocol *out, GError **error)
{
  return thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0;
}

/* ---- a method's reply ---- */

gboolean
rank_codec_write_reply_begin (ThriftProtocol *out, const char *method,
                              gint32 seqid, ThriftType type, GError **error)
{
  gsize len = strlen (method);

  if (is_binary (out) && len <= RANK_METHOD_NAME_MAX_BYTES)
    {
      /* The same bytes in one write (the protocol's writes, one per
       * number and string, were 5% of rankd's instructions per GetRank):
       * the strict message header (version and type, name, seqid), then
       * field 0's. */
      guint8 buf[4 + 4 + RANK_METHOD_NAME_MAX_BYTES + 4 + 3];
      guint8 *p = buf;

      p = rank_put_be (p, 0x80010000u | T_REPLY, 4);
      p = rank_put_be (p, len, 4);
      memcpy (p, method, len);
      p += len;
      p = rank_put_be (p, (guint32) seqid, 4);
      *p++ = (guint8) type;
      p = rank_put_be (p, 0, 2);
      return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                     error);
    }
  return thrift_protocol_write_message_begin (out, method, T_REPLY, seqid,
                                              error)
             >= 0
         && thrift_protocol_write_struct_begin (out, "Result", error) >= 0
         && field_begin (out, "success", type, 0, error);
}

gboolean
rank_codec_write_reply_end (ThriftProtocol *out, GError **error)
{
  return field_end (out, error) && struct_end (out, error)
         && thrift_protocol_write_message_end (out, error) >= 0
         && thrift_transport_flush (out->transport, error);
}

/* ---- subscores: field 4 of an Entry and of an UpdateResponse ---- */

static gboolean
write_subscores (ThriftProtocol *out, const gint64 *subscores, guint n,
                 GError **error)
{
  gboolean ok = field_begin (out, "subscores", T_LIST, 4, error)
                && thrift_protocol_write_list_begin (out, T_I64, n, error) >= 0;

  for (guint i = 0; ok && i < n; i++)
    ok = thrift_protocol_write_i64 (out, subscores[i], error) >= 0;
  return ok && thrift_protocol_write_list_end (out, error) >= 0
         && field_end (out, error);
}

/* ---- UpdateResponse ---- */

/* The fields of an UpdateResponse without subscores, and its stop, in the
 * binary protocol, at p (UPDATE_RESPONSE_BINARY_MAX bytes at most); returns
 * the end. Written in one write: the protocol's field-by-field writes were
 * a fifth of rankd's instructions per import entry (callgrind). The same
 * bytes as the generic path of rank_codec_write_update_response. */
#define UPDATE_RESPONSE_BINARY_MAX (2 * (3 + 8) + (3 + 1) + 1)

static guint8 *
update_response_binary (guint8 *p, const RankCodecUpdateResponse *r)
{
  *p++ = T_I64;
  p = rank_put_be (p, 1, 2);
  p = rank_put_be (p, (guint64) r->score, 8);
  if (r->rank > 0)
    {
      *p++ = T_I64;
      p = rank_put_be (p, 2, 2);
      p = rank_put_be (p, (guint64) r->rank, 8);
    }
  *p++ = T_BOOL;
  p = rank_put_be (p, 3, 2);
  *p++ = r->applied ? 1 : 0;
  *p++ = T_STOP;
  return p;
}

gboolean
rank_codec_write_update_response (ThriftProtocol *out,
                                  const RankCodecUpdateResponse *r,
                                  GError **error)
{
  gboolean ok;

  if (is_binary (out) && r->n_subscores == 0)
    {
      guint8 buf[UPDATE_RESPONSE_BINARY_MAX];

      return thrift_transport_write (
          out->transport, buf,
          (guint32) (update_response_binary (buf, r) - buf), error);
    }
  ok = thrift_protocol_write_struct_begin (out, "UpdateResponse", error) >= 0
       && field_begin (out, "score", T_I64, 1, error)
       && thrift_protocol_write_i64 (out, r->score, error) >= 0
       && field_end (out, error);
  if (ok && r->rank > 0)
    ok = field_begin (out, "rank", T_I64, 2, error)
         && thrift_protocol_write_i64 (out, r->rank, error) >= 0
         && field_end (out, error);
  ok = ok && field_begin (out, "applied", T_BOOL, 3, error)
       && thrift_protocol_write_bool (out, r->applied, error) >= 0
       && field_end (out, error);
  if (ok && r->n_subscores > 0)
    ok = write_subscores (out, r->subscores, r->n_subscores, error);
  return ok && struct_end (out, error);
}

/* ---- UpdateResult, UpdateBatchResponse ---- */

gboolean
rank_codec_write_update_result (ThriftProtocol *out,
                                const RankCodecUpdateResult *r, GError **error)
{
  gboolean response = r->field == RANK_CODEC_UPDATE_RESPONSE;
  gboolean ok;

  if (response && is_binary (out) && r->response.n_subscores == 0)
    {
      /* The whole UpdateResult in one write. */
      guint8 buf[3 + UPDATE_RESPONSE_BINARY_MAX + 1];
      guint8 *p = buf;

      *p++ = T_STRUCT; /* UpdateResult.response */
      p = rank_put_be (p, RANK_CODEC_UPDATE_RESPONSE, 2);
      p = update_response_binary (p, &r->response);
      *p++ = T_STOP; /* UpdateResult */
      return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                     error);
    }
  ok = thrift_protocol_write_struct_begin (out, "UpdateResult", error) >= 0
       && field_begin (out, "", T_STRUCT, (gint16) r->field, error);
  if (ok && response)
    ok = rank_codec_write_update_response (out, &r->response, error);
  else if (ok)
    ok = thrift_protocol_write_struct_begin (out, "", error) >= 0
         && field_begin (out, "message", T_STRING, 1, error)
         && thrift_protocol_write_string (out, r->message, error) >= 0
         && field_end (out, error) && struct_end (out, error);
  return ok && field_end (out, error) && struct_end (out, error);
}

gboolean
rank_codec_write_update_batch_response (ThriftProtocol *out,
                                        const RankCodecUpdateResult *results,
                                        guint n, GError **error)
{
  gboolean ok
      = thrift_protocol_write_struct_begin (out, "UpdateBatchResponse", error)
            >= 0
        && field_begin (out, "results", T_LIST, 1, error)
        && thrift_protocol_write_list_begin (out, T_STRUCT, n, error) >= 0;

  for (guint i = 0; ok && i < n; i++)
    ok = rank_codec_write_update_result (out, &results[i], error);
  return ok && thrift_protocol_write_list_end (out, error) >= 0
         && field_end (out, error) && struct_end (out, error);
}

/* ---- Entry ---- */

/* An Entry without subscores or data in the binary protocol, in one write:
 * the protocol's field-by-field writes were a fifth of rankd's CPU on a
 * pipelined GetTopN (perf). The same bytes as the generic path below. */
static gboolean
write_entry_binary (ThriftProtocol *out, const RankRow *e, GError **error)
{
  guint8 buf[3 + 4 + RANK_MEMBER_MAX_BYTES + 2 * (3 + 8) + 1];
  guint8 *p = buf;

  *p++ = T_STRING;
  p = rank_put_be (p, 1, 2);
  p = rank_put_be (p, e->member_len, 4);
  memcpy (p, e->member, e->member_len);
  p += e->member_len;
  *p++ = T_I64;
  p = rank_put_be (p, 2, 2);
  p = rank_put_be (p, (guint64) e->score, 8);
  *p++ = T_I64;
  p = rank_put_be (p, 3, 2);
  p = rank_put_be (p, (guint64) e->rank, 8);
  *p++ = T_STOP;
  return thrift_transport_write (out->transport, buf, (guint32) (p - buf),
                                 error);
}

/* Entry.data (5). */
static gboolean
write_data (ThriftProtocol *out, const RankDataPair *pairs, guint n,
            GError **error)
{
  gboolean ok
      = field_begin (out, "data", T_MAP, 5, error)
        && thrift_protocol_write_map_begin (out, T_STRING, T_STRING, n, error)
               >= 0;

  for (guint i = 0; ok && i < n; i++)
    ok = thrift_protocol_write_binary (out, (gpointer) pairs[i].key,
                                       (guint32) pairs[i].key_len, error)
             >= 0
         && thrift_protocol_write_binary (out, (gpointer) pairs[i].value,
                                          (guint32) pairs[i].value_len, error)
                >= 0;
  return ok && thrift_protocol_write_map_end (out, error) >= 0
         && field_end (out, error);
}

/* An Entry; binary: out writes the binary protocol (is_binary). */
static gboolean
write_entry (ThriftProtocol *out, gboolean binary, const RankRow *e,
             GError **error)
{
  RankDataPair pairs[RANK_DATA_KEYS_MAX];
  guint n_data = 0;
  gboolean has_data = e->data != NULL, ok;

  if (binary && e->n_subscores == 0 && !has_data
      && e->member_len <= RANK_MEMBER_MAX_BYTES)
    return write_entry_binary (out, e, error);
  if (has_data
      && !rank_member_data_parse (e->data, e->data_len, pairs, &n_data))
    {
      g_warning ("member data of '%.*s' is malformed; left out",
                 (int) e->member_len, e->member);
      has_data = FALSE;
    }
  ok = thrift_protocol_write_struct_begin (out, "Entry", error) >= 0
       && field_begin (out, "member", T_STRING, 1, error)
       && thrift_protocol_write_binary (out, (gpointer) e->member,
                                        (guint32) e->member_len, error)
              >= 0
       && field_end (out, error) && field_begin (out, "score", T_I64, 2, error)
       && thrift_protocol_write_i64 (out, e->score, error) >= 0
       && field_end (out, error) && field_begin (out, "rank", T_I64, 3, error)
       && thrift_protocol_write_i64 (out, e->rank, error) >= 0
       && field_end (out, error);
  if (ok && e->n_subscores > 0)
    ok = write_subscores (out, e->subscores, e->n_subscores, error);
  if (ok && has_data)
    ok = write_data (out, pairs, n_data, error);
  return ok && struct_end (out, error);
}

gboolean
rank_codec_write_entry (ThriftProtocol *out, const RankRow *row, GError **error)
{
  return write_entry (out, is_binary (out), row, error);
}

gboolean
rank_codec_write_entries (ThriftProtocol *out, const RankRow *rows, gsize n,
                          GError **error)
{
  gboolean binary = is_binary (out);
  gboolean ok
      = thrift_protocol_write_list_begin (out, T_STRUCT, (guint32) n, error)
        >= 0;

  for (gsize i = 0; ok && i < n; i++)
    ok = write_entry (out, binary, &rows[i], error);
  return ok && thrift_protocol_write_list_end (out, error) >= 0;
}
