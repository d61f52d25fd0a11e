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

#include "access.h"
#include "config.h"
#include "protocol.h"
#include "cache.h"
#include "store.h"

typedef struct _RankHandler RankHandler;

/* A call's reply is whole in the buffer it was given (ok), or could not be
 * encoded (!ok: the connection's reply stream is lost; close it). Called
 * exactly once per dispatched call. */
typedef void (*RankAnsweredFunc) (gpointer request, gboolean ok);

typedef enum
{
  RANK_DISPATCH_PENDING, /* the call will answer; answered() follows */
  RANK_DISPATCH_FAILED,  /* the arguments did not decode: see error */
} RankDispatch;

/* The time of a call, Unix ms (tests can give their own clock). */
typedef gint64 (*RankClockFunc) (gpointer data);

/* Calls use config's board options (a reference is kept; see
 * rank_handler_set_config) and default_window_ms for boards without a
 * dedup_window of their own. Replies are encoded in protocol, framed or
 * not, as the server's. */
RankHandler *rank_handler_new (RankStore *store, RankConfig *config,
                               gint64 default_window_ms,
                               RankProtocolKind protocol, gboolean framed,
                               RankAnsweredFunc answered);
void rank_handler_free (RankHandler *handler);

/* Reads of boards with read_cache options use cache (shared by the
 * workers; NULL: none) and writes drop what it holds of their boards. */
void rank_handler_set_cache (RankHandler *handler, RankReadCache *cache);

/* Calls decoded from now on take their time from clock (NULL: the real
 * one). */
void rank_handler_set_clock (RankHandler *handler, RankClockFunc clock,
                             gpointer data);

/* Calls decoded from now on use config (a reload); calls in flight finish
 * with the one they started with. */
void rank_handler_set_config (RankHandler *handler, RankConfig *config);

/* The configuration in force, the time by the handler's clock, and
 * --dedup-window (for boards without their own). */
RankConfig *rank_handler_config (RankHandler *handler);
gint64 rank_handler_now (RankHandler *handler);
gint64 rank_handler_default_window_ms (RankHandler *handler);

/* Reads the arguments of method from in and starts the call, which writes
 * its reply into reply (the caller's, kept until answered) and then calls
 * answered (request, ...). peer is who calls (kept until answered; NULL:
 * rankd itself, an in-process call). *reply_bound gets the most bytes that
 * reply can take. Unknown methods and invalid arguments are answered at once:
 * answered() may run before this returns. */
RankDispatch rank_handler_dispatch (RankHandler *handler, gpointer request,
                                    const RankPeer *peer, GByteArray *reply,
                                    const char *method, gint32 seqid,
                                    ThriftProtocol *in, gsize *reply_bound,
                                    GError **error);

/* Writes a whole TApplicationException message into reply: for calls
 * whose arguments do not decode. FALSE if it could not be encoded. */
gboolean rank_handler_write_exception (RankHandler *handler, GByteArray *reply,
                                       const char *method, gint32 seqid,
                                       ThriftApplicationExceptionError type,
                                       const char *message);

#endif /* RANK_HANDLER_H */
