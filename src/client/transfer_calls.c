/* transfer_calls.c -- import's UpdateBatch calls, written and read
 * without the generated structs, and the answer of a failed call (see
 * transfer_internal.h). */
#include "transfer_internal.h"

#include <string.h>

#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "api.h"
#include "codec_batch.h"
#include "constants.h"
#include "error.h"
#include "format.h"
#include "protocol.h"

/* ---- calls ---- */

gboolean
rank_transfer_call_failed (GObject *invalid, GObject *unavailable,
                           GObject *not_found, GObject *denied,
                           GError *transport, GError **error)
{
  GObject *x = invalid       ? invalid
               : unavailable ? unavailable
               : not_found   ? not_found
                             : denied;

  if (x != NULL)
    {
      g_autofree char *message = NULL;

      g_object_get (x, "message", &message, NULL);
      g_set_error (error, RANK_ERROR,
                   invalid       ? RANK_ERROR_INVALID
                   : unavailable ? RANK_ERROR_UNAVAILABLE
                   : not_found   ? RANK_ERROR_NOT_FOUND
                                 : RANK_ERROR_DENIED,
                   "%s", message);
    }
  else if (transport != NULL)
    g_propagate_error (error, g_steal_pointer (&transport));
  else
    g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL, "no answer");
  g_clear_object (&invalid);
  g_clear_object (&unavailable);
  g_clear_object (&not_found);
  g_clear_object (&denied);
  g_clear_error (&transport);
  return FALSE;
}

/* ---- UpdateBatch, written and read without the generated structs ----
 *
 * The generated client builds a GObject for each request, string and result
 * of a call, and a hash table for each record's data: most of rankctl's CPU
 * in an import (perf). These write and read the same fields through the
 * protocol (binary or compact), in the generated code's order. */

/* The request id of record number n of the file whose digest is digest:
 * "import:<16 hex digits of it>:<n>"; the same file gives the same ids, so
 * a second run applies nothing twice. Returns its length. */
#define IMPORT_ID_MAX (7 + 16 + 1 + RANK_FORMAT_INT_MAX)
static gsize
import_request_id (char out[IMPORT_ID_MAX], const char *digest, guint64 n)
{
  gsize len = 0;

  memcpy (out, "import:", 7);
  len += 7;
  memcpy (out + len, digest, 16);
  len += 16;
  out[len++] = ':';
  return len + rank_format_int (out + len, (gint64) n);
}

/* An UpdateRequest: record n's SET of its score at its time, with its
 * subscores and data. */
static gboolean
write_update (ThriftProtocol *out, const char *board,
              const RankTransferEntry *e, const char *digest, guint64 n,
              GError **error)
{
  char id[IMPORT_ID_MAX + 1];
  RankUpdateFields f = {
    .board = (char *) board,
    .member = e->member,
    .value = e->score,
    .request_id = id,
    .has_mode = TRUE,
    .mode = RANK_UPDATE_MODE_SET,
    .has_timestamp_ms = TRUE,
    .timestamp_ms = e->timestamp_ms,
    .subscores = e->subscores,
    .data = e->data,
  };

  id[import_request_id (id, digest, n)] = '\0';
  return rank_codec_write_update (out, &f, error);
}

/* The bytes record e takes in an UpdateBatch call to board (board_len
 * bytes), at most: its UpdateRequest in the binary protocol. */
gsize
rank_import_record_size (gsize board_len, const RankTransferEntry *e)
{
  gsize n = 3 * (3 + 4) + board_len + strlen (e->member) + IMPORT_ID_MAX
            + 2 * (3 + 8) + (3 + 4) + 1;
  GHashTableIter it;
  gpointer k, v;

  if (e->subscores != NULL)
    n += 3 + 5 + 8 * (gsize) e->subscores->len;
  if (e->data == NULL)
    return n;
  n += 3 + 6;
  g_hash_table_iter_init (&it, e->data);
  while (g_hash_table_iter_next (&it, &k, &v))
    n += 4 + strlen (k) + 4 + strlen (v);
  return n;
}

RankImportRecord *
rank_import_record_unpack (const guint8 *p)
{
  RankImportRecord *r
      = g_malloc0 (sizeof *r + rank_transfer_packed_member_len (p) + 1);

  rank_transfer_entry_unpack (p, &r->entry, r->member, &r->number, &r->line);
  return r;
}

void
rank_import_record_free (gpointer p)
{
  RankImportRecord *r = p;

  if (r == NULL)
    return;               /* moved to another call */
  r->entry.member = NULL; /* r->member, in r */
  rank_transfer_entry_clear (&r->entry);
  g_free (r);
}

RankImportCall *
rank_import_call_new (gboolean group)
{
  RankImportCall *call = g_new0 (RankImportCall, 1);

  call->records = g_ptr_array_new_with_free_func (rank_import_record_free);
  call->group = group;
  return call;
}

void
rank_import_call_free (gpointer p)
{
  RankImportCall *call = p;

  if (call == NULL)
    return;
  g_ptr_array_unref (call->records);
  g_free (call);
}

/* Sends the records of call as one UpdateBatch (corked by the caller):
 * without ranks (an import counts what applied; a rank would cost Redis a
 * lookup each); a group recorded as a whole, named by its first record. */
gboolean
rank_import_send_call (RankClient *client, const char *board,
                       const char *digest, const RankImportCall *call,
                       GError **error)
{
  ThriftProtocol *out
      = RANK_RANKING_CLIENT (rank_client_iface (client))->output_protocol;
  guint n = call->records->len;
  g_autofree char *group_id = NULL;
  gboolean ok
      = thrift_protocol_write_message_begin (out, "UpdateBatch", T_CALL, 0,
                                             error)
            >= 0
        && thrift_protocol_write_struct_begin (out, "UpdateBatch_args", error)
               >= 0
        && rank_codec_write_field (out, T_STRUCT, 1, error)
        && rank_codec_write_update_batch_begin (out, n, error);

  for (guint i = 0; ok && i < n; i++)
    {
      const RankImportRecord *r = call->records->pdata[i];

      ok = write_update (out, board, &r->entry, digest, r->number, error);
    }
  if (call->group)
    group_id = g_strdup_printf (
        "import:%.16s:group:%" G_GUINT64_FORMAT "+%u", digest,
        ((const RankImportRecord *) call->records->pdata[0])->number, n);
  return ok
         && rank_codec_write_update_batch_end (out, TRUE, FALSE, group_id,
                                               error)
         && thrift_protocol_write_field_end (out, error) >= 0
         && thrift_protocol_write_field_stop (out, error) >= 0
         && thrift_protocol_write_struct_end (out, error) >= 0
         && thrift_protocol_write_message_end (out, error) >= 0
         && thrift_transport_flush (out->transport, error)
         && thrift_transport_write_end (out->transport, error);
}

/* One record's answer. */
typedef enum
{
  ANSWER_NONE,
  ANSWER_APPLIED,
  ANSWER_REPEATED,
  ANSWER_INVALID,
  ANSWER_UNAVAILABLE,
} AnswerKind;

typedef struct
{
  AnswerKind kind;
  char *message; /* INVALID, UNAVAILABLE */
} Answer;

static void
answer_clear (gpointer p)
{
  g_free (((Answer *) p)->message);
}

/* InvalidArgument, Unavailable: 1: message. */
static gboolean
message_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
               GError **error)
{
  char **message = data;

  if (id != 1 || type != T_STRING)
    return rank_protocol_skip (in, type, error);
  g_clear_pointer (message, g_free);
  return thrift_protocol_read_string (in, message, error) >= 0;
}

/* UpdateResponse: 3: applied. */
static gboolean
response_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
                GError **error)
{
  Answer *a = data;
  gboolean applied = FALSE;

  if (id != 3 || type != T_BOOL)
    return rank_protocol_skip (in, type, error);
  if (thrift_protocol_read_bool (in, &applied, error) < 0)
    return FALSE;
  a->kind = applied ? ANSWER_APPLIED : ANSWER_REPEATED;
  return TRUE;
}

/* UpdateResult: 1: response, 2: invalid, 3: unavailable. */
static gboolean
result_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
              GError **error)
{
  Answer *a = data;

  if (type != T_STRUCT || id < 1 || id > 3)
    return rank_protocol_skip (in, type, error);
  if (id == 1)
    {
      a->kind = ANSWER_REPEATED;
      return rank_protocol_read_struct (in, response_field, a, error);
    }
  a->kind = id == 2 ? ANSWER_INVALID : ANSWER_UNAVAILABLE;
  return rank_protocol_read_struct (in, message_field, &a->message, error);
}

/* UpdateBatchResponse: 1: results. */
static gboolean
results_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
               GError **error)
{
  GArray *answers = data;
  ThriftType element;
  guint32 size = 0;

  if (id != 1 || type != T_LIST)
    return rank_protocol_skip (in, type, error);
  if (thrift_protocol_read_list_begin (in, &element, &size, error) < 0)
    return FALSE;
  for (guint32 i = 0; i < size; i++)
    {
      Answer a = { ANSWER_NONE, NULL };

      if (element != T_STRUCT)
        {
          if (!rank_protocol_skip (in, element, error))
            return FALSE;
          continue;
        }
      g_array_append_val (answers, a);
      if (!rank_protocol_read_struct (
              in, result_field,
              &g_array_index (answers, Answer, answers->len - 1), error))
        return FALSE;
    }
  return thrift_protocol_read_list_end (in, error) >= 0;
}

/* The reply: 0: success, 1: invalid (the call's refusal), 10: denied
 * (PermissionDenied, 1.7: its message first, as InvalidArgument's). */
typedef struct
{
  GArray *answers;
  char *invalid;
  gboolean refused;
  gboolean denied;
} Reply;

static gboolean
reply_field (ThriftProtocol *in, ThriftType type, gint16 id, gpointer data,
             GError **error)
{
  Reply *r = data;

  if (type != T_STRUCT || (id > 1 && id != 10) || id < 0)
    return rank_protocol_skip (in, type, error);
  if (id == 0)
    return rank_protocol_read_struct (in, results_field, r->answers, error);
  r->refused = TRUE;
  r->denied = id == 10;
  return rank_protocol_read_struct (in, message_field, &r->invalid, error);
}

/* Reads an UpdateBatch reply into answers; the call's own refusal or an
 * application exception as error. */
static gboolean
read_reply (RankClient *client, GArray *answers, GError **error)
{
  ThriftProtocol *in
      = RANK_RANKING_CLIENT (rank_client_iface (client))->input_protocol;
  g_autofree gchar *name = NULL;
  ThriftMessageType type;
  gint32 seqid;
  Reply r = { answers, NULL, FALSE, FALSE };
  gboolean ok;

  if (thrift_protocol_read_message_begin (in, &name, &type, &seqid, error) < 0)
    return FALSE;
  if (type == T_EXCEPTION)
    {
      ThriftApplicationException *x
          = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, NULL);

      thrift_struct_read (THRIFT_STRUCT (x), in, NULL);
      thrift_protocol_read_message_end (in, NULL);
      thrift_transport_read_end (in->transport, NULL);
      g_set_error (error, THRIFT_APPLICATION_EXCEPTION_ERROR, x->type,
                   "application error: %s", x->message);
      g_object_unref (x);
      return FALSE;
    }
  if (type != T_REPLY || g_strcmp0 (name, "UpdateBatch") != 0)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "expected an UpdateBatch reply, got message type %d (%s)",
                   type, name != NULL ? name : "");
      return FALSE;
    }
  ok = rank_protocol_read_struct (in, reply_field, &r, error)
       && thrift_protocol_read_message_end (in, error) >= 0
       && thrift_transport_read_end (in->transport, error);
  if (ok && r.refused)
    {
      g_set_error (error, RANK_ERROR,
                   r.denied ? RANK_ERROR_DENIED : RANK_ERROR_INVALID, "%s",
                   r.invalid != NULL ? r.invalid
                   : r.denied        ? "PermissionDenied"
                                     : "InvalidArgument");
      ok = FALSE;
    }
  g_free (r.invalid);
  return ok;
}

/* What rankd answers the records of a group that were not applied because
 * another one of it was refused (src/methods/update_batch.c). */
#define HELD "of the same batch was refused, and a batch with a request_id"

/* Moves record i of from to the call *to (made, of kind group, when
 * NULL), leaving NULL in its place. */
static void
move_record (RankImportCall *from, guint i, RankImportCall **to, gboolean group)
{
  if (*to == NULL)
    *to = rank_import_call_new (group);
  g_ptr_array_add ((*to)->records, from->records->pdata[i]);
  from->records->pdata[i] = NULL;
}

gboolean
rank_import_recv_call (RankClient *client, RankImportCall *call,
                       RankImportCall **retry, RankImportCall **held,
                       RankImportStats *stats, GError **error)
{
  g_autoptr (GArray) answers = g_array_new (FALSE, TRUE, sizeof (Answer));
  gboolean unavailable = FALSE, any_held = FALSE;

  *retry = *held = NULL;
  g_array_set_clear_func (answers, answer_clear);
  if (!read_reply (client, answers, error))
    return FALSE;
  if (answers->len != call->records->len)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "UpdateBatch answered %u results for %u requests",
                   answers->len, call->records->len);
      return FALSE;
    }
  for (guint i = 0; call->group && i < answers->len; i++)
    {
      const Answer *a = &g_array_index (answers, Answer, i);

      any_held |= a->kind == ANSWER_INVALID && a->message != NULL
                  && strstr (a->message, HELD) != NULL;
    }
  for (guint i = 0; i < call->records->len; i++)
    {
      const Answer *a = &g_array_index (answers, Answer, i);
      const char *message = a->message != NULL ? a->message : "";
      const RankImportRecord *r = call->records->pdata[i];

      if (a->kind == ANSWER_APPLIED)
        stats->applied++;
      else if (a->kind == ANSWER_REPEATED)
        stats->repeated++;
      else if (a->kind == ANSWER_INVALID && call->group
               && strstr (message, HELD) != NULL)
        /* Not applied with its group, for another record's refusal: the
         * others go again, as a group of their own (the same one on every
         * run of the file). */
        move_record (call, i, held, TRUE);
      else if (a->kind == ANSWER_INVALID)
        {
          const char *own = g_str_has_prefix (message, "requests[")
                                ? strstr (message, "]: ")
                                : NULL;

          /* The item's place in the call means nothing here: its line
           * does. */
          stats->refused++;
          fprintf (stderr,
                   "rankctl: line %" G_GUINT64_FORMAT " (member '%s'): %s\n",
                   r->line, r->entry.member, own != NULL ? own + 3 : message);
        }
      else if (!call->group)
        move_record (call, i, retry, FALSE);
      else if (any_held)
        /* (Not expected: a group is refused or unavailable whole.) */
        move_record (call, i, held, TRUE);
      else
        unavailable = TRUE;
    }
  /* A group meets Unavailable whole (one script call): it goes again as
   * it was, under the same request id. */
  if (unavailable)
    *retry = call;
  return TRUE;
}
