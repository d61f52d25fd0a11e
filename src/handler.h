/* handler.h -- the Ranking service's methods: decode the arguments,
 * validate, call the store, encode the result or the declared exception.
 *
 * The generated processor of c_glib 0.17 is synchronous: its handler must
 * return the result, which needs a blocked thread per call in flight. rankd
 * instead dispatches each call itself and answers when the store calls back,
 * so one event-loop thread carries thousands of calls. Arguments and results
 * are still the generated structs, read and written by the c_glib protocols.
 */
#ifndef RANK_HANDLER_H
#define RANK_HANDLER_H

#include <thrift/c_glib/protocol/thrift_protocol.h>
#include <thrift/c_glib/thrift_application_exception.h>

#include "store.h"

typedef struct _RankHandler RankHandler;

/* Where a call's reply goes: the connection it came from. */
typedef struct
{
  /* The protocol the reply is written to (then flushed by the handler). */
  ThriftProtocol *(*protocol) (gpointer conn);
  /* Called exactly once per dispatched call, after its reply is written
   * (reply_ok FALSE: writing it failed; close the connection). */
  void (*finished) (gpointer conn, gboolean reply_ok);
} RankReplySink;

typedef enum
{
  RANK_DISPATCH_PENDING, /* the store will answer; finished() follows */
  RANK_DISPATCH_FAILED,  /* the arguments did not decode: see error */
} RankDispatch;

/* Writes and sends a whole TApplicationException message: for unknown
 * methods, internal errors, and (from the server) calls whose arguments
 * do not decode. */
gboolean rank_handler_write_exception (ThriftProtocol *out, const char *method,
                                       gint32 seqid,
                                       ThriftApplicationExceptionError type,
                                       const char *message, GError **error);

RankHandler *rank_handler_new (RankStore *store, const RankReplySink *sink);
void rank_handler_free (RankHandler *handler);

/* Reads the arguments of method from in and starts the call. Unknown
 * methods and invalid arguments are answered at once: finished() may run
 * before this returns. */
RankDispatch rank_handler_dispatch (RankHandler *handler, gpointer conn,
                                    const char *method, gint32 seqid,
                                    ThriftProtocol *in, GError **error);

#endif /* RANK_HANDLER_H */
