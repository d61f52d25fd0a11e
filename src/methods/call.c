/* call.c -- a call's lifecycle (handler_private.h): its replies, result
 * or declared exception or TApplicationException, which end it with
 * answered(); what it wrote, for the read cache; and its context, resolved
 * once, with the check that the board's stored layout fits its options
 * before the store runs the method.
 */
#include "handler_private.h"

#include <thrift/c_glib/thrift_application_exception.h>

#include "constants.h"
#include "error.h"
#include "validate.h"

/* ---- replies ---- */

const char *
handler_call_name (const Call *call)
{
  return call->method == METHOD_UNKNOWN ? call->unknown_name
                                        : handler_methods[call->method].name;
}

ThriftProtocol *
handler_begin_reply (Call *call)
{
  rank_reply_writer_begin (call->handler->writer, call->reply);
  return call->handler->out;
}

void
handler_board_written (RankHandler *handler, const RankContext *ctx)
{
  RankReadCache *cache = handler->cache;

  /* Before the client hears back, so that its next read through this
   * rankd sees the write. */
  if (cache == NULL || ctx->options == NULL)
    return;
  if (rank_read_cache_wanted (ctx->options))
    rank_read_cache_changed (cache, ctx->board);
  if (ctx->options->read_from_replica)
    rank_read_cache_wrote (cache, ctx->board);
}

/* Frees call, its method's own state first. */
static void
call_free (Call *call)
{
  const MethodSpec *m
      = call->method == METHOD_UNKNOWN ? NULL : &handler_methods[call->method];

  if (m != NULL && m->kind != NULL && m->kind->clear != NULL)
    m->kind->clear (call);
  rank_context_clear (&call->ctx);
  g_clear_object (&call->args);
  if (call->plain_args != NULL)
    m->free (call->plain_args);
  g_free (call->unknown_name);
  g_free (call);
}

void
handler_finish (Call *call, gboolean ok, const GError *error)
{
  if (!ok && error != NULL && error->domain == THRIFT_TRANSPORT_ERROR
      && error->code == THRIFT_TRANSPORT_ERROR_SEND
      && call->method != METHOD_UNKNOWN && call->reply->len > 0)
    {
      g_autoptr (GError) big = g_error_new (
          RANK_ERROR, RANK_ERROR_INVALID,
          "%s: the reply would be over the %d-byte reply limit; ask for "
          "fewer entries, or without member data",
          handler_methods[call->method].name, RANK_REPLY_MAX_BYTES);

      g_byte_array_set_size (call->reply, 0);
      handler_reply_error (call, big);
      return;
    }
  if (!ok)
    g_debug ("cannot encode the reply to %s: %s", handler_call_name (call),
             error ? error->message : "?");
  handler_audit (call);
  if (call->method != METHOD_UNKNOWN)
    rank_metrics_call_done (call->handler->metrics, call->method, call->outcome,
                            g_get_monotonic_time () - call->start_us);
  /* An UpdateBatch marks its updates' boards itself (update_batch.c). */
  if (call->writes && call->changed)
    handler_board_written (call->handler, &call->ctx);
  call->handler->answered (call->request, ok);
  call_free (call);
}

void
handler_reply (Call *call, ThriftStruct *result,
               ThriftApplicationExceptionError type, const char *message)
{
  ThriftProtocol *out = handler_begin_reply (call);
  const char *name = handler_call_name (call);
  g_autoptr (GError) error = NULL;
  gboolean ok;

  if (result != NULL)
    ok = thrift_protocol_write_message_begin (out, name, T_REPLY, call->seqid,
                                              &error)
             >= 0
         && thrift_struct_write (result, out, &error) >= 0
         && thrift_protocol_write_message_end (out, &error) >= 0
         && thrift_transport_flush (out->transport, &error);
  else
    ok = rank_protocol_write_exception (out, name, call->seqid, type, message,
                                        &error);
  handler_finish (call, ok, error);
}

void
handler_reply_result (Call *call, void (*set) (GObject *result, gpointer data),
                      gpointer data)
{
  GObject *result
      = g_object_new (handler_methods[call->method].result_type (), NULL);

  if (set != NULL)
    set (result, data);
  handler_reply (call, THRIFT_STRUCT (result), 0, NULL);
  g_object_unref (result);
}

/* Puts err into the result's matching exception field; FALSE if the method
 * has none for it (then it is an internal error). */
static gboolean
set_exception (GObject *result, const GError *err)
{
  const char *field = NULL;
  GType type = G_TYPE_INVALID;
  GParamSpec *spec;
  GObject *x;

  if (err->domain == RANK_ERROR && err->code == RANK_ERROR_INVALID)
    field = "invalid", type = RANK_TYPE_INVALID_ARGUMENT;
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_NOT_FOUND)
    field = "not_found", type = RANK_TYPE_NOT_FOUND;
  else if (err->domain == RANK_ERROR && err->code == RANK_ERROR_UNAVAILABLE)
    field = "unavailable", type = RANK_TYPE_UNAVAILABLE;
  if (field == NULL)
    return FALSE;
  spec = g_object_class_find_property (G_OBJECT_GET_CLASS (result), field);
  if (spec == NULL)
    return FALSE;
  x = g_object_new (type, "message", err->message, NULL);
  g_object_set (result, field, x, NULL);
  g_object_unref (x);
  return TRUE;
}

/* Whether err refuses a call before it changed anything: a check of rankd
 * or of a script (which refuses before it writes). Other failures (Redis
 * gone, a timeout) leave unknown whether a write landed. */
static gboolean
refused_unchanged (const GError *err)
{
  return err->domain == RANK_ERROR
         && (err->code == RANK_ERROR_INVALID
             || err->code == RANK_ERROR_NOT_FOUND);
}

void
handler_reply_error (Call *call, const GError *err)
{
  GObject *result
      = g_object_new (handler_methods[call->method].result_type (), NULL);

  if (!refused_unchanged (err))
    call->changed = TRUE;
  call->outcome = set_exception (result, err) ? rank_metrics_outcome (err)
                                              : RANK_OUTCOME_INTERNAL;
  if (call->outcome != RANK_OUTCOME_INTERNAL)
    handler_reply (call, THRIFT_STRUCT (result), 0, NULL);
  else
    handler_reply (call, NULL,
                   THRIFT_APPLICATION_EXCEPTION_ERROR_INTERNAL_ERROR,
                   err->message);
  g_object_unref (result);
}

/* ---- the call's context ---- */

/* The call proper, on a board whose stored layout fits the options. A
 * board with a rolling window is rolled to the call's period first, in the
 * background: reads answer the window served meanwhile. */
static void
run_call (Call *call)
{
  if (call->ctx.options != NULL && call->ctx.options->window > 0)
    rank_store_window_ensure (call->handler->store, &call->ctx);
  call->run (call);
}

/* Once the board's stored layout fits the options (store.h), the call
 * proper runs. */
static void
layout_checked (const GError *error, gpointer data)
{
  Call *call = data;

  if (error != NULL)
    handler_reply_error (call, error);
  else
    run_call (call);
}

gboolean
handler_layout_fits (RankHandler *handler, const RankContext *ctx,
                     gboolean writes, RankStoreDoneFunc checked, gpointer data)
{
  g_autoptr (GError) error = NULL;

  switch (rank_store_check_layout (handler->store, ctx, writes, &error, checked,
                                   data))
    {
    case RANK_LAYOUT_OK:
      return TRUE;
    case RANK_LAYOUT_REFUSED:
      checked (error, data);
      return FALSE;
    case RANK_LAYOUT_PENDING:
      break;
    }
  return FALSE;
}

void
handler_proceed (Call *call, void (*run) (Call *call))
{
  call->run = run;
  if (handler_layout_fits (call->handler, &call->ctx, call->writes,
                           layout_checked, call))
    run_call (call);
}

void
handler_checked (Call *call, const GError *error, void (*run) (Call *call))
{
  if (error != NULL)
    handler_reply_error (call, error);
  else
    handler_proceed (call, run);
}

gint64
handler_now (Call *call)
{
  if (!call->clock_read)
    {
      call->now_ms = call->handler->clock (call->handler->clock_data);
      call->clock_read = TRUE;
    }
  return call->now_ms;
}

void
handler_resolve_context (Call *call, RankContext *ctx, const char *board)
{
  RankHandler *handler = call->handler;

  rank_context_init (ctx, handler->config, board, handler_now (call),
                     call->start_us, handler->default_window_ms);
  if (ctx->options->read_from_replica && handler->cache != NULL)
    ctx->fresh_after_us = rank_read_cache_written_at (handler->cache, board);
}

void
handler_resolve (Call *call, const char *board)
{
  handler_resolve_context (call, &call->ctx, board);
}

gboolean
handler_resolve_read (Call *call, const char *board, gint64 periods_back,
                      gboolean window, GError **error)
{
  if (!rank_validate_board (board, error))
    return FALSE;
  handler_resolve (call, board);
  return rank_context_read_window (&call->ctx, periods_back, window, error);
}

gboolean
handler_window_data (gboolean window, gboolean with_data, GError **error)
{
  if (window && with_data)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_INVALID,
                   "with_data: a rolling window keeps no member data");
      return FALSE;
    }
  return TRUE;
}
