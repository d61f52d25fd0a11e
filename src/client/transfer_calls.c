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

/* Whether every record fits in a call of its own within max_frame (rankd's
 * --max-frame): one that does not would have rankd close the connection,
 * which reads as rankd gone, the import as one to retry. The error names
 * the first one's line; nothing is sent then. */
gboolean
rank_import_records_fit (const char *board, GPtrArray *entries, GArray *lines,
                         guint32 max_frame, GError **error)
{
  gsize board_len = strlen (board);

  for (guint k = 0; k < entries->len; k++)
    {
      gsize size = rank_import_record_size (board_len, entries->pdata[k]);

      if (RANK_IMPORT_CALL_OVERHEAD + size > max_frame)
        {
          g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                       "line %u: the record takes %" G_GSIZE_FORMAT
                       " bytes in an UpdateBatch call, over rankd's "
                       "--max-frame of %u bytes (give import rankd's "
                       "--max-frame if it is larger)",
                       g_array_index (lines, guint, k),
                       RANK_IMPORT_CALL_OVERHEAD + size, max_frame);
          return FALSE;
        }
    }
  return TRUE;
}

/* How many of the records listed in todo from next on go in the next call:
 * up to most, as many as fit in max_frame (one at least). */
guint
rank_import_records_that_fit (const char *board, GPtrArray *entries,
                              GArray *todo, guint next, guint most,
                              guint32 max_frame)
{
  gsize board_len = strlen (board), bytes = RANK_IMPORT_CALL_OVERHEAD;
  guint take = 0;

  for (; take < most && next + take < todo->len; take++)
    {
      bytes += rank_import_record_size (
          board_len, entries->pdata[g_array_index (todo, guint, next + take)]);
      if (take > 0 && bytes > max_frame)
        break;
    }
  return take;
}

/* Records go in score order, not where they lie in memory: each one's
 * pointer, entry and member would miss the caches in turn, one after the
 * other (perf: most of rankctl's encoding time). While record i is
 * written, those of the records a few places on are fetched, each from
 * what the step before fetched. In the loop itself: GCC finds a helper
 * holding only prefetches free of side effects, and drops its calls. */
#define PREFETCH_POINTER 12
#define PREFETCH_ENTRY 8
#define PREFETCH_MEMBER 4

/* Sends the records of flight as one UpdateBatch (corked by the caller):
 * without ranks (an import counts what applied; a rank would cost Redis a
 * lookup each); a group recorded as a whole, named by its first record
 * (each record is in one group). */
gboolean
rank_import_send_flight (RankClient *client, const char *board,
                         GPtrArray *entries, const char *digest,
                         const RankImportFlight *f, GError **error)
{
  ThriftProtocol *out
      = RANK_RANKING_CLIENT (rank_client_iface (client))->output_protocol;
  const guint *at = (const guint *) (gpointer) f->index->data;
  guint n = f->index->len;
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
      guint k = at[i];

      if (i + PREFETCH_POINTER < n)
        __builtin_prefetch (&entries->pdata[at[i + PREFETCH_POINTER]]);
      if (i + PREFETCH_ENTRY < n)
        __builtin_prefetch (entries->pdata[at[i + PREFETCH_ENTRY]]);
      if (i + PREFETCH_MEMBER < n)
        __builtin_prefetch (((const RankTransferEntry *)
                                 entries->pdata[at[i + PREFETCH_MEMBER]])
                                ->member);
      ok = write_update (out, board, entries->pdata[k], digest, k + 1, error);
    }
  if (f->group >= 0)
    group_id = g_strdup_printf ("import:%.16s:group:%u+%u", digest,
                                g_array_index (f->index, guint, 0) + 1,
                                f->index->len);
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

/* Reads flight's answer: counts applied, repeated and refused records
 * (printed with their line); the Unavailable ones go to retry (a group's:
 * the group, once); a group's records held back by another's refusal to
 * held. */
gboolean
rank_import_recv_flight (RankClient *client, GPtrArray *entries, GArray *lines,
                         const RankImportFlight *f, GArray *retry, GArray *held,
                         RankImportStats *stats, GError **error)
{
  g_autoptr (GArray) answers = g_array_new (FALSE, TRUE, sizeof (Answer));

  g_array_set_clear_func (answers, answer_clear);
  if (!read_reply (client, answers, error))
    return FALSE;
  if (answers->len != f->index->len)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                   "UpdateBatch answered %u results for %u requests",
                   answers->len, f->index->len);
      return FALSE;
    }
  for (guint i = 0; i < f->index->len; i++)
    {
      const Answer *a = &g_array_index (answers, Answer, i);
      const char *message = a->message != NULL ? a->message : "";
      guint k = g_array_index (f->index, guint, i);

      if (a->kind == ANSWER_APPLIED)
        stats->applied++;
      else if (a->kind == ANSWER_REPEATED)
        stats->repeated++;
      else if (a->kind == ANSWER_INVALID && f->group >= 0
               && strstr (message, HELD) != NULL)
        /* Not applied with its group, for another record's refusal. */
        g_array_append_val (held, k);
      else if (a->kind == ANSWER_INVALID)
        {
          const RankTransferEntry *e = entries->pdata[k];
          const char *own = g_str_has_prefix (message, "requests[")
                                ? strstr (message, "]: ")
                                : NULL;

          /* The item's place in the call means nothing here: its line
           * does. */
          stats->refused++;
          fprintf (stderr, "rankctl: line %u (member '%s'): %s\n",
                   g_array_index (lines, guint, k), e->member,
                   own != NULL ? own + 3 : message);
        }
      else if (f->group < 0)
        g_array_append_val (retry, k);
      else if (retry->len == 0
               || g_array_index (retry, guint, retry->len - 1)
                      != (guint) f->group)
        {
          guint g = (guint) f->group;

          g_array_append_val (retry, g);
        }
    }
  return TRUE;
}
