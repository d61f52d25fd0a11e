/* thrift_fixes.c -- chain-up repairs for c_glib 0.17 finalizers
 * (see thrift_fixes.h).
 *
 * One wrapper serves every repaired class: it finds, walking up from the
 * object's class, the first class whose finalize is the wrapper, runs that
 * class's original finalize, then its parent's. None of the repaired classes
 * derives from another repaired class, which keeps the walk unambiguous.
 */
#include "thrift_fixes.h"

#include <thrift/c_glib/thrift_application_exception.h>
#include <thrift/c_glib/transport/thrift_buffered_transport.h>
#include <thrift/c_glib/transport/thrift_fd_transport.h>
#include <thrift/c_glib/transport/thrift_framed_transport.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>
#include <thrift/c_glib/transport/thrift_server_socket.h>
#include <thrift/c_glib/transport/thrift_socket.h>

typedef struct
{
  GType type;
  void (*original) (GObject *object);
} Repair;

static Repair repairs[7];
static gsize n_repairs;

static void chained_finalize (GObject *object);

static void
chained_finalize (GObject *object)
{
  GObjectClass *klass = G_OBJECT_GET_CLASS (object);

  while (klass != NULL && klass->finalize != chained_finalize)
    klass = g_type_class_peek_parent (klass);
  g_assert (klass != NULL);
  for (gsize i = 0; i < n_repairs; i++)
    if (repairs[i].type == G_TYPE_FROM_CLASS (klass))
      {
        repairs[i].original (object);
        G_OBJECT_CLASS (g_type_class_peek_parent (klass))->finalize (object);
        return;
      }
  g_assert_not_reached ();
}

static void
repair (GType type)
{
  GObjectClass *klass = g_type_class_ref (type); /* kept for the process */

  repairs[n_repairs].type = type;
  repairs[n_repairs].original = klass->finalize;
  n_repairs++;
  klass->finalize = chained_finalize;
}

void
rank_thrift_fixes_apply (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      repair (THRIFT_TYPE_APPLICATION_EXCEPTION);
      repair (THRIFT_TYPE_SOCKET);
      repair (THRIFT_TYPE_SERVER_SOCKET);
      repair (THRIFT_TYPE_BUFFERED_TRANSPORT);
      repair (THRIFT_TYPE_FRAMED_TRANSPORT);
      repair (THRIFT_TYPE_MEMORY_BUFFER);
      repair (THRIFT_TYPE_FD_TRANSPORT);
      g_once_init_leave (&once, 1);
    }
}
