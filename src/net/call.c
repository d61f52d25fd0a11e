/* call.c -- calls made in-process (rank_server_call, see server.h).
 *
 * The board viewer (http.c) reads boards through the same methods a Thrift
 * client reaches, without a socket and without the client library: the
 * arguments are encoded with the generated struct in the port's protocol,
 * a worker decodes and dispatches them as it would a connection's request
 * (rank_handler_dispatch over a request reader), and the reply, whole in
 * the port's framing and protocol, is decoded by the calling thread into
 * the generated result struct. So every board reads exactly as GetTopN
 * returns it, and each read is counted in the metrics as any call is.
 *
 * The caller waits on a condition variable, at most timeout_ms; a call it
 * gave up on still answers into its own buffers, which the last of the two
 * holders (caller, worker) frees. Calls are posted only while the workers
 * run (server->calls_open, under server->lock): one posted before the
 * loops stop runs in the loop, or in worker_clear's pending functions,
 * where freeing the Redis links answers it Unavailable.
 */
#include "server_private.h"

#include <string.h>

#include <thrift/c_glib/thrift_application_exception.h>

#include "constants.h"
#include "error.h"

struct _RankCall
{
  gint refs; /* atomic: the caller's, and the worker's until answered */
  Worker *worker;
  char *method;
  GByteArray *args;  /* the arguments struct, in the port's protocol */
  GByteArray *reply; /* the whole reply message, as the port sends it */

  GMutex lock;
  GCond cond;
  gboolean done; /* under lock */
  gboolean ok;   /* the reply is whole */
  GError *error; /* the arguments did not decode */
};

static void
call_unref (RankCall *call)
{
  if (!g_atomic_int_dec_and_test (&call->refs))
    return;
  g_free (call->method);
  g_byte_array_unref (call->args);
  g_byte_array_unref (call->reply);
  g_clear_error (&call->error);
  g_mutex_clear (&call->lock);
  g_cond_clear (&call->cond);
  g_free (call);
}

/* The worker is done with call: the caller wakes (if it still waits). */
static void
call_finish (RankCall *call, gboolean ok, GError *error)
{
  g_mutex_lock (&call->lock);
  call->ok = ok;
  call->error = error;
  call->done = TRUE;
  g_cond_signal (&call->cond);
  g_mutex_unlock (&call->lock);
  call_unref (call);
}

void
rank_call_answered (Request *r, gboolean ok)
{
  RankCall *call = r->call;

  call->worker->in_flight--;
  g_free (r);
  call_finish (call, ok, NULL);
}

/* In the worker's thread: the call is decoded and dispatched as a
 * connection's request would be. */
static void
call_run (gpointer data)
{
  RankCall *call = data;
  Worker *w = call->worker;
  const RankServerConfig *config = &w->server->config;
  GError *error = NULL;
  RankRequestReader *reader
      = rank_request_reader_new (FALSE, MAX (config->max_frame, 1));
  ThriftProtocol *in
      = rank_protocol_new (config->protocol, THRIFT_TRANSPORT (reader));
  Request *r = g_new0 (Request, 1);
  gsize bound = 0;

  r->call = call;
  r->reply = call->reply;
  rank_request_reader_feed (reader, call->args->data, call->args->len);
  w->in_flight++;
  /* answered() may run, and free r, before dispatch returns. */
  if (!rank_request_reader_begin (reader, &error)
      || rank_handler_dispatch (w->handler, r, NULL, r->reply, call->method, 0,
                                in, &bound, &error)
             == RANK_DISPATCH_FAILED)
    {
      w->in_flight--;
      g_free (r);
      if (error == NULL)
        g_set_error (&error, RANK_ERROR, RANK_ERROR_INTERNAL,
                     "%s: the arguments did not decode", call->method);
      call_finish (call, FALSE, error);
    }
  g_object_unref (in);
  g_object_unref (reader);
}

/* Encodes args as the arguments of a call (no message header). */
static gboolean
encode_args (RankServer *server, ThriftStruct *args, GByteArray *into,
             GError **error)
{
  RankReplyWriter *writer = rank_reply_writer_new (FALSE);
  ThriftProtocol *out
      = rank_protocol_new (server->config.protocol, THRIFT_TRANSPORT (writer));
  gboolean ok;

  rank_reply_writer_begin (writer, into);
  ok = thrift_struct_write (args, out, error) >= 0
       && thrift_transport_flush (THRIFT_TRANSPORT (writer), error);
  g_object_unref (out);
  g_object_unref (writer);
  return ok;
}

/* Reads the reply message of method into result, as a generated client's
 * recv does: a TApplicationException becomes an error in
 * THRIFT_APPLICATION_EXCEPTION_ERROR. */
static gboolean
decode_reply (RankServer *server, const char *method, GByteArray *reply,
              ThriftStruct *result, GError **error)
{
  RankRequestReader *reader
      = rank_request_reader_new (server->config.framed, RANK_REPLY_MAX_BYTES);
  ThriftProtocol *in
      = rank_protocol_new (server->config.protocol, THRIFT_TRANSPORT (reader));
  gchar *name = NULL;
  ThriftMessageType type = T_REPLY;
  gint32 seqid;
  gboolean ok = FALSE;

  rank_request_reader_feed (reader, reply->data, reply->len);
  if (!rank_request_reader_ready (reader, error)
      || !rank_request_reader_begin (reader, error)
      || thrift_protocol_read_message_begin (in, &name, &type, &seqid, error)
             < 0)
    ;
  else if (type == T_EXCEPTION)
    {
      ThriftApplicationException *x
          = g_object_new (THRIFT_TYPE_APPLICATION_EXCEPTION, NULL);

      if (thrift_struct_read (THRIFT_STRUCT (x), in, error) >= 0)
        g_set_error (error, THRIFT_APPLICATION_EXCEPTION_ERROR, x->type,
                     "application error: %s", x->message);
      g_object_unref (x);
    }
  else if (type != T_REPLY || g_strcmp0 (name, method) != 0)
    g_set_error (error, THRIFT_APPLICATION_EXCEPTION_ERROR,
                 THRIFT_APPLICATION_EXCEPTION_ERROR_INVALID_MESSAGE_TYPE,
                 "%s: a reply of type %d to %s", method, type,
                 name ? name : "?");
  else
    ok = thrift_struct_read (result, in, error) >= 0
         && thrift_protocol_read_message_end (in, error) >= 0;
  if (!ok && error != NULL && *error == NULL)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                 "%s: the reply did not decode", method);
  g_free (name);
  g_object_unref (in);
  g_object_unref (reader);
  return ok;
}

gboolean
rank_server_call (RankServer *server, const char *method, ThriftStruct *args,
                  ThriftStruct *result, int timeout_ms, GError **error)
{
  RankCall *call = g_new0 (RankCall, 1);
  gint64 deadline;
  gboolean done, ok = FALSE;

  g_atomic_int_set (&call->refs, 1);
  call->method = g_strdup (method);
  call->args = g_byte_array_new ();
  call->reply = g_byte_array_sized_new (256);
  g_mutex_init (&call->lock);
  g_cond_init (&call->cond);
  if (!encode_args (server, args, call->args, error))
    {
      call_unref (call);
      return FALSE;
    }

  g_mutex_lock (&server->lock);
  if (server->calls_open)
    {
      call->worker = &server->workers[server->next_call_worker++
                                      % server->config.io_threads];
      g_atomic_int_inc (&call->refs); /* the worker's */
      rank_loop_post (call->worker->loop, call_run, call);
    }
  g_mutex_unlock (&server->lock);
  if (call->worker == NULL)
    {
      g_set_error (error, RANK_ERROR, RANK_ERROR_UNAVAILABLE,
                   "rankd is not serving calls (starting or stopping)");
      call_unref (call);
      return FALSE;
    }

  deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  g_mutex_lock (&call->lock);
  while (!call->done && g_cond_wait_until (&call->cond, &call->lock, deadline))
    ;
  done = call->done;
  g_mutex_unlock (&call->lock);

  /* Once done, the worker has let go of call: its fields are ours. */
  if (!done)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                 "%s: no answer within %d ms", method, timeout_ms);
  else if (call->error != NULL)
    g_propagate_error (error, g_steal_pointer (&call->error));
  else if (!call->ok)
    g_set_error (error, RANK_ERROR, RANK_ERROR_INTERNAL,
                 "%s: the reply could not be encoded", method);
  else
    ok = decode_reply (server, method, call->reply, result, error);
  call_unref (call);
  return ok;
}

void
rank_server_close_calls (RankServer *server)
{
  g_mutex_lock (&server->lock);
  server->calls_open = FALSE;
  g_mutex_unlock (&server->lock);
}
