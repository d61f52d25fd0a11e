/* thrift_fixes.h -- run-time repairs to the c_glib 0.17 library classes.
 *
 * Several library classes (the application exception, sockets, the
 * buffered, framed and memory transports) have finalize functions that do
 * not chain up to their parent, so GObject's own finalize never runs and
 * each instance leaks. rank_thrift_fixes_apply() wraps each such finalize so
 * that it chains up. Call it once, early in main, before any thread starts;
 * it is idempotent.
 *
 * It also gives the library's base classes the g_autoptr cleanups that
 * c_glib does not declare (rankd's own transports derive from them).
 */
#ifndef RANK_THRIFT_FIXES_H
#define RANK_THRIFT_FIXES_H

#include <thrift/c_glib/protocol/thrift_protocol.h>
#include <thrift/c_glib/transport/thrift_transport.h>

G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftTransport, g_object_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ThriftProtocol, g_object_unref)

void rank_thrift_fixes_apply (void);

#endif /* RANK_THRIFT_FIXES_H */
